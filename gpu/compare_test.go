package gpu

import (
	"encoding/binary"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/zerohop/zerohop/voxel"
)

func samePoints(t *testing.T, what string, got, want []voxel.Point) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d voxels, CPU has %d", what, len(got), len(want))
	}
	bad := 0
	for i := range want {
		g, w := got[i], want[i]
		if math.Float32bits(g.X) != math.Float32bits(w.X) || math.Float32bits(g.Y) != math.Float32bits(w.Y) ||
			math.Float32bits(g.Z) != math.Float32bits(w.Z) || math.Float32bits(g.I) != math.Float32bits(w.I) {
			if bad < 5 {
				t.Errorf("%s: voxel %d = %+v, CPU %+v", what, i, g, w)
			}
			bad++
		}
	}
	if bad > 0 {
		t.Fatalf("%s: %d of %d voxels differ from the CPU's", what, bad, len(want))
	}
}

// sameTops wants got's tops and their mount bit for bit as want's.
func sameTops(t *testing.T, what string, got, want *voxel.Points) {
	t.Helper()
	if got.Mount != want.Mount {
		t.Fatalf("%s: tops measured with mount %+v, CPU %+v", what, got.Mount, want.Mount)
	}
	if len(got.Top) != len(want.Top) {
		t.Fatalf("%s: %d tops, CPU has %d", what, len(got.Top), len(want.Top))
	}
	for i, w := range want.Top {
		if g := got.Top[i]; math.Float32bits(g) != math.Float32bits(w) {
			t.Fatalf("%s: top %d = %g, CPU %g", what, i, g, w)
		}
	}
}

func sameBEV(t *testing.T, what string, got []byte, want []float32) {
	t.Helper()
	bad := 0
	for i, w := range want {
		g := binary.LittleEndian.Uint32(got[4*i:])
		if g != math.Float32bits(w) {
			if bad < 5 {
				t.Errorf("%s: BEV element %d = %g, CPU %g", what, i, math.Float32frombits(g), w)
			}
			bad++
		}
	}
	if bad > 0 {
		t.Fatalf("%s: %d of %d BEV elements differ from the CPU's", what, bad, len(want))
	}
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// cpuReference is what the GPU filter must reproduce: voxel.Filter's points
// for cloud and voxel.BEV's default raster of them.
func cpuReference(t *testing.T, cfg voxel.Config, cloud voxel.Cloud) (*voxel.Points, []float32) {
	t.Helper()
	return cpuReferenceBEV(t, cfg, voxel.BEVConfig{}, cloud)
}

// cpuReferenceBEV is cpuReference with the raster of bevCfg.
func cpuReferenceBEV(t *testing.T, cfg voxel.Config, bevCfg voxel.BEVConfig, cloud voxel.Cloud) (*voxel.Points, []float32) {
	t.Helper()
	cpu, err := voxel.NewFilter(cfg, cloud.Count)
	if err != nil {
		t.Fatal(err)
	}
	defer cpu.Close()
	want := voxel.NewPoints(cloud.Count)
	if err := cpu.Run(cloud, want); err != nil {
		t.Fatal(err)
	}
	bev, err := voxel.NewBEV(bevCfg)
	if err != nil {
		t.Fatal(err)
	}
	wantBEV := make([]float32, bev.Len())
	if err := bev.Fill(want, wantBEV); err != nil {
		t.Fatal(err)
	}
	return want, wantBEV
}

// newFilterAndBEV makes a VoxelFilter on c and its pinned BEV destination,
// both released in t's cleanup.
func newFilterAndBEV(t *testing.T, c *Context, nv *NVRTC, cfg voxel.Config, opt VoxelOptions) (*VoxelFilter, []byte) {
	t.Helper()
	vf, err := NewVoxelFilter(c, nv, cfg, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { vf.Close() })
	bev, err := c.Allocate(vf.BEVBytes())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Free(bev) })
	return vf, bev
}

// matchesCPUBothInputs runs vf on cloud with mapped, then copied input,
// into got and bev, and wants the CPU's points and raster each time.
func matchesCPUBothInputs(t *testing.T, what string, vf *VoxelFilter, cloud voxel.Cloud, got *voxel.Points, bev []byte, want *voxel.Points, wantBEV []float32) {
	t.Helper()
	for _, copyInput := range []bool{false, true} {
		vf.SetCopyInput(copyInput)
		mode := map[bool]string{false: "mapped", true: "copied"}[copyInput]
		clear(bev)
		if err := vf.Run(cloud, got, bev); err != nil {
			t.Fatalf("%s, %s input: %v", what, mode, err)
		}
		samePoints(t, what+", "+mode+" input", got.P, want.P)
		sameTops(t, what+", "+mode+" input", got, want)
		sameBEV(t, what+", "+mode+" input", bev, wantBEV)
	}
}
