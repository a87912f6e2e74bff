package agent

import (
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/zerohop/zerohop/handles"
	"github.com/zerohop/zerohop/sensor"
	"github.com/zerohop/zerohop/telemetry"
	"github.com/zerohop/zerohop/voxel"
)

// openGPUForTest starts the agent's GPU path as RunNode does (device 0 of
// whatever libcuda.so.1 the process finds) or fails the test.
func openGPUForTest(t *testing.T) *gpuVoxel {
	t.Helper()
	core, logs := observer.New(zap.InfoLevel)
	g, err := openGPUVoxel(gpuVoxelConfig{Filter: voxel.Config{Leaf: [3]float32{0.2, 0.2, 0.2}}, MaxPoints: 200_000,
		CacheDir: t.TempDir(), Log: zap.New(core)})
	if err != nil {
		t.Fatalf("the GPU path did not start: %v", err)
	}
	passed := logs.FilterMessageSnippet("self-check passed").All()
	if len(passed) != 1 {
		t.Fatalf("the GPU path started without its self-check passing once: %v", logs.All())
	}
	t.Logf("GPU path on %s; %s %v", g.name, passed[0].Message, passed[0].ContextMap())
	// Registered before the pipeline that uses it, so that this runs after
	// that pipeline's cleanups (camera pools, session) are done with its
	// memory.
	t.Cleanup(func() {
		if err := g.Close(); err != nil {
			t.Errorf("close the GPU path: %v", err)
		}
	})
	return g
}

// gpuPipelineMatchesCPU runs the scene through g's filter (camera pools in
// the GPU's pinned memory, BEV written by the kernels into the model's
// input) and through the CPU path, frames frames with mapped and then with
// copied input: the model outputs must agree bit for bit, the GPU path
// must stay on, and a GPU frame must allocate nothing.
func gpuPipelineMatchesCPU(t *testing.T, g *gpuVoxel, scene sensor.SyntheticConfig, frames int) {
	cpu := newComposedWith(t, composedOptions{synth: scene})
	gp := newComposedWith(t, composedOptions{gpu: g.filter, gpuBEV: g.bev, rt: cpu.rt, allocator: g.ctx, synth: scene})
	var h handles.Handle
	seq := uint64(0)
	for _, copyInput := range []bool{false, true} {
		g.filter.SetCopyInput(copyInput)
		for range frames {
			cpu.step(t, seq, &h)
			gp.step(t, seq, &h)
			sameOutputs(t, seq, gp, cpu)
			seq++
		}
		if gp.pipe.VoxelPath() != "gpu" || gp.pipe.GPUFailures() != 0 {
			t.Fatalf("copy input %t: voxel path %q after %d GPU failures", copyInput, gp.pipe.VoxelPath(), gp.pipe.GPUFailures())
		}
		tm := g.filter.Timing()
		t.Logf("copy input %t: last frame %d voxels, device time %v (copy %v)", copyInput, len(gp.pipe.pts.P), tm.Total, tm.Copy)
	}
	if n := gp.rec.Count(telemetry.FramesProcessed); n != seq {
		t.Fatalf("%d of %d frames processed", n, seq)
	}
	for _, s := range gp.rec.Snapshot().Stages {
		if s.Name == "voxel" {
			t.Logf("GPU voxel+BEV stage (wall): p50 %.0f µs, p99 %.0f µs, max %.0f µs over %d frames", s.SinceStart.P50, s.SinceStart.P99, s.SinceStart.Max, s.SinceStart.Count)
		}
	}
	for _, s := range cpu.rec.Snapshot().Stages {
		if s.Name == "voxel" || s.Name == "bev" {
			t.Logf("CPU %s stage: p50 %.0f µs, p99 %.0f µs over %d frames", s.Name, s.SinceStart.P50, s.SinceStart.P99, s.SinceStart.Count)
		}
	}
	allocs := testing.AllocsPerRun(3, func() {
		gp.step(t, seq, &h)
		seq++
	})
	switch {
	case raceEnabled:
		t.Logf("-race: %.1f allocations per GPU frame not judged (purego's sync.Pool drops items under -race)", allocs)
	case allocs != 0:
		t.Errorf("a frame on the GPU path allocates %.1f times, want 0", allocs)
	}
}
