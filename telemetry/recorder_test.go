package telemetry

import (
	"context"
	"errors"
	"math"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
	dto "github.com/prometheus/client_model/go"
)

// fakeClock is an injected clock that tests move by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Add(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

func newRecorder(t testing.TB, opts Options) (*Recorder, *fakeClock) {
	t.Helper()
	clk := newFakeClock()
	if opts.Now == nil {
		opts.Now = clk.Now
	}
	r, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return r, clk
}

// near reports whether got is within HdrHistogram's 3-significant-digit
// precision (0.1%; values below 2048 µs are exact) of want.
func near(got, want float64) bool { return math.Abs(got-want) <= want*1e-3 }

func TestPercentilesOfKnownData(t *testing.T) {
	r, _ := newRecorder(t, Options{})
	for us := 1; us <= 1000; us++ {
		r.Record(StageInfer, time.Duration(us)*time.Microsecond)
	}
	snap := r.Snapshot()
	want := Percentiles{Count: 1000, P50: 500, P90: 900, P99: 990, P999: 999, Max: 1000}
	for _, got := range []Percentiles{snap.Stages[StageInfer].SinceStart, snap.Stages[StageInfer].Window} {
		if got.Count != want.Count || !near(got.P50, want.P50) || !near(got.P90, want.P90) ||
			!near(got.P99, want.P99) || !near(got.P999, want.P999) || !near(got.Max, want.Max) {
			t.Fatalf("percentiles %+v, want ≈ %+v", got, want)
		}
	}
	if other := snap.Stages[StageVoxel].SinceStart; other != (Percentiles{}) {
		t.Fatalf("untouched stage has %+v", other)
	}
}

// TestPercentilesAreNearestRank: Pn is the sample of rank ceil(n/100 ×
// count), the smallest that n% of the samples do not exceed. HdrHistogram
// rounds the rank to the nearest instead, one sample too low whenever the
// fraction is below a half: at 1863 samples (a minute at 30 Hz, the bench's
// size), its p99 of 1..1863 µs was 1844 µs, under which lie only 98.98%.
func TestPercentilesAreNearestRank(t *testing.T) {
	for _, tc := range []struct {
		name   string
		record func(r *Recorder)
		want   Percentiles // exact below 2048 µs, else within 0.1%
	}{
		{"1 to 1863 µs", func(r *Recorder) {
			for us := 1; us <= 1863; us++ {
				r.Record(StageInfer, time.Duration(us)*time.Microsecond)
			}
		}, Percentiles{Count: 1863, P50: 932, P90: 1677, P99: 1845, P999: 1862, Max: 1863}},
		{"1.02% of frames at 20 ms", func(r *Recorder) {
			for i := range 1863 {
				d := 3 * time.Millisecond
				if i >= 1844 {
					d = 20 * time.Millisecond
				}
				r.Record(StageInfer, d)
			}
		}, Percentiles{Count: 1863, P50: 3000, P90: 3000, P99: 20000, P999: 20000, Max: 20000}},
		{"one sample", func(r *Recorder) { r.Record(StageInfer, 7*time.Microsecond) },
			Percentiles{Count: 1, P50: 7, P90: 7, P99: 7, P999: 7, Max: 7}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := newRecorder(t, Options{})
			tc.record(r)
			got, want := r.Snapshot().Stages[StageInfer].SinceStart, tc.want
			match := func(g, w float64) bool { return g == w || (w >= 2048 && near(g, w)) }
			if got.Count != want.Count || !match(got.P50, want.P50) || !match(got.P90, want.P90) ||
				!match(got.P99, want.P99) || !match(got.P999, want.P999) || !match(got.Max, want.Max) {
				t.Fatalf("percentiles %+v, want %+v", got, want)
			}
		})
	}
}

// TestPercentileRanksOfLongRuns: since start, a stage holds days of
// samples. At 3e7 (11.6 days at 30 Hz) with exactly 99.9% of them at
// 100 µs, p99.9 is 100 µs; ranks taken in floats, ceil(0.999 × n) came out
// one sample too high (200 µs).
func TestPercentileRanksOfLongRuns(t *testing.T) {
	for _, n := range []int64{3e7, 1e8, 7e9, 1e12} {
		for _, pm := range []int64{500, 900, 990, 999} {
			// Exactly pm‰ at 100 µs, then one fewer: the rank is the
			// last of them, then the first at 200 µs.
			for _, tc := range []struct{ low, want int64 }{{pm * n / 1000, 100}, {pm*n/1000 - 1, 200}} {
				h := hdr.New(lowestMicros, highestMicros, sigFigs)
				h.RecordValues(100, tc.low)
				h.RecordValues(200, n-tc.low)
				got := percentilesOf(h)
				v := map[int64]float64{500: got.P50, 900: got.P90, 990: got.P99, 999: got.P999}[pm]
				if v != float64(tc.want) {
					t.Errorf("%d samples, %d of them at 100 µs, the rest at 200: p%v = %v µs, want %d", n, tc.low, float64(pm)/10, v, tc.want)
				}
			}
		}
	}
}

func TestRecordConvertsDurations(t *testing.T) {
	tests := []struct {
		name string
		d    time.Duration
		want float64 // µs, as max
	}{
		{"negative counts as zero", -time.Second, 0},
		{"sub-microsecond rounds down", 1400 * time.Nanosecond, 1},
		{"rounds to nearest microsecond", 1600 * time.Nanosecond, 2},
		{"exact", 250 * time.Microsecond, 250},
		{"longer than 60 s clamps to 60 s", time.Hour, 60e6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, _ := newRecorder(t, Options{Stages: []string{"s"}})
			r.Record(0, tt.d)
			got := r.Snapshot().Stages[0].SinceStart
			if got.Count != 1 || !near(got.Max, tt.want) {
				t.Fatalf("recorded %v as %+v, want max ≈ %v µs", tt.d, got, tt.want)
			}
		})
	}
}

func TestWindowSlides(t *testing.T) {
	r, clk := newRecorder(t, Options{Stages: []string{"s"}}) // 10 × 1 s
	check := func(when string, wantWindow, wantSince uint64, wantP50 float64) {
		t.Helper()
		st := r.Snapshot().Stages[0]
		if st.Window.Count != wantWindow || st.SinceStart.Count != wantSince || wantWindow > 0 && !near(st.Window.P50, wantP50) {
			t.Fatalf("%s: window %+v, since start %+v; want window count %d (p50 %v), since start %d",
				when, st.Window, st.SinceStart, wantWindow, wantP50, wantSince)
		}
	}
	for range 10 {
		r.Record(0, 100*time.Microsecond)
	}
	check("at start", 10, 10, 100)
	clk.Add(5 * time.Second)
	for range 30 {
		r.Record(0, 200*time.Microsecond)
	}
	check("after 5 s", 40, 40, 200)
	clk.Add(5 * time.Second)
	check("after 10 s the first slice has left", 30, 40, 200)
	clk.Add(5 * time.Second)
	check("after 15 s the window is empty", 0, 40, 0)
	r.Record(0, 300*time.Microsecond)
	check("new value", 1, 41, 300)
}

func TestRunFlushesWithoutReaders(t *testing.T) {
	r, err := New(Options{Stages: []string{"s"}, Slice: time.Millisecond, Window: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	r.Record(0, time.Millisecond)
	time.Sleep(30 * time.Millisecond) // several flushes; the value ages out of the 10 ms window
	cancel()
	<-done
	st := r.Snapshot().Stages[0]
	if st.SinceStart.Count != 1 || st.Window.Count != 0 {
		t.Fatalf("after Run: window %+v, since start %+v; want the value flushed and aged out", st.Window, st.SinceStart)
	}
}

func TestRecordDoesNotAllocate(t *testing.T) {
	r, _ := newRecorder(t, Options{})
	d := time.Duration(0)
	allocs := testing.AllocsPerRun(10000, func() {
		d += 7 * time.Microsecond
		r.Record(StageE2E, d)
		r.Record(StagePlan, -d)
		r.Record(StageID(99), d) // ignored
		r.Inc(FramesReceived)
		r.Add(FramesDropped, 2)
	})
	if allocs != 0 {
		t.Fatalf("recording allocates %v times per frame, want 0", allocs)
	}
	if r.Count(FramesReceived) < 10000 || r.Count(FramesDropped) < 20000 {
		t.Fatalf("counters %d, %d", r.Count(FramesReceived), r.Count(FramesDropped))
	}
}

// TestConcurrentRecordAndRead runs writers, snapshots and scrapes at once
// (meant for -race) and checks that no sample is lost or counted twice.
func TestConcurrentRecordAndRead(t *testing.T) {
	r, clk := newRecorder(t, Options{})
	const writers, perWriter = 4, 5000
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range writers {
		wg.Go(func() {
			for i := range perWriter {
				r.Record(StageID((w+i)%len(r.Stages())), time.Duration(i)*time.Microsecond)
				r.Inc(FramesProcessed)
			}
		})
	}
	var readers sync.WaitGroup
	readers.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
				r.Snapshot()
				if _, err := r.Registry().Gather(); err != nil {
					t.Error(err)
				}
				clk.Add(300 * time.Millisecond)
			}
		}
	})
	wg.Wait()
	close(stop)
	readers.Wait()

	var total uint64
	for _, st := range r.Snapshot().Stages {
		total += st.SinceStart.Count
	}
	if total != writers*perWriter || r.Count(FramesProcessed) != writers*perWriter {
		t.Fatalf("hdr holds %d samples, counter %d; want %d", total, r.Count(FramesProcessed), writers*perWriter)
	}
	var promTotal uint64
	for _, m := range gather(t, r, "zerohop_stage_latency_seconds") {
		promTotal += m.GetHistogram().GetSampleCount()
	}
	if promTotal != writers*perWriter {
		t.Fatalf("prometheus holds %d samples, want %d", promTotal, writers*perWriter)
	}
}

func gather(t testing.TB, r *Recorder, name string) []*dto.Metric {
	t.Helper()
	mfs, err := r.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()
		}
	}
	t.Fatalf("no metric %q", name)
	return nil
}

func TestCustomStages(t *testing.T) {
	r, _ := newRecorder(t, Options{Stages: []string{"decode", "track"}})
	if got := strings.Join(r.Stages(), ","); got != "decode,track" {
		t.Fatalf("stages %q", got)
	}
	id, ok := r.Stage("track")
	if !ok || id != 1 {
		t.Fatalf("Stage(track) = %d %v, want 1 true", id, ok)
	}
	if _, ok := r.Stage("infer"); ok {
		t.Fatal("found a default stage in a custom set")
	}
	r.Record(id, time.Millisecond)
	r.Record(2, time.Millisecond)  // out of range: ignored
	r.Record(-1, time.Millisecond) // out of range: ignored
	snap := r.Snapshot()
	if len(snap.Stages) != 2 || snap.Stages[1].Name != "track" || snap.Stages[1].SinceStart.Count != 1 || snap.Stages[0].SinceStart.Count != 0 {
		t.Fatalf("snapshot stages %+v", snap.Stages)
	}
}

func TestOptionsValidation(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		want string
	}{
		{"no stages", Options{Stages: []string{}}, "Stages is empty"},
		{"empty stage name", Options{Stages: []string{"a", ""}}, `Stages[1] ""`},
		{"duplicate stage", Options{Stages: []string{"a", "b", "a"}}, `Stages[2] "a": duplicate`},
		{"invalid UTF-8 stage", Options{Stages: []string{"\xff"}}, `Stages[0] "\xff"`},
		{"bad namespace", Options{Namespace: "zero-hop"}, `Namespace "zero-hop"`},
		{"window not a multiple", Options{Window: 1500 * time.Millisecond}, "Window 1.5s"},
		{"window shorter than slice", Options{Window: time.Second, Slice: 2 * time.Second}, "Window 1s"},
		{"negative slice", Options{Slice: -time.Second}, "Slice -1s"},
		{"too many slices", Options{Window: time.Hour, Slice: 100 * time.Millisecond}, "at most 3600 slices"},
		{"decreasing buckets", Options{Buckets: []float64{0.1, 0.05}}, "Buckets[1] 0.05"},
		{"NaN bucket", Options{Buckets: []float64{math.NaN()}}, "Buckets[0] NaN"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New error %v, want one mentioning %q", err, tt.want)
			}
		})
	}
}

func TestFuncMetrics(t *testing.T) {
	r, _ := newRecorder(t, Options{})
	inUse := 3.0
	if err := r.AddGaugeFunc("pool_in_use", "Slots leased.", func() float64 { return inUse }); err != nil {
		t.Fatal(err)
	}
	if err := r.AddCounterFunc("pool_drops_total", "Frames dropped by the pool.", func() float64 { return 7 }); err != nil {
		t.Fatal(err)
	}
	inUse = 5
	snap := r.Snapshot()
	if snap.Gauges["pool_in_use"] != 5 || snap.Counters["pool_drops_total"] != 7 {
		t.Fatalf("gauges %v counters %v", snap.Gauges, snap.Counters)
	}
	if v := gather(t, r, "zerohop_pool_in_use")[0].GetGauge().GetValue(); v != 5 {
		t.Fatalf("prometheus gauge %v, want 5", v)
	}
	if v := gather(t, r, "zerohop_pool_drops_total")[0].GetCounter().GetValue(); v != 7 {
		t.Fatalf("prometheus counter %v, want 7", v)
	}

	bad := []struct {
		name, metric string
		f            func() float64
		want         string
	}{
		{"duplicate", "pool_in_use", func() float64 { return 0 }, `"zerohop_pool_in_use"`},
		{"clashes with a built-in", "frames_received_total", func() float64 { return 0 }, "frames_received_total"},
		{"invalid name", "pool-in-use", func() float64 { return 0 }, `"pool-in-use"`},
		{"leading digit", "1pool", func() float64 { return 0 }, `"1pool"`},
		{"nil function", "x", nil, "nil function"},
	}
	for _, b := range bad {
		t.Run(b.name, func(t *testing.T) {
			err := r.AddGaugeFunc(b.metric, "h", b.f)
			if err == nil || !strings.Contains(err.Error(), b.want) {
				t.Fatalf("AddGaugeFunc(%q) = %v, want an error mentioning %s", b.metric, err, b.want)
			}
		})
	}
	if len(r.Snapshot().Gauges) != 1 {
		t.Fatal("a rejected metric reached the snapshot")
	}
}

func TestLabels(t *testing.T) {
	r, _ := newRecorder(t, Options{})
	if s := r.Snapshot(); s.Provider != "unknown" || s.GPU != "none" || s.VoxelPath != "unknown" || s.GPUKernels != "none" {
		t.Fatalf("initial labels %q %q %q %q", s.Provider, s.GPU, s.VoxelPath, s.GPUKernels)
	}
	r.SetProvider("cuda")
	r.SetProvider("cpu") // replaces, not adds
	r.SetGPU("NVIDIA H200")
	r.SetVoxelPath("gpu")
	if err := r.SetLabel(LabelHandoff, "rings"); err != nil {
		t.Fatal(err)
	}
	if err := r.SetLabel(LabelGPUKernels, "compute_70"); err != nil {
		t.Fatal(err)
	}
	if s := r.Snapshot(); s.Inputs != "unknown" {
		t.Fatalf("initial inputs label %q", s.Inputs)
	}
	if err := r.SetLabel(LabelInputs, "lidar"); err != nil {
		t.Fatal(err)
	}
	if err := r.SetLabel("colour", "red"); err == nil || !strings.Contains(err.Error(), `"colour"`) || !strings.Contains(err.Error(), `"gpu_kernels"`) {
		t.Fatalf("unknown label: %v; want it named, with the known ones", err)
	}
	s := r.Snapshot()
	if s.Provider != "cpu" || s.GPU != "NVIDIA H200" || s.VoxelPath != "gpu" || s.Handoff != "rings" || s.GPUKernels != "compute_70" || r.Label(LabelGPU) != "NVIDIA H200" {
		t.Fatalf("labels %q %q %q %q %q", s.Provider, s.GPU, s.VoxelPath, s.Handoff, s.GPUKernels)
	}
	if ms := gather(t, r, "zerohop_gpu_kernels_info"); len(ms) != 1 || ms[0].GetLabel()[0].GetValue() != "compute_70" {
		t.Fatalf("gpu kernels info metric %v", ms)
	}
	if s.Inputs != "lidar" {
		t.Fatalf("inputs label %q, want lidar", s.Inputs)
	}
	if ms := gather(t, r, "zerohop_inputs_info"); len(ms) != 1 || ms[0].GetLabel()[0].GetValue() != "lidar" {
		t.Fatalf("inputs info metric %v", ms)
	}
	if ms := gather(t, r, "zerohop_handoff_info"); len(ms) != 1 || ms[0].GetLabel()[0].GetValue() != "rings" {
		t.Fatalf("handoff info metric %v", ms)
	}
	ms := gather(t, r, "zerohop_execution_provider_info")
	if len(ms) != 1 || ms[0].GetLabel()[0].GetValue() != "cpu" || ms[0].GetGauge().GetValue() != 1 {
		t.Fatalf("provider info metric %v", ms)
	}
}

func TestNoGlobalRegistry(t *testing.T) {
	a, _ := newRecorder(t, Options{})
	b, _ := newRecorder(t, Options{})
	if a.Registry() == b.Registry() {
		t.Fatal("two Recorders share a registry")
	}
	// Same metric names in two Recorders must not clash.
	if err := errors.Join(a.AddGaugeFunc("g", "h", func() float64 { return 1 }),
		b.AddGaugeFunc("g", "h", func() float64 { return 2 })); err != nil {
		t.Fatal(err)
	}
}

func BenchmarkRecord(b *testing.B) {
	r, _ := newRecorder(b, Options{})
	d := time.Duration(0)
	b.ReportAllocs()
	for b.Loop() {
		d = (d + 13*time.Microsecond) % (50 * time.Millisecond)
		r.Record(StageInfer, d)
	}
}

func BenchmarkRecordParallel(b *testing.B) {
	r, _ := newRecorder(b, Options{})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		d := time.Duration(0)
		for pb.Next() {
			d = (d + 13*time.Microsecond) % (50 * time.Millisecond)
			r.Record(StageInfer, d)
		}
	})
}

// histogramQuantile is PromQL's histogram_quantile on one classic
// histogram: linear interpolation inside the bucket holding rank q·count,
// from the bucket below's bound (0 for the first).
func histogramQuantile(q float64, h *dto.Histogram) float64 {
	rank := q * float64(h.GetSampleCount())
	lower, below := 0.0, 0.0
	for _, b := range h.GetBucket() {
		if n := float64(b.GetCumulativeCount()); n >= rank {
			return lower + (b.GetUpperBound()-lower)*(rank-below)/(n-below)
		}
		lower, below = b.GetUpperBound(), float64(b.GetCumulativeCount())
	}
	return math.Inf(1)
}

// The /metrics histograms agree with /latency's exact percentiles to
// within one bucket's 1.5×, from a microseconds stage (plan) to a
// milliseconds one (e2e): an operator's histogram_quantile must not read
// 50 µs for a 3 µs stage, or 19 ms for an 11.6 ms p99.
func TestPrometheusQuantilesTrackTheExactOnes(t *testing.T) {
	r, _ := newRecorder(t, Options{Stages: []string{"plan", "e2e"}})
	for i := range 1000 {
		r.Record(0, time.Duration(2000+i*2)*time.Nanosecond)                                     // 2–4 µs
		r.Record(1, time.Duration(5000+int(6600*math.Pow(float64(i)/1000, 8)))*time.Microsecond) // 5–11.6 ms, a tail
	}
	snap := r.Snapshot()
	for id, stage := range []string{"plan", "e2e"} {
		var h *dto.Histogram
		for _, m := range gather(t, r, "zerohop_stage_latency_seconds") {
			if m.GetLabel()[0].GetValue() == stage {
				h = m.GetHistogram()
			}
		}
		exact := snap.Stages[id].SinceStart
		for _, q := range []struct {
			q     float64
			exact float64 // µs
		}{{0.5, exact.P50}, {0.99, exact.P99}} {
			est := histogramQuantile(q.q, h) * 1e6
			if ratio := math.Max(est/q.exact, q.exact/est); !(ratio <= 1.5) {
				t.Errorf("%s p%v: histogram_quantile %.1f µs, exact %.1f µs (%.2f×)", stage, 100*q.q, est, q.exact, ratio)
			}
		}
	}
}

// The bucket bounds are exact decimals, so /metrics' le labels read 1.5e-06,
// not 1.5000000000000002e-06.
func TestDefaultBucketsAreReadable(t *testing.T) {
	b := DefaultBuckets()
	if b[0] != 1e-6 || b[len(b)-1] != 10 {
		t.Fatalf("buckets %v…%v, want 1e-06…10", b[0], b[len(b)-1])
	}
	for i, v := range b {
		s := strconv.FormatFloat(v, 'g', -1, 64)
		if digits := strings.TrimLeft(strings.ReplaceAll(strings.Split(s, "e")[0], ".", ""), "0"); len(digits) > 2 {
			t.Errorf("bucket %d is %s", i, s)
		}
		if i > 0 && v/b[i-1] > 1.5+1e-9 {
			t.Errorf("buckets %v and %v are %.2f× apart", b[i-1], v, v/b[i-1])
		}
	}
}
