//go:build gpu

// Host↔device copy bandwidth, pinned (cuMemHostAlloc'd, async copy on a
// stream) against pageable (Go heap, synchronous cuMemcpyHtoD/DtoH), side
// by side in one run. Built only with -tags gpu; FAILS (never skips) without
// a GPU. It fails only on CUDA errors or wrong data, never on speed: the
// numbers are for the log (gpu-check records -test.v output).

package gpu

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

var bandwidthSizes = []struct {
	name string
	n    int
}{
	{"1MiB", 1 << 20},
	{"3MiB", 3 << 20}, // one camera image
	{"16MiB", 16 << 20},
	{"256MiB", 256 << 20},
}

const bandwidthReps = 20

// copyKind is one of the four copies measured.
type copyKind int

const (
	pinnedH2D copyKind = iota
	pageableH2D
	pinnedD2H
	pageableD2H
)

func (k copyKind) String() string {
	return [...]string{"H2D pinned  ", "H2D pageable", "D2H pinned  ", "D2H pageable"}[k]
}

// copyRig holds the buffers of the bandwidth test and benchmark: maxBytes
// of pinned host memory (Allocate), of Go heap and of device memory, a
// non-blocking stream for the async copies and two timing events.
type copyRig struct {
	c          *Context
	pinned     []byte // cuMemHostAlloc(PORTABLE|DEVICEMAP)
	heap       []byte // pageable Go heap
	dev        DevicePtr
	s          *Stream
	start, end *Event
}

// newCopyRig fails tb (never skips) without a GPU. Everything is released
// in tb's cleanup, the context last.
func newCopyRig(tb testing.TB, maxBytes int) *copyRig {
	tb.Helper()
	drv, c := openGPUContext(tb)
	caps := c.Capabilities()
	tb.Logf("driver CUDA %s; device 0: %s (%s)", drv.Version(), caps.Name, caps.Arch())
	return newCopyRigOn(tb, c, maxBytes)
}

// newCopyRigOn allocates the rig's buffers on c, released in tb's cleanup.
func newCopyRigOn(tb testing.TB, c *Context, maxBytes int) *copyRig {
	tb.Helper()
	var err error
	r := &copyRig{c: c, heap: make([]byte, maxBytes)}
	if r.pinned, err = c.Allocate(maxBytes); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Free(r.pinned) })
	if r.dev, err = c.MemAlloc(uint64(maxBytes)); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.MemFree(r.dev) })
	if r.s, err = c.NewStream(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { r.s.Destroy() })
	if r.start, err = c.NewEvent(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { r.start.Destroy() })
	if r.end, err = c.NewEvent(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { r.end.Destroy() })
	return r
}

// timeCopy runs one copy of n bytes of the given kind and returns its wall
// time and its device time (events), once the data has landed. Call it on
// the context thread (inside Do) so no channel hop is timed.
//
// Pinned: events around the async copy on r.s; wall = record, enqueue,
// record, wait for the end event. Pageable: wall = time.Now around the
// synchronous call alone (what a caller pays); events recorded around it on
// the legacy default stream, where cuMemcpyHtoD/DtoH run, and waited for,
// so that an HtoD DMA still in flight after the call has landed before the
// next copy.
func (r *copyRig) timeCopy(k copyKind, n int) (wall, device time.Duration, err error) {
	var s *Stream // the legacy default stream for the synchronous copies
	if k == pinnedH2D || k == pinnedD2H {
		s = r.s
	}
	if err := r.start.Record(s); err != nil {
		return 0, 0, err
	}
	t0 := time.Now()
	switch k {
	case pinnedH2D:
		err = r.c.CopyToDevice(r.dev, r.pinned[:n], s)
	case pageableH2D:
		err = r.c.CopyToDeviceSync(r.dev, r.heap[:n])
	case pinnedD2H:
		err = r.c.CopyFromDevice(r.pinned[:n], r.dev, s)
	case pageableD2H:
		err = r.c.CopyFromDeviceSync(r.heap[:n], r.dev)
	}
	if err != nil {
		return 0, 0, err
	}
	pageable := s == nil
	if pageable {
		wall = time.Since(t0)
	}
	if err := r.end.Record(s); err != nil {
		return 0, 0, err
	}
	if err := r.end.Synchronize(); err != nil {
		return 0, 0, err
	}
	if !pageable {
		wall = time.Since(t0)
	}
	device, err = Elapsed(r.start, r.end)
	return wall, device, err
}

// fillPattern writes 8-byte words derived from their index and seed;
// checkPattern returns the byte offset of the first word that differs, or -1.
func fillPattern(b []byte, seed uint64) {
	for i := 0; i+8 <= len(b); i += 8 {
		binary.LittleEndian.PutUint64(b[i:], patternWord(uint64(i), seed))
	}
}

func checkPattern(b []byte, seed uint64) int {
	for i := 0; i+8 <= len(b); i += 8 {
		if binary.LittleEndian.Uint64(b[i:]) != patternWord(uint64(i), seed) {
			return i
		}
	}
	return -1
}

func patternWord(i, seed uint64) uint64 { // splitmix64 finaliser
	z := i + seed*0x9E3779B97F4A7C15
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

// verifyRoundTrips checks content once per size, through all four copies:
// pinned → device → pageable, then pageable → device → pinned. It is also
// the warm-up of each kind at this size.
func (r *copyRig) verifyRoundTrips(n int) error {
	seedA, seedB := uint64(n)*2+1, uint64(n)*2+2
	fillPattern(r.pinned[:n], seedA)
	clear(r.heap[:n])
	for _, k := range []copyKind{pinnedH2D, pageableD2H} {
		if _, _, err := r.timeCopy(k, n); err != nil {
			return fmt.Errorf("%v: %w", k, err)
		}
	}
	if off := checkPattern(r.heap[:n], seedA); off >= 0 {
		return fmt.Errorf("pinned → device → pageable of %d bytes: first difference at byte %d", n, off)
	}
	fillPattern(r.heap[:n], seedB)
	clear(r.pinned[:n])
	for _, k := range []copyKind{pageableH2D, pinnedD2H} {
		if _, _, err := r.timeCopy(k, n); err != nil {
			return fmt.Errorf("%v: %w", k, err)
		}
	}
	if off := checkPattern(r.pinned[:n], seedB); off >= 0 {
		return fmt.Errorf("pageable → device → pinned of %d bytes: first difference at byte %d", n, off)
	}
	return nil
}

// copyStats is GB/s (1e9 bytes/s) at the median, the p99 time (slow tail,
// nearest rank) and the fastest copy.
type copyStats struct{ p50, p99, max float64 }

func statsOf(n int, d []time.Duration) copyStats {
	s := slices.Clone(d)
	slices.Sort(s)
	rate := func(t time.Duration) float64 { return float64(n) / t.Seconds() / 1e9 }
	rank := (99*len(s)+99)/100 - 1
	return copyStats{p50: rate(s[len(s)/2]), p99: rate(s[rank]), max: rate(s[0])}
}

func (s copyStats) String() string {
	return fmt.Sprintf("%6.2f / %6.2f / %6.2f", s.p50, s.p99, s.max)
}

func TestGPUHostToDeviceBandwidth(t *testing.T) {
	measureBandwidth(t, newCopyRig(t, bandwidthSizes[len(bandwidthSizes)-1].n))
}

func measureBandwidth(t *testing.T, r *copyRig) {
	t.Logf("GB/s = 1e9 B/s, p50 / p99 (slow tail) / max over %d copies per kind after a verified warm-up; "+
		"pinned = cuMemHostAlloc'd + async copy on a stream, pageable = Go heap + cuMemcpy{HtoD,DtoH}_v2; "+
		"events = device time until landed, wall = host time (pinned: enqueue + wait; pageable: the call alone)",
		bandwidthReps)
	began := time.Now()
	for _, sz := range bandwidthSizes {
		n := sz.n
		var wall, device [4][]time.Duration
		err := r.c.Do(func() error {
			if err := r.verifyRoundTrips(n); err != nil {
				return err
			}
			// Interleaved, so drift (clocks, other load) hits every kind alike.
			for range bandwidthReps {
				for k := pinnedH2D; k <= pageableD2H; k++ {
					w, d, err := r.timeCopy(k, n)
					if err != nil {
						return fmt.Errorf("%v: %w", k, err)
					}
					wall[k] = append(wall[k], w)
					device[k] = append(device[k], d)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatalf("%s: %v", sz.name, err)
		}
		var b strings.Builder
		fmt.Fprintf(&b, "%s (%d B), content verified both ways:", sz.name, n)
		var ev, wl [4]copyStats
		for k := pinnedH2D; k <= pageableD2H; k++ {
			ev[k], wl[k] = statsOf(n, device[k]), statsOf(n, wall[k])
			fmt.Fprintf(&b, "\n    %v  events %s GB/s   wall %s GB/s", k, ev[k], wl[k])
		}
		for _, dir := range []struct {
			name      string
			pin, page copyKind
		}{{"H2D", pinnedH2D, pageableH2D}, {"D2H", pinnedD2H, pageableD2H}} {
			fmt.Fprintf(&b, "\n    %s pinned/pageable p50 ratio: %.2fx (events), %.2fx (wall)", dir.name,
				ev[dir.pin].p50/ev[dir.page].p50, wl[dir.pin].p50/wl[dir.page].p50)
		}
		t.Log(b.String())
	}
	t.Logf("bandwidth measured in %v", time.Since(began).Round(time.Millisecond))
}

// BenchmarkGPUHostToDevice: MB/s (b.SetBytes) of host → device copies of
// each size, pinned (async on a stream, waited for each copy, as per frame)
// and pageable (synchronous from the Go heap).
func BenchmarkGPUHostToDevice(b *testing.B) {
	benchHostToDevice(b, newCopyRig(b, bandwidthSizes[len(bandwidthSizes)-1].n))
}

func benchHostToDevice(b *testing.B, r *copyRig) {
	fillPattern(r.pinned, 1) // touch every page before timing
	fillPattern(r.heap, 2)
	for _, mode := range []string{"pinned", "pageable"} {
		for _, sz := range bandwidthSizes {
			b.Run(mode+"/"+sz.name, func(b *testing.B) {
				n := sz.n
				src := r.heap[:n]
				if mode == "pinned" {
					src = r.pinned[:n]
				}
				b.SetBytes(int64(n))
				b.ResetTimer()
				err := r.c.Do(func() error { // on the context thread: no hop per copy
					for range b.N {
						if mode == "pinned" {
							if err := r.c.CopyToDevice(r.dev, src, r.s); err != nil {
								return err
							}
							if err := r.s.Synchronize(); err != nil {
								return err
							}
						} else if err := r.c.CopyToDeviceSync(r.dev, src); err != nil {
							return err
						}
					}
					// The last pageable DMA may still be in flight: wait for it.
					if err := r.end.Record(nil); err != nil {
						return err
					}
					return r.end.Synchronize()
				})
				if err != nil {
					b.Fatal(err)
				}
			})
		}
	}
}
