package voxel

import (
	"encoding/binary"
	"math"
	"strings"
	"testing"
)

const deg = math.Pi / 180

// TestMountTransform pins the rotation convention (URDF's rpy: fixed axes,
// roll first; REP-103's x forward, y left, z up) on axes whose images are
// known, and a general rotation against the product Rz·Ry·Rx written out.
func TestMountTransform(t *testing.T) {
	for _, tc := range []struct {
		name    string
		m       Mount
		in, out [3]float64
	}{
		{"identity", Mount{}, [3]float64{1, 2, 3}, [3]float64{1, 2, 3}},
		{"translation", Mount{X: 0.5, Y: -0.25, Z: 1.5}, [3]float64{1, 2, 3}, [3]float64{1.5, 1.75, 4.5}},
		{"yaw 90°: the sensor's x points left", Mount{Yaw: 90 * deg}, [3]float64{1, 0, 0}, [3]float64{0, 1, 0}},
		{"pitch +10°: the sensor's x points down", Mount{Pitch: 10 * deg}, [3]float64{1, 0, 0}, [3]float64{math.Cos(10 * deg), 0, -math.Sin(10 * deg)}},
		{"roll 90°: the sensor's y points up", Mount{Roll: 90 * deg}, [3]float64{0, 1, 0}, [3]float64{0, 0, 1}},
		{"roll 180°: upside down", Mount{Roll: math.Pi}, [3]float64{1, 1, 1}, [3]float64{1, -1, -1}},
		{"roll then yaw, about fixed axes", Mount{Roll: 90 * deg, Yaw: 90 * deg}, [3]float64{0, 1, 0}, [3]float64{0, 0, 1}},
		{"pitch then yaw", Mount{Pitch: 90 * deg, Yaw: 90 * deg}, [3]float64{1, 0, 0}, [3]float64{0, 0, -1}},
		{"yaw 90° and a lever arm", Mount{X: 1, Yaw: 90 * deg}, [3]float64{0, -1, 0}, [3]float64{2, 0, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tf := tc.m.Transform()
			x, y, z := tf.Apply(tc.in[0], tc.in[1], tc.in[2])
			if got := [3]float64{x, y, z}; dist(got, tc.out) > 1e-12 {
				t.Fatalf("%+v moves %v to %v, want %v", tc.m, tc.in, got, tc.out)
			}
		})
	}

	// ApplyInverse undoes Apply.
	tf := Mount{X: 0.4, Y: -0.2, Z: 1.7, Roll: 0.3, Pitch: -0.2, Yaw: 2.9}.Transform()
	x, y, z := tf.Apply(tf.ApplyInverse(3, -4, 5))
	if got := [3]float64{x, y, z}; dist(got, [3]float64{3, -4, 5}) > 1e-12 {
		t.Fatalf("Apply(ApplyInverse(3, -4, 5)) = %v", got)
	}

	m := Mount{Roll: 0.3, Pitch: -0.2, Yaw: 1.1}
	rx := [9]float64{1, 0, 0, 0, math.Cos(m.Roll), -math.Sin(m.Roll), 0, math.Sin(m.Roll), math.Cos(m.Roll)}
	ry := [9]float64{math.Cos(m.Pitch), 0, math.Sin(m.Pitch), 0, 1, 0, -math.Sin(m.Pitch), 0, math.Cos(m.Pitch)}
	rz := [9]float64{math.Cos(m.Yaw), -math.Sin(m.Yaw), 0, math.Sin(m.Yaw), math.Cos(m.Yaw), 0, 0, 0, 1}
	want := matMul(rz, matMul(ry, rx))
	got := m.Transform().R
	for i := range got {
		if math.Abs(got[i]-want[i]) > 1e-15 {
			t.Fatalf("R[%d] = %v, Rz·Ry·Rx has %v", i, got[i], want[i])
		}
	}
}

func matMul(a, b [9]float64) (c [9]float64) {
	for i := range 3 {
		for j := range 3 {
			for k := range 3 {
				c[3*i+j] += a[3*i+k] * b[3*k+j]
			}
		}
	}
	return c
}

func dist(a, b [3]float64) float64 {
	return math.Sqrt((a[0]-b[0])*(a[0]-b[0]) + (a[1]-b[1])*(a[1]-b[1]) + (a[2]-b[2])*(a[2]-b[2]))
}

// tiltedMount is a LiDAR as it is often mounted: ahead of and beside the
// robot's origin, pitched down to see the ground near the robot, a little
// rolled and turned. Its height stays in GroundZ, as the agent keeps it.
var tiltedMount = Mount{X: 0.45, Y: -0.12, Roll: 1.5 * deg, Pitch: 8 * deg, Yaw: 12 * deg}

// intoSensorFrame returns the robot-frame points as a sensor mounted at m
// reports them: Rᵀ(p − T), rounded to float32.
func intoSensorFrame(pts [][4]float32, m Mount) [][4]float32 {
	tf := m.Transform()
	out := make([][4]float32, len(pts))
	for i, p := range pts {
		x, y, z := tf.ApplyInverse(float64(p[0]), float64(p[1]), float64(p[2]))
		out[i] = [4]float32{float32(x), float32(y), float32(z), p[3]}
	}
	return out
}

func scanPoints(t testing.TB, spec scanSpec) [][4]float32 {
	scan, err := KITTI(ringScan(spec))
	if err != nil {
		t.Fatal(err)
	}
	pts := make([][4]float32, scan.Count)
	for i := range pts {
		for a := range 4 {
			pts[i][a] = math.Float32frombits(binary.LittleEndian.Uint32(scan.Data[16*i+4*a:]))
		}
	}
	return pts
}

// filterAt runs the filter with this leaf and crop (nil: none) over pts.
func filterAt(t testing.TB, pts [][4]float32, leaf float32, crop *Box) *Points {
	t.Helper()
	return filterMounted(t, pts, leaf, crop, Mount{})
}

// filterMounted is filterAt with tops measured in the robot frame of mount.
func filterMounted(t testing.TB, pts [][4]float32, leaf float32, crop *Box, mount Mount) *Points {
	t.Helper()
	return filterConfigured(t, pts, Config{Leaf: cube(leaf), Crop: crop, Mount: mount})
}

// filterConfigured runs a filter of cfg over pts.
func filterConfigured(t testing.TB, pts [][4]float32, cfg Config) *Points {
	t.Helper()
	f, err := NewFilter(cfg, len(pts))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := NewPoints(len(pts))
	if err := f.Run(kittiCloud(pts), out); err != nil {
		t.Fatal(err)
	}
	return out
}

// filtered runs the filter at leaf 0.2 m over pts.
func filtered(t testing.TB, pts [][4]float32) *Points { return filterAt(t, pts, 0.2, nil) }

// rasterAt filters pts with this leaf and crop and fills b's raster.
func rasterAt(t testing.TB, b *BEV, pts [][4]float32, leaf float32, crop *Box) []float32 {
	t.Helper()
	dst := make([]float32, b.Len())
	if err := b.Fill(filterMounted(t, pts, leaf, crop, b.cfg.Mount), dst); err != nil {
		t.Fatal(err)
	}
	return dst
}

// rasterOf filters pts at leaf 0.2 m, cropped for b as the agent crops,
// and fills b's raster.
func rasterOf(t testing.TB, b *BEV, pts [][4]float32) []float32 {
	crop := b.CropFor(cube(0.2))
	return rasterAt(t, b, pts, 0.2, &crop)
}

// TestMountedBEVSeesTheRobotFrame: the street scan as a tilted, offset and
// turned LiDAR reports it draws, with that Mount, the raster of the scan
// in the robot frame (a few cells on edges aside: the voxels are other
// cubes); without it, the tilt reads the road ahead as a rising wall and
// the raster is wrong in thousands of cells.
func TestMountedBEVSeesTheRobotFrame(t *testing.T) {
	robot := scanPoints(t, scan115k)
	sensor := intoSensorFrame(robot, tiltedMount)
	level, err := NewBEV(BEVConfig{GroundZ: roadZ})
	if err != nil {
		t.Fatal(err)
	}
	mounted, err := NewBEV(BEVConfig{GroundZ: roadZ, Mount: tiltedMount})
	if err != nil {
		t.Fatal(err)
	}
	want := rasterOf(t, level, robot)
	const cells = 128 * 128
	// The voxels are other cubes in the tilted frame, so a centroid near
	// a cell's edge may land in its neighbour: count the cells marked in
	// one raster (occupied; an obstacle to the reference model, 0.2 m
	// above the ground) with nothing so marked within one cell in the
	// other, both ways.
	marked := func(r []float32, k int, obstacle bool) bool {
		if obstacle {
			return r[ChannelHeight*cells+k] > 0.2
		}
		return r[ChannelOccupancy*cells+k] != 0
	}
	near := func(r []float32, k int, obstacle bool) bool {
		row, col := k/128, k%128
		for dr := -1; dr <= 1; dr++ {
			for dc := -1; dc <= 1; dc++ {
				if rr, cc := row+dr, col+dc; rr >= 0 && rr < 128 && cc >= 0 && cc < 128 && marked(r, rr*128+cc, obstacle) {
					return true
				}
			}
		}
		return false
	}
	compare := func(got []float32) (occ, obstacles int) {
		for k := range cells {
			for _, o := range []bool{false, true} {
				if marked(got, k, o) && !near(want, k, o) || marked(want, k, o) && !near(got, k, o) {
					if o {
						obstacles++
					} else {
						occ++
					}
				}
			}
		}
		return occ, obstacles
	}
	occupied := 0
	for k := range cells {
		if marked(want, k, false) {
			occupied++
		}
	}
	occ, obst := compare(rasterOf(t, mounted, sensor))
	t.Logf("with the mount: %d of %d occupied cells have no counterpart within a cell, %d obstacle cells", occ, occupied, obst)
	if occ > occupied/100 || obst > occupied/100 {
		t.Errorf("with the mount, %d occupied and %d obstacle cells have no counterpart within a cell in the robot-frame raster (%d occupied); want at most 1 %% each", occ, obst, occupied)
	}
	occ, obst = compare(rasterOf(t, level, sensor))
	t.Logf("without it: %d occupied and %d obstacle cells without a counterpart", occ, obst)
	if obst < occupied/10 {
		t.Errorf("without the mount only %d obstacle cells lack a counterpart: the tilt does not show, so this test proves nothing", obst)
	}
}

// TestCropForKeepsTheMountedRaster: with a Mount, CropFor's box (in the
// clouds' frame) drops nothing Fill would draw, bit for bit, and still
// drops a garbage point far away.
func TestCropForKeepsTheMountedRaster(t *testing.T) {
	robot := scanPoints(t, scan115k)
	// Within CropFarZTilted of the ground however turned (28·√3 < 50).
	edges := uniformCloud(20000, -28, 28, 11)
	for _, tc := range []struct {
		name string
		leaf float32
		bev  BEVConfig
		pts  [][4]float32
	}{
		{"tilted scan", 0.2, BEVConfig{GroundZ: roadZ, Mount: tiltedMount}, intoSensorFrame(robot, tiltedMount)},
		{"translated only, leaf 0.15", 0.15, BEVConfig{GroundZ: roadZ, Mount: Mount{X: -1.2, Y: 0.3, Z: 0.2}}, robot},
		{"upside down, window behind too", 0.2, BEVConfig{MinX: -6.4, Mount: Mount{Z: 2, Roll: math.Pi}}, edges},
		{"turned 90°, leaf 0.33", 0.33, BEVConfig{Mount: Mount{Yaw: math.Pi / 2}}, edges},
		{"steep tilt, odd raster, leaf 1", 1, BEVConfig{H: 37, W: 53, Cell: 0.7, MinX: -3.1, Mount: Mount{Pitch: 40 * deg, Roll: -25 * deg}}, edges},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := NewBEV(tc.bev)
			if err != nil {
				t.Fatal(err)
			}
			crop := b.CropFor(cube(tc.leaf))
			// Across, the box is the window's, turned: at most its
			// diagonal plus the band's tilt wide (a loose box keeps every
			// point; ±CropFarZ turned 8° was 280 m long).
			for a := range 2 {
				if w := crop.Max[a] - crop.Min[a]; w > 160 {
					t.Fatalf("crop %+v is %g m wide along %s: the tilt took the z band's 2000 m with it", crop, w, axisNames[a])
				}
			}
			raster := func(pts [][4]float32, crop *Box) []float32 { return rasterAt(t, b, pts, tc.leaf, crop) }
			want := raster(tc.pts, nil)
			drawn := 0
			for _, v := range want[:len(want)/BEVChannels] {
				if v != 0 {
					drawn++
				}
			}
			if drawn < 50 {
				t.Fatalf("only %d cells drawn: this case proves nothing", drawn)
			}
			got := raster(tc.pts, &crop)
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("cropped raster differs at %d: %v, uncropped %v (crop %+v)", i, got[i], want[i], crop)
				}
			}
			garbage := append(append([][4]float32(nil), tc.pts...), [4]float32{math.MaxFloat32, 1, 0.5, 1})
			got = raster(garbage, &crop)
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("a FLT_MAX point changed the cropped raster at %d", i)
				}
			}
		})
	}
}

// The ground estimate works in the robot frame: it finds the road under a
// tilted LiDAR, where the sensor frame's z is no height at all.
func TestGroundZEstimateUnderATiltedLiDAR(t *testing.T) {
	pts := filtered(t, intoSensorFrame(scanPoints(t, scan115k), tiltedMount))
	scratch := make([]float32, 512)
	for _, tc := range []struct {
		name   string
		mount  Mount
		within float64
	}{
		{"with the mount", tiltedMount, 0.1},
		{"without it, the tilt spreads the road over metres", Mount{}, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := NewBEV(BEVConfig{GroundZ: roadZ, Mount: tc.mount})
			if err != nil {
				t.Fatal(err)
			}
			z, n := b.GroundZEstimate(pts, scratch)
			off := math.Abs(float64(z - roadZ))
			t.Logf("ground at z = %.3f from %d voxels", z, n)
			if tc.within > 0 && (n < 256 || off > tc.within) {
				t.Fatalf("ground at z = %v from %d voxels, want %v within %v m from 256 or more", z, n, roadZ, tc.within)
			}
			if tc.within < 0 && off < 0.3 {
				t.Fatalf("ground at z = %v without the mount: as close as with it, so the test proves nothing", z)
			}
			if a := testing.AllocsPerRun(10, func() { b.GroundZEstimate(pts, scratch) }); a != 0 {
				t.Errorf("GroundZEstimate allocates %v times per call, want 0", a)
			}
		})
	}
}

func TestMountedFillAllocatesNothing(t *testing.T) {
	pts := filterMounted(t, intoSensorFrame(scanPoints(t, scan115k), tiltedMount), 0.2, nil, tiltedMount)
	b, err := NewBEV(BEVConfig{GroundZ: roadZ, Mount: tiltedMount})
	if err != nil {
		t.Fatal(err)
	}
	dst := make([]float32, b.Len())
	if err := b.Fill(pts, dst); err != nil {
		t.Fatal(err)
	}
	if a := testing.AllocsPerRun(10, func() { _ = b.Fill(pts, dst) }); a != 0 {
		t.Errorf("Fill with a Mount allocates %v times per call, want 0", a)
	}
}

func TestMountMustBeFinite(t *testing.T) {
	for _, m := range []Mount{{X: math.NaN()}, {Z: math.Inf(1)}, {Pitch: math.Inf(-1)}, {Yaw: math.NaN()}} {
		_, err := NewBEV(BEVConfig{Mount: m})
		if err == nil || !strings.Contains(err.Error(), "not finite") {
			t.Errorf("NewBEV with mount %+v: %v, want an error saying which field is not finite", m, err)
		}
	}
}

// Holds is Fill's test of a point: finite z and intensity, inside the
// raster once placed. Each point alone, Fill draws a cell exactly when
// Holds says so.
func TestHoldsIsWhatFillDraws(t *testing.T) {
	b, err := NewBEV(BEVConfig{H: 4, W: 4, Cell: 1, Mount: Mount{X: 2, Yaw: math.Pi}})
	if err != nil {
		t.Fatal(err)
	}
	nan := float32(math.NaN())
	dst := make([]float32, b.Len())
	for _, tc := range []struct {
		p    Point
		want bool
	}{
		{Point{X: 1.5, Y: 0.5}, true},   // at (0.5, -0.5): the mount turns it round
		{Point{X: -1.5, Y: 0.5}, true},  // at (3.5, -0.5)
		{Point{X: -2.5, Y: 0.5}, false}, // at (4.5, -0.5): beyond the top
		{Point{X: 2.5}, false},          // at (-0.5, 0): behind the robot
		{Point{X: 1, Z: nan}, false},
		{Point{X: 1, I: nan}, false},
		{Point{X: float32(math.Inf(1))}, false},
	} {
		if got := b.Holds(tc.p); got != tc.want {
			t.Errorf("Holds(%+v) = %v, want %v", tc.p, got, tc.want)
		}
		if err := b.Fill(&Points{P: []Point{tc.p}}, dst); err != nil {
			t.Fatal(err)
		}
		drawn := false
		for _, v := range dst[:16] { // occupancy
			drawn = drawn || v != 0
		}
		if drawn != tc.want {
			t.Errorf("Fill of %+v alone drew a cell: %v, want %v", tc.p, drawn, tc.want)
		}
	}
}
