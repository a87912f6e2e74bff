package handles

import "encoding/binary"

// ReleaseSize is the length in bytes of an encoded Release.
const ReleaseSize = 24

// releaseMagic is "ZHRL" (zerohop release) read as a little-endian uint32;
// it differs from handleMagic so that neither record passes for the other.
const releaseMagic uint32 = 'Z' | 'H'<<8 | 'R'<<16 | 'L'<<24

// Byte offsets of the release record:
//
//	offset size field
//	     0    4 magic "ZHRL"
//	     4    2 version (uint16, = Version)
//	     6    2 reserved, zero
//	     8    4 pool id (uint32)
//	    12    4 slot index (uint32)
//	    16    8 generation (uint64)
const (
	offRelMagic      = 0
	offRelVersion    = 4
	offRelReserved   = 6
	offRelPoolID     = 8
	offRelSlot       = 12
	offRelGeneration = 16
)

// Release returns a lease: the subscriber is done with the slot's contents
// of generation Generation. The camera checks Generation against its own
// lease table; this package checks only pool and index.
type Release struct {
	PoolID     uint32
	Slot       uint32
	Generation uint64
}

// MarshalTo writes r into b, reserved bytes zeroed.
func (r *Release) MarshalTo(b *[ReleaseSize]byte) {
	le := binary.LittleEndian
	le.PutUint32(b[offRelMagic:], releaseMagic)
	le.PutUint16(b[offRelVersion:], Version)
	le.PutUint16(b[offRelReserved:], 0)
	le.PutUint32(b[offRelPoolID:], r.PoolID)
	le.PutUint32(b[offRelSlot:], r.Slot)
	le.PutUint64(b[offRelGeneration:], r.Generation)
}

// Unmarshal decodes a release record, checking length, magic, version and
// the reserved bytes. On error r is left unchanged. It allocates nothing
// unless it fails.
func (r *Release) Unmarshal(b []byte) error {
	return asError(r.unmarshal(b))
}

func (r *Release) unmarshal(b []byte) *FieldError {
	if len(b) != ReleaseSize {
		return newFieldError(classRecordSize, "release", "size", uint64(len(b)), "==", ReleaseSize)
	}
	le := binary.LittleEndian
	if m := le.Uint32(b[offRelMagic:]); m != releaseMagic {
		return newFieldError(classBadMagic, "release", "magic", uint64(m), "==", uint64(releaseMagic))
	}
	if v := le.Uint16(b[offRelVersion:]); v != Version {
		return newFieldError(classBadVersion, "release", "version", uint64(v), "==", Version)
	}
	if v := le.Uint16(b[offRelReserved:]); v != 0 {
		return newFieldError(classReserved, "release", "reserved", uint64(v), "==", 0)
	}
	r.PoolID = le.Uint32(b[offRelPoolID:])
	r.Slot = le.Uint32(b[offRelSlot:])
	r.Generation = le.Uint64(b[offRelGeneration:])
	return nil
}

// Validate checks r against the geometry of its pool: the pool id must be
// g's and the slot index below g.SlotCount. It allocates nothing unless
// it fails.
func (r *Release) Validate(g Geometry) error {
	return asError(r.validate(&g))
}

func (r *Release) validate(g *Geometry) *FieldError {
	if r.PoolID != g.PoolID {
		return newFieldError(classUnknownPool, "release", "pool_id", uint64(r.PoolID), "==", uint64(g.PoolID))
	}
	if r.Slot >= g.SlotCount {
		return newFieldError(classIndexRange, "release", "slot", uint64(r.Slot), "<", uint64(g.SlotCount))
	}
	return nil
}
