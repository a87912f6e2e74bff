package agent

import (
	"testing"
	"time"

	"github.com/zerohop/zerohop/handles"
	"github.com/zerohop/zerohop/pinned"
)

// imageDropper publishes clouds and drops images (aborting their slots):
// an image stream that stopped.
type imageDropper struct {
	next interface {
		Publish(int, pinned.Slot, *handles.Handle) (int, error)
	}
	images *pinned.Pool
}

func (d imageDropper) Publish(topic int, slot pinned.Slot, h *handles.Handle) (int, error) {
	if topic == TopicImage {
		d.images.Abort(slot)
		return 0, nil
	}
	return d.next.Publish(topic, slot, h)
}

// A cloud that waits for its image (up to --pair-tolerance, here half
// the watchdog period) while the newest planned frame goes stale must not
// hold back the watchdog's zero: the Run loop, which times it, is blocked
// in the wait. It came a whole tolerance late (about 1.45 s after the
// last planned frame with a 1 s watchdog), found in review.
func TestWaitForAnImageDoesNotDelayTheWatchdogsZero(t *testing.T) {
	const watchdog, tolerance = time.Second, 500 * time.Millisecond
	// Scheduling on a loaded 2-core machine under -race; without the fix
	// the zero comes 450 ms past the watchdog period.
	const slack = 300 * time.Millisecond
	g := newComposedWith(t, composedOptions{watchdog: watchdog})
	g.pipe.cfg.PairTolerance, g.pipe.cfg.Tick = tolerance, 10*time.Second
	last := runAndFeed(t, g, 10)
	var h handles.Handle
	// The image stream stops; one more cloud comes just before the last
	// planned frame goes stale, and waits for an image that never comes.
	time.Sleep(time.Until(last.Add(watchdog - 50*time.Millisecond)))
	if err := g.cam.Frame(10, imageDropper{g.inproc, g.cam.Pool(TopicImage)}, &h); err != nil {
		t.Fatal(err)
	}
	var moving, zeroAt time.Time
	for deadline := time.Now().Add(3 * time.Second); zeroAt.IsZero() && time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		for _, c := range g.sink.since(time.Time{}) {
			if !c.cmd.IsZero() {
				moving = c.at
			} else if !moving.IsZero() && c.at.After(last) {
				zeroAt = c.at
				break
			}
		}
	}
	if moving.IsZero() || zeroAt.IsZero() {
		t.Fatalf("commands: %+v; want moving ones, then zero", g.sink.since(time.Time{}))
	}
	if d := zeroAt.Sub(last); d > watchdog+slack {
		t.Fatalf("zero %v after the last planned frame's capture; watchdog %v (a cloud waited up to %v for its image)", d, watchdog, tolerance)
	}
	// The cloud's wait ends a tolerance after it came, unpaired.
	for deadline := time.Now().Add(2 * time.Second); g.pipe.Unpaired() != 1; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d clouds unpaired, want the last one", g.pipe.Unpaired())
		}
	}
}
