package pinned

import (
	"errors"
	"math/bits"
	"sync/atomic"
)

// HoldBuckets is the number of hold-time histogram buckets. Bucket i counts
// holds shorter than 2^i microseconds (and at least 2^(i-1)); the last
// bucket also takes everything longer (≥ 2^(HoldBuckets-2) µs ≈ 18 min).
const HoldBuckets = 32

type holdHistogram struct {
	buckets [HoldBuckets]atomic.Uint64
	sumNs   atomic.Int64
}

func (h *holdHistogram) record(ns int64) {
	if ns < 0 {
		ns = 0
	}
	us := uint64(ns / 1000)
	b := bits.Len64(us)
	if b >= HoldBuckets {
		b = HoldBuckets - 1
	}
	h.buckets[b].Add(1)
	h.sumNs.Add(ns)
}

// counters are the pool's own statistics. Acquired, Published, Released
// and InUse are derived in Stats (from the slots' generations, which count
// their acquisitions, from aborted, the per-subscriber release counts and a
// scan of slot states) to keep atomic read-modify-writes off the hot path.
type counters struct {
	releasedAll atomic.Uint64
	aborted     atomic.Uint64
	exhausted   atomic.Uint64
	// retiredReleases are releases by subscribers that have unsubscribed.
	retiredReleases atomic.Uint64
	// subscriberDrops counts every subscriber's drops, those gone too (off
	// the hot path: only a publish a subscriber cannot take adds to it).
	subscriberDrops atomic.Uint64

	rejectIndex   atomic.Uint64
	rejectSub     atomic.Uint64
	rejectStale   atomic.Uint64
	rejectNotHeld atomic.Uint64

	holdTime holdHistogram
}

func (c *counters) countReject(reason error) {
	switch {
	case errors.Is(reason, ErrIndexRange):
		c.rejectIndex.Add(1)
	case errors.Is(reason, ErrUnknownSubscriber):
		c.rejectSub.Add(1)
	case errors.Is(reason, ErrStaleGeneration):
		c.rejectStale.Add(1)
	default:
		c.rejectNotHeld.Add(1)
	}
}

// Stats is a snapshot of a pool's counters. Counters only grow; InUse and
// Writing are gauges. Fields are read one by one, so a snapshot taken under
// load is not atomic as a whole.
type Stats struct {
	Acquired    uint64 // successful Acquire calls
	Published   uint64
	Released    uint64 // accepted Release calls
	ReleasedAll uint64 // holds dropped by ReleaseAll (disconnects)
	Aborted     uint64
	Exhausted   uint64 // Acquire calls that found no free slot
	// SubscriberDrops counts the publishes a subscriber missed at its
	// in-flight limit, over all subscribers since the pool was made (those
	// gone included: Subscribers[i].Drops go with them).
	SubscriberDrops uint64
	InUse           int64 // slots not on the free list (being written or held)
	Writing         int64 // slots acquired and not yet published or aborted

	Rejected RejectedReleases

	// HoldTime[i] counts slot holds (publish → last release) shorter than
	// 2^i µs; HoldTimeSumNs is their total, for a mean.
	HoldTime      [HoldBuckets]uint64
	HoldTimeSumNs int64

	Subscribers []SubscriberStats
}

// RejectedReleases counts rejected releases by reason.
type RejectedReleases struct {
	IndexRange        uint64
	UnknownSubscriber uint64
	StaleGeneration   uint64
	NotHeld           uint64 // double releases and releases of others' holds
}

// Total is the sum of all rejections.
func (r RejectedReleases) Total() uint64 {
	return r.IndexRange + r.UnknownSubscriber + r.StaleGeneration + r.NotHeld
}

// SubscriberStats is one registered subscriber's share of the pool.
type SubscriberStats struct {
	ID       SubscriberID
	InFlight uint64 // slots published to it and not yet released
	Limit    uint64
	Drops    uint64 // publishes skipped because it was at its limit
	Released uint64 // slots it released (handled)
	Closed   bool   // ReleaseAll ran; awaiting Unsubscribe
}

// Stats returns a snapshot of the pool's counters.
func (p *Pool) Stats() Stats {
	c := &p.stats
	st := Stats{
		ReleasedAll: c.releasedAll.Load(),
		Aborted:     c.aborted.Load(),
		Exhausted:   c.exhausted.Load(),
		Rejected: RejectedReleases{
			IndexRange:        c.rejectIndex.Load(),
			UnknownSubscriber: c.rejectSub.Load(),
			StaleGeneration:   c.rejectStale.Load(),
			NotHeld:           c.rejectNotHeld.Load(),
		},
		HoldTimeSumNs: c.holdTime.sumNs.Load(),
	}
	for i := range st.HoldTime {
		st.HoldTime[i] = c.holdTime.buckets[i].Load()
	}
	for i := range p.slots {
		w := p.slots[i].word.Load()
		// The low 32 bits of a slot's generation count its acquisitions
		// (exact until one slot has been reused 2^32 times).
		st.Acquired += uint64(uint32(w >> 32))
		if w&writerBit != 0 {
			st.Writing++
		}
		if w&(writerBit|holdsMask) != 0 {
			st.InUse++
		}
	}
	st.Published = st.Acquired - st.Aborted - uint64(st.Writing)
	st.Released = c.retiredReleases.Load()
	st.SubscriberDrops = c.subscriberDrops.Load()
	for m := p.claimed.Load(); m != 0; m &= m - 1 {
		id := bits.TrailingZeros32(m)
		st.Released += (p.subs[id].state.Load() & subReleased) / subReleasedOne
	}
	for m := p.active.Load(); m != 0; m &= m - 1 {
		id := bits.TrailingZeros32(m)
		s := &p.subs[id]
		state := s.state.Load()
		st.Subscribers = append(st.Subscribers, SubscriberStats{
			ID:       SubscriberID(id),
			InFlight: state & subInFlight,
			Limit:    s.limit.Load(),
			Drops:    s.drops.Load(),
			Released: (state & subReleased) / subReleasedOne,
			Closed:   state&subClosed != 0,
		})
	}
	return st
}

// SubscriberDrops returns one subscriber's drop count (0 if unknown).
func (p *Pool) SubscriberDrops(sub SubscriberID) uint64 {
	if sub >= MaxSubscribers {
		return 0
	}
	return p.subs[sub].drops.Load()
}

// InUse counts the slots not on the free list (being written or held),
// without allocating.
func (p *Pool) InUse() int {
	n := 0
	for i := range p.slots {
		if p.slots[i].word.Load()&(writerBit|holdsMask) != 0 {
			n++
		}
	}
	return n
}
