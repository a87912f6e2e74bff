package pinned

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
)

// BenchmarkAcquirePublishRelease is one frame's pool work, uncontended:
// Acquire, touch the payload, Publish to one subscriber, Release.
func BenchmarkAcquirePublishRelease(b *testing.B) {
	p := newTestPool(b, 8, 4096, Options{})
	sub, _ := p.Subscribe(8)
	to := SubscriberSet(1 << sub)
	b.ReportAllocs()
	for b.Loop() {
		s, err := p.Acquire()
		if err != nil {
			b.Fatal(err)
		}
		s.Bytes()[0] = 1
		p.Publish(s, to)
		p.Release(sub, s.Index(), s.Generation())
	}
}

// BenchmarkContended runs the same cycle from g goroutines on one pool.
// ns/op is wall time per cycle across all goroutines.
func BenchmarkContended(b *testing.B) {
	for _, g := range []int{2, 4, 8} {
		b.Run(fmt.Sprintf("goroutines=%d", g), func(b *testing.B) {
			p := newTestPool(b, uint32(4*g), 4096, Options{})
			sub, _ := p.Subscribe(4 * g)
			to := SubscriberSet(1 << sub)
			b.ReportAllocs()
			b.ResetTimer()
			var wg sync.WaitGroup
			per := b.N / g
			for range g {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < per; {
						s, err := p.Acquire()
						if errors.Is(err, ErrExhausted) {
							runtime.Gosched()
							continue
						}
						s.Bytes()[0] = 1
						p.Publish(s, to)
						p.Release(sub, s.Index(), s.Generation())
						i++
					}
				}()
			}
			wg.Wait()
		})
	}
}

var sink []byte

// BenchmarkAlternatives measures what a frame buffer costs without the pool,
// in the same run: a fresh escaping allocation (the GC pays) and sync.Pool.
func BenchmarkAlternatives(b *testing.B) {
	for _, size := range []int{4 << 10, 3 << 20} {
		name := fmt.Sprintf("%dKiB", size>>10)
		b.Run("pool/"+name, func(b *testing.B) {
			p := newTestPool(b, 8, uint64(size), Options{})
			sub, _ := p.Subscribe(8)
			b.ReportAllocs()
			for b.Loop() {
				s, _ := p.Acquire()
				s.Bytes()[0] = 1
				p.Publish(s, 1<<sub)
				p.Release(sub, s.Index(), s.Generation())
			}
		})
		b.Run("make/"+name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				buf := make([]byte, size)
				buf[0] = 1
				sink = buf
			}
		})
		b.Run("syncpool/"+name, func(b *testing.B) {
			sp := sync.Pool{New: func() any { s := make([]byte, size); return &s }}
			b.ReportAllocs()
			for b.Loop() {
				buf := sp.Get().(*[]byte)
				(*buf)[0] = 1
				sp.Put(buf)
			}
		})
	}
}
