package main

import (
	"math"
	"slices"
	"strings"
	"testing"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

func TestSegmentOrder(t *testing.T) {
	tests := []struct {
		n, segments int
		want        []int
	}{
		{1, 1, []int{0}},
		{1, 3, []int{0, 0, 0}},
		{2, 2, []int{0, 1, 1, 0}},             // A B B A
		{2, 4, []int{0, 1, 1, 0, 0, 1, 1, 0}}, // A B B A A B B A
		{3, 2, []int{0, 1, 2, 2, 1, 0}},       // A B C C B A
		{3, 4, []int{0, 1, 2, 2, 1, 0, 0, 1, 2, 2, 1, 0}},
		{4, 2, []int{0, 1, 2, 3, 3, 2, 1, 0}},
	}
	for _, tt := range tests {
		got := segmentOrder(tt.n, tt.segments)
		if !slices.Equal(got, tt.want) {
			t.Errorf("segmentOrder(%d, %d) = %v, want %v", tt.n, tt.segments, got, tt.want)
		}
		// Every transport is measured segments times, once per round,
		// and as often before as after each other one.
		for i := range tt.n {
			if c := countOf(got, i); c != tt.segments {
				t.Errorf("segmentOrder(%d, %d): transport %d measured %d times, want %d", tt.n, tt.segments, i, c, tt.segments)
			}
		}
	}
}

func countOf(xs []int, x int) int {
	n := 0
	for _, v := range xs {
		if v == x {
			n++
		}
	}
	return n
}

func TestSegmentLength(t *testing.T) {
	tests := []struct {
		seconds, segments int
		want              float64 // seconds
	}{
		{60, 1, 60}, {60, 4, 15}, {20, 4, 5}, {10, 4, 2.5}, {180, 4, 45}, {60, 0, 0},
	}
	for _, tt := range tests {
		if got := segmentLength(tt.seconds, tt.segments).Seconds(); got != tt.want {
			t.Errorf("segmentLength(%d, %d) = %g s, want %g s", tt.seconds, tt.segments, got, tt.want)
		}
	}
}

// enc is an encoded since-start histogram (as /latency/hdr gives it, the
// agent's geometry) holding count samples of each value.
func enc(t *testing.T, samples map[int64]int64) string {
	t.Helper()
	return encWith(t, hdr.New(1, 60_000_000, 3), samples)
}

func encWith(t *testing.T, h *hdr.Histogram, samples map[int64]int64) string {
	t.Helper()
	for v, n := range samples {
		if err := h.RecordValues(v, n); err != nil {
			t.Fatal(err)
		}
	}
	b, err := h.Encode(hdr.V2CompressedEncodingCookieBase)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestSummarize(t *testing.T) {
	// Two segments of one transport. The since-start histograms hold the
	// warm-up (2000 µs samples) before each window; the windows hold 100
	// and 1500 µs samples: 40 + 10 of 100 µs and 5 + 45 of 1500 µs.
	w1 := window{
		seconds: 2, cameraTicks: 30, agentTicks: 100, published: 45,
		counters: map[string]float64{"frames_processed": 45, "frames_dropped": 1},
		stages:   []string{"voxel", "e2e"},
		start:    map[string]string{"voxel": enc(t, map[int64]int64{2000: 30}), "e2e": enc(t, map[int64]int64{2000: 30})},
		end:      map[string]string{"voxel": enc(t, map[int64]int64{2000: 30, 7: 45}), "e2e": enc(t, map[int64]int64{2000: 30, 100: 40, 1500: 5})},
	}
	w2 := window{
		seconds: 2, cameraTicks: 10, agentTicks: 60, published: 55,
		counters: map[string]float64{"frames_processed": 55},
		stages:   []string{"voxel", "e2e"},
		start:    map[string]string{"voxel": enc(t, map[int64]int64{2000: 20}), "e2e": enc(t, map[int64]int64{2000: 20, 100: 7})},
		end:      map[string]string{"voxel": enc(t, map[int64]int64{2000: 20, 9: 55}), "e2e": enc(t, map[int64]int64{2000: 20, 100: 17, 1500: 45})},
	}
	r, err := summarize("copy", []window{w1, w2})
	if err != nil {
		t.Fatal(err)
	}
	if r.transport != "copy" || r.seconds != 4 || r.published != 100 || r.cameraCPU != 10 || r.agentCPU != 40 {
		t.Errorf("summarize = transport %s, %g s, published %g, CPU camera %g %% agent %g %%; want copy, 4 s, 100, 10 %%, 40 %%",
			r.transport, r.seconds, r.published, r.cameraCPU, r.agentCPU)
	}
	if r.counters["frames_processed"] != 100 || r.counters["frames_dropped"] != 1 {
		t.Errorf("counters = %v, want frames_processed 100, frames_dropped 1", r.counters)
	}
	want := []stage{
		{"voxel", percentiles{Count: 100, P50: 9, P90: 9, P99: 9, P999: 9, Max: 9}}, // 45 of 7 µs, 55 of 9 µs
		{"e2e", percentiles{Count: 100, P50: 100, P90: 1500, P99: 1500, P999: 1500, Max: 1500}},
	}
	if !slices.Equal(r.stages, want) {
		t.Errorf("stages = %+v, want %+v", r.stages, want)
	}

	// One segment alone: its own window.
	r, err = summarize("copy", []window{w2})
	if err != nil {
		t.Fatal(err)
	}
	if e := r.e2e(); e != (percentiles{Count: 55, P50: 1500, P90: 1500, P99: 1500, P999: 1500, Max: 1500}) || r.agentCPU != 30 {
		t.Errorf("segment 2 alone: e2e %+v, agent CPU %g %%; want 10 of 100 µs and 45 of 1500 µs, 30 %%", e, r.agentCPU)
	}

	// A zero-length window: no CPU figure, no division by zero.
	if r, err := summarize("copy", []window{{stages: nil}}); err != nil || r.cameraCPU != 0 || r.agentCPU != 0 {
		t.Errorf("summarize of an empty window = %+v, %v", r, err)
	}
}

func TestSummarizeErrors(t *testing.T) {
	ok := func() window {
		return window{stages: []string{"e2e"},
			start: map[string]string{"e2e": enc(t, map[int64]int64{5: 1})},
			end:   map[string]string{"e2e": enc(t, map[int64]int64{5: 2})}}
	}
	missing := ok()
	delete(missing.end, "e2e")
	garbled := ok()
	garbled.start["e2e"] = "not a histogram"
	earlier := ok() // end before start: not a later snapshot
	earlier.start, earlier.end = earlier.end, earlier.start
	coarse := ok() // a window of its own in another geometry
	coarse.start["e2e"] = encWith(t, hdr.New(1, 1000, 2), map[int64]int64{5: 1})
	coarse.end["e2e"] = encWith(t, hdr.New(1, 1000, 2), map[int64]int64{5: 2})
	mixed := ok() // start and end in different geometries
	mixed.end["e2e"] = coarse.end["e2e"]
	tests := []struct {
		name string
		ws   []window
		err  string
	}{
		{"none", nil, "no segments"},
		{"a stage missing", []window{ok(), missing}, "segment 2 of 2 has no histogram of stage e2e"},
		{"undecodable", []window{ok(), garbled}, "stage e2e: segment 2: decode the earlier histogram"},
		{"undecodable alone", []window{garbled}, "stage e2e: segment 1: decode the earlier histogram"},
		{"not later", []window{ok(), earlier}, "stage e2e: segment 2: the later histogram lacks samples of the earlier one"},
		{"not later alone", []window{earlier}, "lacks samples of the earlier one"},
		{"mixed geometry", []window{ok(), mixed}, "stage e2e: segment 2: the two histograms differ in range or precision"},
		{"other geometry", []window{ok(), coarse}, "stage e2e: the windows' starts: segment 2: histogram range or precision differs from segment 1's"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := summarize("unix", tt.ws)
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("summarize = %+v, %v; want an error containing %q", r, err, tt.err)
			}
		})
	}
}

func TestMedian(t *testing.T) {
	nan := math.NaN()
	tests := []struct {
		xs   []float64
		want float64
	}{
		{nil, nan},
		{[]float64{nan}, nan},
		{[]float64{3}, 3},
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{4, nan, 1, 3}, 3},
		{[]float64{1.2, 1.1}, 1.15},
	}
	for _, tt := range tests {
		in := slices.Clone(tt.xs)
		got := median(tt.xs)
		if !(got == tt.want || math.IsNaN(got) && math.IsNaN(tt.want)) || math.Abs(got-tt.want) > 1e-12 {
			t.Errorf("median(%v) = %g, want %g", tt.xs, got, tt.want)
		}
		if !slices.EqualFunc(in, tt.xs, func(a, b float64) bool { return a == b || math.IsNaN(a) && math.IsNaN(b) }) {
			t.Errorf("median reordered its argument: %v, was %v", tt.xs, in)
		}
	}
}

// seg is one segment's result with the given e2e p50 and p99 and agent CPU.
func seg(p50, p99, agentCPU float64) result {
	return result{stages: []stage{{"voxel", percentiles{P50: 1, P99: 1}}, {"e2e", percentiles{Count: 10, P50: p50, P99: p99, Max: p99}}}, agentCPU: agentCPU}
}

func TestPairRatios(t *testing.T) {
	ref := []result{seg(100, 400, 10), seg(200, 400, 20), seg(100, 400, 0), seg(50, 400, 10)}
	other := []result{seg(150, 400, 15), seg(220, 800, 20), seg(100, 400, 5), seg(0, 200, 12)}
	nan := math.NaN()
	tests := []struct {
		name string
		f    func(result) float64
		want []float64
	}{
		{"p50", func(r result) float64 { return r.e2e().P50 }, []float64{1.5, 1.1, 1, 0}},
		{"p99", func(r result) float64 { return r.e2e().P99 }, []float64{1, 2, 1, 0.5}},
		{"agent CPU", func(r result) float64 { return r.agentCPU }, []float64{1.5, 1, nan, 1.2}},
	}
	for _, tt := range tests {
		got := pairRatios(ref, other, tt.f)
		if !slices.EqualFunc(got, tt.want, func(a, b float64) bool { return math.Abs(a-b) < 1e-12 || math.IsNaN(a) && math.IsNaN(b) }) {
			t.Errorf("%s: pairRatios = %v, want %v", tt.name, got, tt.want)
		}
	}
	if got := pairRatios(ref[:2], other, func(r result) float64 { return r.agentCPU }); len(got) != 2 {
		t.Errorf("pairRatios over 2 and 4 rounds gave %d ratios, want 2", len(got))
	}
}

func TestPairLine(t *testing.T) {
	ref := result{transport: "unix", segments: []result{seg(100, 400, 10), seg(200, 400, 20), seg(100, 400, 0), seg(50, 400, 10)}}
	other := result{transport: "copy", segments: []result{seg(150, 400, 15), seg(220, 800, 20), seg(100, 400, 5), seg(60, 200, 12)}}
	got := pairLine(ref, other)
	want := "copy ÷ unix per round of segments (each round measures every transport once, back to back; in run order): " +
		"e2e p50 1.50× / 1.10× / 1.00× / 1.20× (median 1.15×); " +
		"e2e p99 1.00× / 2.00× / 1.00× / 0.50× (median 1.00×); " +
		"agent CPU 1.50× / 1.00× / n/a / 1.20× (median 1.20×).\n\n"
	if got != want {
		t.Errorf("pairLine =\n%q\nwant\n%q", got, want)
	}
}

func TestReport(t *testing.T) {
	mk := func(name string, segs ...result) result {
		r := result{transport: name, stages: []stage{{"e2e", percentiles{Count: 40, P50: 1000, P90: 1500, P99: 2000, P999: 2000, Max: 2000}}},
			cameraCPU: 5, agentCPU: 20, published: 40, seconds: 20, segments: segs,
			counters: map[string]float64{"frames_processed": 40, "frames_received": 40}}
		if name == "copy" {
			r.stages[0].p.P50, r.agentCPU = 1200, 25
		}
		return r
	}
	o := options{seconds: 20, segments: 2, rate: 30, transports: []string{"unix", "copy"}}
	md := report(o, []result{mk("unix", seg(1000, 2000, 20), seg(1000, 2000, 20)), mk("copy", seg(1100, 2000, 25), seg(1300, 2000, 25))})
	for _, want := range []string{
		"`bench-e2e --seconds 20 --segments 2 --rate 30 --transports unix,copy`",
		"Each transport's 20 s are 2 segments of 10 s",
		"in this order: unix, copy, copy, unix.",
		"\n## unix transport\n\n| stage | count | p50 | p90 | p99 | p99.9 | max |\n",
		"| e2e | 40 | 1000 | 1500 | 2000 | 2000 | 2000 |\n",
		"\n## copy transport\n",
		"CPU: camera 5.0 %, agent 25.0 %. Frames in 20 s: camera published 40 clouds; agent processed 40 frames",
		// scripts/bench.sh demotes the heading that starts "## copy vs unix".
		"\n## copy vs unix, same run (interleaved, 2 segments each)\n\n| | unix | copy | ratio |\n",
		"| e2e p50 µs | 1000 | 1200 | 1.20× |\n",
		"| agent CPU % | 20.0 | 25.0 | 1.25× |\n\n",
		"e2e p50 1.10× / 1.30× (median 1.20×)",
		"agent CPU 1.25× / 1.25× (median 1.25×).\n",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}

	// Three transports: each against the first.
	o = options{seconds: 20, segments: 2, rate: 30, transports: []string{"unix", "copy", "unix+spin"}}
	md = report(o, []result{mk("unix"), mk("copy"), mk("unix+spin")})
	if !strings.Contains(md, "## copy vs unix,") || !strings.Contains(md, "## unix+spin vs unix,") || strings.Contains(md, "vs copy") {
		t.Errorf("report of three transports: want copy and unix+spin each against unix:\n%s", md)
	}
	// One transport: no comparison, no segment order for a single segment.
	o = options{seconds: 20, segments: 1, rate: 30, transports: []string{"unix"}}
	md = report(o, []result{mk("unix")})
	if strings.Contains(md, " vs ") || strings.Contains(md, "segments of") {
		t.Errorf("report of one transport, one segment:\n%s", md)
	}
}
