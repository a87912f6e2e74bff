package main

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Transport names as they appear in the tables.
const (
	zeroCopy = "zero-copy"
	// zeroCopySpin polls the handle rings (SubscriberConfig.Spin);
	// zeroCopySpinSocket polls the socket instead (Spin + SpinSocket).
	zeroCopySpin       = "zero-copy spin, rings"
	zeroCopySpinSocket = "zero-copy spin, socket"
	copyStream         = "copy"
	// pipeWake is the floor: an 8-byte publish time through a pipe.
	pipeWake = "wake-up floor (8 B pipe)"
)

// summary is one case's latency distribution (µs) and CPU cost (µs per
// message) of each process.
type summary struct {
	P50, P90, P99, P999, Max float64
	PubCPU, SubCPU           float64
}

// Modes: how the subscribers wait and where the processes run.
const (
	// modeEvent: subscribers blocked in the kernel, processes placed by
	// the OS.
	modeEvent = "event-driven"
	// modeOneCPU: as modeEvent, with publisher and subscribers confined to
	// one CPU (--pin-cpu).
	modeOneCPU = "event-driven, one CPU"
	// modeSpin: the zero-copy subscriber spins (--spin), on its handle
	// rings or on its socket.
	modeSpin = "spin"
)

// caseResult is one measured (mode, size, transport) case.
type caseResult struct {
	Mode      string
	Size      int
	Transport string
	Summary   summary
	// CopyP50 and CopyP99 are copy ÷ this case at p50 and p99, against
	// the copy case of the same mode and size: each run's own ratio, the
	// median over the runs (medianOfRuns); 0 where there is none (the
	// copy case itself, a mode without copy).
	CopyP50, CopyP99 float64
}

// zeroCopyKind reports whether transport is one of the zero-copy ones,
// whose rows carry the copy ratios.
func zeroCopyKind(transport string) bool {
	return transport == zeroCopy || transport == zeroCopySpin || transport == zeroCopySpinSocket
}

// percentile returns the nearest-rank p-th percentile (0 < p ≤ 100) of
// sorted: the smallest sample with at least p% of the samples ≤ it.
func percentile(sorted []int64, p float64) int64 {
	if len(sorted) == 0 {
		return 0
	}
	// The epsilon keeps float error from pushing an exact rank up by one
	// (99.9/100 × 1000 is 999.0000000000001 in float64).
	rank := int(math.Ceil(p*float64(len(sorted))/100 - 1e-9))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// summarize sorts a copy of the latency samples (ns) and turns CPU totals
// (ns over the run) into µs per message.
func summarize(latNs []int64, pubCPUNs, subCPUNs int64) summary {
	s := slices.Clone(latNs)
	slices.Sort(s)
	us := func(ns int64) float64 { return float64(ns) / 1e3 }
	n := float64(max(len(s), 1))
	return summary{
		P50: us(percentile(s, 50)), P90: us(percentile(s, 90)), P99: us(percentile(s, 99)),
		P999: us(percentile(s, 99.9)), Max: us(percentile(s, 100)),
		PubCPU: us(pubCPUNs) / n, SubCPU: us(subCPUNs) / n,
	}
}

// median returns the median of xs (mean of the middle two for an even
// count).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	m := len(s) / 2
	if len(s)%2 == 1 {
		return s[m]
	}
	return (s[m-1] + s[m]) / 2
}

// medianOfRuns combines the same cases from several runs, statistic by
// statistic; a zero-copy case's copy ratios are the median of each run's
// own ratio (a ratio of the medians would pair figures from different
// runs: 109× where the runs' own were 117, 142 and 109). Every run must
// list the same cases in the same order.
func medianOfRuns(runs [][]caseResult) []caseResult {
	if len(runs) == 0 {
		return nil
	}
	out := make([]caseResult, len(runs[0]))
	for i := range out {
		out[i] = caseResult{Mode: runs[0][i].Mode, Size: runs[0][i].Size, Transport: runs[0][i].Transport}
		pick := func(f func(summary) float64) float64 {
			xs := make([]float64, len(runs))
			for r := range runs {
				xs[r] = f(runs[r][i].Summary)
			}
			return median(xs)
		}
		out[i].Summary = summary{
			P50:    pick(func(s summary) float64 { return s.P50 }),
			P90:    pick(func(s summary) float64 { return s.P90 }),
			P99:    pick(func(s summary) float64 { return s.P99 }),
			P999:   pick(func(s summary) float64 { return s.P999 }),
			Max:    pick(func(s summary) float64 { return s.Max }),
			PubCPU: pick(func(s summary) float64 { return s.PubCPU }),
			SubCPU: pick(func(s summary) float64 { return s.SubCPU }),
		}
		if !zeroCopyKind(out[i].Transport) {
			continue
		}
		c := slices.IndexFunc(runs[0], func(r caseResult) bool {
			return r.Mode == out[i].Mode && r.Size == out[i].Size && r.Transport == copyStream
		})
		if c < 0 {
			continue
		}
		ratioOfRuns := func(f func(summary) float64) float64 {
			var xs []float64
			for r := range runs {
				if den := f(runs[r][i].Summary); den > 0 {
					xs = append(xs, f(runs[r][c].Summary)/den)
				}
			}
			if len(xs) == 0 {
				return 0
			}
			return median(xs)
		}
		out[i].CopyP50 = ratioOfRuns(func(s summary) float64 { return s.P50 })
		out[i].CopyP99 = ratioOfRuns(func(s summary) float64 { return s.P99 })
	}
	return out
}

// find returns the case for mode, size and transport.
func find(results []caseResult, mode string, size int, transport string) (summary, bool) {
	c, ok := findCase(results, mode, size, transport)
	return c.Summary, ok
}

// findCase is find, returning the whole case (its copy ratios too).
func findCase(results []caseResult, mode string, size int, transport string) (caseResult, bool) {
	for _, r := range results {
		if r.Mode == mode && r.Size == size && r.Transport == transport {
			return r, true
		}
	}
	return caseResult{}, false
}

// formatTable renders the rows of mode (the given transports) as a
// markdown table, sizes in the order given. Rows of a zero-copy transport
// carry the copy ÷ zero-copy ratios against the copy row of the same size
// and mode (medianOfRuns'); a mode without copy rows (spin) has none.
func formatTable(results []caseResult, mode string, sizes []int, transports []string) string {
	var b strings.Builder
	b.WriteString("| size | transport | p50 µs | p90 µs | p99 µs | p99.9 µs | max µs | publisher CPU µs/msg | subscriber CPU µs/msg | copy÷zero-copy p50 | copy÷zero-copy p99 |\n")
	b.WriteString("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, size := range sizes {
		for _, tr := range transports {
			cr, ok := findCase(results, mode, size, tr)
			if !ok {
				continue
			}
			s := cr.Summary
			r50, r99 := "—", "—"
			if cr.CopyP50 > 0 {
				r50, r99 = ratio(cr.CopyP50, 1), ratio(cr.CopyP99, 1)
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
				formatSize(size), tr, us(s.P50), us(s.P90), us(s.P99), us(s.P999), us(s.Max),
				us(s.PubCPU), us(s.SubCPU), r50, r99)
		}
	}
	return b.String()
}

// us formats microseconds with 3 significant digits or more.
func us(v float64) string {
	switch {
	case v < 10:
		return strconv.FormatFloat(v, 'f', 2, 64)
	case v < 100:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
}

func ratio(num, den float64) string {
	if den <= 0 {
		return "—"
	}
	r := num / den
	if r < 10 {
		return strconv.FormatFloat(r, 'f', 2, 64) + "×"
	}
	return strconv.FormatFloat(r, 'f', 0, 64) + "×"
}

// formatSize writes bytes as B, KiB or MiB, exactly (1536 → "1.5 KiB").
func formatSize(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<10) == 0:
		return strconv.FormatFloat(float64(n)/(1<<20), 'f', -1, 64) + " MiB"
	case n >= 1<<10:
		return strconv.FormatFloat(float64(n)/(1<<10), 'f', -1, 64) + " KiB"
	}
	return strconv.Itoa(n) + " B"
}

// parseSizes parses a comma-separated list such as "1KiB,64K,3MiB,4096".
// Units: B, K/KB/KiB, M/MB/MiB (all binary), case-insensitive.
func parseSizes(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		num := strings.TrimRightFunc(f, func(r rune) bool { return r < '0' || r > '9' })
		unit := strings.ToLower(strings.TrimSpace(f[len(num):]))
		mult := 0
		switch unit {
		case "", "b":
			mult = 1
		case "k", "kb", "kib":
			mult = 1 << 10
		case "m", "mb", "mib":
			mult = 1 << 20
		}
		v, err := strconv.Atoi(num)
		if err != nil || mult == 0 || v <= 0 || v > (1<<30)/mult {
			return nil, fmt.Errorf("--sizes: %q is not a size between 1 B and 1 GiB (e.g. 4096, 64KiB, 3MiB)", f)
		}
		out = append(out, v*mult)
	}
	return out, nil
}

// target is one goal of the issue, checked against the measured table.
type target struct {
	Name   string
	Met    bool
	Detail string
}

// checkTargets evaluates the goals, per event-driven mode measured:
// zero-copy p50 ≤ 10 µs and p99 ≤ 35 µs at every size; flat (the largest
// size's p50 within 1.2× of the smallest's); ≥ 100× lower p50 than copy at
// 3 MiB; and spin p50 ≤ 2 µs. Goals whose cases were not measured are left
// out.
func checkTargets(results []caseResult, sizes []int) []target {
	var out []target
	for _, mode := range []string{modeEvent, modeOneCPU} {
		out = append(out, eventTargets(results, mode, sizes)...)
	}
	if worst, at, ok := worstP50(results, modeSpin, zeroCopySpin, sizes); ok {
		out = append(out, target{"spin: zero-copy p50 ≤ 2 µs at every size", worst <= 2,
			fmt.Sprintf("worst p50 %s µs at %s", us(worst), formatSize(at))})
	}
	if t, ok := ringsVsSocket(results, sizes); ok {
		out = append(out, t)
	}
	return out
}

// ringsVsSocket compares the two spin modes size by size: polling the
// handle rings must beat polling the socket at p50 everywhere.
func ringsVsSocket(results []caseResult, sizes []int) (target, bool) {
	met, have := true, false
	least, at := math.Inf(1), 0
	for _, size := range sizes {
		r, ok1 := find(results, modeSpin, size, zeroCopySpin)
		s, ok2 := find(results, modeSpin, size, zeroCopySpinSocket)
		if !ok1 || !ok2 || r.P50 <= 0 {
			continue
		}
		have = true
		if x := s.P50 / r.P50; x < least {
			least, at = x, size
		}
		met = met && r.P50 < s.P50
	}
	if !have {
		return target{}, false
	}
	return target{"spin: polling the handle rings beats polling the socket (p50) at every size", met,
		fmt.Sprintf("socket ÷ rings p50 at least %s, at %s", ratio(least, 1), formatSize(at))}, true
}

func worstP50(results []caseResult, mode, transport string, sizes []int) (float64, int, bool) {
	worst, at, ok := 0.0, 0, false
	for _, size := range sizes {
		if s, found := find(results, mode, size, transport); found {
			ok = true
			if s.P50 >= worst {
				worst, at = s.P50, size
			}
		}
	}
	return worst, at, ok
}

func eventTargets(results []caseResult, mode string, sizes []int) []target {
	var out []target
	worst50, at50, have := worstP50(results, mode, zeroCopy, sizes)
	if !have {
		return nil
	}
	var worst99 float64
	var at99 int
	for _, size := range sizes {
		if s, ok := find(results, mode, size, zeroCopy); ok && s.P99 >= worst99 {
			worst99, at99 = s.P99, size
		}
	}
	out = append(out,
		target{mode + ": zero-copy p50 ≤ 10 µs at every size", worst50 <= 10,
			fmt.Sprintf("worst p50 %s µs at %s", us(worst50), formatSize(at50))},
		target{mode + ": zero-copy p99 ≤ 35 µs at every size", worst99 <= 35,
			fmt.Sprintf("worst p99 %s µs at %s", us(worst99), formatSize(at99))})
	if len(sizes) > 1 {
		lo, hi := slices.Min(sizes), slices.Max(sizes)
		a, okA := find(results, mode, lo, zeroCopy)
		b, okB := find(results, mode, hi, zeroCopy)
		if okA && okB && a.P50 > 0 {
			out = append(out, target{
				fmt.Sprintf("%s: flat, zero-copy p50 at %s within 1.2× of %s", mode, formatSize(hi), formatSize(lo)),
				b.P50 <= 1.2*a.P50,
				fmt.Sprintf("%s µs vs %s µs = %s; p99 %s", us(b.P50), us(a.P50), ratio(b.P50, a.P50), ratio(b.P99, a.P99)),
			})
		}
	}
	if z, ok := findCase(results, mode, 3<<20, zeroCopy); ok && z.CopyP50 > 0 {
		if c, ok := find(results, mode, 3<<20, copyStream); ok {
			out = append(out, target{mode + ": at 3 MiB, copy p50 ≥ 100× zero-copy p50", z.CopyP50 >= 100,
				fmt.Sprintf("copy %s µs, zero-copy %s µs (medians); copy ÷ zero-copy, the median of the runs' own ratios, %s", us(c.P50), us(z.Summary.P50), ratio(z.CopyP50, 1))})
		}
	}
	return out
}

func formatTargets(ts []target) string {
	var b strings.Builder
	for _, t := range ts {
		verdict := "met"
		if !t.Met {
			verdict = "NOT met"
		}
		fmt.Fprintf(&b, "- %s: **%s** (%s)\n", t.Name, verdict, t.Detail)
	}
	return b.String()
}
