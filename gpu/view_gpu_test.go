//go:build gpu

package gpu

import "testing"

// TestGPUVoxelOnAgentViewOfSharedPool runs the product's cross-process
// input path on the GPU (view_test.go has the helpers): a shared memfd pool
// made as the camera makes it, without a Pinner; the agent's read-only view
// of it from the read-only fd, registered through the view's Pinner hook
// with cuMemHostRegister(PORTABLE|DEVICEMAP|READ_ONLY); the view must
// report READ_ONLY and no note, and the slot a device address; then the
// voxel filter and BEV on a 115k-point frame written into the slot after
// the registration, read in place and copied, with staging of unpinned
// input off, equal to the CPU filter bit for bit.
//
// It FAILS (never skips) without a GPU, and on a device whose
// CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED (113) is 0 unless
// the device reads host memory through the host's page tables (attribute
// 100; pin.go's documented fallback, accepted with its note): elsewhere
// the agent registers nothing and stages every frame, which its own GPU
// runs do not show (one log line).
func TestGPUVoxelOnAgentViewOfSharedPool(t *testing.T) {
	g := openVoxelGPU(t)
	const rings, columns = 64, 1800
	src := make([]byte, 16*rings*columns)
	if n := ringScan(src, rings, columns, 11); n != rings*columns {
		t.Fatalf("scan has %d points, want %d", n, rings*columns)
	}
	filterAgentView(t, g.c, g.nv, src)
}
