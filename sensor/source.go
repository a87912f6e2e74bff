package sensor

import (
	"errors"
	"fmt"
)

// Point layout: PointStep bytes per point, little-endian float32 fields at
// these byte offsets. KITTI .bin files use exactly this layout.
const (
	PointStep            = 16
	PointOffsetX         = 0
	PointOffsetY         = 4
	PointOffsetZ         = 8
	PointOffsetIntensity = 12
)

// Source fills slot memory with the data of one frame. Implementations write
// only into dst[:n] where n is what they report, never past len(dst), and
// return an error (never panic) when dst is too small.
type Source interface {
	// MaxPoints is the largest point count FillPoints can write; a slot needs
	// MaxPoints()*PointStep bytes for the cloud.
	MaxPoints() int
	// MaxImageBytes is the largest image FillImage can write, in bytes
	// (width × height × bytes per pixel); 0 when the source has no images.
	MaxImageBytes() int
	// FillPoints writes the cloud of frame seq into dst, which must hold at
	// least MaxPoints()*PointStep bytes, and returns the number of points.
	FillPoints(seq uint64, dst []byte) (count int, err error)
	// FillImage writes the image of frame seq into dst, which must hold at
	// least MaxImageBytes() bytes, and returns its geometry.
	FillImage(seq uint64, dst []byte) (ImageInfo, error)
	// Frames is the number of frames; 0 means endless.
	Frames() uint64
}

// Planar reports whether src's clouds are a planar (2D) LiDAR's scans:
// every point in the scan plane, none on the ground. A source says so with
// a method Planar() bool; sources without one give 3D clouds.
func Planar(src Source) bool {
	p, ok := src.(interface{ Planar() bool })
	return ok && p.Planar()
}

// Errors callers branch on; they are wrapped with context, so use errors.Is.
var (
	// ErrShortBuffer: dst is smaller than MaxPoints()*PointStep or MaxImageBytes().
	ErrShortBuffer = errors.New("sensor: destination buffer too small")
	// ErrEndOfFrames: seq >= Frames() on a finite source. It ends the stream.
	ErrEndOfFrames = errors.New("sensor: no more frames")
	// ErrNotProvided: the source has no such stream (e.g. a replay directory
	// with point clouds but no images).
	ErrNotProvided = errors.New("sensor: stream not provided by this source")
)

// ImageEncoding names a pixel layout with ROS sensor_msgs/Image names. The
// zero value is not a valid encoding.
type ImageEncoding uint8

// Encodings, all 8 bits per channel.
const (
	EncodingRGB8 ImageEncoding = iota + 1
	EncodingBGR8
	EncodingMono8
)

// String returns the ROS name ("rgb8", "bgr8", "mono8").
func (e ImageEncoding) String() string {
	switch e {
	case EncodingRGB8:
		return "rgb8"
	case EncodingBGR8:
		return "bgr8"
	case EncodingMono8:
		return "mono8"
	}
	return fmt.Sprintf("ImageEncoding(%d)", uint8(e))
}

// BytesPerPixel is 3 for rgb8 and bgr8, 1 for mono8 and 0 for an invalid encoding.
func (e ImageEncoding) BytesPerPixel() int {
	switch e {
	case EncodingRGB8, EncodingBGR8:
		return 3
	case EncodingMono8:
		return 1
	}
	return 0
}

// Valid reports whether e is one of the defined encodings.
func (e ImageEncoding) Valid() bool { return e.BytesPerPixel() != 0 }

// ParseImageEncoding is the inverse of String.
func ParseImageEncoding(s string) (ImageEncoding, error) {
	for _, e := range [...]ImageEncoding{EncodingRGB8, EncodingBGR8, EncodingMono8} {
		if s == e.String() {
			return e, nil
		}
	}
	return 0, fmt.Errorf("image encoding %q: want rgb8, bgr8 or mono8", s)
}

// ImageInfo is the geometry of one written image: Height rows of Step bytes,
// Step = Width × Encoding.BytesPerPixel().
type ImageInfo struct {
	Width, Height, Step int
	Encoding            ImageEncoding
}

// Bytes is the image size, Height × Step.
func (i ImageInfo) Bytes() int { return i.Height * i.Step }

// putPixel stores one colour at dst[0:] in encoding e. dst must hold
// e.BytesPerPixel() bytes.
func putPixel(dst []byte, e ImageEncoding, r, g, b uint8) {
	switch e {
	case EncodingRGB8:
		_ = dst[2]
		dst[0], dst[1], dst[2] = r, g, b
	case EncodingBGR8:
		_ = dst[2]
		dst[0], dst[1], dst[2] = b, g, r
	case EncodingMono8:
		dst[0] = luma(r, g, b)
	}
}

// luma is the ITU-R BT.601 grey value, rounded; every mono8 conversion in
// this package uses it.
func luma(r, g, b uint8) uint8 {
	return uint8((299*uint32(r) + 587*uint32(g) + 114*uint32(b) + 500) / 1000)
}
