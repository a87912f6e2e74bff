package camera

import (
	"encoding/binary"
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
func (w deskewWorld) transforms(t testing.TB, until int64) *tf.Buffer {
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
				ROS2SourceConfig{FixedFrame: "odom", Transforms: w.transforms(t, tc.until)})
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
			if n := plain.logs.FilterMessageSnippet("--ros2-fixed-frame").Len(); n != 1 {
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
				ROS2SourceConfig{FixedFrame: tc.fixed, Transforms: w.transforms(t, 500e6)})
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
			checkNotDeskewed(t, r, 4, tc.want)
		})
	}
	t.Run("no time between rays", func(t *testing.T) {
		v, _ := w.scan(360, 300e6)
		v.TimeIncrement = 0
		r := newROS2RigWith(t, PoolSizes{Points: 1000, ImageBytes: 64}, 4,
			ROS2SourceConfig{FixedFrame: "odom", Transforms: w.transforms(t, 500e6)})
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
		ROS2SourceConfig{FixedFrame: "odom", Transforms: w.transforms(t, 500e6)})
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
	buf := w.transforms(b, 500e6)
	for _, tc := range []struct {
		name string
		cfg  ROS2SourceConfig
	}{{"as-sent", ROS2SourceConfig{}}, {"deskewed", ROS2SourceConfig{FixedFrame: "odom", Transforms: buf}}} {
		b.Run(tc.name, func(b *testing.B) {
			src := benchSource(b, 2000, tc.cfg)
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

// testField is one extra field of a test cloud: its name, offset and
// PointField datatype; value gives it for point k.
type testField struct {
	name  string
	off   uint32
	kind  uint8
	count uint32 // 0: 1
	value func(k int) float64
}

// sweep is a spinning 3D LiDAR's sweep in the deskew world: beams
// elevations × az azimuth steps, column by column over 0.1 s from the
// first point's time at start+lead; its points (in the LiDAR frame at the
// time each was taken), times (ns) and where each return lies in the
// LiDAR frame at the stamp.
func (w deskewWorld) sweep(beams, az int, lead, stamp int64) (pts [][3]float64, times []int64, want [][3]float64) {
	t0 := w.start + lead
	atStamp := w.laser(stamp).Inverse()
	for a := range az {
		at := t0 + int64(a)*int64(100e6)/int64(az)
		pose := w.laser(at)
		o := pose.Translation
		for b := range beams {
			el := (-15 + 30*float64(b)/float64(max(beams-1, 1))) * math.Pi / 180
			th := -math.Pi + 2*math.Pi*float64(a)/float64(az)
			local := [3]float64{math.Cos(el) * math.Cos(th), math.Cos(el) * math.Sin(th), math.Sin(el)}
			d := pose.Apply(local)
			d = [3]float64{d[0] - o[0], d[1] - o[1], d[2] - o[2]}
			h := math.Hypot(d[0], d[1])
			flat := hit(o, [3]float64{d[0] / h, d[1] / h, 0})
			s := math.Hypot(flat[0]-o[0], flat[1]-o[1]) / h // along d
			p := [3]float64{o[0] + s*d[0], o[1] + s*d[1], o[2] + s*d[2]}
			pts = append(pts, [3]float64{local[0] * s, local[1] * s, local[2] * s})
			times = append(times, at)
			want = append(want, atStamp.Apply(p))
		}
	}
	return pts, times, want
}

// buildCloud packs points into a PointCloud2 of the given layout: x, y, z
// float32 at 0, 4, 8 and the extra fields; stamp is the header stamp.
func buildCloud(pts [][3]float64, step uint32, stamp int64, extra ...testField) *ros2.PointCloud2View {
	fields := []ros2.PointField{pf("x", 0, 7), pf("y", 4, 7), pf("z", 8, 7)}
	for _, f := range extra {
		field := pf(f.name, f.off, f.kind)
		field.Count = max(f.count, 1)
		fields = append(fields, field)
	}
	data := make([]byte, len(pts)*int(step))
	le := binary.LittleEndian
	for k, p := range pts {
		q := data[k*int(step):]
		for i := range 3 {
			le.PutUint32(q[4*i:], math.Float32bits(float32(p[i])))
		}
		for _, f := range extra {
			v := f.value(k)
			switch f.kind {
			case 7:
				le.PutUint32(q[f.off:], math.Float32bits(float32(v)))
			case 8:
				le.PutUint64(q[f.off:], math.Float64bits(v))
			case 6:
				le.PutUint32(q[f.off:], uint32(v))
			case 4:
				le.PutUint16(q[f.off:], uint16(v))
			}
		}
	}
	return &ros2.PointCloud2View{Sec: int32(stamp / 1e9), Nanosec: uint32(stamp % 1e9), FrameID: []byte("laser"),
		Width: uint32(len(pts)), Height: 1, Fields: fields, PointStep: step, RowStep: uint32(len(data)), Data: data, IsDense: true}
}

// A spinning LiDAR's sweep taken while the robot turns at 2 rad/s and
// drives at 0.5 m/s lands, deskewed by its per-point times, within 5 mm
// of where its returns lie in the LiDAR frame at the header stamp, for
// the time fields of Velodyne (float32 s from the stamp), Ouster (uint32
// ns from the stamp), Hesai (float64 s since the epoch) and Livox
// (float64 ns since the epoch, with --ros2-time-unit ns), and a stamp at
// the sweep's end (negative offsets); as sent it is off by more than
// 0.5 m.
func TestCloudDeskewPlacesEachPointWhereTheSensorWas(t *testing.T) {
	const start = 1_700_000_000_000_000_000
	w := deskewWorld{omega: 2, v: 0.5, mount: tf.Transform{Translation: [3]float64{0.1, 0, 0.4}, Rotation: tf.FromRPY(0, 0.05, 0)}, start: start}
	first := int64(start + 300e6)
	for _, tc := range []struct {
		name  string
		stamp int64 // header stamp
		step  uint32
		field func(times []int64, stamp int64) testField
		unit  float64
	}{
		{"Velodyne: time, float32 s from the stamp", first, 22, func(ts []int64, st int64) testField {
			return testField{name: "time", off: 18, kind: 7, value: func(k int) float64 { return float64(ts[k]-st) / 1e9 }}
		}, 0},
		{"Velodyne stamped at the sweep's end: negative offsets", first + 99e6, 22, func(ts []int64, st int64) testField {
			return testField{name: "time", off: 18, kind: 7, value: func(k int) float64 { return float64(ts[k]-st) / 1e9 }}
		}, 0},
		{"Ouster: t, uint32 ns from the stamp", first, 48, func(ts []int64, st int64) testField {
			return testField{name: "t", off: 20, kind: 6, value: func(k int) float64 { return float64(ts[k] - st) }}
		}, 0},
		{"Hesai: timestamp, float64 s since the epoch", first, 32, func(ts []int64, st int64) testField {
			return testField{name: "timestamp", off: 16, kind: 8, value: func(k int) float64 { return float64(ts[k]) / 1e9 }}
		}, 0},
		{"Livox: timestamp, float64 ns since the epoch, unit ns", first, 32, func(ts []int64, st int64) testField {
			return testField{name: "timestamp", off: 16, kind: 8, value: func(k int) float64 { return float64(ts[k]) }}
		}, 1e-9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pts, times, want := w.sweep(16, 360, 300e6, tc.stamp)
			v := buildCloud(pts, tc.step, tc.stamp, tc.field(times, tc.stamp),
				testField{name: "intensity", off: 12, kind: 7, value: func(int) float64 { return 0.5 }})
			r := newROS2RigWith(t, PoolSizes{Points: len(pts), ImageBytes: 64}, 4,
				ROS2SourceConfig{FixedFrame: "odom", Transforms: w.transforms(t, 500e6), TimeUnit: tc.unit})
			r.src.OnPointCloud2(v)
			_, b := r.take(t, TopicPoints)
			got := scanPoints(b)
			e := worstError(got, want)
			t.Logf("worst %.5f m", e)
			if e > 0.005 {
				t.Errorf("deskewed cloud off by up to %.4f m, want ≤ 5 mm", e)
			}
			if got[0][3] != 0.5 {
				t.Errorf("intensity %v, want 0.5 kept", got[0][3])
			}
			if st := r.src.Stats(TopicPoints); st.Deskewed != 1 || st.NotDeskewed != 0 {
				t.Errorf("deskewed %d, not deskewed %d; want 1, 0; logs:\n%s", st.Deskewed, st.NotDeskewed, allLogText(r))
			}
			plain := newROS2RigWith(t, PoolSizes{Points: len(pts), ImageBytes: 64}, 4, ROS2SourceConfig{})
			plain.src.OnPointCloud2(v)
			_, b = plain.take(t, TopicPoints)
			if e := worstError(scanPoints(b), want); e < 0.5 {
				t.Errorf("the cloud as sent is off by only %.3f m: the scene does not test deskew", e)
			}
		})
	}
}

// A cloud the camera cannot deskew is used as sent, counted and logged
// with the fix: no time field (the fields it looked for and the flag),
// nanoseconds read as seconds (the unit flag).
func TestCloudDeskewWithoutTimesUsesTheCloudAsSent(t *testing.T) {
	const start = 1_700_000_000_000_000_000
	w := deskewWorld{omega: 2, v: 0.5, mount: tf.Identity(), start: start}
	first := int64(start + 300e6)
	pts, times, _ := w.sweep(4, 90, 300e6, first)
	for _, tc := range []struct {
		name  string
		extra []testField
		want  []string
	}{
		{"no time field", []testField{{name: "ring", off: 12, kind: 4, value: func(int) float64 { return 1 }}},
			[]string{"no per-point time field", "time, t, timestamp", "--ros2-time-field"}},
		{"a time field of two values", []testField{{name: "time", off: 12, kind: 7, count: 2, value: func(int) float64 { return 0 }}},
			[]string{`time field "time" is not one number`}},
		{"ns since the epoch read as seconds", []testField{{name: "timestamp", off: 16, kind: 8, value: func(k int) float64 { return float64(times[k]) }}},
			[]string{`"timestamp"`, "--ros2-time-unit"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := buildCloud(pts, 24, first, tc.extra...)
			r := newROS2RigWith(t, PoolSizes{Points: len(pts), ImageBytes: 64}, 4,
				ROS2SourceConfig{FixedFrame: "odom", Transforms: w.transforms(t, 500e6)})
			sent := newROS2RigWith(t, PoolSizes{Points: len(pts), ImageBytes: 64}, 4, ROS2SourceConfig{})
			sent.src.OnPointCloud2(v)
			_, want := sent.take(t, TopicPoints)
			for range 3 {
				r.src.OnPointCloud2(v)
				_, got := r.take(t, TopicPoints)
				if string(got[:len(want)]) != string(want) {
					t.Fatal("the cloud was changed, want it as sent")
				}
			}
			checkNotDeskewed(t, r, 3, tc.want...)
		})
	}
}

// Deskewing a cloud allocates nothing, and neither does a cloud without a
// time field.
func TestCloudDeskewAllocatesNothing(t *testing.T) {
	const start = 1_700_000_000_000_000_000
	w := deskewWorld{omega: 2, v: 0.5, mount: tf.Identity(), start: start}
	first := int64(start + 300e6)
	pts, times, _ := w.sweep(16, 360, 300e6, first)
	for _, v := range []*ros2.PointCloud2View{
		buildCloud(pts, 24, first, testField{name: "t", off: 16, kind: 6, value: func(k int) float64 { return float64(times[k] - first) }}),
		buildCloud(pts, 24, first),
	} {
		r := newROS2RigWith(t, PoolSizes{Points: len(pts), ImageBytes: 64}, 4,
			ROS2SourceConfig{FixedFrame: "odom", Transforms: w.transforms(t, 500e6)})
		r.src.cfg.Checksum = false
		if allocs := testing.AllocsPerRun(20, func() { r.src.OnPointCloud2(v) }); allocs != 0 {
			t.Errorf("%v allocations per cloud, want 0", allocs)
		}
		if st := r.src.Stats(TopicPoints); st.Deskewed+st.NotDeskewed != 21 || (len(v.Fields) == 4) != (st.Deskewed == 21) {
			t.Errorf("deskewed %d, not deskewed %d of 21 clouds with fields %d", st.Deskewed, st.NotDeskewed, len(v.Fields))
		}
	}
}

// BenchmarkROS2CloudDeskew: a 64-beam LiDAR's sweep (115,200 points) as
// sent and deskewed, side by side.
func BenchmarkROS2CloudDeskew(b *testing.B) {
	const start = 1_700_000_000_000_000_000
	w := deskewWorld{omega: 2, v: 0.5, mount: tf.Identity(), start: start}
	first := int64(start + 300e6)
	pts, times, _ := w.sweep(64, 1800, 300e6, first)
	v := buildCloud(pts, 16, first, testField{name: "intensity", off: 12, kind: 7, value: func(int) float64 { return 0.5 }})
	vt := buildCloud(pts, 24, first, testField{name: "intensity", off: 12, kind: 7, value: func(int) float64 { return 0.5 }},
		testField{name: "t", off: 16, kind: 6, value: func(k int) float64 { return float64(times[k] - first) }})
	buf := w.transforms(b, 500e6)
	for _, tc := range []struct {
		name  string
		cloud *ros2.PointCloud2View
		cfg   ROS2SourceConfig
	}{
		{"packed-as-sent", v, ROS2SourceConfig{}},
		{"with-t-as-sent", vt, ROS2SourceConfig{}},
		{"with-t-deskewed", vt, ROS2SourceConfig{FixedFrame: "odom", Transforms: buf}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			cam, err := New(Config{Source: PoolSizes{Points: len(pts), ImageBytes: 16}, Slots: 4})
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
				src.OnPointCloud2(tc.cloud)
			}
		})
	}
}

// organize reshapes a one-row cloud into rows rows, each padded by pad
// bytes (an Ouster's organized cloud, row_step > width × point_step).
func organize(v *ros2.PointCloud2View, rows int, pad uint32) *ros2.PointCloud2View {
	o := *v
	o.Height, o.Width = uint32(rows), v.Width/uint32(rows)
	rowBytes := o.Width * v.PointStep
	o.RowStep = rowBytes + pad
	o.Data = make([]byte, int(o.RowStep)*rows)
	for r := range rows {
		copy(o.Data[r*int(o.RowStep):], v.Data[r*int(rowBytes):(r+1)*int(rowBytes)])
	}
	return &o
}

// Clouds with odd times still deskew what can be: an organized cloud
// with padded rows; points whose time is garbage (0 in an epoch cloud,
// NaN) left as sent while the rest are placed; a time field that spans
// less than a nanosecond (which made the bin index overflow); the first
// time field found in the looked-for order.
func TestCloudDeskewOddTimes(t *testing.T) {
	const start = 1_700_000_000_000_000_000
	w := deskewWorld{omega: 2, v: 0.5, mount: tf.Identity(), start: start}
	first := int64(start + 300e6)
	pts, times, want := w.sweep(8, 120, 300e6, first)
	epoch := func(k int) float64 { return float64(times[k]) / 1e9 }
	offset := func(k int) float64 { return float64(times[k]-first) / 1e9 }
	garbage := map[int]float64{5: 0, 6: math.NaN(), 7: math.Inf(1)}
	for _, tc := range []struct {
		name    string
		cloud   *ros2.PointCloud2View
		exact   map[int]bool // points left as sent
		placed  bool         // the others within 5 mm
		asSent  bool         // every point as sent (one time)
		deskews uint64
	}{
		{"organized, 4 rows padded by 6 bytes", organize(buildCloud(pts, 24, first,
			testField{name: "t", off: 16, kind: 6, value: func(k int) float64 { return float64(times[k] - first) }}), 4, 6), nil, true, false, 1},
		{"garbage times in an epoch cloud", buildCloud(pts, 24, first, testField{name: "timestamp", off: 16, kind: 8, value: func(k int) float64 {
			if g, ok := garbage[k]; ok {
				return g
			}
			return epoch(k)
		}}), map[int]bool{5: true, 6: true, 7: true}, true, false, 1},
		{"a span under a nanosecond", buildCloud(pts, 24, first, testField{name: "time", off: 16, kind: 7, value: func(k int) float64 {
			if k == len(pts)-1 {
				return float64(math.Float32frombits(1))
			}
			return 0
		}}), nil, false, true, 1},
		{"time before t", buildCloud(pts, 24, first,
			testField{name: "t", off: 12, kind: 6, value: func(int) float64 { return 123456 }},
			testField{name: "time", off: 16, kind: 7, value: offset}), nil, true, false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newROS2RigWith(t, PoolSizes{Points: len(pts), ImageBytes: 64}, 4,
				ROS2SourceConfig{FixedFrame: "odom", Transforms: w.transforms(t, 500e6)})
			r.src.OnPointCloud2(tc.cloud)
			_, b := r.take(t, TopicPoints)
			got := scanPoints(b)
			sent := newROS2RigWith(t, PoolSizes{Points: len(pts), ImageBytes: 64}, 4, ROS2SourceConfig{})
			sent.src.OnPointCloud2(tc.cloud)
			_, sb := sent.take(t, TopicPoints)
			asSent := scanPoints(sb)
			for k := range got {
				switch {
				case tc.exact[k] || tc.asSent:
					if d := worstError(got[k:k+1], [][3]float64{{float64(asSent[k][0]), float64(asSent[k][1]), float64(asSent[k][2])}}); d > 1e-6 && (tc.exact[k] || d > 1e-3) {
						t.Errorf("point %d moved by %.4f m, want it as sent", k, d)
					}
				case tc.placed:
					if d := worstError(got[k:k+1], want[k:k+1]); d > 0.005 {
						t.Errorf("point %d off by %.4f m, want ≤ 5 mm", k, d)
					}
				}
			}
			if st := r.src.Stats(TopicPoints); st.Deskewed != tc.deskews {
				t.Errorf("deskewed %d, want %d; logs:\n%s", st.Deskewed, tc.deskews, allLogText(r))
			}
		})
	}
}

// checkNotDeskewed checks that r's n messages were all used as sent,
// counted, and logged once, the line saying each of want.
func checkNotDeskewed(t *testing.T, r *ros2Rig, n uint64, want ...string) {
	t.Helper()
	if st := r.src.Stats(TopicPoints); st.Deskewed != 0 || st.NotDeskewed != n {
		t.Errorf("deskewed %d, not deskewed %d; want 0, %d", st.Deskewed, st.NotDeskewed, n)
	}
	if logged := r.logs.FilterMessageSnippet("not deskewed").All(); len(logged) != 1 {
		t.Fatalf("%d warnings for %d messages, want 1; logs:\n%s", len(logged), n, allLogText(r))
	}
	for _, s := range want {
		if text := allLogText(r); !strings.Contains(text, s) {
			t.Errorf("warning does not say %s:\n%s", s, text)
		}
	}
}

// benchSource is a ROS 2 source of cfg on a camera whose points slots
// hold points, publishing to no one, for benchmarks; it reports
// allocations.
func benchSource(b *testing.B, points int, cfg ROS2SourceConfig) *ROS2Source {
	b.Helper()
	cam, err := New(Config{Source: PoolSizes{Points: points, ImageBytes: 16}, Slots: 4})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cam.Close() })
	src, err := NewROS2Source(nil, cam, abortPublisher{cam}, cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	return src
}
