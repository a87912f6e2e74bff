package pinned

// The generation table: after the last slot, one u64 per slot holding the
// generation of the slot's current use, written by the owner only. It lets
// a subscriber tell, after reading a slot, whether the owner may have
// started to write it again meanwhile (the owner reclaimed the
// subscriber's holds because its connection dropped), without a message
// and without trusting its own view of the connection, which can lag.
//
// Invariants:
//   - The owner stores a slot's new generation in Acquire, before it hands
//     the slot to the writer, so before any byte of the new use is written.
//     The store is followed by a load of the same word: on amd64 the store
//     is XCHG, a full fence; on arm64 it is STLR, and a later LDAR is never
//     reordered before an STLR, while the writer's plain stores are never
//     reordered before the LDAR. Either way no byte of the new use becomes
//     visible to another CPU (or a GPU) before the new generation.
//   - A reader that read a slot and then finds the generation it holds is
//     therefore sure no write of a later use reached what it read. Its
//     reads must be ordered before its load of the table. View.Current
//     does an atomic add first: its store half is a release (STLR or
//     STLXR; LOCK XADD on amd64), which keeps the reads before it, and the
//     table load after it is an acquire (LDAR), which arm64 never moves
//     before an earlier release. A plain load there would break this.
//     Reads done on other goroutines or a GPU must be synchronised with
//     the caller first (a channel, a WaitGroup, a stream synchronise).
//   - Generation 0 means "never used": no pool issues it.
//   - The words are accessed as atomic.Uint64 through unsafe.Pointer: the
//     table starts at a multiple of PageSize in a page-aligned mapping, so
//     every word is 8-byte aligned (generationsOf checks that). A
//     subscriber's mapping is PROT_READ and it only loads, which a
//     read-only mapping allows on amd64 and arm64, where 64-bit atomics
//     are single instructions. (Where Go emulates them with a lock, as on
//     32-bit mips or GOARM=5, the lock would not reach the other process:
//     such targets are not supported.)

import (
	"fmt"
	"sync/atomic"
	"unsafe"
)

// generations is a segment's table, one word per slot.
type generations []atomic.Uint64

// generationsOf returns the table inside mem, a whole segment of g.
func generationsOf(mem []byte, g Geometry) (generations, error) {
	off := g.GenerationsOffset()
	if uint64(len(mem)) < g.SegmentSize() {
		return nil, fmt.Errorf("segment of %d bytes, geometry needs %d", len(mem), g.SegmentSize())
	}
	p := unsafe.Pointer(&mem[off])
	if uintptr(p)%8 != 0 {
		return nil, fmt.Errorf("generation table at %#x is not 8-byte aligned", uintptr(p))
	}
	return unsafe.Slice((*atomic.Uint64)(p), g.SlotCount), nil
}

// publish records gen as slot index's current generation (the owner only).
func (t generations) publish(index uint32, gen uint64) {
	t[index].Store(gen)
	t[index].Load() // orders the slot's coming writes after the store (see above)
}

func (t generations) current(index uint32) uint64 { return t[index].Load() }
