// Package pinned is zerohop's slot pool: N fixed-size, page-aligned slots in
// one contiguous segment (anonymous memory for composed mode, or a sealed
// memfd that other processes map read-only), a lock-free ABA-safe
// allocator, per-slot generations and the lease table that records which
// subscriber holds which slot.
//
// The owner (the camera) is the only writer of slot memory and of lease
// state. A slot's life:
//
//	Acquire ─▶ writing ─Publish(to)─▶ held by subscribers ─last Release─▶ free
//	               └────Abort───────────────────────────────────────────▶ free
//
// Invariant: a slot is never on the free list, and so never handed to a
// writer, while any subscriber holds it. Generations bump at every Acquire,
// so a release naming an older use of a slot is rejected.
//
// Slot memory is valid from Acquire until Publish/Abort for the writer, and
// for a subscriber from receiving a handle until it releases that handle.
// Subscribers map the segment through View and never write it.
package pinned
