package voxel

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
)

// scanSpec describes a synthetic spinning LiDAR scan: beams rings between
// two elevations, columns azimuth steps per turn.
type scanSpec struct {
	beams, columns   int
	elevMin, elevMax float64 // degrees
	seed             uint64
}

var (
	// HDL-64E-like, as in KITTI: 64 rings from +2° to -24.8°.
	scan115k = scanSpec{beams: 64, columns: 1800, elevMin: -24.8, elevMax: 2, seed: 1}
	// A 128-ring sensor with a wider field of view.
	scan288k = scanSpec{beams: 128, columns: 2400, elevMin: -25, elevMax: 15, seed: 2}
)

// ringScan ray-casts a deterministic street scene and returns the returns in
// KITTI layout, column by column as a spinning sensor emits them. The sensor
// is at the origin, 1.73 m above the road (KITTI's mounting height). The
// scene has a road with raised sidewalks, building walls with side streets,
// parked and moving cars, poles and pedestrians; rays that hit nothing
// within 100 m give no return, and 1% of returns drop out.
func ringScan(spec scanSpec) []byte {
	rng := rand.New(rand.NewPCG(spec.seed, 0x7a65726f686f70))
	s := newScene(rng)
	out := make([]byte, 0, spec.beams*spec.columns*XYZIStep)
	for col := range spec.columns {
		az := 2 * math.Pi * (float64(col) + 0.1*rng.Float64()) / float64(spec.columns)
		for b := range spec.beams {
			el := spec.elevMax - (spec.elevMax-spec.elevMin)*float64(b)/float64(spec.beams-1)
			el = el * math.Pi / 180
			d := [3]float64{math.Cos(el) * math.Cos(az), math.Cos(el) * math.Sin(az), math.Sin(el)}
			t, refl := s.cast(d)
			if t > 100 || rng.Float64() < 0.01 {
				continue
			}
			t += 0.015 * rng.NormFloat64()
			in := min(max(refl+0.05*rng.NormFloat64(), 0), 1)
			for _, v := range [4]float64{t * d[0], t * d[1], t * d[2], in} {
				out = binary.LittleEndian.AppendUint32(out, math.Float32bits(float32(v)))
			}
		}
	}
	return out
}

type box struct {
	cx, cy, yaw, length, width float64
	z0, z1, refl               float64
}

type cylinder struct {
	cx, cy, r, z0, z1, refl float64
}

type scene struct {
	boxes     []box
	cylinders []cylinder
}

const (
	roadZ     = -1.73
	walkZ     = -1.58
	curbY     = 7.0
	wallY     = 12.0
	wallTop   = 8.0
	noReturn  = math.MaxFloat64
	roadRefl  = 0.25
	walkRefl  = 0.35
	wallRefl  = 0.45
	carRefl   = 0.7
	poleRefl  = 0.85
	humanRefl = 0.3
)

// wallGaps are side streets: x ranges where the building walls are open.
var wallGaps = [][2]float64{{-35, -25}, {40, 50}}

func newScene(rng *rand.Rand) *scene {
	s := &scene{}
	for side := -1.0; side <= 1; side += 2 {
		for x := -60.0; x < 60; x += 6.5 + 3*rng.Float64() {
			if rng.Float64() < 0.3 {
				continue
			}
			s.boxes = append(s.boxes, box{cx: x, cy: side * 5.6, yaw: 0.1 * rng.NormFloat64(),
				length: 4.2 + 0.6*rng.Float64(), width: 1.8, z0: roadZ + 0.2, z1: roadZ + 1.5, refl: carRefl})
		}
		for x := -80.0; x < 80; x += 15 {
			s.cylinders = append(s.cylinders, cylinder{cx: x + 2*rng.Float64(), cy: side * 8.5, r: 0.15, z0: walkZ, z1: walkZ + 6, refl: poleRefl})
		}
	}
	for range 6 { // cars on the road
		s.boxes = append(s.boxes, box{cx: 8 + 50*rng.Float64(), cy: 2*rng.Float64() - 1.5, yaw: 0.2 * rng.NormFloat64(),
			length: 4.5, width: 1.9, z0: roadZ + 0.2, z1: roadZ + 1.6, refl: carRefl})
	}
	for range 10 { // pedestrians on the sidewalks
		side := float64(2*rng.IntN(2) - 1)
		s.cylinders = append(s.cylinders, cylinder{cx: 60*rng.Float64() - 30, cy: side * (8 + 3*rng.Float64()), r: 0.3, z0: walkZ, z1: walkZ + 1.75, refl: humanRefl})
	}
	return s
}

// cast returns the distance to the first surface along unit direction d from
// the origin, and that surface's reflectivity.
func (s *scene) cast(d [3]float64) (float64, float64) {
	best, refl := noReturn, 0.0
	hit := func(t, r float64) {
		if t > 0 && t < best {
			best, refl = t, r
		}
	}
	// Ground: road between the curbs, sidewalks outside, the curb face between.
	if d[2] < 0 {
		if t := walkZ / d[2]; math.Abs(t*d[1]) >= curbY {
			hit(t, walkRefl)
		} else if t := roadZ / d[2]; math.Abs(t*d[1]) < curbY {
			hit(t, roadRefl)
		} else {
			hit(curbY/math.Abs(d[1]), walkRefl)
		}
	}
	// Building walls along the street, open at the side streets.
	if d[1] != 0 {
		t := wallY / math.Abs(d[1])
		x, z := t*d[0], t*d[2]
		open := false
		for _, g := range wallGaps {
			open = open || (x > g[0] && x < g[1])
		}
		if !open && z >= walkZ && z <= wallTop {
			hit(t, wallRefl)
		}
	}
	for _, b := range s.boxes {
		hit(b.intersect(d), b.refl)
	}
	for _, c := range s.cylinders {
		hit(c.intersect(d), c.refl)
	}
	return best, refl
}

// intersect returns the ray parameter of the nearest hit, or noReturn.
func (b box) intersect(d [3]float64) float64 {
	// Into the box frame: centre at the origin, axes along the box.
	c, sn := math.Cos(b.yaw), math.Sin(b.yaw)
	o := [3]float64{-b.cx*c - b.cy*sn, b.cx*sn - b.cy*c, 0}
	v := [3]float64{d[0]*c + d[1]*sn, -d[0]*sn + d[1]*c, d[2]}
	lo := [3]float64{-b.length / 2, -b.width / 2, b.z0}
	hi := [3]float64{b.length / 2, b.width / 2, b.z1}
	tNear, tFar := 0.0, noReturn
	for a := range 3 {
		if v[a] == 0 {
			if o[a] < lo[a] || o[a] > hi[a] {
				return noReturn
			}
			continue
		}
		t0, t1 := (lo[a]-o[a])/v[a], (hi[a]-o[a])/v[a]
		if t0 > t1 {
			t0, t1 = t1, t0
		}
		tNear, tFar = max(tNear, t0), min(tFar, t1)
		if tNear > tFar {
			return noReturn
		}
	}
	return tNear
}

func (c cylinder) intersect(d [3]float64) float64 {
	// |o + t d - centre|² = r² in the xy plane, o the origin.
	a := d[0]*d[0] + d[1]*d[1]
	b := -2 * (d[0]*c.cx + d[1]*c.cy)
	k := c.cx*c.cx + c.cy*c.cy - c.r*c.r
	disc := b*b - 4*a*k
	if a == 0 || disc < 0 {
		return noReturn
	}
	t := (-b - math.Sqrt(disc)) / (2 * a)
	if z := t * d[2]; t <= 0 || z < c.z0 || z > c.z1 {
		return noReturn
	}
	return t
}
