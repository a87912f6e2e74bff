//go:build ros2 && cgo

package ros2

import (
	"strconv"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/zerohop/zerohop/planner"
)

// Under use_sim_time a command is stamped with the simulation's time, the
// last /clock, as an rclcpp node stamps with now(); before the first
// /clock that is time 0, {0, 0}. Stamping allocates nothing.
func TestTwistStampedFollowsSimClock(t *testing.T) {
	cfg := loopbackConfig(t)
	p, err := NewParticipant(cfg, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	sim, err := p.FollowSimClock()
	if err != nil {
		t.Fatal(err)
	}
	defer sim.Close()
	if !sim.Now().IsZero() {
		t.Fatalf("Now %v before any /clock, want the zero time", sim.Now())
	}
	if _, err := p.NewTwistSink(TwistOptions{Topic: "/plain", Clock: sim.Now}); err == nil {
		t.Error("a clock for plain Twist was accepted")
	}
	if _, err := p.NewTwistSink(TwistOptions{Topic: "/both", Stamped: true, ZeroStamp: true, Clock: sim.Now}); err == nil {
		t.Error("a zero stamp and a clock together were accepted")
	}
	sink, err := p.NewTwistSink(TwistOptions{Topic: "/cmd_vel", Stamped: true, Clock: sim.Now})
	if err != nil {
		t.Fatal(err)
	}
	sub := startPeer(t, cfg, "sub", "twist_stamped", "rt/cmd_vel", "reliable", "2")
	sub.expect("MATCHED")
	waitFor(t, "the publisher to match the peer", func() bool { return sink.Matched() == 1 })
	frame := time.Unix(1700000000, 5) // this machine's clock: never the stamp under sim time
	if err := sink.PublishTwist(planner.Twist{LinearX: 0.25}, frame); err != nil {
		t.Fatal(err)
	}
	if s := fields(sub.expect("SAMPLE")); s["sec"] != "0" || s["nanosec"] != "0" {
		t.Errorf("before /clock: stamp %s.%s, want 0.0", s["sec"], s["nanosec"])
	}

	startPeer(t, cfg, "clock", "rt/clock", "1000", "20")
	waitFor(t, "the first /clock", func() bool { return !sim.Now().IsZero() })
	if sim.Received() == 0 {
		t.Error("a /clock was taken but not counted")
	}
	// The status goroutine may report the match after the first sample.
	waitFor(t, "the clock publisher's match", func() bool { return sim.Matched() == 1 })
	if err := sink.PublishTwist(planner.Twist{LinearX: 0.25}, frame); err != nil {
		t.Fatal(err)
	}
	at := sim.Now()
	s := fields(sub.expect("SAMPLE"))
	sec, err := strconv.Atoi(s["sec"])
	if err != nil || sec < 1000 || int64(sec) > at.Unix() || s["nanosec"] != "500000000" {
		t.Errorf("stamp %s.%s, want the simulation's time, 1000.5 to %d.5", s["sec"], s["nanosec"], at.Unix())
	}
	if a := testing.AllocsPerRun(100, func() { sink.PublishTwist(planner.Twist{LinearX: 0.25}, frame) }); a != 0 {
		t.Errorf("a publish stamped by the sim clock allocates %.1f times", a)
	}
}

// A simulation reset (or a bag played again) takes the clock back: Now
// follows it, and it is logged once.
func TestSimClockGoesBackWithTheSimulation(t *testing.T) {
	cfg := loopbackConfig(t)
	core, logs := observer.New(zap.InfoLevel)
	p, err := NewParticipant(cfg, zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	sim, err := p.FollowSimClock()
	if err != nil {
		t.Fatal(err)
	}
	defer sim.Close()
	first := startPeer(t, cfg, "clock", "rt/clock", "5000", "20")
	waitFor(t, "the first simulation's clock", func() bool { return sim.Now().Unix() >= 5000 })
	first.stop()
	startPeer(t, cfg, "clock", "rt/clock", "100", "20")
	waitFor(t, "the clock to go back", func() bool { s := sim.Now().Unix(); return s >= 100 && s < 5000 })
	// The line is written just after the time is stored: wait for it,
	// then check that it came once.
	waitFor(t, "the 'went back' line", func() bool { return logs.FilterMessageSnippet("went back").Len() > 0 })
	if n := logs.FilterMessageSnippet("went back").Len(); n != 1 {
		t.Errorf("%d 'went back' lines, want 1", n)
	}
	if n := logs.FilterMessageSnippet("following the simulation's clock").Len(); n != 1 {
		t.Errorf("%d 'following' lines, want 1", n)
	}
}
