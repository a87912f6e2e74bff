package voxel

import (
	"math"
	"testing"
)

// ring is n points on a circle of radius r at height z, in the raster
// (ahead of the robot: x > 0), as a level planar scan's returns.
func ring(n int, r, z float32) []Point {
	pts := make([]Point, n)
	for i := range pts {
		th := -math.Pi/2 + math.Pi*float64(i)/float64(n)
		pts[i] = Point{X: r * float32(math.Cos(th)), Y: r * float32(math.Sin(th)), Z: z, I: 0.5}
	}
	return pts
}

// A level scan's points lie in one slab above the ground; a 3D cloud's
// ground, a slab too thick, too few points, or points outside the raster
// or not finite (which Fill does not draw) decide as Fill would see it.
func TestLevelAbove(t *testing.T) {
	bevAt := func(m Mount, groundZ float32) *BEV {
		b, err := NewBEV(BEVConfig{Mount: m, GroundZ: groundZ})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	scan := ring(100, 3, 0.15)
	withGround := append(append([]Point(nil), scan...), Point{X: 2, Y: 0, Z: 0.01, I: 0.2})
	thick := append(append([]Point(nil), scan...), Point{X: 2, Y: 0, Z: 0.3, I: 0.2})
	outside := append(append([]Point(nil), scan...), Point{X: -5, Y: 0, Z: 0, I: 0.2}, Point{X: 2, Y: 0, Z: float32(math.NaN())})
	for _, tc := range []struct {
		name   string
		bev    *BEV
		pts    []Point
		ok     bool
		height float32
	}{
		{"a level scan 0.15 m up", bevAt(Mount{}, 0), scan, true, 0.15},
		{"a 3D cloud's ground", bevAt(Mount{}, 0), withGround, false, 0},
		{"a slab 0.15 m thick", bevAt(Mount{}, 0), thick, false, 0},
		{"too few points", bevAt(Mount{}, 0), scan[:15], false, 0},
		{"points Fill does not draw are not looked at", bevAt(Mount{}, 0), outside, true, 0.15},
		// In the scanner's frame (z = 0), placed 0.15 m up by the mount.
		{"mounted", bevAt(Mount{Z: 0.15, Yaw: 0.3}, 0), ring(100, 3, 0), true, 0.15},
		// The ground the raster measures from, in the clouds' frame.
		{"the scan at the ground", bevAt(Mount{}, 0.15), scan, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, ok := tc.bev.LevelAbove(&Points{P: tc.pts}, 0.05, 0.1, 16)
			if ok != tc.ok || (ok && math.Abs(float64(h-tc.height)) > 1e-6) {
				t.Errorf("LevelAbove = %v, %v; want %v, %v", h, ok, tc.height, tc.ok)
			}
		})
	}
	b := bevAt(Mount{}, 0)
	pts := &Points{P: scan}
	if a := testing.AllocsPerRun(100, func() { b.LevelAbove(pts, 0.05, 0.1, 16) }); a != 0 {
		t.Errorf("%.1f allocations, want 0", a)
	}
}
