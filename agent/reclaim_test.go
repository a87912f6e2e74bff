package agent

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/zerohop/zerohop/handles"
	"github.com/zerohop/zerohop/telemetry"
	"github.com/zerohop/zerohop/voxel"
)

// reclaimingGPUFilter is the FAKE GPU filter (fakeGPUFilter) that, once,
// has the camera reclaim every slot the agent holds while the stages run:
// reclaim is what the camera does when the agent's connection drops.
type reclaimingGPUFilter struct {
	*fakeGPUFilter
	reclaim func()
	once    sync.Once
}

func (r *reclaimingGPUFilter) Run(in voxel.Cloud, out *voxel.Points, bev []byte) error {
	err := r.fakeGPUFilter.Run(in, out, bev)
	r.once.Do(r.reclaim)
	return err
}

// TestFrameWhoseSlotsWereReclaimedIsNotPlanned: the camera takes the
// frame's slots back mid-stages (they may already hold a later frame); the
// frame is dropped, not planned, and no command comes from it.
func TestFrameWhoseSlotsWereReclaimedIsNotPlanned(t *testing.T) {
	fake := newFakeGPUFilter(t, 0.2)
	r := &reclaimingGPUFilter{fakeGPUFilter: fake}
	g := newComposedWith(t, composedOptions{gpu: r, gpuBEV: make([]byte, 4*fake.bev.Len())})
	r.reclaim = func() { g.inproc.Close() }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.pipe.Run(ctx) }()
	defer func() { cancel(); <-done }()
	start := time.Now()
	var h handles.Handle
	if err := g.cam.Frame(0, g.inproc, &h); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); g.rec.Count(telemetry.FramesDropped) == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the frame was not dropped: processed %d, dropped %d", g.rec.Count(telemetry.FramesProcessed), g.rec.Count(telemetry.FramesDropped))
		}
	}
	if n := g.rec.Count(telemetry.FramesProcessed); n != 0 {
		t.Fatalf("%d frames processed from reclaimed slots", n)
	}
	for _, c := range g.sink.since(start) {
		if !c.cmd.IsZero() {
			t.Fatalf("a command from reclaimed slots: %+v", c.cmd)
		}
	}
}
