//go:build gpu

// The agent's GPU path on a real GPU: built only with -tags gpu (make
// gpu-check packs it); FAILS, never skips, without a GPU, its driver and
// NVRTC.

package agent

import (
	"testing"

	"github.com/zerohop/zerohop/sensor"
)

// TestGPUPipelineMatchesCPUPipeline runs the default synthetic scene (115k
// points) through the real GPU filter and through the CPU path.
func TestGPUPipelineMatchesCPUPipeline(t *testing.T) {
	g := openGPUForTest(t)
	gpuPipelineMatchesCPU(t, g, sensor.SyntheticConfig{}, 6)
}
