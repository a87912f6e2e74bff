package agent

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

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

// invalidatingGPUFilter is the FAKE GPU filter (fakeGPUFilter) that runs
// during, when set, in the middle of each call: the stages' reads are then
// done, and Valid is what the pipeline asks next.
type invalidatingGPUFilter struct {
	*fakeGPUFilter
	during func()
}

func (f *invalidatingGPUFilter) Run(in voxel.Cloud, out *voxel.Points, bev []byte) error {
	err := f.fakeGPUFilter.Run(in, out, bev)
	if f.during != nil {
		f.during()
	}
	return err
}

// newInvalidating is a composed pipeline on the invalidatingGPUFilter,
// logging to the returned observer.
func newInvalidating(t *testing.T) (*composed, *invalidatingGPUFilter, *observer.ObservedLogs) {
	fake := newFakeGPUFilter(t, 0.2)
	f := &invalidatingGPUFilter{fakeGPUFilter: fake}
	g := newComposedWith(t, composedOptions{gpu: f, gpuBEV: make([]byte, 4*fake.bev.Len()), watchdog: slowStepWatchdog})
	core, logs := observer.New(zap.InfoLevel)
	g.pipe.log = zap.New(core)
	return g, f, logs
}

// TestEachReclaimIncidentIsLogged: frames whose leases go invalid during
// the stages are dropped; a run of them is one incident and one log line,
// and after a frame that is planned the next one is a new incident with a
// line of its own.
func TestEachReclaimIncidentIsLogged(t *testing.T) {
	g, f, logs := newInvalidating(t)
	var h handles.Handle
	for seq, invalidate := range []bool{true, true, false, true} {
		if err := g.cam.Frame(uint64(seq), g.inproc, &h); err != nil {
			t.Fatal(err)
		}
		l := <-g.inproc.C(TopicPoints)
		f.during = nil
		if invalidate {
			// A released copy makes the pipeline's lease invalid, as the
			// camera's reclaim and reuse of the slot does.
			f.during = func() { l.Release() }
		}
		g.pipe.frame(l)
	}
	if d, n := g.rec.Count(telemetry.FramesDropped), g.rec.Count(telemetry.FramesProcessed); d != 3 || n != 1 {
		t.Fatalf("%d frames dropped and %d processed, want 3 and 1", d, n)
	}
	lines := logs.FilterMessageSnippet("camera connection ended while the stages read its slots").Len()
	if lines != 2 {
		t.Fatalf("%d reclaim lines for two incidents (frames 0–1, frame 3), want 2", lines)
	}
}

// TestReclaimWhileStoppingIsQuiet: on SIGINT the subscriber's connection
// closes with the context and the camera reclaims the slots of the frame
// in its stages. That frame is dropped without a warning or a stage
// failure (2 of 5 Ctrl-C's logged both, as if something had broken).
func TestReclaimWhileStoppingIsQuiet(t *testing.T) {
	g, f, logs := newInvalidating(t)
	ctx, cancel := context.WithCancel(context.Background())
	g.pipe.runDone = ctx.Done() // as Run sets it
	var h handles.Handle
	if err := g.cam.Frame(0, g.inproc, &h); err != nil {
		t.Fatal(err)
	}
	l := <-g.inproc.C(TopicPoints)
	f.during = func() { cancel(); l.Release() } // SIGINT, then the reclaim
	g.pipe.frame(l)
	if d, n := g.rec.Count(telemetry.FramesDropped), g.rec.Count(telemetry.FramesProcessed); d != 1 || n != 0 {
		t.Fatalf("%d frames dropped and %d processed, want 1 and 0", d, n)
	}
	if w := logs.FilterLevelExact(zap.WarnLevel).All(); len(w) != 0 {
		t.Errorf("warnings while stopping: %v", w)
	}
	if ok, why := g.pipe.cfg.Watchdog.Check(time.Now()); !ok {
		t.Errorf("watchdog after a reclaim while stopping: %q, want no incident", why)
	}
	for _, c := range g.sink.since(time.Time{}) {
		if !c.cmd.IsZero() {
			t.Fatalf("a command from reclaimed slots: %+v", c.cmd)
		}
	}
}
