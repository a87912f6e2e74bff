package transport

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/zerohop/zerohop/handles"
)

// ErrReleased is returned by Lease.Release for a lease already returned
// (by the caller, or by the library because a newer frame superseded it).
var ErrReleased = errors.New("lease already released")

// ErrInvalid is returned when a lease's connection to the camera is gone;
// the camera has reclaimed the slot and may be rewriting it.
var ErrInvalid = errors.New("lease invalid: its camera connection is gone")

// Lease is a subscriber's hold on one published slot. It is a small value;
// copies share the hold, and the first Release of any copy returns it.
//
// Bytes is a read-only view onto the camera's pool (no copy). It is the
// announced frame until Release; after Release, or once Valid reports false
// (the camera went away), the memory stays mapped (never dangling) but its
// contents may change at any time.
type Lease struct {
	Handle handles.Handle
	// Topic is the index of the topic in the subscriber's configuration.
	Topic int
	// ReceivedNs is when the handle arrived (monotime.Now()).
	ReceivedNs int64
	data       []byte
	owner      leaseOwner
	ticket     uint64 // the owner's number for this lease, where Handle's slot and generation do not name it (CopySource)
}

// leaseOwner is what a lease returns its hold to: a unix-transport session
// or an in-process subscriber.
// Its methods take plain values: a *Lease passed through an interface
// would escape to the heap, one allocation per frame.
type leaseOwner interface {
	release(topic int, pool, slot uint32, gen, ticket uint64) error
	// valid reports whether this lease (topic, slot, generation, ticket)
	// is still held: not released, and the owner alive.
	valid(topic int, slot uint32, gen, ticket uint64) bool
}

// Bytes returns the payload (Handle.Length bytes of the slot).
func (l *Lease) Bytes() []byte { return l.data }

// Valid reports whether the hold still stands: neither this lease nor a
// copy of it was released, its camera connection is alive as far as this
// side knows, and the camera has not acquired the slot again (the pool's
// generation table, which tells even before this side has seen the
// connection end). Once it is false, Bytes may already hold a later frame.
// Call it after reading Bytes: a true result covers the reads made before
// it on this goroutine, or synchronised with it.
func (l *Lease) Valid() bool {
	return l.owner != nil && l.owner.valid(l.Topic, l.Handle.Slot, l.Handle.Generation, l.ticket)
}

// Release returns the slot to the camera. A second release of the same hold
// returns ErrReleased and sends nothing.
func (l *Lease) Release() error {
	if l.owner == nil {
		return ErrReleased
	}
	return l.owner.release(l.Topic, l.Handle.PoolID, l.Handle.Slot, l.Handle.Generation, l.ticket)
}

// holdTable records, per topic and slot, the generation this subscriber
// holds (0 = none), so that a release is sent exactly once per hold no
// matter how many copies of a Lease exist.
type holdTable [MaxTopics][]atomic.Uint64

func (t *holdTable) init(topic int, slots uint32) { t[topic] = make([]atomic.Uint64, slots) }

// take records a hold of (slot, gen); false when one is recorded already,
// or for generation 0, which means "none" here (and no pool issues it: a
// hold of it could be given back any number of times).
func (t *holdTable) take(topic int, slot uint32, gen uint64) bool {
	return gen != 0 && t[topic][slot].CompareAndSwap(0, gen)
}

func (t *holdTable) give(topic int, slot uint32, gen uint64) bool {
	return t[topic][slot].CompareAndSwap(gen, 0)
}

// holds reports whether (slot, gen) is held now.
func (t *holdTable) holds(topic int, slot uint32, gen uint64) bool {
	return gen != 0 && topic >= 0 && topic < MaxTopics && slot < uint32(len(t[topic])) && t[topic][slot].Load() == gen
}

// mailbox keeps the last keep (≤ depth) leases of one topic; putting into
// a full mailbox releases the oldest (superseded).
type mailbox struct {
	ch         chan Lease
	superseded *atomic.Uint64
	// keep is how many leases put keeps queued: the depth, or fewer when
	// the camera grants too few slots for it (Subscriber.connect). Only the
	// goroutine that puts reads and sets it.
	keep int
}

func newMailbox(depth int, superseded *atomic.Uint64) *mailbox {
	return &mailbox{ch: make(chan Lease, depth), superseded: superseded, keep: depth}
}

func (m *mailbox) put(l Lease) {
	for {
		if len(m.ch) < m.keep {
			select {
			case m.ch <- l:
				return
			default:
			}
		}
		select {
		case old := <-m.ch:
			old.Release()
			m.superseded.Add(1)
		default:
		}
	}
}

// latest waits for at least one lease, then returns the newest and releases
// the older ones (superseded).
func (m *mailbox) latest(ctx context.Context) (Lease, error) {
	select {
	case l := <-m.ch:
		return m.newest(l), nil
	case <-ctx.Done():
		return Lease{}, ctx.Err()
	}
}

// tryLatest is latest without waiting.
func (m *mailbox) tryLatest() (Lease, bool) {
	select {
	case l := <-m.ch:
		return m.newest(l), true
	default:
		return Lease{}, false
	}
}

// newest returns the newest of l and everything queued after it,
// releasing the others (superseded).
func (m *mailbox) newest(l Lease) Lease {
	for {
		select {
		case newer := <-m.ch:
			l.Release()
			m.superseded.Add(1)
			l = newer
		default:
			return l
		}
	}
}

// drain releases every queued lease (the connection is going away).
func (m *mailbox) drain() {
	for {
		select {
		case l := <-m.ch:
			l.Release()
		default:
			return
		}
	}
}
