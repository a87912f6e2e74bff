package agent

import (
	"strings"
	"testing"
	"time"

	"github.com/zerohop/zerohop/handles"
	"github.com/zerohop/zerohop/pinned"
	"github.com/zerohop/zerohop/telemetry"
)

// A LiDAR-only pipeline plans every cloud without an image: no image pool
// exists, nothing waits for one, and a frame allocates nothing.
func TestLidarOnlyFramePlansWithoutImagesAndAllocatesNothing(t *testing.T) {
	c := newComposedWith(t, composedOptions{lidarOnly: true})
	if c.cam.Pool(TopicImage) != nil {
		t.Fatal("the scene without a camera has an image pool")
	}
	if c.pipe.images {
		t.Fatal("the pipeline of a model without an image input pairs images")
	}
	var h handles.Handle
	for seq := uint64(0); seq < 5; seq++ { // warm up
		c.step(t, seq, &h)
	}
	seq := uint64(5)
	start := time.Now()
	allocs := testing.AllocsPerRun(20, func() {
		c.step(t, seq, &h)
		seq++
	})
	if allocs != 0 {
		t.Fatalf("a LiDAR-only frame (voxel, BEV, infer, plan) allocates %.1f times, want 0", allocs)
	}
	if got := c.rec.Count(telemetry.FramesProcessed); got != 26 {
		t.Fatalf("%d frames processed, want all 26 (dropped %d)", got, c.rec.Count(telemetry.FramesDropped))
	}
	if n := len(c.sink.since(start)); n < 21 {
		t.Fatalf("%d commands for 21 frames", n)
	}
	if c.cam.Pool(TopicPoints).InUse() != 0 {
		t.Fatal("the pipeline leaked cloud slots")
	}
}

// The LiDAR-only model sees the rendered obstacle: its sectors' clearance
// drops below their mirror sectors', and scores are clearance/8 (no image
// penalty to subtract).
func TestLidarOnlyModelReactsToTheObstacle(t *testing.T) {
	c := newComposedWith(t, composedOptions{lidarOnly: true})
	var h handles.Handle
	const rate = 30.0
	sectorOf := func(y, x float64) int {
		deg := 57.29577951308232 * atan2(y, x)
		return min(max(int((deg+40)/10+0.5), 0), 8)
	}
	for _, sec := range []float64{1.5, 4.5} {
		seq := uint64(sec * rate)
		c.step(t, seq, &h)
		truth := c.src.Truth(seq)
		scores, clear := c.sess.Scores(), c.sess.Clearance()
		obs := sectorOf(truth.Obstacle.Center.Y, truth.Obstacle.Center.X)
		if !(clear[obs] < clear[8-obs]) {
			t.Errorf("t=%vs: obstacle in sector %d: clearance %v, mirror sector %d %v; want lower", sec, obs, clear[obs], 8-obs, clear[8-obs])
		}
		for k := range scores {
			if d := scores[k] - clear[k]/8; d > 1e-6 || d < -1e-6 {
				t.Fatalf("t=%vs: sector %d score %v, clearance/8 %v", sec, k, scores[k], clear[k]/8)
			}
		}
	}
}

// imageSkewPublisher stamps the images skew later than their clouds, as a
// camera driver on an offset clock or a LiDAR stamping its scan's start.
type imageSkewPublisher struct {
	next interface {
		Publish(int, pinned.Slot, *handles.Handle) (int, error)
	}
	skew time.Duration
}

func (s imageSkewPublisher) Publish(topic int, slot pinned.Slot, h *handles.Handle) (int, error) {
	if topic == TopicImage {
		h.CaptureNs += int64(s.skew)
	}
	return s.next.Publish(topic, slot, h)
}

// Clouds whose images are stamped 30 ms off are dropped under the default
// 20 ms tolerance and planned under a 50 ms one (--pair-tolerance).
func TestPairToleranceDecidesWhichImagesPair(t *testing.T) {
	for _, tc := range []struct {
		tolerance time.Duration
		planned   bool
	}{{DefaultPairTolerance, false}, {50 * time.Millisecond, true}} {
		t.Run(tc.tolerance.String(), func(t *testing.T) {
			c := newComposedWith(t, composedOptions{watchdog: slowStepWatchdog})
			c.pipe.cfg.PairTolerance = tc.tolerance
			pub := imageSkewPublisher{c.inproc, 30 * time.Millisecond}
			var h handles.Handle
			for seq := range uint64(3) {
				if err := c.cam.Frame(seq, pub, &h); err != nil {
					t.Fatal(err)
				}
				c.pipe.frame(<-c.inproc.C(TopicPoints))
			}
			processed, dropped := c.rec.Count(telemetry.FramesProcessed), c.rec.Count(telemetry.FramesDropped)
			if tc.planned && (processed != 3 || dropped != 0) || !tc.planned && (processed != 0 || dropped != 3) {
				t.Fatalf("tolerance %v, images 30 ms after their clouds: %d processed, %d dropped; want all %s",
					tc.tolerance, processed, dropped, map[bool]string{true: "processed", false: "dropped"}[tc.planned])
			}
			if want := map[bool]uint64{true: 0, false: 3}[tc.planned]; c.pipe.Unpaired() != want {
				t.Fatalf("%d clouds counted unpaired, want %d", c.pipe.Unpaired(), want)
			}
			// An image newer than the dropped cloud stays held for the next.
			c.pipe.dropImage()
			if c.cam.Pool(TopicImage).InUse() != 0 || c.cam.Pool(TopicPoints).InUse() != 0 {
				t.Fatal("slots left leased")
			}
		})
	}
}

// The default tolerance fits any watchdog period from 1 ms on (half of
// it when 20 ms would be more), a given one is kept, and a short
// watchdog is not refused for the default's sake; a LiDAR-only model
// pairs nothing, so its tolerance is not checked.
func TestPairToleranceDefaultFitsTheWatchdog(t *testing.T) {
	for _, tc := range []struct{ tolerance, watchdog, want time.Duration }{
		{0, 200 * time.Millisecond, 20 * time.Millisecond},
		{0, 30 * time.Millisecond, 15 * time.Millisecond},
		{0, time.Millisecond, 500 * time.Microsecond},
		{35 * time.Millisecond, 200 * time.Millisecond, 35 * time.Millisecond},
	} {
		if got := PairToleranceFor(tc.tolerance, tc.watchdog); got != tc.want {
			t.Errorf("PairToleranceFor(%v, %v) = %v, want %v", tc.tolerance, tc.watchdog, got, tc.want)
		}
	}
	for _, cfg := range []NodeConfig{
		{Watchdog: 30 * time.Millisecond},
		{Watchdog: time.Millisecond},
		{Watchdog: 30 * time.Millisecond, PairTolerance: 100 * time.Millisecond, LidarOnly: true},
	} {
		if err := CheckNodeConfig(cfg); err != nil {
			t.Errorf("watchdog %v, pair tolerance %v, LiDAR only %v: %v", cfg.Watchdog, cfg.PairTolerance, cfg.LidarOnly, err)
		}
	}
	if err := CheckNodeConfig(NodeConfig{Watchdog: 30 * time.Millisecond, PairTolerance: 20 * time.Millisecond}); err == nil ||
		!strings.Contains(err.Error(), "--pair-tolerance 20ms") || !strings.Contains(err.Error(), "15ms") {
		t.Errorf("a given 20 ms under a 30 ms watchdog: %v; want refused naming the flag and 15ms", err)
	}
}
