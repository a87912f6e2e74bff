package telemetry

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
	"github.com/prometheus/client_golang/prometheus"
)

// HdrHistogram geometry: values are microseconds from 1 µs to 60 s with 3
// significant digits. A dense histogram of this range is ~136 KiB, so only
// the two record buffers per stage are dense; everything kept for reading is
// a PackedHistogram, which grows with the number of populated buckets.
const (
	lowestMicros  = 1
	highestMicros = 60_000_000
	sigFigs       = 3
)

// toMicros converts d to whole microseconds (rounded), clamped to the
// histogram's range: negative durations count as 0, beyond 60 s as 60 s.
func toMicros(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return min((int64(d)+500)/1000, highestMicros)
}

// stageHist is one stage's latency record.
//
// Writers (Record) touch only active, under mu, for one RecordValue. The
// reader (flush, under Recorder.readMu) swaps active with the cleared spare
// — mu is held only for the swap — and then, with no writer able to reach
// it, folds the drained buffer into since and into the window ring, and
// clears it to be the next spare.
type stageHist struct {
	name string
	prom prometheus.Observer // lock-free; seconds

	mu     sync.Mutex
	active *hdr.Histogram // guarded by mu

	// Reader side, guarded by Recorder.readMu.
	spare     *hdr.Histogram       // empty; becomes active at the next flush
	since     *hdr.PackedHistogram // everything since start
	ring      []*hdr.PackedHistogram
	ringSlice []int64 // ring[i] holds values flushed during slice number ringSlice[i]
}

func newStageHist(name string, slots int, prom prometheus.Observer) *stageHist {
	s := &stageHist{
		name:      name,
		prom:      prom,
		active:    hdr.New(lowestMicros, highestMicros, sigFigs),
		spare:     hdr.New(lowestMicros, highestMicros, sigFigs),
		since:     hdr.NewPacked(lowestMicros, highestMicros, sigFigs),
		ring:      make([]*hdr.PackedHistogram, slots),
		ringSlice: make([]int64, slots),
	}
	for i := range s.ring {
		s.ring[i] = hdr.NewPacked(lowestMicros, highestMicros, sigFigs)
		s.ringSlice[i] = math.MinInt64
	}
	return s
}

// record is the hot path: no allocation, one short critical section.
func (s *stageHist) record(d time.Duration) {
	us := toMicros(d)
	s.mu.Lock()
	_ = s.active.RecordValue(us) // in range by construction: cannot fail
	s.mu.Unlock()
	s.prom.Observe(max(d, 0).Seconds())
}

// flush moves what was recorded since the last flush into since and into
// the ring slot of slice number slice. Call with Recorder.readMu held.
func (s *stageHist) flush(slice int64) {
	s.mu.Lock()
	drained := s.active
	s.active = s.spare
	s.mu.Unlock()
	s.spare = drained
	if drained.TotalCount() == 0 {
		return
	}
	s.since.MergeFrom(drained)
	i := int(uint64(slice) % uint64(len(s.ring)))
	if s.ringSlice[i] != slice {
		s.ring[i].Reset()
		s.ringSlice[i] = slice
	}
	s.ring[i].MergeFrom(drained)
	drained.Reset()
}

// window merges the ring slots of the last len(ring) slices up to and
// including slice into dst (reset first). Call with Recorder.readMu held.
func (s *stageHist) window(slice int64, dst *hdr.PackedHistogram) {
	dst.Reset()
	for i, h := range s.ring {
		if age := slice - s.ringSlice[i]; s.ringSlice[i] != math.MinInt64 && age >= 0 && age < int64(len(s.ring)) {
			dst.Merge(h)
		}
	}
}

// Percentiles summarises a latency distribution, in microseconds. Pn is
// the nearest-rank percentile: the smallest recorded value that at least
// n% of the samples do not exceed (rank ceil(n/100 × count)), given as
// HdrHistogram's highest equivalent value: exact below 2048 µs, within
// 0.1% above the recorded value beyond.
type Percentiles struct {
	Count uint64  `json:"count"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P99   float64 `json:"p99"`
	P999  float64 `json:"p999"`
	Max   float64 `json:"max"`
}

// Between summarises the samples recorded between two snapshots of one
// stage's since-start histogram (Recorder.Histograms, earlier then later):
// the later's bucket counts less the earlier's. Percentiles cannot be
// subtracted; bucket counts can. A benchmark uses it to leave its warm-up
// out.
func Between(earlier, later string) (Percentiles, error) {
	a, err := hdr.Decode([]byte(earlier))
	if err != nil {
		return Percentiles{}, fmt.Errorf("decode the earlier histogram: %w", err)
	}
	b, err := hdr.Decode([]byte(later))
	if err != nil {
		return Percentiles{}, fmt.Errorf("decode the later histogram: %w", err)
	}
	sa, sb := a.Export(), b.Export()
	if sa.LowestTrackableValue != sb.LowestTrackableValue || sa.HighestTrackableValue != sb.HighestTrackableValue ||
		sa.SignificantFigures != sb.SignificantFigures || len(sa.Counts) != len(sb.Counts) {
		return Percentiles{}, errors.New("the two histograms differ in range or precision")
	}
	for i, c := range sa.Counts {
		if sb.Counts[i] -= c; sb.Counts[i] < 0 {
			return Percentiles{}, errors.New("the later histogram lacks samples of the earlier one: not a later snapshot of the same stage")
		}
	}
	return percentilesOf(hdr.Import(sb)), nil
}

// histogram is what percentilesOf reads: hdr.PackedHistogram or
// hdr.Histogram.
type histogram interface {
	TotalCount() int64
	Max() int64
	ValueAtPercentilesSlice([]float64) []int64
}

func percentilesOf(h histogram) Percentiles {
	n := h.TotalCount()
	if n == 0 {
		return Percentiles{}
	}
	// HdrHistogram picks the sample of rank int(p/100 × n + 0.5), the
	// nearest, which may lie below the p-th percentile: with 1.02% of 1863
	// samples at 20 ms, its p99 was a 3 ms sample. Ask it for the
	// percentile whose rounded rank is the nearest-rank one, ceil(p/100 × n).
	// The rank in integers (per mille): in floats, 0.999 × n is off by
	// more than any fixed slack once n passes about 1.7e7 (days of frames
	// since start), and its ceiling one sample too high.
	ps := []float64{500, 900, 990, 999}
	for i, pm := range ps {
		rank := max((int64(pm)*n+999)/1000, 1)
		ps[i] = float64(rank) / float64(n) * 100
	}
	v := h.ValueAtPercentilesSlice(ps)
	return Percentiles{Count: uint64(n),
		P50: float64(v[0]), P90: float64(v[1]), P99: float64(v[2]), P999: float64(v[3]), Max: float64(h.Max())}
}
