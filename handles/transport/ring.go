package transport

// The handle rings of spin mode: a spinning subscriber reads handles from
// memory the camera writes, instead of polling its socket, so a handoff
// costs no system call on either side. Releases still go over the socket,
// and the socket still tells either side when the other is gone.
//
// Layout: one memfd per connection, created and written by the camera only,
// mapped PROT_READ by the subscriber from an O_RDONLY fd. It holds one ring
// per topic, in the welcome's pool order; each ring is `entries` entries of
// ringStride bytes:
//
//	entry: seq u64 at 0 | pad to 64 | handle [128] at 64..192
//
// Invariants:
//   - One producer per ring (the goroutine that publishes the topic, under
//     the connection's mutex, so never after the camera unmapped it) and one
//     consumer (the subscriber's receive goroutine).
//   - Handle k (k = 1, 2, …) of a ring goes into entry (k-1) mod entries:
//     its 128 bytes first, then seq = k with an atomic store, so a reader
//     that loads seq == k (atomically) sees the whole handle.
//   - entries > the subscriber's hold limit on that topic. A handle is
//     written only for a slot the subscriber now holds, and the subscriber
//     releases a slot only after reading its handle; so while entry k is
//     unread, handles k..k+entries-1 would all be held, which the limit
//     forbids: the camera never overwrites an unread entry. A reader that
//     finds anything but k or k-entries in the seq word reports a protocol
//     violation; so does one that sees the seq change while it copied the
//     handle (a best-effort check for a broken camera: the copy's plain
//     loads are not ordered before the second load on every architecture,
//     and the hold limit is what rules the overwrite out).
//   - Nothing read from the ring is trusted: the handle goes through the
//     same validator as one received over the socket.
//
// The seq words are accessed as atomic.Uint64 through unsafe.Pointer: the
// mapping is page-aligned and ringStride is a multiple of 8, so every seq
// word is 8-byte aligned. The subscriber only loads (a read-only mapping
// allows that on every architecture Go supports; it never CASes).

import (
	"fmt"
	"math/bits"
	"sync/atomic"
	"unsafe"

	"github.com/zerohop/zerohop/handles"
)

const (
	ringStride    = 192
	ringHandleOff = 64
	// Ring sizes: a power of two above the hold limit, within these bounds.
	minRingEntries = 8
	maxRingEntries = 2048 // hold limits up to 2047, e.g. bench-handoff --slots 1024
)

// ringEntriesFor is the number of entries a ring needs for a subscriber
// that may hold holdLimit slots of the topic at once.
func ringEntriesFor(holdLimit int) (uint32, error) {
	if holdLimit < 1 || holdLimit >= maxRingEntries {
		return 0, fmt.Errorf("handle ring: hold limit %d, want 1..%d", holdLimit, maxRingEntries-1)
	}
	n := uint32(1) << bits.Len32(uint32(holdLimit)) // > holdLimit
	return max(n, minRingEntries), nil
}

func ringBytes(entries uint32) uint64 { return uint64(entries) * ringStride }

// seqWord is entry e's sequence word; e starts 8-byte aligned (see above).
func seqWord(e []byte) *atomic.Uint64 {
	_ = e[7]
	return (*atomic.Uint64)(unsafe.Pointer(&e[0]))
}

// ringWriter is the camera's end of one ring.
type ringWriter struct {
	mem     []byte // entries × ringStride, writable
	entries uint64
	next    uint64 // seq of the next handle; starts at 1
}

func newRingWriter(mem []byte, entries uint32) *ringWriter {
	return &ringWriter{mem: mem, entries: uint64(entries), next: 1}
}

func (w *ringWriter) put(rec *[handles.Size]byte) {
	k := w.next
	w.next++
	e := w.mem[(k-1)%w.entries*ringStride:][:ringStride]
	copy(e[ringHandleOff:], rec[:])
	seqWord(e).Store(k)
}

// ringReader is the subscriber's end of one ring.
type ringReader struct {
	mem     []byte // entries × ringStride, read-only
	entries uint64
	next    uint64
}

func newRingReader(mem []byte, entries uint32) ringReader {
	return ringReader{mem: mem, entries: uint64(entries), next: 1}
}

// poll copies the next handle into dst if the camera has written it.
func (r *ringReader) poll(dst *[handles.Size]byte) (bool, error) {
	k := r.next
	e := r.mem[(k-1)%r.entries*ringStride:][:ringStride]
	seq := seqWord(e).Load()
	if seq != k {
		var prev uint64 // what the entry held before handle k: k-entries, or nothing yet
		if k > r.entries {
			prev = k - r.entries
		}
		if seq == prev {
			return false, nil
		}
		return false, fmt.Errorf("%w: handle ring entry for handle %d holds handle %d (overrun or garbage)", ErrProtocol, k, seq)
	}
	copy(dst[:], e[ringHandleOff:])
	if again := seqWord(e).Load(); again != k {
		return false, fmt.Errorf("%w: handle ring entry for handle %d was rewritten (now %d) while read", ErrProtocol, k, again)
	}
	r.next++
	return true, nil
}
