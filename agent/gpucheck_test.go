package agent

import (
	"encoding/binary"
	"errors"
	"fmt"
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
	cloud := selfCheckCloud(make([]byte, selfCheckPoints*selfCheckStep), selfCheckPoints, cfg, voxel.BEVConfig{})
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
			cloud := selfCheckCloud(make([]byte, tt.points*selfCheckStep), tt.points, tt.cfg, voxel.BEVConfig{})
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

// The self-check cloud reaches below the raster's ground and above its
// height cap wherever --lidar-height and the model config put them, so
// that the GPU's clamps of the height channel are compared with the CPU's:
// with the cloud's heights fixed at -1 to 2 m, a LiDAR 1.73 m up put
// every point above its ground (the clamp at 0 went unchecked), one 4 m
// up every point above the cap.
func TestSelfCheckCloudStraddlesTheHeightClamps(t *testing.T) {
	for _, bev := range []voxel.BEVConfig{
		{},
		{GroundZ: -1.73, MaxHeight: 3},
		{GroundZ: -4, MaxHeight: 2, MinX: -6.4},
		{GroundZ: -0.5, MaxHeight: 0.5, H: 64, W: 96, Cell: 0.5},
		// --lidar-rpy: heights in the robot frame; a tilt of the clouds'
		// z band alone would leave most of the raster above or below it.
		{GroundZ: -1.73, MaxHeight: 3, Mount: voxel.Mount{X: 0.45, Y: -0.12, Roll: 0.03, Pitch: 0.14, Yaw: 0.21}},
		{GroundZ: -2, MaxHeight: 1, Mount: voxel.Mount{Roll: math.Pi, Pitch: 0.4}},
		// A window far from the robot (min_x_m up to 1 km): the clusters
		// follow it.
		{GroundZ: -1, MaxHeight: 2, MinX: 300, Mount: voxel.Mount{Pitch: 0.1, Yaw: 0.5}},
	} {
		t.Run(fmt.Sprintf("ground %g m, cap %g m, mount %+v", bev.GroundZ, bev.MaxHeight, bev.Mount), func(t *testing.T) {
			b, err := voxel.NewBEV(bev)
			if err != nil {
				t.Fatal(err)
			}
			fcfg, err := filterConfig(NodeConfig{Leaf: 0.2}, bev)
			if err != nil {
				t.Fatal(err)
			}
			cloud := selfCheckCloud(make([]byte, selfCheckPoints*selfCheckStep), selfCheckPoints, fcfg, bev)
			ground, maxH := b.Config().GroundZ, b.Config().MaxHeight
			var below, between, above int
			for i := range cloud.Count {
				x := math.Float32frombits(binary.LittleEndian.Uint32(cloud.Data[i*selfCheckStep:]))
				y := math.Float32frombits(binary.LittleEndian.Uint32(cloud.Data[i*selfCheckStep+4:]))
				z := math.Float32frombits(binary.LittleEndian.Uint32(cloud.Data[i*selfCheckStep+8:]))
				if !b.Holds(voxel.Point{X: x, Y: y, Z: z}) {
					continue
				}
				tf := bev.Mount.Transform()
				if _, _, rz := tf.Apply(float64(x), float64(y), float64(z)); !bev.Mount.IsIdentity() {
					z = float32(rz)
				}
				switch h := z - ground; {
				case h < 0:
					below++
				case h > maxH:
					above++
				case h >= 0 && h <= maxH:
					between++
				}
			}
			// Each a tenth of those in the raster: a mount's tilt applied
			// to clusters laid out level sends most of them far above or
			// below the raster's heights.
			inRaster := below + between + above
			t.Logf("of %d points, %d in the raster: %d below its ground, %d between, %d above its cap", cloud.Count, inRaster, below, between, above)
			if least := max(20, inRaster/10); below < least || between < least || above < least {
				t.Errorf("points in the raster %d below its ground, %d between, %d above its cap; want %d or more of each", below, between, above, least)
			}
		})
	}
}
