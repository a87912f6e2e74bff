package pinned

import (
	"fmt"
)

// View is a subscriber's read-only mapping of a pool owned by another
// process. It never writes the segment and keeps no lease state: leases are
// returned to the owner by message.
type View struct {
	id     uint32
	geom   Geometry
	stride uint64
	seg    *segment
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
	if err := setupSegment(seg, opts.Lock, opts.Pinner, ReadOnly); err != nil {
		return nil, fmt.Errorf("open pool %d: %w", id, err)
	}
	return &View{id: id, geom: g, stride: g.Stride(), seg: seg}, nil
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

// Close unmaps the view and closes its fd.
func (v *View) Close() error {
	if v.seg == nil {
		return nil
	}
	err := v.seg.close()
	v.seg = nil
	if err != nil {
		return fmt.Errorf("close pool view %d: %w", v.id, err)
	}
	return nil
}
