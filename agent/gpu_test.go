package agent

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/zerohop/zerohop/gpu"
	"github.com/zerohop/zerohop/handles"
	"github.com/zerohop/zerohop/infer"
	"github.com/zerohop/zerohop/pinned"
	"github.com/zerohop/zerohop/telemetry"
	"github.com/zerohop/zerohop/voxel"
)

// errFakeCUDA is what fakeGPUFilter fails with.
var errFakeCUDA = errors.New("fake: CUDA_ERROR_LAUNCH_FAILED")

// fakeGPUFilter is a FAKE of gpu.VoxelFilter for the pipeline's plumbing:
// it runs the CPU filter and raster and writes the raster's bytes where
// the GPU would. It proves nothing about CUDA or the kernels (those are
// gpu/'s tests on a GPU machine).
type fakeGPUFilter struct {
	filter *voxel.Filter
	bev    *voxel.BEV
	raster []float32
	calls  int
	failAt int // the call (1-based) that fails with failErr; 0: none
	// failErr is failAt's error; nil: errFakeCUDA.
	failErr error
	broken  bool // every call fails with errFakeCUDA after the CPU work
	// during, if set, runs inside each call after the filtering, as the
	// wait for the GPU would; its error is the call's.
	during func() error
}

func newFakeGPUFilter(t *testing.T, leaf float32) *fakeGPUFilter {
	t.Helper()
	return fakeGPUFilterFor(t, voxel.Config{Leaf: [3]float32{leaf, leaf, leaf}}, 200_000)
}

// fakeGPUFilterFor is newFakeGPUFilter with the whole filter configuration.
func fakeGPUFilterFor(t *testing.T, cfg voxel.Config, maxPoints int) *fakeGPUFilter {
	t.Helper()
	filter, err := voxel.NewFilter(cfg, maxPoints)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { filter.Close() })
	bev, err := voxel.NewBEV(voxel.BEVConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return &fakeGPUFilter{filter: filter, bev: bev, raster: make([]float32, bev.Len())}
}

func (f *fakeGPUFilter) Run(in voxel.Cloud, out *voxel.Points, bev []byte) error {
	f.calls++
	if f.calls == f.failAt {
		out.P = out.P[:0]
		if f.failErr != nil {
			return f.failErr
		}
		return errFakeCUDA
	}
	if err := f.filter.Run(in, out); err != nil {
		return err
	}
	if f.broken {
		out.P = out.P[:0]
		return errFakeCUDA
	}
	if err := f.bev.Fill(out, f.raster); err != nil {
		return err
	}
	for i, v := range f.raster {
		binary.LittleEndian.PutUint32(bev[4*i:], math.Float32bits(v))
	}
	if f.during != nil {
		return f.during()
	}
	return nil
}

// gpuComposed is a pipeline whose GPU path is fake, with its BEV input
// over the bytes the fake writes, as RunNode wires the real one.
// rt may be nil, or another pipeline's runtime.
func gpuComposed(t *testing.T, fake *fakeGPUFilter, leaf float32, rt *infer.Runtime) *composed {
	t.Helper()
	return newComposedWith(t, composedOptions{leaf: leaf, gpu: fake, gpuBEV: make([]byte, 4*fake.bev.Len()), rt: rt})
}

func stageCount(t *testing.T, rec *telemetry.Recorder, name string) uint64 {
	t.Helper()
	for _, s := range rec.Snapshot().Stages {
		if s.Name == name {
			return s.SinceStart.Count
		}
	}
	t.Fatalf("no stage %q", name)
	return 0
}

// sameOutputs compares the model outputs of two pipelines bit for bit.
func sameOutputs(t *testing.T, seq uint64, got, want *composed) {
	t.Helper()
	for _, o := range []struct {
		name      string
		got, want []float32
	}{
		{"scores", got.sess.Scores(), want.sess.Scores()},
		{"clearance", got.sess.Clearance(), want.sess.Clearance()},
	} {
		for i := range o.want {
			if math.Float32bits(o.got[i]) != math.Float32bits(o.want[i]) {
				t.Fatalf("frame %d: %s[%d] = %v on the GPU path, %v on the CPU path", seq, o.name, i, o.got[i], o.want[i])
			}
		}
	}
}

func TestGPUPathFeedsTheModelWhatTheFilterWrote(t *testing.T) {
	cpu := newComposed(t)
	fake := newFakeGPUFilter(t, 0.2)
	g := gpuComposed(t, fake, 0.2, cpu.rt)
	if g.pipe.VoxelPath() != "gpu" || g.rec.Label(telemetry.LabelVoxelPath) != "gpu" {
		t.Fatalf("voxel path %q, label %q; want gpu", g.pipe.VoxelPath(), g.rec.Label(telemetry.LabelVoxelPath))
	}
	var h handles.Handle
	for seq := uint64(0); seq < 4; seq++ {
		cpu.step(t, seq, &h)
		g.step(t, seq, &h)
		// The BEV input is all zeros unless the session reads the bytes
		// the GPU filter wrote: then the outputs would differ.
		sameOutputs(t, seq, g, cpu)
	}
	if fake.calls != 4 {
		t.Fatalf("GPU filter called %d times for 4 frames", fake.calls)
	}
	if n := stageCount(t, g.rec, "voxel"); n != 4 {
		t.Fatalf("voxel stage recorded %d times, want 4", n)
	}
	if n := stageCount(t, g.rec, "bev"); n != 0 {
		t.Fatalf("bev stage recorded %d times on the GPU path (it is inside voxel there), want 0", n)
	}
	if n := g.rec.Count(telemetry.FramesProcessed); n != 4 {
		t.Fatalf("%d frames processed, want 4", n)
	}
}

// gpuFailingOnce is a CPU pipeline and one whose fake GPU filter fails its
// failAt-th call with failErr (nil: errFakeCUDA), logging to logs.
func gpuFailingOnce(t *testing.T, failAt int, failErr error) (cpu, g *composed, fake *fakeGPUFilter, logs *observer.ObservedLogs) {
	t.Helper()
	cpu = newComposed(t)
	fake = newFakeGPUFilter(t, 0.2)
	fake.failAt, fake.failErr = failAt, failErr
	g = gpuComposed(t, fake, 0.2, cpu.rt)
	core, logs := observer.New(zap.InfoLevel)
	g.pipe.log = zap.New(core)
	return cpu, g, fake, logs
}

func TestGPUFailureMovesToTheCPUWithoutLosingTheFrame(t *testing.T) {
	cpu, g, fake, logs := gpuFailingOnce(t, 3, nil)
	var h handles.Handle
	for seq := uint64(0); seq < 6; seq++ {
		cpu.step(t, seq, &h)
		g.step(t, seq, &h)
		sameOutputs(t, seq, g, cpu)
		want := "gpu"
		if seq >= 2 {
			want = "cpu"
		}
		if got := g.pipe.VoxelPath(); got != want {
			t.Fatalf("after frame %d: voxel path %q, want %q", seq, got, want)
		}
	}
	if fake.calls != 3 {
		t.Fatalf("GPU filter called %d times; after its failure on call 3 it must not be called again", fake.calls)
	}
	if g.pipe.GPUFailures() != 1 || g.rec.Label(telemetry.LabelVoxelPath) != "cpu" {
		t.Fatalf("failures %d, label %q; want 1, cpu", g.pipe.GPUFailures(), g.rec.Label(telemetry.LabelVoxelPath))
	}
	if n := g.rec.Count(telemetry.FramesProcessed); n != 6 {
		t.Fatalf("%d of 6 frames processed: the failing frame must be filtered on the CPU", n)
	}
	if n := stageCount(t, g.rec, "bev"); n != 4 {
		t.Fatalf("bev stage recorded %d times, want 4 (frames 2..5 on the CPU)", n)
	}
	lines := logs.FilterMessageSnippet("GPU voxel filter failed").All()
	if len(lines) != 1 || !strings.Contains(lines[0].ContextMap()["error"].(string), "CUDA_ERROR_LAUNCH_FAILED") {
		t.Fatalf("want one log line naming the CUDA error, got %v", lines)
	}
	if g.cam.Pool(0).InUse() != 0 || g.cam.Pool(1).InUse() != 0 {
		t.Fatal("the pipeline leaked slots")
	}
}

// TestCloudTooLargeForTheGPUBufferKeepsTheGPUPath: a cloud the GPU path
// cannot copy in (gpu.ErrInputTooLarge: a wide point step, staged or
// --gpu-input copy) is filtered on the CPU, counted and logged once, and
// the next frame is on the GPU again.
func TestCloudTooLargeForTheGPUBufferKeepsTheGPUPath(t *testing.T) {
	cpu, g, fake, logs := gpuFailingOnce(t, 2,
		fmt.Errorf("cloud of 4000000 bytes (125000 points × 32) exceeds the input copy buffer of 2000000 bytes: %w", gpu.ErrInputTooLarge))
	var h handles.Handle
	for seq := uint64(0); seq < 4; seq++ {
		cpu.step(t, seq, &h)
		g.step(t, seq, &h)
		sameOutputs(t, seq, g, cpu)
		if got := g.pipe.VoxelPath(); got != "gpu" {
			t.Fatalf("after frame %d: voxel path %q, want gpu", seq, got)
		}
	}
	if fake.calls != 4 || g.pipe.GPUFailures() != 0 || g.pipe.GPUOversize() != 1 {
		t.Fatalf("GPU filter called %d times, %d failures, %d oversize; want 4, 0, 1", fake.calls, g.pipe.GPUFailures(), g.pipe.GPUOversize())
	}
	if n := stageCount(t, g.rec, "bev"); n != 1 {
		t.Fatalf("bev stage recorded %d times, want 1 (the oversize frame, on the CPU)", n)
	}
	if lines := logs.FilterMessageSnippet("too large for the GPU input buffer").All(); len(lines) != 1 {
		t.Fatalf("%d log lines about the oversize cloud, want 1", len(lines))
	}
}

func TestCloudTheCPURefusesTooKeepsTheGPUPath(t *testing.T) {
	// A leaf so small that the synthetic scene's grid overflows 64-bit
	// keys: both filters refuse the cloud, which is the data's fault.
	const leaf = 1e-6
	fake := newFakeGPUFilter(t, leaf)
	g := gpuComposed(t, fake, leaf, nil)
	var h handles.Handle
	g.step(t, 0, &h)
	if fake.calls != 1 {
		t.Fatalf("GPU filter called %d times", fake.calls)
	}
	if g.pipe.GPUFailures() != 0 || g.pipe.VoxelPath() != "gpu" {
		t.Fatalf("failures %d, path %q: a cloud the CPU refuses too must not end the GPU path", g.pipe.GPUFailures(), g.pipe.VoxelPath())
	}
	if g.rec.Count(telemetry.FramesDropped) != 1 || g.rec.Count(telemetry.FramesProcessed) != 0 {
		t.Fatalf("dropped %d, processed %d; want 1, 0", g.rec.Count(telemetry.FramesDropped), g.rec.Count(telemetry.FramesProcessed))
	}
	if ok, reason := g.pipe.cfg.Watchdog.Check(time.Now()); ok || !strings.Contains(reason, "voxel") {
		t.Fatalf("watchdog ok=%t %q: it must hold the voxel stage's failure", ok, reason)
	}
}

func TestGPUPathFrameAllocatesNothing(t *testing.T) {
	g := gpuComposed(t, newFakeGPUFilter(t, 0.2), 0.2, nil)
	var h handles.Handle
	for seq := uint64(0); seq < 5; seq++ {
		g.step(t, seq, &h)
	}
	seq := uint64(5)
	allocs := testing.AllocsPerRun(20, func() {
		g.step(t, seq, &h)
		seq++
	})
	switch {
	case raceEnabled:
		// 2 here under -race (the race runtime's sync.Pool drops items),
		// 0 without; make test runs this test both ways.
		t.Logf("-race: %.1f allocations per frame not judged", allocs)
	case allocs != 0:
		t.Fatalf("a frame on the (fake) GPU path allocates %.1f times, want 0", allocs)
	}
}

// On the GPU path the image is preprocessed while the GPU filters the
// cloud: the (fake) GPU's wait sees the preprocessing finish before it
// returns, which in line it never could. Outputs stay the CPU path's, and
// a frame still allocates nothing.
func TestGPUPathPreprocessesWhileTheGPUFilters(t *testing.T) {
	cpu := newComposed(t)
	fake := newFakeGPUFilter(t, 0.2)
	g := gpuComposed(t, fake, 0.2, cpu.rt)
	prepped := make(chan struct{}, 1)
	g.pipe.prepDone = func() { prepped <- struct{}{} }
	overlapped := 0
	fake.during = func() error {
		select {
		case <-prepped:
			overlapped++
			return nil
		case <-time.After(5 * time.Second):
			return errors.New("the image was not preprocessed while the GPU ran")
		}
	}
	stop := g.pipe.startPrepOverlap()
	defer stop()
	var h handles.Handle
	for seq := uint64(0); seq < 4; seq++ {
		cpu.step(t, seq, &h)
		g.step(t, seq, &h)
		sameOutputs(t, seq, g, cpu)
	}
	if overlapped != 4 || g.pipe.GPUFailures() != 0 {
		t.Fatalf("%d of 4 frames overlapped, %d GPU failures", overlapped, g.pipe.GPUFailures())
	}
	if n := stageCount(t, g.rec, "preprocess"); n != 4 {
		t.Fatalf("preprocess recorded %d times, want 4", n)
	}
	// The test's hooks allocate (time.After); the pipeline must not. The
	// channels order these writes before the goroutine's next read.
	fake.during, g.pipe.prepDone = nil, nil
	seq := uint64(4)
	allocs := testing.AllocsPerRun(10, func() { g.step(t, seq, &h); seq++ })
	switch {
	case raceEnabled:
		// 1 to 3 here under -race (the race runtime's sync.Pool drops
		// items), 0 without; make test runs this test both ways.
		t.Logf("-race: %.1f allocations per overlapped frame not judged", allocs)
	case allocs != 0:
		t.Fatalf("an overlapped frame allocates %.1f times, want 0", allocs)
	}
}

func TestNewRefusesAGPUBEVOfTheWrongSize(t *testing.T) {
	fake := newFakeGPUFilter(t, 0.2)
	c := gpuComposed(t, fake, 0.2, nil)
	cfg := c.pipe.cfg
	cfg.GPUBEV = cfg.GPUBEV[:len(cfg.GPUBEV)-4]
	if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), "BEV") {
		t.Fatalf("New with a short GPU BEV buffer: %v", err)
	}
}

// fakePinner and fakeAllocator are FAKES of the GPU's pool hooks, for the
// best-effort wrappers' plumbing only.
type fakePinner struct {
	fail  error
	pins  int
	unpin int
}

type fakeRegion struct{ p *fakePinner }

func (r fakeRegion) Unpin() error { r.p.unpin++; return nil }

func (p *fakePinner) Pin([]byte, pinned.Access) (pinned.PinnedRegion, error) {
	p.pins++
	if p.fail != nil {
		return nil, p.fail
	}
	return fakeRegion{p}, nil
}

type fakeAllocator struct {
	fail  error
	freed int
}

func (a *fakeAllocator) Allocate(size int) ([]byte, error) {
	if a.fail != nil {
		return nil, a.fail
	}
	return make([]byte, size), nil
}

func (a *fakeAllocator) Free([]byte) error { a.freed++; return nil }

func TestBestEffortPinnerNeverFailsAMapping(t *testing.T) {
	var reports []error
	fp := &fakePinner{fail: errors.New("fake: CUDA_ERROR_NOT_SUPPORTED")}
	b := &bestEffortPinner{pinner: fp, report: func(err error) { reports = append(reports, err) }}
	// Through a real pool, as the camera and subscriber use it.
	for range 2 {
		p, err := pinned.New(pinned.Geometry{SlotCount: 2, SlotSize: 64}, pinned.Options{Name: "t", Pinner: b})
		if err != nil {
			t.Fatalf("a failed GPU registration failed the pool: %v", err)
		}
		p.Close()
	}
	if fp.pins != 2 || len(reports) != 1 || !strings.Contains(reports[0].Error(), "NOT_SUPPORTED") {
		t.Fatalf("pins %d, reports %v: want 2 tries and one report naming the error", fp.pins, reports)
	}
	ok := &fakePinner{}
	b = &bestEffortPinner{pinner: ok, report: func(err error) { t.Errorf("reported %v", err) }}
	p, err := pinned.New(pinned.Geometry{SlotCount: 2, SlotSize: 64}, pinned.Options{Name: "t", Pinner: b})
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
	if ok.pins != 1 || ok.unpin != 1 {
		t.Fatalf("working pinner: %d pins, %d unpins; want 1, 1", ok.pins, ok.unpin)
	}
}

func TestBestEffortAllocatorFallsBackAndFreesEachWhereItCameFrom(t *testing.T) {
	var reports int
	gpuMem := &fakeAllocator{fail: errors.New("fake: CUDA_ERROR_OUT_OF_MEMORY")}
	fallback := &fakeAllocator{}
	b := &bestEffortAllocator{gpu: gpuMem, fallback: fallback, report: func(error) { reports++ }}
	a, err := b.Allocate(4096)
	if err != nil || len(a) != 4096 {
		t.Fatalf("fallback allocation: %d bytes, %v", len(a), err)
	}
	gpuMem.fail = nil
	g, err := b.Allocate(4096)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Free(a); err != nil {
		t.Fatal(err)
	}
	if err := b.Free(g); err != nil {
		t.Fatal(err)
	}
	if fallback.freed != 1 || gpuMem.freed != 1 || reports != 1 {
		t.Fatalf("freed fallback %d, gpu %d, reports %d; want 1, 1, 1", fallback.freed, gpuMem.freed, reports)
	}
	// Through a real in-process pool with the real fallback.
	gpuMem.fail = errors.New("fake: CUDA_ERROR_OUT_OF_MEMORY")
	b = &bestEffortAllocator{gpu: gpuMem, fallback: pinned.AnonymousMemory(), report: func(error) {}}
	p, err := pinned.New(pinned.Geometry{SlotCount: 2, SlotSize: 64}, pinned.Options{Name: "t", Allocator: b})
	if err != nil {
		t.Fatalf("a failed pinned allocation failed the pool: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestStartGPUModes(t *testing.T) {
	_, noDriver := gpu.Open()
	cases := []struct {
		name    string
		cfg     NodeConfig
		wantErr string // "" : no error
		wantWhy string
	}{
		{"an unknown mode", NodeConfig{GPU: "maybe"}, `--gpu "maybe"`, ""},
		{"an unknown input", NodeConfig{GPUInput: "teleport"}, `--gpu-input "teleport"`, ""},
		{"off", NodeConfig{GPU: GPUOff}, "", "--gpu off"},
	}
	if noDriver != nil {
		// Here (no CUDA driver) auto falls back and on refuses, both naming
		// the library; where a driver is present these cases do not apply.
		cases = append(cases,
			struct {
				name    string
				cfg     NodeConfig
				wantErr string
				wantWhy string
			}{"auto without a driver", NodeConfig{}, "", gpu.DriverSoname},
			struct {
				name    string
				cfg     NodeConfig
				wantErr string
				wantWhy string
			}{"on without a driver", NodeConfig{GPU: GPUOn}, gpu.DriverSoname, ""})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Leaf, tc.cfg.MaxPoints = 0.2, 1000
			g, device, why, err := startGPU(tc.cfg, voxel.BEVConfig{}, zap.NewNop())
			if g != nil {
				g.Close()
				t.Fatal("the GPU path started")
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one naming %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(why, tc.wantWhy) || device == "" {
				t.Fatalf("why %q (device %q), want it to name %q", why, device, tc.wantWhy)
			}
		})
	}
}

// hangingGPUFilter is a FAKE GPU filter whose first Run blocks until
// released: a hung GPU, for the stall guard. hungAt (read after entered
// is closed) is when it began to hang.
type hangingGPUFilter struct {
	*fakeGPUFilter
	entered, release chan struct{}
	hungAt           time.Time
	once             sync.Once
}

func (h *hangingGPUFilter) Run(in voxel.Cloud, out *voxel.Points, bev []byte) error {
	h.once.Do(func() {
		h.hungAt = time.Now()
		close(h.entered)
		<-h.release
	})
	return h.fakeGPUFilter.Run(in, out, bev)
}

// newHung is a composed pipeline (watchdog period: the default if 0) on
// a hangingGPUFilter. Its pairing waits up to a second for a cloud's
// image, so that a loaded machine cannot leave the frame unpaired: the
// frame must reach the stage that hangs.
func newHung(t *testing.T, watchdog time.Duration) (*composed, *hangingGPUFilter) {
	t.Helper()
	fake := newFakeGPUFilter(t, 0.2)
	hang := &hangingGPUFilter{fakeGPUFilter: fake, entered: make(chan struct{}), release: make(chan struct{})}
	g := newComposedWith(t, composedOptions{gpu: hang, gpuBEV: make([]byte, 4*fake.bev.Len()), watchdog: watchdog})
	g.pipe.cfg.PairTolerance = time.Second
	return g, hang
}

func TestStallGuardZeroesWhileAStageHangs(t *testing.T) {
	g, hang := newHung(t, 0)
	core, logs := observer.New(zap.WarnLevel)
	g.pipe.log = zap.New(core)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.pipe.Run(ctx) }()
	var unhang sync.Once
	defer func() {
		unhang.Do(func() { close(hang.release) }) // a failed check must not leave Run stuck
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	var h handles.Handle
	if err := g.cam.Frame(0, g.inproc, &h); err != nil {
		t.Fatal(err)
	}
	select {
	case <-hang.entered:
	case <-time.After(5 * time.Second):
		t.Fatal("the pipeline never reached the GPU filter")
	}
	hungAt := hang.hungAt
	// The pipeline goroutine is stuck in the filter: only the guard can
	// publish now, and it must, within the watchdog timeout and a tick.
	deadline := hungAt.Add(3 * time.Second)
	for g.pipe.Stalls() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if g.pipe.Stalls() != 1 {
		t.Fatalf("no stall answered %v after the filter hung", time.Since(hungAt))
	}
	zeros := 0
	for _, c := range g.sink.since(hungAt) {
		if !c.cmd.IsZero() {
			t.Fatalf("non-zero command %+v while the stage hung", c.cmd)
		}
		zeros++
		// A bound with slack for a loaded -race run: the guard ticks every
		// Tick and answers once the stage is past the watchdog timeout.
		if took := c.at.Sub(hungAt); took > g.pipe.cfg.Watchdog.Timeout()+g.pipe.cfg.Tick+time.Second {
			t.Errorf("zero published %v after the hang, want within the watchdog timeout and a tick", took)
		}
	}
	if zeros != 1 {
		t.Fatalf("%d zero commands during the hang, want exactly 1", zeros)
	}
	if lines := logs.FilterMessageSnippet("pipeline stalled").All(); len(lines) != 1 || lines[0].ContextMap()["stage"] != "voxel" {
		t.Fatalf("want one stall log line naming the voxel stage, got %v", lines)
	}
	// How long the stage has run, on the monotonic clock the guard uses
	// (a wall-minus-monotonic mix once logged some 57 years).
	if d, _ := logs.FilterMessageSnippet("pipeline stalled").All()[0].ContextMap()["running_for"].(time.Duration); d <= 0 || d > time.Minute {
		t.Fatalf("stall line running_for = %v, want the stage's time so far", d)
	}
	released := time.Now()
	unhang.Do(func() { close(hang.release) })
	// The late frame's command is stale: zero too. Then frames flow again.
	deadline = time.Now().Add(3 * time.Second)
	for len(g.sink.since(released)) == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if late := g.sink.since(released); len(late) == 0 || !late[0].cmd.IsZero() {
		t.Fatalf("first command after the hung frame finished: %+v; want zero (its frame is stale)", late)
	}
	for seq := uint64(1); seq < 40 && g.rec.Count(telemetry.FramesProcessed) < 3; seq++ {
		if err := g.cam.Frame(seq, g.inproc, &h); err != nil {
			t.Fatal(err)
		}
		time.Sleep(30 * time.Millisecond)
	}
	if n := g.rec.Count(telemetry.FramesProcessed); n < 3 {
		t.Fatalf("%d frames processed after the hang ended", n)
	}
	if g.pipe.Stalls() != 1 {
		t.Fatalf("%d stalls, want 1", g.pipe.Stalls())
	}
}
