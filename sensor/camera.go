package sensor

import "math"

// PinholeCamera is an ideal pinhole camera (no distortion) at Position,
// looking along +x and pitched down by PitchDown about the y axis. Image
// coordinates are continuous: pixel (col, row) covers [col, col+1) ×
// [row, row+1), so its centre is (col+0.5, row+0.5); u grows to the right
// (towards -y), v downwards.
type PinholeCamera struct {
	Width, Height  int
	Fx, Fy, Cx, Cy float64 // focal lengths and principal point, pixels
	Position       Vec3    // robot frame
	PitchDown      float64 // radians; positive looks at the ground
}

// axes returns the camera's forward, right and down unit vectors in the
// robot frame.
func (c PinholeCamera) axes() (fwd, right, down Vec3) {
	sp, cp := math.Sincos(c.PitchDown)
	return Vec3{cp, 0, -sp}, Vec3{0, -1, 0}, Vec3{-sp, 0, -cp}
}

// Project maps a point in the robot frame to image coordinates; ok is false
// when the point is not in front of the camera. The result may lie outside
// the image.
func (c PinholeCamera) Project(p Vec3) (u, v float64, ok bool) {
	f, r, d := c.axes()
	rel := Vec3{p.X - c.Position.X, p.Y - c.Position.Y, p.Z - c.Position.Z}
	dot := func(a, b Vec3) float64 { return a.X*b.X + a.Y*b.Y + a.Z*b.Z }
	zc := dot(rel, f)
	if zc <= 1e-9 {
		return 0, 0, false
	}
	return c.Cx + c.Fx*dot(rel, r)/zc, c.Cy + c.Fy*dot(rel, d)/zc, true
}

// Ray is the direction (not unit length; its component along the optical
// axis is 1) of the viewing ray through image point (u, v), in the robot
// frame. The renderer uses exactly these rays at pixel centres.
func (c PinholeCamera) Ray(u, v float64) Vec3 {
	sp, cp := math.Sincos(c.PitchDown)
	a, b := (u-c.Cx)/c.Fx, (v-c.Cy)/c.Fy
	// forward + a·right + b·down; explicit float64() conversions stop the
	// compiler from fusing multiply-adds, so every caller gets the same bits.
	return Vec3{cp - float64(b*sp), -a, -sp - float64(b*cp)}
}
