package tf

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func moving(parent, child string, tf Transform, stamp int64) Stamped {
	return Stamped{Parent: parent, Child: child, Transform: tf, Stamp: stamp}
}

func static(parent, child string, tf Transform) Stamped {
	return Stamped{Parent: parent, Child: child, Transform: tf}
}

func newBuffer(t testing.TB, cfg BufferConfig) *Buffer {
	t.Helper()
	b, err := NewBuffer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// rotAngle is the angle of the rotation taking a to b, in [0, π].
func rotAngle(a, b Quaternion) float64 {
	d := unit(a).conj().mul(unit(b))
	return 2 * math.Atan2(math.Sqrt(d.X*d.X+d.Y*d.Y+d.Z*d.Z), math.Abs(d.W))
}

func TestInterpolate(t *testing.T) {
	yaw := func(deg_ float64) Transform { return tfAt(0, 0, 0, 0, 0, deg_*deg) }
	neg := func(tr Transform) Transform {
		q := tr.Rotation
		tr.Rotation = Quaternion{-q.X, -q.Y, -q.Z, -q.W}
		return tr
	}
	tilted := unit(Quaternion{0.3, -0.5, 0.8, 0})              // axis as a pure quaternion
	about := func(axis Quaternion, angle float64) Quaternion { // a turn by angle about axis
		s, c := math.Sincos(angle / 2)
		return Quaternion{axis.X * s, axis.Y * s, axis.Z * s, c}
	}
	base := FromRPY(0.4, -0.3, 1.2)
	for _, c := range []struct {
		name    string
		a, b    Transform
		f       float64
		wantRot Quaternion
	}{
		{"90° yaw, midpoint", yaw(0), yaw(90), 0.5, FromRPY(0, 0, 45*deg)},
		{"90° yaw, a quarter", yaw(0), yaw(90), 0.25, FromRPY(0, 0, 22.5*deg)},
		{"30° yaw, extrapolated to f=2", yaw(0), yaw(30), 2, FromRPY(0, 0, 60*deg)},
		{"30° yaw, extrapolated back to f=-1", yaw(10), yaw(40), -1, FromRPY(0, 0, -20*deg)},
		{"b's quaternion negated: still the shorter arc", yaw(20), neg(yaw(40)), 0.5, FromRPY(0, 0, 30*deg)},
		{"a's quaternion negated", neg(yaw(20)), yaw(40), 0.5, FromRPY(0, 0, 30*deg)},
		{"across ±180°: through 180°, not 0°", yaw(170), yaw(-170), 0.5, FromRPY(0, 0, math.Pi)},
		{"across ±180°, extrapolated", yaw(170), yaw(-170), 2, FromRPY(0, 0, -150*deg)},
		{"same rotation", yaw(33), yaw(33), 0.7, FromRPY(0, 0, 33*deg)},
		{"tilted axis, 0.3 of the way", Transform{Rotation: base}, Transform{Rotation: base.mul(about(tilted, 1.1))}, 0.3,
			base.mul(about(tilted, 0.33))},
		{"tilted axis, 2.5 times", Transform{Rotation: base}, Transform{Rotation: base.mul(about(tilted, 0.2))}, 2.5,
			base.mul(about(tilted, 0.5))},
		{"a nanoradian", yaw(10), Transform{Rotation: FromRPY(0, 0, 10*deg+1e-9)}, 0.5, FromRPY(0, 0, 10*deg+0.5e-9)},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := Interpolate(c.a, c.b, c.f)
			if d := rotAngle(got.Rotation, c.wantRot); d > 1e-14 {
				t.Errorf("rotation %s, want %s (%g rad off)", fmtTF(got), fmtTF(Transform{Rotation: c.wantRot}), d)
			}
			g := got.Rotation
			if n := g.X*g.X + g.Y*g.Y + g.Z*g.Z + g.W*g.W; math.Abs(n-1) > 1e-15 {
				t.Errorf("rotation's length² %g", n)
			}
		})
	}

	// Endpoints are a and b themselves.
	a := Transform{Translation: [3]float64{1, 2, 3}, Rotation: FromRPY(0.1, 0.2, 0.3)}
	b := Transform{Translation: [3]float64{3, -2, 7}, Rotation: FromRPY(-0.5, 0.1, 2.9)}
	if got := Interpolate(a, b, 0); got != a {
		t.Errorf("f=0: %+v, want a %+v", got, a)
	}
	if got := Interpolate(a, b, 1); got != b {
		t.Errorf("f=1: %+v, want b %+v", got, b)
	}
	// Translation is linear in f, inside and outside [0, 1].
	for _, c := range []struct {
		f    float64
		want [3]float64
	}{
		{0.25, [3]float64{1.5, 1, 4}},
		{0.5, [3]float64{2, 0, 5}},
		{-0.5, [3]float64{0, 4, 1}},
		{3, [3]float64{7, -10, 15}},
	} {
		if got := Interpolate(a, b, c.f); vecDiff(got.Translation, c.want) > 1e-15 {
			t.Errorf("f=%g: translation %v, want %v", c.f, got.Translation, c.want)
		}
	}
	// Constant angular velocity: equal steps in f are equal angles.
	step := rotAngle(Interpolate(a, b, 0).Rotation, Interpolate(a, b, 0.1).Rotation)
	for i := 1; i < 15; i++ {
		f0, f1 := float64(i)/10, float64(i+1)/10
		if d := rotAngle(Interpolate(a, b, f0).Rotation, Interpolate(a, b, f1).Rotation); math.Abs(d-step) > 1e-12 {
			t.Errorf("f %g→%g turns %g rad, want %g as every step", f0, f1, d, step)
		}
	}
}

// The robot of the deskew tests: its base turns at 1 rad/s about z while
// driving 0.5 m/s along its own x (a circle of radius 0.5 m), odom→base_link
// published every 20 ms; the laser is mounted 0.2 m ahead, upside down.
const (
	omega    = 1.0 // rad/s
	speed    = 0.5 // m/s
	epoch0   = int64(1_700_000_000_000_000_000)
	period   = 20 * time.Millisecond
	nSamples = 101 // 2 s, inside the default Keep
)

var blToLaser = tfAt(0.2, 0, 0, math.Pi, 0, 0)

// basePose is odom→base_link at time ns, exactly.
func basePose(ns int64) Transform {
	tau := float64(ns-epoch0) / 1e9
	r := speed / omega
	th := omega * tau
	return Transform{Translation: [3]float64{r * math.Sin(th), r * (1 - math.Cos(th)), 0}, Rotation: FromRPY(0, 0, th)}
}

func sampleAt(i int) int64 { return epoch0 + int64(i)*int64(period) }

func turningRobot(t testing.TB, cfg BufferConfig) *Buffer {
	t.Helper()
	b := newBuffer(t, cfg)
	if err := b.AddStatic(static("base_link", "laser", blToLaser)); err != nil {
		t.Fatal(err)
	}
	for i := range nSamples {
		if err := b.Add(moving("odom", "base_link", basePose(sampleAt(i)), sampleAt(i))); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

func TestLookupAtTurningRobot(t *testing.T) {
	b := turningRobot(t, BufferConfig{Extrapolate: 100 * time.Millisecond})
	lookup := func(at int64) Transform {
		t.Helper()
		got, err := b.LookupAt("odom", "laser", at)
		if err != nil {
			t.Fatalf("LookupAt(odom, laser, %d): %v", at, err)
		}
		back, err := b.LookupAt("laser", "odom", at)
		if err != nil {
			t.Fatalf("LookupAt(laser, odom, %d): %v", at, err)
		}
		if d := tfDiff(got.Mul(back), Identity()); d > 1e-12 {
			t.Errorf("at %d: LookupAt(odom, laser)·LookupAt(laser, odom) is %g off the identity", at, d)
		}
		return got
	}

	t.Run("at samples", func(t *testing.T) {
		for i := range nSamples {
			at := sampleAt(i)
			want := basePose(at).Mul(blToLaser)
			if got := lookup(at); tfDiff(got, want) > 1e-12 {
				t.Errorf("sample %d: %s, want %s", i, fmtTF(got), fmtTF(want))
			}
		}
		// Upside down: the laser's z axis points down in odom.
		if up := lookup(sampleAt(0)).Rotation.rotate([3]float64{0, 0, 1}); vecDiff(up, [3]float64{0, 0, -1}) > 1e-15 {
			t.Errorf("laser's z in odom %v, want down", up)
		}
	})

	t.Run("between samples", func(t *testing.T) {
		// Slerp turns the yaw exactly as the robot does; the translation
		// follows the chord instead of the arc, at most the sagitta
		// r·(1 − cos(ω·Δt/2)) away (2.5e-5 m here).
		sagitta := speed / omega * (1 - math.Cos(omega*period.Seconds()/2))
		if sagitta > 1e-3 {
			t.Fatalf("sagitta %g: the test's robot is too fast", sagitta)
		}
		worst := 0.0
		for at := sampleAt(0); at <= sampleAt(nSamples-1); at += int64(3*time.Millisecond + 7) {
			got := lookup(at)
			want := basePose(at).Mul(blToLaser)
			if d := rotAngle(got.Rotation, want.Rotation); d > 1e-12 {
				t.Fatalf("at +%v: rotation %s, want %s", time.Duration(at-epoch0), fmtTF(got), fmtTF(want))
			}
			d := vecDiff(got.Translation, want.Translation)
			if d > sagitta*(1+1e-6)+1e-12 {
				t.Fatalf("at +%v: translation %v, want %v (%g off, more than the sagitta %g)",
					time.Duration(at-epoch0), got.Translation, want.Translation, d, sagitta)
			}
			worst = max(worst, d)
		}
		// The chord is used: halfway between samples it is well off the arc.
		if worst < sagitta/2 {
			t.Errorf("worst translation error %g, want near the sagitta %g (interpolating along the chord)", worst, sagitta)
		}
	})

	t.Run("extrapolated within the limit", func(t *testing.T) {
		last, prev := sampleAt(nSamples-1), sampleAt(nSamples-2)
		for _, past := range []time.Duration{time.Nanosecond, 10 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond} {
			at := last + int64(past)
			// Constant velocity from the last two samples: the yaw rate
			// carries on exactly, the translation along their chord.
			f := float64(at-prev) / float64(last-prev)
			p0, p1 := basePose(prev).Translation, basePose(last).Translation
			model := Transform{
				Translation: [3]float64{p0[0] + (p1[0]-p0[0])*f, p0[1] + (p1[1]-p0[1])*f, 0},
				Rotation:    basePose(at).Rotation,
			}.Mul(blToLaser)
			got := lookup(at)
			if d := tfDiff(got, model); d > 1e-9 {
				t.Errorf("+%v past the newest: %s, want %s", past, fmtTF(got), fmtTF(model))
			}
			// A straight line off a circle of radius r drifts by about
			// r·(ω·Δt)²·f(f−1)/2 from it (2.7 mm at +100 ms).
			bound := speed / omega * math.Pow(omega*period.Seconds(), 2) * f * (f - 1) / 2
			if d := tfDiff(got, basePose(at).Mul(blToLaser)); d > 1.05*bound+1e-12 {
				t.Errorf("+%v past the newest: %g off the true pose, more than %g", past, d, bound)
			}
		}
	})

	t.Run("errors", func(t *testing.T) {
		last := sampleAt(nSamples - 1)
		for _, c := range []struct {
			name           string
			target, source string
			at             int64
			kind           error
			want           string
		}{
			{"past the limit", "odom", "laser", last + int64(250*time.Millisecond), ErrExtrapolation,
				`looking up "laser" in "odom" at 1700000002.250 s: odom→base_link: 0.250 s after its newest transform (at 1700000002.000 s), more than the 0.100 s allowed`},
			{"just past the limit", "laser", "odom", last + int64(100*time.Millisecond) + 1, ErrExtrapolation,
				`odom→base_link: 0.100 s after its newest transform (at 1700000002.000 s), more than the 0.100 s allowed`},
			{"before the oldest", "odom", "laser", epoch0 - int64(time.Millisecond), ErrExtrapolation,
				`looking up "laser" in "odom" at 1699999999.999 s: odom→base_link: 0.001 s before its oldest transform (at 1700000000.000 s; it holds 2.000 s, up to 1700000002.000 s)`},
			{"time zero", "laser", "odom", 0, ErrExtrapolation,
				`looking up "odom" in "laser" at 0.000 s: odom→base_link: 1700000000.000 s before its oldest transform`},
			{"the most negative time", "laser", "odom", math.MinInt64, ErrExtrapolation,
				`at -9223372036.855 s: odom→base_link: 10923372036.855 s before its oldest transform`},
			{"unknown source", "odom", "velodyne", last, ErrUnknownFrame,
				`frame "velodyne" is not on /tf or /tf_static (it has: base_link, laser, odom)`},
			{"unknown target", "/map", "laser", last, ErrUnknownFrame,
				`frame "map" is not on /tf or /tf_static (it has: base_link, laser, odom)`},
			{"both unknown", "map", "velodyne", last, ErrUnknownFrame,
				`frames "map" and "velodyne" are not on /tf or /tf_static`},
			{"unknown to itself", "map", "map", last, ErrUnknownFrame, `frame "map" is not on /tf or /tf_static`},
		} {
			t.Run(c.name, func(t *testing.T) {
				_, err := b.LookupAt(c.target, c.source, c.at)
				if !errors.Is(err, c.kind) || !strings.Contains(err.Error(), c.want) {
					t.Errorf("LookupAt = %v\nwant %v saying %s", err, c.kind, c.want)
				}
			})
		}
	})

	t.Run("not connected", func(t *testing.T) {
		if err := b.AddStatic(static("map", "gps", Identity())); err != nil {
			t.Fatal(err)
		}
		_, err := b.LookupAt("laser", "gps", sampleAt(3))
		want := `"laser" and "gps" are not connected: their trees' roots are "odom" and "map"`
		if !errors.Is(err, ErrNotConnected) || !strings.Contains(err.Error(), want) {
			t.Errorf("LookupAt = %v, want ErrNotConnected saying %s", err, want)
		}
	})

	t.Run("identity", func(t *testing.T) {
		// A frame to itself needs no edge, so any time works.
		for _, at := range []int64{0, sampleAt(5), math.MaxInt64} {
			if got, err := b.LookupAt("laser", "/laser", at); err != nil || got != Identity() {
				t.Errorf("LookupAt(laser, laser, %d) = %s, %v", at, fmtTF(got), err)
			}
		}
	})
}

// TestLookupAtTwoMovingEdges: map→odom (a localiser's correction, 1 Hz) and
// odom→base_link (the base, 50 Hz) are each evaluated at the time, with
// static edges on both sides of the common ancestor.
func TestLookupAtTwoMovingEdges(t *testing.T) {
	b := twoMovingEdges(t)
	imu := tfAt(-0.1, 0.05, 0.1, 0, 0, math.Pi/2)
	for _, at := range []int64{epoch0 + 1, epoch0 + 437_000_000, epoch0 + int64(time.Second), epoch0 + 1_999_999_999} {
		fm := float64(at-epoch0) / 1e9
		mapOdom := Interpolate(tfAt(0, 0, 0, 0, 0, 0), tfAt(0.1, -0.05, 0, 0, 0, 0.02), fm/2) // its samples are collinear
		i := int((at - epoch0) / int64(period))
		a, c := sampleAt(i), sampleAt(i+1)
		odomBase := Interpolate(basePose(a), basePose(c), float64(at-a)/float64(c-a))
		want := mapOdom.Mul(odomBase).Mul(blToLaser)
		got, err := b.LookupAt("map", "laser", at)
		if err != nil {
			t.Fatal(err)
		}
		if d := tfDiff(got, want); d > 1e-13 {
			t.Errorf("at +%v: LookupAt(map, laser) = %s, want %s", time.Duration(at-epoch0), fmtTF(got), fmtTF(want))
		}
		got, err = b.LookupAt("imu", "laser", at)
		if err != nil {
			t.Fatal(err)
		}
		// Both under base_link: the moving edges above cancel.
		if want := imu.Inverse().Mul(blToLaser); tfDiff(got, want) > 1e-13 {
			t.Errorf("LookupAt(imu, laser) = %s, want %s", fmtTF(got), fmtTF(want))
		}
	}
	// Only the edges below the nearest common ancestor are needed: two
	// frames on the robot are related at any time, whatever /tf holds.
	for _, at := range []int64{0, epoch0 - 1, epoch0 + int64(time.Hour)} {
		got, err := b.LookupAt("imu", "laser", at)
		if want := imu.Inverse().Mul(blToLaser); err != nil || tfDiff(got, want) > 1e-15 {
			t.Errorf("LookupAt(imu, laser, %d) = %s, %v; want %s", at, fmtTF(got), err, fmtTF(want))
		}
	}
	// The slower edge bounds the time: map→odom's newest is at +2 s.
	_, err := b.LookupAt("laser", "map", epoch0+int64(2*time.Second)+1)
	if !errors.Is(err, ErrExtrapolation) || !strings.Contains(err.Error(), "map→odom: 0.000 s after its newest transform (at 1700000002.000 s), and the buffer does not extrapolate") {
		t.Errorf("LookupAt past map→odom = %v", err)
	}
}

func twoMovingEdges(t testing.TB) *Buffer {
	t.Helper()
	b := turningRobot(t, BufferConfig{})
	for i, tf := range []Transform{tfAt(0, 0, 0, 0, 0, 0), tfAt(0.05, -0.025, 0, 0, 0, 0.01), tfAt(0.1, -0.05, 0, 0, 0, 0.02)} {
		if err := b.Add(moving("map", "odom", tf, epoch0+int64(i)*int64(time.Second))); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.AddStatic(static("base_link", "imu", tfAt(-0.1, 0.05, 0.1, 0, 0, math.Pi/2))); err != nil {
		t.Fatal(err)
	}
	return b
}

func TestLookupAtOneSample(t *testing.T) {
	stamp := epoch0 + 345_000_000
	pose := tfAt(1, 2, 0, 0, 0, 0.5)
	for _, c := range []struct {
		extrapolate time.Duration
		at          int64
		want        string // "" for success
	}{
		{0, stamp, ""},
		{time.Second, stamp, ""},
		{0, stamp + int64(10*time.Millisecond),
			`looking up "base_link" in "odom" at 1700000000.355 s: odom→base_link: 0.010 s after its newest transform (at 1700000000.345 s), and the buffer does not extrapolate`},
		{time.Second, stamp + int64(10*time.Millisecond),
			`odom→base_link: 0.010 s after its only transform (at 1700000000.345 s); extrapolating needs two`},
		{time.Second, stamp - 1, `odom→base_link: 0.000 s before its oldest transform (at 1700000000.345 s; it holds 0.000 s, up to 1700000000.345 s)`},
	} {
		b := newBuffer(t, BufferConfig{Extrapolate: c.extrapolate})
		if err := b.Add(moving("odom", "base_link", pose, stamp)); err != nil {
			t.Fatal(err)
		}
		got, err := b.LookupAt("odom", "base_link", c.at)
		switch {
		case c.want == "" && (err != nil || tfDiff(got, pose) > 1e-15):
			t.Errorf("extrapolate %v, at %d: %s, %v; want %s", c.extrapolate, c.at, fmtTF(got), err, fmtTF(pose))
		case c.want != "" && (!errors.Is(err, ErrExtrapolation) || !strings.Contains(err.Error(), c.want)):
			t.Errorf("extrapolate %v, at %d: %v\nwant ErrExtrapolation saying %s", c.extrapolate, c.at, err, c.want)
		}
	}
}

// held returns the stamps child's moving edge holds, oldest first, and
// checks they increase.
func held(t *testing.T, b *Buffer, child string) []int64 {
	t.Helper()
	e := b.up[child]
	if e == nil || e.ring == nil {
		t.Fatalf("%s has no moving edge", child)
	}
	var s []int64
	for i := range e.n {
		s = append(s, e.at(i).stamp)
		if i > 0 && s[i] <= s[i-1] {
			t.Fatalf("%s's stamps are out of order: %v", child, s)
		}
	}
	return s
}

func TestKeepAndCapacity(t *testing.T) {
	ms := int64(time.Millisecond)
	t.Run("keep", func(t *testing.T) {
		b := newBuffer(t, BufferConfig{Keep: 100 * time.Millisecond})
		for i := int64(1); i <= 100; i++ {
			if err := b.Add(moving("odom", "base_link", tfAt(float64(i), 0, 0, 0, 0, 0), epoch0+i*10*ms)); err != nil {
				t.Fatal(err)
			}
		}
		s := held(t, b, "base_link")
		newest := epoch0 + 1000*ms
		if len(s) != 11 || s[0] != newest-100*ms || s[10] != newest {
			t.Errorf("held %d samples from +%v to +%v, want 11 from +900ms to +1s",
				len(s), time.Duration(s[0]-epoch0), time.Duration(s[len(s)-1]-epoch0))
		}
		if _, err := b.LookupAt("odom", "base_link", newest-100*ms); err != nil {
			t.Errorf("at the oldest kept: %v", err)
		}
		if _, err := b.LookupAt("odom", "base_link", newest-100*ms-1); !errors.Is(err, ErrExtrapolation) {
			t.Errorf("before the oldest kept: %v", err)
		}
	})
	t.Run("default keep is 2 s", func(t *testing.T) {
		var b Buffer // the zero Buffer is ready
		for i := int64(0); i <= 300; i++ {
			if err := b.Add(moving("odom", "base_link", Identity(), epoch0+i*10*ms)); err != nil {
				t.Fatal(err)
			}
		}
		if s := held(t, &b, "base_link"); len(s) != 201 || s[0] != epoch0+1000*ms {
			t.Errorf("held %d samples from +%v, want 201 from +1s", len(s), time.Duration(s[0]-epoch0))
		}
	})
	t.Run("capacity", func(t *testing.T) {
		b := newBuffer(t, BufferConfig{Keep: 10 * time.Second})
		for i := int64(0); i < 300; i++ {
			if err := b.Add(moving("odom", "base_link", tfAt(float64(i), 0, 0, 0, 0, 0), epoch0+i*ms)); err != nil {
				t.Fatal(err)
			}
		}
		s := held(t, b, "base_link")
		if len(s) != ringCap || s[0] != epoch0+44*ms || s[ringCap-1] != epoch0+299*ms {
			t.Errorf("held %d samples from +%v to +%v, want %d from +44ms to +299ms",
				len(s), time.Duration(s[0]-epoch0), time.Duration(s[len(s)-1]-epoch0), ringCap)
		}
		// Inside Keep but older than all a full ring holds: dropped.
		if err := b.Add(moving("odom", "base_link", Identity(), epoch0+10*ms)); err != nil {
			t.Fatal(err)
		}
		if s2 := held(t, b, "base_link"); !slices.Equal(s2, s) {
			t.Errorf("a sample older than a full ring changed it")
		}
		// Between held ones: put in order, the oldest making room.
		mid := epoch0 + 100*ms + ms/2
		if err := b.Add(moving("odom", "base_link", tfAt(-7, 0, 0, 0, 0, 0), mid)); err != nil {
			t.Fatal(err)
		}
		s2 := held(t, b, "base_link")
		if len(s2) != ringCap || s2[0] != epoch0+45*ms || !slices.Contains(s2, mid) {
			t.Errorf("after an out-of-order sample in a full ring: %d held from +%v", len(s2), time.Duration(s2[0]-epoch0))
		}
		if got, err := b.LookupAt("odom", "base_link", mid); err != nil || got.Translation[0] != -7 {
			t.Errorf("LookupAt the inserted sample = %s, %v", fmtTF(got), err)
		}
	})
}

func TestOutOfOrder(t *testing.T) {
	ms := int64(time.Millisecond)
	b := newBuffer(t, BufferConfig{Keep: 100 * time.Millisecond})
	x := func(v float64) Transform { return tfAt(v, 0, 0, 0, 0, 0) }
	for _, s := range []struct {
		at int64
		x  float64
	}{{0, 0}, {20, 20}, {40, 40}, {60, 60}, {30, 100}} {
		if err := b.Add(moving("odom", "base_link", x(s.x), epoch0+s.at*ms)); err != nil {
			t.Fatal(err)
		}
	}
	if s := held(t, b, "base_link"); len(s) != 5 || s[2] != epoch0+30*ms {
		t.Errorf("held %v, want 30 ms third", s)
	}
	for _, c := range []struct {
		at   int64
		want float64
	}{{30 * ms, 100}, {25 * ms, 60}, {35 * ms, 70}, {20 * ms, 20}, {50 * ms, 50}} {
		if got, err := b.LookupAt("odom", "base_link", epoch0+c.at); err != nil || math.Abs(got.Translation[0]-c.want) > 1e-12 {
			t.Errorf("at +%v: x %g, %v; want %g", time.Duration(c.at), got.Translation[0], err, c.want)
		}
	}
	// An equal stamp replaces.
	if err := b.Add(moving("odom", "base_link", x(-1), epoch0+20*ms)); err != nil {
		t.Fatal(err)
	}
	if got, _ := b.LookupAt("odom", "base_link", epoch0+20*ms); got.Translation[0] != -1 || len(held(t, b, "base_link")) != 5 {
		t.Errorf("after replacing +20ms: x %g, %d held", got.Translation[0], len(held(t, b, "base_link")))
	}
	if err := b.Add(moving("odom", "base_link", x(-2), epoch0+60*ms)); err != nil {
		t.Fatal(err)
	}
	if got, _ := b.LookupAt("odom", "base_link", epoch0+60*ms); got.Translation[0] != -2 {
		t.Errorf("after replacing the newest: x %g", got.Translation[0])
	}
	// Exactly Keep behind: kept.
	if err := b.Add(moving("odom", "base_link", x(9), epoch0+60*ms-100*ms)); err != nil {
		t.Fatal(err)
	}
	if s := held(t, b, "base_link"); len(s) != 6 || s[0] != epoch0-40*ms {
		t.Errorf("a sample Keep behind the newest: held %v", s)
	}
}

// Time that jumps back by more than Keep (a bag played in a loop, a
// simulator reset) starts the edge's history over, as tf2_ros clears its
// buffer: the new timeline is looked up, not dropped sample by sample
// until it passes the old one. Add says so, naming the edge.
func TestTimeJumpedBackRestartsTheHistory(t *testing.T) {
	ms := int64(time.Millisecond)
	b := newBuffer(t, BufferConfig{Keep: 100 * time.Millisecond})
	x := func(v float64) Transform { return tfAt(v, 0, 0, 0, 0, 0) }
	for at := int64(0); at <= 60; at += 20 {
		if err := b.Add(moving("odom", "base_link", x(float64(at)), epoch0+at*ms)); err != nil {
			t.Fatal(err)
		}
	}
	restart := epoch0 - 10_000*ms // 10 s earlier
	err := b.Add(moving("odom", "base_link", x(-5), restart))
	if !errors.Is(err, ErrTimeJumpedBack) || !strings.Contains(err.Error(), "odom→base_link") {
		t.Fatalf("a sample 10 s back: %v, want ErrTimeJumpedBack naming odom→base_link", err)
	}
	if s := held(t, b, "base_link"); len(s) != 1 || s[0] != restart {
		t.Errorf("held %v after the jump, want only %d", s, restart)
	}
	if err := b.Add(moving("odom", "base_link", x(-3), restart+20*ms)); err != nil {
		t.Fatal(err)
	}
	if got, err := b.LookupAt("odom", "base_link", restart+10*ms); err != nil || math.Abs(got.Translation[0]+4) > 1e-12 {
		t.Errorf("between the new timeline's samples: x %g, %v; want -4", got.Translation[0], err)
	}
}

// TestRingModel: random stamps, in and out of order, through a ring that
// wraps, against a plain sorted slice following the same rules.
func TestRingModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	keep := int64(400)
	b := newBuffer(t, BufferConfig{Keep: time.Duration(keep)})
	var model []int64
	newest := int64(1_000_000)
	jumps := 0
	for i := range 20000 {
		var s int64
		switch r := rng.IntN(10); {
		case r < 5:
			newest += 1 + rng.Int64N(3)
			s = newest
		case r < 9:
			// Now and then older than keep: time jumped back.
			back := rng.Int64N(keep + 1)
			if rng.IntN(50) == 0 {
				back = keep + 1 + rng.Int64N(50)
			}
			s = max(1, newest-back)
		default:
			if len(model) > 0 {
				s = model[rng.IntN(len(model))]
			} else {
				s = newest
			}
		}
		err := b.Add(moving("odom", "base_link", tfAt(float64(s), 0, 0, 0, 0, 0), s))
		if errors.Is(err, ErrTimeJumpedBack) {
			jumps++
		} else if err != nil {
			t.Fatal(err)
		}
		model = modelInsert(model, s, keep)
		newest = model[len(model)-1]
		if got := held(t, b, "base_link"); !slices.Equal(got, model) {
			t.Fatalf("step %d, stamp %d: held %v\nwant %v", i, s, got, model)
		}
	}
	if jumps == 0 {
		t.Error("no time jump in the random walk: the model test does not cover them")
	}
}

func modelInsert(m []int64, s, keep int64) []int64 {
	switch {
	case len(m) == 0 || s > m[len(m)-1]:
		m = append(m, s)
		if len(m) > ringCap {
			m = m[1:]
		}
		for m[0] < s-keep {
			m = m[1:]
		}
		return slices.Clip(m)
	case s < m[len(m)-1]-keep:
		return []int64{s} // time jumped back: the history starts over
	}
	k, found := slices.BinarySearch(m, s)
	if found {
		return m
	}
	if len(m) == ringCap {
		if k == 0 {
			return m
		}
		m = slices.Clip(m[1:])
		k--
	}
	return slices.Insert(m, k, s)
}

func TestReparent(t *testing.T) {
	b := turningRobot(t, BufferConfig{})
	at := sampleAt(nSamples-1) + int64(time.Millisecond)
	moved := tfAt(3, 4, 0, 0, 0, 1)
	if err := b.Add(moving("map", "base_link", moved, at)); err != nil {
		t.Fatal(err)
	}
	if s := held(t, b, "base_link"); len(s) != 1 || s[0] != at {
		t.Errorf("after reparenting base_link holds %v, want only the new sample", s)
	}
	if got, err := b.LookupAt("map", "laser", at); err != nil || tfDiff(got, moved.Mul(blToLaser)) > 1e-15 {
		t.Errorf("LookupAt(map, laser) = %s, %v", fmtTF(got), err)
	}
	// The old parent's history is gone, and odom with it.
	if _, err := b.LookupAt("map", "laser", sampleAt(50)); !errors.Is(err, ErrExtrapolation) {
		t.Errorf("LookupAt at a time only odom's history held: %v, want ErrExtrapolation", err)
	}
	if _, err := b.LookupAt("odom", "laser", at); !errors.Is(err, ErrUnknownFrame) ||
		!strings.Contains(err.Error(), `frame "odom" is not on /tf or /tf_static (it has: base_link, laser, map)`) {
		t.Errorf("LookupAt(odom, laser) = %v, want odom unknown", err)
	}
}

func TestStaticMovingReplace(t *testing.T) {
	b := newBuffer(t, BufferConfig{Extrapolate: time.Second})
	mount, tilted := tfAt(0.2, 0, 0.1, 0, 0, 0), tfAt(0.2, 0, 0.1, 0, 0.3, 0)
	if err := b.AddStatic(static("base_link", "laser", mount)); err != nil {
		t.Fatal(err)
	}
	for _, at := range []int64{1, epoch0, math.MaxInt64} {
		if got, err := b.LookupAt("base_link", "laser", at); err != nil || tfDiff(got, mount) > 1e-15 {
			t.Errorf("static, at %d: %s, %v", at, fmtTF(got), err)
		}
	}
	// A moving transform for the child replaces the static edge.
	if err := b.Add(moving("base_link", "laser", tilted, epoch0)); err != nil {
		t.Fatal(err)
	}
	if got, err := b.LookupAt("base_link", "laser", epoch0); err != nil || tfDiff(got, tilted) > 1e-15 {
		t.Errorf("moving, at its stamp: %s, %v", fmtTF(got), err)
	}
	if _, err := b.LookupAt("base_link", "laser", epoch0-1); !errors.Is(err, ErrExtrapolation) {
		t.Errorf("moving, before its stamp: %v, want ErrExtrapolation", err)
	}
	// And a static one replaces the moving edge, history and all.
	if err := b.AddStatic(static("base_link", "laser", mount)); err != nil {
		t.Fatal(err)
	}
	if e := b.up["laser"]; !e.static || e.ring != nil || e.n != 0 {
		t.Errorf("static again: edge %+v", e)
	}
	if got, err := b.LookupAt("base_link", "laser", 7); err != nil || tfDiff(got, mount) > 1e-15 {
		t.Errorf("static again: %s, %v", fmtTF(got), err)
	}
	// Moving again starts a fresh history.
	if err := b.Add(moving("base_link", "laser", tilted, epoch0+5)); err != nil {
		t.Fatal(err)
	}
	if s := held(t, b, "laser"); !slices.Equal(s, []int64{epoch0 + 5}) {
		t.Errorf("moving again holds %v", s)
	}
}

func TestBufferLoop(t *testing.T) {
	b := newBuffer(t, BufferConfig{})
	if err := b.AddStatic(static("a", "b", Identity())); err != nil {
		t.Fatal(err)
	}
	if err := b.Add(moving("b", "c", Identity(), epoch0)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		add  func(Stamped) error
		s    Stamped
		loop string
	}{
		{b.Add, moving("c", "a", Identity(), epoch0), "c→a would close the loop a→b→c→a"},
		{b.AddStatic, static("/c", "/a", Identity()), "c→a would close the loop a→b→c→a"},
		{b.Add, moving("c", "b", Identity(), epoch0), "c→b would close the loop b→c→b"},
		{b.AddStatic, static("b", "a", Identity()), "b→a would close the loop a→b→a"},
	} {
		err := c.add(c.s)
		if !errors.Is(err, ErrLoop) || !strings.Contains(err.Error(), c.loop) {
			t.Errorf("%s→%s: %v, want ErrLoop saying %s", c.s.Parent, c.s.Child, err, c.loop)
		}
	}
	if got := b.frames(); !slices.Equal(got, []string{"a", "b", "c"}) || b.up["a"] != nil || b.up["b"].parent != "a" || b.up["c"].parent != "b" {
		t.Errorf("the buffer changed: frames %q", got)
	}
	// Re-adding an edge, or moving a subtree elsewhere, is no loop.
	if err := b.Add(moving("b", "c", Identity(), epoch0+1)); err != nil {
		t.Error(err)
	}
	if err := b.AddStatic(static("a", "c", Identity())); err != nil {
		t.Error(err)
	}
}

func TestBufferInvalid(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	ok := Identity()
	for _, c := range []struct {
		name          string
		parent, child string
		tf            Transform
		stamp         int64
		static        bool
		want          []string
	}{
		{"empty parent", "", "base_link", ok, epoch0, false, []string{`""→base_link`, "header.frame_id", "empty"}},
		{"slash parent", "/", "base_link", ok, epoch0, true, []string{`""→base_link`, "header.frame_id", "empty"}},
		{"empty child", "odom", "", ok, epoch0, false, []string{`odom→""`, "child_frame_id is empty"}},
		{"own parent", "/odom", "odom", ok, epoch0, true, []string{"odom→odom: a frame cannot be its own parent"}},
		{"NaN x", "odom", "base_link", withT(nan, 0, 0), epoch0, false, []string{"odom→base_link", "translation (NaN, 0, 0) is not finite"}},
		{"Inf z", "odom", "base_link", withT(0, 0, inf), epoch0, true, []string{"odom→base_link", "translation (0, 0, +Inf) is not finite"}},
		{"NaN w", "odom", "base_link", withQ(0, 0, 0, nan), epoch0, false, []string{"odom→base_link", "rotation", "not finite"}},
		{"short quaternion", "odom", "base_link", withQ(0, 0, 0.5, 0.5), epoch0, false,
			[]string{"odom→base_link", "invalid quaternion", "its length² is 0.5, want 1"}},
		{"zero quaternion", "odom", "base_link", withQ(0, 0, 0, 0), epoch0, true, []string{"invalid quaternion", "its length² is 0"}},
		{"zero stamp", "odom", "base_link", ok, 0, false, []string{"odom→base_link: header.stamp 0 ns is not after the epoch"}},
		{"negative stamp", "/odom", "/base_link", ok, -5, false, []string{"odom→base_link: header.stamp -5 ns is not after the epoch"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := turningRobot(t, BufferConfig{})
			before := b.frames()
			oldest := held(t, b, "base_link")
			add := b.Add
			if c.static {
				add = b.AddStatic
			}
			err := add(Stamped{Parent: c.parent, Child: c.child, Transform: c.tf, Stamp: c.stamp})
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("= %v, want ErrInvalid", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if after := b.frames(); !slices.Equal(after, before) || !slices.Equal(held(t, b, "base_link"), oldest) || b.up["base_link"].static {
				t.Errorf("the buffer changed: %q, was %q", after, before)
			}
		})
	}
	// A static transform's stamp does not matter.
	var b Buffer
	for _, stamp := range []int64{0, -1, epoch0} {
		if err := b.AddStatic(Stamped{Parent: "base_link", Child: "laser", Transform: blToLaser, Stamp: stamp}); err != nil {
			t.Errorf("AddStatic with stamp %d: %v", stamp, err)
		}
	}
	// Rotations are stored unit.
	k := math.Sqrt(1.009)
	q := FromRPY(0.1, 0.2, 0.3)
	if err := b.Add(moving("odom", "base_link", Transform{Rotation: Quaternion{k * q.X, k * q.Y, k * q.Z, k * q.W}}, 5)); err != nil {
		t.Fatal(err)
	}
	g := b.up["base_link"].at(0).tf.Rotation
	if n := g.X*g.X + g.Y*g.Y + g.Z*g.Z + g.W*g.W; math.Abs(n-1) > 1e-15 {
		t.Errorf("stored rotation's length² %g", n)
	}
	// NewBuffer refuses negative durations.
	for _, cfg := range []BufferConfig{{Keep: -1}, {Extrapolate: -time.Millisecond}} {
		if b, err := NewBuffer(cfg); err == nil || b != nil || !strings.Contains(err.Error(), "negative") {
			t.Errorf("NewBuffer(%+v) = %v, %v; want an error", cfg, b, err)
		}
	}
}

func TestLookupAtEmptyAndSlash(t *testing.T) {
	var b Buffer
	if _, err := b.LookupAt("odom", "odom", epoch0); !errors.Is(err, ErrUnknownFrame) ||
		err.Error() != `frame "odom" is not on /tf or /tf_static (no transform received yet)` {
		t.Errorf("empty buffer: %v", err)
	}
	if err := b.Add(moving("/odom", "/base_link", tfAt(1, 0, 0, 0, 0, 0), epoch0)); err != nil {
		t.Fatal(err)
	}
	if err := b.Add(moving("odom", "base_link", tfAt(2, 0, 0, 0, 0, 0), epoch0+10)); err != nil {
		t.Fatal(err)
	}
	if got, err := b.LookupAt("/odom", "base_link", epoch0+5); err != nil || got.Translation[0] != 1.5 {
		t.Errorf("LookupAt(/odom, base_link) = %s, %v", fmtTF(got), err)
	}
	if len(b.up) != 1 {
		t.Errorf("%d edges, want 1", len(b.up))
	}
}

// TestDepthBound: LookupAt walks at most maxDepth frames up from a frame.
func TestDepthBound(t *testing.T) {
	var b Buffer
	for i := range maxDepth {
		if err := b.AddStatic(static(fmt.Sprintf("f%02d", i), fmt.Sprintf("f%02d", i+1), tfAt(1, 0, 0, 0, 0, 0))); err != nil {
			t.Fatal(err)
		}
	}
	// f01 is maxDepth−1 edges below f00 … f64's way up has maxDepth+1 frames.
	got, err := b.LookupAt("f00", fmt.Sprintf("f%02d", maxDepth-1), epoch0)
	if err != nil || got.Translation[0] != maxDepth-1 {
		t.Errorf("%d frames deep: %s, %v", maxDepth, fmtTF(got), err)
	}
	_, err = b.LookupAt("f00", fmt.Sprintf("f%02d", maxDepth), epoch0)
	if err == nil || !strings.Contains(err.Error(), `"f64" is more than 63 frames below its root (f64→f63→f62→f61→…)`) {
		t.Errorf("%d frames deep: %v, want an error", maxDepth+1, err)
	}
	// A loop planted behind Add's back ends the walk too.
	b.up["f00"] = &bufEdge{parent: "f03", static: true, tf: Identity()}
	done := make(chan error, 1)
	go func() { _, err := b.LookupAt("f10", "f02", epoch0); done <- err }()
	select {
	case err := <-done:
		if err == nil {
			t.Error("a walk through a loop succeeded")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a walk through a loop did not end")
	}
}

// TestBufferConcurrent: one goroutine adds (the base at 1 kHz, the mount
// re-announced) while another looks up near the newest time; run with
// -race.
func TestBufferConcurrent(t *testing.T) {
	b := newBuffer(t, BufferConfig{Extrapolate: 50 * time.Millisecond})
	if err := b.AddStatic(static("base_link", "laser", blToLaser)); err != nil {
		t.Fatal(err)
	}
	const n = 3000
	var newest atomic.Int64
	errs := make(chan error, 2)
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range n {
			at := epoch0 + int64(i)*int64(time.Millisecond)
			if err := b.Add(moving("odom", "base_link", basePose(at), at)); err != nil {
				errs <- err
				return
			}
			newest.Store(at)
			if i%100 == 0 {
				if err := b.AddStatic(static("base_link", "laser", blToLaser)); err != nil {
					errs <- err
					return
				}
			}
		}
	})
	wg.Go(func() {
		looked := 0
		for looked < n {
			last := newest.Load()
			if last == 0 {
				continue
			}
			at := last - int64(looked%40)*int64(time.Millisecond/4)
			got, err := b.LookupAt("odom", "laser", max(at, epoch0))
			if errors.Is(err, ErrExtrapolation) && newest.Load()-at > 200*int64(time.Millisecond) {
				continue // the adder ran more than the ring holds ahead: the sample aged out
			}
			if err != nil {
				errs <- err
				return
			}
			if d := tfDiff(got, basePose(max(at, epoch0)).Mul(blToLaser)); d > 1e-3 {
				errs <- fmt.Errorf("at +%v: %g off", time.Duration(at-epoch0), d)
				return
			}
			looked++
		}
	})
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the goroutines did not finish")
	}
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestBufferAllocs: a lookup allocates nothing, and nor does adding to an
// edge already known.
func TestBufferAllocs(t *testing.T) {
	b := twoMovingEdges(t)
	mid := epoch0 + 437_000_000
	cases := []struct{ target, source string }{
		{"map", "laser"}, {"laser", "map"}, {"imu", "laser"}, {"odom", "base_link"}, {"laser", "laser"}, {"/map", "/imu"},
	}
	for _, c := range cases {
		if _, err := b.LookupAt(c.target, c.source, mid); err != nil {
			t.Fatal(err)
		}
	}
	exact := sampleAt(30)
	if a := testing.AllocsPerRun(200, func() {
		for _, c := range cases {
			_, _ = b.LookupAt(c.target, c.source, mid)
			_, _ = b.LookupAt(c.target, c.source, exact)
		}
	}); a != 0 {
		t.Errorf("LookupAt: %g allocations a run, want 0", a)
	}
	ext := newBuffer(t, BufferConfig{Extrapolate: 100 * time.Millisecond})
	for i := range 3 {
		_ = ext.Add(moving("odom", "base_link", basePose(sampleAt(i)), sampleAt(i)))
	}
	if a := testing.AllocsPerRun(200, func() {
		_, _ = ext.LookupAt("odom", "base_link", sampleAt(2)+int64(50*time.Millisecond))
	}); a != 0 {
		t.Errorf("LookupAt extrapolating: %g allocations a run, want 0", a)
	}

	// Adding: the ring wraps many times over, samples come in and out of
	// order, a static edge is re-announced.
	i := int64(nSamples)
	if a := testing.AllocsPerRun(1000, func() {
		at := sampleAt(int(i))
		_ = b.Add(moving("odom", "base_link", basePose(at), at))
		_ = b.Add(moving("odom", "base_link", basePose(at-1e6), at-1e6))
		_ = b.Add(moving("/map", "odom", Identity(), at))
		_ = b.AddStatic(static("base_link", "laser", blToLaser))
		i++
	}); a != 0 {
		t.Errorf("Add to a known edge: %g allocations a run, want 0", a)
	}
	if s := held(t, b, "base_link"); s[len(s)-1] != sampleAt(int(i-1)) || s[len(s)-1]-s[0] != int64(2*time.Second) {
		t.Errorf("after the runs: %d held, from +%v to +%v", len(s), time.Duration(s[0]-epoch0), time.Duration(s[len(s)-1]-epoch0))
	}
}

// Extrapolation measures the velocity over 20 ms or more: from the last
// two of samples 1 ms apart (two publishers of one edge), a millimetre of
// noise on the newest would put the pose 0.1 m off 100 ms later.
func TestExtrapolationVelocityOver20ms(t *testing.T) {
	ms := int64(time.Millisecond)
	b := newBuffer(t, BufferConfig{Extrapolate: 100 * time.Millisecond})
	for i := int64(0); i <= 100; i++ {
		x := float64(i) / 1000 // 1 m/s
		if i == 100 {
			x += 0.001 // noise on the newest
		}
		if err := b.Add(moving("odom", "base_link", tfAt(x, 0, 0, 0, 0, 0), epoch0+i*ms)); err != nil {
			t.Fatal(err)
		}
	}
	got, err := b.LookupAt("odom", "base_link", epoch0+200*ms)
	if err != nil {
		t.Fatal(err)
	}
	if d := math.Abs(got.Translation[0] - 0.2); d > 0.01 {
		t.Errorf("extrapolated 100 ms: x %.4f, want 0.2 within 10 mm (off %.4f)", got.Translation[0], d)
	}
}

// A peer broadcasting a frame per tracked object, with ever new names,
// must not grow the Buffer without end (16 KiB per moving frame: 20,000
// names took 315 MiB, found in review). Past maxEdges frames a new one is
// refused (ErrFull) while all are live; once some have gone stale (no
// sample within Keep of the newest) they make room.
func TestBufferHoldsAtMostMaxEdgesFrames(t *testing.T) {
	b, err := NewBuffer(BufferConfig{})
	if err != nil {
		t.Fatal(err)
	}
	const t0 = int64(1_700_000_000_000_000_000)
	add := func(child string, stamp int64) error {
		return b.Add(Stamped{Parent: "map", Child: child, Transform: Transform{Rotation: FromRPY(0, 0, 0)}, Stamp: stamp})
	}
	for i := range maxEdges {
		if err := add(fmt.Sprintf("object_%d", i), t0+int64(i)); err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
	}
	if err := add("object_new", t0+maxEdges); !errors.Is(err, ErrFull) {
		t.Fatalf("frame %d: %v, want ErrFull", maxEdges, err)
	}
	// Known frames still take samples.
	later := t0 + int64(3*time.Second)
	for i := range 10 {
		if err := add(fmt.Sprintf("object_%d", i), later); err != nil {
			t.Fatalf("a new sample of a held frame: %v", err)
		}
	}
	// The others have gone stale: a new frame takes room from them.
	if err := add("object_new", later); err != nil {
		t.Fatalf("a new frame once most have gone stale: %v", err)
	}
	if n := len(b.up); n != 11 {
		t.Fatalf("%d frames held, want the 10 live ones and the new one", n)
	}
	if _, err := b.LookupAt("map", "object_3", later); err != nil {
		t.Fatalf("a live frame after the stale ones went: %v", err)
	}
}
