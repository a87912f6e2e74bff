package tf

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestLidarPitchedDown: 0.62 m up, 0.1 m ahead, pitched down 10°: its
// forward axis ends 1 m out at (0.1 + cos 10°, 0, 0.62 − sin 10°).
func TestLidarPitchedDown(t *testing.T) {
	tr := tfAt(0.1, 0, 0.62, 0, 10*deg, 0)
	want := [3]float64{0.1 + math.Cos(10*deg), 0, 0.62 - math.Sin(10*deg)}
	if got := tr.Apply([3]float64{1, 0, 0}); vecDiff(got, want) > 1e-15 {
		t.Errorf("Apply(1, 0, 0) = %v, want %v", got, want)
	}
	if got := tr.Apply([3]float64{}); got != tr.Translation {
		t.Errorf("Apply(origin) = %v, want %v", got, tr.Translation)
	}
	// Its up axis leans forward.
	want = [3]float64{0.1 + math.Sin(10*deg), 0, 0.62 + math.Cos(10*deg)}
	if got := tr.Apply([3]float64{0, 0, 1}); vecDiff(got, want) > 1e-15 {
		t.Errorf("Apply(0, 0, 1) = %v, want %v", got, want)
	}
}

func randomTF(rng *rand.Rand) Transform {
	return tfAt(rng.Float64()*4-2, rng.Float64()*4-2, rng.Float64()*4-2,
		rng.Float64()*6-3, rng.Float64()*3-1.5, rng.Float64()*6-3)
}

func TestMulInverseApply(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 1000 {
		a, b, c := randomTF(rng), randomTF(rng), randomTF(rng)
		p := [3]float64{rng.Float64()*10 - 5, rng.Float64()*10 - 5, rng.Float64()*10 - 5}
		if d := vecDiff(a.Mul(b).Apply(p), a.Apply(b.Apply(p))); d > 1e-13 {
			t.Fatalf("(a·b)(p) − a(b(p)) = %g", d)
		}
		if d := vecDiff(a.Inverse().Apply(a.Apply(p)), p); d > 1e-13 {
			t.Fatalf("a⁻¹(a(p)) − p = %g", d)
		}
		if d := tfDiff(a.Mul(a.Inverse()), Identity()); d > 1e-14 {
			t.Fatalf("a·a⁻¹ is %s, not the identity", fmtTF(a.Mul(a.Inverse())))
		}
		if d := tfDiff(a.Inverse().Mul(a), Identity()); d > 1e-14 {
			t.Fatalf("a⁻¹·a is %s, not the identity", fmtTF(a.Inverse().Mul(a)))
		}
		if d := tfDiff(a.Mul(b).Mul(c), a.Mul(b.Mul(c))); d > 1e-13 {
			t.Fatalf("(a·b)·c − a·(b·c) = %g", d)
		}
		if d := tfDiff(a.Mul(b).Inverse(), b.Inverse().Mul(a.Inverse())); d > 1e-13 {
			t.Fatalf("(a·b)⁻¹ − b⁻¹·a⁻¹ = %g", d)
		}
		if d := tfDiff(Identity().Mul(a), a); d > 1e-15 {
			t.Fatalf("1·a − a = %g", d)
		}
	}
}

// TestMulOrder: a·b applies b first. A yaw of 90° after a 1 m step along x
// puts the origin at (0, 1, 0); the other order at (1, 0, 0).
func TestMulOrder(t *testing.T) {
	step, turn := tfAt(1, 0, 0, 0, 0, 0), tfAt(0, 0, 0, 0, 0, math.Pi/2)
	if got := turn.Mul(step).Apply([3]float64{}); vecDiff(got, [3]float64{0, 1, 0}) > 1e-15 {
		t.Errorf("turn·step moves the origin to %v, want (0, 1, 0)", got)
	}
	if got := step.Mul(turn).Apply([3]float64{}); vecDiff(got, [3]float64{1, 0, 0}) > 1e-15 {
		t.Errorf("step·turn moves the origin to %v, want (1, 0, 0)", got)
	}
}
