package agent

import (
	"strings"
	"testing"
	"time"

	"github.com/zerohop/zerohop/handles"
	"github.com/zerohop/zerohop/telemetry"
)

// The pairing tolerance takes 0 (the default) or 1 ms up to half the
// watchdog period, at start and while running; a refused value leaves
// the one in force; once the model turns out to take no image, every
// change is refused, saying so.
func TestPairTuning(t *testing.T) {
	if _, err := NewPairTuning(150*time.Millisecond, 0); err == nil || !strings.Contains(err.Error(), "--pair-tolerance 150ms: want 1ms up to half the watchdog period, 100ms") {
		t.Errorf("150ms under the default watchdog: %v", err)
	}
	p, err := NewPairTuning(0, 30*time.Millisecond)
	if err != nil || p.InForce() != 15*time.Millisecond {
		t.Fatalf("the default under a 30 ms watchdog: %v, %v; want 15ms", p.InForce(), err)
	}
	for _, tc := range []struct {
		seconds float64
		want    time.Duration // in force after; 0: refused, 15ms kept
	}{
		{0.01, 10 * time.Millisecond},
		{0, 15 * time.Millisecond},
		{0.015, 15 * time.Millisecond},
		{0.0005, 0},
		{0.016, 0},
		{-0.01, 0},
		{1e300, 0},
	} {
		err := p.Set(tc.seconds)
		if (err == nil) != (tc.want != 0) || (tc.want != 0 && p.InForce() != tc.want) || (tc.want == 0 && p.InForce() != 15*time.Millisecond) {
			t.Errorf("Set(%v): %v, in force %v; want %v", tc.seconds, err, p.InForce(), tc.want)
		}
		if tc.want == 0 {
			p.Set(0.015) // back to the start for the next row
		}
	}
	p.notUsed("the model takes no image")
	if err := p.Set(0.01); err == nil || !strings.Contains(err.Error(), "pair_tolerance is not used: the model takes no image") {
		t.Errorf("Set on a LiDAR-only agent: %v", err)
	}
}

// A change while the pipeline runs applies from the next cloud: images
// stamped 30 ms after their clouds are dropped under 20 ms and planned
// once the tolerance is 50 ms.
func TestPairToleranceChangesWhileRunning(t *testing.T) {
	c := newComposedWith(t, composedOptions{watchdog: slowStepWatchdog})
	pairing, err := NewPairTuning(0, slowStepWatchdog)
	if err != nil {
		t.Fatal(err)
	}
	c.pipe.cfg.Pairing = pairing
	pub := imageSkewPublisher{c.inproc, 30 * time.Millisecond}
	var h handles.Handle
	step := func(seq uint64) {
		if err := c.cam.Frame(seq, pub, &h); err != nil {
			t.Fatal(err)
		}
		c.pipe.frame(<-c.inproc.C(TopicPoints))
	}
	step(0)
	if c.rec.Count(telemetry.FramesProcessed) != 0 || c.pipe.Unpaired() != 1 {
		t.Fatalf("20 ms: %d processed, %d unpaired; want 0, 1", c.rec.Count(telemetry.FramesProcessed), c.pipe.Unpaired())
	}
	if err := pairing.Set(0.05); err != nil {
		t.Fatal(err)
	}
	step(1)
	step(2)
	if c.rec.Count(telemetry.FramesProcessed) != 2 || c.pipe.Unpaired() != 1 {
		t.Fatalf("50 ms: %d processed, %d unpaired; want 2, 1", c.rec.Count(telemetry.FramesProcessed), c.pipe.Unpaired())
	}
	c.pipe.dropImage()
}
