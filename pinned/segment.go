package pinned

import (
	"errors"
	"fmt"
)

// PageSize is the alignment of every slot payload and of the slot stride.
// GPU host registration and mmap both work in pages; 4096 is the smallest
// page on every platform zerohop runs on (x86-64, Jetson arm64).
const PageSize = 4096

// MaxSegmentBytes bounds one pool's segment. Larger requests are almost
// always a unit mistake (bytes vs. kilobytes) and would fail in mmap anyway.
const MaxSegmentBytes = 1 << 40

// Geometry is the shape of a pool: SlotCount slots, each with SlotSize
// usable payload bytes, laid out every Stride bytes in one segment.
type Geometry struct {
	SlotCount uint32
	SlotSize  uint64 // payload capacity per slot, as requested
}

// Stride is the distance between slot payloads: SlotSize rounded up to a
// whole number of pages, so that every payload starts page-aligned.
func (g Geometry) Stride() uint64 {
	return (g.SlotSize + PageSize - 1) &^ (PageSize - 1)
}

// GenerationsOffset is where the generation table starts: right after the
// last slot (generations.go).
func (g Geometry) GenerationsOffset() uint64 { return g.Stride() * uint64(g.SlotCount) }

// generationsSize is the table's size: a u64 per slot, rounded up to whole
// pages so that the segment stays a whole number of pages.
func (g Geometry) generationsSize() uint64 {
	return (8*uint64(g.SlotCount) + PageSize - 1) &^ (PageSize - 1)
}

// SegmentSize is the byte size of the segment: every slot, then the
// generation table.
func (g Geometry) SegmentSize() uint64 { return g.GenerationsOffset() + g.generationsSize() }

// ErrGeometry reports an unusable pool geometry.
var ErrGeometry = errors.New("invalid pool geometry")

// Validate checks that the geometry describes a segment that can exist.
func (g Geometry) Validate() error {
	switch {
	case g.SlotCount == 0:
		return fmt.Errorf("%w: slot count is 0", ErrGeometry)
	case g.SlotCount > MaxSlots:
		return fmt.Errorf("%w: slot count %d exceeds the maximum %d", ErrGeometry, g.SlotCount, MaxSlots)
	case g.SlotSize == 0:
		return fmt.Errorf("%w: slot size is 0", ErrGeometry)
	case g.SlotSize > MaxSegmentBytes:
		return fmt.Errorf("%w: slot size %d bytes exceeds the segment limit %d", ErrGeometry, g.SlotSize, uint64(MaxSegmentBytes))
	}
	// SlotSize ≤ 2^40 so Stride cannot overflow; the product can. The
	// generation table is at most 8 MiB (MaxSlots u64s).
	if s := g.Stride(); s > (MaxSegmentBytes-g.generationsSize())/uint64(g.SlotCount) {
		return fmt.Errorf("%w: %d slots × stride %d bytes and their generation table exceed the segment limit %d", ErrGeometry, g.SlotCount, s, uint64(MaxSegmentBytes))
	}
	return nil
}

// Access says how a segment is mapped.
type Access uint8

const (
	ReadWrite Access = iota // the owner (camera)
	ReadOnly                // a subscriber: PROT_READ, from a read-only fd
)

func (a Access) String() string {
	if a == ReadOnly {
		return "read-only"
	}
	return "read-write"
}

// Pinner is the hook through which GPU support page-locks and device-maps a
// segment right after the pool creates or opens it (cuMemHostRegister), and
// undoes it when the pool closes. The pool itself knows nothing of CUDA.
// Pin is called once per segment, never per frame.
type Pinner interface {
	Pin(mem []byte, access Access) (PinnedRegion, error)
}

// PinnedRegion is a segment registered by a Pinner.
type PinnedRegion interface {
	// Unpin undoes Pin. The pool calls it before unmapping the memory.
	Unpin() error
}

// HostAllocator supplies the memory of an anonymous (in-process) segment,
// so that GPU support can hand out cuMemHostAlloc'd memory instead of mmap'd
// pages. Free receives exactly the slice Allocate returned.
type HostAllocator interface {
	Allocate(size int) ([]byte, error)
	Free(mem []byte) error
}
