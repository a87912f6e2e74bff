package transport

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/zerohop/zerohop/handles"
	"github.com/zerohop/zerohop/pinned"
)

func newInprocPool(t *testing.T) *pinned.Pool {
	p, err := pinned.New(pinned.Geometry{SlotCount: 6, SlotSize: 4096}, pinned.Options{Name: "points", ID: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// newInprocT is an in-process transport with one topic, "points", on p,
// closed at the test's end.
func newInprocT(t *testing.T, p *pinned.Pool) *Inproc {
	t.Helper()
	tr, err := NewInproc(InprocConfig{Topics: []Topic{{Name: "points", Kind: handles.KindPoints, Pool: p}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

func inprocPublish(t *testing.T, tr *Inproc, p *pinned.Pool, seq uint64) {
	t.Helper()
	slot, err := p.Acquire()
	if err != nil {
		t.Fatal(err)
	}
	slot.Bytes()[0] = byte(seq)
	h := handles.Handle{Kind: handles.KindPoints, Seq: seq, Length: 16}
	if _, err := tr.Publish(0, slot, &h); err != nil {
		t.Fatal(err)
	}
}

func TestInprocKeepLastAndRelease(t *testing.T) {
	p := newInprocPool(t)
	tr, err := NewInproc(InprocConfig{Topics: []Topic{{Name: "points", Kind: handles.KindPoints, Pool: p}}})
	if err != nil {
		t.Fatal(err)
	}
	for seq := uint64(1); seq <= 3; seq++ {
		inprocPublish(t, tr, p, seq)
	}
	l, ok := tr.TryLatest(0)
	if !ok || l.Handle.Seq != 3 || l.Bytes()[0] != 3 {
		t.Fatalf("TryLatest = seq %d ok %v, want 3", l.Handle.Seq, ok)
	}
	if p.InUse() != 1 || tr.Stats().Superseded != 2 {
		t.Fatalf("in use %d superseded %d, want 1 and 2", p.InUse(), tr.Stats().Superseded)
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(); !errors.Is(err, ErrReleased) {
		t.Fatalf("double release = %v", err)
	}
	if p.InUse() != 0 {
		t.Fatal("slot leaked")
	}
	// Closing reclaims what the consumer still holds.
	inprocPublish(t, tr, p, 4)
	held, _ := tr.TryLatest(0)
	tr.Close()
	if held.Valid() || p.InUse() != 0 {
		t.Fatalf("after close: valid %v, in use %d", held.Valid(), p.InUse())
	}
}

func TestInprocInlineDeliveryAllocatesNothing(t *testing.T) {
	p := newInprocPool(t)
	var got Lease
	tr, err := NewInproc(InprocConfig{Topics: []Topic{{Name: "points", Kind: handles.KindPoints, Pool: p}}, OnLease: func(l Lease) { got = l }})
	if err != nil {
		t.Fatal(err)
	}
	h := handles.Handle{Kind: handles.KindPoints, Length: 16}
	allocs := testing.AllocsPerRun(500, func() {
		slot, _ := p.Acquire()
		tr.Publish(0, slot, &h)
		if got.Handle.Slot != slot.Index() {
			panic("not delivered inline")
		}
		got.Release()
	})
	if allocs != 0 {
		t.Fatalf("inline publish → release allocates %.1f per frame", allocs)
	}
}

// A publish on a topic the transport was not built with is an error naming
// it, not an index out of range.
func TestInprocPublishOnAnUnknownTopicFails(t *testing.T) {
	p := newInprocPool(t)
	tr := newInprocT(t, p)
	slot, err := p.Acquire()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Abort(slot)
	for _, topic := range []int{1, -1} {
		h := handles.Handle{Kind: handles.KindImage, Length: 16}
		if _, err := tr.Publish(topic, slot, &h); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("topic %d", topic)) {
			t.Fatalf("publish on topic %d of 1: %v; want an error naming it", topic, err)
		}
	}
}
