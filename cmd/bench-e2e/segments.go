package main

// Interleaving: which transport each segment measures and for how long, and
// how one transport's segments add up to its result. No processes here.

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
	"github.com/zerohop/zerohop/telemetry"
)

// minSegment is the shortest measured window a segment may have: each
// segment starts its own camera and agent and leaves their warm-up out.
const minSegment = 5 * time.Second

// maxDefaultSegments is the most segments per transport --segments
// defaults to (A B B A A B B A).
const maxDefaultSegments = 4

// defaultSegments is --segments when not given: when transports are
// compared, the most even count up to maxDefaultSegments whose segments
// are minSegment or longer (2 when none is: checkSegments then says what
// --seconds needs); else the whole time in one.
func defaultSegments(transports, seconds int) int {
	if transports < 2 {
		return 1
	}
	for n := maxDefaultSegments; n > 2; n -= 2 {
		if segmentLength(seconds, n) >= minSegment {
			return n
		}
	}
	return 2
}

// segmentLength is the measured window of one segment: a transport's
// seconds split evenly over its segments.
func segmentLength(seconds, segments int) time.Duration {
	if segments < 1 {
		return 0
	}
	return time.Duration(seconds) * time.Second / time.Duration(segments)
}

// checkSegments checks --segments against the number of transports and
// --seconds.
func checkSegments(seconds, segments, transports int) error {
	switch {
	case segments < 1:
		return fmt.Errorf("--segments %d: want 1 or more", segments)
	case transports >= 2 && segments%2 != 0:
		return fmt.Errorf("--segments %d: want an even number (2, 4, ...) with %d transports, so that each transport is measured as often first as last (A B B A)", segments, transports)
	case transports >= 2 && segmentLength(seconds, 2) < minSegment:
		return fmt.Errorf("--seconds %d with %d transports: want %g or more (at least two segments each, A B B A, of %v or more)", seconds, transports, 2*minSegment.Seconds(), minSegment)
	}
	if d := segmentLength(seconds, segments); d < minSegment {
		return fmt.Errorf("--seconds %d over --segments %d gives %v per segment: want %v or more (each segment leaves its own warm-up out): raise --seconds or lower --segments", seconds, segments, d, minSegment)
	}
	return nil
}

// segmentOrder is the order in which the segments run, as indices into the
// transports: rounds of n segments, one per transport, alternately forward
// and backward (two transports: A B B A A B B A; three: A B C C B A), so
// that a steady drift of the machine weighs on each transport alike over
// every two rounds. Round r holds the segments r*n to r*n+n-1.
func segmentOrder(n, segments int) []int {
	order := make([]int, 0, n*segments)
	for r := range segments {
		for i := range n {
			if r%2 == 1 {
				i = n - 1 - i
			}
			order = append(order, i)
		}
	}
	return order
}

// window is what one segment measured, its warm-up left out: the raw
// readings at the window's start and end, kept so that segments can be
// pooled.
type window struct {
	seconds                 float64
	cameraTicks, agentTicks int64              // CPU clock ticks (USER_HZ) over the window
	published               float64            // camera clouds published over the window
	counters                map[string]float64 // the agent's counters over the window
	stages                  []string           // in the agent's /latency order
	start, end              map[string]string  // each stage's since-start histogram (/latency/hdr)
}

// userHZ is USER_HZ on Linux: /proc/PID/stat's clock tick.
const userHZ = 100

// summarize pools one transport's segments: latencies from the segments'
// window histograms merged, frame counts and CPU time summed over the
// windows.
func summarize(transport string, ws []window) (result, error) {
	r := result{transport: transport, counters: map[string]float64{}}
	if len(ws) == 0 {
		return r, errors.New("no segments to summarize")
	}
	var camTicks, agentTicks int64
	for _, w := range ws {
		r.seconds += w.seconds
		r.published += w.published
		camTicks += w.cameraTicks
		agentTicks += w.agentTicks
		for name, v := range w.counters {
			r.counters[name] += v
		}
	}
	if r.seconds > 0 {
		r.cameraCPU = float64(camTicks) / userHZ / r.seconds * 100
		r.agentCPU = float64(agentTicks) / userHZ / r.seconds * 100
	}
	for _, name := range ws[0].stages {
		starts, ends := make([]string, len(ws)), make([]string, len(ws))
		for i, w := range ws {
			s, ok1 := w.start[name]
			e, ok2 := w.end[name]
			if !ok1 || !ok2 {
				return result{}, fmt.Errorf("segment %d of %d has no histogram of stage %s", i+1, len(ws), name)
			}
			starts[i], ends[i] = s, e
		}
		p, err := pooled(starts, ends)
		if err != nil {
			return result{}, fmt.Errorf("stage %s: %w", name, err)
		}
		r.stages = append(r.stages, stage{name, p})
	}
	return r, nil
}

// pooled summarises the samples of several windows together: window i is
// between the since-start histograms starts[i] and ends[i] of one process.
// The sum of the windows is the merged ends less the merged starts, which
// telemetry.Between takes, once each window is checked alone (in the sums,
// one window's missing samples could hide behind another's).
func pooled(starts, ends []string) (percentiles, error) {
	var p percentiles
	for i := range starts {
		var err error
		if p, err = telemetry.Between(starts[i], ends[i]); err != nil {
			return percentiles{}, fmt.Errorf("segment %d: %w", i+1, err)
		}
	}
	if len(starts) == 1 {
		return p, nil
	}
	s, err := mergeEncoded(starts)
	if err != nil {
		return percentiles{}, fmt.Errorf("the windows' starts: %w", err)
	}
	e, err := mergeEncoded(ends)
	if err != nil {
		return percentiles{}, fmt.Errorf("the windows' ends: %w", err)
	}
	return telemetry.Between(s, e)
}

// mergeEncoded merges encoded histograms of one geometry (HdrHistogram V2,
// base64, as /latency/hdr gives them) into one, encoded alike.
func mergeEncoded(hs []string) (string, error) {
	var sum *hdr.Histogram
	var geom *hdr.Snapshot
	for i, s := range hs {
		h, err := hdr.Decode([]byte(s))
		if err != nil {
			return "", fmt.Errorf("segment %d: decode: %w", i+1, err)
		}
		if sum == nil {
			sum, geom = h, h.Export()
			continue
		}
		if g := h.Export(); g.LowestTrackableValue != geom.LowestTrackableValue ||
			g.HighestTrackableValue != geom.HighestTrackableValue || g.SignificantFigures != geom.SignificantFigures {
			return "", fmt.Errorf("segment %d: histogram range or precision differs from segment 1's", i+1)
		}
		if dropped := sum.Merge(h); dropped != 0 {
			return "", fmt.Errorf("segment %d: %d samples dropped in the merge", i+1, dropped)
		}
	}
	if sum == nil {
		return "", errors.New("no histograms to merge")
	}
	enc, err := sum.Encode(hdr.V2CompressedEncodingCookieBase)
	if err != nil {
		return "", fmt.Errorf("encode the merged histogram: %w", err)
	}
	return string(enc), nil
}

// e2e is the end-to-end stage's percentiles (zero when there is none).
func (r result) e2e() percentiles {
	for _, s := range r.stages {
		if s.name == "e2e" {
			return s.p
		}
	}
	return percentiles{}
}

// pairRatios is f(other) ÷ f(ref) per round: other[i] and ref[i] are the
// two transports' segments of round i. NaN where ref's value is 0.
func pairRatios(ref, other []result, f func(result) float64) []float64 {
	n := min(len(ref), len(other))
	out := make([]float64, n)
	for i := range n {
		out[i] = math.NaN()
		if d := f(ref[i]); d != 0 {
			out[i] = f(other[i]) / d
		}
	}
	return out
}

// median is the middle of xs, NaN left out (the mean of the two middle
// ones for an even count); NaN when none is left.
func median(xs []float64) float64 {
	v := make([]float64, 0, len(xs))
	for _, x := range xs {
		if !math.IsNaN(x) {
			v = append(v, x)
		}
	}
	if len(v) == 0 {
		return math.NaN()
	}
	slices.Sort(v)
	if m := len(v) / 2; len(v)%2 == 0 {
		return (v[m-1] + v[m]) / 2
	} else {
		return v[m]
	}
}

// times formats a ratio as "1.23×", NaN as "n/a".
func times(x float64) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return "n/a"
	}
	return fmt.Sprintf("%.2f×", x)
}

// pairLine is the report's line of other ÷ ref per round of segments and
// their median, for e2e p50 and p99 and agent CPU: the spread within one run.
func pairLine(ref, other result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s ÷ %s per round of segments (each round measures every transport once, back to back; in run order): ", other.transport, ref.transport)
	for i, m := range []struct {
		name string
		f    func(result) float64
	}{
		{"e2e p50", func(r result) float64 { return r.e2e().P50 }},
		{"e2e p99", func(r result) float64 { return r.e2e().P99 }},
		{"agent CPU", func(r result) float64 { return r.agentCPU }},
	} {
		if i > 0 {
			b.WriteString("; ")
		}
		rs := pairRatios(ref.segments, other.segments, m.f)
		parts := make([]string, len(rs))
		for j, x := range rs {
			parts[j] = times(x)
		}
		fmt.Fprintf(&b, "%s %s (median %s)", m.name, strings.Join(parts, " / "), times(median(rs)))
	}
	b.WriteString(".\n\n")
	return b.String()
}
