package voxel

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Cloud describes point data in place: Count points, Step bytes apart, each
// holding little-endian float32 fields at the given byte offsets. It is a view
// of memory owned by someone else (a pinned slot, a file buffer); nothing
// copies it. OffI is -1 when the cloud has no intensity (it then reads as 0).
type Cloud struct {
	Data                   []byte
	Count, Step            int
	OffX, OffY, OffZ, OffI int
}

// XYZIStep is the point step of the standard XYZI layout (KITTI .bin, and
// PCL's PointXYZI without padding): float32 x, y, z, intensity.
const XYZIStep = 16

// XYZI returns a view of count points in the standard layout: x, y, z and
// intensity as little-endian float32 at offsets 0, 4, 8 and 12 of a 16-byte
// step. Call Validate (Run does) to check it against len(data).
func XYZI(data []byte, count int) Cloud {
	return Cloud{Data: data, Count: count, Step: XYZIStep, OffX: 0, OffY: 4, OffZ: 8, OffI: 12}
}

// KITTI returns a view of a KITTI velodyne .bin file's contents: packed
// little-endian float32 x, y, z, reflectance. Its length must be a multiple
// of 16 bytes.
func KITTI(data []byte) (Cloud, error) {
	if len(data)%XYZIStep != 0 {
		return Cloud{}, fmt.Errorf("KITTI cloud: %d bytes is not a whole number of %d-byte points (float32 x, y, z, reflectance)", len(data), XYZIStep)
	}
	return XYZI(data, len(data)/XYZIStep), nil
}

// Validate checks that every field of every point lies inside Data and that
// no two fields overlap, so that reading the cloud can never go out of
// bounds whatever the view's numbers came from (a received handle).
func (c Cloud) Validate() error {
	if c.Count < 0 {
		return fmt.Errorf("cloud: point count %d is negative", c.Count)
	}
	if c.Step <= 0 {
		return fmt.Errorf("cloud: point step %d must be positive", c.Step)
	}
	// Count*Step <= len(Data), written so that it cannot overflow.
	if c.Count > 0 && c.Count > len(c.Data)/c.Step {
		return fmt.Errorf("cloud: %d points of %d bytes need %d bytes, data holds %d",
			c.Count, c.Step, mulSat(c.Count, c.Step), len(c.Data))
	}
	fields := [4]struct {
		name string
		off  int
	}{{"x", c.OffX}, {"y", c.OffY}, {"z", c.OffZ}, {"intensity", c.OffI}}
	for i, f := range fields {
		if f.name == "intensity" && f.off == -1 {
			continue
		}
		if f.off < 0 || f.off > c.Step-4 {
			return fmt.Errorf("cloud: %s field at byte offset %d does not fit a %d-byte point step", f.name, f.off, c.Step)
		}
		for _, g := range fields[:i] {
			if f.off < g.off+4 && g.off < f.off+4 {
				return fmt.Errorf("cloud: %s field at offset %d overlaps %s field at offset %d", f.name, f.off, g.name, g.off)
			}
		}
	}
	return nil
}

// mulSat returns a*b for non-negative a and b, saturating at MaxInt.
func mulSat(a, b int) int {
	if b != 0 && a > math.MaxInt/b {
		return math.MaxInt
	}
	return a * b
}

// Point is one filtered point: a voxel's centroid and mean intensity. With
// four float32 fields it has the XYZI/KITTI layout.
type Point struct {
	X, Y, Z, I float32
}

// Points is a caller-owned output buffer, reused across calls. P's length is
// the number of points of the last result; its capacity is fixed by
// NewPoints and never grows (Run returns an error instead).
type Points struct {
	P []Point
	// Top holds each voxel's top when a Filter made P: the highest z of
	// the voxel's points in the robot frame of Mount (Transform.Apply's z
	// of each point, in float64, the largest rounded once to float32; a
	// zero is +0).
	// A centroid lies up to half a leaf below its voxel's top, so the
	// BEV's height channel is drawn from Top. Empty when P did not come
	// from a Filter (BEV.Fill then takes each point as its own top).
	Top []float32
	// Mount is the Filter's Config.Mount that Top was measured with.
	Mount Mount
}

// NewPoints returns an empty buffer for up to capacity points and their
// tops.
func NewPoints(capacity int) *Points {
	return &Points{P: make([]Point, 0, capacity), Top: make([]float32, 0, capacity)}
}

// AppendKITTI appends the points to dst in KITTI .bin layout (packed
// little-endian float32 x, y, z, intensity) and returns the extended slice.
func (p *Points) AppendKITTI(dst []byte) []byte {
	for _, q := range p.P {
		dst = binary.LittleEndian.AppendUint32(dst, math.Float32bits(q.X))
		dst = binary.LittleEndian.AppendUint32(dst, math.Float32bits(q.Y))
		dst = binary.LittleEndian.AppendUint32(dst, math.Float32bits(q.Z))
		dst = binary.LittleEndian.AppendUint32(dst, math.Float32bits(q.I))
	}
	return dst
}

// pointReader reads float32 fields of a validated Cloud. Its fields are
// copied out of the Cloud so that the hot loops keep them in registers; std
// marks the standard XYZI layout, whose constant offsets let the compiler
// drop the per-field bounds checks.
type pointReader struct {
	data                   []byte
	step                   int
	offX, offY, offZ, offI int
	std                    bool
}

func newPointReader(c Cloud) pointReader {
	return pointReader{data: c.Data, step: c.Step, offX: c.OffX, offY: c.OffY, offZ: c.OffZ, offI: c.OffI,
		std: c.Step == XYZIStep && c.OffX == 0 && c.OffY == 4 && c.OffZ == 8 && c.OffI == 12}
}

// blockSize points are decoded at a time into a pointBlock on the stack, so
// that the kernels' arithmetic runs on plain float32 arrays whatever the
// layout.
const blockSize = 128

type pointBlock [blockSize][4]float32

// read decodes points lo..lo+len(dst)-1 into dst. Invariant: the cloud
// passed Validate and lo+len(dst) <= Count.
func (r *pointReader) read(lo int, dst [][4]float32) {
	if r.std {
		d := r.data[lo*XYZIStep : (lo+len(dst))*XYZIStep]
		for k := range dst {
			p := d[k*XYZIStep : k*XYZIStep+XYZIStep]
			dst[k] = [4]float32{
				math.Float32frombits(binary.LittleEndian.Uint32(p[0:4])),
				math.Float32frombits(binary.LittleEndian.Uint32(p[4:8])),
				math.Float32frombits(binary.LittleEndian.Uint32(p[8:12])),
				math.Float32frombits(binary.LittleEndian.Uint32(p[12:16])),
			}
		}
		return
	}
	for k := range dst {
		dst[k][0], dst[k][1], dst[k][2], dst[k][3] = r.at(lo + k)
	}
}

// at returns point i. Invariant: the cloud passed Validate and i < Count.
func (r *pointReader) at(i int) (x, y, z, in float32) {
	if r.std {
		p := r.data[i*XYZIStep : i*XYZIStep+XYZIStep]
		return math.Float32frombits(binary.LittleEndian.Uint32(p[0:4])),
			math.Float32frombits(binary.LittleEndian.Uint32(p[4:8])),
			math.Float32frombits(binary.LittleEndian.Uint32(p[8:12])),
			math.Float32frombits(binary.LittleEndian.Uint32(p[12:16]))
	}
	b := r.data[i*r.step:]
	x = math.Float32frombits(binary.LittleEndian.Uint32(b[r.offX:]))
	y = math.Float32frombits(binary.LittleEndian.Uint32(b[r.offY:]))
	z = math.Float32frombits(binary.LittleEndian.Uint32(b[r.offZ:]))
	if r.offI >= 0 {
		in = math.Float32frombits(binary.LittleEndian.Uint32(b[r.offI:]))
	}
	return x, y, z, in
}
