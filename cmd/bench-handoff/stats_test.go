package main

import (
	"flag"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

func TestPercentileIsNearestRank(t *testing.T) {
	hundred := make([]int64, 100)
	for i := range hundred {
		hundred[i] = int64(i + 1) // 1..100
	}
	tests := []struct {
		name   string
		sorted []int64
		p      float64
		want   int64
	}{
		{"median of 1..100", hundred, 50, 50},
		{"p90 of 1..100", hundred, 90, 90},
		{"p99 of 1..100", hundred, 99, 99},
		{"p99.9 of 1..100 is the max", hundred, 99.9, 100},
		{"p100 is the max", hundred, 100, 100},
		{"a tiny p is the min", hundred, 0.001, 1},
		{"median of an even pair is the lower", []int64{10, 20}, 50, 10},
		{"p51 of a pair is the upper", []int64{10, 20}, 51, 20},
		{"single sample", []int64{7}, 99.9, 7},
		{"no samples", nil, 50, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := percentile(tt.sorted, tt.p); got != tt.want {
				t.Fatalf("percentile(%v…, %v) = %d, want %d", tt.sorted[:min(len(tt.sorted), 3)], tt.p, got, tt.want)
			}
		})
	}
}

func TestSummarizeSortsAndConverts(t *testing.T) {
	// 1000 samples, 1..1000 µs, shuffled; CPU totals over 1000 messages.
	lat := make([]int64, 1000)
	for i := range lat {
		lat[i] = int64((i*389)%1000+1) * 1000
	}
	orig := slices.Clone(lat)
	s := summarize(lat, 5_000_000, 250_000)
	want := summary{P50: 500, P90: 900, P99: 990, P999: 999, Max: 1000, PubCPU: 5, SubCPU: 0.25}
	if s != want {
		t.Fatalf("summarize = %+v, want %+v", s, want)
	}
	if !slices.Equal(lat, orig) {
		t.Fatal("summarize reordered the caller's samples")
	}
}

func TestMedianOfRunsTakesEachFigureSeparately(t *testing.T) {
	run := func(p50, p99, cpu float64) []caseResult {
		return []caseResult{{Mode: modeEvent, Size: 1024, Transport: zeroCopy, Summary: summary{P50: p50, P99: p99, PubCPU: cpu}}}
	}
	got := medianOfRuns([][]caseResult{run(5, 90, 3), run(9, 30, 1), run(7, 40, 2)})
	want := summary{P50: 7, P99: 40, PubCPU: 2}
	if len(got) != 1 || got[0].Summary != want || got[0].Mode != modeEvent || got[0].Size != 1024 || got[0].Transport != zeroCopy {
		t.Fatalf("median of 3 runs = %+v, want %+v", got, want)
	}
	if m := median([]float64{4, 1, 3, 2}); m != 2.5 {
		t.Fatalf("median of 1..4 = %v, want 2.5", m)
	}
}

// TestCopyRatioIsTheMedianOfEachRunsOwn: the 16 MiB case of the committed
// report, whose runs' own copy ÷ zero-copy p50 were 116.9, 141.8 and 108.8
// (median 117×); the ratio of the medians said 109×, pairing the copy
// figure of one run with the zero-copy figure of another.
func TestCopyRatioIsTheMedianOfEachRunsOwn(t *testing.T) {
	run := func(zc, cp float64) []caseResult {
		return []caseResult{
			{Mode: modeEvent, Size: 16 << 20, Transport: zeroCopy, Summary: summary{P50: zc, P99: 2 * zc}},
			{Mode: modeEvent, Size: 16 << 20, Transport: copyStream, Summary: summary{P50: cp, P99: cp}},
		}
	}
	got := medianOfRuns([][]caseResult{run(25.8, 3017), run(28.7, 4071), run(27.9, 3036)})
	if r := got[0].CopyP50; math.Abs(r-3017/25.8) > 1e-9 {
		t.Fatalf("copy ÷ zero-copy p50 = %v, want the median run's own, %v (not the medians' %v)", r, 3017/25.8, 3036/27.9)
	}
	if got[1].CopyP50 != 0 {
		t.Fatalf("the copy row carries a copy ratio, %v", got[1].CopyP50)
	}
	table := formatTable(got, modeEvent, []int{16 << 20}, []string{zeroCopy, copyStream})
	if !strings.Contains(table, "| 117× |") {
		t.Fatalf("table does not show 117×:\n%s", table)
	}
}

func TestParseSizes(t *testing.T) {
	tests := []struct {
		in   string
		want []int
		bad  bool
	}{
		{in: "1KiB,64KiB,1MiB,3MiB,16MiB", want: []int{1 << 10, 64 << 10, 1 << 20, 3 << 20, 16 << 20}},
		{in: "4096, 1k ,2M,7b", want: []int{4096, 1 << 10, 2 << 20, 7}},
		{in: "1GiB", bad: true},
		{in: "0", bad: true},
		{in: "-1K", bad: true},
		{in: "1.5M", bad: true},
		{in: "2048M", bad: true},
		{in: "", bad: true},
		{in: "1K,,2K", bad: true},
	}
	for _, tt := range tests {
		got, err := parseSizes(tt.in)
		if tt.bad {
			if err == nil || !strings.Contains(err.Error(), "--sizes") {
				t.Errorf("parseSizes(%q) = %v, %v; want an error naming --sizes", tt.in, got, err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("parseSizes(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}

func TestFormatSize(t *testing.T) {
	for n, want := range map[int]string{8: "8 B", 1024: "1 KiB", 1536: "1.5 KiB", 64 << 10: "64 KiB", 3 << 20: "3 MiB", 3<<20 + 512<<10: "3.5 MiB"} {
		if got := formatSize(n); got != want {
			t.Errorf("formatSize(%d) = %q, want %q", n, got, want)
		}
	}
}

// sampleResults is a fixed two-size result set for the formatting tests.
func sampleResults() []caseResult {
	return []caseResult{
		{Mode: modeEvent, Size: 1 << 10, Transport: zeroCopy, Summary: summary{P50: 8, P90: 9.5, P99: 30, P999: 41.25, Max: 250, PubCPU: 4.5, SubCPU: 3}},
		{Mode: modeEvent, Size: 1 << 10, Transport: copyStream, Summary: summary{P50: 9, P90: 11, P99: 36, P999: 50, Max: 300, PubCPU: 5, SubCPU: 4}},
		{Mode: modeEvent, Size: 1 << 10, Transport: pipeWake, Summary: summary{P50: 6, P90: 7, P99: 20, P999: 30, Max: 200, PubCPU: 4, SubCPU: 2.5}},
		{Mode: modeEvent, Size: 3 << 20, Transport: zeroCopy, Summary: summary{P50: 9.5, P90: 10, P99: 33, P999: 45, Max: 260, PubCPU: 4.5, SubCPU: 3}},
		{Mode: modeEvent, Size: 3 << 20, Transport: copyStream, Summary: summary{P50: 1200, P90: 1400, P99: 2000, P999: 2500, Max: 4000, PubCPU: 600, SubCPU: 650}},
		{Mode: modeEvent, Size: 3 << 20, Transport: pipeWake, Summary: summary{P50: 6.5, P90: 7, P99: 21, P999: 31, Max: 201, PubCPU: 4, SubCPU: 2.5}},
		{Mode: modeSpin, Size: 1 << 10, Transport: zeroCopySpin, Summary: summary{P50: 1.25, P90: 2, P99: 3, P999: 9, Max: 40, PubCPU: 4.5, SubCPU: 250}},
		{Mode: modeSpin, Size: 3 << 20, Transport: zeroCopySpin, Summary: summary{P50: 1.5, P90: 2, P99: 3, P999: 9, Max: 40, PubCPU: 4.5, SubCPU: 250}},
		{Mode: modeSpin, Size: 1 << 10, Transport: zeroCopySpinSocket, Summary: summary{P50: 3, P90: 4, P99: 6, P999: 12, Max: 50, PubCPU: 6, SubCPU: 250}},
		{Mode: modeSpin, Size: 3 << 20, Transport: zeroCopySpinSocket, Summary: summary{P50: 1.25, P90: 4, P99: 6, P999: 12, Max: 50, PubCPU: 6, SubCPU: 250}},
		{Mode: modeOneCPU, Size: 1 << 10, Transport: zeroCopy, Summary: summary{P50: 20, P90: 25, P99: 40, P999: 50, Max: 300, PubCPU: 2, SubCPU: 1}},
		{Mode: modeOneCPU, Size: 1 << 10, Transport: copyStream, Summary: summary{P50: 22, P90: 27, P99: 44, P999: 55, Max: 330, PubCPU: 2, SubCPU: 1}},
	}
}

func TestFormatTableMatchesGolden(t *testing.T) {
	sizes := []int{1 << 10, 3 << 20}
	res := medianOfRuns([][]caseResult{sampleResults()})
	got := formatTable(res, modeEvent, sizes, []string{zeroCopy, copyStream, pipeWake}) + "\n" +
		formatTable(res, modeSpin, sizes, []string{zeroCopySpin, zeroCopySpinSocket}) + "\n" +
		formatTable(res, modeOneCPU, sizes, []string{zeroCopy, copyStream, pipeWake}) + "\n" +
		formatTargets(checkTargets(res, sizes))
	golden := filepath.Join("testdata", "report.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Fatalf("tables differ from %s (rerun with -update after checking):\n%s", golden, got)
	}
}

func TestCheckTargets(t *testing.T) {
	met := func(ts []target, name string) (bool, bool) {
		for _, tg := range ts {
			if strings.HasPrefix(tg.Name, name) {
				return tg.Met, true
			}
		}
		return false, false
	}
	sizes := []int{1 << 10, 3 << 20}
	raw := sampleResults()
	res := medianOfRuns([][]caseResult{raw})
	ts := checkTargets(res, sizes)
	for _, c := range []struct {
		name string
		want bool
	}{
		{"event-driven: zero-copy p50 ≤ 10 µs", true},
		{"event-driven: zero-copy p99 ≤ 35 µs", true},
		{"event-driven: flat", true},                      // 9.5 ≤ 1.2 × 8
		{"event-driven: at 3 MiB, copy p50 ≥ 100×", true}, // 1200 ÷ 9.5 = 126
		{"spin: zero-copy p50 ≤ 2 µs", true},
		{"event-driven, one CPU: zero-copy p50 ≤ 10 µs", false}, // 20
		{"event-driven, one CPU: zero-copy p99 ≤ 35 µs", false}, // 40
	} {
		got, ok := met(ts, c.name)
		if !ok || got != c.want {
			t.Errorf("target %q: present %v, met %v; want present, met %v\n%s", c.name, ok, got, c.want, formatTargets(ts))
		}
	}
	// One CPU measured 1 KiB only: no flatness or 3 MiB goal for it.
	for _, name := range []string{"event-driven, one CPU: flat", "event-driven, one CPU: at 3 MiB"} {
		if _, ok := met(ts, name); ok {
			t.Errorf("target %q present without its cases\n%s", name, formatTargets(ts))
		}
	}
	// Make each goal fail in turn.
	raw[3].Summary.P50 = 12.5 // 3 MiB zero-copy: over 10 µs, 1.56× the 1 KiB p50, copy only 96×
	raw[0].Summary.P99 = 36
	raw[7].Summary.P50 = 2.5
	res = medianOfRuns([][]caseResult{raw})
	ts = checkTargets(res, sizes)
	for _, name := range []string{"event-driven: zero-copy p50 ≤ 10 µs", "event-driven: zero-copy p99 ≤ 35 µs", "event-driven: flat", "event-driven: at 3 MiB", "spin: zero-copy p50 ≤ 2 µs"} {
		if got, ok := met(ts, name); !ok || got {
			t.Errorf("target %q: present %v, met %v; want present and not met\n%s", name, ok, got, formatTargets(ts))
		}
	}
	if !strings.Contains(formatTargets(ts), "**NOT met** (worst p50 12.5 µs at 3 MiB)") {
		t.Errorf("formatted targets lack the worst case:\n%s", formatTargets(ts))
	}
}

func TestSubscriberRecordsWithoutAllocating(t *testing.T) {
	st := newSubscriberState(childSpec{Size: 4, Warmup: 2, Count: 3, Chunk: 2})
	p := []byte{0, 9, 9, 0}
	seq := uint64(0)
	allocs := testing.AllocsPerRun(4, func() { // 5 calls: AllocsPerRun warms up once
		p[0], p[3] = byte(seq), byte(seq)
		st.begin(int64(100+seq), 100)
		st.verify(seq, p)
		st.end()
		seq++
	})
	if allocs != 0 {
		t.Fatalf("begin+verify+end allocate %.1f times per message", allocs)
	}
	res := st.result()
	if !slices.Equal(res.LatencyNs, []int64{2, 3, 4}) || res.Corrupt != 0 {
		t.Fatalf("result %+v, want latencies [2 3 4] after 2 warm-up messages, none corrupt", res)
	}
	st.verify(7, []byte{7, 0, 0, 6})
	if st.corrupt != 1 {
		t.Fatalf("a payload whose last byte lacks the seq was not counted as corrupt")
	}
}

func TestSubscriberCountsCPUOnlyWithinItsChunks(t *testing.T) {
	// 1 warm-up + 5 measured messages in chunks of 2: chunks {1,2}, {3,4},
	// {5}. Each message costs 10 CPU units between begin and end, and 1000
	// pass between messages (idle while other lanes run): only the 10s of
	// the measured messages may count.
	st := newSubscriberState(childSpec{Size: 1, Warmup: 1, Count: 5, Chunk: 2})
	var clock int64
	st.cpu = func() int64 { return clock }
	done := false
	for i := range 6 {
		if done {
			t.Fatalf("end reported completion before message %d", i)
		}
		clock += 1000
		st.begin(0, 0)
		clock += 10
		done = st.end()
	}
	if !done {
		t.Fatal("end did not report completion after the last message")
	}
	// Within a chunk the gap between its messages counts too: chunk {1,2}
	// spans 10 + 1000 + 10, {3,4} the same, {5} 10.
	if want := int64(2*1020 + 10); st.cpuSum != want {
		t.Fatalf("CPU over the measured chunks = %d, want %d", st.cpuSum, want)
	}
}
