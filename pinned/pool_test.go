package pinned

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

func newTestPool(t testing.TB, count uint32, size uint64, opts Options) *Pool {
	t.Helper()
	if opts.Name == "" {
		opts.Name = "test"
	}
	p, err := New(Geometry{SlotCount: count, SlotSize: size}, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	})
	return p
}

func TestGeometryValidate(t *testing.T) {
	tests := []struct {
		name    string
		g       Geometry
		wantErr string
	}{
		{"a small pool is fine", Geometry{SlotCount: 4, SlotSize: 100}, ""},
		{"zero slots are refused", Geometry{SlotCount: 0, SlotSize: 100}, "slot count is 0"},
		{"zero-size slots are refused", Geometry{SlotCount: 4, SlotSize: 0}, "slot size is 0"},
		{"too many slots are refused", Geometry{SlotCount: MaxSlots + 1, SlotSize: 1}, "exceeds the maximum"},
		{"a huge slot is refused", Geometry{SlotCount: 1, SlotSize: 1 << 62}, "exceeds the segment limit"},
		{"count times stride overflowing the limit is refused", Geometry{SlotCount: 1 << 20, SlotSize: 1 << 30}, "slots × stride"},
		{"a max-size uint64 slot is refused", Geometry{SlotCount: 2, SlotSize: ^uint64(0)}, "exceeds the segment limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.g.Validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, ErrGeometry) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Validate() = %v, want ErrGeometry containing %q", err, tt.wantErr)
			}
			if _, err := New(tt.g, Options{Name: "bad"}); !errors.Is(err, ErrGeometry) {
				t.Fatalf("New() = %v, want ErrGeometry", err)
			}
		})
	}
}

func TestSlotsArePageAligned(t *testing.T) {
	for _, shared := range []bool{false, true} {
		p := newTestPool(t, 5, 5000, Options{Shared: shared})
		if got := p.Geometry().Stride(); got != 8192 {
			t.Fatalf("stride = %d, want 8192", got)
		}
		for i := uint32(0); i < 5; i++ {
			b := p.SlotBytes(i)
			if len(b) != 5000 || cap(b) != 5000 {
				t.Fatalf("slot %d: len %d cap %d, want 5000", i, len(b), cap(b))
			}
			if addr := uintptr(unsafe.Pointer(&b[0])); addr%PageSize != 0 {
				t.Fatalf("shared=%v slot %d payload at %#x, not page-aligned", shared, i, addr)
			}
		}
	}
}

func TestLifecycle(t *testing.T) {
	p := newTestPool(t, 2, 64, Options{Epoch: 0xabc, HoldTimeEvery: 1})
	a, _ := p.Subscribe(4)
	b, _ := p.Subscribe(4)

	s, err := p.Acquire()
	if err != nil {
		t.Fatal(err)
	}
	if s.Generation() != 0xabc<<32|1 {
		t.Fatalf("first generation = %#x, want epoch 0xabc, use 1", s.Generation())
	}
	held, err := p.Publish(s, SubscriberSet(1<<a|1<<b))
	if err != nil || held != SubscriberSet(1<<a|1<<b) {
		t.Fatalf("Publish = %b, %v; want both subscribers", held, err)
	}
	if err := p.Release(a, s.Index(), s.Generation()); err != nil {
		t.Fatal(err)
	}
	if got := p.Stats().InUse; got != 1 {
		t.Fatalf("in use after first of two releases = %d, want 1", got)
	}
	if err := p.Release(b, s.Index(), s.Generation()); err != nil {
		t.Fatal(err)
	}
	st := p.Stats()
	if st.InUse != 0 || st.Acquired != 1 || st.Published != 1 || st.Released != 2 {
		t.Fatalf("stats after lifecycle = %+v", st)
	}
	if total := sum(st.HoldTime[:]); total != 1 {
		t.Fatalf("hold-time samples = %d, want 1 (one slot freed by release)", total)
	}
	// Both slots are free again, and reuse bumps the generation.
	s1, _ := p.Acquire()
	s2, _ := p.Acquire()
	if s1.Index() != s.Index() || s1.Generation() != 0xabc<<32|2 {
		t.Fatalf("reacquired slot %d gen %d, want slot %d gen 2", s1.Index(), s1.Generation(), s.Index())
	}
	if _, err := p.Acquire(); !errors.Is(err, ErrExhausted) {
		t.Fatalf("third acquire = %v, want ErrExhausted", err)
	}
	_ = p.Abort(s1)
	_ = p.Abort(s2)
}

func sum(v []uint64) (n uint64) {
	for _, x := range v {
		n += x
	}
	return n
}

func TestRejectedReleases(t *testing.T) {
	p := newTestPool(t, 4, 64, Options{})
	a, _ := p.Subscribe(4)
	b, _ := p.Subscribe(4)
	held, _ := p.Acquire()
	if _, err := p.Publish(held, SubscriberSet(1<<a)); err != nil {
		t.Fatal(err)
	}
	writing, _ := p.Acquire()
	released, _ := p.Acquire()
	p.Publish(released, SubscriberSet(1<<a))
	if err := p.Release(a, released.Index(), released.Generation()); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name   string
		sub    SubscriberID
		index  uint32
		gen    uint64
		reason error
		count  func(RejectedReleases) uint64
	}{
		{"index out of range", a, 4, 1, ErrIndexRange, func(r RejectedReleases) uint64 { return r.IndexRange }},
		{"huge index", a, ^uint32(0), 1, ErrIndexRange, func(r RejectedReleases) uint64 { return r.IndexRange }},
		{"unknown subscriber", 7, held.Index(), held.Generation(), ErrUnknownSubscriber, func(r RejectedReleases) uint64 { return r.UnknownSubscriber }},
		{"subscriber id beyond the maximum", 200, held.Index(), held.Generation(), ErrUnknownSubscriber, func(r RejectedReleases) uint64 { return r.UnknownSubscriber }},
		{"stale generation", a, held.Index(), held.Generation() - 1, ErrStaleGeneration, func(r RejectedReleases) uint64 { return r.StaleGeneration }},
		{"future generation", a, held.Index(), held.Generation() + 1, ErrStaleGeneration, func(r RejectedReleases) uint64 { return r.StaleGeneration }},
		{"generation of an earlier pool (owner restart)", a, held.Index(), held.Generation() ^ 1<<40, ErrStaleGeneration, func(r RejectedReleases) uint64 { return r.StaleGeneration }},
		{"another subscriber's slot", b, held.Index(), held.Generation(), ErrNotHeld, func(r RejectedReleases) uint64 { return r.NotHeld }},
		{"double release", a, released.Index(), released.Generation(), ErrNotHeld, func(r RejectedReleases) uint64 { return r.NotHeld }},
		{"slot still being written", a, writing.Index(), writing.Generation(), ErrNotHeld, func(r RejectedReleases) uint64 { return r.NotHeld }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := p.Stats()
			err := p.Release(tt.sub, tt.index, tt.gen)
			var rerr *ReleaseError
			if !errors.Is(err, tt.reason) || !errors.As(err, &rerr) {
				t.Fatalf("Release = %v, want *ReleaseError wrapping %v", err, tt.reason)
			}
			after := p.Stats()
			if got := tt.count(after.Rejected) - tt.count(before.Rejected); got != 1 {
				t.Fatalf("rejection counter rose by %d, want 1", got)
			}
			if after.Rejected.Total()-before.Rejected.Total() != 1 {
				t.Fatalf("total rejections rose by %d, want 1", after.Rejected.Total()-before.Rejected.Total())
			}
			if after.InUse != before.InUse || after.Released != before.Released {
				t.Fatalf("rejected release changed state: in use %d→%d, released %d→%d",
					before.InUse, after.InUse, before.Released, after.Released)
			}
		})
	}
	// The legitimate holder can still release.
	if err := p.Release(a, held.Index(), held.Generation()); err != nil {
		t.Fatalf("holder's release after rejections: %v", err)
	}
}

func TestPublishAndAbortRules(t *testing.T) {
	p := newTestPool(t, 2, 64, Options{})
	a, _ := p.Subscribe(1)

	t.Run("publishing to nobody frees the slot", func(t *testing.T) {
		s, _ := p.Acquire()
		held, err := p.Publish(s, 0)
		if err != nil || held != 0 {
			t.Fatalf("Publish = %b, %v", held, err)
		}
		if p.Stats().InUse != 0 {
			t.Fatal("slot published to nobody is still in use")
		}
	})
	t.Run("publishing to an unregistered subscriber frees the slot", func(t *testing.T) {
		s, _ := p.Acquire()
		if held, _ := p.Publish(s, SubscriberSet(1<<9)); held != 0 || p.Stats().InUse != 0 {
			t.Fatalf("held = %b, in use %d", held, p.Stats().InUse)
		}
	})
	t.Run("a slot cannot be published twice", func(t *testing.T) {
		s, _ := p.Acquire()
		p.Publish(s, SubscriberSet(1<<a))
		if _, err := p.Publish(s, SubscriberSet(1<<a)); !errors.Is(err, ErrNotWriting) {
			t.Fatalf("second Publish = %v, want ErrNotWriting", err)
		}
		if err := p.Abort(s); !errors.Is(err, ErrNotWriting) {
			t.Fatalf("Abort after Publish = %v, want ErrNotWriting", err)
		}
		p.Release(a, s.Index(), s.Generation())
	})
	t.Run("abort returns the slot once", func(t *testing.T) {
		s, _ := p.Acquire()
		if err := p.Abort(s); err != nil {
			t.Fatal(err)
		}
		if err := p.Abort(s); !errors.Is(err, ErrNotWriting) {
			t.Fatalf("second Abort = %v, want ErrNotWriting", err)
		}
		if st := p.Stats(); st.InUse != 0 || st.Aborted != 1 {
			t.Fatalf("after abort: %+v", st)
		}
	})
	t.Run("a slot from another pool is refused", func(t *testing.T) {
		other := newTestPool(t, 1, 64, Options{Name: "other"})
		s, _ := other.Acquire()
		if _, err := p.Publish(s, 1); !errors.Is(err, ErrNotWriting) {
			t.Fatalf("Publish foreign slot = %v", err)
		}
		if err := p.Abort(s); !errors.Is(err, ErrNotWriting) {
			t.Fatalf("Abort foreign slot = %v", err)
		}
		other.Abort(s)
	})
}

func TestBackpressureSkipsSubscriberAtLimit(t *testing.T) {
	p := newTestPool(t, 8, 64, Options{})
	slow, _ := p.Subscribe(2)
	fast, _ := p.Subscribe(8)
	both := SubscriberSet(1<<slow | 1<<fast)
	var slots []Slot
	for i := 0; i < 4; i++ {
		s, _ := p.Acquire()
		held, err := p.Publish(s, both)
		if err != nil {
			t.Fatal(err)
		}
		wantSlow := i < 2
		if held.Has(slow) != wantSlow || !held.Has(fast) {
			t.Fatalf("publish %d held by %b; slow should hold=%v, fast always", i, held, wantSlow)
		}
		slots = append(slots, s)
	}
	if got := p.SubscriberDrops(slow); got != 2 {
		t.Fatalf("slow drops = %d, want 2", got)
	}
	if got := p.SubscriberDrops(fast); got != 0 {
		t.Fatalf("fast drops = %d, want 0", got)
	}
	// The pool's total keeps a subscriber's drops after it goes (the
	// camera's subscriber_drops_total is a counter: it summed the
	// connected subscribers', and fell when a slow one disconnected).
	if got := p.Stats().SubscriberDrops; got != 2 {
		t.Fatalf("pool's subscriber drops = %d, want 2", got)
	}
	defer func() {
		p.Unsubscribe(slow)
		if got := p.Stats().SubscriberDrops; got != 2 {
			t.Errorf("pool's subscriber drops after the slow one unsubscribed = %d, want still 2", got)
		}
	}()
	// Releasing makes room again.
	p.Release(slow, slots[0].Index(), slots[0].Generation())
	s, _ := p.Acquire()
	if held, _ := p.Publish(s, both); !held.Has(slow) {
		t.Fatal("slow subscriber not served after it released")
	}
}

func TestAcquireNeverBlocks(t *testing.T) {
	p := newTestPool(t, 1, 64, Options{})
	s, _ := p.Acquire()

	start := time.Now()
	if _, err := p.Acquire(); !errors.Is(err, ErrExhausted) {
		t.Fatalf("Acquire on empty pool = %v", err)
	}
	_, err := p.AcquireBefore(time.Now().Add(5 * time.Millisecond))
	if !errors.Is(err, ErrExhausted) {
		t.Fatalf("AcquireBefore on empty pool = %v", err)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("acquire on an empty pool took %v", el)
	}
	if got := p.Stats().Exhausted; got != 2 {
		t.Fatalf("exhausted = %d, want 2", got)
	}

	// A slot freed while waiting is picked up before the deadline.
	go func() {
		time.Sleep(2 * time.Millisecond)
		p.Abort(s)
	}()
	got, err := p.AcquireBefore(time.Now().Add(10 * time.Second))
	if err != nil {
		t.Fatalf("AcquireBefore after a slot was freed: %v", err)
	}
	p.Abort(got)
}

func TestReleaseAllAndUnsubscribe(t *testing.T) {
	p := newTestPool(t, 6, 64, Options{})
	gone, _ := p.Subscribe(6)
	stays, _ := p.Subscribe(6)
	for i := 0; i < 3; i++ {
		s, _ := p.Acquire()
		p.Publish(s, SubscriberSet(1<<gone))
	}
	shared, _ := p.Acquire()
	p.Publish(shared, SubscriberSet(1<<gone|1<<stays))

	if n := p.ReleaseAll(gone); n != 4 {
		t.Fatalf("ReleaseAll dropped %d holds, want 4", n)
	}
	if got := p.Stats().InUse; got != 1 {
		t.Fatalf("in use = %d, want 1 (the slot the other subscriber holds)", got)
	}
	if p.Active().Has(gone) {
		t.Fatal("a released-all subscriber is still open to publishes")
	}
	s, _ := p.Acquire()
	if held, _ := p.Publish(s, SubscriberSet(1<<gone|1<<stays)); held.Has(gone) {
		t.Fatal("publish reached a closed subscriber")
	}
	if got := p.SubscriberDrops(gone); got != 0 {
		t.Fatalf("a closed subscriber's skips counted as %d drops", got)
	}
	p.Release(stays, s.Index(), s.Generation())
	p.Unsubscribe(gone)
	if err := p.Release(gone, shared.Index(), shared.Generation()); !errors.Is(err, ErrUnknownSubscriber) {
		t.Fatalf("release by an unsubscribed id = %v", err)
	}
	if err := p.Release(stays, shared.Index(), shared.Generation()); err != nil {
		t.Fatal(err)
	}
	if p.Stats().InUse != 0 {
		t.Fatal("slots leaked")
	}
	// A freed id is not handed out again at once.
	again, err := p.Subscribe(1)
	if err != nil || again == gone || again == stays {
		t.Fatalf("Subscribe after Unsubscribe = %d, %v; want a fresh id (not %d or %d)", again, err, gone, stays)
	}
}

func TestHoldTimeSampling(t *testing.T) {
	if _, err := New(Geometry{SlotCount: 1, SlotSize: 1}, Options{HoldTimeEvery: 3}); err == nil {
		t.Fatal("HoldTimeEvery 3 (not a power of two) accepted")
	}
	p := newTestPool(t, 1, 64, Options{HoldTimeEvery: 4})
	sub, _ := p.Subscribe(1)
	for range 16 {
		s, _ := p.Acquire()
		p.Publish(s, 1<<sub)
		p.Release(sub, s.Index(), s.Generation())
	}
	st := p.Stats()
	if got := sum(st.HoldTime[:]); got != 4 {
		t.Fatalf("%d holds timed out of 16 at 1 in 4, want 4", got)
	}
}

func TestSubscriberLimit(t *testing.T) {
	p := newTestPool(t, 1, 64, Options{})
	for i := 0; i < MaxSubscribers; i++ {
		if _, err := p.Subscribe(1); err != nil {
			t.Fatalf("subscriber %d: %v", i, err)
		}
	}
	if _, err := p.Subscribe(1); !errors.Is(err, ErrTooManySubscriber) {
		t.Fatalf("subscriber %d = %v, want ErrTooManySubscriber", MaxSubscribers, err)
	}
	if _, err := p.Subscribe(0); err == nil {
		t.Fatal("in-flight limit 0 accepted")
	}
}

func TestSlotsFor(t *testing.T) {
	tests := []struct {
		name          string
		period, proc  time.Duration
		subs          int
		want          uint32
		wantErrSubstr string
	}{
		{"fast consumer", 33 * time.Millisecond, 5 * time.Millisecond, 1, 4, ""},
		{"consumer as slow as the period", 33 * time.Millisecond, 33 * time.Millisecond, 1, 4, ""},
		{"consumer slower than the period", 33 * time.Millisecond, 70 * time.Millisecond, 1, 6, ""},
		{"two subscribers", 33 * time.Millisecond, 10 * time.Millisecond, 2, 7, ""},
		{"zero processing", 10 * time.Millisecond, 0, 3, 7, ""},
		{"zero period", 0, time.Millisecond, 1, 0, "period"},
		{"negative processing", time.Millisecond, -1, 1, 0, "processing"},
		{"no subscribers", time.Millisecond, time.Millisecond, 0, 0, "subscribers"},
		{"absurd ratio", time.Nanosecond, time.Hour, 1, 0, "exceeds"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := SlotsFor(tt.period, tt.proc, tt.subs)
			if tt.wantErrSubstr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErrSubstr) {
					t.Fatalf("SlotsFor = %d, %v; want error with %q", got, err, tt.wantErrSubstr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("SlotsFor = %d, %v; want %d", got, err, tt.want)
			}
		})
	}
}

func TestNoAllocationsOnHotPath(t *testing.T) {
	p := newTestPool(t, 4, 4096, Options{})
	sub, _ := p.Subscribe(4)
	to := SubscriberSet(1 << sub)
	allocs := testing.AllocsPerRun(1000, func() {
		s, err := p.Acquire()
		if err != nil {
			panic(err)
		}
		s.Bytes()[0] = 1
		if _, err := p.Publish(s, to); err != nil {
			panic(err)
		}
		if err := p.Release(sub, s.Index(), s.Generation()); err != nil {
			panic(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("acquire → publish → release allocates %.1f times per run, want 0", allocs)
	}
}

type fakePinner struct {
	pinned, unpinned int
	access           Access
	size             int
	fail             error
}

type fakeRegion struct{ p *fakePinner }

func (r fakeRegion) Unpin() error { r.p.unpinned++; return nil }

func (f *fakePinner) Pin(mem []byte, access Access) (PinnedRegion, error) {
	if f.fail != nil {
		return nil, f.fail
	}
	f.pinned++
	f.access = access
	f.size = len(mem)
	return fakeRegion{f}, nil
}

func TestPinnerHookPlumbing(t *testing.T) {
	fp := &fakePinner{}
	p, err := New(Geometry{SlotCount: 3, SlotSize: 10}, Options{Name: "pinned", Pinner: fp})
	if err != nil {
		t.Fatal(err)
	}
	// Three slots of a page, then a page of generations: the pin covers both.
	if fp.pinned != 1 || fp.size != 4*PageSize || fp.access != ReadWrite {
		t.Fatalf("fake pinner saw %+v, want one read-write pin of %d bytes", fp, 4*PageSize)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if fp.unpinned != 1 {
		t.Fatalf("unpinned %d times at close, want 1", fp.unpinned)
	}

	failing := &fakePinner{fail: errors.New("CUDA_ERROR_NOT_PERMITTED")}
	_, err = New(Geometry{SlotCount: 1, SlotSize: 10}, Options{Name: "x", Pinner: failing})
	if err == nil || !strings.Contains(err.Error(), "CUDA_ERROR_NOT_PERMITTED") {
		t.Fatalf("New with failing pinner = %v", err)
	}
}

// fakeAllocator hands out extra bytes (a pinned allocator may round up)
// and checks that Free gets exactly the slice Allocate returned.
type fakeAllocator struct {
	allocated, freed int
	extra            int
	fill             byte // what the memory holds when handed out (cuMemHostAlloc does not zero it)
	last             []byte
	freeErr          error
}

func (f *fakeAllocator) Allocate(size int) ([]byte, error) {
	f.allocated++
	f.last = bytes.Repeat([]byte{f.fill}, size+f.extra)
	return f.last, nil
}

func (f *fakeAllocator) Free(mem []byte) error {
	f.freed++
	if len(mem) != len(f.last) || &mem[0] != &f.last[0] {
		f.freeErr = fmt.Errorf("Free got %d bytes, Allocate returned %d", len(mem), len(f.last))
	}
	return f.freeErr
}

func TestHostAllocatorPlumbing(t *testing.T) {
	for _, extra := range []int{0, PageSize} {
		fa := &fakeAllocator{extra: extra}
		p, err := New(Geometry{SlotCount: 2, SlotSize: 10}, Options{Allocator: fa})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Close(); err != nil || fa.freeErr != nil {
			t.Errorf("%d extra bytes: Close %v, %v", extra, err, fa.freeErr)
		}
		if fa.allocated != 1 || fa.freed != 1 {
			t.Errorf("%d extra bytes: fake allocator %+v", extra, fa)
		}
	}
}

func TestLockedPool(t *testing.T) {
	p, err := New(Geometry{SlotCount: 2, SlotSize: PageSize}, Options{Name: "locked", Lock: true})
	if err != nil {
		// The message must explain the limit; that is what this test checks
		// on machines where mlock is not allowed.
		if !strings.Contains(err.Error(), "RLIMIT_MEMLOCK") {
			t.Fatalf("mlock failure without the limit explained: %v", err)
		}
		return
	}
	defer p.Close()
	if !p.seg.locked {
		t.Fatal("Lock requested but segment not locked")
	}
}

func TestMlockErrorNamesLimitAndNeed(t *testing.T) {
	err := mlockError(unix.ENOMEM, 96<<20, unix.Rlimit{Cur: 8 << 20, Max: unix.RLIM_INFINITY})
	msg := err.Error()
	for _, want := range []string{"soft 8.0 MiB", "hard unlimited", "need 96.0 MiB", "ulimit -l"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
	if !errors.Is(err, unix.ENOMEM) {
		t.Error("errno not wrapped")
	}
}
