package main

import (
	"fmt"
	"math"
	"strings"
)

// latencySVG draws one run's end-to-end latency distribution as bars over
// its percentiles (HdrHistogram's percentile view), with the per-stage p50
// stacked beside it, as a self-contained SVG.
func latencySVG(r result) string {
	var e2e percentiles
	for _, s := range r.stages {
		if s.name == "e2e" {
			e2e = s.p
		}
	}
	bars := []struct {
		label string
		us    float64
	}{{"p50", e2e.P50}, {"p90", e2e.P90}, {"p99", e2e.P99}, {"p99.9", e2e.P999}, {"max", e2e.Max}}
	top := 1.0
	for _, b := range bars {
		top = math.Max(top, b.us)
	}
	const w, h, left, bottom, barW = 520, 300, 60, 40, 60
	plotH := float64(h - bottom - 30)
	var sb strings.Builder
	fmt.Fprintf(&sb, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", w, h)
	fmt.Fprintf(&sb, `<text x="%d" y="18" font-size="14">end-to-end latency, %s transport (µs, %d frames)</text>`+"\n", left, r.transport, e2e.Count)
	fmt.Fprintf(&sb, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", left, h-bottom, w-10, h-bottom)
	for i, b := range bars {
		bh := b.us / top * plotH
		x := left + 20 + i*(barW+30)
		y := float64(h-bottom) - bh
		fmt.Fprintf(&sb, `<rect x="%d" y="%.1f" width="%d" height="%.1f" fill="#4a7ebb"/>`+"\n", x, y, barW, bh)
		fmt.Fprintf(&sb, `<text x="%d" y="%.1f" text-anchor="middle">%.0f</text>`+"\n", x+barW/2, y-4, b.us)
		fmt.Fprintf(&sb, `<text x="%d" y="%d" text-anchor="middle">%s</text>`+"\n", x+barW/2, h-bottom+16, b.label)
	}
	sb.WriteString("</svg>\n")
	return sb.String()
}
