package tf

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/zerohop/zerohop/voxel"
)

// anglesTable holds roll, pitch, yaw triples: zero, each axis alone, signs,
// near ±π and pitch near ±π/2 (but not at it).
var anglesTable = [][3]float64{
	{0, 0, 0},
	{0.3, 0, 0}, {0, 0.3, 0}, {0, 0, 0.3},
	{-0.3, 0, 0}, {0, -0.3, 0}, {0, 0, -0.3},
	{0.1, 0.2, 0.3}, {-0.1, -0.2, -0.3}, {1, -1.2, 2.5},
	{math.Pi - 1e-9, 0.4, -math.Pi + 1e-9}, {-math.Pi + 1e-6, -0.4, math.Pi - 1e-6},
	{math.Pi, 0.2, 0.1}, {0.2, 0.1, math.Pi},
	{0.5, math.Pi/2 - 1e-3, -2}, {-2.5, -math.Pi/2 + 1e-3, 1.5},
	{3, math.Pi/2 - 1e-6, 3}, {-3, -math.Pi/2 + 1e-6, -3},
	{0, 10 * deg, 0}, {180 * deg, 0, 90 * deg},
}

func TestFromRPYMatchesVoxelMount(t *testing.T) {
	pts := [][3]float64{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}, {1.5, -2, 0.25}}
	for _, a := range append(anglesTable, [3]float64{2, 2, 2}, [3]float64{-7, 4, 9}) {
		m := voxel.Mount{X: 0.1, Y: -0.2, Z: 0.62, Roll: a[0], Pitch: a[1], Yaw: a[2]}.Transform()
		q := FromRPY(a[0], a[1], a[2])
		if d := matDiff(q.Matrix(), m.R); d > 1e-15*8 {
			t.Errorf("rpy %v: FromRPY matrix %v, voxel.Mount %v (diff %g)", a, q.Matrix(), m.R, d)
		}
		tr := Transform{Translation: [3]float64{0.1, -0.2, 0.62}, Rotation: q}
		for _, p := range pts {
			x, y, z := m.Apply(p[0], p[1], p[2])
			if d := vecDiff(tr.Apply(p), [3]float64{x, y, z}); d > 1e-14 {
				t.Errorf("rpy %v: Apply(%v) = %v, voxel.Mount gives (%g, %g, %g)", a, p, tr.Apply(p), x, y, z)
			}
		}
	}
}

// TestFromRPYAxes pins REP-103's signs on single rotations.
func TestFromRPYAxes(t *testing.T) {
	s := math.Sqrt2 / 2
	for _, c := range []struct {
		name             string
		roll, pitch, yaw float64
		q                Quaternion
		p, want          [3]float64
	}{
		{"identity", 0, 0, 0, Quaternion{0, 0, 0, 1}, [3]float64{1, 2, 3}, [3]float64{1, 2, 3}},
		{"yaw +90 turns x to y", 0, 0, math.Pi / 2, Quaternion{0, 0, s, s}, [3]float64{1, 0, 0}, [3]float64{0, 1, 0}},
		{"roll +90 turns y to z", math.Pi / 2, 0, 0, Quaternion{s, 0, 0, s}, [3]float64{0, 1, 0}, [3]float64{0, 0, 1}},
		{"pitch +90 turns x to -z", 0, math.Pi / 2, 0, Quaternion{0, s, 0, s}, [3]float64{1, 0, 0}, [3]float64{0, 0, -1}},
		{"roll 180 (upside down)", math.Pi, 0, 0, Quaternion{1, 0, 0, 0}, [3]float64{0, 1, 1}, [3]float64{0, -1, -1}},
		// Roll first about fixed x, then yaw about fixed z: y → z → z.
		{"roll then yaw", math.Pi / 2, 0, math.Pi / 2, Quaternion{0.5, 0.5, 0.5, 0.5}, [3]float64{0, 1, 0}, [3]float64{0, 0, 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			q := FromRPY(c.roll, c.pitch, c.yaw)
			if d := max(math.Abs(q.X-c.q.X), math.Abs(q.Y-c.q.Y), math.Abs(q.Z-c.q.Z), math.Abs(q.W-c.q.W)); d > 1e-15 {
				t.Errorf("FromRPY = %+v, want %+v", q, c.q)
			}
			got := Transform{Rotation: q}.Apply(c.p)
			if vecDiff(got, c.want) > 1e-15 {
				t.Errorf("rotates %v to %v, want %v", c.p, got, c.want)
			}
		})
	}
}

func TestRPYRoundTrip(t *testing.T) {
	var cases [][3]float64
	cases = append(cases, anglesTable...)
	vals := []float64{-math.Pi + 1e-12, -3, -2, -1, -0.5, -1e-9, 0, 1e-9, 0.5, 1, 2, 3, math.Pi}
	pitches := []float64{-math.Pi/2 + 1e-4, -1.5, -1, -0.3, 0, 0.3, 1, 1.5, math.Pi/2 - 1e-4}
	for _, r := range vals {
		for _, p := range pitches {
			for _, y := range vals {
				cases = append(cases, [3]float64{r, p, y})
			}
		}
	}
	for _, a := range cases {
		q := FromRPY(a[0], a[1], a[2])
		r, p, y := q.RPY()
		if !(p >= -math.Pi/2 && p <= math.Pi/2 && math.Abs(r) <= math.Pi && math.Abs(y) <= math.Pi) {
			t.Errorf("rpy %v: RPY = (%g, %g, %g) out of range", a, r, p, y)
		}
		if d := matDiff(FromRPY(r, p, y).Matrix(), q.Matrix()); d > 1e-14 {
			t.Errorf("rpy %v: RPY = (%g, %g, %g) is another rotation (matrix diff %g)", a, r, p, y, d)
		}
		// The angles themselves come back away from gimbal lock; within
		// 1e-4 of it they are ill-conditioned (error ≈ rounding / cos p).
		tol := 1e-15 / math.Cos(a[1]) * 100
		if angleDiff(r, a[0]) > tol || math.Abs(p-a[1]) > tol || angleDiff(y, a[2]) > tol {
			t.Errorf("rpy %v: RPY = (%.17g, %.17g, %.17g)", a, r, p, y)
		}
	}
}

// TestRPYOtherSolution: angles outside tf2's ranges come back as the
// equivalent solution in range.
func TestRPYOtherSolution(t *testing.T) {
	for _, a := range [][3]float64{{0, 2, 0}, {0.3, 2.5, -0.2}, {0, -2, 1}, {4, 0.2, -4}, {7, -5, 13}} {
		q := FromRPY(a[0], a[1], a[2])
		r, p, y := q.RPY()
		if !(p >= -math.Pi/2 && p <= math.Pi/2 && math.Abs(r) <= math.Pi && math.Abs(y) <= math.Pi) {
			t.Errorf("rpy %v: RPY = (%g, %g, %g) out of range", a, r, p, y)
		}
		if d := matDiff(FromRPY(r, p, y).Matrix(), q.Matrix()); d > 1e-14 {
			t.Errorf("rpy %v: RPY = (%g, %g, %g) is another rotation (matrix diff %g)", a, r, p, y, d)
		}
	}
	// Pitch past 90° is the same as pitch 180° − p with roll and yaw
	// turned half a turn.
	r, p, y := FromRPY(0, 2, 0).RPY()
	if angleDiff(r, math.Pi) > 1e-12 || math.Abs(p-(math.Pi-2)) > 1e-12 || angleDiff(y, math.Pi) > 1e-12 {
		t.Errorf("FromRPY(0, 2, 0).RPY() = (%g, %g, %g), want (π, π−2, π)", r, p, y)
	}
}

func TestRPYGimbalLock(t *testing.T) {
	for _, sign := range []float64{1, -1} {
		for _, ry := range [][2]float64{{0, 0}, {0.3, 0.1}, {-1, 2}, {3, -3}, {math.Pi, 0}, {0, math.Pi / 2}, {-2.5, -0.7}} {
			q := FromRPY(ry[0], sign*math.Pi/2, ry[1])
			r, p, y := q.RPY()
			if y != 0 || p != sign*math.Pi/2 {
				t.Errorf("rpy (%g, %g, %g): RPY = (%g, %g, %g), want yaw 0 and pitch %g", ry[0], sign*math.Pi/2, ry[1], r, p, y, sign*math.Pi/2)
			}
			if d := matDiff(FromRPY(r, p, y).Matrix(), q.Matrix()); d > 1e-14 {
				t.Errorf("rpy (%g, %g, %g): RPY = (%g, %g, %g) is another rotation (matrix diff %g)", ry[0], sign*math.Pi/2, ry[1], r, p, y, d)
			}
			// Roll carries roll − yaw (pitch up) or roll + yaw (down).
			want := ry[0] - sign*ry[1]
			if angleDiff(r, want) > 1e-12 {
				t.Errorf("rpy (%g, %g, %g): roll %g, want %g", ry[0], sign*math.Pi/2, ry[1], r, want)
			}
		}
		// Next to the lock, on either side of gimbalCos.
		for _, d := range []float64{1e-5, 1e-8, 1e-10, 1e-11, 2e-12, 1e-12, 5e-13, 1e-13, 1e-15} {
			a := [3]float64{0.7, sign * (math.Pi/2 - d), -1.9}
			q := FromRPY(a[0], a[1], a[2])
			r, p, y := q.RPY()
			if diff := matDiff(FromRPY(r, p, y).Matrix(), q.Matrix()); diff > 1e-11 {
				t.Errorf("rpy %v: RPY = (%g, %g, %g) is another rotation (matrix diff %g)", a, r, p, y, diff)
			}
		}
	}
}

// TestTF2GimbalLockLosesYaw shows why RPY departs from tf2 at gimbal
// lock: tf2's angles there drop the yaw and name another rotation.
func TestTF2GimbalLockLosesYaw(t *testing.T) {
	q := FromRPY(0.3, math.Pi/2, 0.1)
	r, p, y := tf2GetRPY(q.Matrix())
	if d := matDiff(FromRPY(r, p, y).Matrix(), q.Matrix()); d < 0.05 {
		t.Errorf("tf2's getRPY gives (%g, %g, %g), which reproduces the rotation (diff %g): RPY's doc is wrong", r, p, y, d)
	}
}

// tf2GetRPY is tf2's Matrix3x3::getEulerYPR, solution 1, as written there.
func tf2GetRPY(m [9]float64) (roll, pitch, yaw float64) {
	if math.Abs(m[6]) >= 1 {
		delta := math.Atan2(m[7], m[8])
		if m[6] < 0 {
			return delta, math.Pi / 2, 0
		}
		return delta, -math.Pi / 2, 0
	}
	pitch = -math.Asin(m[6])
	c := math.Cos(pitch)
	roll = math.Atan2(m[7]/c, m[8]/c)
	yaw = math.Atan2(m[3]/c, m[0]/c)
	return roll, pitch, yaw
}

func TestRPYAgreesWithTF2(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 10000 {
		q := Quaternion{rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64()}
		m := q.Matrix()
		r, p, y := q.RPY()
		tr, tp, ty := tf2GetRPY(m)
		if math.Cos(tp) < 1e-3 {
			continue // tf2's asin loses digits here; covered by the gimbal tests
		}
		if angleDiff(r, tr) > 1e-12 || math.Abs(p-tp) > 1e-12 || angleDiff(y, ty) > 1e-12 {
			t.Fatalf("%+v: RPY = (%.17g, %.17g, %.17g), tf2 (%.17g, %.17g, %.17g)", q, r, p, y, tr, tp, ty)
		}
	}
}

// TestRPYScaleAndSign: q, −q and any positive multiple are one rotation.
func TestRPYScaleAndSign(t *testing.T) {
	q := FromRPY(0.2, -0.4, 1.1)
	for _, k := range []float64{1, -1, 0.5, 3, -1e-3} {
		r, p, y := Quaternion{k * q.X, k * q.Y, k * q.Z, k * q.W}.RPY()
		if math.Abs(r-0.2) > 1e-12 || math.Abs(p+0.4) > 1e-12 || math.Abs(y-1.1) > 1e-12 {
			t.Errorf("%g·q: RPY = (%g, %g, %g), want (0.2, -0.4, 1.1)", k, r, p, y)
		}
	}
}
