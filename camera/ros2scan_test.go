package camera

import (
	"encoding/binary"
	"math"
	"strings"
	"testing"

	"github.com/zerohop/zerohop/handles"
	"github.com/zerohop/zerohop/ros2"
	"github.com/zerohop/zerohop/sensor"
)

// testScan is a scan of n rays over the full circle from -π, ray i at
// range 1 + i/10 m with intensity i, but for the rays without a return:
// ray 1 NaN, 2 +Inf, 4 below range_min, 5 above range_max, 6 at 0; ray
// 3 is -Inf (too close, REP 117), a point at range_min; ray 7's intensity
// is NaN.
func testScan(n int) *ros2.LaserScanView {
	v := &ros2.LaserScanView{Sec: 1700000002, Nanosec: 5, FrameID: []byte("base_scan"),
		AngleMin: float32(-math.Pi), AngleIncrement: float32(2 * math.Pi / float64(n)), RangeMin: 0.12, RangeMax: 12,
		Ranges: make([]float32, n), Intensities: make([]float32, n)}
	for i := range n {
		v.Ranges[i], v.Intensities[i] = 1+float32(i)/10, float32(i)
	}
	v.Ranges[1], v.Ranges[2], v.Ranges[3] = float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))
	v.Ranges[4], v.Ranges[5], v.Ranges[6] = 0.1, 12.5, 0
	v.Intensities[7] = float32(math.NaN())
	return v
}

// scanPoints decodes a slot's packed XYZI points.
func scanPoints(b []byte) [][4]float32 {
	out := make([][4]float32, len(b)/sensor.PointStep)
	for k := range out {
		for j := range 4 {
			out[k][j] = math.Float32frombits(binary.LittleEndian.Uint32(b[k*sensor.PointStep+4*j:]))
		}
	}
	return out
}

// A scan becomes a cloud in its frame, one point per valid return at
// (r cos θ, r sin θ, 0), in ray order; its handle is marked planar and
// carries the scan's stamp and frame.
func TestLaserScanBecomesAPlanarCloud(t *testing.T) {
	for _, tc := range []struct {
		name        string
		intensities bool
		scale       float64
	}{
		{"with intensities", true, 1},
		{"scaled intensities", true, 0.5},
		{"without intensities", false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newROS2RigWith(t, PoolSizes{Points: 1000, ImageBytes: 64}, 4,
				ROS2SourceConfig{Intensity: ROS2Intensity{Scale: tc.scale}})
			v := testScan(100)
			if !tc.intensities {
				v.Intensities = nil
			}
			r.src.OnLaserScan(v)
			h, b := r.take(t, TopicPoints)
			if h.Points.Flags != handles.PointsPlanar || h.CaptureNs != 1700000002_000000005 || h.FrameID.String() != "base_scan" {
				t.Errorf("handle %+v: want planar, the scan's stamp and frame", h)
			}
			pts := scanPoints(b)
			if len(pts) != 95 || h.Points.Count != 95 {
				t.Fatalf("%d points (count %d), want 95 of 100 rays (none for NaN, +Inf, below and above the limits, 0)", len(pts), h.Points.Count)
			}
			k := 0
			for i := range 100 {
				if i == 1 || i == 2 || i == 4 || i == 5 || i == 6 {
					continue
				}
				rng := float64(1 + float32(i)/10)
				if i == 3 {
					rng = float64(v.RangeMin)
				}
				th := float64(v.AngleMin) + float64(i)*float64(v.AngleIncrement)
				wantI := 0.0
				if tc.intensities && i != 7 {
					wantI = float64(i) * tc.scale
				}
				p := pts[k]
				if math.Abs(float64(p[0])-rng*math.Cos(th)) > 1e-5 || math.Abs(float64(p[1])-rng*math.Sin(th)) > 1e-5 || p[2] != 0 || float64(p[3]) != wantI {
					t.Fatalf("point %d (ray %d) %v, want (%.5f, %.5f, 0, %v)", k, i, p, rng*math.Cos(th), rng*math.Sin(th), wantI)
				}
				k++
			}
			if st := r.src.Stats(TopicPoints); st.Published != 1 || st.Received != 1 {
				t.Errorf("stats %+v", st)
			}
		})
	}
}

// Scans whose rays cannot be placed, or that a slot cannot hold, are
// dropped, counted and logged with the reason; a scan with a mismatched
// intensity count gets intensity 0 and one warning.
func TestLaserScanRefusals(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mod    func(*ros2.LaserScanView)
		tooBig bool
		want   string
	}{
		{"NaN angle_min", func(v *ros2.LaserScanView) { v.AngleMin = float32(math.NaN()) }, false, "want finite angles"},
		{"infinite increment", func(v *ros2.LaserScanView) { v.AngleIncrement = float32(math.Inf(1)) }, false, "want finite angles"},
		{"zero increment", func(v *ros2.LaserScanView) { v.AngleIncrement = 0 }, false, "angle_increment 0 with 100 rays"},
		{"range limits upside down", func(v *ros2.LaserScanView) { v.RangeMin, v.RangeMax = 5, 1 }, false, "want 0 <= range_min <= range_max"},
		{"negative range_min", func(v *ros2.LaserScanView) { v.RangeMin = -1 }, false, "range_min -1"},
		{"infinite range_min", func(v *ros2.LaserScanView) { v.RangeMin = float32(math.Inf(-1)) }, false, "range_min -Inf"},
		{"more rays than a slot holds", func(v *ros2.LaserScanView) {}, true, "raise --ros2-max-points to at least 100"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			points := 1000
			if tc.tooBig {
				points = 99
			}
			r := newROS2Rig(t, PoolSizes{Points: points, ImageBytes: 64}, 4)
			v := testScan(100)
			tc.mod(v)
			r.src.OnLaserScan(v)
			if _, ok := r.tr.TryLatest(TopicPoints); ok {
				t.Fatal("published")
			}
			st := r.src.Stats(TopicPoints)
			if (tc.tooBig && st.TooLarge != 1) || (!tc.tooBig && st.Unsupported != 1) || r.cam.Pool(TopicPoints).InUse() != 0 {
				t.Errorf("stats %+v, in use %d", st, r.cam.Pool(TopicPoints).InUse())
			}
			logged := r.logs.FilterMessageSnippet("dropped").All()
			if len(logged) != 1 || !strings.Contains(logged[0].ContextMap()["error"].(string), tc.want) {
				t.Errorf("log %v: want one drop line saying %q", logged, tc.want)
			}
		})
	}
	t.Run("intensities of another count", func(t *testing.T) {
		r := newROS2Rig(t, PoolSizes{Points: 1000, ImageBytes: 64}, 4)
		v := testScan(100)
		v.Intensities = v.Intensities[:50]
		r.src.OnLaserScan(v)
		r.src.OnLaserScan(v)
		_, b := r.take(t, TopicPoints)
		for _, p := range scanPoints(b) {
			if p[3] != 0 {
				t.Fatalf("point %v: want intensity 0", p)
			}
		}
		if n := r.logs.FilterMessageSnippet("different number of intensities").Len(); n != 1 {
			t.Errorf("%d warnings, want 1", n)
		}
	})
}

// A scan costs no allocation: it arrives at the scanner's rate, 10-40 Hz.
func TestLaserScanAllocatesNothing(t *testing.T) {
	r := newROS2Rig(t, PoolSizes{Points: 2000, ImageBytes: 64}, 4)
	r.src.cfg.Checksum = false
	v := testScan(1081) // a Hokuyo UST-10LX's rays
	if allocs := testing.AllocsPerRun(200, func() { r.src.OnLaserScan(v) }); allocs != 0 {
		t.Errorf("%.1f allocations per scan, want 0", allocs)
	}
	if st := r.src.Stats(TopicPoints); st.Published < 200 {
		t.Errorf("stats %+v", st)
	}
}
