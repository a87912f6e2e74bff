package agent

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/zerohop/zerohop/voxel"
)

// mutatingGPUFilter wraps a FAKE GPU filter and changes its results after
// each run, as a GPU computing something else than the CPU would.
type mutatingGPUFilter struct {
	inner  GPUFilter
	mutate func(out *voxel.Points, bev []byte)
}

func (m *mutatingGPUFilter) Run(in voxel.Cloud, out *voxel.Points, bev []byte) error {
	err := m.inner.Run(in, out, bev)
	if err == nil {
		m.mutate(out, bev)
	}
	return err
}

// The start-up self-check passes a filter that gives the CPU's results and
// refuses, saying how, one that differs in a voxel's last bit, in the
// number of voxels, in one raster element, or that fails.
func TestGPUSelfCheck(t *testing.T) {
	cfg := voxel.Config{Leaf: [3]float32{0.2, 0.2, 0.2}}
	cloud := selfCheckCloud(make([]byte, selfCheckPoints*selfCheckStep), selfCheckPoints, cfg)
	tests := []struct {
		name   string
		filter func(fake *fakeGPUFilter) GPUFilter
		want   string // "" passes
	}{
		{"the CPU's results", func(f *fakeGPUFilter) GPUFilter { return f }, ""},
		{"one voxel a bit off", func(f *fakeGPUFilter) GPUFilter {
			return &mutatingGPUFilter{f, func(out *voxel.Points, _ []byte) {
				out.P[7].Y = math.Nextafter32(out.P[7].Y, 100)
			}}
		}, "1 of"},
		{"a voxel missing", func(f *fakeGPUFilter) GPUFilter {
			return &mutatingGPUFilter{f, func(out *voxel.Points, _ []byte) { out.P = out.P[:len(out.P)-1] }}
		}, "voxels on the GPU"},
		{"one raster element off", func(f *fakeGPUFilter) GPUFilter {
			return &mutatingGPUFilter{f, func(_ *voxel.Points, bev []byte) { bev[4*1234] ^= 1 }}
		}, "BEV elements differ"},
		{"a failing run", func(f *fakeGPUFilter) GPUFilter { f.failAt = 1; return f }, errFakeCUDA.Error()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := newFakeGPUFilter(t, 0.2)
			voxels, err := checkGPUFilter(tt.filter(fake), cloud, make([]byte, 4*fake.bev.Len()), cfg, voxel.BEVConfig{})
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				// A cloud that means something: clusters share voxels, and
				// the non-finite points are skipped.
				if voxels < 500 || voxels > selfCheckPoints/2 {
					t.Fatalf("%d voxels from %d points: want clusters that share voxels", voxels, selfCheckPoints)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("checkGPUFilter = %d, %v; want an error with %q", voxels, err, tt.want)
			}
			if tt.name == "a failing run" && !errors.Is(err, errFakeCUDA) {
				t.Fatalf("%v does not wrap the filter's error", err)
			}
		})
	}
}

// The self-check's cloud gives voxels to compare whatever the agent's
// filter flags say: a --min-points above the clusters' old size, a small
// leaf, a crop box away from the raster, fewer --max-points than the
// cloud's default size.
func TestGPUSelfCheckCloudFitsTheConfiguration(t *testing.T) {
	leaf := func(l float32) [3]float32 { return [3]float32{l, l, l} }
	tests := []struct {
		name   string
		cfg    voxel.Config
		points int
	}{
		{"defaults", voxel.Config{Leaf: leaf(0.2)}, selfCheckPoints},
		{"min points 5", voxel.Config{Leaf: leaf(0.2), MinPoints: 5}, selfCheckPoints},
		{"min points 20, leaf 0.05", voxel.Config{Leaf: leaf(0.05), MinPoints: 20}, selfCheckPoints},
		{"a crop box far away", voxel.Config{Leaf: leaf(0.5), Crop: &voxel.Box{Min: [3]float32{100, 100, 10}, Max: [3]float32{200, 150, 20}}}, selfCheckPoints},
		{"a crop box overlapping", voxel.Config{Leaf: leaf(0.2), Crop: &voxel.Box{Min: [3]float32{0, -5, -2}, Max: [3]float32{10, 5, 3}}}, selfCheckPoints},
		{"--max-points 1000", voxel.Config{Leaf: leaf(0.2)}, 1000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := fakeGPUFilterFor(t, tt.cfg, selfCheckPoints)
			cloud := selfCheckCloud(make([]byte, tt.points*selfCheckStep), tt.points, tt.cfg)
			voxels, err := checkGPUFilter(fake, cloud, make([]byte, 4*fake.bev.Len()), tt.cfg, voxel.BEVConfig{})
			if err != nil {
				t.Fatal(err)
			}
			if voxels < tt.points/(8*max(4, 4*tt.cfg.MinPoints)) || voxels > tt.points/2 {
				t.Fatalf("%d voxels from %d points: want clusters that share voxels, and some that reach min points %d", voxels, tt.points, tt.cfg.MinPoints)
			}
		})
	}
}
