package voxel

import (
	"fmt"
	"math"
)

// Mount is where the clouds' frame sits in the robot frame the BEV raster
// is drawn in: a point p of a cloud lies at R·p + (X, Y, Z) in the robot
// frame, with R = Rz(Yaw)·Ry(Pitch)·Rx(Roll), rotations about the robot
// frame's fixed axes applied roll first: URDF's <origin xyz rpy> and a
// tf2 static transform from the robot frame to the sensor's. The zero
// value is the identity (clouds already in the robot frame).
//
// A LiDAR tilted down by 10° to see the ground near the robot has Pitch
// +10° (in radians: REP-103's y axis points left, and a positive pitch
// turns x towards -z); one mounted upside down has Roll π.
type Mount struct {
	X, Y, Z          float64 // metres
	Roll, Pitch, Yaw float64 // radians
}

// IsIdentity reports whether m moves no point (every field zero).
func (m Mount) IsIdentity() bool { return m == Mount{} }

// check reports a non-finite field: the transform would turn every point
// into NaN, which no cell holds, and the raster would be empty.
func (m Mount) check() error {
	for _, f := range [...]struct {
		name string
		v    float64
	}{{"x", m.X}, {"y", m.Y}, {"z", m.Z}, {"roll", m.Roll}, {"pitch", m.Pitch}, {"yaw", m.Yaw}} {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) {
			return fmt.Errorf("mount %s %g is not finite", f.name, f.v)
		}
	}
	return nil
}

// Transform is a Mount as the rigid transform the BEV applies: R, row
// major, and the translation T. The GPU kernels take these very numbers,
// so that both paths compute the same bits.
type Transform struct {
	R [9]float64
	T [3]float64
}

// Transform returns m's rotation matrix and translation.
func (m Mount) Transform() Transform {
	sr, cr := math.Sincos(m.Roll)
	sp, cp := math.Sincos(m.Pitch)
	sy, cy := math.Sincos(m.Yaw)
	// Rz(yaw)·Ry(pitch)·Rx(roll), as tf2's Matrix3x3::setRPY.
	return Transform{
		R: [9]float64{
			cy * cp, cy*sp*sr - sy*cr, cy*sp*cr + sy*sr,
			sy * cp, sy*sp*sr + cy*cr, sy*sp*cr - cy*sr,
			-sp, cp * sr, cp * cr,
		},
		T: [3]float64{m.X, m.Y, m.Z},
	}
}

// Apply returns where the cloud point (x, y, z) lies in the robot frame.
// Each coordinate is ((r0·x + r1·y) + r2·z) + t in float64, every product
// and sum rounded on its own: the conversions keep Go from fusing a
// product into an addition (the spec allows it, arm64 does it), and the
// GPU kernel does the same operations in the same order with
// __dmul_rn/__dadd_rn (gpu/kernels/voxel.cu, zh_bev_cells).
func (t *Transform) Apply(x, y, z float64) (rx, ry, rz float64) {
	r := &t.R
	rx = float64(float64(float64(r[0]*x)+float64(r[1]*y))+float64(r[2]*z)) + t.T[0]
	ry = float64(float64(float64(r[3]*x)+float64(r[4]*y))+float64(r[5]*z)) + t.T[1]
	rz = float64(float64(float64(r[6]*x)+float64(r[7]*y))+float64(r[8]*z)) + t.T[2]
	return rx, ry, rz
}

// ApplyInverse returns the cloud point that Apply moves to the robot-frame
// (x, y, z): Rᵀ((x, y, z) − T). For making clouds in a sensor's frame
// (tests, the GPU self-check); Fill never needs it.
func (t *Transform) ApplyInverse(x, y, z float64) (cx, cy, cz float64) {
	r := &t.R
	dx, dy, dz := x-t.T[0], y-t.T[1], z-t.T[2]
	return r[0]*dx + r[3]*dy + r[6]*dz, r[1]*dx + r[4]*dy + r[7]*dz, r[2]*dx + r[5]*dy + r[8]*dz
}

// inverseBox returns the axis-aligned box, in the clouds' frame, that
// holds every point that t puts inside b: the bounding box of b moved back
// by t⁻¹ (b's centre through Rᵀ(c − T), its half extents through |Rᵀ|).
// b's bounds must be finite.
func (t *Transform) inverseBox(b Box) Box {
	var c, e [3]float64
	for a := range 3 {
		lo, hi := float64(b.Min[a]), float64(b.Max[a])
		c[a], e[a] = lo/2+hi/2, hi/2-lo/2
		c[a] -= t.T[a]
	}
	var out Box
	for a := range 3 { // cloud axis a: row a of Rᵀ is column a of R
		centre, half := 0.0, 0.0
		for j := range 3 {
			r := t.R[3*j+a]
			centre += r * c[j]
			half += math.Abs(r) * e[j]
		}
		out.Min[a], out.Max[a] = roundDown32(centre-half), roundUp32(centre+half)
	}
	return out
}

// roundDown32 and roundUp32 round v to a float32 no greater / no less
// than it, so that a box rounded so never loses a point to rounding.
func roundDown32(v float64) float32 {
	f := float32(v)
	if float64(f) > v {
		f = math.Nextafter32(f, float32(math.Inf(-1)))
	}
	return f
}

func roundUp32(v float64) float32 {
	f := float32(v)
	if float64(f) < v {
		f = math.Nextafter32(f, float32(math.Inf(1)))
	}
	return f
}

// Levelled returns m turned so that the ground plane p, found in the
// robot frame m puts the clouds in, becomes level there: the smallest
// rotation that takes p's normal to the z axis, applied after m's
// (about the robot's axes), as roll, pitch and yaw again. X, Y and Z
// stay. At a pitch of ±90° roll and yaw turn about one axis and only
// their sum (or difference) is kept. A LiDAR pitched down 8° more than m says sees the ground rise
// ahead with slope tan 8°; m.Levelled of that plane has 8° more pitch.
func (m Mount) Levelled(p GroundPlane) Mount {
	norm := math.Sqrt(1 + p.SlopeX*p.SlopeX + p.SlopeY*p.SlopeY)
	nx, ny, nz := -p.SlopeX/norm, -p.SlopeY/norm, 1/norm
	s, c := math.Hypot(nx, ny), nz // sin and cos of the angle to level
	if s == 0 {
		return m
	}
	kx, ky := ny/s, -nx/s // the axis n × z, unit, in the x-y plane
	// Rodrigues' formula, C = I + sin·K + (1 − cos)·K² for that axis.
	cm := [9]float64{
		1 - (1-c)*ky*ky, (1 - c) * kx * ky, s * ky,
		(1 - c) * kx * ky, 1 - (1-c)*kx*kx, -s * kx,
		-s * ky, s * kx, c,
	}
	r := matMul3(cm, m.Transform().R)
	out := m
	out.Roll = math.Atan2(r[7], r[8])
	out.Pitch = math.Asin(max(-1, min(1, -r[6])))
	out.Yaw = math.Atan2(r[3], r[0])
	return out
}

func matMul3(a, b [9]float64) (c [9]float64) {
	for i := range 3 {
		for j := range 3 {
			c[3*i+j] = a[3*i]*b[j] + a[3*i+1]*b[3+j] + a[3*i+2]*b[6+j]
		}
	}
	return c
}
