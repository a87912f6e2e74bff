package tf

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// The robot of these tests, as robot_state_publisher would put it on
// /tf_static: the LiDAR 0.62 m up and 0.1 m ahead of base_footprint,
// pitched down 10°, through base_link and a mount; an IMU and a camera
// beside it.
var (
	bfToBL    = tfAt(0, 0, 0.1, 0, 0, 0)
	blToMount = tfAt(0.1, 0, 0.5, 0, 0, 0)
	mountToV  = tfAt(0, 0, 0.02, 0, 10*deg, 0)
	blToIMU   = tfAt(-0.05, 0.02, 0.03, math.Pi, 0, math.Pi/2)
	blToCam   = tfAt(0.2, -0.1, 0.3, -math.Pi/2, 0, -math.Pi/2)
)

func robot(t *testing.T) *Tree {
	t.Helper()
	tr := &Tree{}
	for _, s := range []Stamped{
		{"base_footprint", "base_link", bfToBL, 0},
		{"base_link", "lidar_mount", blToMount, 0},
		{"lidar_mount", "velodyne", mountToV, 0},
		{"base_link", "imu_link", blToIMU, 0},
		{"base_link", "camera_link", blToCam, 0},
	} {
		if err := tr.Add(s); err != nil {
			t.Fatalf("Add(%+v): %v", s, err)
		}
	}
	return tr
}

func TestLookupChains(t *testing.T) {
	tr := robot(t)
	bfToV := bfToBL.Mul(blToMount).Mul(mountToV)
	for _, c := range []struct {
		target, source string
		want           Transform
		chain          []string
	}{
		{"base_footprint", "velodyne", bfToV, []string{"base_footprint", "base_link", "lidar_mount", "velodyne"}},
		{"velodyne", "base_footprint", bfToV.Inverse(), []string{"velodyne", "lidar_mount", "base_link", "base_footprint"}},
		{"lidar_mount", "velodyne", mountToV, []string{"lidar_mount", "velodyne"}},
		{"velodyne", "lidar_mount", mountToV.Inverse(), []string{"velodyne", "lidar_mount"}},
		{"base_link", "velodyne", blToMount.Mul(mountToV), []string{"base_link", "lidar_mount", "velodyne"}},
		{"imu_link", "velodyne", blToIMU.Inverse().Mul(blToMount).Mul(mountToV), []string{"imu_link", "base_link", "lidar_mount", "velodyne"}},
		{"velodyne", "camera_link", blToMount.Mul(mountToV).Inverse().Mul(blToCam), []string{"velodyne", "lidar_mount", "base_link", "camera_link"}},
		{"imu_link", "camera_link", blToIMU.Inverse().Mul(blToCam), []string{"imu_link", "base_link", "camera_link"}},
		{"base_link", "base_link", Identity(), []string{"base_link"}},
		{"base_footprint", "base_footprint", Identity(), []string{"base_footprint"}},
	} {
		t.Run(c.target+"←"+c.source, func(t *testing.T) {
			got, chain, err := tr.Lookup(c.target, c.source)
			if err != nil {
				t.Fatal(err)
			}
			if d := tfDiff(got, c.want); d > 1e-14 {
				t.Errorf("Lookup = %s, want %s", fmtTF(got), fmtTF(c.want))
			}
			if !slices.Equal(chain, c.chain) {
				t.Errorf("chain %q, want %q", chain, c.chain)
			}
		})
	}
}

// TestLookupLidarPose: what tf2_echo base_footprint velodyne prints.
func TestLookupLidarPose(t *testing.T) {
	got, _, err := robot(t).Lookup("base_footprint", "velodyne")
	if err != nil {
		t.Fatal(err)
	}
	if vecDiff(got.Translation, [3]float64{0.1, 0, 0.62}) > 1e-15 {
		t.Errorf("translation %v, want (0.1, 0, 0.62)", got.Translation)
	}
	r, p, y := got.Rotation.RPY()
	if math.Abs(r) > 1e-15 || math.Abs(p-10*deg) > 1e-15 || math.Abs(y) > 1e-15 {
		t.Errorf("rpy (%g, %g, %g), want (0, %g, 0)", r, p, y, 10*deg)
	}
	want := [3]float64{0.1 + math.Cos(10*deg), 0, 0.62 - math.Sin(10*deg)}
	if p := got.Apply([3]float64{1, 0, 0}); vecDiff(p, want) > 1e-15 {
		t.Errorf("Apply(1, 0, 0) = %v, want %v", p, want)
	}
}

func TestLookupInverseConsistency(t *testing.T) {
	tr := robot(t)
	frames := tr.Frames()
	if len(frames) != 6 {
		t.Fatalf("Frames() = %q, want 6", frames)
	}
	for _, a := range frames {
		for _, b := range frames {
			ab, chainAB, err := tr.Lookup(a, b)
			if err != nil {
				t.Fatal(err)
			}
			ba, chainBA, err := tr.Lookup(b, a)
			if err != nil {
				t.Fatal(err)
			}
			if d := tfDiff(ab.Mul(ba), Identity()); d > 1e-14 {
				t.Errorf("Lookup(%s, %s)·Lookup(%s, %s) = %s, not the identity", a, b, b, a, fmtTF(ab.Mul(ba)))
			}
			r := slices.Clone(chainBA)
			slices.Reverse(r)
			if !slices.Equal(chainAB, r) {
				t.Errorf("chains %q and %q are not each other's reverse", chainAB, chainBA)
			}
			// Through every third frame c: T_a_b = T_a_c·T_c_b.
			for _, c := range frames {
				ac, _, _ := tr.Lookup(a, c)
				cb, _, _ := tr.Lookup(c, b)
				if d := tfDiff(ac.Mul(cb), ab); d > 1e-14 {
					t.Errorf("Lookup(%s, %s)·Lookup(%s, %s) differs from Lookup(%s, %s) by %g", a, c, c, b, a, b, d)
				}
			}
		}
	}
}

func TestReplace(t *testing.T) {
	tr := robot(t)
	// A new mount for the LiDAR replaces the old one.
	moved := tfAt(0, 0, 0.05, 0, 20*deg, 0)
	if err := tr.Add(Stamped{"lidar_mount", "velodyne", moved, 0}); err != nil {
		t.Fatal(err)
	}
	if tr.Len() != 5 {
		t.Errorf("Len() = %d after replacing, want 5", tr.Len())
	}
	got, _, err := tr.Lookup("lidar_mount", "velodyne")
	if err != nil || tfDiff(got, moved) > 1e-15 {
		t.Errorf("Lookup = %s, %v; want %s", fmtTF(got), err, fmtTF(moved))
	}
	// Its parent changes: velodyne straight under base_link.
	direct := tfAt(0.1, 0, 0.52, 0, 10*deg, 0)
	if err := tr.Add(Stamped{"base_link", "velodyne", direct, 0}); err != nil {
		t.Fatal(err)
	}
	if tr.Len() != 5 {
		t.Errorf("Len() = %d after reparenting, want 5", tr.Len())
	}
	got, chain, err := tr.Lookup("base_footprint", "velodyne")
	if err != nil {
		t.Fatal(err)
	}
	if want := bfToBL.Mul(direct); tfDiff(got, want) > 1e-15 {
		t.Errorf("Lookup = %s, want %s", fmtTF(got), fmtTF(want))
	}
	if want := []string{"base_footprint", "base_link", "velodyne"}; !slices.Equal(chain, want) {
		t.Errorf("chain %q, want %q", chain, want)
	}
	wantEdges := []string{"base_footprint→base_link", "base_link→camera_link", "base_link→imu_link", "base_link→lidar_mount", "base_link→velodyne"}
	if e := tr.Edges(); !slices.Equal(e, wantEdges) {
		t.Errorf("Edges() = %q, want %q", e, wantEdges)
	}
	// A parent no transform names any more is no longer a frame.
	if err := tr.Add(Stamped{"old_mount", "gps", Identity(), 0}); err != nil {
		t.Fatal(err)
	}
	if err := tr.Add(Stamped{"base_link", "gps", Identity(), 0}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := tr.Lookup("old_mount", "gps"); !errors.Is(err, ErrUnknownFrame) {
		t.Errorf("Lookup(old_mount, gps) = %v, want ErrUnknownFrame", err)
	}
	if slices.Contains(tr.Frames(), "old_mount") {
		t.Errorf("Frames() = %q still has old_mount", tr.Frames())
	}
}

func TestLeadingSlash(t *testing.T) {
	var tr Tree // the zero value is usable
	if err := tr.Add(Stamped{"/base_link", "/velodyne", mountToV, 0}); err != nil {
		t.Fatal(err)
	}
	if err := tr.Add(Stamped{"base_link", "//odd", Identity(), 0}); err != nil {
		t.Fatal(err)
	}
	want := []string{"base_link→/odd", "base_link→velodyne"}
	if e := tr.Edges(); !slices.Equal(e, want) {
		t.Errorf("Edges() = %q, want %q (one leading '/' dropped)", e, want)
	}
	for _, c := range [][2]string{{"base_link", "velodyne"}, {"/base_link", "velodyne"}, {"base_link", "/velodyne"}} {
		got, chain, err := tr.Lookup(c[0], c[1])
		if err != nil || tfDiff(got, mountToV) > 1e-15 {
			t.Errorf("Lookup(%q, %q) = %s, %v", c[0], c[1], fmtTF(got), err)
		}
		if want := []string{"base_link", "velodyne"}; !slices.Equal(chain, want) {
			t.Errorf("Lookup(%q, %q) chain %q, want %q", c[0], c[1], chain, want)
		}
	}
	// A re-add with the slash replaces, not duplicates.
	if err := tr.Add(Stamped{"base_link", "/velodyne", Identity(), 0}); err != nil || tr.Len() != 2 {
		t.Errorf("re-adding /velodyne: %v, Len() = %d, want 2", err, tr.Len())
	}
}

func TestAddInvalid(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	ok := Identity()
	for _, c := range []struct {
		name          string
		parent, child string
		tf            Transform
		want          []string
	}{
		{"empty parent", "", "velodyne", ok, []string{`""→velodyne`, "header.frame_id", "empty"}},
		{"slash parent", "/", "velodyne", ok, []string{`""→velodyne`, "header.frame_id", "empty"}},
		{"empty child", "base_link", "", ok, []string{`base_link→""`, "child_frame_id is empty"}},
		{"both empty", "", "", ok, []string{`""→""`, "empty"}},
		{"own parent", "velodyne", "velodyne", ok, []string{"velodyne→velodyne: a frame cannot be its own parent"}},
		{"own parent via slash", "/velodyne", "velodyne", ok, []string{"velodyne→velodyne: a frame cannot be its own parent"}},
		{"NaN x", "base_link", "velodyne", withT(nan, 0, 0), []string{"base_link→velodyne", "translation (NaN, 0, 0) is not finite"}},
		{"Inf z", "base_link", "velodyne", withT(0, 0, inf), []string{"base_link→velodyne", "translation (0, 0, +Inf) is not finite"}},
		{"NaN w", "base_link", "velodyne", withQ(0, 0, 0, nan), []string{"base_link→velodyne", "rotation", "not finite"}},
		{"-Inf y", "base_link", "velodyne", withQ(0, math.Inf(-1), 0, 1), []string{"base_link→velodyne", "rotation", "not finite"}},
		{"short quaternion", "base_link", "velodyne", withQ(0, 0, 0.5, 0.5),
			[]string{"base_link→velodyne", "invalid quaternion", "its length² is 0.5, want 1 (tf2 ignores it too)"}},
		{"zero quaternion", "base_link", "velodyne", withQ(0, 0, 0, 0), []string{"invalid quaternion", "its length² is 0, want 1"}},
		{"long quaternion", "base_link", "velodyne", withQ(0, 0, 0, 1.01), []string{"invalid quaternion", "its length² is 1.0201"}},
		{"quaternion just past tf2's tolerance", "base_link", "velodyne", withQ(0, 0, 0, math.Sqrt(0.9895)), []string{"invalid quaternion", "its length² is 0.9895"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr := robot(t)
			before := tr.Edges()
			err := tr.Add(Stamped{c.parent, c.child, c.tf, 0})
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Add = %v, want ErrInvalid", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if after := tr.Edges(); !slices.Equal(after, before) {
				t.Errorf("the tree changed: %q, was %q", after, before)
			}
		})
	}
}

// TestAddNormalises: a quaternion within tf2's tolerance is stored unit.
func TestAddNormalises(t *testing.T) {
	var tr Tree
	q := FromRPY(0.1, 0.2, 0.3)
	for _, n2 := range []float64{1.0099, 0.9901} {
		k := math.Sqrt(n2)
		if err := tr.Add(Stamped{"a", "b", Transform{Translation: [3]float64{1, 2, 3}, Rotation: Quaternion{k * q.X, k * q.Y, k * q.Z, k * q.W}}, 0}); err != nil {
			t.Fatalf("length² %g: %v", n2, err)
		}
		got, _, err := tr.Lookup("a", "b")
		if err != nil {
			t.Fatal(err)
		}
		g := got.Rotation
		if n := g.X*g.X + g.Y*g.Y + g.Z*g.Z + g.W*g.W; math.Abs(n-1) > 1e-15 {
			t.Errorf("length² %g: stored rotation %+v has length² %g", n2, g, n)
		}
		if d := max(math.Abs(g.X-q.X), math.Abs(g.Y-q.Y), math.Abs(g.Z-q.Z), math.Abs(g.W-q.W)); d > 1e-15 {
			t.Errorf("length² %g: stored rotation %+v, want %+v", n2, g, q)
		}
	}
}

func TestAddLoop(t *testing.T) {
	for _, c := range []struct {
		parent, child, loop string
	}{
		{"velodyne", "base_link", "base_link→lidar_mount→velodyne→base_link"},
		{"velodyne", "base_footprint", "base_footprint→base_link→lidar_mount→velodyne→base_footprint"},
		{"base_link", "base_footprint", "base_footprint→base_link→base_footprint"},
		{"velodyne", "lidar_mount", "lidar_mount→velodyne→lidar_mount"},
		{"/imu_link", "/base_link", "base_link→imu_link→base_link"},
	} {
		t.Run(c.parent+"→"+c.child, func(t *testing.T) {
			tr := robot(t)
			before := tr.Edges()
			err := tr.Add(Stamped{c.parent, c.child, Identity(), 0})
			if !errors.Is(err, ErrLoop) {
				t.Fatalf("Add = %v, want ErrLoop", err)
			}
			if !strings.Contains(err.Error(), stripSlash(c.parent)+"→"+stripSlash(c.child)) || !strings.Contains(err.Error(), c.loop) {
				t.Errorf("error %q does not name the transform and the loop %s", err, c.loop)
			}
			if after := tr.Edges(); !slices.Equal(after, before) {
				t.Errorf("the tree changed: %q, was %q", after, before)
			}
			// Every lookup still ends, with the old answers.
			frames := tr.Frames()
			for _, a := range frames {
				for _, b := range frames {
					if _, _, err := tr.Lookup(a, b); err != nil {
						t.Errorf("Lookup(%s, %s): %v", a, b, err)
					}
				}
			}
			got, _, _ := tr.Lookup("base_footprint", "velodyne")
			if want := bfToBL.Mul(blToMount).Mul(mountToV); tfDiff(got, want) > 1e-15 {
				t.Errorf("Lookup(base_footprint, velodyne) = %s, want %s", fmtTF(got), fmtTF(want))
			}
		})
	}
	// Moving a subtree elsewhere is no loop.
	tr := robot(t)
	if err := tr.Add(Stamped{"imu_link", "lidar_mount", Identity(), 0}); err != nil {
		t.Fatalf("moving lidar_mount under imu_link: %v", err)
	}
	if _, chain, err := tr.Lookup("base_footprint", "velodyne"); err != nil ||
		!slices.Equal(chain, []string{"base_footprint", "base_link", "imu_link", "lidar_mount", "velodyne"}) {
		t.Errorf("after the move: chain %q, %v", chain, err)
	}
}

// TestWalksBounded: even a tree with a cycle planted behind Add's back
// (which Add never allows) does not hang a walk.
func TestWalksBounded(t *testing.T) {
	tr := robot(t)
	tr.up["base_footprint"] = edge{parent: "velodyne", tf: Identity()}
	tr.children["velodyne"]++
	done := make(chan error, 1)
	go func() {
		_, _, err := tr.Lookup("imu_link", "velodyne")
		if err == nil {
			err = tr.Add(Stamped{"camera_link", "gps", Identity(), 0})
		} else if err2 := tr.Add(Stamped{"camera_link", "gps", Identity(), 0}); err2 != nil {
			err = fmt.Errorf("%w; Add: %v", err, err2)
		}
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrLoop) || !strings.Contains(err.Error(), "loop") {
			t.Errorf("Lookup in a looped tree = %v, want an ErrLoop", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a walk did not end")
	}
}

func TestLookupUnknown(t *testing.T) {
	var tr Tree
	for _, s := range []Stamped{{"base_footprint", "base_link", bfToBL, 0}, {"base_link", "imu_link", blToIMU, 0}} {
		if err := tr.Add(s); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct{ target, source, want string }{
		{"base_footprint", "velodyne", `frame "velodyne" is not on /tf_static (it has: base_footprint, base_link, imu_link)`},
		{"velodyne", "base_link", `frame "velodyne" is not on /tf_static (it has: base_footprint, base_link, imu_link)`},
		{"velodyne", "velodyne", `frame "velodyne" is not on /tf_static (it has: base_footprint, base_link, imu_link)`},
		{"/velodyne", "base_link", `frame "velodyne" is not on /tf_static`},
		{"map", "velodyne", `frames "map" and "velodyne" are not on /tf_static (it has: base_footprint, base_link, imu_link)`},
		{"", "base_link", `frame "" is not on /tf_static`},
	} {
		_, chain, err := tr.Lookup(c.target, c.source)
		if !errors.Is(err, ErrUnknownFrame) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Lookup(%q, %q) = %v, want ErrUnknownFrame saying %q", c.target, c.source, err, c.want)
		}
		if chain != nil {
			t.Errorf("Lookup(%q, %q) chain %q with an error", c.target, c.source, chain)
		}
	}
	var empty Tree
	if _, _, err := empty.Lookup("base_link", "base_link"); !errors.Is(err, ErrUnknownFrame) ||
		err.Error() != `frame "base_link" is not on /tf_static (no transform received yet)` {
		t.Errorf("empty tree: %v", err)
	}
	// Long lists are cut.
	var big Tree
	for i := range 30 {
		if err := big.Add(Stamped{"base_link", fmt.Sprintf("f%02d", i), Identity(), 0}); err != nil {
			t.Fatal(err)
		}
	}
	_, _, err := big.Lookup("base_link", "velodyne")
	if !errors.Is(err, ErrUnknownFrame) || !strings.Contains(err.Error(), "base_link, f00, f01,") ||
		!strings.HasSuffix(err.Error(), "f18, and 11 more)") {
		t.Errorf("31 frames: %v", err)
	}
}

func TestLookupNotConnected(t *testing.T) {
	var tr Tree
	for _, s := range []Stamped{
		{"base_footprint", "base_link", bfToBL, 0},
		{"lidar_mount", "velodyne", mountToV, 0},
		{"base_link", "imu_link", blToIMU, 0},
	} {
		if err := tr.Add(s); err != nil {
			t.Fatal(err)
		}
	}
	_, chain, err := tr.Lookup("base_footprint", "velodyne")
	want := `"base_footprint" and "velodyne" are not connected: their trees' roots are "base_footprint" and "lidar_mount" (is a link between them on /tf, a moving joint, or not published?)`
	if !errors.Is(err, ErrNotConnected) || err.Error() != want {
		t.Errorf("Lookup = %v, want ErrNotConnected %q", err, want)
	}
	if chain != nil {
		t.Errorf("chain %q with an error", chain)
	}
	_, _, err = tr.Lookup("velodyne", "imu_link")
	if !errors.Is(err, ErrNotConnected) || !strings.Contains(err.Error(), `roots are "lidar_mount" and "base_footprint"`) {
		t.Errorf("Lookup(velodyne, imu_link) = %v", err)
	}
	// Publishing the missing link connects them.
	if err := tr.Add(Stamped{"base_link", "lidar_mount", blToMount, 0}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := tr.Lookup("base_footprint", "velodyne"); err != nil {
		t.Errorf("after the link: %v", err)
	}
}

func TestEdgesLen(t *testing.T) {
	var tr Tree
	if tr.Len() != 0 || len(tr.Edges()) != 0 || len(tr.Frames()) != 0 {
		t.Fatalf("zero Tree: Len %d, Edges %q, Frames %q", tr.Len(), tr.Edges(), tr.Frames())
	}
	tr2 := robot(t)
	want := []string{"base_footprint→base_link", "base_link→camera_link", "base_link→imu_link", "base_link→lidar_mount", "lidar_mount→velodyne"}
	if e := tr2.Edges(); !slices.Equal(e, want) || tr2.Len() != 5 {
		t.Errorf("Edges() = %q, Len() = %d; want %q, 5", e, tr2.Len(), want)
	}
	wantFrames := []string{"base_footprint", "base_link", "camera_link", "imu_link", "lidar_mount", "velodyne"}
	if f := tr2.Frames(); !slices.Equal(f, wantFrames) {
		t.Errorf("Frames() = %q, want %q", f, wantFrames)
	}
}

// TestConcurrent: one goroutine adds (moving the LiDAR between two
// mounts) while another looks up; run with -race.
func TestConcurrent(t *testing.T) {
	tr := robot(t)
	mountA, mountB := tfAt(0.1, 0, 0.5, 0, 0, 0), tfAt(0.3, 0, 0.4, 0, 0, 0)
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	wg.Go(func() {
		for i := range 2000 {
			s := Stamped{"base_link", "lidar_mount", mountA, 0}
			if i%2 == 1 {
				s = Stamped{"base_footprint", "lidar_mount", mountB, 0}
			}
			if err := tr.Add(s); err != nil {
				errs <- err
				return
			}
			if err := tr.Add(Stamped{"camera_link", fmt.Sprintf("tag%d", i%7), Identity(), 0}); err != nil {
				errs <- err
				return
			}
		}
	})
	wg.Go(func() {
		wantA := bfToBL.Mul(mountA).Mul(mountToV)
		wantB := mountB.Mul(mountToV)
		for range 2000 {
			got, chain, err := tr.Lookup("base_footprint", "velodyne")
			if err != nil {
				errs <- err
				return
			}
			if tfDiff(got, wantA) > 1e-14 && tfDiff(got, wantB) > 1e-14 {
				errs <- fmt.Errorf("Lookup = %s via %q, neither mount", fmtTF(got), chain)
				return
			}
			_ = tr.Edges()
			_ = tr.Len()
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// The static tree holds at most maxEdges frames: a new one past that is
// refused (ErrFull); known frames still take new transforms.
func TestTreeHoldsAtMostMaxEdgesFrames(t *testing.T) {
	var tr Tree
	id := Transform{Rotation: FromRPY(0, 0, 0)}
	for i := range maxEdges {
		if err := tr.Add(Stamped{Parent: "base_link", Child: fmt.Sprintf("object_%d", i), Transform: id}); err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
	}
	if err := tr.Add(Stamped{Parent: "base_link", Child: "object_new", Transform: id}); !errors.Is(err, ErrFull) {
		t.Fatalf("frame %d: %v, want ErrFull", maxEdges, err)
	}
	if err := tr.Add(Stamped{Parent: "map", Child: "object_7", Transform: id}); err != nil {
		t.Fatalf("a known frame, reparented: %v", err)
	}
}
