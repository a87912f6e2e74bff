package pinned

import (
	"fmt"
	"sync/atomic"
)

// View is a subscriber's read-only mapping of a pool owned by another
// process. It never writes the segment and keeps no lease state: leases are
// returned to the owner by message.
type View struct {
	id     uint32
	geom   Geometry
	stride uint64
	seg    *segment
	gens   generations
	// order is written only to order a caller's reads of a slot before
	// its load of the generation table (generations.go).
	order atomic.Uint32
}

// ViewOptions configure OpenView. The zero value maps without locking or
// pinning.
type ViewOptions struct {
	Lock   bool
	Pinner Pinner // registered READ_ONLY where the device supports it
}

// OpenView maps the memfd fd read-only as pool id with geometry g. It takes
// ownership of fd (closed by View.Close, or at once on error). The fd must be
// a memfd sealed against resizing whose size equals g.SegmentSize(); the
// geometry came over a socket, so the kernel's word is checked against it.
func OpenView(fd int, id uint32, g Geometry, opts ViewOptions) (*View, error) {
	if err := g.Validate(); err != nil {
		closeFd(fd)
		return nil, fmt.Errorf("open pool %d: %w", id, err)
	}
	seg, err := openMemfdSegment(fd, g.SegmentSize())
	if err != nil {
		closeFd(fd)
		return nil, fmt.Errorf("open pool %d: %w", id, err)
	}
	gens, err := generationsOf(seg.mem, g)
	if err != nil {
		seg.close()
		return nil, fmt.Errorf("open pool %d: %w", id, err)
	}
	if err := setupSegment(seg, opts.Lock, opts.Pinner, ReadOnly); err != nil {
		return nil, fmt.Errorf("open pool %d: %w", id, err)
	}
	return &View{id: id, geom: g, stride: g.Stride(), seg: seg, gens: gens}, nil
}

// ID is the pool id this view maps.
func (v *View) ID() uint32 { return v.id }

// Geometry is the pool's geometry.
func (v *View) Geometry() Geometry { return v.geom }

// Memory is the whole read-only segment (for GPU registration).
func (v *View) Memory() []byte { return v.seg.mem }

// Slot returns slot index's payload region, or nil if index is out of
// range. The bytes are read-only: writing them faults. They stay mapped
// until Close; whether they still hold the frame a handle announced is the
// lease's business, not the view's.
func (v *View) Slot(index uint32) []byte {
	if index >= v.geom.SlotCount {
		return nil
	}
	off := uint64(index) * v.stride
	return v.seg.mem[off : off+v.geom.SlotSize : off+v.geom.SlotSize]
}

// Current reports whether gen is still slot index's current generation in
// the owner's table: the owner has not acquired the slot for a later use,
// so no byte of one reached what this process read of the slot before the
// call (reads on other goroutines or a GPU must be synchronised with the
// caller first). A lease that is still current after its stages has read
// only its own frame, whatever the socket has said so far. False for an
// index out of range or generation 0. It must not be called after Close.
func (v *View) Current(index uint32, gen uint64) bool {
	if gen == 0 || index >= v.geom.SlotCount || v.gens == nil {
		return false
	}
	// The add's store is a release and the load an acquire: the caller's
	// reads stay before the load (generations.go).
	v.order.Add(1)
	return v.gens.current(index) == gen
}

// Close unmaps the view and closes its fd.
func (v *View) Close() error {
	if v.seg == nil {
		return nil
	}
	err := v.seg.close()
	v.seg, v.gens = nil, nil
	if err != nil {
		return fmt.Errorf("close pool view %d: %w", v.id, err)
	}
	return nil
}
