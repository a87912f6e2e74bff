package camera

import (
	"context"
	"maps"
	"slices"
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

// A source without a stream gets no pool and no topic for it, and the
// topic is named absent with why, for the server's refusal.
func TestTopicsOfASourceWithoutAStream(t *testing.T) {
	for _, tc := range []struct {
		name   string
		sizes  PoolSizes
		topics []string
		absent map[string]string
	}{
		{"both", PoolSizes{Points: 16, ImageBytes: 64}, []string{PointsTopicName, ImageTopicName}, nil},
		{"LiDAR only", PoolSizes{Points: 16}, []string{PointsTopicName}, map[string]string{ImageTopicName: NoImageWhy}},
		{"images only", PoolSizes{ImageBytes: 64}, []string{ImageTopicName}, map[string]string{PointsTopicName: NoPointsWhy}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cam, err := New(Config{Source: tc.sizes, Slots: 4})
			if err != nil {
				t.Fatal(err)
			}
			defer cam.Close()
			var names []string
			for _, tp := range cam.Topics() {
				names = append(names, tp.Name)
			}
			if !slices.Equal(names, tc.topics) {
				t.Errorf("topics %q, want %q", names, tc.topics)
			}
			if got := cam.AbsentTopics(); !maps.Equal(got, tc.absent) {
				t.Errorf("absent %q, want %q", got, tc.absent)
			}
		})
	}
}
