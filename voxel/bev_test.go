package voxel

import (
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"
)

// TestBEVCellConvention pins the raster convention that the reference model
// relies on: row 0 farthest ahead, the robot at the bottom centre, columns
// increasing to the robot's right.
func TestBEVCellConvention(t *testing.T) {
	tests := []struct {
		name     string
		cfg      BEVConfig
		x, y     float32
		row, col int
		ok       bool
	}{
		{"just ahead, just left", BEVConfig{}, 0.1, 0.1, 127, 63, true},
		{"just ahead, just right", BEVConfig{}, 0.1, -0.1, 127, 64, true},
		{"on the centre line goes right", BEVConfig{}, 0.1, 0, 127, 64, true},
		{"farthest row", BEVConfig{}, 25.5, 0.1, 0, 63, true},
		{"left edge", BEVConfig{}, 10.1, 12.8, 77, 0, true},
		{"right edge", BEVConfig{}, 10.1, -12.79, 77, 127, true},
		{"behind the robot", BEVConfig{}, -0.01, 0, 0, 0, false},
		{"beyond the top", BEVConfig{}, 25.6, 0, 0, 0, false},
		{"beyond the left", BEVConfig{}, 1, 12.81, 0, 0, false},
		{"beyond the right", BEVConfig{}, 1, -12.8, 0, 0, false},
		{"NaN", BEVConfig{}, float32(math.NaN()), 0, 0, 0, false},
		{"area behind shown with MinX", BEVConfig{MinX: -6.4}, -0.1, 0.1, 96, 63, true},
		{"odd width centres the robot's column", BEVConfig{W: 5, H: 4, Cell: 1}, 0.5, 0.4, 3, 2, true},
		{"odd width, left neighbour", BEVConfig{W: 5, H: 4, Cell: 1}, 3.5, 0.6, 0, 1, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := NewBEV(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			row, col, ok := b.Cell(tc.x, tc.y)
			if ok != tc.ok || ok && (row != tc.row || col != tc.col) {
				t.Fatalf("Cell(%v, %v) = %d, %d, %v; want %d, %d, %v", tc.x, tc.y, row, col, ok, tc.row, tc.col, tc.ok)
			}
			if !ok {
				return
			}
			cx, cy := b.CellCenter(row, col)
			if r2, c2, ok2 := b.Cell(cx, cy); !ok2 || r2 != row || c2 != col {
				t.Fatalf("centre (%v, %v) of cell %d, %d maps to %d, %d", cx, cy, row, col, r2, c2)
			}
			half := b.Config().Cell / 2
			if math.Abs(float64(cx-tc.x)) > float64(half)+1e-6 || math.Abs(float64(cy-tc.y)) > float64(half)+1e-6 {
				t.Fatalf("centre (%v, %v) is more than half a cell from (%v, %v)", cx, cy, tc.x, tc.y)
			}
		})
	}
}

func TestBEVFill(t *testing.T) {
	b, err := NewBEV(BEVConfig{H: 4, W: 4, Cell: 1, GroundZ: -1, MaxHeight: 2})
	if err != nil {
		t.Fatal(err)
	}
	nan := float32(math.NaN())
	pts := &Points{P: []Point{
		{X: 0.5, Y: 1.5, Z: -0.5, I: 0.2},     // row 3, col 0: height 0.5
		{X: 0.7, Y: 1.2, Z: 0, I: 0.4},        // same cell: height 1, mean intensity 0.3
		{X: 3.5, Y: -1.5, Z: 5, I: 1},         // row 0, col 3: height clamped to 2
		{X: 2.5, Y: 0.5, Z: -3, I: 0.5},       // row 1, col 1: below ground, height 0, occupied
		{X: 9, Y: 0, Z: 0, I: 1},              // outside
		{X: 1.5, Y: -0.5, Z: nan, I: 1},       // non-finite: ignored
		{X: 1.5, Y: -0.5, Z: 0, I: nan},       // non-finite: ignored
		{X: float32(math.Inf(1)), Y: 0, Z: 0}, // outside
	}}
	dst := make([]float32, b.Len())
	for i := range dst {
		dst[i] = 7 // Fill must overwrite everything
	}
	if err := b.Fill(pts, dst); err != nil {
		t.Fatal(err)
	}
	want := make([]float32, 3*16)
	set := func(ch, row, col int, v float32) { want[ch*16+row*4+col] = v }
	set(ChannelOccupancy, 3, 0, 1)
	set(ChannelHeight, 3, 0, 1)
	set(ChannelIntensity, 3, 0, 0.3)
	set(ChannelOccupancy, 0, 3, 1)
	set(ChannelHeight, 0, 3, 2)
	set(ChannelIntensity, 0, 3, 1)
	set(ChannelOccupancy, 1, 1, 1)
	set(ChannelIntensity, 1, 1, 0.5)
	for i := range want {
		if math.Abs(float64(dst[i]-want[i])) > 1e-6 {
			t.Fatalf("element %d (channel %d, row %d, col %d): got %v, want %v", i, i/16, i%16/4, i%4, dst[i], want[i])
		}
	}
}

// TestBEVFromScan checks the raster of a whole synthetic street scan against
// what the scene must look like from above.
func TestBEVFromScan(t *testing.T) {
	pts := filteredScan(t, scan115k)
	b, err := NewBEV(BEVConfig{GroundZ: roadZ}) // 128 × 128 cells of 0.2 m
	if err != nil {
		t.Fatal(err)
	}
	dst := make([]float32, b.Len())
	if err := b.Fill(pts, dst); err != nil {
		t.Fatal(err)
	}
	at := func(ch int, x, y float32) float32 {
		row, col, ok := b.Cell(x, y)
		if !ok {
			t.Fatalf("(%v, %v) outside the raster", x, y)
		}
		return dst[ch*128*128+row*128+col]
	}
	// The road right ahead is seen, and is flat.
	if at(ChannelOccupancy, 6, 0.3) != 1 || at(ChannelHeight, 6, 0.3) > 0.1 {
		t.Errorf("road at (6, 0.3): occupancy %v, height %v", at(ChannelOccupancy, 6, 0.3), at(ChannelHeight, 6, 0.3))
	}
	// The building walls at y = ±12 m stand tall on both sides (seen up to
	// the top beam's +2°: about 2.4 m at 19 m range): the left wall in the
	// leftmost columns, the right wall in the rightmost.
	for _, y := range []float32{12.05, -12.05} {
		if h := at(ChannelHeight, 15, y); h < 2 {
			t.Errorf("wall at (15, %v): height %v, want over 2 m", y, h)
		}
	}
	if _, col, _ := b.Cell(15, 12.05); col > 5 {
		t.Errorf("left wall in column %d, want near 0", col)
	}
	// The nearest parked car on the left (y = 5.6 m) rises above the road.
	found := false
	for x := float32(0); x < 25 && !found; x += 0.2 {
		found = at(ChannelHeight, x, 5.6) > 1
	}
	if !found {
		t.Error("no car along y = 5.6 m")
	}
}

func TestBEVErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cfg     BEVConfig
		wantErr string
	}{
		{"other channel count", BEVConfig{Channels: 4}, "channels 4"},
		{"negative size", BEVConfig{H: -1}, "size -1 × 128"},
		{"huge size", BEVConfig{W: 1 << 15}, "out of range"},
		{"negative cell", BEVConfig{Cell: -0.1}, "cell -0.1 m"},
		{"NaN max height", BEVConfig{MaxHeight: float32(math.NaN())}, "max height NaN"},
		{"infinite ground", BEVConfig{GroundZ: float32(math.Inf(-1))}, "must be finite"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewBEV(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("NewBEV: got %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
	b, err := NewBEV(BEVConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Fill(&Points{}, make([]float32, 100)); err == nil || !strings.Contains(err.Error(), "tensor has 100 elements, want 3 × 128 × 128 = 49152") {
		t.Fatalf("Fill with a short tensor: %v", err)
	}
	dst := make([]float32, b.Len())
	two := []Point{{X: 1, Y: 0, Z: 0, I: 1}, {X: 2, Y: 0, Z: 0, I: 1}}
	if err := b.Fill(&Points{P: two, Top: []float32{0.5}}, dst); err == nil || !strings.Contains(err.Error(), "1 tops for 2 points") {
		t.Fatalf("Fill with one top for two points: %v", err)
	}
	other := &Points{P: two, Top: []float32{0.5, 0.5}, Mount: Mount{Z: 0.3}}
	if err := b.Fill(other, dst); err == nil || !strings.Contains(err.Error(), "tops were measured with mount {X:0 Y:0 Z:0.3") {
		t.Fatalf("Fill with tops of another mount: %v", err)
	}
}

// TestHeightIsTheHighestReturn: an obstacle's height channel is its
// highest return's, wherever the voxel boundaries fall. A post 0.25 m
// tall with the ground 0.1 m under a leaf boundary has its top voxel's
// points from 0.1 to 0.25 m above the ground, whose centroid reads
// 0.175 m, under the reference model's 0.2 m: an obstacle read as flat.
// Also under mounts that move and tilt the clouds, where the voxels are
// cubes of the sensor's frame.
func TestHeightIsTheHighestReturn(t *testing.T) {
	const post = 0.25
	for _, tc := range []struct {
		name string
		bev  BEVConfig
	}{
		{"ground 0.1 m under a leaf boundary", BEVConfig{GroundZ: -0.1}},
		{"ground on a leaf boundary", BEVConfig{GroundZ: 0}},
		{"LiDAR 0.5 m up, yawed", BEVConfig{Mount: Mount{Z: 0.5, Yaw: 30 * deg}}},
		{"LiDAR 0.43 m up, pitched and rolled", BEVConfig{Mount: Mount{Z: 0.43, Pitch: 9 * deg, Roll: -2 * deg}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := NewBEV(tc.bev)
			if err != nil {
				t.Fatal(err)
			}
			// A post at (3, 0.5) in the robot frame, a point every 5 mm
			// up to post metres above the ground, moved into the clouds'
			// frame.
			var pts [][4]float32
			for k := 0; k <= 50; k++ {
				x, y, z := 3.0, 0.5, float64(tc.bev.GroundZ)+post*float64(k)/50
				if b.mounted {
					x, y, z = b.tf.ApplyInverse(x, y, z)
				}
				pts = append(pts, [4]float32{float32(x), float32(y), float32(z), 1})
			}
			out := filterMounted(t, pts, 0.2, nil, tc.bev.Mount)
			dst := make([]float32, b.Len())
			if err := b.Fill(out, dst); err != nil {
				t.Fatal(err)
			}
			row, col, _ := b.Cell(3, 0.5)
			plane := b.cfg.H * b.cfg.W
			if h := dst[ChannelHeight*plane+row*b.cfg.W+col]; math.Abs(float64(h)-post) > 1e-5 {
				t.Errorf("the post's cell is %v m high, want its top's %v m", h, post)
			}
			// The centroids alone (no tops): lower, which is what the
			// tops are for; in the first case, under 0.2 m.
			centroids := &Points{P: out.P}
			if err := b.Fill(centroids, dst); err != nil {
				t.Fatal(err)
			}
			h := dst[ChannelHeight*plane+row*b.cfg.W+col]
			t.Logf("from centroids alone the post reads %.3f m", h)
			if h >= post-0.01 {
				t.Errorf("from centroids the post reads %v m, as high as its top: this case proves nothing", h)
			}
		})
	}
}

// TestCropForKeepsTheRaster: filtering with BEV.CropFor's box gives the
// same raster as filtering everything, bit for bit, whatever the leaf and
// raster placement (points on and around the window's edges included);
// and a garbage point far away (FLT_MAX, which some drivers write for "no
// return"), which fails the uncropped frame (ErrGridTooLarge, even at the
// largest leaf the agent allows), changes nothing.
func TestCropForKeepsTheRaster(t *testing.T) {
	scan, err := KITTI(ringScan(scan115k))
	if err != nil {
		t.Fatal(err)
	}
	var scanPts [][4]float32
	for i := range scan.Count {
		p := scan.Data[16*i:]
		scanPts = append(scanPts, [4]float32{
			math.Float32frombits(binary.LittleEndian.Uint32(p[0:])), math.Float32frombits(binary.LittleEndian.Uint32(p[4:])),
			math.Float32frombits(binary.LittleEndian.Uint32(p[8:])), math.Float32frombits(binary.LittleEndian.Uint32(p[12:]))})
	}
	edges := uniformCloud(20000, -40, 40, 7) // around and across every edge of the window
	for _, tc := range []struct {
		name string
		leaf float32
		bev  BEVConfig
		pts  [][4]float32
	}{
		{"scan, leaf 0.2", 0.2, BEVConfig{GroundZ: roadZ}, scanPts},
		{"scan, leaf 0.15, window behind the robot too", 0.15, BEVConfig{GroundZ: roadZ, MinX: -6.4}, scanPts},
		{"uniform, leaf 0.33 (not a divisor of the cell)", 0.33, BEVConfig{}, edges},
		{"uniform, leaf 1, odd raster", 1, BEVConfig{H: 37, W: 53, Cell: 0.7, MinX: -3.1}, edges},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := NewBEV(tc.bev)
			if err != nil {
				t.Fatal(err)
			}
			crop := b.CropFor(cube(tc.leaf))
			raster := func(pts [][4]float32, crop *Box) ([]float32, error) {
				f, err := NewFilter(Config{Leaf: cube(tc.leaf), Crop: crop}, len(pts))
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				out := NewPoints(len(pts))
				if err := f.Run(kittiCloud(pts), out); err != nil {
					return nil, err
				}
				dst := make([]float32, b.Len())
				return dst, b.Fill(out, dst)
			}
			want, err := raster(tc.pts, nil)
			if err != nil {
				t.Fatal(err)
			}
			got, err := raster(tc.pts, &crop)
			if err != nil {
				t.Fatal(err)
			}
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("cropped raster differs at %d: %v, uncropped %v (crop %+v)", i, got[i], want[i], crop)
				}
			}
			garbage := append(append([][4]float32(nil), tc.pts...), [4]float32{math.MaxFloat32, 1, 0.5, 1})
			if _, err := raster(garbage, nil); !errors.Is(err, ErrGridTooLarge) {
				t.Fatalf("uncropped with a FLT_MAX point: %v, want ErrGridTooLarge (else this case proves nothing)", err)
			}
			got, err = raster(garbage, &crop)
			if err != nil {
				t.Fatalf("cropped with a FLT_MAX point: %v", err)
			}
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("a FLT_MAX point changed the cropped raster at %d", i)
				}
			}
		})
	}
}

// filteredScan is a synthetic street scan filtered at 0.2 m, as the
// agent filters a frame.
func filteredScan(tb testing.TB, spec scanSpec) *Points {
	tb.Helper()
	cloud, err := KITTI(ringScan(spec))
	if err != nil {
		tb.Fatal(err)
	}
	f, err := NewFilter(Config{Leaf: cube(0.2)}, cloud.Count)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	pts := NewPoints(cloud.Count)
	if err := f.Run(cloud, pts); err != nil {
		tb.Fatal(err)
	}
	return pts
}

// The ground estimate finds the road of the street scans (KITTI's frame:
// the road 1.73 m below the sensor), among curbs, walls, cars, poles and
// people, with or without a BEV that already knows where it is, and with
// stray returns below the road; it allocates nothing.
func TestGroundZEstimateFindsTheRoad(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec scanSpec
		bev  BEVConfig
	}{
		{"64 beams, raster at the sensor's z", scan115k, BEVConfig{}},
		{"128 beams, raster on the road", scan288k, BEVConfig{GroundZ: roadZ}},
		{"64 beams, raster also behind, 0.5 m cells", scan115k, BEVConfig{MinX: -16, H: 64, W: 64, Cell: 0.5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pts := filteredScan(t, tc.spec)
			b, err := NewBEV(tc.bev)
			if err != nil {
				t.Fatal(err)
			}
			scratch := make([]float32, 512)
			z, n := b.GroundZEstimate(pts, scratch)
			if n < 256 || math.Abs(float64(z-roadZ)) > 0.1 {
				t.Fatalf("ground at z = %v from %d of %d voxels, want %v within 0.1 m from 256 or more", z, n, len(pts.P), roadZ)
			}
			// Stray returns 5 m below the road in 5 % of the voxels.
			for i := 0; i < len(pts.P); i += 20 {
				pts.P[i].Z = roadZ - 5
			}
			if z, _ := b.GroundZEstimate(pts, scratch); math.Abs(float64(z-roadZ)) > 0.1 {
				t.Errorf("with 5 %% stray returns 5 m below the road: ground at z = %v, want %v within 0.1 m", z, roadZ)
			}
			if a := testing.AllocsPerRun(20, func() { b.GroundZEstimate(pts, scratch) }); a != 0 {
				t.Errorf("GroundZEstimate allocates %v times per call, want 0", a)
			}
			t.Logf("ground at z = %.3f from %d of %d voxels", z, n, len(pts.P))
		})
	}
}

func TestGroundZEstimateWithNothingToGoOn(t *testing.T) {
	b, err := NewBEV(BEVConfig{})
	if err != nil {
		t.Fatal(err)
	}
	nan := float32(math.NaN())
	for _, tc := range []struct {
		name    string
		pts     []Point
		scratch int
	}{
		{"no voxels", nil, 16},
		{"every voxel behind the raster", []Point{{X: -1, Z: -1.7}, {X: -2, Z: -1.7}}, 16},
		{"NaN heights only", []Point{{X: 3, Z: nan}, {X: 4, Z: nan}}, 16},
		{"no scratch", []Point{{X: 3, Z: -1.7}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			z, n := b.GroundZEstimate(&Points{P: tc.pts}, make([]float32, tc.scratch))
			if n != 0 || !math.IsNaN(float64(z)) {
				t.Errorf("GroundZEstimate = %v from %d voxels, want NaN from 0", z, n)
			}
		})
	}
}

// TestCropUnderLeavesTheCeilingOut: a room's floor, a box 0.5 m tall and
// a ceiling 2.5 m up. Without a ceiling cut the ceiling marks every cell
// under it at the height cap (the reference model's obstacle everywhere:
// an indoor robot with an upward-looking LiDAR stopped in every
// direction); cut at 2 m only the box stands up. Level and yawed mounts
// cut at the ceiling exactly; a pitched one keeps its bounding box's top
// (exact false).
func TestCropUnderLeavesTheCeilingOut(t *testing.T) {
	for _, tc := range []struct {
		name  string
		bev   BEVConfig
		exact bool
	}{
		{"robot frame", BEVConfig{}, true},
		{"LiDAR 0.6 m up", BEVConfig{GroundZ: -0.6}, true},
		{"LiDAR 0.6 m up, yawed", BEVConfig{GroundZ: -0.6, Mount: Mount{Yaw: 0.5}}, true},
		{"LiDAR 0.6 m up, pitched", BEVConfig{GroundZ: -0.6, Mount: Mount{Pitch: 0.1}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := NewBEV(tc.bev)
			if err != nil {
				t.Fatal(err)
			}
			// Points at heights z above the ground, in the robot frame
			// (the ground at GroundZ), moved into the clouds' frame by the
			// inverse of the mount.
			var pts [][4]float32
			add := func(x, y, z float32) {
				cx, cy, cz := float64(x), float64(y), float64(z+tc.bev.GroundZ)
				if b.mounted {
					cx, cy, cz = b.tf.ApplyInverse(cx, cy, cz)
				}
				pts = append(pts, [4]float32{float32(cx), float32(cy), float32(cz), 1})
			}
			for i := range 55 {
				for j := range 60 {
					x, y := 0.5+float32(i)*0.1, -3+float32(j)*0.1
					add(x, y, 0)   // floor
					add(x, y, 2.5) // ceiling
				}
			}
			for z := float32(0); z <= 0.5; z += 0.05 {
				add(3, 0, z) // a box 0.5 m tall, 3 m ahead
			}
			box, exact := b.CropUnder(cube(0.1), 2)
			if exact != tc.exact {
				t.Fatalf("exact %t, want %t", exact, tc.exact)
			}
			// highest returns the highest cell off the box's (its cell
			// and those next to it, where a tilted voxel's centroid may
			// fall) and the box's height there.
			highest := func(crop *Box, ceiling *float32) (off, boxH float32) {
				out := filterConfigured(t, pts, Config{Leaf: cube(0.1), Crop: crop, Mount: tc.bev.Mount, Ceiling: ceiling})
				dst := make([]float32, b.Len())
				if err := b.Fill(out, dst); err != nil {
					t.Fatal(err)
				}
				plane := b.cfg.H * b.cfg.W
				row, col, _ := b.Cell(3, 0)
				for k, h := range dst[ChannelHeight*plane : (ChannelHeight+1)*plane] {
					if dr, dc := k/b.cfg.W-row, k%b.cfg.W-col; dr < -1 || dr > 1 || dc < -1 || dc > 1 {
						off = max(off, h)
					} else {
						boxH = max(boxH, h)
					}
				}
				return off, boxH
			}
			whole := b.CropFor(cube(0.1))
			if h, _ := highest(&whole, nil); h < 2.4 {
				t.Fatalf("without a ceiling cut the highest cell is %v m, want the ceiling's 2.5 m: the test sees no ceiling", h)
			}
			h, _ := highest(&box, nil)
			if tc.exact && h > 0.1 {
				t.Errorf("cut at 2 m, a cell off the box stands %v m high: the ceiling is still in", h)
			}
			if !tc.exact && h < 2.4 {
				t.Errorf("the tilted box alone cut the ceiling (highest cell %v m): this case does not show what Config.Ceiling is for", h)
			}
			// Config.Ceiling cuts at 2 m in the robot frame, tilted or
			// not, and leaves the box whole (its top point is 0.45 m up:
			// ten float32 steps of 0.05 overshoot 0.5).
			ceiling := tc.bev.GroundZ + 2
			if h, boxH := highest(&box, &ceiling); h > 0.1 || math.Abs(float64(boxH)-0.45) > 0.01 {
				t.Errorf("with a ceiling at 2 m, a cell off the box stands %v m high and the box %v m (want 0.45)", h, boxH)
			}
		})
	}
}
