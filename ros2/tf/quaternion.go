package tf

import "math"

// Quaternion is a rotation (x, y, z, w), as geometry_msgs/Quaternion. Its
// methods accept any non-zero length, as tf2's Matrix3x3(q) does; the zero
// quaternion is no rotation and gives NaN.
type Quaternion struct{ X, Y, Z, W float64 }

// FromRPY is tf2's Quaternion::setRPY: the rotation R = Rz(yaw)·Ry(pitch)·Rx(roll),
// about the fixed axes, roll first.
func FromRPY(roll, pitch, yaw float64) Quaternion {
	sr, cr := math.Sincos(roll / 2)
	sp, cp := math.Sincos(pitch / 2)
	sy, cy := math.Sincos(yaw / 2)
	return Quaternion{
		X: sr*cp*cy - cr*sp*sy,
		Y: cr*sp*cy + sr*cp*sy,
		Z: cr*cp*sy - sr*sp*cy,
		W: cr*cp*cy + sr*sp*sy,
	}
}

// Matrix returns q's rotation matrix, row major, as tf2's
// Matrix3x3::setRotation (scaled by 2/|q|², so q need not be unit).
func (q Quaternion) Matrix() [9]float64 {
	s := 2 / (q.X*q.X + q.Y*q.Y + q.Z*q.Z + q.W*q.W)
	xs, ys, zs := q.X*s, q.Y*s, q.Z*s
	wx, wy, wz := q.W*xs, q.W*ys, q.W*zs
	xx, xy, xz := q.X*xs, q.X*ys, q.X*zs
	yy, yz, zz := q.Y*ys, q.Y*zs, q.Z*zs
	return [9]float64{
		1 - (yy + zz), xy - wz, xz + wy,
		xy + wz, 1 - (xx + zz), yz - wx,
		xz - wy, yz + wx, 1 - (xx + yy),
	}
}

// gimbalCos is the |cos pitch| below which RPY calls the pitch ±π/2 and
// puts the whole turn about the vertical into roll. Forcing yaw to 0 there
// moves the rotation by at most about gimbalCos; above it yaw is computed
// and roll is taken after undoing that yaw, so the angles always reproduce
// the rotation to rounding.
const gimbalCos = 1e-12

// RPY is tf2's Matrix3x3(q).getRPY (solution 1): pitch in [−π/2, π/2],
// roll and yaw in [−π, π], and FromRPY(q.RPY()) is q's rotation.
//
// At gimbal lock (pitch ±π/2, where only roll − yaw or roll + yaw is
// defined) it returns yaw 0, as tf2 does, and the roll that reproduces
// the rotation. tf2 itself reads that roll from two matrix entries that
// are then zero, so its roll there is rounding noise; this one is not.
// Elsewhere it agrees with tf2 to rounding.
func (q Quaternion) RPY() (roll, pitch, yaw float64) {
	m := q.Matrix()
	// Column 0 is (cos p·cos y, cos p·sin y, −sin p), a unit vector, so
	// pitch from atan2 stays accurate next to ±π/2 where asin does not.
	c := math.Hypot(m[0], m[3])
	if c < gimbalCos {
		pitch = math.Copysign(math.Pi/2, -m[6])
	} else {
		pitch = math.Atan2(-m[6], c)
		yaw = math.Atan2(m[3], m[0])
	}
	// Row 1 of Rz(−yaw)·R = Ry(pitch)·Rx(roll) is (0, cos roll, −sin roll).
	sy, cy := math.Sincos(yaw)
	r11 := cy*m[4] - sy*m[1]
	r12 := cy*m[5] - sy*m[2]
	roll = math.Atan2(-r12, r11)
	return roll, pitch, yaw
}

// mul is the Hamilton product a·b: rotate by b, then by a.
func (a Quaternion) mul(b Quaternion) Quaternion {
	return Quaternion{
		X: a.W*b.X + a.X*b.W + a.Y*b.Z - a.Z*b.Y,
		Y: a.W*b.Y - a.X*b.Z + a.Y*b.W + a.Z*b.X,
		Z: a.W*b.Z + a.X*b.Y - a.Y*b.X + a.Z*b.W,
		W: a.W*b.W - a.X*b.X - a.Y*b.Y - a.Z*b.Z,
	}
}

// conj is the inverse rotation (for any non-zero length, see Matrix).
func (q Quaternion) conj() Quaternion { return Quaternion{-q.X, -q.Y, -q.Z, q.W} }

func (q Quaternion) rotate(p [3]float64) [3]float64 {
	m := q.Matrix()
	return [3]float64{
		m[0]*p[0] + m[1]*p[1] + m[2]*p[2],
		m[3]*p[0] + m[4]*p[1] + m[5]*p[2],
		m[6]*p[0] + m[7]*p[1] + m[8]*p[2],
	}
}
