//go:build ros2 && cgo

package ros2

import (
	"errors"
	"math"
	"strings"
	"testing"

	"go.uber.org/zap/zaptest"

	"github.com/zerohop/zerohop/ros2/tf"
)

// A base's driver publishes odom → base_link on /tf (RELIABLE, VOLATILE)
// and robot_state_publisher base_link → laser on /tf_static: the
// listener composes them at a time between two /tf messages, from their
// header stamps (the peer turns at 1 rad/s from 1700000100.0, a message
// every 20 ms of stamp time).
func TestTransformsFollowTFWithStamps(t *testing.T) {
	cfg := loopbackConfig(t)
	p, err := NewParticipant(cfg, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	trs, err := p.ListenTransforms(tf.BufferConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { trs.Close() })

	const start = 1700000100 * int64(1e9)
	// Before anything arrived: unknown frames, and the error says what
	// both topics saw.
	_, err = trs.LookupAt("odom", "laser", start)
	if !errors.Is(err, tf.ErrUnknownFrame) {
		t.Fatalf("lookup before any transform: %v, want an unknown frame", err)
	}
	for _, want := range []string{"/tf: 0 publisher(s), 0 message(s)", "/tf_static: 0 publisher(s)", "is the robot base's driver"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("lookup before any transform: %q does not say %q", err, want)
		}
	}

	static := startPeer(t, cfg, "static", "rt/tf_static", "base_link,laser,0.2,0,0.1,0,0,0,1")
	static.expect("WRITTEN")
	startPeer(t, cfg, "odom", "rt/tf", "1700000100", "20", "1000") // READY: writing

	at := start + 130e6 // between the 7th and 8th messages
	var tr tf.Transform
	waitFor(t, "odom → laser at 0.13 s", func() bool {
		tr, err = trs.LookupAt("odom", "laser", at)
		return err == nil
	})
	if _, _, yaw := tr.Rotation.RPY(); math.Abs(yaw-0.13) > 1e-9 {
		t.Errorf("yaw %.6f at 0.13 s, want 0.13 (1 rad/s, interpolated between stamps)", yaw)
	}
	want := [3]float64{0.2 * math.Cos(0.13), 0.2 * math.Sin(0.13), 0.1}
	for i := range want {
		if math.Abs(tr.Translation[i]-want[i]) > 1e-9 {
			t.Errorf("translation %v, want %v (the static mount turned with the base)", tr.Translation, want)
			break
		}
	}
	// Long before the first message: outside what /tf holds.
	if _, err := trs.LookupAt("odom", "laser", start-10e9); !errors.Is(err, tf.ErrExtrapolation) {
		t.Errorf("lookup 10 s before the first /tf: %v, want an extrapolation error", err)
	}
	if n := trs.Refused(); n != 0 {
		t.Errorf("%d transforms refused, want 0", n)
	}
}

// Reading /tf allocates nothing once its frames are known: the stream
// runs at up to 100 Hz for the life of the node.
func TestTFTakeInternsFrameNames(t *testing.T) {
	b := newTFBuffers()
	names := [][]byte{[]byte("odom"), []byte("base_link")}
	for _, n := range names {
		b.name(n)
	}
	if allocs := testing.AllocsPerRun(100, func() {
		for _, n := range names {
			if b.name(n) == "" {
				t.Fatal("empty name")
			}
		}
	}); allocs != 0 {
		t.Errorf("%v allocations per known frame name, want 0", allocs)
	}
	for i := range maxInternedFrames + 10 {
		b.name([]byte(strings.Repeat("f", i+1)))
	}
	if len(b.names) > maxInternedFrames {
		t.Errorf("%d names interned, want at most %d", len(b.names), maxInternedFrames)
	}
}
