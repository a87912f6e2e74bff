package tf

// Transform is a rigid transform: a point p given in the child frame lies
// at Rotation·p + Translation in the parent frame, which is what a
// geometry_msgs/TransformStamped from parent to child holds. The zero
// value has a zero Rotation and is not a transform; use Identity.
type Transform struct {
	Translation [3]float64 // metres
	Rotation    Quaternion // unit
}

// Identity returns the transform that moves no point.
func Identity() Transform { return Transform{Rotation: Quaternion{W: 1}} }

// Mul returns a·b, the transform that applies b, then a: with a = T_A_B
// and b = T_B_C it is T_A_C.
func (a Transform) Mul(b Transform) Transform {
	r := a.Rotation.rotate(b.Translation)
	return Transform{
		Translation: [3]float64{r[0] + a.Translation[0], r[1] + a.Translation[1], r[2] + a.Translation[2]},
		Rotation:    a.Rotation.mul(b.Rotation),
	}
}

// Inverse returns the transform that undoes t: T_B_A for t = T_A_B.
func (t Transform) Inverse() Transform {
	q := t.Rotation.conj()
	r := q.rotate(t.Translation)
	return Transform{Translation: [3]float64{-r[0], -r[1], -r[2]}, Rotation: q}
}

// Apply returns where the child-frame point p lies in the parent frame.
func (t Transform) Apply(p [3]float64) [3]float64 {
	r := t.Rotation.rotate(p)
	return [3]float64{r[0] + t.Translation[0], r[1] + t.Translation[1], r[2] + t.Translation[2]}
}
