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

// TestTwistSinkWarnsWhenTheLastCommandIsNotAcknowledged: at shutdown the
// last command (zero) must reach the base. A subscriber that stalls (here
// stopped with SIGSTOP) does not take it, and Close said nothing: the log
// read last_was_zero true while the base kept moving. A warning says so
// now; a subscriber that takes it gets none.
func TestTwistSinkWarnsWhenTheLastCommandIsNotAcknowledged(t *testing.T) {
	for _, stall := range []bool{false, true} {
		t.Run(map[bool]string{false: "subscriber running", true: "subscriber stalled"}[stall], func(t *testing.T) {
			cfg := loopbackConfig(t)
			core, logs := observer.New(zapcore.InfoLevel)
			p, err := NewParticipant(cfg, zap.New(core))
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			sink, err := p.NewTwistSink(TwistOptions{Topic: "/zh_ack_test_cmd_vel"})
			if err != nil {
				t.Fatal(err)
			}
			peer := startPeer(t, cfg, "sub", "twist", "rt/zh_ack_test_cmd_vel", "reliable", "2")
			peer.expect("MATCHED")
			waitFor(t, "the subscriber matched", func() bool { return sink.Matched() == 1 })
			if err := sink.PublishTwist(planner.Twist{LinearX: 0.5}, time.Now()); err != nil {
				t.Fatal(err)
			}
			peer.expect("SAMPLE")
			if stall {
				peer.pause()
			}
			if err := sink.PublishTwist(planner.Twist{}, time.Now()); err != nil {
				t.Fatal(err)
			}
			if err := sink.Close(); err != nil {
				t.Fatal(err)
			}
			warned := logs.FilterMessageSnippet("the last cmd_vel was not acknowledged").Len()
			if stall && warned != 1 || !stall && warned != 0 {
				t.Fatalf("%d warnings about an unacknowledged last command with the subscriber stalled %t; the log:\n%v", warned, stall, logs.All())
			}
		})
	}
}
