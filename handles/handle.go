package handles

import (
	"encoding/binary"
	"fmt"
	"hash/crc64"
	"strconv"
)

const (
	// Size is the length in bytes of an encoded Handle; every handle
	// datagram is exactly this long.
	Size = 128
	// Version is the wire version written by MarshalTo and the only one
	// Unmarshal accepts, for handles and releases alike.
	Version = 1
	// FrameIDSize is the length of the frame id field.
	FrameIDSize = 16
)

// handleMagic is "ZHHN" (zerohop handle) read as a little-endian uint32.
const handleMagic uint32 = 'Z' | 'H'<<8 | 'H'<<16 | 'N'<<24

// Byte offsets of the handle record; doc.go draws the same table.
const (
	offMagic      = 0
	offVersion    = 4
	offKind       = 6
	offReserved7  = 7
	offPoolID     = 8
	offSlot       = 12
	offGeneration = 16
	offSeq        = 24
	offCapture    = 32
	offPublish    = 40
	offLength     = 48
	offChecksum   = 56
	offFrameID    = 64
	// image section
	offWidth       = 80
	offHeight      = 84
	offRowStep     = 88
	offEncoding    = 92
	offImageRsvd   = 93 // 3 bytes, to 96
	offPointCount  = 96
	offPointStep   = 100
	offOffsetX     = 104
	offOffsetY     = 106
	offOffsetZ     = 108
	offOffsetI     = 110
	offDatatype    = 112
	offPointFlags  = 113
	offPointsRsvd  = 114 // 14 bytes, to Size
	imageRsvdEnd   = offPointCount
	pointsRsvdEnd  = Size
	frameIDEnd     = offFrameID + FrameIDSize
	firstPrintable = 0x20
	lastPrintable  = 0x7e
)

// Kind says what a slot holds.
type Kind uint8

const (
	KindImage  Kind = 1 // camera image; Handle.Image applies
	KindPoints Kind = 2 // LiDAR point cloud; Handle.Points applies
)

func (k Kind) String() string {
	switch k {
	case KindImage:
		return "image"
	case KindPoints:
		return "points"
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Encoding is an image pixel format. The names are those of ROS
// sensor_msgs/image_encodings.
type Encoding uint8

const (
	EncodingRGB8  Encoding = 1
	EncodingBGR8  Encoding = 2
	EncodingMono8 Encoding = 3
	EncodingRGBA8 Encoding = 4
	EncodingBGRA8 Encoding = 5
)

func (e Encoding) String() string {
	switch e {
	case EncodingRGB8:
		return "rgb8"
	case EncodingBGR8:
		return "bgr8"
	case EncodingMono8:
		return "mono8"
	case EncodingRGBA8:
		return "rgba8"
	case EncodingBGRA8:
		return "bgra8"
	}
	return "Encoding(" + strconv.Itoa(int(e)) + ")"
}

// BytesPerPixel returns the size of one pixel, or 0 for an unknown encoding.
func (e Encoding) BytesPerPixel() uint64 {
	switch e {
	case EncodingMono8:
		return 1
	case EncodingRGB8, EncodingBGR8:
		return 3
	case EncodingRGBA8, EncodingBGRA8:
		return 4
	}
	return 0
}

// ParseEncoding maps a ROS encoding name ("rgb8", ...) to an Encoding.
func ParseEncoding(name string) (Encoding, error) {
	for e := EncodingRGB8; e <= EncodingBGRA8; e++ {
		if e.String() == name {
			return e, nil
		}
	}
	return 0, fmt.Errorf("handles: image encoding %q (want rgb8, bgr8, mono8, rgba8 or bgra8): %w", name, ErrEncoding)
}

// Datatype is the type of a point field, numbered as in ROS
// sensor_msgs/PointField. Only DatatypeFloat32 is accepted.
type Datatype uint8

// DatatypeFloat32 is sensor_msgs/PointField.FLOAT32.
const DatatypeFloat32 Datatype = 7

// PointFlags says how a cloud was scanned, beyond its layout.
type PointFlags uint8

const (
	// PointsPlanar: a planar (2D) LiDAR's scan (sensor_msgs/LaserScan):
	// every point lies in the scan plane, and none is ground. A reader
	// that finds obstacles by their height above the ground must not
	// take such a cloud for a 3D one: a scanner mounted lower than its
	// obstacle height would show it no obstacle at all.
	PointsPlanar PointFlags = 1 << 0
	// knownPointFlags are the bits this version defines; the others are
	// reserved (zero).
	knownPointFlags = PointsPlanar
)

// FrameID is a ROS frame id in fixed bytes: printable ASCII (0x20–0x7e),
// NUL-padded; it need not end in a NUL when all 16 bytes are used.
type FrameID [FrameIDSize]byte

// NewFrameID checks s and packs it. It fails with ErrFrameID when s is
// longer than FrameIDSize or holds a byte outside printable ASCII.
func NewFrameID(s string) (FrameID, error) {
	var f FrameID
	if len(s) > FrameIDSize {
		return f, newFieldError(classFrameID, "handle", "frame_id length", uint64(len(s)), "<=", FrameIDSize)
	}
	copy(f[:], s)
	if fe := checkFrameID(f[:]); fe != nil {
		return FrameID{}, fe
	}
	return f, nil
}

// String returns the id without its NUL padding. It allocates; call it off
// the per-frame path (e.g. when filling a ROS header).
func (f FrameID) String() string {
	n := 0
	for n < len(f) && f[n] != 0 {
		n++
	}
	return string(f[:n])
}

// checkFrameID enforces printable ASCII, then only NULs.
func checkFrameID(b []byte) *FieldError {
	i := 0
	for ; i < len(b) && b[i] != 0; i++ {
		if b[i] < firstPrintable || b[i] > lastPrintable {
			return newFieldError(classFrameID, "handle", frameIDByteName(i), uint64(b[i]), "", 0)
		}
	}
	for ; i < len(b); i++ {
		if b[i] != 0 {
			return newFieldError(classFrameID, "handle", frameIDByteName(i), uint64(b[i]), "==", 0)
		}
	}
	return nil
}

// frameIDByteName names byte i of the frame id from constant strings, so
// that a rejection costs one allocation (its FieldError) like any other.
func frameIDByteName(i int) string {
	names := [FrameIDSize]string{
		"frame_id[0]", "frame_id[1]", "frame_id[2]", "frame_id[3]",
		"frame_id[4]", "frame_id[5]", "frame_id[6]", "frame_id[7]",
		"frame_id[8]", "frame_id[9]", "frame_id[10]", "frame_id[11]",
		"frame_id[12]", "frame_id[13]", "frame_id[14]", "frame_id[15]",
	}
	return names[i]
}

// ImageFormat describes the pixels of an image payload: Height rows of
// RowStep bytes each, starting at the slot's first byte.
type ImageFormat struct {
	Width    uint32   // pixels per row, ≥ 1
	Height   uint32   // rows, ≥ 1
	RowStep  uint32   // bytes per row including padding, ≥ Width × Encoding.BytesPerPixel()
	Encoding Encoding // pixel format
}

// PointFormat describes a point-cloud payload: Count points of Step bytes
// each, starting at the slot's first byte. The offsets name where x, y, z
// and intensity lie inside one point, each a little-endian value of
// Datatype. Offsets and Step need not be multiples of 4: a reader must not
// assume aligned float32 loads.
type PointFormat struct {
	Count     uint32   // number of points; 0 is a valid (empty) cloud
	Step      uint32   // bytes per point; every offset + 4 ≤ Step
	X         uint16   // byte offset of x within a point
	Y         uint16   // byte offset of y
	Z         uint16   // byte offset of z
	Intensity uint16   // byte offset of intensity
	Datatype  Datatype // type of x, y, z and intensity; DatatypeFloat32
	Flags     PointFlags
}

// Handle announces one filled slot. Its payload is the first Length bytes
// of slot Slot of pool PoolID, valid while the slot's generation equals
// Generation. The section for the other kind (Image for points, Points
// for images) must be zero.
type Handle struct {
	Kind       Kind
	PoolID     uint32
	Slot       uint32 // slot index within the pool
	Generation uint64 // the slot's reuse count when it was filled
	Seq        uint64 // per-camera frame sequence number
	CaptureNs  int64  // capture time, UNIX ns (ROS header stamp)
	PublishNs  int64  // publish time, CLOCK_MONOTONIC ns of the camera host (latency)
	Length     uint64 // payload bytes from the start of the slot
	Checksum   uint64 // PayloadChecksum of the payload in test mode; 0 = none
	FrameID    FrameID
	Image      ImageFormat // KindImage only
	Points     PointFormat // KindPoints only
}

// MarshalTo writes h into b, reserved bytes zeroed. It does not validate
// h: the camera is the trusted writer, the receiver validates.
func (h *Handle) MarshalTo(b *[Size]byte) {
	le := binary.LittleEndian
	le.PutUint32(b[offMagic:], handleMagic)
	le.PutUint16(b[offVersion:], Version)
	b[offKind] = byte(h.Kind)
	b[offReserved7] = 0
	le.PutUint32(b[offPoolID:], h.PoolID)
	le.PutUint32(b[offSlot:], h.Slot)
	le.PutUint64(b[offGeneration:], h.Generation)
	le.PutUint64(b[offSeq:], h.Seq)
	le.PutUint64(b[offCapture:], uint64(h.CaptureNs))
	le.PutUint64(b[offPublish:], uint64(h.PublishNs))
	le.PutUint64(b[offLength:], h.Length)
	le.PutUint64(b[offChecksum:], h.Checksum)
	copy(b[offFrameID:frameIDEnd], h.FrameID[:])

	le.PutUint32(b[offWidth:], h.Image.Width)
	le.PutUint32(b[offHeight:], h.Image.Height)
	le.PutUint32(b[offRowStep:], h.Image.RowStep)
	b[offEncoding] = byte(h.Image.Encoding)
	clear(b[offImageRsvd:imageRsvdEnd])

	le.PutUint32(b[offPointCount:], h.Points.Count)
	le.PutUint32(b[offPointStep:], h.Points.Step)
	le.PutUint16(b[offOffsetX:], h.Points.X)
	le.PutUint16(b[offOffsetY:], h.Points.Y)
	le.PutUint16(b[offOffsetZ:], h.Points.Z)
	le.PutUint16(b[offOffsetI:], h.Points.Intensity)
	b[offDatatype] = byte(h.Points.Datatype)
	b[offPointFlags] = byte(h.Points.Flags)
	clear(b[offPointsRsvd:pointsRsvdEnd])
}

// Unmarshal decodes a handle record. It checks what needs no pool
// geometry: length, magic, version, reserved bytes and frame id; use
// Validator.Decode to check the fields against the pools too. On error h
// is left unchanged. Unmarshal allocates nothing unless it fails.
func (h *Handle) Unmarshal(b []byte) error {
	return asError(h.unmarshal(b))
}

func (h *Handle) unmarshal(b []byte) *FieldError {
	if len(b) != Size {
		return newFieldError(classRecordSize, "handle", "size", uint64(len(b)), "==", Size)
	}
	le := binary.LittleEndian
	if m := le.Uint32(b[offMagic:]); m != handleMagic {
		return newFieldError(classBadMagic, "handle", "magic", uint64(m), "==", uint64(handleMagic))
	}
	if v := le.Uint16(b[offVersion:]); v != Version {
		return newFieldError(classBadVersion, "handle", "version", uint64(v), "==", Version)
	}
	if b[offReserved7] != 0 {
		return newFieldError(classReserved, "handle", "reserved[7]", uint64(b[offReserved7]), "==", 0)
	}
	if fe := checkZero(b, offImageRsvd, imageRsvdEnd, "image.reserved"); fe != nil {
		return fe
	}
	if fe := checkZero(b, offPointsRsvd, pointsRsvdEnd, "points.reserved"); fe != nil {
		return fe
	}
	if f := b[offPointFlags]; f&^byte(knownPointFlags) != 0 {
		// knownPointFlags is all low bits, so "at most" names the rule.
		return newFieldError(classReserved, "handle", "points.flags", uint64(f), "<=", uint64(knownPointFlags))
	}
	if fe := checkFrameID(b[offFrameID:frameIDEnd]); fe != nil {
		return fe
	}

	h.Kind = Kind(b[offKind])
	h.PoolID = le.Uint32(b[offPoolID:])
	h.Slot = le.Uint32(b[offSlot:])
	h.Generation = le.Uint64(b[offGeneration:])
	h.Seq = le.Uint64(b[offSeq:])
	h.CaptureNs = int64(le.Uint64(b[offCapture:]))
	h.PublishNs = int64(le.Uint64(b[offPublish:]))
	h.Length = le.Uint64(b[offLength:])
	h.Checksum = le.Uint64(b[offChecksum:])
	copy(h.FrameID[:], b[offFrameID:frameIDEnd])
	h.Image = ImageFormat{
		Width:    le.Uint32(b[offWidth:]),
		Height:   le.Uint32(b[offHeight:]),
		RowStep:  le.Uint32(b[offRowStep:]),
		Encoding: Encoding(b[offEncoding]),
	}
	h.Points = PointFormat{
		Count:     le.Uint32(b[offPointCount:]),
		Step:      le.Uint32(b[offPointStep:]),
		X:         le.Uint16(b[offOffsetX:]),
		Y:         le.Uint16(b[offOffsetY:]),
		Z:         le.Uint16(b[offOffsetZ:]),
		Intensity: le.Uint16(b[offOffsetI:]),
		Datatype:  Datatype(b[offDatatype]),
		Flags:     PointFlags(b[offPointFlags]),
	}
	return nil
}

func checkZero(b []byte, from, to int, field string) *FieldError {
	for _, c := range b[from:to] {
		if c != 0 {
			return newFieldError(classReserved, "handle", field, uint64(c), "==", 0)
		}
	}
	return nil
}

// PayloadChecksum is the checksum carried in Handle.Checksum in test mode:
// CRC-64/ECMA (hash/crc64) of the payload, with 0 mapped to 1 because 0
// means "no checksum". It allocates nothing.
func PayloadChecksum(payload []byte) uint64 {
	c := crc64.Checksum(payload, crc64.MakeTable(crc64.ECMA))
	if c == 0 {
		return 1
	}
	return c
}
