package pinned

import (
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

// TestCurrentFollowsTheOwnersAcquires: a subscriber's view and the owner
// agree on which generation of a slot is current, from the Acquire that
// starts a use (before a byte is written) until the Acquire of the next
// one; a release alone does not end it, since nothing rewrites the slot
// until it is acquired again.
func TestCurrentFollowsTheOwnersAcquires(t *testing.T) {
	p := newTestPool(t, 1, 100, Options{Shared: true})
	v := openTestView(t, p)
	sub, err := p.Subscribe(1)
	if err != nil {
		t.Fatal(err)
	}
	current := func(step string, index uint32, gen uint64, want bool) {
		t.Helper()
		if got := v.Current(index, gen); got != want {
			t.Errorf("%s: view says slot %d generation %#x current = %t, want %t", step, index, gen, got, want)
		}
		if got := p.Current(index, gen); got != want {
			t.Errorf("%s: pool says slot %d generation %#x current = %t, want %t", step, index, gen, got, want)
		}
	}
	current("before any use", 0, 0, false)

	first, err := p.Acquire()
	if err != nil {
		t.Fatal(err)
	}
	current("acquired", 0, first.Generation(), true)
	if _, err := p.Publish(first, SubscriberSet(1)<<sub); err != nil {
		t.Fatal(err)
	}
	current("published", 0, first.Generation(), true)
	if err := p.Release(sub, 0, first.Generation()); err != nil {
		t.Fatal(err)
	}
	current("released, not yet reused", 0, first.Generation(), true)

	second, err := p.Acquire()
	if err != nil {
		t.Fatal(err)
	}
	if second.Index() != 0 || second.Generation() == first.Generation() {
		t.Fatalf("second use is slot %d generation %#x, want slot 0 with a new generation", second.Index(), second.Generation())
	}
	current("reacquired: the first use", 0, first.Generation(), false)
	current("reacquired: the second use", 0, second.Generation(), true)
	current("generation 0", 0, 0, false)
	current("out of range", 1, second.Generation(), false)
	current("far out of range", ^uint32(0), second.Generation(), false)
}

// TestGenerationTableStartsEmptyOnDirtyMemory: memory from a HostAllocator
// (cuMemHostAlloc) is not zeroed; a leftover word must not make a
// generation current that the pool never issued.
func TestGenerationTableStartsEmptyOnDirtyMemory(t *testing.T) {
	fa := &fakeAllocator{fill: 0xff}
	p := newTestPool(t, 2, 10, Options{Allocator: fa})
	for i := range uint32(2) {
		if p.Current(i, ^uint64(0)) {
			t.Fatalf("slot %d: generation %#x, left in the allocator's memory, is current", i, ^uint64(0))
		}
	}
}

// TestGenerationTableIsInTheSegment: the table sits after the last slot,
// on its own pages, so no slot's bytes and no table word overlap; it is
// where a peer that maps the segment finds it.
func TestGenerationTableIsInTheSegment(t *testing.T) {
	for _, g := range []Geometry{
		{SlotCount: 1, SlotSize: 1},
		{SlotCount: 3, SlotSize: PageSize + 1},
		{SlotCount: 513, SlotSize: 64}, // 513 words: two pages of table
	} {
		if off := g.GenerationsOffset(); off != g.Stride()*uint64(g.SlotCount) || off%PageSize != 0 {
			t.Errorf("%+v: table at %d, want %d, page-aligned", g, off, g.Stride()*uint64(g.SlotCount))
		}
		table := g.SegmentSize() - g.GenerationsOffset()
		if table < 8*uint64(g.SlotCount) || table%PageSize != 0 || table >= 8*uint64(g.SlotCount)+PageSize {
			t.Errorf("%+v: table of %d bytes for %d slots, want the fewest whole pages", g, table, g.SlotCount)
		}
		p := newTestPool(t, g.SlotCount, g.SlotSize, Options{})
		last, err := p.Acquire()
		for err == nil && last.Index() != g.SlotCount-1 {
			last, err = p.Acquire()
		}
		if err != nil {
			t.Fatal(err)
		}
		start := uintptr(unsafe.Pointer(&last.Bytes()[0])) - uintptr(unsafe.Pointer(&p.Memory()[0]))
		if end := uint64(start) + g.SlotSize; end > g.GenerationsOffset() {
			t.Errorf("%+v: the last slot's bytes end at %d, inside the table at %d", g, end, g.GenerationsOffset())
		}
	}
}

// TestCurrentMeansTheBytesAreThatUse races a writer that keeps reusing one
// slot, filling it with its generation's low byte, against a reader that
// reads the slot for the generation last announced and then asks Current.
// Whenever Current says yes, every byte read must be that generation's:
// the table changes before the writer writes a byte of the next use. (It
// fails, for one, if the table were updated at Publish instead of
// Acquire. On amd64 it cannot show a missing fence; on an arm64 machine it
// could.)
func TestCurrentMeansTheBytesAreThatUse(t *testing.T) {
	p := newTestPool(t, 1, 256, Options{Shared: true})
	v := openTestView(t, p)
	var announced atomic.Uint64 // the generation whose bytes are complete
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		for {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			s, err := p.Acquire()
			if err != nil {
				done <- err
				return
			}
			b := s.Bytes()
			for i := range b {
				b[i] = byte(s.Generation())
			}
			announced.Store(s.Generation())
			if _, err := p.Publish(s, 0); err != nil { // no subscriber: straight back to free
				done <- err
				return
			}
		}
	}()
	var checked, current int
	buf := make([]byte, 256)
	for deadline := time.Now().Add(300 * time.Millisecond); time.Now().Before(deadline) || current < 100; checked++ {
		if time.Now().After(deadline.Add(5 * time.Second)) {
			break
		}
		gen := announced.Load()
		if gen == 0 {
			continue
		}
		copy(buf, v.Slot(0))
		if !v.Current(0, gen) {
			continue
		}
		current++
		for i, c := range buf {
			if c != byte(gen) {
				close(stop)
				<-done
				t.Fatalf("Current(0, %#x) true after reading byte %d = %#x, want %#x: a later use's write reached what was read", gen, i, c, byte(gen))
			}
		}
	}
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if current == 0 {
		t.Fatalf("Current was never true in %d checks: the test saw no read of a whole use", checked)
	}
	t.Logf("%d checks, %d with the use still current", checked, current)
}
