package gpu

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/zerohop/zerohop/voxel"
)

// putPoints lays pts (x, y, z, intensity) out in dst with the given step and
// offsets (offI < 0: no intensity field).
func putPoints(dst []byte, step, offX, offY, offZ, offI int, pts [][4]float32) voxel.Cloud {
	clear(dst)
	for i, p := range pts {
		q := dst[i*step:]
		binary.LittleEndian.PutUint32(q[offX:], math.Float32bits(p[0]))
		binary.LittleEndian.PutUint32(q[offY:], math.Float32bits(p[1]))
		binary.LittleEndian.PutUint32(q[offZ:], math.Float32bits(p[2]))
		if offI >= 0 {
			binary.LittleEndian.PutUint32(q[offI:], math.Float32bits(p[3]))
		}
	}
	return voxel.Cloud{Data: dst[:step*len(pts)], Count: len(pts), Step: step, OffX: offX, OffY: offY, OffZ: offZ, OffI: offI}
}

// edgePoints are the edge values of TestFakeCUDAVoxelEdgeClouds.
func edgePoints() [][4]float32 {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	negz := float32(math.Copysign(0, -1))
	pts := [][4]float32{
		{0, 0, 0, 1}, {negz, negz, negz, 2}, {0.2, 0.2, 0.2, 3}, {-0.2, -0.2, -0.2, 4}, {-0.1, -0.1, -0.1, 5},
		{0.19999999, -0.19999999, 0.4, 6}, {nan, 0, 0, 1}, {0, inf, 0, 1}, {0, 0, -inf, 1}, {1, 1, 1, nan}, {1, 1, 1, inf},
		{-25.6, 12.8, -1.73, 0.5}, {25.6, -12.8, 3, 0.25}, {1e5, -1e5, 10, 1}, {-1e5, 1e5, -10, 1},
		{0, 0, 0, 7}, {0.2, 0.2, 0.2, 8},
	}
	return pts
}

// TestFakeCUDAVoxelEdgeClouds compares the GPU kernels (the fake driver's
// host emulation of them, through the real binding) with the CPU filter on
// edge clouds and layouts: signed zeros, voxel faces, NaN and ±Inf in
// every field, an unaligned step, no intensity, a single point, nothing
// accepted, an infinite crop box, huge extents, and MinPoints beyond
// uint32 (which zh_reduce's argument truncated to 0 or 1: every voxel
// kept, where the CPU keeps none).
func TestFakeCUDAVoxelEdgeClouds(t *testing.T) {
	f := openFakeCUDA(t)
	edge := edgePoints()
	for _, sc := range []struct {
		name                         string
		pts                          [][4]float32
		step, offX, offY, offZ, offI int
		cfg                          voxel.Config
	}{
		{"edge xyzi", edge, 16, 0, 4, 8, 12, voxel.Config{Leaf: [3]float32{0.2, 0.2, 0.2}}},
		{"edge unaligned step 19", edge, 19, 1, 6, 11, 15, voxel.Config{Leaf: [3]float32{0.2, 0.2, 0.2}}},
		{"edge no intensity", edge, 12, 0, 4, 8, -1, voxel.Config{Leaf: [3]float32{0.2, 0.2, 0.2}}},
		{"single point", [][4]float32{{-0.1, 3.3, -7, 0.5}}, 16, 0, 4, 8, 12, voxel.Config{Leaf: [3]float32{0.2, 0.2, 0.2}}},
		{"all rejected", [][4]float32{{float32(math.NaN()), 0, 0, 0}}, 16, 0, 4, 8, 12, voxel.Config{Leaf: [3]float32{0.2, 0.2, 0.2}}},
		{"edge crop inf", edge, 16, 0, 4, 8, 12, voxel.Config{Leaf: [3]float32{0.2, 0.2, 0.2},
			Crop: &voxel.Box{Min: [3]float32{float32(math.Inf(-1)), -13, -2}, Max: [3]float32{float32(math.Inf(1)), 13, 3}}}},
		{"huge x extent", [][4]float32{{-1e17, 0, 0, 1}, {1e17, 0.1, 0.1, 2}, {1e17, 0.3, 0.1, 3}, {0, 0, 0, 4}, {-0.5, 0.05, 0.05, 5}}, 16, 0, 4, 8, 12, voxel.Config{Leaf: [3]float32{0.2, 0.2, 0.2}}},
		{"huge 3d extent", [][4]float32{{-2e5, -2e5, -2e5, 1}, {1e5, 1e5, 1e5, 2}, {0, 0, 0, 4}, {-0.1, -0.1, -0.1, 5}}, 16, 0, 4, 8, 12, voxel.Config{Leaf: [3]float32{0.2, 0.2, 0.2}}},
		{"min points 2^32 (uint32 truncation)", edge, 16, 0, 4, 8, 12, voxel.Config{Leaf: [3]float32{0.2, 0.2, 0.2}, MinPoints: 1 << 32}},
		{"min points 2^32+1", edge, 16, 0, 4, 8, 12, voxel.Config{Leaf: [3]float32{0.2, 0.2, 0.2}, MinPoints: 1<<32 + 1}},
	} {
		t.Run(sc.name, func(t *testing.T) {
			n := len(sc.pts)
			data, err := f.c.Allocate(sc.step*n + 64)
			if err != nil {
				t.Fatal(err)
			}
			defer f.c.Free(data)
			cloud := putPoints(data, sc.step, sc.offX, sc.offY, sc.offZ, sc.offI, sc.pts)
			want, wantBEV := cpuReference(t, sc.cfg, cloud)
			vf, bev := newFilterAndBEV(t, f.c, f.nv, sc.cfg, VoxelOptions{MaxPoints: n, MaxInputBytes: sc.step * n, CacheDir: t.TempDir()})
			got := voxel.NewPoints(n)
			matchesCPUBothInputs(t, sc.name, vf, cloud, got, bev, want, wantBEV)
			t.Logf("%d points -> %d voxels", n, len(want.P))
		})
	}
}
