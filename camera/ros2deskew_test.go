package camera

import (
	"math"
	"strings"
	"testing"

	"github.com/zerohop/zerohop/ros2"
	"github.com/zerohop/zerohop/ros2/tf"
)

// deskewWorld is a robot turning at omega rad/s while it drives at v m/s
// along its x, inside a room with walls at x = -4 and 5, y = -3 and 3.5
// (odom), its scanner at mount on base_link. Poses are exact arcs.
type deskewWorld struct {
	omega, v float64
	mount    tf.Transform
	start    int64 // ns: the pose below
	// clockwise scans from +π with a negative angle_increment;
	// backwards lists the rays last taken first (time_increment < 0).
	clockwise, backwards bool
}

// base returns base_link's pose in odom at t (ns).
func (w deskewWorld) base(t int64) tf.Transform {
	dt := float64(t-w.start) / 1e9
	yaw0, yaw := 0.3, 0.3+w.omega*dt
	x := 0.5 + w.v/w.omega*(math.Sin(yaw)-math.Sin(yaw0))
	y := -0.2 - w.v/w.omega*(math.Cos(yaw)-math.Cos(yaw0))
	return tf.Transform{Translation: [3]float64{x, y, 0}, Rotation: tf.FromRPY(0, 0, yaw)}
}

func (w deskewWorld) laser(t int64) tf.Transform { return w.base(t).Mul(w.mount) }

// hit returns where a ray from o along the horizontal unit vector d meets
// the room's walls.
func hit(o, d [3]float64) [3]float64 {
	best := math.Inf(1)
	for _, wall := range []struct {
		axis int
		at   float64
	}{{0, -4}, {0, 5}, {1, -3}, {1, 3.5}} {
		if d[wall.axis] == 0 {
			continue
		}
		if s := (wall.at - o[wall.axis]) / d[wall.axis]; s > 0 && s < best {
			best = s
		}
	}
	return [3]float64{o[0] + best*d[0], o[1] + best*d[1], o[2]}
}

// scan returns what the scanner measures from start+lead over one turn of
// n rays, 0.1 s in all, and where each ray's return lies in the scan frame
// at its first ray's time (what a deskewed cloud must hold).
func (w deskewWorld) scan(n int, lead int64) (*ros2.LaserScanView, [][3]float64) {
	t0 := w.start + lead
	ti, a0, inc := 0.1/float64(n), -math.Pi, 2*math.Pi/float64(n)
	if w.clockwise {
		a0, inc = math.Pi, -inc
	}
	if w.backwards {
		ti = -ti
	}
	v := &ros2.LaserScanView{Sec: int32(t0 / 1e9), Nanosec: uint32(t0 % 1e9), FrameID: []byte("laser"),
		AngleMin: float32(a0), AngleIncrement: float32(inc), TimeIncrement: float32(ti),
		RangeMin: 0.1, RangeMax: 30, Ranges: make([]float32, n)}
	want := make([][3]float64, n)
	atFirst := w.laser(t0).Inverse()
	for i := range n {
		at := t0 + int64(math.Round(float64(i)*float64(v.TimeIncrement)*1e9))
		pose := w.laser(at)
		theta := float64(v.AngleMin) + float64(i)*float64(v.AngleIncrement)
		d := pose.Apply([3]float64{math.Cos(theta), math.Sin(theta), 0})
		o := pose.Translation
		d = [3]float64{d[0] - o[0], d[1] - o[1], d[2] - o[2]}
		p := hit(o, d)
		v.Ranges[i] = float32(math.Hypot(p[0]-o[0], p[1]-o[1]))
		want[i] = atFirst.Apply(p)
	}
	return v, want
}

// transforms fills a buffer as /tf and /tf_static would: odom → base_link
// every 20 ms from start to start+until, base_link → laser once.
func (w deskewWorld) transforms(t *testing.T, until int64) *tf.Buffer {
	t.Helper()
	b, err := tf.NewBuffer(tf.BufferConfig{Extrapolate: DeskewExtrapolation})
	if err != nil {
		t.Fatal(err)
	}
	for at := w.start; at <= w.start+until; at += 20e6 {
		if err := b.Add(tf.Stamped{Parent: "odom", Child: "base_link", Transform: w.base(at), Stamp: at}); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.AddStatic(tf.Stamped{Parent: "base_link", Child: "laser", Transform: w.mount}); err != nil {
		t.Fatal(err)
	}
	return b
}

// worstError is the largest distance between a cloud's points and where
// the rays' returns lie.
func worstError(pts [][4]float32, want [][3]float64) float64 {
	worst := 0.0
	for i, p := range pts {
		d := math.Sqrt(sq(float64(p[0])-want[i][0]) + sq(float64(p[1])-want[i][1]) + sq(float64(p[2])-want[i][2]))
		worst = max(worst, d)
	}
	return worst
}

func sq(x float64) float64 { return x * x }

// A scan taken while the robot turns at 2 rad/s and drives at 0.5 m/s
// lands, deskewed, within 5 mm of where its returns lie in the scan frame
// at the first ray's time, for a scanner upright, turned and upside
// down, its last ray newer than the newest /tf (extrapolated); the same
// scan as sent is off by more than half a metre.
func TestScanDeskewPlacesEachRayWhereTheScannerWas(t *testing.T) {
	const start = 1_700_000_000_000_000_000
	for _, tc := range []struct {
		name                 string
		mount                tf.Transform
		until                int64 // newest /tf after start, ns
		clockwise, backwards bool
	}{
		{"clockwise scan (angle_increment < 0)", tf.Transform{Translation: [3]float64{0.1, 0, 0.2}, Rotation: tf.FromRPY(0, 0, 0)}, 500e6, true, false},
		{"rays listed last taken first (time_increment < 0)", tf.Transform{Translation: [3]float64{0.1, 0, 0.2}, Rotation: tf.FromRPY(0, 0, 0)}, 500e6, false, true},
		{"upright, ahead of the base", tf.Transform{Translation: [3]float64{0.1, 0.05, 0.2}, Rotation: tf.FromRPY(0, 0, 0)}, 500e6, false, false},
		{"turned to face left", tf.Transform{Translation: [3]float64{-0.1, 0, 0.3}, Rotation: tf.FromRPY(0, 0, math.Pi/2)}, 500e6, false, false},
		{"upside down", tf.Transform{Translation: [3]float64{0.2, 0, 0.15}, Rotation: tf.FromRPY(math.Pi, 0, 0)}, 500e6, false, false},
		{"last ray 60 ms past the newest /tf", tf.Transform{Translation: [3]float64{0.1, 0, 0.2}, Rotation: tf.FromRPY(0, 0, 0)}, 340e6, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := deskewWorld{omega: 2, v: 0.5, mount: tc.mount, start: start, clockwise: tc.clockwise, backwards: tc.backwards}
			v, want := w.scan(720, 300e6)
			r := newROS2RigWith(t, PoolSizes{Points: 1000, ImageBytes: 64}, 4,
				ROS2SourceConfig{ScanFixedFrame: "odom", Transforms: w.transforms(t, tc.until)})
			r.src.OnLaserScan(v)
			h, b := r.take(t, TopicPoints)
			if h.CaptureNs != start+300e6 {
				t.Errorf("stamp %d, want the first ray's %d", h.CaptureNs, int64(start+300e6))
			}
			pts := scanPoints(b)
			if len(pts) != 720 {
				t.Fatalf("%d points, want 720", len(pts))
			}
			t.Logf("worst %.5f m", worstError(pts, want))
			if e := worstError(pts, want); e > 0.005 {
				t.Errorf("deskewed cloud off by up to %.4f m, want ≤ 5 mm", e)
			}
			if st := r.src.Stats(TopicPoints); st.Deskewed != 1 || st.NotDeskewed != 0 {
				t.Errorf("deskewed %d, not deskewed %d; want 1, 0", st.Deskewed, st.NotDeskewed)
			}

			// The same scan without deskew: the test can tell.
			plain := newROS2RigWith(t, PoolSizes{Points: 1000, ImageBytes: 64}, 4, ROS2SourceConfig{})
			plain.src.OnLaserScan(v)
			_, b = plain.take(t, TopicPoints)
			if e := worstError(scanPoints(b), want); e < 0.5 {
				t.Errorf("the scan as sent is off by only %.3f m: the scene does not test deskew", e)
			}
			if n := plain.logs.FilterMessageSnippet("--ros2-scan-fixed-frame").Len(); n != 1 {
				t.Errorf("%d hints to deskew, want 1; logs:\n%s", n, allLogText(plain))
			}
		})
	}
}

// Without the transforms a scan is used as sent, counted and logged with
// the reason, once per reason; a scan without time between rays needs
// none and counts as neither.
func TestScanDeskewWithoutTransformsUsesTheScanAsSent(t *testing.T) {
	const start = 1_700_000_000_000_000_000
	w := deskewWorld{omega: 2, v: 0.5, mount: tf.Identity(), start: start}
	for _, tc := range []struct {
		name  string
		fixed string
		lead  int64 // first ray after start, ns
		want  string
	}{
		{"unknown fixed frame", "map", 300e6, `"map"`},
		{"scan newer than /tf allows", "odom", 900e6, "after its newest transform"},
		{"scan older than /tf holds", "odom", -300e6, "before its oldest transform"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, _ := w.scan(360, tc.lead)
			r := newROS2RigWith(t, PoolSizes{Points: 1000, ImageBytes: 64}, 4,
				ROS2SourceConfig{ScanFixedFrame: tc.fixed, Transforms: w.transforms(t, 500e6)})
			for range 3 {
				r.src.OnLaserScan(v)
				r.take(t, TopicPoints)
			}
			sent := newROS2RigWith(t, PoolSizes{Points: 1000, ImageBytes: 64}, 4, ROS2SourceConfig{})
			sent.src.OnLaserScan(v)
			_, want := sent.take(t, TopicPoints)
			r.src.OnLaserScan(v)
			_, got := r.take(t, TopicPoints)
			if string(got[:len(want)]) != string(want) {
				t.Error("the scan was changed, want it as sent")
			}
			if st := r.src.Stats(TopicPoints); st.Deskewed != 0 || st.NotDeskewed != 4 {
				t.Errorf("deskewed %d, not deskewed %d; want 0, 4", st.Deskewed, st.NotDeskewed)
			}
			logged := r.logs.FilterMessageSnippet("not deskewed").All()
			if len(logged) != 1 {
				t.Fatalf("%d warnings for 4 scans, want 1; logs:\n%s", len(logged), allLogText(r))
			}
			if text := allLogText(r); !strings.Contains(text, tc.want) {
				t.Errorf("warning does not say %s:\n%s", tc.want, text)
			}
		})
	}
	t.Run("no time between rays", func(t *testing.T) {
		v, _ := w.scan(360, 300e6)
		v.TimeIncrement = 0
		r := newROS2RigWith(t, PoolSizes{Points: 1000, ImageBytes: 64}, 4,
			ROS2SourceConfig{ScanFixedFrame: "odom", Transforms: w.transforms(t, 500e6)})
		r.src.OnLaserScan(v)
		r.take(t, TopicPoints)
		if st := r.src.Stats(TopicPoints); st.Deskewed != 0 || st.NotDeskewed != 0 {
			t.Errorf("deskewed %d, not deskewed %d; want 0, 0", st.Deskewed, st.NotDeskewed)
		}
	})
}

// Deskewing allocates nothing per scan.
func TestScanDeskewAllocatesNothing(t *testing.T) {
	const start = 1_700_000_000_000_000_000
	w := deskewWorld{omega: 2, v: 0.5, mount: tf.Transform{Translation: [3]float64{0.1, 0, 0.2}, Rotation: tf.FromRPY(0, 0, 0.1)}, start: start}
	v, _ := w.scan(1081, 300e6)
	r := newROS2RigWith(t, PoolSizes{Points: 2000, ImageBytes: 64}, 4,
		ROS2SourceConfig{ScanFixedFrame: "odom", Transforms: w.transforms(t, 500e6)})
	r.src.cfg.Checksum = false
	allocs := testing.AllocsPerRun(50, func() { r.src.OnLaserScan(v) })
	if allocs != 0 {
		t.Errorf("%v allocations per deskewed scan, want 0", allocs)
	}
	if st := r.src.Stats(TopicPoints); st.Deskewed == 0 || st.NotDeskewed != 0 {
		t.Errorf("deskewed %d, not deskewed %d: the scans were not deskewed", st.Deskewed, st.NotDeskewed)
	}
}

// BenchmarkROS2ScanDeskew: a Hokuyo UST-10LX's 1081 rays as sent and
// deskewed, side by side.
func BenchmarkROS2ScanDeskew(b *testing.B) {
	const start = 1_700_000_000_000_000_000
	w := deskewWorld{omega: 2, v: 0.5, mount: tf.Transform{Translation: [3]float64{0.1, 0, 0.2}, Rotation: tf.FromRPY(0, 0, 0.1)}, start: start}
	v, _ := w.scan(1081, 300e6)
	buf, err := tf.NewBuffer(tf.BufferConfig{Extrapolate: DeskewExtrapolation})
	if err != nil {
		b.Fatal(err)
	}
	for at := w.start; at <= w.start+500e6; at += 20e6 {
		if err := buf.Add(tf.Stamped{Parent: "odom", Child: "base_link", Transform: w.base(at), Stamp: at}); err != nil {
			b.Fatal(err)
		}
	}
	if err := buf.AddStatic(tf.Stamped{Parent: "base_link", Child: "laser", Transform: w.mount}); err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		cfg  ROS2SourceConfig
	}{{"as-sent", ROS2SourceConfig{}}, {"deskewed", ROS2SourceConfig{ScanFixedFrame: "odom", Transforms: buf}}} {
		b.Run(tc.name, func(b *testing.B) {
			cam, err := New(Config{Source: PoolSizes{Points: 2000, ImageBytes: 16}, Slots: 4})
			if err != nil {
				b.Fatal(err)
			}
			defer cam.Close()
			src, err := NewROS2Source(nil, cam, abortPublisher{cam}, tc.cfg)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				src.OnLaserScan(v)
			}
		})
	}
}

// rayMotion.at is tf.Interpolate from the identity, applied: the same
// turn, the shorter way, and the same share of the translation.
func TestRayMotionIsTheInterpolatedPose(t *testing.T) {
	for _, m := range []tf.Transform{
		tf.Identity(),
		{Translation: [3]float64{0.05, -0.01, 0}, Rotation: tf.FromRPY(0, 0, 0.2)},
		{Translation: [3]float64{0.1, 0.2, 0.03}, Rotation: tf.FromRPY(0.02, -0.05, -2.5)},
		{Translation: [3]float64{0, 0, 0}, Rotation: tf.FromRPY(math.Pi, 0, 0.3)},
		{Translation: [3]float64{1, 0, 0}, Rotation: tf.Quaternion{X: 0, Y: 0, Z: -math.Sin(0.1), W: -math.Cos(0.1)}}, // w < 0
		{Translation: [3]float64{0, 0, 0}, Rotation: tf.FromRPY(0, 0, 1e-9)},
	} {
		rm := newRayMotion(m)
		for _, f := range []float64{0, 0.001, 0.25, 0.5, 0.999, 1} {
			p := [3]float64{3.2, -1.7, 0}
			got, want := rm.at(f, p), tf.Interpolate(tf.Identity(), m, f).Apply(p)
			for i := range got {
				if math.Abs(got[i]-want[i]) > 1e-12 {
					t.Errorf("motion %+v, f %g: %v, want %v", m, f, got, want)
					break
				}
			}
		}
	}
}
