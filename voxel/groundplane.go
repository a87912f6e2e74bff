package voxel

import (
	"math"
	"slices"
)

// GroundPlane is a plane z = Z0 + SlopeX·x + SlopeY·y in the robot frame
// (the clouds' frame moved by the BEV's Mount).
type GroundPlane struct {
	Z0, SlopeX, SlopeY float64
	// Tiles is how many of the raster's tiles it was fitted through.
	Tiles int
}

// ZAt returns the plane's z at (x, y).
func (p GroundPlane) ZAt(x, y float64) float64 { return p.Z0 + p.SlopeX*x + p.SlopeY*y }

// Tilt returns the plane's angle from level, in radians.
func (p GroundPlane) Tilt() float64 { return math.Atan(math.Hypot(p.SlopeX, p.SlopeY)) }

// HeightAbove returns how far the point (x, y, z) lies above the plane,
// measured along its normal (negative below it).
func (p GroundPlane) HeightAbove(x, y, z float64) float64 {
	return (z - p.ZAt(x, y)) / math.Sqrt(1+p.SlopeX*p.SlopeX+p.SlopeY*p.SlopeY)
}

// The ground plane's fit: the raster's window in groundTiles ×
// groundTiles tiles; in each, a low voxel stands for the ground there;
// the plane through most of those points, tiles that lie off it (parked
// cars hiding the pavement behind them, a pit) left out.
const (
	groundTiles       = 5
	groundTileSamples = 48 // voxels sampled per tile, spread over its voxels
	// groundTileMin voxels a tile needs to stand for the ground.
	groundTileMin = 12
	// groundPlaneMinTiles fit a plane; fewer cannot tell a slope from
	// the scene's bumps.
	groundPlaneMinTiles = 4
	// groundOutlierM: a tile farther than this from a plane does not
	// lie on it (a kerb's height: the road and the pavement may both).
	groundOutlierM = 0.15
	// groundMinSpreadM: the tiles' points must spread at least this much
	// (standard deviation) in every direction to fix a slope.
	groundMinSpreadM = 1.0
)

// GroundScratch is GroundPlaneEstimate's working memory: caller-owned so
// that the estimate allocates nothing. The zero value is ready.
type GroundScratch struct {
	count [groundTiles * groundTiles]int // voxels per tile
	seen  [groundTiles * groundTiles]int
	n     [groundTiles * groundTiles]int // samples taken
	s     [groundTiles * groundTiles][groundTileSamples][3]float32
	at    [groundTiles * groundTiles][3]float64 // each tile's ground point
	use   [groundTiles * groundTiles]bool
	in    [groundTiles * groundTiles]bool
}

// GroundPlaneEstimate fits the ground's plane to the voxels of pts inside
// the raster's x/y window, in the robot frame: in each of 5 × 5 tiles of
// the window, the voxel at the 5th percentile of height stands for the
// ground there (below every obstacle there is ground; not the lowest,
// which may be a stray return below it, but in a tile of fewer than 20
// voxels; not higher, where a tile seen mostly as wall has its wall); of the planes through
// three such points, the one with the most points within 0.15 m wins
// (tiles with no ground in sight, say behind parked cars, lie off it),
// and the least-squares plane through its points is the answer. It
// returns false when fewer than 4 tiles had 12 voxels or lie on one
// plane, or when they lie in a line. The slope says whether the Mount's
// angles are right: a LiDAR pitched down more than its Mount says makes
// the ground rise ahead.
func (b *BEV) GroundPlaneEstimate(pts *Points, sc *GroundScratch) (GroundPlane, bool) {
	c := b.cfg
	x0, x1 := float64(c.MinX), float64(c.MinX+float32(float64(c.H)*b.cell))
	halfW := float64(float32(float64(c.W) / 2 * b.cell))
	tileOf := func(p Point) (x, y float64, z float32, tile int, ok bool) {
		if !finite32(p.Z) || !finite32(p.I) { // as Fill
			return 0, 0, 0, 0, false
		}
		x, y, z = b.place(p)
		if !(x >= x0 && x < x1 && y > -halfW && y <= halfW) {
			return 0, 0, 0, 0, false
		}
		tx := min(int((x-x0)/(x1-x0)*groundTiles), groundTiles-1)
		ty := min(int((y+halfW)/(2*halfW)*groundTiles), groundTiles-1)
		return x, y, z, ty*groundTiles + tx, true
	}
	clear(sc.count[:])
	clear(sc.seen[:])
	clear(sc.n[:])
	for _, p := range pts.P {
		if _, _, _, t, ok := tileOf(p); ok {
			sc.count[t]++
		}
	}
	for _, p := range pts.P {
		x, y, z, t, ok := tileOf(p)
		if !ok {
			continue
		}
		stride := max(1, (sc.count[t]+groundTileSamples-1)/groundTileSamples) // ceil
		if sc.seen[t]%stride == 0 && sc.n[t] < groundTileSamples {
			sc.s[t][sc.n[t]] = [3]float32{float32(x), float32(y), z}
			sc.n[t]++
		}
		sc.seen[t]++
	}
	tiles := 0
	for t := range sc.n {
		sc.use[t] = sc.n[t] >= groundTileMin
		if !sc.use[t] {
			continue
		}
		s := sc.s[t][:sc.n[t]]
		slices.SortFunc(s, func(a, b [3]float32) int {
			switch {
			case a[2] < b[2]:
				return -1
			case a[2] > b[2]:
				return 1
			}
			return 0
		})
		q := s[len(s)/20]
		sc.at[t] = [3]float64{float64(q[0]), float64(q[1]), float64(q[2])}
		tiles++
	}
	if tiles < groundPlaneMinTiles {
		return GroundPlane{}, false
	}
	// The plane through three points that most points lie on, by trying
	// every three (2,300 of 25: a few tens of microseconds).
	best := 0
	var bestPlane GroundPlane
	for i := range sc.at {
		for j := i + 1; sc.use[i] && j < len(sc.at); j++ {
			for k := j + 1; sc.use[j] && k < len(sc.at); k++ {
				if !sc.use[k] {
					continue
				}
				p, ok := planeThrough(sc.at[i], sc.at[j], sc.at[k])
				if !ok {
					continue
				}
				if n := onPlane(p, sc.at[:], sc.use[:], nil); n > best {
					best, bestPlane = n, p
				}
			}
		}
	}
	if best < groundPlaneMinTiles {
		return GroundPlane{}, false
	}
	onPlane(bestPlane, sc.at[:], sc.use[:], sc.in[:])
	p, ok := fitPlane(sc.at[:], sc.in[:])
	p.Tiles = best
	return p, ok
}

// planeThrough is the plane through three points, false when they lie
// (nearly) in a line seen from above: less than 1 m² between them.
func planeThrough(p, q, r [3]float64) (GroundPlane, bool) {
	ux, uy, uz := q[0]-p[0], q[1]-p[1], q[2]-p[2]
	vx, vy, vz := r[0]-p[0], r[1]-p[1], r[2]-p[2]
	nz := ux*vy - uy*vx // twice the area seen from above
	if math.Abs(nz) < 2 {
		return GroundPlane{}, false
	}
	nx, ny := uy*vz-uz*vy, uz*vx-ux*vz
	a, b := -nx/nz, -ny/nz
	return GroundPlane{Z0: p[2] - a*p[0] - b*p[1], SlopeX: a, SlopeY: b}, true
}

// onPlane counts the used points within groundOutlierM of p, marking them
// in in when it is not nil.
func onPlane(p GroundPlane, at [][3]float64, use, in []bool) int {
	n := 0
	for t, u := range use {
		on := u && math.Abs(at[t][2]-p.ZAt(at[t][0], at[t][1])) <= groundOutlierM
		if on {
			n++
		}
		if in != nil {
			in[t] = on
		}
	}
	return n
}

// fitPlane is the least-squares plane z = z0 + a·x + b·y through the used
// points (centred first, for a well-conditioned solve); false when they
// lie about a line: spread less than groundMinSpreadM across it, where
// a few centimetres of bumps would tilt the plane by degrees.
func fitPlane(at [][3]float64, use []bool) (GroundPlane, bool) {
	var n, mx, my, mz float64
	for t, u := range use {
		if u {
			n++
			mx += at[t][0]
			my += at[t][1]
			mz += at[t][2]
		}
	}
	mx, my, mz = mx/n, my/n, mz/n
	var sxx, sxy, syy, sxz, syz float64
	for t, u := range use {
		if !u {
			continue
		}
		dx, dy, dz := at[t][0]-mx, at[t][1]-my, at[t][2]-mz
		sxx += dx * dx
		sxy += dx * dy
		syy += dy * dy
		sxz += dx * dz
		syz += dy * dz
	}
	det := sxx*syy - sxy*sxy
	// The smaller eigenvalue of the points' x/y covariance: their spread
	// squared in the direction they spread least.
	tr := (sxx + syy) / n
	least := tr/2 - math.Sqrt(max(0, tr*tr/4-det/(n*n)))
	if !(least >= groundMinSpreadM*groundMinSpreadM) {
		return GroundPlane{}, false
	}
	a := (sxz*syy - syz*sxy) / det
	b := (syz*sxx - sxz*sxy) / det
	return GroundPlane{Z0: mz - a*mx - b*my, SlopeX: a, SlopeY: b}, true
}
