//go:build ros2 && cgo

package ros2

import (
	"bytes"
	"encoding/hex"
	"math"
	"reflect"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/zerohop/zerohop/handles"
)

// pattern is testdata/peer/peer.c's payload byte i.
func pattern(i uint32) byte { return byte(i*31 + 7 + i>>8) }

func patternBytes(n uint32) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = pattern(uint32(i))
	}
	return b
}

// receivedImage is an ImageView copied out of its callback.
type receivedImage struct {
	sec                 int32
	nanosec             uint32
	frameID, encoding   string
	height, width, step uint32
	isBigEndian         uint8
	data                []byte
}

func TestSubscribeImageBitExact(t *testing.T) {
	for _, width := range []uint32{8, 640} { // 640: 616 KB, hundreds of UDP fragments
		t.Run(strconv.Itoa(int(width))+" pixels wide", func(t *testing.T) {
			cfg := loopbackConfig(t)
			p, err := NewParticipant(cfg, zaptest.NewLogger(t))
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			got := make(chan receivedImage, 1)
			sub, err := p.SubscribeImage("camera/image_raw", SubscriptionOptions{}, func(v *ImageView) {
				r := receivedImage{v.Sec, v.Nanosec, string(v.FrameID), string(v.Encoding), v.Height, v.Width, v.Step,
					v.IsBigEndian, bytes.Clone(v.Data)}
				select {
				case got <- r:
				default:
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			startPeer(t, cfg, "pub", "image", "rt/camera/image_raw", "besteffort", "20", strconv.Itoa(int(width)))
			var r receivedImage
			select {
			case r = <-got:
			case <-time.After(20 * time.Second):
				t.Fatalf("no image within 20 s (received %d)", sub.Received())
			}
			height, step := width/2+1, width*3+2
			want := receivedImage{1700000000, 123456789, "camera_optical", "rgb8", height, width, step, 0, patternBytes(step * height)}
			if !bytes.Equal(r.data, want.data) {
				t.Errorf("data differs: got %d bytes, want %d", len(r.data), len(want.data))
			}
			r.data, want.data = nil, nil
			if !reflect.DeepEqual(r, want) {
				t.Errorf("image\n got %+v\nwant %+v", r, want)
			}
			if sub.Matched() != 1 {
				t.Errorf("Matched() = %d, want 1", sub.Matched())
			}
		})
	}
}

type receivedField struct {
	name     string
	offset   uint32
	datatype uint8
	count    uint32
}

func TestSubscribePointCloud2BitExact(t *testing.T) {
	cfg := loopbackConfig(t)
	p, err := NewParticipant(cfg, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	type cloud struct {
		sec                int32
		nanosec            uint32
		frameID            string
		height, width      uint32
		fields             []receivedField
		bigEndian, dense   bool
		pointStep, rowStep uint32
		data               []byte
	}
	got := make(chan cloud, 1)
	_, err = p.SubscribePointCloud2("/lidar/points", SubscriptionOptions{}, func(v *PointCloud2View) {
		c := cloud{sec: v.Sec, nanosec: v.Nanosec, frameID: string(v.FrameID), height: v.Height, width: v.Width,
			bigEndian: v.IsBigEndian, dense: v.IsDense, pointStep: v.PointStep, rowStep: v.RowStep, data: bytes.Clone(v.Data)}
		for _, f := range v.Fields {
			c.fields = append(c.fields, receivedField{string(f.Name), f.Offset, f.Datatype, f.Count})
		}
		select {
		case got <- c:
		default:
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	const n = 3000
	startPeer(t, cfg, "pub", "cloud", "rt/lidar/points", "reliable", "20", strconv.Itoa(n))
	var c cloud
	select {
	case c = <-got:
	case <-time.After(20 * time.Second):
		t.Fatal("no cloud within 20 s")
	}
	if want := patternBytes(19 * n); !bytes.Equal(c.data, want) {
		t.Errorf("data differs: got %d bytes, want %d", len(c.data), len(want))
	}
	wantFields := []receivedField{{"x", 0, 7, 1}, {"y", 4, 7, 1}, {"z", 8, 7, 1}, {"intensity", 13, 7, 1}, {"ring", 17, 4, 1}}
	if len(c.fields) != len(wantFields) {
		t.Fatalf("fields %+v, want %+v", c.fields, wantFields)
	}
	for i := range wantFields {
		if c.fields[i] != wantFields[i] {
			t.Errorf("field %d = %+v, want %+v", i, c.fields[i], wantFields[i])
		}
	}
	if c.sec != 1700000001 || c.nanosec != 987654321 || c.frameID != "lidar" || c.height != 1 || c.width != n ||
		c.bigEndian || !c.dense || c.pointStep != 19 || c.rowStep != 19*n {
		t.Errorf("header fields: %+v", c)
	}
}

// scanRangeBits and scanIntensityBits are testdata/peer/peer.c's
// scan_range_bits and scan_intensity_bits: the IEEE-754 bits of a test
// LaserScan's ranges[i] and intensities[i] (NaN with a payload, ±Inf, a
// signalling NaN, -0, a subnormal, then normal floats).
func scanRangeBits(i uint32) uint32 {
	special := [6]uint32{0x7fc0beef, 0x7f800000, 0xff800000, 0x7f800001, 0x80000000, 0x00000001}
	if i%8 < 6 {
		return special[i%8]
	}
	return 0x3f800000 + i*4099
}

func scanIntensityBits(i uint32) uint32 { return 0x42000000 + i*31 }

// receivedScan is a LaserScanView copied out of its callback, floats as
// their bits so that NaNs compare.
type receivedScan struct {
	sec                                int32
	nanosec                            uint32
	frameID                            string
	angleMin, angleMax, angleIncrement uint32
	timeIncrement, scanTime            uint32
	rangeMin, rangeMax                 uint32
	ranges, intensities                []uint32
	stamp                              time.Time
}

func floatBits(fs []float32) []uint32 {
	b := make([]uint32, len(fs))
	for i, f := range fs {
		b[i] = math.Float32bits(f)
	}
	return b
}

func TestSubscribeLaserScanBitExact(t *testing.T) {
	for _, c := range []struct {
		name         string
		n, intensity uint32
	}{
		{"with intensities", 1081, 1081}, // a Hokuyo UST's 270° at 0.25°: 8.6 KB, fragmented
		{"without intensities", 720, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := loopbackConfig(t)
			p, err := NewParticipant(cfg, zaptest.NewLogger(t))
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			got := make(chan receivedScan, 1)
			sub, err := p.SubscribeLaserScan("scan", SubscriptionOptions{}, func(v *LaserScanView) {
				r := receivedScan{v.Sec, v.Nanosec, string(v.FrameID),
					math.Float32bits(v.AngleMin), math.Float32bits(v.AngleMax), math.Float32bits(v.AngleIncrement),
					math.Float32bits(v.TimeIncrement), math.Float32bits(v.ScanTime),
					math.Float32bits(v.RangeMin), math.Float32bits(v.RangeMax),
					floatBits(v.Ranges), floatBits(v.Intensities), v.Stamp()}
				select {
				case got <- r:
				default:
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			startPeer(t, cfg, "pub", "scan", "rt/scan", "besteffort", "20", strconv.Itoa(int(c.n)), strconv.Itoa(int(c.intensity)))
			var r receivedScan
			select {
			case r = <-got:
			case <-time.After(20 * time.Second):
				t.Fatalf("no scan within 20 s (received %d)", sub.Received())
			}
			want := receivedScan{1700000003, 444444444, "laser_frame",
				math.Float32bits(-2.5), math.Float32bits(2.25), math.Float32bits(0.0078125),
				math.Float32bits(0.0001220703125), math.Float32bits(0.125),
				math.Float32bits(0.0625), math.Float32bits(40.5),
				make([]uint32, c.n), make([]uint32, c.intensity), time.Unix(1700000003, 444444444)}
			for i := range want.ranges {
				want.ranges[i] = scanRangeBits(uint32(i))
			}
			for i := range want.intensities {
				want.intensities[i] = scanIntensityBits(uint32(i))
			}
			if len(r.ranges) != len(want.ranges) {
				t.Errorf("%d ranges, want %d", len(r.ranges), len(want.ranges))
			} else {
				for i := range want.ranges {
					if r.ranges[i] != want.ranges[i] {
						t.Errorf("ranges[%d] = %#08x, want %#08x", i, r.ranges[i], want.ranges[i])
						break
					}
				}
			}
			if !reflect.DeepEqual(r.intensities, want.intensities) {
				t.Errorf("intensities differ: got %d values, want %d", len(r.intensities), len(want.intensities))
			}
			if !r.stamp.Equal(want.stamp) {
				t.Errorf("Stamp() = %v, want %v", r.stamp, want.stamp)
			}
			r.ranges, r.intensities, want.ranges, want.intensities = nil, nil, nil, nil
			r.stamp, want.stamp = time.Time{}, time.Time{}
			if !reflect.DeepEqual(r, want) {
				t.Errorf("scan\n got %+v\nwant %+v", r, want)
			}
			if sub.Matched() != 1 {
				t.Errorf("Matched() = %d, want 1", sub.Matched())
			}
		})
	}
}

func TestHandleWriterOnTheWire(t *testing.T) {
	cfg := loopbackConfig(t)
	p, err := NewParticipant(cfg, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	w, err := p.NewHandleWriter(HandleWriterOptions{QoS: QoS{Reliability: Reliable}})
	if err != nil {
		t.Fatal(err)
	}
	frame, err := handles.NewFrameID("lidar_top_front")
	if err != nil {
		t.Fatal(err)
	}
	// A planar scan's handle, then an ordinary cloud's: points.flags
	// crosses as point_flags, and the reused write buffer forgets it.
	planar := handles.Handle{
		Kind: handles.KindPoints, PoolID: 0x01020304, Slot: 7, Generation: 1<<40 + 5, Seq: 1<<33 + 9,
		CaptureNs: 1700000002_250000000, PublishNs: -3, Length: 19 * 1000, Checksum: 0xfedcba9876543210,
		FrameID: frame,
		Points: handles.PointFormat{Count: 1000, Step: 19, X: 0, Y: 4, Z: 8, Intensity: 13,
			Datatype: handles.DatatypeFloat32, Flags: handles.PointsPlanar},
	}
	ordinary := planar
	ordinary.Seq++
	ordinary.Points.Flags = 0
	peer := startPeer(t, cfg, "sub", "slot_handle", "rt/zerohop/handles", "reliable", "2")
	peer.expect("MATCHED")
	waitFor(t, "the handle writer to match the peer", func() bool { return w.Matched() == 1 })
	checkPublication(t, peer, typeSlotHandle, "RELIABLE", 5)
	for _, h := range []*handles.Handle{&planar, &ordinary} {
		if err := w.Publish(h); err != nil {
			t.Fatal(err)
		}
	}
	for _, h := range []*handles.Handle{&planar, &ordinary} {
		raw, err := hex.DecodeString(peer.expect("CDR"))
		if err != nil {
			t.Fatal(err)
		}
		// The layout a ROS build of zerohop_msgs/msg/SlotHandle.msg produces,
		// field by field in .msg order.
		c := newCDR()
		c.u32(1700000002)
		c.u32(250000000)
		c.str("lidar_top_front")
		c.u16(handles.Version)
		c.u8(uint8(h.Kind))
		c.u32(h.PoolID)
		c.u32(h.Slot)
		c.u64(h.Generation)
		c.u64(h.Seq)
		c.u64(uint64(h.PublishNs))
		c.u64(h.Length)
		c.u64(h.Checksum)
		c.u32(0) // width
		c.u32(0) // height
		c.u32(0) // row_step
		c.u8(0)  // encoding
		c.u32(h.Points.Count)
		c.u32(h.Points.Step)
		c.u16(h.Points.X)
		c.u16(h.Points.Y)
		c.u16(h.Points.Z)
		c.u16(h.Points.Intensity)
		c.u8(uint8(h.Points.Datatype))
		c.u8(uint8(h.Points.Flags))
		if !bytes.Equal(raw, c.done()) {
			t.Errorf("seq %d: payload\n got %x\nwant %x", h.Seq, raw, c.b)
		}
		s := fields(peer.expect("SAMPLE"))
		want := map[string]string{
			"sec": "1700000002", "nanosec": "250000000", "frame_id": "lidar_top_front", "version": "1", "kind": "2",
			"pool_id": "16909060", "slot": "7", "generation": strconv.FormatUint(h.Generation, 10),
			"seq": strconv.FormatUint(h.Seq, 10), "publish_time_ns": "-3", "length": "19000",
			"checksum": strconv.FormatUint(h.Checksum, 10), "point_count": "1000", "point_step": "19",
			"offset_x": "0", "offset_y": "4", "offset_z": "8", "offset_intensity": "13", "datatype": "7",
			"point_flags": "1", "width": "0", "height": "0", "row_step": "0", "encoding": "0",
		}
		if h == &ordinary {
			want["point_flags"] = "0"
		}
		for k, v := range want {
			if s[k] != v {
				t.Errorf("seq %d: sample %s = %q, want %q", h.Seq, k, s[k], v)
			}
		}
	}
}

// A cloud whose fields do not fit a view is counted and logged once, and
// the callback never sees it.
func TestPointCloud2WithTooManyFieldsIsSkipped(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	cfg := loopbackConfig(t)
	p, err := NewParticipant(cfg, zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var delivered atomic.Int64
	sub, err := p.SubscribePointCloud2("/points", SubscriptionOptions{}, func(*PointCloud2View) { delivered.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	startPeer(t, cfg, "pub", "cloud", "rt/points", "besteffort", "5", "10", strconv.Itoa(MaxPointFields+1))
	waitFor(t, "two skipped clouds", func() bool { return sub.Skipped() >= 2 })
	if n := delivered.Load(); n != 0 {
		t.Errorf("callback ran %d times", n)
	}
	if n := logs.FilterMessageSnippet("too many fields").Len(); n != 1 {
		t.Errorf("logged %d times, want once", n)
	}
}
