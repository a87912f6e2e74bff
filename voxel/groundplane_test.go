package voxel

import (
	"math"
	"testing"
)

// upOf is the robot's up in the clouds' frame under m: Rᵀ·z. Roll and
// pitch set it; yaw does not, and no ground can tell yaw.
func upOf(m Mount) [3]float64 {
	r := m.Transform().R
	return [3]float64{r[6], r[7], r[8]}
}

// The street scan from a LiDAR pitched down 8°, rolled 1.5° and turned
// 12°: with its mount the ground is level, 1.58 to 1.73 m under the
// LiDAR (pavements and road); with
// the mount's angles left out (or only its yaw given) the plane has the
// tilt, and Levelled gives the mount's roll and pitch back (the robot's
// up in the LiDAR's frame within 0.3°), and its yaw when it was given.
func TestGroundPlaneUnderATiltedLiDAR(t *testing.T) {
	pts := filtered(t, intoSensorFrame(scanPoints(t, scan115k), tiltedMount))
	var sc GroundScratch
	yawOnly := Mount{X: tiltedMount.X, Y: tiltedMount.Y, Yaw: tiltedMount.Yaw}
	for _, tc := range []struct {
		name   string
		mount  Mount
		level  bool // the plane found level
		yawToo bool // Levelled keeps the yaw
	}{
		{"with its mount", tiltedMount, true, true},
		{"x, y and yaw only", yawOnly, false, true},
		{"no mount", Mount{}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := NewBEV(BEVConfig{GroundZ: roadZ, Mount: tc.mount})
			if err != nil {
				t.Fatal(err)
			}
			p, ok := b.GroundPlaneEstimate(pts, &sc)
			if !ok {
				t.Fatal("no plane found")
			}
			tilt := p.Tilt() * 180 / math.Pi
			h := -p.HeightAbove(tc.mount.X, tc.mount.Y, 0)
			t.Logf("plane z = %.3f %+.4f·x %+.4f·y through %d tiles: tilt %.2f°, LiDAR %.3f m above it", p.Z0, p.SlopeX, p.SlopeY, p.Tiles, tilt, -h)
			if p.Tiles < 8 {
				t.Errorf("plane through %d tiles, want 8 or more of 25", p.Tiles)
			}
			// The road lies 1.73 m below the LiDAR, the pavements beyond
			// the kerbs 1.58 m: both are ground, and the plane runs
			// through the tiles of both.
			if -h < -walkZ || -h > -roadZ {
				t.Errorf("LiDAR %.3f m above the plane, want between the pavements' %.2f and the road's %.2f", -h, -walkZ, -roadZ)
			}
			if tc.level {
				if tilt > 0.2 {
					t.Errorf("with its mount the ground tilts %.2f°, want under 0.2°", tilt)
				}
				return
			}
			if tilt < 7 {
				t.Errorf("without the mount's tilt the ground tilts %.2f°, want about 8°", tilt)
			}
			got := tc.mount.Levelled(p)
			up, want := upOf(got), upOf(tiltedMount)
			if a := math.Acos(min(1, up[0]*want[0]+up[1]*want[1]+up[2]*want[2])) * 180 / math.Pi; a > 0.3 {
				t.Errorf("levelled mount %+v has the robot's up %.2f° from the true mount's", got, a)
			}
			const deg = 180 / math.Pi
			t.Logf("levelled: roll %.2f°, pitch %.2f°, yaw %.2f° (true %.2f°, %.2f°, %.2f°)", got.Roll*deg, got.Pitch*deg, got.Yaw*deg,
				tiltedMount.Roll*deg, tiltedMount.Pitch*deg, tiltedMount.Yaw*deg)
			if tc.yawToo {
				for _, a := range []struct {
					name      string
					got, want float64
				}{{"roll", got.Roll, tiltedMount.Roll}, {"pitch", got.Pitch, tiltedMount.Pitch}, {"yaw", got.Yaw, tiltedMount.Yaw}} {
					if math.Abs(a.got-a.want)*deg > 0.3 {
						t.Errorf("levelled %s %.2f°, the mount's %.2f°", a.name, a.got*deg, a.want*deg)
					}
				}
			}
			if got.X != tc.mount.X || got.Y != tc.mount.Y || got.Z != tc.mount.Z {
				t.Errorf("Levelled moved the mount: %+v from %+v", got, tc.mount)
			}
		})
	}
	b, err := NewBEV(BEVConfig{GroundZ: roadZ, Mount: yawOnly})
	if err != nil {
		t.Fatal(err)
	}
	if a := testing.AllocsPerRun(10, func() { b.GroundPlaneEstimate(pts, &sc) }); a != 0 {
		t.Errorf("GroundPlaneEstimate allocates %v times per call, want 0", a)
	}
}

// A plane needs ground spread over the window: a patch in one tile, or a
// strip a metre wide, gives none (a centimetre of bumps across it would
// tilt the plane by a degree). A tile raised off the others (a
// wall that hides its ground) is left out of the fit.
func TestGroundPlaneNeedsGroundAcrossTheWindow(t *testing.T) {
	b, err := NewBEV(BEVConfig{}) // 25.6 × 25.6 m: tiles of 6.4 m
	if err != nil {
		t.Fatal(err)
	}
	grid := func(x0, x1, y0, y1 float32, z func(x, y float32) float32) []Point {
		var p []Point
		for x := x0; x < x1; x += 0.4 {
			for y := y0; y < y1; y += 0.4 {
				p = append(p, Point{X: x, Y: y, Z: z(x, y)})
			}
		}
		return p
	}
	slope := func(x, y float32) float32 { return -1 + 0.05*x - 0.02*y }
	diagonal := func(z func(x, y float32) float32) []Point {
		var p []Point
		for d := float32(0.5); d < 17; d += 0.2 {
			for w := float32(0); w < 1; w += 0.2 {
				x, y := d*0.707+w*0.707, -8+d*0.707-w*0.707
				p = append(p, Point{X: x, Y: y, Z: z(x, y)})
			}
		}
		return p
	}
	var sc GroundScratch
	for _, tc := range []struct {
		name string
		pts  []Point
		ok   bool
	}{
		{"a patch in one tile", grid(1, 5, 1, 5, slope), false},
		{"a strip 1 m wide, across", grid(2, 3, -12.7, 12.7, slope), false},
		{"a strip 1 m wide, ahead", grid(0.1, 25.5, 3, 4, slope), false},
		{"a strip 1 m wide, diagonal", diagonal(slope), false},
		{"a strip 8 m wide, ahead", grid(0.1, 25.5, -4, 4, slope), true},
		{"the whole window", grid(0.1, 25.5, -12.7, 12.7, slope), true},
		// One whole tile (5.12 m square) 2 m up: its point lies off the
		// plane; a least-squares fit through all 25 would tilt by it.
		{"the whole window, a tile 2 m up", grid(0.1, 25.5, -12.7, 12.7, func(x, y float32) float32 {
			if x >= 10.24 && x < 15.36 && y >= 7.68 {
				return slope(x, y) + 2
			}
			return slope(x, y)
		}), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, ok := b.GroundPlaneEstimate(&Points{P: tc.pts}, &sc)
			if ok != tc.ok {
				t.Fatalf("plane %+v, %v; want found %v", p, ok, tc.ok)
			}
			if !ok {
				return
			}
			if math.Abs(p.SlopeX-0.05) > 0.002 || math.Abs(p.SlopeY+0.02) > 0.002 || math.Abs(p.Z0+1) > 0.05 {
				t.Errorf("plane %+v, want z = -1 + 0.05·x - 0.02·y", p)
			}
		})
	}
}
