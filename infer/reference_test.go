package infer

import (
	"math"
	"testing"

	"github.com/zerohop/zerohop/voxel"
)

// Behaviour of the shipped reference model (models/reference.onnx, see
// models/MODEL_CARD.md), observed through ONNX Runtime.
//
// Geometry used below is the raster's own (voxel.BEV.CellCenter, default
// config): cell (r, c) has its centre at x = (127.5-r)*0.2 m ahead and
// y = (63.5-c)*0.2 m to the left, so y = 0 is the border of columns 63 and
// 64. Sector k steers at -40+10k degrees: indices 0..3 are right of
// straight ahead, 5..8 left.

const (
	refGrid    = 128
	refImgH    = 144
	refImgW    = 256
	refSectors = 9
)

var (
	orange = [3]float32{1, 80.0 / 255, 0}
	grey   = [3]float32{0.5, 0.5, 0.5}
)

type refScene struct {
	bev   []float32 // [1,3,128,128]
	image []float32 // [1,3,144,256]
}

func newRefScene() refScene {
	s := refScene{bev: make([]float32, 3*refGrid*refGrid), image: make([]float32, 3*refImgH*refImgW)}
	s.paint(0, 0, refImgW, refImgH, grey)
	return s
}

// block marks BEV cells with x in [x0, x1) metres ahead and y in [y0, y1)
// metres to the left as occupied, with the given height.
func (s refScene) block(x0, x1, y0, y1 float64, height float32) {
	for r := 0; r < refGrid; r++ {
		for c := 0; c < refGrid; c++ {
			x, y := refCellCenter(r, c)
			if x >= x0 && x < x1 && y >= y0 && y < y1 {
				s.bev[0*refGrid*refGrid+r*refGrid+c] = 1
				s.bev[1*refGrid*refGrid+r*refGrid+c] = height
				s.bev[2*refGrid*refGrid+r*refGrid+c] = 0.7
			}
		}
	}
}

// refCellCenter is the centre of BEV cell (r, c) in metres, in float64 (the
// raster's float32 centres would put the cases' edges, which fall on
// centres, on either side); TestReferenceGeometryIsTheRasters holds it to
// voxel.BEV.
func refCellCenter(r, c int) (x, y float64) {
	return (127.5 - float64(r)) * 0.2, (63.5 - float64(c)) * 0.2
}

// The model reads the raster that voxel.BEV writes: every cell's centre here
// is that cell's in voxel.BEV, and a point there falls in that cell. (The
// model once put column 64's centre straight ahead, half a cell off the
// raster's, so that its left/right pairs were not the raster's.)
func TestReferenceGeometryIsTheRasters(t *testing.T) {
	raster, err := voxel.NewBEV(voxel.BEVConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg := raster.Config(); cfg.H != refGrid || cfg.W != refGrid || cfg.Cell != 0.2 || cfg.MinX != 0 {
		t.Fatalf("default raster %+v, the model reads 128 × 128 cells of 0.2 m from x = 0", cfg)
	}
	for r := range refGrid {
		for c := range refGrid {
			x, y := refCellCenter(r, c)
			rx, ry := raster.CellCenter(r, c)
			if math.Abs(x-float64(rx)) > 1e-5 || math.Abs(y-float64(ry)) > 1e-5 {
				t.Fatalf("cell (%d, %d): centre (%g, %g) here, (%g, %g) in the raster", r, c, x, y, rx, ry)
			}
			if gr, gc, ok := raster.Cell(float32(x), float32(y)); !ok || gr != r || gc != c {
				t.Fatalf("cell (%d, %d)'s centre falls in raster cell (%d, %d) %v", r, c, gr, gc, ok)
			}
		}
	}
}

// paint fills image pixels [u0,u1) x [v0,v1) with an RGB colour in [0,1].
func (s refScene) paint(u0, v0, u1, v1 int, rgb [3]float32) {
	for c := range 3 {
		for v := v0; v < v1; v++ {
			for u := u0; u < u1; u++ {
				s.image[c*refImgH*refImgW+v*refImgW+u] = rgb[c]
			}
		}
	}
}

// refOutputs runs the scene and returns copies of scores and clearance.
func refOutputs(t *testing.T, s *Session, scene refScene) (scores, clearance []float32) {
	t.Helper()
	copy(s.BEV(), scene.bev)
	copy(s.Image(), scene.image)
	if _, err := s.Run(); err != nil {
		t.Fatal(err)
	}
	return append([]float32(nil), s.Scores()...), append([]float32(nil), s.Clearance()...)
}

func newRefSession(t *testing.T) *Session {
	t.Helper()
	rt := requireRuntime(t)
	s, err := NewSession(rt, "../models/reference.onnx", ReferenceConfig(), SessionOptions{Providers: []string{ProviderCPU}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func minOf(v []float32) float32 {
	m := float32(math.Inf(1))
	for _, x := range v {
		m = min(m, x)
	}
	return m
}

// mirrored swaps left and right as the raster does: BEV column c <-> 127-c
// (y = 0 is the border of columns 63 and 64), image column u <-> 255-u.
func (s refScene) mirrored() refScene {
	m := refScene{bev: make([]float32, len(s.bev)), image: make([]float32, len(s.image))}
	for ch := range 3 {
		for r := 0; r < refGrid; r++ {
			for c := 0; c < refGrid; c++ {
				m.bev[ch*refGrid*refGrid+r*refGrid+(refGrid-1-c)] = s.bev[ch*refGrid*refGrid+r*refGrid+c]
			}
		}
		for v := 0; v < refImgH; v++ {
			for u := 0; u < refImgW; u++ {
				m.image[ch*refImgH*refImgW+v*refImgW+(refImgW-1-u)] = s.image[ch*refImgH*refImgW+v*refImgW+u]
			}
		}
	}
	return m
}

// project is the model card's camera: 90 degree horizontal FOV over 256
// pixels (f = 128), centre (128, 72), 0.8 m above the ground, pitched 10
// degrees down. It maps a ground point (x ahead, y left) to a pixel.
func project(x, y float64) (u, v float64) {
	p := 10 * math.Pi / 180
	forward := x*math.Cos(p) + 0.8*math.Sin(p)
	down := -x*math.Sin(p) + 0.8*math.Cos(p)
	return 128 + 128*(-y)/forward, 72 + 128*down/forward
}

func polar(rangeM, bearingDeg float64) (x, y float64) {
	b := bearingDeg * math.Pi / 180
	return rangeM * math.Cos(b), rangeM * math.Sin(b)
}

func argmin(v []float32) int {
	best := 0
	for i, x := range v {
		if x < v[best] {
			best = i
		}
	}
	return best
}

func near(a, b float32) bool { return math.Abs(float64(a-b)) < 1e-5 }

var (
	rightSectors = []int{0, 1, 2, 3}
	leftSectors  = []int{5, 6, 7, 8}
)

func pick(v []float32, idx []int) []float32 {
	out := make([]float32, len(idx))
	for i, k := range idx {
		out[i] = v[k]
	}
	return out
}

func TestReferenceEmptySceneScoresAllSectorsEqually(t *testing.T) {
	s := newRefSession(t)
	scores, clearance := refOutputs(t, s, newRefScene())
	if len(scores) != refSectors || len(clearance) != refSectors {
		t.Fatalf("got %d scores and %d clearances, want %d", len(scores), len(clearance), refSectors)
	}
	for k := range scores {
		if !near(scores[k], 1) || !near(clearance[k], 8) {
			t.Fatalf("empty BEV, grey image: scores %v clearance %v; want all 1 and 8 m", scores, clearance)
		}
	}
}

func TestReferenceBEVObstacles(t *testing.T) {
	s := newRefSession(t)
	x30, y30 := polar(5, 30)
	cases := []struct {
		name  string
		scene func(refScene)
		// lowered: which side must lose clearance ("left", "right", "both"
		// as mirror images, or "" for none); the other side stays at 8 m.
		lowered      string
		nearest      [2]float32 // range of the smallest clearance, metres
		nearestIndex int        // sector with the smallest clearance; -1 = any
	}{
		{"a tall block ahead-left lowers left sectors only",
			func(sc refScene) { sc.block(3.8, 4.6, 1.6, 2.6, 0.5) }, "left", [2]float32{3.8, 4.6}, -1},
		{"a post 5 m away at 30 degrees left blocks the 30 degree sector",
			func(sc refScene) { sc.block(x30-0.1, x30+0.1, y30-0.1, y30+0.1, 1.0) }, "left", [2]float32{4.8, 5.2}, 7},
		{"a tall block ahead-right lowers right sectors only",
			func(sc refScene) { sc.block(3.8, 4.6, -2.7, -1.7, 0.5) }, "right", [2]float32{3.8, 4.6}, -1},
		{"a wall straight ahead at 2 m blocks the middle symmetrically",
			func(sc refScene) { sc.block(1.9, 2.1, -0.5, 0.6, 1.0) }, "both", [2]float32{1.8, 2.2}, 4},
		{"occupied cells lower than 0.2 m are not obstacles",
			func(sc refScene) { sc.block(2, 4, -1, 1, 0.1) }, "", [2]float32{8, 8}, -1},
		{"obstacles beyond the 8 m near field are ignored",
			func(sc refScene) { sc.block(9, 12, -3, 3, 2) }, "", [2]float32{8, 8}, -1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			scene := newRefScene()
			tc.scene(scene)
			scores, clearance := refOutputs(t, s, scene)
			left, right := pick(clearance, leftSectors), pick(clearance, rightSectors)
			untouched := func(side []float32) bool { return minOf(side) == 8 }
			var ok bool
			switch tc.lowered {
			case "left":
				ok = minOf(left) < 8 && untouched(right) && minOf(pick(scores, leftSectors)) < minOf(pick(scores, rightSectors))
			case "right":
				ok = minOf(right) < 8 && untouched(left) && minOf(pick(scores, rightSectors)) < minOf(pick(scores, leftSectors))
			case "both":
				ok = minOf(left) < 8 && minOf(right) < 8
				for k := range clearance {
					ok = ok && near(clearance[k], clearance[refSectors-1-k])
				}
			case "":
				ok = untouched(left) && untouched(right) && clearance[4] == 8
			}
			if m := minOf(clearance); !ok || m < tc.nearest[0] || m > tc.nearest[1] {
				t.Fatalf("clearance %v (scores %v): want %q side lowered, nearest in %v m", clearance, scores, tc.lowered, tc.nearest)
			}
			if tc.nearestIndex >= 0 && clearance[tc.nearestIndex] != minOf(clearance) {
				t.Fatalf("clearance %v: want the smallest in sector %d", clearance, tc.nearestIndex)
			}
			for k := range scores {
				if !near(scores[k], clearance[k]/8) {
					t.Fatalf("grey image: score %v should be clearance/8 = %v (sector %d)", scores[k], clearance[k]/8, k)
				}
			}
		})
	}
}

func TestReferenceImageHazard(t *testing.T) {
	s := newRefSession(t)
	// A 0.8 m square of orange paint on the ground 3 m away, 30 degrees
	// left, painted over the box its corners project to.
	x30, y30 := polar(3, 30)
	uA, vA := project(x30+0.4, y30+0.4) // far left corner
	uB, vB := project(x30-0.4, y30-0.4) // near right corner
	cases := []struct {
		name         string
		scene        func(refScene)
		penalised    string // "right", "left" or "" (none)
		mostIndex    int    // most penalised sector; -1 = any
		minPenalised float32
	}{
		{"an orange patch in the lower right penalises right sectors",
			func(sc refScene) { sc.paint(160, 100, 240, 144, orange) }, "right", -1, 0.9},
		{"an orange patch in the lower left penalises left sectors",
			func(sc refScene) { sc.paint(16, 100, 96, 144, orange) }, "left", -1, 0.9},
		{"orange paint on the ground 3 m away at 30 degrees left penalises the 30 degree sector most",
			func(sc refScene) {
				sc.paint(int(min(uA, uB)), int(min(vA, vB)), int(max(uA, uB)), int(max(vA, vB)), orange)
			}, "left", 7, 0.5},
		{"a single orange pixel costs at most 1/16 (hazards are averaged over 4x4 blocks)",
			func(sc refScene) { sc.paint(127, 131, 128, 132, orange) }, "tiny", -1, 0},
		{"orange above the horizon is not on the ground",
			func(sc refScene) { sc.paint(0, 0, 256, 40, orange) }, "", -1, 0},
		{"a white patch is not a hazard",
			func(sc refScene) { sc.paint(160, 100, 240, 144, [3]float32{1, 1, 1}) }, "", -1, 0},
		{"a brown patch is not a hazard",
			func(sc refScene) { sc.paint(160, 100, 240, 144, [3]float32{0.6, 0.4, 0.25}) }, "", -1, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			scene := newRefScene()
			tc.scene(scene)
			scores, clearance := refOutputs(t, s, scene)
			if minOf(clearance) != 8 {
				t.Fatalf("the image must not change clearance: %v", clearance)
			}
			penalty := make([]float32, len(scores))
			for k := range scores {
				penalty[k] = 1 - scores[k]
			}
			left, right := pick(penalty, leftSectors), pick(penalty, rightSectors)
			var hit, clear []float32
			switch tc.penalised {
			case "tiny":
				if p := maxOf(penalty); p <= 0 || p > 1.0/16+1e-6 {
					t.Fatalf("scores %v: want a largest penalty in (0, 1/16]", scores)
				}
				return
			case "right":
				hit, clear = right, left
			case "left":
				hit, clear = left, right
			default:
				clear = penalty
			}
			for _, p := range clear {
				if !near(p, 0) {
					t.Fatalf("scores %v: want no penalty outside the %q side", scores, tc.penalised)
				}
			}
			if hit != nil && maxOf(hit) < tc.minPenalised {
				t.Fatalf("scores %v: want a penalty of at least %v on the %s", scores, tc.minPenalised, tc.penalised)
			}
			if tc.mostIndex >= 0 && argmin(scores) != tc.mostIndex {
				t.Fatalf("scores %v: want sector %d penalised most", scores, tc.mostIndex)
			}
		})
	}
}

func maxOf(v []float32) float32 {
	m := float32(math.Inf(-1))
	for _, x := range v {
		m = max(m, x)
	}
	return m
}

// Left and right are mirror images: a mirrored scene scores mirrored.
func TestReferenceMirrorSymmetry(t *testing.T) {
	s := newRefSession(t)
	scene := newRefScene()
	scene.block(2.6, 3.4, 0.8, 1.6, 0.6)
	scene.block(6, 7, -3, -2, 0.6)
	scene.paint(150, 90, 230, 130, orange)
	scores, clearance := refOutputs(t, s, scene)
	mScores, mClearance := refOutputs(t, s, scene.mirrored())
	for k := range scores {
		j := refSectors - 1 - k
		if !near(scores[k], mScores[j]) || !near(clearance[k], mClearance[j]) {
			t.Fatalf("sector %d vs mirrored %d: scores %v vs %v, clearance %v vs %v", k, j, scores, mScores, clearance, mClearance)
		}
	}
	if near(scores[0], scores[8]) && near(scores[2], scores[6]) {
		t.Fatalf("the scene is not symmetric, yet scores are: %v", scores)
	}
}

// score = clearance/8 - hazard penalty, each from its own modality: the
// effects of a BEV obstacle and an image hazard add up.
func TestReferenceModalitiesCombine(t *testing.T) {
	s := newRefSession(t)
	withBlock := func(sc refScene) { sc.block(2.0, 3.0, 0.5, 1.5, 0.5) }
	withPatch := func(sc refScene) { sc.paint(140, 96, 220, 140, orange) }
	bevOnly, imgOnly, both := newRefScene(), newRefScene(), newRefScene()
	withBlock(bevOnly)
	withPatch(imgOnly)
	withBlock(both)
	withPatch(both)
	sb, _ := refOutputs(t, s, bevOnly)
	si, _ := refOutputs(t, s, imgOnly)
	sAll, _ := refOutputs(t, s, both)
	changedByBoth := false
	for k := range sAll {
		if !near(sAll[k], sb[k]+si[k]-1) {
			t.Fatalf("sector %d: both %v, want bev-only %v + image-only %v - 1", k, sAll[k], sb[k], si[k])
		}
		changedByBoth = changedByBoth || (sb[k] < 1 && si[k] < 1)
	}
	if !changedByBoth {
		t.Fatalf("the test scene should affect some sector through both inputs: bev %v image %v", sb, si)
	}
}

// The LiDAR-only variant (models/reference_lidar.onnx) is the full model's
// BEV branch: on every scene its outputs equal the full model's with a
// hazard-free image, and it has no image input to fill.
func TestReferenceLidarIsTheBEVBranch(t *testing.T) {
	full := newRefSession(t)
	lidar, err := NewSession(requireRuntime(t), "../models/reference_lidar.onnx", ReferenceLidarConfig(), SessionOptions{Providers: []string{ProviderCPU}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lidar.Close() })
	if lidar.Image() != nil {
		t.Fatalf("the LiDAR-only session has an image input of %d values", len(lidar.Image()))
	}
	empty, block, post := newRefScene(), newRefScene(), newRefScene()
	block.block(3.8, 4.6, 1.6, 2.6, 1)
	x, y := polar(5, 30)
	post.block(x-0.1, x+0.1, y-0.1, y+0.1, 1)
	for name, scene := range map[string]refScene{"empty": empty, "block": block, "post": post} {
		wantS, wantC := refOutputs(t, full, scene)
		copy(lidar.BEV(), scene.bev)
		if _, err := lidar.Run(); err != nil {
			t.Fatal(err)
		}
		for k := range wantS {
			if lidar.Scores()[k] != wantS[k] || lidar.Clearance()[k] != wantC[k] {
				t.Fatalf("%s, sector %d: LiDAR-only score %v clearance %v, the full model's %v and %v",
					name, k, lidar.Scores()[k], lidar.Clearance()[k], wantS[k], wantC[k])
			}
		}
		if name != "empty" && minOf(wantS) >= 1 {
			t.Fatalf("%s: the scene changes no score (%v): the comparison shows nothing", name, wantS)
		}
	}
}
