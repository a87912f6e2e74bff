package handles

import (
	"encoding/hex"
	"math"
	"testing"
)

// The pools every case is checked against, as a camera would announce them.
var testPools = []Geometry{
	{PoolID: 1, SlotCount: 4, SlotCapacity: 640 * 480 * 3, Kind: KindImage},
	{PoolID: 2, SlotCount: 8, SlotCapacity: 8 << 20, Kind: KindPoints},
}

func newTestValidator(t testing.TB) *Validator {
	t.Helper()
	v, err := NewValidator(testPools...)
	if err != nil {
		t.Fatalf("NewValidator(%v): %v", testPools, err)
	}
	return v
}

func mustFrameID(s string) FrameID {
	f, err := NewFrameID(s)
	if err != nil {
		panic(err)
	}
	return f
}

// handleCase is one row of the table that drives the encoder test, the
// decoder test and the FuzzDecode seed corpus.
type handleCase struct {
	name string
	h    Handle
	// wire is the expected encoding of h in hex, for valid cases. It was
	// written from the layout table in doc.go with Python's struct module
	// (format "<4sHBBIIQQqqQQ16sIIIB3sIIHHHHB15s"), not with this package.
	wire string
	// patch corrupts the encoded record before decoding; nil for none.
	patch func(b []byte) []byte
	err   error  // sentinel Decode must return; nil for a valid handle
	field string // FieldError.Field expected with err
}

// input is the datagram the case feeds to the decoder.
func (c *handleCase) input() []byte {
	var buf [Size]byte
	c.h.MarshalTo(&buf)
	b := buf[:]
	if c.patch != nil {
		b = c.patch(b)
	}
	return b
}

func imageHandle() Handle {
	return Handle{
		Kind: KindImage, PoolID: 1, Slot: 0, Generation: 1, Seq: 1,
		CaptureNs: 1_700_000_000_123_456_789, PublishNs: 5_000_000_000,
		Length: 921600, FrameID: mustFrameID("camera"),
		Image: ImageFormat{Width: 640, Height: 480, RowStep: 1920, Encoding: EncodingRGB8},
	}
}

func pointsHandle() Handle {
	return Handle{
		Kind: KindPoints, PoolID: 2, Slot: 0, Generation: 7, Seq: 100,
		CaptureNs: 1_700_000_000_500_000_000, PublishNs: 5_100_000_000,
		Length: 16000, FrameID: mustFrameID("lidar"),
		Points: PointFormat{Count: 1000, Step: 16, X: 0, Y: 4, Z: 8, Intensity: 12, Datatype: DatatypeFloat32},
	}
}

func image(edit func(h *Handle)) Handle {
	h := imageHandle()
	edit(&h)
	return h
}

func points(edit func(h *Handle)) Handle {
	h := pointsHandle()
	edit(&h)
	return h
}

func setByte(off int, v byte) func([]byte) []byte {
	return func(b []byte) []byte { b[off] = v; return b }
}

func handleCases() []handleCase {
	return []handleCase{
		// Valid handles.
		{
			name: "image rgb8 640x480 packed",
			h:    imageHandle(),
			wire: "5a48484e010001000100000000000000" +
				"01000000000000000100000000000000" +
				"15cd853dfe9c971700f2052a01000000" +
				"00100e00000000000000000000000000" +
				"63616d65726100000000000000000000" +
				"80020000e00100008007000001000000" +
				"00000000000000000000000000000000" +
				"00000000000000000000000000000000",
		},
		{
			name: "image mono8 with row padding in the last slot, 16-byte frame id",
			h: Handle{
				Kind: KindImage, PoolID: 1, Slot: 3, Generation: math.MaxUint64, Seq: 42,
				CaptureNs: 1_700_000_001_000_000_000, PublishNs: 5_033_000_000,
				Length: 648 * 480, FrameID: mustFrameID("cam_left_optical"),
				Image: ImageFormat{Width: 640, Height: 480, RowStep: 648, Encoding: EncodingMono8},
			},
			wire: "5a48484e010001000100000003000000" +
				"ffffffffffffffff2a00000000000000" +
				"00cac471fe9c9717407cfd2b01000000" +
				"00bf0400000000000000000000000000" +
				"63616d5f6c6566745f6f70746963616c" +
				"80020000e00100008802000003000000" +
				"00000000000000000000000000000000" +
				"00000000000000000000000000000000",
		},
		{
			name: "image bgra8 with checksum, empty frame id, negative publish time",
			h: Handle{
				Kind: KindImage, PoolID: 1, Slot: 2, Generation: 0x0102030405060708, Seq: 0x1112131415161718,
				CaptureNs: 0x2122232425262728, PublishNs: -2,
				Length: 307200, Checksum: 0x0123456789abcdef,
				Image: ImageFormat{Width: 320, Height: 240, RowStep: 1280, Encoding: EncodingBGRA8},
			},
			wire: "5a48484e010001000100000002000000" +
				"08070605040302011817161514131211" +
				"2827262524232221feffffffffffffff" +
				"00b0040000000000efcdab8967452301" +
				"00000000000000000000000000000000" +
				"40010000f00000000005000005000000" +
				"00000000000000000000000000000000" +
				"00000000000000000000000000000000",
		},
		{
			name: "points xyzi float32 packed",
			h:    pointsHandle(),
			wire: "5a48484e010002000200000000000000" +
				"07000000000000006400000000000000" +
				"0065f753fe9c971700d3fb2f01000000" +
				"803e0000000000000000000000000000" +
				"6c696461720000000000000000000000" +
				"00000000000000000000000000000000" +
				"e8030000100000000000040008000c00" +
				"07000000000000000000000000000000",
		},
		{
			name: "points ouster layout in the last slot",
			h: Handle{
				Kind: KindPoints, PoolID: 2, Slot: 7, Generation: 9, Seq: 101,
				CaptureNs: 1_700_000_000_600_000_000, PublishNs: 5_200_000_000,
				Length: 131072 * 48, FrameID: mustFrameID("os_sensor"),
				Points: PointFormat{Count: 131072, Step: 48, X: 0, Y: 4, Z: 8, Intensity: 16, Datatype: DatatypeFloat32},
			},
			wire: "5a48484e010002000200000007000000" +
				"09000000000000006500000000000000" +
				"0046ed59fe9c971700b4f13501000000" +
				"00006000000000000000000000000000" +
				"6f735f73656e736f7200000000000000" +
				"00000000000000000000000000000000" +
				"00000200300000000000040008001000" +
				"07000000000000000000000000000000",
		},
		{
			name: "points planar scan",
			h: Handle{
				Kind: KindPoints, PoolID: 2, Slot: 1, Generation: 3, Seq: 102,
				CaptureNs: 1_700_000_000_700_000_000, PublishNs: 5_300_000_000,
				Length: 720 * 16, FrameID: mustFrameID("base_scan"),
				Points: PointFormat{Count: 720, Step: 16, X: 0, Y: 4, Z: 8, Intensity: 12, Datatype: DatatypeFloat32, Flags: PointsPlanar},
			},
			wire: "5a48484e010002000200000001000000" +
				"03000000000000006600000000000000" +
				"0027e35ffe9c97170095e73b01000000" +
				"002d0000000000000000000000000000" +
				"626173655f7363616e00000000000000" +
				"00000000000000000000000000000000" +
				"d0020000100000000000040008000c00" +
				"07010000000000000000000000000000",
		},
		{
			name: "points empty cloud",
			h: Handle{
				Kind: KindPoints, PoolID: 2, Slot: 1, Generation: 3, Seq: 102,
				CaptureNs: 1_700_000_000_700_000_000, PublishNs: 5_300_000_000,
				Length: 0, FrameID: mustFrameID("lidar"),
				Points: PointFormat{Count: 0, Step: 16, X: 0, Y: 4, Z: 8, Intensity: 12, Datatype: DatatypeFloat32},
			},
			wire: "5a48484e010002000200000001000000" +
				"03000000000000006600000000000000" +
				"0027e35ffe9c97170095e73b01000000" +
				"00000000000000000000000000000000" +
				"6c696461720000000000000000000000" +
				"00000000000000000000000000000000" +
				"00000000100000000000040008000c00" +
				"07000000000000000000000000000000",
		},

		// Record size.
		{name: "empty datagram", h: imageHandle(), patch: func(b []byte) []byte { return b[:0] }, err: ErrRecordSize, field: "size"},
		{name: "record one byte short", h: imageHandle(), patch: func(b []byte) []byte { return b[:Size-1] }, err: ErrRecordSize, field: "size"},
		{name: "record one byte long", h: imageHandle(), patch: func(b []byte) []byte { return append(b, 0) }, err: ErrRecordSize, field: "size"},
		{name: "release-sized record", h: imageHandle(), patch: func(b []byte) []byte { return b[:ReleaseSize] }, err: ErrRecordSize, field: "size"},

		// Magic and version.
		{name: "release magic in a handle record", h: imageHandle(), patch: func(b []byte) []byte { b[2], b[3] = 'R', 'L'; return b }, err: ErrBadMagic, field: "magic"},
		{name: "byte-swapped magic", h: imageHandle(), patch: func(b []byte) []byte { b[0], b[1], b[2], b[3] = b[3], b[2], b[1], b[0]; return b }, err: ErrBadMagic, field: "magic"},
		{name: "all-zero record", h: Handle{}, patch: func(b []byte) []byte { clear(b); return b }, err: ErrBadMagic, field: "magic"},
		{name: "version 0", h: imageHandle(), patch: setByte(4, 0), err: ErrBadVersion, field: "version"},
		{name: "version 2", h: imageHandle(), patch: setByte(4, 2), err: ErrBadVersion, field: "version"},
		{name: "version 1 written big-endian", h: imageHandle(), patch: func(b []byte) []byte { b[4], b[5] = 0, 1; return b }, err: ErrBadVersion, field: "version"},

		// Reserved bytes and the unused section.
		{name: "reserved byte 7 set", h: imageHandle(), patch: setByte(7, 1), err: ErrReserved, field: "reserved[7]"},
		{name: "image reserved byte 95 set", h: imageHandle(), patch: setByte(95, 0x80), err: ErrReserved, field: "image.reserved"},
		{name: "points reserved byte 114 set", h: pointsHandle(), patch: setByte(114, 1), err: ErrReserved, field: "points.reserved"},
		{name: "points flag bit 1 (undefined) set", h: pointsHandle(), patch: setByte(113, 2), err: ErrReserved, field: "points.flags"},
		{name: "points flags all set", h: pointsHandle(), patch: setByte(113, 0xff), err: ErrReserved, field: "points.flags"},
		{name: "points reserved byte 127 set", h: pointsHandle(), patch: setByte(127, 1), err: ErrReserved, field: "points.reserved"},
		{name: "image handle with a point count", h: image(func(h *Handle) { h.Points.Count = 5 }), err: ErrReserved, field: "points.count"},
		{name: "image handle with a point datatype", h: image(func(h *Handle) { h.Points.Datatype = DatatypeFloat32 }), err: ErrReserved, field: "points.datatype"},
		{name: "image handle marked planar", h: image(func(h *Handle) { h.Points.Flags = PointsPlanar }), err: ErrReserved, field: "points.flags"},
		{name: "points handle with an image width", h: points(func(h *Handle) { h.Image.Width = 640 }), err: ErrReserved, field: "image.width"},
		{name: "points handle with an image encoding", h: points(func(h *Handle) { h.Image.Encoding = EncodingMono8 }), err: ErrReserved, field: "image.encoding"},

		// Frame id.
		{name: "frame id with a newline", h: image(func(h *Handle) { h.FrameID[2] = '\n' }), err: ErrFrameID, field: "frame_id[2]"},
		{name: "frame id with a byte above ASCII", h: image(func(h *Handle) { h.FrameID[0] = 0xc3 }), err: ErrFrameID, field: "frame_id[0]"},
		{name: "frame id with DEL", h: image(func(h *Handle) { h.FrameID = mustFrameID("0123456789abcde"); h.FrameID[15] = 0x7f }), err: ErrFrameID, field: "frame_id[15]"},
		{name: "frame id with text after its NUL", h: image(func(h *Handle) { h.FrameID[7] = 'x' }), err: ErrFrameID, field: "frame_id[7]"},
		{name: "frame id starting with NUL then text", h: image(func(h *Handle) { h.FrameID[0] = 0 }), err: ErrFrameID, field: "frame_id[1]"},

		// Pool.
		{name: "pool id 0", h: image(func(h *Handle) { h.PoolID = 0 }), err: ErrUnknownPool, field: "pool_id"},
		{name: "pool id 3", h: image(func(h *Handle) { h.PoolID = 3 }), err: ErrUnknownPool, field: "pool_id"},
		{name: "pool id max", h: points(func(h *Handle) { h.PoolID = math.MaxUint32 }), err: ErrUnknownPool, field: "pool_id"},

		// Kind.
		{name: "kind 0", h: image(func(h *Handle) { h.Kind = 0 }), err: ErrKind, field: "kind"},
		{name: "kind 3", h: image(func(h *Handle) { h.Kind = 3 }), err: ErrKind, field: "kind"},
		{name: "kind 255", h: points(func(h *Handle) { h.Kind = 255 }), err: ErrKind, field: "kind"},
		{name: "image handle on the points pool", h: image(func(h *Handle) { h.PoolID = 2 }), err: ErrKind, field: "kind"},
		{name: "points handle on the image pool", h: points(func(h *Handle) { h.PoolID = 1 }), err: ErrKind, field: "kind"},

		// Encoding and datatype.
		{name: "image encoding 0", h: image(func(h *Handle) { h.Image.Encoding = 0 }), err: ErrEncoding, field: "image.encoding"},
		{name: "image encoding 6", h: image(func(h *Handle) { h.Image.Encoding = 6 }), err: ErrEncoding, field: "image.encoding"},
		{name: "image encoding 255", h: image(func(h *Handle) { h.Image.Encoding = 255 }), err: ErrEncoding, field: "image.encoding"},
		{name: "point datatype 0", h: points(func(h *Handle) { h.Points.Datatype = 0 }), err: ErrEncoding, field: "points.datatype"},
		{name: "point datatype FLOAT64", h: points(func(h *Handle) { h.Points.Datatype = 8 }), err: ErrEncoding, field: "points.datatype"},
		{name: "point datatype INT8", h: points(func(h *Handle) { h.Points.Datatype = 1 }), err: ErrEncoding, field: "points.datatype"},

		// Slot index.
		{name: "image slot equal to slot count", h: image(func(h *Handle) { h.Slot = 4 }), err: ErrIndexRange, field: "slot"},
		{name: "image slot max", h: image(func(h *Handle) { h.Slot = math.MaxUint32 }), err: ErrIndexRange, field: "slot"},
		{name: "points slot equal to slot count", h: points(func(h *Handle) { h.Slot = 8 }), err: ErrIndexRange, field: "slot"},

		// Payload length.
		{name: "image length one past slot capacity", h: image(func(h *Handle) { h.Length = 640*480*3 + 1 }), err: ErrLength, field: "length"},
		{name: "image length max", h: image(func(h *Handle) { h.Length = math.MaxUint64 }), err: ErrLength, field: "length"},
		{name: "points length one past slot capacity", h: points(func(h *Handle) { h.Length = 8<<20 + 1 }), err: ErrLength, field: "length"},

		// Image geometry.
		{name: "image width 0", h: image(func(h *Handle) { h.Image.Width = 0 }), err: ErrGeometry, field: "image.width"},
		{name: "image height 0", h: image(func(h *Handle) { h.Image.Height = 0 }), err: ErrGeometry, field: "image.height"},
		{name: "row step one below width times 3", h: image(func(h *Handle) { h.Image.RowStep = 1919 }), err: ErrGeometry, field: "image.row_step"},
		{name: "rgba8 with a row step sized for rgb8", h: image(func(h *Handle) { h.Image.Encoding = EncodingRGBA8 }), err: ErrGeometry, field: "image.row_step"},
		{name: "rows end one byte past length", h: image(func(h *Handle) { h.Length = 921599 }), err: ErrGeometry, field: "image.row_step*image.height"},
		{name: "row padding not counted in length", h: image(func(h *Handle) {
			h.Image = ImageFormat{Width: 640, Height: 480, RowStep: 648, Encoding: EncodingMono8}
			h.Length = 640 * 480
		}), err: ErrGeometry, field: "image.row_step*image.height"},
		{name: "row step and height at max", h: image(func(h *Handle) { h.Image.RowStep = math.MaxUint32; h.Image.Height = math.MaxUint32 }), err: ErrGeometry, field: "image.row_step*image.height"},
		{name: "width at max", h: image(func(h *Handle) { h.Image.Width = math.MaxUint32 }), err: ErrGeometry, field: "image.row_step"},

		// Point geometry.
		{name: "point step 0", h: points(func(h *Handle) { h.Points.Step = 0 }), err: ErrGeometry, field: "points.offset_x+4"},
		{name: "y offset past point step", h: points(func(h *Handle) { h.Points.Y = 13 }), err: ErrGeometry, field: "points.offset_y+4"},
		{name: "z offset at point step", h: points(func(h *Handle) { h.Points.Z = 16 }), err: ErrGeometry, field: "points.offset_z+4"},
		{name: "intensity offset max", h: points(func(h *Handle) { h.Points.Intensity = math.MaxUint16 }), err: ErrGeometry, field: "points.offset_intensity+4"},
		{name: "points end one step past length", h: points(func(h *Handle) { h.Points.Count = 1001 }), err: ErrGeometry, field: "points.count*points.point_step"},
		{name: "point count and step at max", h: points(func(h *Handle) { h.Points.Count = math.MaxUint32; h.Points.Step = math.MaxUint32 }), err: ErrGeometry, field: "points.count*points.point_step"},
	}
}

// releaseCase is one row of the table that drives the release encoder and
// decoder tests and the FuzzRelease seed corpus.
type releaseCase struct {
	name  string
	r     Release
	wire  string // expected encoding in hex (Python struct "<4sHHIIQ"), valid cases
	patch func(b []byte) []byte
	err   error
	field string
}

func (c *releaseCase) input() []byte {
	var buf [ReleaseSize]byte
	c.r.MarshalTo(&buf)
	b := buf[:]
	if c.patch != nil {
		b = c.patch(b)
	}
	return b
}

func releaseCases() []releaseCase {
	imageRelease := Release{PoolID: 1, Slot: 3, Generation: 7}
	return []releaseCase{
		{name: "release of image slot", r: imageRelease, wire: "5a48524c010000000100000003000000" + "0700000000000000"},
		{name: "release of last points slot, max generation", r: Release{PoolID: 2, Slot: 7, Generation: math.MaxUint64}, wire: "5a48524c010000000200000007000000" + "ffffffffffffffff"},

		{name: "empty datagram", r: imageRelease, patch: func(b []byte) []byte { return b[:0] }, err: ErrRecordSize, field: "size"},
		{name: "record one byte short", r: imageRelease, patch: func(b []byte) []byte { return b[:ReleaseSize-1] }, err: ErrRecordSize, field: "size"},
		{name: "record one byte long", r: imageRelease, patch: func(b []byte) []byte { return append(b, 0) }, err: ErrRecordSize, field: "size"},
		{name: "handle-sized record", r: imageRelease, patch: func(b []byte) []byte { return append(b, make([]byte, Size-ReleaseSize)...) }, err: ErrRecordSize, field: "size"},
		{name: "handle magic in a release record", r: imageRelease, patch: func(b []byte) []byte { b[2], b[3] = 'H', 'N'; return b }, err: ErrBadMagic, field: "magic"},
		{name: "version 2", r: imageRelease, patch: setByte(4, 2), err: ErrBadVersion, field: "version"},
		{name: "reserved byte 7 set", r: imageRelease, patch: setByte(7, 1), err: ErrReserved, field: "reserved"},
		{name: "unknown pool", r: Release{PoolID: 3, Slot: 0, Generation: 1}, err: ErrUnknownPool, field: "pool_id"},
		{name: "slot equal to slot count", r: Release{PoolID: 1, Slot: 4, Generation: 1}, err: ErrIndexRange, field: "slot"},
		{name: "slot max", r: Release{PoolID: 2, Slot: math.MaxUint32, Generation: 1}, err: ErrIndexRange, field: "slot"},
	}
}

func mustHex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatalf("bad hex in case table: %v", err)
	}
	return b
}
