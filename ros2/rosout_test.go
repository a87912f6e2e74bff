//go:build ros2 && cgo

package ros2

import (
	"encoding/hex"
	"strconv"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// A logger teed into the rosout core reaches a ROS subscriber of /rosout
// as rcl_interfaces/Log: level, the node's logger name (a named logger
// under it), the message with its fields, the stamp; below the level,
// nothing.
func TestRosoutReachesAROSSubscriber(t *testing.T) {
	cfg := loopbackConfig(t)
	cfg.NodeName, cfg.Namespace = "zerohop_agent", "/robot1"
	p, err := NewParticipant(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	w, err := p.NewRosoutWriter(RosoutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	sub := startPeer(t, cfg, "sub", "log", "rt/rosout", "reliable", "2")
	sub.expect("MATCHED")
	pub := fields(sub.expect("PUBLICATION"))
	if pub["type"] != "rcl_interfaces::msg::dds_::Log_" || pub["userdata"] != "typehash="+hashLog+";" {
		t.Errorf("PUBLICATION %v", pub)
	}
	waitFor(t, "the rosout writer to match", func() bool { return w.Matched() == 1 })
	level := zap.NewAtomicLevelAt(zapcore.InfoLevel)
	log := zap.New(w.Core(level))
	log.Debug("below the level")
	before := time.Now()
	log.Warn("cmd_vel zeroed", zap.Duration("stale", 250*time.Millisecond))
	log.Named("gpu").Error("kernel failed", zap.String("why", "no device"))
	hx := func(s string) string { return hex.EncodeToString([]byte(s)) }
	for _, want := range []map[string]string{
		{"level": "30", "name": hx("robot1.zerohop_agent"), "msg": hx("cmd_vel zeroed stale=250ms")},
		{"level": "40", "name": hx("robot1.zerohop_agent.gpu"), "msg": hx(`kernel failed why="no device"`)},
	} {
		got := fields(sub.expect("SAMPLE"))
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s = %s, want %s (%v)", k, got[k], v, got)
			}
		}
		sec, _ := strconv.ParseInt(got["sec"], 10, 64)
		if d := time.Unix(sec, 0).Sub(before.Truncate(time.Second)); d < 0 || d > 5*time.Second {
			t.Errorf("stamp %s s, logged at %v", got["sec"], before)
		}
	}
	if w.Written() != 2 || w.Failed() != 0 {
		t.Errorf("written %d, failed %d", w.Written(), w.Failed())
	}
	w.Close()
	log.Error("after close") // dropped, counted nowhere, no panic
	if w.Written() != 2 {
		t.Errorf("written %d after close", w.Written())
	}
}
