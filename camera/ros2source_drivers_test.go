package camera

import (
	"encoding/binary"
	"math"
	"strings"
	"testing"

	"github.com/zerohop/zerohop/ros2"
)

func allLogText(r *ros2Rig) string {
	var b strings.Builder
	for _, e := range r.logs.All() {
		b.WriteString(e.Message)
		for k, v := range e.ContextMap() {
			b.WriteString(" " + k + "=")
			if s, ok := v.(string); ok {
				b.WriteString(s)
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

// Real drivers' layouts convert: Ouster's 48-byte organized points with
// nine fields, Velodyne's 22-byte and Livox's unaligned 26-byte points.
func TestROS2RealDriverLayouts(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec cloudSpec
	}{
		{"ouster original 48B organized", cloudSpec{fields: []ros2.PointField{pf("x", 0, 7), pf("y", 4, 7), pf("z", 8, 7),
			pf("intensity", 16, 7), pf("t", 20, 6), pf("reflectivity", 24, 4), pf("ring", 26, 4), pf("ambient", 28, 4), pf("range", 32, 6)},
			width: 16, height: 8, pointStep: 48}},
		{"velodyne 22B", cloudSpec{fields: []ros2.PointField{pf("x", 0, 7), pf("y", 4, 7), pf("z", 8, 7), pf("intensity", 12, 7),
			pf("ring", 16, 4), pf("time", 18, 7)}, width: 33, height: 1, pointStep: 22}},
		{"livox2 26B unaligned", cloudSpec{fields: []ros2.PointField{pf("x", 0, 7), pf("y", 4, 7), pf("z", 8, 7), pf("intensity", 12, 7),
			pf("tag", 16, 2), pf("line", 17, 2), pf("timestamp", 18, 8)}, width: 31, height: 1, pointStep: 26}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newROS2Rig(t, PoolSizes{Points: 1000, ImageBytes: 64}, 4)
			pts := testPoints(int(tc.spec.width * tc.spec.height))
			r.src.OnPointCloud2(tc.spec.build(pts))
			h, got := r.take(t, TopicPoints)
			want := packXYZI(pts, true, func(v float64) float32 { return float32(v) })
			if string(got[:h.Length]) != string(want) {
				t.Fatal("slot differs")
			}
		})
	}
}

// Simulator (use_sim_time) stamps: the agent drops every frame as 55 years
// stale; the camera warned only for a stamp of exactly 0, so nothing
// pointed at --ros2-stamp receipt.
func TestROS2SimTimeStampIsWarned(t *testing.T) {
	r := newROS2Rig(t, PoolSizes{Points: 100, ImageBytes: 64}, 4)
	v := cloudSpec{fields: []ros2.PointField{pf("x", 0, 7), pf("y", 4, 7), pf("z", 8, 7)}, width: 10, height: 1, pointStep: 12}.build(testPoints(10))
	v.Sec, v.Nanosec = 42, 500000000 // Gazebo /clock, 42.5 s after start
	r.src.OnPointCloud2(v)
	if !strings.Contains(allLogText(r), "--ros2-stamp") {
		t.Fatalf("stamp 42.5 s (sim time) published without a word; logs:\n%s", allLogText(r))
	}
}

// A Livox-style cloud with "reflectivity" uint8 and no "intensity": the
// BEV's intensity channel is 0 for every point; one warning says so, with
// the fields there are.
func TestROS2MissingIntensityIsSaid(t *testing.T) {
	r := newROS2Rig(t, PoolSizes{Points: 100, ImageBytes: 64}, 4)
	spec := cloudSpec{fields: []ros2.PointField{pf("x", 0, 7), pf("y", 4, 7), pf("z", 8, 7), pf("reflectivity", 12, 2), pf("tag", 13, 2),
		pf("line", 14, 2)}, width: 10, height: 1, pointStep: 18}
	v := spec.build(testPoints(10))
	for k := 0; k < 10; k++ {
		v.Data[k*18+12] = 200
	}
	r.src.OnPointCloud2(v)
	h, got := r.take(t, TopicPoints)
	i := math.Float32frombits(binary.LittleEndian.Uint32(got[12:]))
	if !strings.Contains(allLogText(r), "intensity") {
		t.Fatalf("published %d points with intensity %v (reflectivity 200 ignored), nothing logged; logs:\n%s", h.Points.Count, i, allLogText(r))
	}
}

// An intensity of another integer type is converted; it dropped the whole
// cloud, x, y and z with it.
func TestROS2IntensityOfAnyIntegerTypeKeepsTheCloud(t *testing.T) {
	for _, dt := range []uint8{1, 3, 5, 6} { // INT8, INT16, INT32, UINT32
		r := newROS2Rig(t, PoolSizes{Points: 100, ImageBytes: 64}, 4)
		v := cloudSpec{fields: []ros2.PointField{pf("x", 0, 7), pf("y", 4, 7), pf("z", 8, 7), pf("intensity", 12, dt)},
			width: 10, height: 1, pointStep: 16}.build(testPoints(10))
		r.src.OnPointCloud2(v)
		if st := r.src.Stats(TopicPoints); st.Published != 1 {
			t.Errorf("intensity datatype %d: cloud dropped (%+v); log: %s", dt, st, allLogText(r))
		}
	}
}

// Drop lines name the ROS topic and the flag to change, and a second reason
// of the same class is logged too (only the first ever was).
func TestROS2DropLinesNameTheROSTopicAndTheFlag(t *testing.T) {
	r := newROS2Rig(t, PoolSizes{Points: 100, ImageBytes: 4096}, 4)
	r.src.cfg.PointsTopics, r.src.cfg.ImageTopic = []string{"/ouster/points"}, "/camera/image_raw"
	v := cloudSpec{fields: []ros2.PointField{pf("x", 0, 7), pf("y", 4, 7), pf("z", 8, 7)}, width: 200, height: 1, pointStep: 12}.build(testPoints(200))
	r.src.OnPointCloud2(v)
	img, _ := buildImage("bayer_rggb8", 64, 64, 1, 0)
	r.src.OnImage(img)
	img2, _ := buildImage("rgb8", 64, 64, 3, 0)
	r.src.OnImage(img2) // too large: 12288 > 4096
	img3, _ := buildImage("yuv422_yuy2", 32, 32, 2, 0)
	r.src.OnImage(img3) // second unsupported reason
	logs := allLogText(r)
	for _, want := range []string{"/ouster/points", "--ros2-max-points", "/camera/image_raw", "--ros2-max-image-bytes", "yuv422_yuy2"} {
		if !strings.Contains(logs, want) {
			t.Errorf("no log line mentions %q", want)
		}
	}
	t.Logf("logs:\n%s", logs)
}

// Two fields named "x": the later one silently won.
func TestROS2DuplicateFieldIsRefused(t *testing.T) {
	r := newROS2Rig(t, PoolSizes{Points: 100, ImageBytes: 64}, 4)
	v := cloudSpec{fields: []ros2.PointField{pf("x", 0, 7), pf("y", 4, 7), pf("z", 8, 7), pf("x", 12, 7)},
		width: 10, height: 1, pointStep: 16}.build(testPoints(10))
	r.src.OnPointCloud2(v)
	if st := r.src.Stats(TopicPoints); st.Unsupported != 1 {
		t.Errorf("duplicate field \"x\" accepted: %+v, logs %q", st, allLogText(r))
	}
}

// cv_bridge's 8UCn images (an OpenCV Mat published without a color
// encoding) are taken in OpenCV's channel order.
func TestROS2CVBridgeEncodings(t *testing.T) {
	for _, enc := range []string{"8UC1", "8UC3", "8UC4"} {
		r := newROS2Rig(t, PoolSizes{Points: 100, ImageBytes: 4096}, 4)
		bpp := map[string]uint32{"8UC1": 1, "8UC3": 3, "8UC4": 4}[enc]
		img, _ := buildImage(enc, 8, 8, bpp, 0)
		r.src.OnImage(img)
		if st := r.src.Stats(TopicImage); st.Published != 1 {
			t.Errorf("%s: %+v; logs %s", enc, st, allLogText(r))
		}
	}
}
