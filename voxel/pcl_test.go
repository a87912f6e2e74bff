package voxel

import (
	"bytes"
	"flag"
	"math"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/scan_small.bin (then rerun testdata/pcl/voxelgrid for the goldens)")

// smallScanFile is a tiny committed KITTI cloud: every 40th return of the
// 115k ring scan, points exactly on voxel faces of the goldens' leaf sizes
// (negative coordinates included), and points with NaN or Inf coordinates.
const smallScanFile = "testdata/scan_small.bin"

func smallScan() []byte {
	scan := ringScan(scan115k)
	var b []byte
	for i := 0; i < len(scan)/XYZIStep; i += 40 {
		b = append(b, scan[i*XYZIStep:(i+1)*XYZIStep]...)
	}
	var pts [][4]float32
	for k := -4; k <= 4; k++ {
		for _, l := range []float32{0.2, 0.3, 0.5} {
			v := float32(k) * l
			pts = append(pts, [4]float32{v, -v, 0.5 * v, 0.1}, [4]float32{3 + v, 0.1, v, 0.2}, [4]float32{-v, v, -v, 0.3})
		}
	}
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	pts = append(pts, [4]float32{nan, 1, 1, 0.5}, [4]float32{1, -inf, 1, 0.5}, [4]float32{1, 1, inf, 0.5})
	return append(b, kittiCloud(pts).Data...)
}

func TestSmallScanFileIsCurrent(t *testing.T) {
	want := smallScan()
	if *update {
		if err := os.WriteFile(smallScanFile, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(smallScanFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is stale: regenerate with go test -run TestSmallScanFileIsCurrent -update, then the PCL goldens", smallScanFile)
	}
}

// TestMatchesPCL compares the filter with pcl::VoxelGrid<PointXYZI> 1.13 on
// the small scan: goldens made by testdata/pcl/voxelgrid.cpp. The voxels and
// their order must be the same; centroids may differ by float32 rounding
// (PCL sums in float32, in an order its unstable sort leaves unspecified).
func TestMatchesPCL(t *testing.T) {
	data, err := os.ReadFile(smallScanFile)
	if err != nil {
		t.Fatal(err)
	}
	cloud, err := KITTI(data)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		golden    string
		leaf      [3]float32
		minPoints int
	}{
		{"scan_small.leaf0.2.pcl.bin", cube(0.2), 1},
		{"scan_small.leaf0.5.pcl.bin", cube(0.5), 1},
		{"scan_small.leaf0.3x0.3x0.2.min3.pcl.bin", [3]float32{0.3, 0.3, 0.2}, 3},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join("testdata/pcl", tc.golden))
			if err != nil {
				t.Fatal(err)
			}
			want, err := KITTI(raw)
			if err != nil {
				t.Fatal(err)
			}
			f, err := NewFilter(Config{Leaf: tc.leaf, MinPoints: tc.minPoints}, cloud.Count)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			out := NewPoints(cloud.Count)
			if err := f.Run(cloud, out); err != nil {
				t.Fatal(err)
			}
			if len(out.P) != want.Count {
				t.Fatalf("%d voxels, PCL has %d", len(out.P), want.Count)
			}
			r := newPointReader(want)
			inv := [3]float32{1 / tc.leaf[0], 1 / tc.leaf[1], 1 / tc.leaf[2]}
			for i, p := range out.P {
				x, y, z, in := r.at(i)
				pcl := [4]float32{x, y, z, in}
				got := [4]float32{p.X, p.Y, p.Z, p.I}
				for a := range 4 {
					if d := math.Abs(float64(got[a] - pcl[a])); d > 1e-5*max(1, math.Abs(float64(pcl[a]))) {
						t.Fatalf("point %d: got %v, PCL %v", i, got, pcl)
					}
				}
				for a := range 3 { // same voxel, unless PCL's float32 mean left it
					if voxelIndex(got[a], inv[a]) != voxelIndex(pcl[a], inv[a]) && !nearFace(pcl[a], inv[a]) {
						t.Fatalf("point %d: voxel of %v differs from PCL's %v on axis %d", i, got, pcl, a)
					}
				}
			}
		})
	}
}

// nearFace reports whether v is within float32 rounding of a voxel face.
func nearFace(v, inv float32) bool {
	p := float64(v * inv)
	return math.Abs(p-math.Round(p)) < 1e-5*max(1, math.Abs(p))
}
