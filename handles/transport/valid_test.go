package transport

import (
	"context"
	"errors"
	"math/bits"
	"testing"
	"time"

	"github.com/zerohop/zerohop/handles"
	"github.com/zerohop/zerohop/pinned"
)

// A released lease, and every copy of it, is no longer Valid, even while
// the connection lives on: its slot may already hold a later frame. The
// session (unix transport), in-process and copy owners all say so, and a
// stale copy cannot release a later lease.
func TestLeaseInvalidOnceReleased(t *testing.T) {
	t.Run("unix transport", func(t *testing.T) {
		f := newFixture(t, 4)
		got := make(chan Lease, 16)
		startSubscriber(t, SubscriberConfig{Path: f.path, OnLease: func(l Lease) { got <- l }})
		f.waitSubscribers(1)
		f.publish(1)
		l := <-got
		stale := l
		if !l.Valid() || !stale.Valid() {
			t.Fatal("a held lease is not Valid")
		}
		if err := l.Release(); err != nil {
			t.Fatal(err)
		}
		var next Lease
		for seq := uint64(2); seq <= 5; seq++ { // the camera reuses the slot
			f.waitInUse(0)
			f.publish(seq)
			next = <-got
			if seq < 5 {
				next.Release()
			}
		}
		if l.Valid() || stale.Valid() {
			t.Fatalf("released lease Valid %t, its copy %t; want false (the slot now holds frame %d)", l.Valid(), stale.Valid(), next.Handle.Seq)
		}
		if !next.Valid() {
			t.Fatal("the newest lease, held, is not Valid")
		}
		next.Release()
	})
	t.Run("in process", func(t *testing.T) {
		p := newInprocPool(t)
		tr := newInprocT(t, p)
		inprocPublish(t, tr, p, 1)
		l, _ := tr.TryLatest(0)
		stale := l
		if !stale.Valid() {
			t.Fatal("a held lease is not Valid")
		}
		l.Release()
		inprocPublish(t, tr, p, 2)
		next, _ := tr.TryLatest(0)
		if stale.Valid() || !next.Valid() {
			t.Fatalf("released lease's copy Valid %t, the next held one %t", stale.Valid(), next.Valid())
		}
		next.Release()
	})
	t.Run("copy baseline", func(t *testing.T) {
		f := newCopyFixture(t)
		sub := dialCopyT(t, f.srv.Path(), 1<<10)
		f.waitSubscribers(t, 1)
		src := NewCopySource(sub)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- src.Run(ctx) }()
		defer func() { cancel(); <-done }()
		lease := func(seq uint64) Lease {
			t.Helper()
			h := handles.Handle{Kind: handles.KindPoints, Seq: seq}
			if _, err := f.srv.Publish(&h, []byte{byte(seq)}); err != nil {
				t.Fatal(err)
			}
			select {
			case l := <-src.C(0):
				return l
			case <-time.After(5 * time.Second):
				t.Fatalf("frame %d not delivered", seq)
				return Lease{}
			}
		}
		l := lease(1)
		stale := l
		if !stale.Valid() {
			t.Fatal("a held lease is not Valid")
		}
		if err := l.Release(); err != nil {
			t.Fatal(err)
		}
		next := lease(2)
		if stale.Valid() || !next.Valid() {
			t.Fatalf("released lease's copy Valid %t, the next held one %t", stale.Valid(), next.Valid())
		}
		if err := stale.Release(); !errors.Is(err, ErrReleased) || !next.Valid() {
			t.Fatalf("a stale copy's Release = %v, next still Valid %t; want ErrReleased and the next lease untouched", err, next.Valid())
		}
		next.Release()
	})
}

// reuseSlotOf does what a camera does on seeing a subscriber's connection
// end: it reclaims every hold of the pool's only subscriber, then acquires
// slots (the free list is LIFO, so the reclaimed one comes first) until it
// has l's slot again, for a later frame. It gives the slots back.
func reuseSlotOf(t *testing.T, p *pinned.Pool, l Lease) {
	t.Helper()
	active := p.Active()
	if active.Len() != 1 {
		t.Fatalf("%d subscribers on the pool, want 1", active.Len())
	}
	if n := p.ReleaseAll(pinned.SubscriberID(bits.TrailingZeros32(uint32(active)))); n == 0 {
		t.Fatal("the camera reclaimed no hold")
	}
	var taken []pinned.Slot
	defer func() {
		for _, s := range taken {
			p.Abort(s)
		}
	}()
	for {
		s, err := p.Acquire()
		if err != nil {
			t.Fatalf("slot %d never came back: %v", l.Handle.Slot, err)
		}
		taken = append(taken, s)
		if s.Index() == l.Handle.Slot {
			s.Bytes()[0] = 0xEE // the later frame's first write
			return
		}
	}
}

// TestLeaseInvalidOnceTheCameraReusesItsSlot: the camera reclaims a
// connection's holds as soon as it sees the connection end, and may be
// writing the slots again before this side's receive goroutine has noticed
// (or when it never will: a reclaim this side did not cause). A lease whose
// slot the camera has acquired again must not be Valid, however alive the
// connection looks from here: the agent would plan from a later frame's
// half-written bytes.
func TestLeaseInvalidOnceTheCameraReusesItsSlot(t *testing.T) {
	eachWaitMode(t, func(t *testing.T, mode waitMode) {
		f := newFixture(t, 4)
		got := make(chan Lease, 16)
		startSubscriber(t, mode.apply(SubscriberConfig{Path: f.path, OnLease: func(l Lease) { got <- l }}))
		f.waitSubscribers(1)
		f.publish(1)
		l := <-got
		if !l.Valid() {
			t.Fatal("a held lease is not Valid")
		}
		reuseSlotOf(t, f.pool, l)
		if l.Valid() {
			t.Fatalf("lease of slot %d generation %#x Valid after the camera acquired the slot again (first byte now %#x)", l.Handle.Slot, l.Handle.Generation, l.Bytes()[0])
		}
		l.Release() // the camera no longer holds it for us: a stale release, counted there
	})
	t.Run("in process", func(t *testing.T) {
		p := newInprocPool(t)
		tr := newInprocT(t, p)
		inprocPublish(t, tr, p, 1)
		l, _ := tr.TryLatest(0)
		if !l.Valid() {
			t.Fatal("a held lease is not Valid")
		}
		reuseSlotOf(t, p, l)
		if l.Valid() {
			t.Fatalf("lease of slot %d Valid after the pool handed the slot to a writer again", l.Handle.Slot)
		}
		l.Release()
	})
}

// Lease.Valid is called once per frame: on a socket lease (the session's
// reference, the generation table) it allocates nothing.
func TestSocketLeaseValidAllocatesNothing(t *testing.T) {
	eachWaitMode(t, func(t *testing.T, mode waitMode) {
		f := newFixture(t, 4)
		got := make(chan Lease, 4)
		startSubscriber(t, mode.apply(SubscriberConfig{Path: f.path, OnLease: func(l Lease) { got <- l }}))
		f.waitSubscribers(1)
		f.publish(1)
		l := <-got
		defer l.Release()
		if allocs := testing.AllocsPerRun(100, func() {
			if !l.Valid() {
				t.Fatal("a held lease is not Valid")
			}
		}); allocs != 0 {
			t.Fatalf("Lease.Valid allocates %.1f times, want 0", allocs)
		}
	})
}
