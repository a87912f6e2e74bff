//go:build cudalibs

package agent

// The agent's start-up against NVIDIA's REAL libcuda.so.1 and NVRTC on a
// machine WITHOUT a GPU (make test-cuda-libs; scripts/cuda-libs/fetch.sh
// unpacks Debian 12's driver 535 library with NVRTC 11.8, and Debian 13's
// driver 550 with NVRTC 12.4, into the folders $ZEROHOP_CUDA_LIBS lists).
// Per folder, a child test process finds them under their sonames through
// LD_LIBRARY_PATH, as on a machine with the driver
// installed: --gpu auto must run the CPU path and say why in one log line,
// --gpu on must fail naming the step. Nothing here runs on a GPU.

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/zerohop/zerohop/voxel"
)

const envRealCUDAChild = "ZEROHOP_AGENT_TEST_REAL_CUDA"

func TestRealCUDALibsAgentWithoutAGPU(t *testing.T) {
	if os.Getenv(envRealCUDAChild) == "1" {
		realCUDAChild(t)
		return
	}
	requireORT(t)
	list := os.Getenv("ZEROHOP_CUDA_LIBS")
	if list == "" {
		t.Fatal("$ZEROHOP_CUDA_LIBS is not set: make test-cuda-libs fetches the libraries and sets it")
	}
	for _, dir := range filepath.SplitList(list) {
		t.Run(filepath.Base(filepath.Dir(dir)), func(t *testing.T) {
			if _, err := os.Stat(filepath.Join(dir, "libcuda.so.1")); err != nil {
				t.Fatal(err)
			}
			runTestChild(t, "TestRealCUDALibsAgentWithoutAGPU", dir, envRealCUDAChild, 2*time.Minute)
		})
	}
}

func realCUDAChild(t *testing.T) {
	t.Run("--gpu on fails naming cuInit", func(t *testing.T) {
		g, _, _, err := startGPU(NodeConfig{GPU: GPUOn, CubinCache: t.TempDir()}, voxel.BEVConfig{}, zap.NewNop())
		if g != nil {
			g.Close()
		}
		var se *gpuStartError
		if err == nil || !errors.As(err, &se) {
			t.Fatalf("startGPU --gpu on: %v; want a start-up error", err)
		}
		for _, s := range []string{"--gpu on", "cuInit", "CUDA_ERROR_NO_DEVICE"} {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%q does not say %s", err, s)
			}
		}
	})
	t.Run("--gpu auto runs the CPU path and says why once", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		core, logs := observer.New(zap.InfoLevel)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		sink := &recordingSink{}
		done := make(chan error, 1)
		go func() {
			done <- RunNode(ctx, NodeConfig{Camera: "synthetic", Rate: 10, Beams: smallScene.Beams,
				AzimuthSteps: smallScene.AzimuthSteps, Listener: ln, Sink: sink, Log: zap.New(core),
				Threads: 1, Providers: "cpu", GPU: GPUAuto, CubinCache: t.TempDir(), Watchdog: 5 * time.Second})
		}()
		lat := waitFrames(t, ln.Addr().String(), done, 2, 60*time.Second, nil)
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if lat.VoxelPath != "cpu" || lat.GPU != "none" {
			t.Errorf("/latency voxel path %q, gpu %q; want cpu, none", lat.VoxelPath, lat.GPU)
		}
		lines := logs.FilterMessage("voxel filter and BEV on the CPU").All()
		if len(lines) != 1 {
			t.Fatalf("%d \"on the CPU\" log lines, want 1", len(lines))
		}
		why, _ := lines[0].ContextMap()["why"].(string)
		if !strings.Contains(why, "CUDA_ERROR_NO_DEVICE") {
			t.Errorf("the CPU path's reason %q does not name CUDA_ERROR_NO_DEVICE", why)
		}
		t.Logf("why: %s", why)
	})
}
