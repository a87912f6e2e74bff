package sensor

import "math"

// Vec3 is a point or vector in the robot frame (REP-103: x forward, y left,
// z up; metres).
type Vec3 struct{ X, Y, Z float64 }

// Box is an axis-aligned box given by its centre and full edge lengths.
type Box struct{ Center, Size Vec3 }

// Min is the corner with the smallest coordinates.
func (b Box) Min() Vec3 {
	return Vec3{b.Center.X - b.Size.X/2, b.Center.Y - b.Size.Y/2, b.Center.Z - b.Size.Z/2}
}

// Max is the corner with the largest coordinates.
func (b Box) Max() Vec3 {
	return Vec3{b.Center.X + b.Size.X/2, b.Center.Y + b.Size.Y/2, b.Center.Z + b.Size.Z/2}
}

// Contains reports whether p lies in the box grown by margin on every side.
func (b Box) Contains(p Vec3, margin float64) bool {
	lo, hi := b.Min(), b.Max()
	return p.X >= lo.X-margin && p.X <= hi.X+margin &&
		p.Y >= lo.Y-margin && p.Y <= hi.Y+margin &&
		p.Z >= lo.Z-margin && p.Z <= hi.Z+margin
}

// GroundRect is an axis-aligned rectangle lying on the ground plane z = 0.
type GroundRect struct{ CenterX, CenterY, SizeX, SizeY float64 }

// Contains reports whether (x, y) lies in the rectangle; the box is half-open
// ([min, max)) so that adjacent rectangles never share a point.
func (r GroundRect) Contains(x, y float64) bool {
	return x >= r.CenterX-r.SizeX/2 && x < r.CenterX+r.SizeX/2 &&
		y >= r.CenterY-r.SizeY/2 && y < r.CenterY+r.SizeY/2
}

// RGB is an 8-bit colour.
type RGB struct{ R, G, B uint8 }

// SceneTruth is where the moving parts of the synthetic scene are at one
// frame, for tests and for judging the agent.
type SceneTruth struct {
	Time          float64    // scene time in seconds: seq / rate
	Obstacle      Box        // the moving box; seen by LiDAR and camera
	ObstacleColor RGB        // its unshaded colour; faces are shaded darker
	Hazard        GroundRect // flat marking on the ground; camera only
	HazardColor   RGB        // drawn unshaded, exactly this colour
}

// The scene: a closed corridor with a moving obstacle and a hazard marking.
// All values in metres, seconds, robot frame.
const (
	corridorHalfWidth = 4.0  // side walls' inner faces at y = ±4
	wallHeight        = 3.0  // walls are 3 m high; above is sky
	wallThickness     = 0.2  //
	corridorFront     = 40.0 // inner face of the end wall ahead
	corridorBack      = -20.0

	obstacleX      = 4.0 // the obstacle crosses the robot's path here
	obstacleSizeXY = 0.6
	obstacleHeight = 1.0
	obstacleSwing  = 3.0 // its centre oscillates between y = -3 and +3
	obstaclePeriod = 6.0

	hazardX      = 2.8 // between the robot and the obstacle: never hidden by it
	hazardY      = 1.0 // |y| of the centre; the side alternates
	hazardSizeX  = 1.5
	hazardSizeY  = 1.0
	hazardPeriod = 8.0 // left for the first half, right for the second
)

// material decides a surface's colour and LiDAR intensity. The hazard has
// no material of its own: for the LiDAR it is ground, by construction.
type material uint8

const (
	matSky material = iota // no hit
	matGround
	matWall
	matBox
	matObstacle
)

// intensity is the LiDAR return of a material: constant per material, so the
// hazard marking (ground) cannot be told apart from the ground around it.
func (m material) intensity() float32 {
	switch m {
	case matGround:
		return 0.20
	case matWall:
		return 0.45
	case matBox:
		return 0.60
	case matObstacle:
		return 0.85
	}
	return 0
}

func (m material) color() RGB {
	switch m {
	case matWall:
		return RGB{205, 195, 175}
	case matBox:
		return RGB{150, 105, 60}
	case matObstacle:
		return RGB{40, 100, 230}
	}
	return RGB{128, 128, 128}
}

// hazardColor is the marking's colour, bright orange-red, drawn unshaded.
func hazardColor() RGB { return RGB{255, 80, 0} }

// shade darkens a face colour by the axis of its normal so that box faces
// read as 3-D: tops full, x-faces 85 %, y-faces 70 %.
func shade(c RGB, axis int8) RGB {
	f := [3]float64{0.85, 0.70, 1.0}[axis]
	return RGB{uint8(float64(c.R)*f + 0.5), uint8(float64(c.G)*f + 0.5), uint8(float64(c.B)*f + 0.5)}
}

// groundColor is a subtle 1 m checkerboard so that motion and distance are
// visible in the image.
func groundColor(x, y float64) RGB {
	if (int64(math.Floor(x))+int64(math.Floor(y)))&1 == 0 {
		return RGB{126, 126, 122}
	}
	return RGB{138, 138, 134}
}

// skyColor is a gradient from pale at the horizon to deeper blue upwards;
// rise is dz / |(dx, dy)| of the viewing ray.
func skyColor(rise float64) RGB {
	s := math.Min(math.Max(rise*2, 0), 1)
	lerp := func(a, b uint8) uint8 { return uint8(float64(a) + (float64(b)-float64(a))*s + 0.5) }
	return RGB{lerp(175, 70), lerp(208, 125), lerp(235, 205)}
}

// aabb is a box in the form ray casting wants.
type aabb struct {
	minX, minY, minZ, maxX, maxY, maxZ float64
	mat                                material
}

func newAABB(b Box, m material) aabb {
	lo, hi := b.Min(), b.Max()
	return aabb{lo.X, lo.Y, lo.Z, hi.X, hi.Y, hi.Z, m}
}

// hit intersects the ray o + t·d (t > 0) with the box by the slab method and
// returns the entry distance t (in units of |d|) and the axis of the face hit.
// A ray starting inside the box does not hit it.
func (b *aabb) hit(ox, oy, oz, dx, dy, dz float64) (t float64, axis int8, ok bool) {
	tNear, tFar := math.Inf(-1), math.Inf(1)
	axis = -1
	for a := int8(0); a < 3; a++ {
		var o, d, lo, hi float64
		switch a {
		case 0:
			o, d, lo, hi = ox, dx, b.minX, b.maxX
		case 1:
			o, d, lo, hi = oy, dy, b.minY, b.maxY
		default:
			o, d, lo, hi = oz, dz, b.minZ, b.maxZ
		}
		if d == 0 {
			if o < lo || o > hi {
				return 0, 0, false
			}
			continue
		}
		t1, t2 := (lo-o)/d, (hi-o)/d
		if t1 > t2 {
			t1, t2 = t2, t1
		}
		if t1 > tNear {
			tNear, axis = t1, a
		}
		if t2 < tFar {
			tFar = t2
		}
	}
	if axis < 0 || tNear > tFar || tNear <= 0 {
		return 0, 0, false
	}
	return tNear, axis, true
}

// staticScene lists the boxes that never move: corridor walls and a few
// boxes far away. The order is the tie-break order of ray casting (first
// wins on equal distance).
func staticScene() []aabb {
	const w, h = wallThickness, wallHeight
	length := corridorFront - corridorBack + 2*w
	midX := (corridorFront + corridorBack) / 2
	boxes := []struct {
		b Box
		m material
	}{
		{Box{Vec3{midX, corridorHalfWidth + w/2, h / 2}, Vec3{length, w, h}}, matWall},
		{Box{Vec3{midX, -corridorHalfWidth - w/2, h / 2}, Vec3{length, w, h}}, matWall},
		{Box{Vec3{corridorFront + w/2, 0, h / 2}, Vec3{w, 2 * (corridorHalfWidth + w), h}}, matWall},
		{Box{Vec3{corridorBack - w/2, 0, h / 2}, Vec3{w, 2 * (corridorHalfWidth + w), h}}, matWall},
		{Box{Vec3{12, 2.5, 0.75}, Vec3{1, 1, 1.5}}, matBox},
		{Box{Vec3{18, -2, 1}, Vec3{2, 1.2, 2}}, matBox},
		{Box{Vec3{26, 1, 0.5}, Vec3{1, 1, 1}}, matBox},
		{Box{Vec3{-6, -2.5, 0.6}, Vec3{1.2, 1.2, 1.2}}, matBox},
	}
	out := make([]aabb, len(boxes))
	for i, b := range boxes {
		out[i] = newAABB(b.b, b.m)
	}
	return out
}

// truthAt is the scene's moving parts at scene time t.
func truthAt(t float64) SceneTruth {
	y := obstacleSwing * math.Sin(2*math.Pi*t/obstaclePeriod)
	side := 1.0
	if math.Mod(t, hazardPeriod) >= hazardPeriod/2 {
		side = -1
	}
	return SceneTruth{
		Time:          t,
		Obstacle:      Box{Vec3{obstacleX, y, obstacleHeight / 2}, Vec3{obstacleSizeXY, obstacleSizeXY, obstacleHeight}},
		ObstacleColor: matObstacle.color(),
		Hazard:        GroundRect{hazardX, side * hazardY, hazardSizeX, hazardSizeY},
		HazardColor:   hazardColor(),
	}
}
