package pinned

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

type delivery struct {
	index uint32
	gen   uint64
}

// pattern is what a writer puts in every byte of a slot for one generation.
func pattern(gen uint64, i int) byte { return byte(gen*31 + uint64(i)*7) }

// TestConcurrentNoDoubleHandoutNoWriteWhileHeld hammers one pool with
// several writers and subscribers. Writers mark a slot owned at Acquire and
// fail if it already was (handed out twice); subscribers verify the
// generation's pattern when they get a slot and again just before release
// (written while held). One subscriber is torn down mid-run with ReleaseAll.
func TestConcurrentNoDoubleHandoutNoWriteWhileHeld(t *testing.T) {
	const (
		slots    = 16
		size     = 512
		writers  = 3
		subsN    = 3
		runFor   = 300 * time.Millisecond
		maxIters = 200000
	)
	p := newTestPool(t, slots, size, Options{})
	var ids [subsN]SubscriberID
	var to SubscriberSet
	for i := range ids {
		ids[i], _ = p.Subscribe(4)
		to |= 1 << ids[i]
	}
	owned := make([]atomic.Bool, slots)
	var failures atomic.Int64
	fail := func(format string, args ...any) {
		if failures.Add(1) <= 5 {
			t.Errorf(format, args...)
		}
	}

	// Channels are the test's transport; in-flight limits bound them.
	chans := make([]chan delivery, subsN)
	for i := range chans {
		chans[i] = make(chan delivery, slots)
	}
	deadline := time.Now().Add(runFor)
	var wg sync.WaitGroup
	var published atomic.Int64
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; n < maxIters && time.Now().Before(deadline); n++ {
				s, err := p.Acquire()
				if errors.Is(err, ErrExhausted) {
					runtime.Gosched()
					continue
				}
				if !owned[s.Index()].CompareAndSwap(false, true) {
					fail("slot %d handed to two writers at once", s.Index())
				}
				b := s.Bytes()
				for i := range b {
					b[i] = pattern(s.Generation(), i)
				}
				owned[s.Index()].Store(false)
				held, err := p.Publish(s, to&p.Active())
				if err != nil {
					fail("publish: %v", err)
					continue
				}
				published.Add(1)
				if held == 0 {
					runtime.Gosched() // let subscribers catch up
				}
				for i, id := range ids {
					if held.Has(id) {
						chans[i] <- delivery{s.Index(), s.Generation()}
					}
				}
			}
		}()
	}
	// Subscriber 0 is torn down mid-run as if it died: from then on its
	// slots may be reused under it, which is correct, so its checks stop
	// counting. tornDown is set before ReleaseAll, so any reuse it sees
	// happens after the flag is visible.
	var tornDown atomic.Bool
	var subWG sync.WaitGroup
	for i := range ids {
		subWG.Add(1)
		go func() {
			defer subWG.Done()
			check := func(d delivery, when string) {
				b := p.SlotBytes(d.index)
				for j := range b {
					if b[j] != pattern(d.gen, j) {
						if i == 0 && tornDown.Load() {
							return
						}
						fail("slot %d gen %d byte %d changed %s: written while held", d.index, d.gen, j, when)
						return
					}
				}
			}
			for d := range chans[i] {
				check(d, "before hold")
				runtime.Gosched()
				check(d, "during hold")
				err := p.Release(ids[i], d.index, d.gen)
				// Subscriber 0 is torn down by ReleaseAll mid-run; its
				// remaining releases are rightly refused.
				if err != nil && !(i == 0 && tornDown.Load()) {
					fail("release by subscriber %d: %v", i, err)
				}
			}
		}()
	}
	time.Sleep(runFor / 2)
	tornDown.Store(true)
	p.ReleaseAll(ids[0])

	wg.Wait()
	for _, c := range chans {
		close(c)
	}
	subWG.Wait()
	st := p.Stats()
	if st.Released < 1000 {
		t.Fatalf("only %d releases in %v: the test did not exercise the pool", st.Released, runFor)
	}
	if st.InUse != 0 {
		t.Fatalf("%d slots in use after every subscriber released or was torn down", st.InUse)
	}
	t.Logf("published %d, released %d, released by teardown %d, drops %v", st.Published, st.Released, st.ReleasedAll, st.Subscribers)
}

// TestTreiberStackABA drives pop/push from many goroutines and checks that
// every index is on the stack exactly once at the end; a stack without the
// ABA tag loses or duplicates entries under this load.
func TestTreiberStackABA(t *testing.T) {
	const slots = 8
	p := newTestPool(t, slots, 64, Options{})
	var wg sync.WaitGroup
	var holders [slots]atomic.Int32
	var bad atomic.Int64
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []uint32
			for n := 0; n < 20000; n++ {
				if len(mine) < 3 {
					if idx, ok := p.pop(); ok {
						if holders[idx].Add(1) != 1 {
							bad.Add(1)
						}
						mine = append(mine, idx)
						continue
					}
				}
				if len(mine) > 0 {
					idx := mine[len(mine)-1]
					mine = mine[:len(mine)-1]
					holders[idx].Add(-1)
					p.push(idx)
				}
			}
			for _, idx := range mine {
				holders[idx].Add(-1)
				p.push(idx)
			}
		}()
	}
	wg.Wait()
	if bad.Load() != 0 {
		t.Fatalf("%d times an index was popped while already held", bad.Load())
	}
	seen := map[uint32]bool{}
	for {
		idx, ok := p.pop()
		if !ok {
			break
		}
		if seen[idx] {
			t.Fatalf("index %d on the free list twice", idx)
		}
		seen[idx] = true
	}
	if len(seen) != slots {
		t.Fatalf("%d indices on the free list, want %d", len(seen), slots)
	}
}
