package agent

// The agent's GPU path end to end on the FAKE CUDA driver and NVRTC
// (gpu/fakecuda): a child test process finds them under the real sonames
// through LD_LIBRARY_PATH, so RunNode's own start-up (gpu.Open, NVRTC, the
// kernels, the pinned BEV input, registering the camera's pools) runs
// unchanged. Plumbing only: it proves nothing about CUDA or a GPU (make
// gpu-check does), but it catches wiring mistakes without one.

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/zerohop/zerohop/gpu"
	"github.com/zerohop/zerohop/gpu/fakecuda"
	"github.com/zerohop/zerohop/internal/childproc/childproctest"
	"github.com/zerohop/zerohop/internal/sockdir"
	"github.com/zerohop/zerohop/voxel"
)

const envFakeCUDAChild = "ZEROHOP_AGENT_TEST_FAKE_CUDA"

func TestFakeCUDAAgent(t *testing.T) {
	if os.Getenv(envFakeCUDAChild) == "1" {
		fakeCUDAChild(t)
		return
	}
	requireORT(t)
	libs, err := fakecuda.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	// A bound for a hung child, not a speed claim: it takes 122 s alone
	// under -race here, and passed 180 s in make test beside other
	// packages' tests (killed at 3 minutes in two fresh-clone runs).
	runTestChild(t, "TestFakeCUDAAgent", libs.Dir, envFakeCUDAChild, 6*time.Minute)
}

const envFakeCUDANoNVRTCChild = "ZEROHOP_AGENT_TEST_FAKE_CUDA_NO_NVRTC"

// TestFakeCUDAAgentWithoutNVRTC: a driver without NVRTC (a container with
// only the driver mounted) still gets the GPU path, on the embedded PTX.
func TestFakeCUDAAgentWithoutNVRTC(t *testing.T) {
	if os.Getenv(envFakeCUDANoNVRTCChild) == "1" {
		fakeCUDANoNVRTCChild(t)
		return
	}
	requireORT(t)
	libs, err := fakecuda.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	driverOnly := t.TempDir()
	if err := os.Symlink(libs.Driver, filepath.Join(driverOnly, "libcuda.so.1")); err != nil {
		t.Fatal(err)
	}
	// No NVRTC found whatever the machine has installed: $ZEROHOP_NVRTC=none.
	t.Setenv(gpu.EnvNVRTC, gpu.NVRTCNone)
	runTestChild(t, "TestFakeCUDAAgentWithoutNVRTC", driverOnly, envFakeCUDANoNVRTCChild, 3*time.Minute)
}

func fakeCUDANoNVRTCChild(t *testing.T) {
	requireORT(t)
	if nv, err := gpu.OpenNVRTC(); err == nil {
		t.Fatalf("$%s=%s, yet OpenNVRTC loaded %s", gpu.EnvNVRTC, gpu.NVRTCNone, nv.Soname())
	}
	t.Run("pipeline outputs equal the CPU path's", func(t *testing.T) {
		g := openGPUForTest(t)
		if !strings.Contains(g.name, "fake") || g.filter.Target() != gpu.EmbeddedTarget {
			t.Fatalf("device %q, kernels for %q; want the fake driver running the embedded PTX (%s)", g.name, g.filter.Target(), gpu.EmbeddedTarget)
		}
		gpuPipelineMatchesCPU(t, g, smallScene, 2)
	})
	t.Run("composed node", func(t *testing.T) {
		composedFakeCUDANode(t, filepath.Join(os.Getenv("LD_LIBRARY_PATH"), "libcuda.so.1"), gpu.EmbeddedTarget, false)
	})
}

// runTestChild runs test name again in a child process that finds the
// libraries of libDir under their sonames (LD_LIBRARY_PATH is read only
// at process start) and has childEnv=1, and fails unless it passes.
func runTestChild(t *testing.T, name, libDir, childEnv string, timeout time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^"+name+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), "LD_LIBRARY_PATH="+libDir, childEnv+"=1")
	childproctest.LockForPdeathsig(cmd)
	out, err := cmd.CombinedOutput()
	t.Logf("child with LD_LIBRARY_PATH=%s:\n%s", libDir, out)
	if err != nil || !strings.Contains(string(out), "--- PASS: "+name) {
		t.Fatalf("child: %v", err)
	}
}

func fakeCUDAChild(t *testing.T) {
	requireORT(t)
	driver := filepath.Join(os.Getenv("LD_LIBRARY_PATH"), "libcuda.so.1")
	live := func(kind int) uint64 {
		n, err := fakecuda.Live(driver, kind)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	t.Run("pipeline outputs equal the CPU path's", func(t *testing.T) {
		g := openGPUForTest(t)
		if !strings.Contains(g.name, "fake") {
			t.Fatalf("device %q: not the fake driver (LD_LIBRARY_PATH %q)", g.name, os.Getenv("LD_LIBRARY_PATH"))
		}
		gpuPipelineMatchesCPU(t, g, smallScene, 2)
	})
	t.Run("self-check with --max-points below its cloud", func(t *testing.T) {
		core, logs := observer.New(zap.InfoLevel)
		g, err := openGPUVoxel(gpuVoxelConfig{Filter: voxel.Config{Leaf: [3]float32{0.2, 0.2, 0.2}, MinPoints: 5}, MaxPoints: 1000,
			CacheDir: t.TempDir(), Log: zap.New(core)})
		if err != nil {
			t.Fatalf("the GPU path did not start with --max-points 1000 --min-points 5: %v", err)
		}
		defer g.Close()
		passed := logs.FilterMessageSnippet("self-check passed").All()
		if len(passed) != 1 || passed[0].ContextMap()["points"] != int64(1000) || passed[0].ContextMap()["voxels"].(int64) == 0 {
			t.Fatalf("want one self-check passed on 1000 points with voxels to compare: %v", logs.All())
		}
	})
	t.Run("self-check on the model's raster, not the default one", func(t *testing.T) {
		// Shape, cell, min_x_m and max_height_m from a model config, the
		// ground from --lidar-height 1.73.
		bevCfg := voxel.BEVConfig{H: 64, W: 96, Cell: 0.5, MinX: -6.4, MaxHeight: 2, GroundZ: -1.73}
		filter, err := filterConfig(NodeConfig{Leaf: 0.2}, bevCfg)
		if err != nil {
			t.Fatal(err)
		}
		core, logs := observer.New(zap.InfoLevel)
		g, err := openGPUVoxel(gpuVoxelConfig{Filter: filter, BEV: bevCfg, MaxPoints: 20_000, CacheDir: t.TempDir(), Log: zap.New(core)})
		if err != nil {
			t.Fatalf("the GPU path did not start with a 64 × 96 raster of 0.5 m cells from 6.4 m behind, ground 1.73 m down: %v", err)
		}
		defer g.Close()
		if want := 3 * 64 * 96 * 4; g.filter.BEVBytes() != want || len(g.bevF) != want/4 {
			t.Errorf("GPU raster of %d bytes (%d floats), want %d: the model's 3 × 64 × 96", g.filter.BEVBytes(), len(g.bevF), want)
		}
		passed := logs.FilterMessageSnippet("self-check passed").All()
		if len(passed) != 1 || passed[0].ContextMap()["voxels"].(int64) == 0 {
			t.Fatalf("want one self-check passed with voxels to compare: %v", logs.All())
		}
	})
	t.Run("NVRTC that cannot compile for the device: the embedded PTX", func(t *testing.T) {
		nvrtc := filepath.Join(filepath.Dir(driver), "libnvrtc.so.13")
		if err := fakecuda.SetNVRTCArchs(nvrtc, 52, 60, 61); err != nil {
			t.Fatal(err)
		}
		defer fakecuda.SetNVRTCArchs(nvrtc)
		g := openGPUForTest(t)
		if g.filter.Target() != gpu.EmbeddedTarget {
			t.Fatalf("kernels for %q with an NVRTC for sm_52…sm_61 only; want the embedded %s", g.filter.Target(), gpu.EmbeddedTarget)
		}
		gpuPipelineMatchesCPU(t, g, smallScene, 1)
	})
	t.Run("node subscribed to a camera process that restarts, --gpu on", func(t *testing.T) {
		fakeCUDANode(t, driver, live, 2, 2)
	})
	t.Run("node whose camera pools cannot be registered stages them", func(t *testing.T) {
		t.Setenv("ZEROHOP_FAKECUDA_FAIL_REGISTER", "1")
		fakeCUDANode(t, driver, live, 0, 0)
	})
	t.Run("composed node, camera pools in cuMemHostAlloc'd memory", func(t *testing.T) {
		composedFakeCUDANode(t, driver, "sm_90", false)
	})
	t.Run("composed LiDAR-only node: the GPU path without images", func(t *testing.T) {
		composedFakeCUDANode(t, driver, "sm_90", true)
	})
}

// composedFakeCUDANode runs RunNode --gpu on with the synthetic camera in
// process until two frames are processed, and checks that the camera's
// pools are in the GPU's pinned memory, the GPU path stayed on with the
// kernels wantKernels (/latency's gpu_kernels), and nothing is left in the
// fake driver afterwards. lidarOnly: --lidar-only (one camera pool, no
// image preprocessing beside the GPU).
func composedFakeCUDANode(t *testing.T, driver, wantKernels string, lidarOnly bool) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hostAllocs := uint64(0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- RunNode(ctx, NodeConfig{Camera: "synthetic", Rate: 10, Beams: smallScene.Beams,
			AzimuthSteps: smallScene.AzimuthSteps, Listener: ln, Sink: &recordingSink{},
			Threads: 1, Providers: "cpu", GPU: GPUOn, GPUSync: "block", CubinCache: t.TempDir(), Watchdog: 5 * time.Second, LidarOnly: lidarOnly})
	}()
	// The emulation is slow, under -race slower still.
	var flags uint64
	lat := waitFrames(t, ln.Addr().String(), done, 2, 90*time.Second, func() {
		n, err := fakecuda.Live(driver, fakecuda.LiveHostAllocs)
		if err != nil {
			t.Fatal(err)
		}
		hostAllocs = n
		if flags, err = fakecuda.Live(driver, fakecuda.PrimaryFlags); err != nil {
			t.Fatal(err)
		}
	})
	if flags != 4 {
		t.Errorf("--gpu-sync block: the primary context's flags are %d, want 4 (CU_CTX_SCHED_BLOCKING_SYNC)", flags)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// Two camera pools (one without images), the BEV input and the
	// filter's host block.
	wantAllocs, wantInputs := uint64(4), "lidar+camera"
	if lidarOnly {
		wantAllocs, wantInputs = 3, "lidar"
	}
	if hostAllocs < wantAllocs || lat.VoxelPath != "gpu" || lat.GPUKernels != wantKernels || lat.Counters["gpu_voxel_failures_total"] != 0 || lat.Inputs != wantInputs {
		t.Fatalf("while running: %d pinned host allocations (want ≥ %d), voxel path %q, kernels %q (want %q), GPU failures %v, inputs %q (want %q)",
			hostAllocs, wantAllocs, lat.VoxelPath, lat.GPUKernels, wantKernels, lat.Counters["gpu_voxel_failures_total"], lat.Inputs, wantInputs)
	}
	if left, err := fakecuda.Leaks(driver); err != nil || len(left) > 0 {
		t.Errorf("after RunNode, left in the fake driver: %v %v", left, err)
	}
}

// fakeCUDANode runs RunNode --gpu on against a camera process until three
// frames are processed and checks the GPU path stayed on, with
// registrations pools registered meanwhile; then SIGKILLs and restarts the
// camera cameraRestarts times, checking after each that only the new
// camera's pools stay registered; and that nothing is left in the fake
// driver afterwards.
func fakeCUDANode(t *testing.T, driver string, live func(int) uint64, registrations uint64, cameraRestarts int) {
	t.Setenv(envSmallScene, "1")
	socket := filepath.Join(sockdir.Short(t), "zh", "camera.sock")
	cam := startCameraProc(t, socket)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sink := &recordingSink{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- RunNode(ctx, NodeConfig{Socket: socket, Listener: ln, Sink: sink, Threads: 1, Providers: "cpu",
			GPU: GPUOn, CubinCache: t.TempDir(), Watchdog: 5 * time.Second})
	}()
	lat := waitFrames(t, ln.Addr().String(), done, 3, 60*time.Second, nil)
	// The pools the subscriber mapped are registered read-only, or, where
	// registration fails, not at all and their frames staged.
	if n := live(fakecuda.LiveRegistrations); n != registrations {
		t.Errorf("%d host registrations while subscribed, want %d", n, registrations)
	}
	// A camera that crashes and comes back brings new pools: once the
	// leases on the dead camera's frames are gone, so are its pools'
	// registrations (pinned memory is scarce; a crash loop must not leak it).
	for r := 1; r <= cameraRestarts; r++ {
		cam.Process.Kill()
		cam.Wait()
		cam = startCameraProc(t, socket)
		lat = waitFrames(t, ln.Addr().String(), done, lat.Counters["frames_processed"]+3, 60*time.Second, nil)
		deadline := time.Now().Add(10 * time.Second)
		n := live(fakecuda.LiveRegistrations)
		for n != registrations && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
			n = live(fakecuda.LiveRegistrations)
		}
		if n != registrations {
			t.Fatalf("camera restart %d: %d host registrations, want %d (the dead camera's pools still registered)", r, n, registrations)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if lat.VoxelPath != "gpu" || !strings.Contains(lat.GPU, "fake") || lat.GPUKernels != "sm_90" || lat.Counters["gpu_voxel_failures_total"] != 0 {
		t.Fatalf("/latency voxel path %q, gpu %q, kernels %q, GPU failures %v; want gpu, the fake, sm_90, 0", lat.VoxelPath, lat.GPU, lat.GPUKernels, lat.Counters["gpu_voxel_failures_total"])
	}
	// Registered pools are read in place; unregistered ones cost a copy
	// per frame, and /latency must say so.
	staged, ok := lat.Counters["gpu_voxel_staged_total"]
	switch {
	case !ok:
		t.Errorf("/latency has no gpu_voxel_staged_total: %v", lat.Counters)
	case registrations > 0 && staged != 0:
		t.Errorf("gpu_voxel_staged_total %v with the camera's pools registered, want 0", staged)
	case registrations == 0 && (staged == 0 || staged > lat.Counters["frames_processed"]):
		t.Errorf("gpu_voxel_staged_total %v with no pool registered, want every one of the %v frames processed", staged, lat.Counters["frames_processed"])
	}
	if len(sink.since(time.Time{})) == 0 {
		t.Fatal("no command published")
	}
	// Everything the node made on the device is gone once it returns.
	if left, err := fakecuda.Leaks(driver); err != nil || len(left) > 0 {
		t.Errorf("after RunNode, left in the fake driver: %v %v", left, err)
	}
}

// latencyView is the part of /latency the GPU start-up tests read.
type latencyView struct {
	GPU        string             `json:"gpu"`
	VoxelPath  string             `json:"voxel_path"`
	GPUKernels string             `json:"gpu_kernels"`
	Inputs     string             `json:"inputs"`
	Counters   map[string]float64 `json:"counters"`
}

// waitFrames polls the node's /latency at addr until it has processed
// frames frames, calling onPoll (if not nil) after each answer, and fails
// the test when the node stops (done) or timeout passes first.
func waitFrames(t *testing.T, addr string, done <-chan error, frames float64, timeout time.Duration, onPoll func()) latencyView {
	t.Helper()
	var lat latencyView
	deadline := time.Now().Add(timeout)
	for {
		if resp, err := http.Get("http://" + addr + "/latency"); err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err := json.Unmarshal(body, &lat); err != nil {
				t.Fatalf("/latency: %v", err)
			}
			if onPoll != nil {
				onPoll()
			}
			if lat.Counters["frames_processed"] >= frames {
				return lat
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: /latency %+v; want %v frames processed", timeout, lat, frames)
		}
		select {
		case err := <-done:
			t.Fatalf("the agent stopped before %v frames (/latency %+v): %v", frames, lat, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
