package camera

import (
	"context"
	"testing"
	"time"

	"github.com/zerohop/zerohop/handles"
	"github.com/zerohop/zerohop/pinned"
	"github.com/zerohop/zerohop/sensor"
)

// stallingSource is a one-point, image-less source whose frame stallAt
// takes stall to fill (a paused or starved camera process).
type stallingSource struct {
	stallAt uint64
	stall   time.Duration
}

func (s *stallingSource) MaxPoints() int     { return 1 }
func (s *stallingSource) MaxImageBytes() int { return 0 }
func (s *stallingSource) Frames() uint64     { return 0 }
func (s *stallingSource) FillImage(uint64, []byte) (sensor.ImageInfo, error) {
	return sensor.ImageInfo{}, nil
}
func (s *stallingSource) FillPoints(seq uint64, dst []byte) (int, error) {
	if seq == s.stallAt {
		time.Sleep(s.stall)
	}
	clear(dst[:sensor.PointStep])
	return 1, nil
}

// nobody is a Publisher without subscribers.
type nobody struct{}

func (nobody) Publish(int, pinned.Slot, *handles.Handle) (int, error) { return 0, nil }

// TestLateCountsEveryMissedTick: a frame that takes 25 periods (the camera
// paused, or starved of CPU) misses about 25 ticks. The ticker keeps only
// one of them pending, and only that one was counted: after 20 × 1 s
// SIGSTOP at 30 Hz a soak read late 0.
func TestLateCountsEveryMissedTick(t *testing.T) {
	const period = 10 * time.Millisecond
	c, err := New(Config{Source: &stallingSource{stallAt: 3, stall: 25 * period}, Rate: float64(time.Second / period), Frames: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Run(context.Background(), nobody{}); err != nil {
		t.Fatal(err)
	}
	if late := c.Stats().Late; late < 20 {
		t.Fatalf("late %d after a frame that took 25 periods; want about 25", late)
	}
}
