//go:build ros2 && cgo

package ros2

import (
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/zerohop/zerohop/planner"
)

// TestTwistSinkSaysCommandsFlow: with --ros2 the agent's commands go to
// ROS 2, not to the log, so a user without ROS tools could not tell that
// anything went out. One line says when the first moving command was
// published, one at Close how many went out and whether the last was zero;
// zeros before the first moving command and the commands after it add no
// lines.
func TestTwistSinkSaysCommandsFlow(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	p, err := NewParticipant(loopbackConfig(t), zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	sink, err := p.NewTwistSink(TwistOptions{Topic: "/zh_log_test_cmd_vel"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []planner.Twist{{}, {}, {LinearX: 0.5, AngularZ: 0.25}, {LinearX: 0.6}, {}} {
		if err := sink.PublishTwist(c, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	first := logs.FilterMessage("ros2: first moving cmd_vel published").All()
	if len(first) != 1 || first[0].ContextMap()["linear_x"] != 0.5 || first[0].ContextMap()["topic"] != "/zh_log_test_cmd_vel" {
		t.Fatalf("want one line for the first moving command (linear_x 0.5), got %v", first)
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	closing := logs.FilterMessage("ros2: closing the cmd_vel publisher").All()
	if len(closing) != 1 {
		t.Fatalf("want one closing line, got %v", logs.All())
	}
	if f := closing[0].ContextMap(); f["commands_sent"] != uint64(5) || f["moving"] != uint64(2) || f["last_was_zero"] != true {
		t.Errorf("closing line %v: want 5 commands sent, 2 moving, the last zero", f)
	}
}
