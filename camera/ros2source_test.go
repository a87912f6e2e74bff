package camera

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"maps"
	"math"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/zerohop/zerohop/handles"
	"github.com/zerohop/zerohop/handles/transport"
	"github.com/zerohop/zerohop/pinned"
	"github.com/zerohop/zerohop/ros2"
	"github.com/zerohop/zerohop/sensor"
)

// ros2Rig is a camera with a push source, its pools served in-process.
type ros2Rig struct {
	cam  *Camera
	tr   *transport.Inproc
	src  *ROS2Source
	val  *handles.Validator
	logs *observer.ObservedLogs
}

func newROS2Rig(t testing.TB, sizes PoolSizes, slots uint32) *ros2Rig {
	t.Helper()
	return newROS2RigStamped(t, sizes, slots, false)
}

// newROS2RigStamped is newROS2Rig with ROS2SourceConfig.StampOnReceipt.
func newROS2RigStamped(t testing.TB, sizes PoolSizes, slots uint32, stampOnReceipt bool) *ros2Rig {
	t.Helper()
	return newROS2RigWith(t, sizes, slots, ROS2SourceConfig{StampOnReceipt: stampOnReceipt})
}

// newROS2RigWith is newROS2Rig with cfg's settings (Checksum and Log are
// the rig's own).
func newROS2RigWith(t testing.TB, sizes PoolSizes, slots uint32, cfg ROS2SourceConfig) *ros2Rig {
	t.Helper()
	core, logs := observer.New(zapcore.InfoLevel)
	cam, err := New(Config{Source: sizes, Slots: slots, Checksum: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cam.Close() })
	var topics []transport.Topic
	var geoms []handles.Geometry
	for i := range 2 {
		p := cam.Pool(i)
		topics = append(topics, transport.Topic{Name: TopicName(i), Kind: Kind(i), Pool: p})
		geoms = append(geoms, handles.Geometry{PoolID: p.ID(), SlotCount: p.Geometry().SlotCount, SlotCapacity: p.Geometry().SlotSize, Kind: Kind(i)})
	}
	tr, err := transport.NewInproc(transport.InprocConfig{Topics: topics})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	val, err := handles.NewValidator(geoms...)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Checksum, cfg.Log = true, zap.New(core)
	src, err := NewROS2Source(nil, cam, tr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &ros2Rig{cam: cam, tr: tr, src: src, val: val, logs: logs}
}

// take returns the latest published frame of topic, validated, copied
// out of its slot, and releases it.
func (r *ros2Rig) take(t *testing.T, topic int) (handles.Handle, []byte) {
	t.Helper()
	l, ok := r.tr.TryLatest(topic)
	if !ok {
		t.Fatalf("nothing published on %s", TopicName(topic))
	}
	defer l.Release()
	h := l.Handle
	if err := r.val.Validate(&h); err != nil {
		t.Fatalf("published handle invalid: %v (%+v)", err, h)
	}
	if err := r.val.VerifyPayload(&h, l.Bytes()); err != nil {
		t.Fatalf("payload: %v", err)
	}
	return h, bytes.Clone(l.Bytes())
}

// point is one test point in float64, and its packed float32 XYZI form.
type point struct{ x, y, z, i float64 }

func testPoint(k int) point {
	return point{x: 1 + 0.5*float64(k), y: -0.25 * float64(k), z: 1e-3*float64(k) - 2, i: 1.5*float64(k) + 0.1}
}

// packXYZI is the expected slot content, written independently of the code
// under test.
func packXYZI(pts []point, hasIntensity bool, intensityConv func(float64) float32) []byte {
	out := make([]byte, 0, len(pts)*16)
	for _, p := range pts {
		i := float32(0)
		if hasIntensity {
			i = intensityConv(p.i)
		}
		for _, v := range []float32{float32(p.x), float32(p.y), float32(p.z), i} {
			out = binary.LittleEndian.AppendUint32(out, math.Float32bits(v))
		}
	}
	return out
}

// cloudSpec is a source layout: fields written at their offsets, the rest
// of each point and of each row filled with 0xAB.
type cloudSpec struct {
	fields            []ros2.PointField
	width, height     uint32
	pointStep, rowPad uint32
	iField            string // the field that holds each point's i; "" = "intensity"
}

func (c cloudSpec) build(pts []point) *ros2.PointCloud2View {
	rowStep := c.width*c.pointStep + c.rowPad
	data := bytes.Repeat([]byte{0xAB}, int(rowStep*c.height))
	le := binary.LittleEndian
	iField := c.iField
	if iField == "" {
		iField = "intensity"
	}
	for k, p := range pts {
		r, col := uint32(k)/c.width, uint32(k)%c.width
		base := data[r*rowStep+col*c.pointStep:]
		for _, f := range c.fields {
			var v float64
			switch string(f.Name) {
			case "x":
				v = p.x
			case "y":
				v = p.y
			case "z":
				v = p.z
			case iField:
				v = p.i
			default:
				continue
			}
			switch f.Datatype {
			case 7:
				le.PutUint32(base[f.Offset:], math.Float32bits(float32(v)))
			case 8:
				le.PutUint64(base[f.Offset:], math.Float64bits(v))
			case 4:
				le.PutUint16(base[f.Offset:], uint16(v))
			case 2:
				base[f.Offset] = uint8(v)
			}
		}
	}
	return &ros2.PointCloud2View{
		Sec: 1700000001, Nanosec: 987654321, FrameID: []byte("lidar_top"),
		Width: c.width, Height: c.height, Fields: c.fields, PointStep: c.pointStep, RowStep: rowStep, Data: data, IsDense: true,
	}
}

func pf(name string, off uint32, dt uint8) ros2.PointField {
	return ros2.PointField{Name: []byte(name), Offset: off, Datatype: dt, Count: 1}
}

func testPoints(n int) []point {
	pts := make([]point, n)
	for k := range pts {
		pts[k] = testPoint(k)
	}
	return pts
}

func TestROS2PointCloud2ConvertsToPackedXYZI(t *testing.T) {
	f32 := func(v float64) float32 { return float32(v) }
	for _, tc := range []struct {
		name      string
		spec      cloudSpec
		intensity bool
		conv      func(float64) float32
	}{
		{"shuffled offsets with float64 intensity and padding", cloudSpec{
			fields: []ros2.PointField{pf("y", 0, 7), pf("z", 4, 7), pf("x", 8, 7), pf("ring", 12, 4), pf("intensity", 16, 8)},
			width:  37, height: 1, pointStep: 32}, true, f32},
		{"already packed XYZI float32 (fast path)", cloudSpec{
			fields: []ros2.PointField{pf("x", 0, 7), pf("y", 4, 7), pf("z", 8, 7), pf("intensity", 12, 7)},
			width:  50, height: 1, pointStep: 16}, true, f32},
		{"organized cloud with row padding, float64 xyz", cloudSpec{
			fields: []ros2.PointField{pf("x", 0, 8), pf("y", 8, 8), pf("z", 16, 8), pf("intensity", 24, 7)},
			width:  6, height: 4, pointStep: 28, rowPad: 5}, true, f32},
		{"packed float32 layout but organized with row padding", cloudSpec{
			fields: []ros2.PointField{pf("x", 0, 7), pf("y", 4, 7), pf("z", 8, 7), pf("intensity", 12, 7)},
			width:  5, height: 3, pointStep: 16, rowPad: 16}, true, f32},
		{"no intensity field: written as zero", cloudSpec{
			fields: []ros2.PointField{pf("x", 4, 7), pf("y", 8, 7), pf("z", 12, 7)},
			width:  9, height: 1, pointStep: 19}, false, f32},
		{"uint16 intensity at an odd offset", cloudSpec{
			fields: []ros2.PointField{pf("x", 0, 7), pf("y", 4, 7), pf("z", 8, 7), pf("intensity", 13, 4)},
			width:  11, height: 1, pointStep: 15}, true, func(v float64) float32 { return float32(uint16(v)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newROS2Rig(t, PoolSizes{Points: 1000, ImageBytes: 64}, 4)
			pts := testPoints(int(tc.spec.width * tc.spec.height))
			v := tc.spec.build(pts)
			r.src.OnPointCloud2(v)
			h, got := r.take(t, TopicPoints)
			want := packXYZI(pts, tc.intensity, tc.conv)
			if !bytes.Equal(got[:h.Length], want) {
				t.Errorf("slot bytes differ\n got %x\nwant %x", got[:h.Length], want)
			}
			if h.Points.Count != uint32(len(pts)) || h.Points.Step != 16 || h.Points.X != 0 || h.Points.Y != 4 ||
				h.Points.Z != 8 || h.Points.Intensity != 12 || h.Points.Datatype != handles.DatatypeFloat32 {
				t.Errorf("point format %+v", h.Points)
			}
			if h.CaptureNs != 1700000001_987654321 || h.FrameID.String() != "lidar_top" || h.Kind != handles.KindPoints {
				t.Errorf("handle header: capture %d frame %q kind %v", h.CaptureNs, h.FrameID.String(), h.Kind)
			}
			if st := r.src.Stats(TopicPoints); st.Received != 1 || st.Published != 1 || st.Delivered != 1 {
				t.Errorf("stats %+v", st)
			}
		})
	}
}

// TestROS2EmptyCloudIsPublishedEmpty: a cloud without points (width or
// height 0) is published as an empty cloud, whatever its row_step and
// height claim; it once sliced past its data (a panic on the DDS reader's
// goroutine, from one sample any participant could send) or looped over
// 2^31 empty rows.
func TestROS2EmptyCloudIsPublishedEmpty(t *testing.T) {
	xyz := []ros2.PointField{pf("x", 0, 7), pf("y", 4, 7), pf("z", 8, 7)}
	for _, tc := range []struct {
		name                  string
		width, height, rowStp uint32
	}{
		{"zero width, two rows of row_step 100, no data", 0, 2, 100},
		{"zero width, 2^31 rows", 0, 1 << 31, 0},
		{"zero height", 10, 0, 160},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newROS2Rig(t, PoolSizes{Points: 100, ImageBytes: 64}, 4)
			v := &ros2.PointCloud2View{Width: tc.width, Height: tc.height, Fields: xyz, PointStep: 20, RowStep: tc.rowStp}
			start := time.Now()
			r.src.OnPointCloud2(v)
			if d := time.Since(start); d > time.Second {
				t.Errorf("one empty cloud took %v", d)
			}
			h, _ := r.take(t, TopicPoints)
			if h.Points.Count != 0 || h.Length != 0 {
				t.Errorf("published %d points, %d bytes; want an empty cloud", h.Points.Count, h.Length)
			}
			if st := r.src.Stats(TopicPoints); st.Received != 1 || st.Published != 1 {
				t.Errorf("stats %+v", st)
			}
		})
	}
}

func TestROS2UnsupportedCloudIsLoggedOnceAndCounted(t *testing.T) {
	good := []ros2.PointField{pf("x", 0, 7), pf("y", 4, 7), pf("z", 8, 7)}
	for _, tc := range []struct {
		name, wantLog string
		mutate        func(v *ros2.PointCloud2View)
	}{
		{"missing z", `no "z" field`, func(v *ros2.PointCloud2View) { v.Fields = good[:2] }},
		{"int16 x", `field "x": datatype 3`, func(v *ros2.PointCloud2View) {
			v.Fields = []ros2.PointField{pf("x", 0, 3), good[1], good[2]}
		}},
		{"big-endian", "big-endian", func(v *ros2.PointCloud2View) { v.IsBigEndian = true }},
		{"field past point_step", "does not fit point_step", func(v *ros2.PointCloud2View) {
			v.Fields = []ros2.PointField{good[0], good[1], pf("z", 12, 8)}
		}},
		{"data shorter than the points", "data holds", func(v *ros2.PointCloud2View) { v.Data = v.Data[:len(v.Data)-1] }},
		{"count 3", "count 3", func(v *ros2.PointCloud2View) {
			v.Fields = []ros2.PointField{{Name: []byte("x"), Datatype: 7, Count: 3}, good[1], good[2]}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newROS2Rig(t, PoolSizes{Points: 100, ImageBytes: 64}, 4)
			v := cloudSpec{fields: good, width: 10, height: 1, pointStep: 16}.build(testPoints(10))
			tc.mutate(v)
			for range 3 {
				r.src.OnPointCloud2(v)
			}
			if st := r.src.Stats(TopicPoints); st.Unsupported != 3 || st.Published != 0 || st.Received != 3 {
				t.Errorf("stats %+v, want 3 unsupported", st)
			}
			if _, ok := r.tr.TryLatest(TopicPoints); ok {
				t.Error("an unsupported cloud was published")
			}
			if r.cam.Pool(TopicPoints).InUse() != 0 {
				t.Error("a slot leaked")
			}
			logged := r.logs.FilterMessageSnippet("dropped").All()
			if len(logged) != 1 || !strings.Contains(logged[0].ContextMap()["error"].(string), tc.wantLog) {
				t.Errorf("logged %d times (%v), want once mentioning %q", len(logged), logged, tc.wantLog)
			}
		})
	}
}

// imageSpec builds an image with row padding filled with 0xEE.
func buildImage(enc string, w, h, bpp, pad uint32) (*ros2.ImageView, []byte) {
	step := w*bpp + pad
	data := bytes.Repeat([]byte{0xEE}, int(step*h))
	var want []byte
	for r := range h {
		for c := range w * bpp {
			b := byte(r*131 + c*7 + 3)
			data[r*step+c] = b
			want = append(want, b)
		}
	}
	return &ros2.ImageView{Sec: 1700000000, Nanosec: 123456789, FrameID: []byte("camera_optical"),
		Width: w, Height: h, Encoding: []byte(enc), Step: step, Data: data}, want
}

func TestROS2ImageCopiedRowByRow(t *testing.T) {
	for _, tc := range []struct {
		enc      string
		want     handles.Encoding
		bpp, pad uint32
	}{
		{"bgr8", handles.EncodingBGR8, 3, 5},
		{"rgb8", handles.EncodingRGB8, 3, 0},
		{"mono8", handles.EncodingMono8, 1, 3},
	} {
		t.Run(tc.enc, func(t *testing.T) {
			r := newROS2Rig(t, PoolSizes{Points: 10, ImageBytes: 64 * 64 * 3}, 4)
			v, want := buildImage(tc.enc, 13, 7, tc.bpp, tc.pad)
			r.src.OnImage(v)
			h, got := r.take(t, TopicImage)
			if !bytes.Equal(got[:h.Length], want) {
				t.Errorf("slot bytes differ\n got %x\nwant %x", got[:h.Length], want)
			}
			if h.Image != (handles.ImageFormat{Width: 13, Height: 7, RowStep: 13 * tc.bpp, Encoding: tc.want}) {
				t.Errorf("image format %+v", h.Image)
			}
			if h.CaptureNs != 1700000000_123456789 || h.FrameID.String() != "camera_optical" {
				t.Errorf("capture %d frame %q", h.CaptureNs, h.FrameID.String())
			}
		})
	}
}

func TestROS2UnsupportedImageIsLoggedOnceAndCounted(t *testing.T) {
	for _, tc := range []struct {
		name, wantLog string
		mutate        func(*ros2.ImageView)
	}{
		{"16-bit encoding", `"mono16" not supported`, func(v *ros2.ImageView) { v.Encoding = []byte("mono16") }},
		{"step below a row", "step 38 <", func(v *ros2.ImageView) { v.Step = 38 }},
		{"data shorter than the rows", "data holds", func(v *ros2.ImageView) { v.Data = v.Data[:len(v.Data)-3] }}, // 2 bytes of padding are not needed
		{"empty", "is empty", func(v *ros2.ImageView) { v.Height = 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newROS2Rig(t, PoolSizes{Points: 10, ImageBytes: 64 * 64 * 3}, 4)
			v, _ := buildImage("rgb8", 13, 7, 3, 2)
			tc.mutate(v)
			r.src.OnImage(v)
			r.src.OnImage(v)
			if st := r.src.Stats(TopicImage); st.Unsupported != 2 || st.Published != 0 {
				t.Errorf("stats %+v, want 2 unsupported", st)
			}
			logged := r.logs.FilterMessageSnippet("dropped").All()
			if len(logged) != 1 || !strings.Contains(logged[0].ContextMap()["error"].(string), tc.wantLog) {
				t.Errorf("logged %v, want once mentioning %q", logged, tc.wantLog)
			}
		})
	}
}

func TestROS2TooLargeAndExhaustedAreDroppedNotBlocked(t *testing.T) {
	r := newROS2Rig(t, PoolSizes{Points: 10, ImageBytes: 100}, 2)
	big := cloudSpec{fields: []ros2.PointField{pf("x", 0, 7), pf("y", 4, 7), pf("z", 8, 7)}, width: 11, height: 1, pointStep: 12}
	r.src.OnPointCloud2(big.build(testPoints(11)))
	if st := r.src.Stats(TopicPoints); st.TooLarge != 1 || st.Published != 0 {
		t.Errorf("too large: stats %+v", st)
	}
	r.exhaustImages(t)
	st := r.src.Stats(TopicImage)
	if st.Published != 2 || st.Exhausted != 1 {
		t.Errorf("exhausted: stats %+v, want 2 published and 1 exhausted", st)
	}
}

// exhaustImages sends three images into a 2-slot image pool: two are
// published (the first is held by the test until it ends, the second by
// the inproc subscriber as its latest), the third finds no free slot.
func (r *ros2Rig) exhaustImages(t *testing.T) {
	t.Helper()
	img, _ := buildImage("mono8", 10, 10, 1, 0)
	r.src.OnImage(img)
	held, ok := r.tr.TryLatest(TopicImage)
	if !ok {
		t.Fatal("first image not published")
	}
	t.Cleanup(func() { held.Release() }) // before the rig closes (cleanups run last-in first-out)
	r.src.OnImage(img)
	r.src.OnImage(img)
}

func TestROS2CountersOnMetrics(t *testing.T) {
	r := newROS2Rig(t, PoolSizes{Points: 10, ImageBytes: 100}, 2)
	good := []ros2.PointField{pf("x", 0, 7), pf("y", 4, 7), pf("z", 8, 7)}
	r.src.OnPointCloud2(cloudSpec{fields: good, width: 11, height: 1, pointStep: 12}.build(testPoints(11)))   // too large
	r.src.OnPointCloud2(cloudSpec{fields: good[:2], width: 3, height: 1, pointStep: 12}.build(testPoints(3))) // no z: unsupported
	v := cloudSpec{fields: good, width: 3, height: 1, pointStep: 12}.build(testPoints(3))
	v.FrameID = []byte("velodyne_top_front_left") // published, frame_id truncated
	r.src.OnPointCloud2(v)
	r.exhaustImages(t)

	reg := prometheus.NewRegistry()
	if err := reg.Register(r.src.Collector()); err != nil {
		t.Fatal(err)
	}
	got := gatherCounters(t, reg)
	want := map[string]float64{
		`zerohop_camera_ros2_messages_total{result="published",topic="points"}`:   1,
		`zerohop_camera_ros2_messages_total{result="too_large",topic="points"}`:   1,
		`zerohop_camera_ros2_messages_total{result="unsupported",topic="points"}`: 1,
		`zerohop_camera_ros2_messages_total{result="exhausted",topic="points"}`:   0,
		`zerohop_camera_ros2_messages_total{result="failed",topic="points"}`:      0,
		`zerohop_camera_ros2_messages_total{result="published",topic="image"}`:    2,
		`zerohop_camera_ros2_messages_total{result="exhausted",topic="image"}`:    1,
		`zerohop_camera_ros2_messages_total{result="too_large",topic="image"}`:    0,
		`zerohop_camera_ros2_messages_total{result="unsupported",topic="image"}`:  0,
		`zerohop_camera_ros2_messages_total{result="failed",topic="image"}`:       0,
		`zerohop_camera_ros2_frame_id_rewrites_total{topic="points"}`:             1,
		`zerohop_camera_ros2_frame_id_rewrites_total{topic="image"}`:              0,
		`zerohop_camera_ros2_mirrored_total{topic="points"}`:                      0,
		`zerohop_camera_ros2_mirrored_total{topic="image"}`:                       0,
		`zerohop_camera_ros2_mirror_errors_total{topic="points"}`:                 0,
		`zerohop_camera_ros2_mirror_errors_total{topic="image"}`:                  0,
	}
	if !maps.Equal(got, want) {
		t.Errorf("metrics\n got %v\nwant %v", got, want)
	}
	// The results of a topic account for every message it received.
	for topic, name := range []string{"points", "image"} {
		var sum float64
		for k, v := range got {
			if strings.HasPrefix(k, "zerohop_camera_ros2_messages_total{") && strings.HasSuffix(k, `topic="`+name+`"}`) {
				sum += v
			}
		}
		if rec := r.src.Stats(topic).Received; sum != float64(rec) {
			t.Errorf("%s: results sum to %v, received %d", name, sum, rec)
		}
	}
}

// gatherCounters returns every counter in reg as name{label="v",...} → value.
func gatherCounters(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() { // sorted by name
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			out[f.GetName()+"{"+strings.Join(labels, ",")+"}"] = m.GetCounter().GetValue()
		}
	}
	return out
}

func TestROS2FrameIDTruncatedOrReplaced(t *testing.T) {
	r := newROS2Rig(t, PoolSizes{Points: 10, ImageBytes: 100}, 4)
	for _, tc := range []struct{ in, want string }{
		{"velodyne_top_front_left", "velodyne_top_fro"},
		{"bad\x01id", "camera"}, // the camera's configured image frame id
		{"", "camera"},
	} {
		v, _ := buildImage("mono8", 4, 4, 1, 0)
		v.FrameID = []byte(tc.in)
		r.src.OnImage(v)
		h, _ := r.take(t, TopicImage)
		if h.FrameID.String() != tc.want {
			t.Errorf("frame id %q → %q, want %q", tc.in, h.FrameID.String(), tc.want)
		}
	}
	if st := r.src.Stats(TopicImage); st.FrameIDs != 2 {
		t.Errorf("FrameIDs = %d, want 2", st.FrameIDs)
	}
}

func TestROS2IngestAllocatesNothing(t *testing.T) {
	shuffled := cloudSpec{fields: []ros2.PointField{pf("y", 0, 7), pf("z", 4, 7), pf("x", 8, 7), pf("intensity", 16, 8)},
		width: 100, height: 1, pointStep: 32}
	livox := cloudSpec{fields: []ros2.PointField{pf("x", 0, 7), pf("y", 4, 7), pf("z", 8, 7), pf("reflectivity", 12, 2), pf("tag", 13, 2)},
		width: 100, height: 1, pointStep: 18, iField: "reflectivity"}
	for _, tc := range []struct {
		name      string
		spec      cloudSpec
		intensity ROS2Intensity
	}{
		{"float64 intensity at shuffled offsets", shuffled, ROS2Intensity{}},
		{"a named uint8 field, scaled", livox, ROS2Intensity{Field: "reflectivity", Scale: 1.0 / 255}},
		// The first cloud's warning allocates; AllocsPerRun's warm-up run
		// takes it, every later cloud must not.
		{"a cloud without the named field", shuffled, ROS2Intensity{Field: "signal"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newROS2RigWith(t, PoolSizes{Points: 1000, ImageBytes: 64 * 64 * 3}, 4, ROS2SourceConfig{Intensity: tc.intensity})
			r.src.cfg.Checksum = false
			cloud := tc.spec.build(testPoints(100))
			img, _ := buildImage("bgr8", 32, 16, 3, 4)
			allocs := testing.AllocsPerRun(200, func() {
				r.src.OnPointCloud2(cloud)
				r.src.OnImage(img)
			})
			if allocs != 0 {
				t.Errorf("%.1f allocations per cloud+image, want 0", allocs)
			}
			if st := r.src.Stats(TopicPoints); st.Published < 200 {
				t.Errorf("points stats %+v", st)
			}
		})
	}
}

func TestPoolSizesRefusesPull(t *testing.T) {
	var s sensor.Source = PoolSizes{Points: 1}
	if _, err := s.FillPoints(0, make([]byte, 16)); err != ErrPushSource {
		t.Errorf("FillPoints error %v, want ErrPushSource", err)
	}
}

func BenchmarkROS2Cloud(b *testing.B) {
	packed := cloudSpec{fields: []ros2.PointField{pf("x", 0, 7), pf("y", 4, 7), pf("z", 8, 7), pf("intensity", 12, 7)}, width: 100000, height: 1, pointStep: 16}
	for _, tc := range []struct {
		name      string
		spec      cloudSpec
		intensity ROS2Intensity
	}{
		{"shuffled-f64-intensity", cloudSpec{fields: []ros2.PointField{pf("y", 0, 7), pf("z", 4, 7), pf("x", 8, 7), pf("intensity", 16, 8)}, width: 100000, height: 1, pointStep: 32}, ROS2Intensity{}},
		{"packed-xyzi", packed, ROS2Intensity{}},
		{"packed-xyzi-scaled", packed, ROS2Intensity{Scale: 1.0 / 255}},
		{"livox-u8-reflectivity-scaled", cloudSpec{fields: []ros2.PointField{pf("x", 0, 7), pf("y", 4, 7), pf("z", 8, 7), pf("reflectivity", 12, 2), pf("tag", 13, 2)},
			width: 100000, height: 1, pointStep: 18, iField: "reflectivity"}, ROS2Intensity{Field: "reflectivity", Scale: 1.0 / 255}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			cam, err := New(Config{Source: PoolSizes{Points: 100000, ImageBytes: 16}, Slots: 4})
			if err != nil {
				b.Fatal(err)
			}
			defer cam.Close()
			src, err := NewROS2Source(nil, cam, abortPublisher{cam}, ROS2SourceConfig{Intensity: tc.intensity})
			if err != nil {
				b.Fatal(err)
			}
			v := tc.spec.build(testPoints(100000))
			b.SetBytes(int64(len(v.Data)))
			b.ReportAllocs()
			for b.Loop() {
				src.OnPointCloud2(v)
			}
		})
	}
}

// abortPublisher publishes to nobody: the slot goes straight back to the
// free list (benchmarks measure the copy alone).
type abortPublisher struct{ cam *Camera }

func (p abortPublisher) Publish(topic int, slot pinned.Slot, _ *handles.Handle) (int, error) {
	_, err := p.cam.Pool(topic).Publish(slot, 0)
	return 0, err
}

// TestNewRejectsRatesWithoutAPeriod: NaN passed a range check written as
// "out of range" and a tiny rate overflowed the period; Run then panicked
// in NewTicker (with --slots set, which skips the sizing that caught it).
func TestNewRejectsRatesWithoutAPeriod(t *testing.T) {
	for _, rate := range []float64{math.NaN(), 1e-10, -1, math.Inf(1), 10001} {
		cam, err := New(Config{Source: PoolSizes{Points: 16, ImageBytes: 16}, Slots: 4, Rate: rate})
		if err == nil {
			cam.Close()
			t.Errorf("rate %v accepted", rate)
		} else if !strings.Contains(err.Error(), "want 0.001 to 10000") {
			t.Errorf("rate %v: %v", rate, err)
		}
	}
}

// --ros2-stamp receipt: the capture time is this machine's clock at
// arrival, not the header's (a simulator's /clock stamps near 0 would be
// dropped by the agent as an hour or a year stale).
func TestROS2StampOnReceipt(t *testing.T) {
	r := newROS2RigStamped(t, PoolSizes{Points: 1000, ImageBytes: 64}, 4, true)
	pts := testPoints(8)
	v := cloudSpec{fields: []ros2.PointField{pf("x", 0, 7), pf("y", 4, 7), pf("z", 8, 7)}, width: 8, height: 1, pointStep: 12}.build(pts)
	before := time.Now().UnixNano()
	r.src.OnPointCloud2(v)
	after := time.Now().UnixNano()
	h, _ := r.take(t, TopicPoints)
	if h.CaptureNs < before || h.CaptureNs > after {
		t.Fatalf("capture %d, want the arrival time in [%d, %d] (header stamp 1700000001.987654321)", h.CaptureNs, before, after)
	}
}

// slowMirror is a FAKE MirrorSink whose Publish blocks until released: a
// DDS write on a link slower than the frames.
type slowMirror struct {
	release chan struct{}
	entered chan struct{} // one value per Publish begun
	mu      sync.Mutex
	got     []int64 // CaptureNs of each frame published
}

func (m *slowMirror) Matched() int { return 1 }

func (m *slowMirror) Publish(h *handles.Handle, payload []byte) error {
	m.entered <- struct{}{}
	<-m.release
	m.mu.Lock()
	m.got = append(m.got, h.CaptureNs)
	m.mu.Unlock()
	return nil
}

// TestSlowMirrorNeverHoldsUpIngest: while the mirror is stuck writing one
// frame, the callback goes on publishing frames to the agent at once; the
// frames the mirror cannot take are counted, and once it is free it gets
// the next one, not a queue of old ones.
func TestSlowMirrorNeverHoldsUpIngest(t *testing.T) {
	cam, err := New(Config{Source: PoolSizes{Points: 10, ImageBytes: 100}, Slots: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer cam.Close()
	tr, err := transport.NewInproc(transport.InprocConfig{Topics: []transport.Topic{
		{Name: TopicName(TopicPoints), Kind: Kind(TopicPoints), Pool: cam.Pool(TopicPoints)},
		{Name: TopicName(TopicImage), Kind: Kind(TopicImage), Pool: cam.Pool(TopicImage)}}})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	m := &slowMirror{release: make(chan struct{}), entered: make(chan struct{}, 16)}
	src, err := NewROS2Source(nil, cam, tr, ROS2SourceConfig{Mirrors: [2]MirrorSink{TopicImage: m}})
	if err != nil {
		t.Fatal(err)
	}
	var released sync.Once
	defer func() { released.Do(func() { close(m.release) }); src.Close() }()
	img, _ := buildImage("mono8", 10, 10, 1, 0)
	img.Nanosec = 0
	send := func(stamp int32) {
		t.Helper()
		img.Sec = stamp
		done := make(chan struct{})
		go func() { src.OnImage(img); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("OnImage waited for the mirror")
		}
		if l, ok := tr.TryLatest(TopicImage); ok {
			l.Release()
		}
	}
	send(1)
	<-m.entered // the mirror is now stuck in frame 1
	for stamp := int32(2); stamp <= 6; stamp++ {
		send(stamp)
	}
	if st := src.Stats(TopicImage); st.Published != 6 {
		t.Fatalf("stats %+v: want all 6 frames published while the mirror was stuck", st)
	}
	if n := src.streams[TopicImage].mirrorErrors.Load(); n != 5 {
		t.Fatalf("%d frames counted as not mirrored, want 5", n)
	}
	released.Do(func() { close(m.release) })
	for deadline := time.Now().Add(5 * time.Second); src.Stats(TopicImage).Mirrored < 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the stuck frame was never mirrored")
		}
	}
	send(7) // the mirror is free again: it takes the newest frame
	for deadline := time.Now().Add(5 * time.Second); src.Stats(TopicImage).Mirrored < 2; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the frame after the stall was never mirrored")
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if want := []int64{1e9, 7e9}; len(m.got) != 2 || m.got[0] != want[0] || m.got[1] != want[1] {
		t.Fatalf("mirrored capture times %v, want %v (frame 1, then the newest, 7)", m.got, want)
	}
}

// countingMirror is a FAKE MirrorSink that only counts.
type countingMirror struct{ n atomic.Int64 }

func (m *countingMirror) Matched() int                          { return 1 }
func (m *countingMirror) Publish(*handles.Handle, []byte) error { m.n.Add(1); return nil }

// TestMirroredIngestAllocatesNothing: an image taken in and handed to the
// mirror's worker allocates nothing, on either side.
func TestMirroredIngestAllocatesNothing(t *testing.T) {
	cam, err := New(Config{Source: PoolSizes{Points: 10, ImageBytes: 100}, Slots: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer cam.Close()
	m := &countingMirror{}
	src, err := NewROS2Source(nil, cam, discardPublisher{cam}, ROS2SourceConfig{Mirrors: [2]MirrorSink{TopicImage: m}})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	img, _ := buildImage("mono8", 10, 10, 1, 0)
	allocs := testing.AllocsPerRun(200, func() {
		src.OnImage(img)
		for src.mirrors[TopicImage].busy.Load() { // let the worker finish, so each frame is mirrored
			runtime.Gosched()
		}
	})
	if allocs != 0 {
		t.Errorf("%.1f allocations per mirrored image, want 0", allocs)
	}
	if m.n.Load() < 200 {
		t.Errorf("%d images mirrored, want every one", m.n.Load())
	}
}

// discardPublisher publishes to nobody: the pool frees the slot at once.
type discardPublisher struct{ cam *Camera }

func (d discardPublisher) Publish(topic int, slot pinned.Slot, _ *handles.Handle) (int, error) {
	_, err := d.cam.Pool(topic).Publish(slot, 0)
	return 0, err
}

// TestZeroHeaderStampIsWarnedOnce: a driver that leaves header.stamp 0
// gets one warning naming the fix; the agent would otherwise only say its
// frames are stale.
func TestZeroHeaderStampIsWarnedOnce(t *testing.T) {
	r := newROS2Rig(t, PoolSizes{Points: 10, ImageBytes: 100}, 4)
	img, _ := buildImage("mono8", 10, 10, 1, 0)
	img.Sec, img.Nanosec = 0, 0
	for range 3 {
		r.src.OnImage(img)
		if l, ok := r.tr.TryLatest(TopicImage); ok {
			l.Release()
		}
	}
	if n := r.logs.FilterMessageSnippet("header.stamp is 0").FilterMessageSnippet("--ros2-stamp receipt").Len(); n != 1 {
		t.Fatalf("%d warnings for three zero stamps, want 1", n)
	}
	img.Sec = 1700000000 // stamped: no warning
	r2 := newROS2Rig(t, PoolSizes{Points: 10, ImageBytes: 100}, 4)
	r2.src.OnImage(img)
	if n := r2.logs.FilterMessageSnippet("header.stamp is 0").Len(); n != 0 {
		t.Fatalf("a stamped image warned %d times", n)
	}
}
