package handles

import (
	"fmt"
	"sync/atomic"
)

// MaxPools is the number of pools one Validator knows.
const MaxPools = 8

// Geometry is what the camera announces about one pool at connect.
type Geometry struct {
	PoolID       uint32
	SlotCount    uint32 // slots in the pool, ≥ 1
	SlotCapacity uint64 // payload bytes per slot, ≥ 1
	Kind         Kind   // what every slot of the pool holds
}

// Validator checks received handles and releases against the pools
// announced at connect and counts every outcome.
//
// The pool table is fixed by NewValidator; all methods are safe for
// concurrent use. A record that is accepted allocates nothing; a rejected
// one allocates its *FieldError.
type Validator struct {
	pools  [MaxPools]Geometry
	npools int

	handles  atomic.Uint64
	releases atomic.Uint64
	rejected [numClasses]atomic.Uint64
}

// NewValidator returns a Validator for up to MaxPools pools with distinct
// ids. It fails with ErrPoolConfig on a pool with an unknown kind, no
// slots or zero capacity.
func NewValidator(pools ...Geometry) (*Validator, error) {
	if len(pools) > MaxPools {
		return nil, fmt.Errorf("handles: %d pools, at most %d: %w", len(pools), MaxPools, ErrPoolConfig)
	}
	v := &Validator{npools: len(pools)}
	for i, g := range pools {
		switch {
		case g.Kind != KindImage && g.Kind != KindPoints:
			return nil, fmt.Errorf("handles: pool %d: kind %v: %w", g.PoolID, g.Kind, ErrPoolConfig)
		case g.SlotCount == 0:
			return nil, fmt.Errorf("handles: pool %d: slot count 0: %w", g.PoolID, ErrPoolConfig)
		case g.SlotCapacity == 0:
			return nil, fmt.Errorf("handles: pool %d: slot capacity 0: %w", g.PoolID, ErrPoolConfig)
		}
		for _, prev := range pools[:i] {
			if prev.PoolID == g.PoolID {
				return nil, fmt.Errorf("handles: pool id %d announced twice: %w", g.PoolID, ErrPoolConfig)
			}
		}
		v.pools[i] = g
	}
	return v, nil
}

// Pool returns the geometry of the pool with this id.
func (v *Validator) Pool(id uint32) (Geometry, bool) {
	if g := v.pool(id); g != nil {
		return *g, true
	}
	return Geometry{}, false
}

func (v *Validator) pool(id uint32) *Geometry {
	for i := range v.pools[:v.npools] {
		if v.pools[i].PoolID == id {
			return &v.pools[i]
		}
	}
	return nil
}

// Decode unmarshals b into h and validates it. On error h is left
// unchanged. This is the receive path: every outcome is counted.
func (v *Validator) Decode(h *Handle, b []byte) error {
	var t Handle
	fe := t.unmarshal(b)
	if fe == nil {
		fe = v.validate(&t)
	}
	if fe != nil {
		v.rejected[fe.class].Add(1)
		return fe
	}
	*h = t
	v.handles.Add(1)
	return nil
}

// Validate checks a decoded handle against its pool (see the package doc
// for the list of checks) and counts the outcome.
func (v *Validator) Validate(h *Handle) error {
	if fe := v.validate(h); fe != nil {
		v.rejected[fe.class].Add(1)
		return fe
	}
	v.handles.Add(1)
	return nil
}

// validate works in uint64: every product below is of two uint32 values
// (or a uint32 and a bytes-per-pixel ≤ 4) and cannot overflow.
func (v *Validator) validate(h *Handle) *FieldError {
	if h.Kind != KindImage && h.Kind != KindPoints {
		return newFieldError(classKind, "handle", "kind", uint64(h.Kind), "", 0)
	}
	g := v.pool(h.PoolID)
	if g == nil {
		return newFieldError(classUnknownPool, "handle", "pool_id", uint64(h.PoolID), "", 0)
	}
	if h.Kind != g.Kind {
		return newFieldError(classKind, "handle", "kind", uint64(h.Kind), "==", uint64(g.Kind))
	}
	if h.Slot >= g.SlotCount {
		return newFieldError(classIndexRange, "handle", "slot", uint64(h.Slot), "<", uint64(g.SlotCount))
	}
	if h.Length > g.SlotCapacity {
		return newFieldError(classLength, "handle", "length", h.Length, "<=", g.SlotCapacity)
	}
	// Unmarshal checked the frame id already; handles passed in process
	// (composed mode) have not been.
	if fe := checkFrameID(h.FrameID[:]); fe != nil {
		return fe
	}
	if h.Kind == KindImage {
		return validateImage(h)
	}
	return validatePoints(h)
}

func validateImage(h *Handle) *FieldError {
	im := &h.Image
	bpp := im.Encoding.BytesPerPixel()
	if bpp == 0 {
		return newFieldError(classEncoding, "handle", "image.encoding", uint64(im.Encoding), "", 0)
	}
	if h.Points != (PointFormat{}) {
		return unusedPointsError(&h.Points)
	}
	if im.Width == 0 {
		return newFieldError(classGeometry, "handle", "image.width", 0, ">=", 1)
	}
	if im.Height == 0 {
		return newFieldError(classGeometry, "handle", "image.height", 0, ">=", 1)
	}
	if minStep := uint64(im.Width) * bpp; uint64(im.RowStep) < minStep {
		return newFieldError(classGeometry, "handle", "image.row_step", uint64(im.RowStep), ">=", minStep)
	}
	if n := uint64(im.RowStep) * uint64(im.Height); n > h.Length {
		return newFieldError(classGeometry, "handle", "image.row_step*image.height", n, "<=", h.Length)
	}
	return nil
}

func validatePoints(h *Handle) *FieldError {
	p := &h.Points
	if p.Datatype != DatatypeFloat32 {
		return newFieldError(classEncoding, "handle", "points.datatype", uint64(p.Datatype), "==", uint64(DatatypeFloat32))
	}
	if h.Image != (ImageFormat{}) {
		return unusedImageError(&h.Image)
	}
	if p.Flags&^knownPointFlags != 0 { // as Unmarshal, for handles passed in-process
		return newFieldError(classReserved, "handle", "points.flags", uint64(p.Flags), "<=", uint64(knownPointFlags))
	}
	step := uint64(p.Step)
	for _, f := range [...]struct {
		name string
		off  uint16
	}{{"points.offset_x+4", p.X}, {"points.offset_y+4", p.Y}, {"points.offset_z+4", p.Z}, {"points.offset_intensity+4", p.Intensity}} {
		if end := uint64(f.off) + 4; end > step {
			return newFieldError(classGeometry, "handle", f.name, end, "<=", step)
		}
	}
	if n := uint64(p.Count) * step; n > h.Length {
		return newFieldError(classGeometry, "handle", "points.count*points.point_step", n, "<=", h.Length)
	}
	return nil
}

func unusedPointsError(p *PointFormat) *FieldError {
	for _, f := range [...]struct {
		name string
		v    uint64
	}{
		{"points.count", uint64(p.Count)}, {"points.point_step", uint64(p.Step)},
		{"points.offset_x", uint64(p.X)}, {"points.offset_y", uint64(p.Y)},
		{"points.offset_z", uint64(p.Z)}, {"points.offset_intensity", uint64(p.Intensity)},
		{"points.datatype", uint64(p.Datatype)}, {"points.flags", uint64(p.Flags)},
	} {
		if f.v != 0 {
			return newFieldError(classReserved, "handle", f.name, f.v, "==", 0)
		}
	}
	panic("handles: unusedPointsError called on a zero PointFormat")
}

func unusedImageError(im *ImageFormat) *FieldError {
	for _, f := range [...]struct {
		name string
		v    uint64
	}{
		{"image.width", uint64(im.Width)}, {"image.height", uint64(im.Height)},
		{"image.row_step", uint64(im.RowStep)}, {"image.encoding", uint64(im.Encoding)},
	} {
		if f.v != 0 {
			return newFieldError(classReserved, "handle", f.name, f.v, "==", 0)
		}
	}
	panic("handles: unusedImageError called on a zero ImageFormat")
}

// DecodeRelease unmarshals b into r and validates it with ValidateRelease.
// On error r is left unchanged. Every outcome is counted.
func (v *Validator) DecodeRelease(r *Release, b []byte) error {
	var t Release
	fe := t.unmarshal(b)
	if fe == nil {
		fe = v.validateRelease(&t)
	}
	if fe != nil {
		v.rejected[fe.class].Add(1)
		return fe
	}
	*r = t
	v.releases.Add(1)
	return nil
}

// ValidateRelease checks that r names a known pool and a slot within it,
// and counts the outcome. The generation is the lease table's to check.
func (v *Validator) ValidateRelease(r *Release) error {
	if fe := v.validateRelease(r); fe != nil {
		v.rejected[fe.class].Add(1)
		return fe
	}
	v.releases.Add(1)
	return nil
}

func (v *Validator) validateRelease(r *Release) *FieldError {
	g := v.pool(r.PoolID)
	if g == nil {
		return newFieldError(classUnknownPool, "release", "pool_id", uint64(r.PoolID), "", 0)
	}
	return r.validate(g)
}

// VerifyPayload checks h.Checksum (test mode) against the payload bytes,
// which must hold at least h.Length bytes; a handle without a checksum
// passes. Mismatches count as ErrChecksum (short payloads as ErrLength).
// It allocates nothing unless it fails.
func (v *Validator) VerifyPayload(h *Handle, payload []byte) error {
	if h.Checksum == 0 {
		return nil
	}
	if uint64(len(payload)) < h.Length {
		v.rejected[classLength].Add(1)
		return newFieldError(classLength, "handle", "length", h.Length, "<=", uint64(len(payload)))
	}
	if got := PayloadChecksum(payload[:h.Length]); got != h.Checksum {
		v.rejected[classChecksum].Add(1)
		return newFieldError(classChecksum, "handle", "checksum", h.Checksum, "==", got)
	}
	return nil
}

// Stats is a snapshot of a Validator's counters. Each rejection is counted
// once, under the class of the error returned.
type Stats struct {
	Handles  uint64 // handles accepted
	Releases uint64 // releases accepted

	RecordSize  uint64 // ErrRecordSize
	BadMagic    uint64 // ErrBadMagic
	BadVersion  uint64 // ErrBadVersion
	Reserved    uint64 // ErrReserved
	FrameID     uint64 // ErrFrameID
	UnknownPool uint64 // ErrUnknownPool
	Kind        uint64 // ErrKind
	Encoding    uint64 // ErrEncoding
	IndexRange  uint64 // ErrIndexRange
	Length      uint64 // ErrLength
	Geometry    uint64 // ErrGeometry
	Checksum    uint64 // ErrChecksum
}

// Rejected is the number of records rejected, all classes together.
func (s Stats) Rejected() uint64 {
	return s.RecordSize + s.BadMagic + s.BadVersion + s.Reserved + s.FrameID + s.UnknownPool +
		s.Kind + s.Encoding + s.IndexRange + s.Length + s.Geometry + s.Checksum
}

// Stats returns the counters. Each is read atomically; the set is not one
// atomic snapshot while other goroutines validate.
func (v *Validator) Stats() Stats {
	r := &v.rejected
	return Stats{
		Handles:     v.handles.Load(),
		Releases:    v.releases.Load(),
		RecordSize:  r[classRecordSize].Load(),
		BadMagic:    r[classBadMagic].Load(),
		BadVersion:  r[classBadVersion].Load(),
		Reserved:    r[classReserved].Load(),
		FrameID:     r[classFrameID].Load(),
		UnknownPool: r[classUnknownPool].Load(),
		Kind:        r[classKind].Load(),
		Encoding:    r[classEncoding].Load(),
		IndexRange:  r[classIndexRange].Load(),
		Length:      r[classLength].Load(),
		Geometry:    r[classGeometry].Load(),
		Checksum:    r[classChecksum].Load(),
	}
}
