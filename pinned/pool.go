package pinned

import (
	"errors"
	"fmt"
	"math/bits"
	"sync/atomic"
	"time"
)

// MaxSlots bounds the slot count of one pool. Slot indices travel in
// handles as uint32; the bound keeps the owner's metadata small.
const MaxSlots = 1 << 20

// MaxSubscribers is the number of subscribers one pool can track. Holds are
// a bit mask that shares one 64-bit word with the generation (see slotMeta),
// so that a release can be checked and applied in a single CAS.
const MaxSubscribers = 31

// SubscriberID names a subscriber of one pool, 0 ≤ id < MaxSubscribers.
type SubscriberID uint8

// SubscriberSet is a set of subscribers, bit i standing for SubscriberID i.
type SubscriberSet uint32

// Has reports whether id is in the set.
func (s SubscriberSet) Has(id SubscriberID) bool { return s&(1<<id) != 0 }

// Len is the number of subscribers in the set.
func (s SubscriberSet) Len() int { return bits.OnesCount32(uint32(s)) }

// Errors callers branch on; each rejected operation wraps one of them.
var (
	ErrExhausted         = errors.New("pool exhausted: no free slot")
	ErrClosed            = errors.New("pool closed")
	ErrTooManySubscriber = errors.New("pool has no free subscriber id")
	ErrNotWriting        = errors.New("slot is not held by the writer (already published or aborted)")

	// Release rejections. None of them changes any state.
	ErrIndexRange        = errors.New("slot index out of range")
	ErrUnknownSubscriber = errors.New("unknown subscriber")
	ErrStaleGeneration   = errors.New("stale generation")
	ErrNotHeld           = errors.New("slot not held by this subscriber")
)

// ReleaseError is a rejected release; it matches its reason with errors.Is.
type ReleaseError struct {
	Pool       string
	Subscriber SubscriberID
	Index      uint32
	Generation uint64
	Reason     error
}

func (e *ReleaseError) Error() string {
	return fmt.Sprintf("pool %q: release by subscriber %d of slot %d generation %d: %v",
		e.Pool, e.Subscriber, e.Index, e.Generation, e.Reason)
}

func (e *ReleaseError) Unwrap() error { return e.Reason }

// Options configure a pool. The zero value is an anonymous, unlocked,
// unpinned pool.
type Options struct {
	// Name appears in errors, logs and the memfd's name.
	Name string
	// ID is the pool id carried in handles; the owner chooses it.
	ID uint32
	// Shared backs the pool with a sealed memfd that can be passed to other
	// processes; otherwise it is anonymous memory for composed mode.
	Shared bool
	// Lock mlocks the segment so it is never paged out.
	Lock bool
	// Pinner, if set, page-locks and device-maps the segment (GPU support).
	Pinner Pinner
	// Allocator supplies anonymous segments (e.g. cuMemHostAlloc); ignored
	// for shared pools. Default: mmap.
	Allocator HostAllocator
	// Epoch is the high 32 bits of every generation; 0 picks one from the
	// clock, so a restarted owner does not reissue its predecessor's.
	Epoch uint32
	// HoldTimeEvery times one slot use in this many (a power of two; 0
	// means 8, 1 times every use).
	HoldTimeEvery uint32
}

// Slot word layout (slotMeta.word). One 64-bit word so that publish, abort
// and release each validate and change a slot with one compare-and-swap:
//
//	63            32 31      30            0
//	+---------------+--------+--------------+
//	| generation lo | writer | holds (mask) |
//	+---------------+--------+--------------+
//
// States: free = (gen, 0, 0) and on the free list; writing = (gen, 1, 0);
// published = (gen, 0, holds≠0). A slot leaves "published" for the free list
// exactly when its last hold is cleared, by the CAS that clears it.
const (
	writerBit = 1 << 31
	holdsMask = writerBit - 1
)

type slotMeta struct {
	word atomic.Uint64
	next atomic.Uint32 // free-list link: index+1, 0 = end
	// publishedAt is the monotonic time of the last sampled publish.
	publishedAt atomic.Int64
	_           [40]byte // keep neighbouring slots off one cache line
}

// Subscriber state word, so that a release updates it with one atomic add:
//
//	63       62                   24 23              0
//	+--------+----------------------+-----------------+
//	| closed | released (count)     | in flight       |
//	+--------+----------------------+-----------------+
const (
	subClosed      = 1 << 63
	subInFlight    = 1<<24 - 1
	subReleasedOne = 1 << 24
	subReleased    = (1<<63 - 1) &^ subInFlight
)

type subMeta struct {
	state atomic.Uint64
	limit atomic.Uint64
	drops atomic.Uint64
	_     [40]byte
}

// Pool is N fixed-size slots in one segment, owned by one writer process.
// All methods are safe for concurrent use. Acquire, Publish, Abort and
// Release are lock-free, O(1) (Publish is O(subscribers)) and allocate
// nothing.
type Pool struct {
	name   string
	id     uint32
	geom   Geometry
	stride uint64
	// epoch is the high half of every generation this pool hands out, so
	// that generations from an earlier pool (a camera restart) never match.
	epoch uint32
	// holdSample: hold time is measured for generations with
	// gen&holdSample == 0 (reading the clock costs as much as the rest of
	// a release on a VM, so 1 use in holdSample+1 is timed).
	holdSample uint32
	seg        *segment
	gens       generations // in seg, after the last slot
	slots      []slotMeta
	subs       [MaxSubscribers]subMeta
	start      time.Time

	// head is the Treiber-stack top: high 32 bits an ABA tag bumped by every
	// successful push or pop, low 32 bits index+1 (0 = empty). The tag makes
	// a CAS fail if the stack changed between load and CAS, even when the
	// same index is back on top.
	head atomic.Uint64
	// claimed ids are taken by Subscribe before their state is prepared;
	// active ids are visible to Publish and Release.
	claimed atomic.Uint32
	active  atomic.Uint32
	nextID  atomic.Uint32 // where Subscribe starts looking for a free id
	closed  atomic.Bool
	// order is written only to order a Current caller's reads of a slot
	// before its load of the generation table (generations.go).
	order atomic.Uint32

	stats counters
}

// New creates a pool of g.SlotCount slots of g.SlotSize bytes each.
func New(g Geometry, opts Options) (*Pool, error) {
	if err := g.Validate(); err != nil {
		return nil, fmt.Errorf("new pool %q: %w", opts.Name, err)
	}
	var (
		seg *segment
		err error
	)
	if opts.Shared {
		seg, err = newMemfdSegment(opts.Name, g.SegmentSize())
	} else {
		seg, err = newAnonSegment(g.SegmentSize(), opts.Allocator)
	}
	if err != nil {
		return nil, fmt.Errorf("new pool %q: %w", opts.Name, err)
	}
	gens, err := generationsOf(seg.mem, g)
	if err != nil {
		seg.close()
		return nil, fmt.Errorf("new pool %q: %w", opts.Name, err)
	}
	// A HostAllocator's memory (cuMemHostAlloc) need not be zeroed, and a
	// stale word could match a handle; a memfd's already is.
	clear(seg.mem[g.GenerationsOffset():])
	if err := setupSegment(seg, opts.Lock, opts.Pinner, ReadWrite); err != nil {
		return nil, fmt.Errorf("new pool %q: %w", opts.Name, err)
	}
	every := opts.HoldTimeEvery
	if every == 0 {
		every = 8
	}
	if every&(every-1) != 0 {
		seg.close()
		return nil, fmt.Errorf("new pool %q: HoldTimeEvery %d is not a power of two", opts.Name, every)
	}
	epoch := opts.Epoch
	if epoch == 0 {
		epoch = uint32(time.Now().UnixNano()>>10) | 1
	}
	p := &Pool{
		name:       opts.Name,
		id:         opts.ID,
		geom:       g,
		stride:     g.Stride(),
		epoch:      epoch,
		holdSample: every - 1,
		seg:        seg,
		gens:       gens,
		slots:      make([]slotMeta, g.SlotCount),
		start:      time.Now(),
	}
	for i := int(g.SlotCount) - 1; i >= 0; i-- {
		p.push(uint32(i))
	}
	return p, nil
}

// setupSegment locks and pins a fresh segment, closing it on failure.
func setupSegment(seg *segment, lock bool, pinner Pinner, access Access) error {
	if lock {
		if err := seg.lock(); err != nil {
			seg.close()
			return err
		}
	}
	if pinner != nil {
		region, err := pinner.Pin(seg.mem, access)
		if err != nil {
			seg.close()
			return fmt.Errorf("pin %s segment: %w", access, err)
		}
		seg.pinned = region
	}
	return nil
}

// Name returns the pool's name.
func (p *Pool) Name() string { return p.name }

// ID returns the pool id carried in handles.
func (p *Pool) ID() uint32 { return p.id }

// Geometry returns the pool's geometry.
func (p *Pool) Geometry() Geometry { return p.geom }

// Memory returns the whole segment, for GPU registration and diagnostics.
func (p *Pool) Memory() []byte { return p.seg.mem }

// SlotBytes returns slot index's payload region. The owner may read it at
// any time; it may write it only while holding the slot from Acquire.
func (p *Pool) SlotBytes(index uint32) []byte {
	off := uint64(index) * p.stride
	return p.seg.mem[off : off+p.geom.SlotSize : off+p.geom.SlotSize]
}

// ShareFd returns a new read-only fd of the pool's memfd for a subscriber.
// The caller closes it after sending it.
func (p *Pool) ShareFd() (int, error) {
	fd, err := p.seg.readOnlyFd()
	if err != nil {
		return -1, fmt.Errorf("pool %q: %w", p.name, err)
	}
	return fd, nil
}

// WriteSealed reports whether the pool's memfd is sealed against every
// write but the owner's mapping (F_SEAL_FUTURE_WRITE, Linux ≥ 5.1). When it
// is false (an older kernel, or a pool that is not Shared), a subscriber
// could re-open its read-only fd for writing through /proc/self/fd.
func (p *Pool) WriteSealed() bool { return p.seg.writeSealed }

// Close unmaps the segment. Every Slot and every subscriber's view of it
// becomes invalid; the caller must have stopped using the pool.
func (p *Pool) Close() error {
	if p.closed.Swap(true) {
		return nil
	}
	if err := p.seg.close(); err != nil {
		return fmt.Errorf("close pool %q: %w", p.name, err)
	}
	return nil
}

// Slot is a slot held by the writer between Acquire and Publish or Abort.
type Slot struct {
	pool  *Pool
	index uint32
	gen   uint64
}

// Index is the slot's index in its pool.
func (s Slot) Index() uint32 { return s.index }

// Generation is the slot's generation for this use.
func (s Slot) Generation() uint64 { return s.gen }

// Bytes is the slot's payload; valid for writing until Publish or Abort.
func (s Slot) Bytes() []byte { return s.pool.SlotBytes(s.index) }

func (p *Pool) pop() (uint32, bool) {
	for {
		old := p.head.Load()
		top := uint32(old)
		if top == 0 {
			return 0, false
		}
		// next may be read from a slot another goroutine just popped; then
		// the tag has changed and the CAS below fails.
		next := p.slots[top-1].next.Load()
		if p.head.CompareAndSwap(old, (old>>32+1)<<32|uint64(next)) {
			return top - 1, true
		}
	}
}

func (p *Pool) push(index uint32) {
	s := &p.slots[index]
	for {
		old := p.head.Load()
		// Only the goroutine pushing a slot writes its link (the slot is on
		// no list meanwhile), so a link that already points at the current
		// top needs no store: one locked instruction less per frame in the
		// steady state where a slot goes back where it came from.
		if s.next.Load() != uint32(old) {
			s.next.Store(uint32(old))
		}
		if p.head.CompareAndSwap(old, (old>>32+1)<<32|uint64(index+1)) {
			return
		}
	}
}

// Acquire takes a free slot for writing, bumping its generation. With no
// free slot it returns ErrExhausted at once; it never blocks.
func (p *Pool) Acquire() (Slot, error) {
	idx, ok := p.pop()
	if !ok {
		p.stats.exhausted.Add(1)
		return Slot{}, ErrExhausted
	}
	return p.startWriting(idx), nil
}

// startWriting bumps a just-popped slot's generation and marks it written.
// Only the popping goroutine touches the slot's word until it is stored.
// The generation table gets the new generation before the writer can
// write a byte (generations.go).
func (p *Pool) startWriting(idx uint32) Slot {
	s := &p.slots[idx]
	gen := uint32(s.word.Load()>>32) + 1
	s.word.Store(uint64(gen)<<32 | writerBit)
	slot := Slot{pool: p, index: idx, gen: uint64(p.epoch)<<32 | uint64(gen)}
	p.gens.publish(idx, slot.gen)
	return slot
}

// Current reports whether gen is slot index's current generation: no later
// use of the slot has been acquired, so nothing has rewritten what that
// use's writer wrote (see View.Current, which a subscriber in another
// process uses). False for an index out of range, generation 0 or a closed
// pool; it must not race with Close.
func (p *Pool) Current(index uint32, gen uint64) bool {
	if gen == 0 || index >= p.geom.SlotCount || p.closed.Load() {
		return false
	}
	// The add's store is a release and the load an acquire: the caller's
	// reads stay before the load (generations.go).
	p.order.Add(1)
	return p.gens.current(index) == gen
}

// AcquireBefore is Acquire that retries until deadline when the pool is
// exhausted, sleeping briefly between tries. It returns ErrExhausted
// (counted once) when the deadline passes.
func (p *Pool) AcquireBefore(deadline time.Time) (Slot, error) {
	backoff := 20 * time.Microsecond
	for {
		if idx, ok := p.pop(); ok {
			return p.startWriting(idx), nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			p.stats.exhausted.Add(1)
			return Slot{}, ErrExhausted
		}
		time.Sleep(min(backoff, left))
		backoff = min(2*backoff, time.Millisecond)
	}
}

// Publish hands a written slot to the subscribers in to (masked by the
// registered ones) and returns the set that now holds it. A subscriber at
// its in-flight limit is skipped and its drop counted; Publish never waits.
// If nobody takes the slot it goes straight back to the free list.
func (p *Pool) Publish(slot Slot, to SubscriberSet) (SubscriberSet, error) {
	if slot.pool != p {
		return 0, fmt.Errorf("pool %q: publish of a slot from another pool: %w", p.name, ErrNotWriting)
	}
	s := &p.slots[slot.index]
	writing := uint64(uint32(slot.gen))<<32 | writerBit
	if s.word.Load() != writing {
		return 0, fmt.Errorf("pool %q: publish slot %d generation %d: %w", p.name, slot.index, slot.gen, ErrNotWriting)
	}
	var held uint32
	for m := uint32(to) & p.active.Load(); m != 0; m &= m - 1 {
		id := bits.TrailingZeros32(m)
		if p.subs[id].reserve(&p.stats.subscriberDrops) {
			held |= 1 << id
		}
	}
	if uint32(slot.gen)&p.holdSample == 0 {
		s.publishedAt.Store(p.now())
	}
	if !s.word.CompareAndSwap(writing, writing&^writerBit|uint64(held)) {
		for m := held; m != 0; m &= m - 1 {
			p.subs[bits.TrailingZeros32(m)].unreserve()
		}
		return 0, fmt.Errorf("pool %q: publish slot %d generation %d: %w", p.name, slot.index, slot.gen, ErrNotWriting)
	}
	if held == 0 {
		p.push(slot.index)
	}
	return SubscriberSet(held), nil
}

// Abort returns a slot the writer acquired but will not publish.
func (p *Pool) Abort(slot Slot) error {
	if slot.pool != p {
		return fmt.Errorf("pool %q: abort of a slot from another pool: %w", p.name, ErrNotWriting)
	}
	s := &p.slots[slot.index]
	writing := uint64(uint32(slot.gen))<<32 | writerBit
	if !s.word.CompareAndSwap(writing, writing&^writerBit) {
		return fmt.Errorf("pool %q: abort slot %d generation %d: %w", p.name, slot.index, slot.gen, ErrNotWriting)
	}
	p.stats.aborted.Add(1)
	p.push(slot.index)
	return nil
}

// freeReleased returns a slot whose last hold was just cleared (its word
// was w before the clearing CAS) to the free list, timing sampled holds.
func (p *Pool) freeReleased(index uint32, w uint64) {
	if uint32(w>>32)&p.holdSample == 0 {
		p.stats.holdTime.record(p.now() - p.slots[index].publishedAt.Load())
	}
	p.push(index)
}

func (p *Pool) now() int64 { return int64(time.Since(p.start)) }

// Release drops subscriber sub's hold on slot index at generation gen. A
// release that matches no outstanding hold is rejected with a
// *ReleaseError, counted, and changes nothing. The last release of a slot
// returns it to the free list.
func (p *Pool) Release(sub SubscriberID, index uint32, gen uint64) error {
	if reason := p.release(sub, index, gen); reason != nil {
		p.stats.countReject(reason)
		return &ReleaseError{Pool: p.name, Subscriber: sub, Index: index, Generation: gen, Reason: reason}
	}
	return nil
}

func (p *Pool) release(sub SubscriberID, index uint32, gen uint64) error {
	if index >= p.geom.SlotCount {
		return ErrIndexRange
	}
	if sub >= MaxSubscribers || p.active.Load()&(1<<sub) == 0 {
		return ErrUnknownSubscriber
	}
	if uint32(gen>>32) != p.epoch {
		return ErrStaleGeneration
	}
	s := &p.slots[index]
	bit := uint64(1) << sub
	for {
		w := s.word.Load()
		if uint32(w>>32) != uint32(gen) {
			return ErrStaleGeneration
		}
		if w&writerBit != 0 || w&bit == 0 {
			return ErrNotHeld
		}
		if s.word.CompareAndSwap(w, w&^bit) {
			p.subs[sub].state.Add(subReleasedOne - 1) // one released, one less in flight
			if w&holdsMask == bit {
				p.freeReleased(index, w)
			}
			return nil
		}
	}
}

// Subscribe registers a subscriber with at most limit slots in flight
// (published to it and not yet released) and returns its id.
func (p *Pool) Subscribe(limit int) (SubscriberID, error) {
	if limit <= 0 || limit > subInFlight {
		return 0, fmt.Errorf("pool %q: subscribe: in-flight limit %d, want 1..%d", p.name, limit, subInFlight)
	}
	for {
		taken := p.claimed.Load()
		free := ^taken & (1<<MaxSubscribers - 1)
		if free == 0 {
			return 0, fmt.Errorf("pool %q: %w (%d in use)", p.name, ErrTooManySubscriber, MaxSubscribers)
		}
		// Take the first free id at or after the cursor, so that an id just
		// given up is not reused at once: a message still in flight for its
		// previous owner then cannot reach a new one.
		cur := p.nextID.Load() % MaxSubscribers
		rot := free>>cur | free<<(MaxSubscribers-cur)&(1<<MaxSubscribers-1)
		id := (int(cur) + bits.TrailingZeros32(rot)) % MaxSubscribers
		if !p.claimed.CompareAndSwap(taken, taken|1<<id) {
			continue
		}
		// Prepare state before the id becomes visible to Publish.
		sm := &p.subs[id]
		sm.state.Store(0)
		sm.limit.Store(uint64(limit))
		sm.drops.Store(0)
		p.nextID.Store(uint32(id) + 1)
		p.active.Or(1 << id)
		return SubscriberID(id), nil
	}
}

// Unsubscribe drops every hold of sub and frees its id. It returns the
// number of holds dropped.
func (p *Pool) Unsubscribe(sub SubscriberID) int {
	if sub >= MaxSubscribers || p.active.Load()&(1<<sub) == 0 {
		return 0
	}
	n := p.ReleaseAll(sub)
	p.active.And(^uint32(1 << sub))
	// Keep its release count in the pool's total before the id is reused.
	p.stats.retiredReleases.Add((p.subs[sub].state.Load() & subReleased) / subReleasedOne)
	p.claimed.And(^uint32(1 << sub))
	return n
}

// ReleaseAll drops every hold of subscriber sub at once (it disconnected or
// died) and closes it to further publishes until Unsubscribe. It returns the
// number of holds dropped.
func (p *Pool) ReleaseAll(sub SubscriberID) int {
	if sub >= MaxSubscribers || p.active.Load()&(1<<sub) == 0 {
		return 0
	}
	sm := &p.subs[sub]
	sm.state.Or(subClosed)
	bit := uint64(1) << sub
	dropped := 0
	// A Publish that reserved before the close may still be about to set
	// its hold bit; the in-flight count says so. Scan until it reaches 0:
	// closed subscribers get no new reservations, so this ends.
	for sm.state.Load()&subInFlight != 0 {
		for i := range p.slots {
			s := &p.slots[i]
			for {
				w := s.word.Load()
				if w&writerBit != 0 || w&bit == 0 {
					break
				}
				if s.word.CompareAndSwap(w, w&^bit) {
					sm.unreserve()
					p.stats.releasedAll.Add(1)
					dropped++
					if w&holdsMask == bit {
						p.freeReleased(uint32(i), w)
					}
					break
				}
			}
		}
	}
	return dropped
}

// Active returns the set of registered subscribers still open to publishes.
func (p *Pool) Active() SubscriberSet {
	act := p.active.Load()
	for m := act; m != 0; m &= m - 1 {
		id := bits.TrailingZeros32(m)
		if p.subs[id].state.Load()&subClosed != 0 {
			act &^= 1 << id
		}
	}
	return SubscriberSet(act)
}

// reserve takes one in-flight unit unless the subscriber is closed or at its
// limit, in which case the drop is counted, in s and in total (the pool's,
// which outlives subscribers).
func (s *subMeta) reserve(total *atomic.Uint64) bool {
	limit := s.limit.Load()
	for {
		st := s.state.Load()
		if st&subClosed != 0 {
			return false
		}
		if st&subInFlight >= limit {
			s.drops.Add(1)
			total.Add(1)
			return false
		}
		if s.state.CompareAndSwap(st, st+1) {
			return true
		}
	}
}

func (s *subMeta) unreserve() { s.state.Add(^uint64(0)) }
