package transport

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/zerohop/zerohop/handles"
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
		tr, err := NewInproc(InprocConfig{Topics: []Topic{{Name: "points", Kind: handles.KindPoints, Pool: p}}})
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Close()
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
