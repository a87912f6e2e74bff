package telemetry

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Defaults for Options fields left at their zero value.
const (
	DefaultNamespace = "zerohop"
	DefaultWindow    = 10 * time.Second
	DefaultSlice     = time.Second
)

// DefaultBuckets returns the Prometheus latency buckets in seconds: 1 µs to
// 10 s, six per decade (the E6 series 1, 1.5, 2.2, 3.3, 4.7, 6.8), so that
// neighbours are at most 1.5× apart and histogram_quantile's estimate is
// within one bucket (1.5×) of the true value, from the plan stage's
// microseconds to a stall's seconds (a fresh slice each call). /latency's exact
// percentiles come from HDR histograms, not from these.
func DefaultBuckets() []float64 {
	var out []float64
	for exp := -6; exp < 1; exp++ {
		for _, m := range []string{"1", "1.5", "2.2", "3.3", "4.7", "6.8"} {
			out = append(out, mustParseFloat(m+"e"+strconv.Itoa(exp))) // exact decimals: le="1.5e-06", not 1.5000000000000002e-06
		}
	}
	return append(out, 10)
}

func mustParseFloat(s string) float64 {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		panic(err)
	}
	return f
}

// Options configure a Recorder; the zero value gives the defaults.
type Options struct {
	// Stages names the pipeline stages, in StageID order. Default
	// DefaultStages(). Names must be unique, non-empty and valid UTF-8.
	Stages []string
	// Namespace prefixes every Prometheus metric name. Default "zerohop".
	Namespace string
	// Window is the length of the sliding window, a multiple of Slice.
	// Default 10 s.
	Window time.Duration
	// Slice is the window's granularity: values recorded between two flushes
	// land in the slice of the flush (Run flushes every Slice; every read
	// flushes too). Default 1 s.
	Slice time.Duration
	// Buckets are the Prometheus histogram bucket bounds, seconds. Default
	// DefaultBuckets().
	Buckets []float64
	// Now is the clock (uptime, window slices). Default time.Now.
	Now func() time.Time
	// NoRuntimeMetrics leaves the Go runtime and process collectors out of
	// the registry.
	NoRuntimeMetrics bool
}

// Recorder holds the pipeline's latency histograms, counters and labels and
// its own Prometheus registry. Recording methods are safe for concurrent use
// and do not allocate.
type Recorder struct {
	namespace string
	slice     time.Duration
	slots     int
	now       func() time.Time
	start     time.Time
	stages    []*stageHist
	reg       *prometheus.Registry

	counters [numCounters]atomic.Uint64

	labelsMu sync.Mutex
	labels   map[string]string // "provider", "gpu", "voxel_path", "handoff"

	extraMu sync.Mutex
	extras  []extraMetric

	readMu  sync.Mutex           // serialises flushes and reads; guards the reader side of stages
	scratch *hdr.PackedHistogram // window merges; guarded by readMu
}

type extraMetric struct {
	name    string
	counter bool
	f       func() float64
}

// Label keys for SetLabel, shown in /latency and as Prometheus info metrics
// (e.g. zerohop_execution_provider_info{provider="cuda"} 1).
const (
	LabelProvider  = "provider"   // active execution provider: "tensorrt", "cuda", "cpu"
	LabelGPU       = "gpu"        // GPU name, or "none"
	LabelVoxelPath = "voxel_path" // "cpu" or "gpu"
	// LabelHandoff is how frames reach the pipeline: "socket" (handles over
	// the camera's socket), "rings" (a spinning agent polling handle rings),
	// "copy" (the copy baseline) or "inproc" (composed mode).
	LabelHandoff = "handoff"
	// LabelGPUKernels is what the GPU voxel kernels were loaded from: the
	// device's "sm_XY" (compiled by NVRTC), a "compute_XY" PTX, or "none".
	LabelGPUKernels = "gpu_kernels"
	// LabelInputs is what the model is fed: "lidar+camera" (clouds
	// paired with images) or "lidar" (a LiDAR-only model: no images);
	// "scan+camera" and "scan" for a planar LiDAR's scans.
	LabelInputs = "inputs"
)

type labelSpec struct{ key, metric, help, initial string }

// labelInfo lists the label keys with their info metric names (a function,
// not a package variable, so it cannot be changed at run time).
// numLabels is how many labels labelInfo describes.
const numLabels = 6

func labelInfo() [numLabels]labelSpec {
	return [...]labelSpec{
		{LabelProvider, "execution_provider_info", "Active inference execution provider (value is always 1).", "unknown"},
		{LabelGPU, "gpu_info", "GPU in use, or \"none\" (value is always 1).", "none"},
		{LabelVoxelPath, "voxel_path_info", "Where voxel filtering runs, \"cpu\" or \"gpu\" (value is always 1).", "unknown"},
		{LabelHandoff, "handoff_info", "How frames reach the pipeline: \"socket\", \"rings\", \"copy\" or \"inproc\" (value is always 1).", "unknown"},
		{LabelGPUKernels, "gpu_kernels_info", "What the GPU voxel kernels were loaded from: \"sm_XY\" (NVRTC), \"compute_XY\" PTX (the driver JIT-compiled it), or \"none\" (value is always 1).", "none"},
		{LabelInputs, "inputs_info", "What the model is fed: \"lidar+camera\" (each cloud paired with an image), \"lidar\" (a LiDAR-only model; no images taken), or \"scan\" / \"scan+camera\" for a planar LiDAR's scans (--planar-lidar) (value is always 1).", "unknown"},
	}
}

// validMetricName reports whether s matches [a-zA-Z_][a-zA-Z0-9_]*, the
// name syntax every Prometheus scraper accepts.
func validMetricName(s string) bool {
	for i, c := range []byte(s) {
		if !(c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || i > 0 && '0' <= c && c <= '9') {
			return false
		}
	}
	return s != ""
}

const metricNameSyntax = "[a-zA-Z_][a-zA-Z0-9_]*"

// New returns a Recorder for opts.
func New(opts Options) (*Recorder, error) {
	if opts.Stages == nil {
		opts.Stages = DefaultStages()
	}
	if opts.Namespace == "" {
		opts.Namespace = DefaultNamespace
	}
	if opts.Window == 0 {
		opts.Window = DefaultWindow
	}
	if opts.Slice == 0 {
		opts.Slice = DefaultSlice
	}
	if opts.Buckets == nil {
		opts.Buckets = DefaultBuckets()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("telemetry: "+format, args...)) }
	if len(opts.Stages) == 0 {
		bad("Stages is empty: need at least one stage")
	}
	seen := map[string]bool{}
	for i, s := range opts.Stages {
		switch {
		case s == "" || strings.ToValidUTF8(s, "") != s:
			bad("Stages[%d] %q: must be non-empty valid UTF-8", i, s)
		case seen[s]:
			bad("Stages[%d] %q: duplicate", i, s)
		}
		seen[s] = true
	}
	if !validMetricName(opts.Namespace) {
		bad("Namespace %q: must match %s", opts.Namespace, metricNameSyntax)
	}
	if opts.Slice < 0 {
		bad("Slice %v: must be > 0", opts.Slice)
	}
	if opts.Window < opts.Slice || opts.Slice > 0 && opts.Window%opts.Slice != 0 {
		bad("Window %v: must be a positive multiple of Slice %v", opts.Window, opts.Slice)
	}
	if opts.Slice > 0 && opts.Window/opts.Slice > 3600 {
		bad("Window %v / Slice %v: at most 3600 slices", opts.Window, opts.Slice)
	}
	for i, b := range opts.Buckets {
		if math.IsNaN(b) || b <= 0 || i > 0 && !(b > opts.Buckets[i-1]) {
			bad("Buckets[%d] %v: must be positive and increasing", i, b)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}

	r := &Recorder{
		namespace: opts.Namespace,
		slice:     opts.Slice,
		slots:     int(opts.Window / opts.Slice),
		now:       opts.Now,
		start:     opts.Now(),
		reg:       prometheus.NewRegistry(),
		labels:    map[string]string{},
		scratch:   hdr.NewPacked(lowestMicros, highestMicros, sigFigs),
	}
	for _, l := range labelInfo() {
		r.labels[l.key] = l.initial
	}

	latency := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: r.namespace,
		Name:      "stage_latency_seconds",
		Help:      "Latency of each pipeline stage; e2e is capture to cmd_vel.",
		Buckets:   opts.Buckets,
	}, []string{"stage"})
	for _, name := range opts.Stages {
		// Resolving the child now keeps Record free of label lookups and
		// makes every stage appear in /metrics before its first value.
		r.stages = append(r.stages, newStageHist(name, r.slots, latency.WithLabelValues(name)))
	}
	cs := []prometheus.Collector{latency, labelCollector{r}}
	for c := range numCounters {
		cs = append(cs, prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: r.namespace, Name: counterName(c) + "_total", Help: counterHelp(c),
		}, func() float64 { return float64(r.counters[c].Load()) }))
	}
	cs = append(cs, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: r.namespace, Name: "uptime_seconds", Help: "Seconds since the Recorder was created.",
	}, func() float64 { return r.now().Sub(r.start).Seconds() }))
	if !opts.NoRuntimeMetrics {
		cs = append(cs, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	for _, c := range cs {
		if err := r.reg.Register(c); err != nil {
			return nil, fmt.Errorf("telemetry: register built-in metrics: %w", err)
		}
	}
	return r, nil
}

func counterHelp(c Counter) string {
	switch c {
	case FramesReceived:
		return "Handles taken up to be processed: clouds and images, so about twice frames_processed when both stream."
	case FramesProcessed:
		return "Frames planned, whose command was published (zero when the watchdog or a stall zeroed it: cmd_vel_zeroed)."
	case FramesDropped:
		return "Frames dropped: undeliverable, failed or rejected."
	}
	return "Clouds and images released unprocessed because a newer one arrived, by the pipeline or its transport's queue: rising means the agent is slower than the camera."
}

// Stages returns the stage names in StageID order.
func (r *Recorder) Stages() []string {
	out := make([]string, len(r.stages))
	for i, s := range r.stages {
		out[i] = s.name
	}
	return out
}

// Stage returns the ID of the named stage.
func (r *Recorder) Stage(name string) (StageID, bool) {
	for i, s := range r.stages {
		if s.name == name {
			return StageID(i), true
		}
	}
	return -1, false
}

// Record adds one latency sample for stage. Durations are kept in whole
// microseconds within 1 µs…60 s (negative counts as 0, longer as 60 s) in
// HdrHistogram, and exactly in the Prometheus histogram. An ID outside the
// stage list is ignored. Safe for concurrent use; does not allocate.
func (r *Recorder) Record(stage StageID, d time.Duration) {
	if uint(stage) >= uint(len(r.stages)) {
		return
	}
	r.stages[stage].record(d)
}

// RecordSince records the time from start to now (the Recorder's clock).
func (r *Recorder) RecordSince(stage StageID, start time.Time) {
	r.Record(stage, r.now().Sub(start))
}

// Inc adds one to a frame counter. Safe for concurrent use.
func (r *Recorder) Inc(c Counter) { r.Add(c, 1) }

// Add adds n to a frame counter; unknown counters are ignored.
func (r *Recorder) Add(c Counter, n uint64) {
	if uint(c) < uint(numCounters) {
		r.counters[c].Add(n)
	}
}

// Count returns a frame counter's value.
func (r *Recorder) Count(c Counter) uint64 {
	if uint(c) < uint(numCounters) {
		return r.counters[c].Load()
	}
	return 0
}

// SetLabel sets one of the label values (LabelProvider, LabelGPU,
// LabelVoxelPath, LabelHandoff, LabelGPUKernels, LabelInputs). Invalid UTF-8 is dropped
// from value.
func (r *Recorder) SetLabel(key, value string) error {
	var keys []string
	for _, l := range labelInfo() {
		if l.key == key {
			r.labelsMu.Lock()
			r.labels[key] = strings.ToValidUTF8(value, "")
			r.labelsMu.Unlock()
			return nil
		}
		keys = append(keys, strconv.Quote(l.key))
	}
	return fmt.Errorf("telemetry: unknown label %q: want one of %s", key, strings.Join(keys, ", "))
}

// SetProvider, SetGPU, SetVoxelPath and SetHandoff are SetLabel for the
// known keys.
func (r *Recorder) SetProvider(p string)  { _ = r.SetLabel(LabelProvider, p) }
func (r *Recorder) SetGPU(name string)    { _ = r.SetLabel(LabelGPU, name) }
func (r *Recorder) SetVoxelPath(p string) { _ = r.SetLabel(LabelVoxelPath, p) }
func (r *Recorder) SetHandoff(h string)   { _ = r.SetLabel(LabelHandoff, h) }

// Label returns a label's current value ("" for unknown keys).
func (r *Recorder) Label(key string) string {
	r.labelsMu.Lock()
	defer r.labelsMu.Unlock()
	return r.labels[key]
}

// AddGaugeFunc exports f as gauge <namespace>_<name> and in /latency under
// "gauges" (while its value is finite: JSON has no NaN, so a NaN gauge, for
// "no value yet", is only on /metrics). f is called on every read, concurrently with everything else,
// and must be cheap and safe for concurrent use (e.g. a pool's in-use
// count). Errors name the metric: invalid name, or already registered.
func (r *Recorder) AddGaugeFunc(name, help string, f func() float64) error {
	return r.addFunc(name, help, f, false)
}

// AddCounterFunc is AddGaugeFunc for a value that only grows (e.g. pool
// drops). By Prometheus convention name ends in "_total".
func (r *Recorder) AddCounterFunc(name, help string, f func() float64) error {
	return r.addFunc(name, help, f, true)
}

func (r *Recorder) addFunc(name, help string, f func() float64, counter bool) error {
	if !validMetricName(name) {
		return fmt.Errorf("telemetry: metric name %q: must match %s", name, metricNameSyntax)
	}
	if f == nil {
		return fmt.Errorf("telemetry: metric %q: nil function", name)
	}
	var c prometheus.Collector
	if counter {
		c = prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: r.namespace, Name: name, Help: help}, f)
	} else {
		c = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: r.namespace, Name: name, Help: help}, f)
	}
	if err := r.reg.Register(c); err != nil {
		return fmt.Errorf("telemetry: metric %q: %w", r.namespace+"_"+name, err)
	}
	r.extraMu.Lock()
	r.extras = append(r.extras, extraMetric{name: name, counter: counter, f: f})
	r.extraMu.Unlock()
	return nil
}

// Registry returns the Recorder's own Prometheus registry, for collectors
// of other packages. Never the global default registry.
func (r *Recorder) Registry() *prometheus.Registry { return r.reg }

// Run flushes the record buffers every Slice until ctx is done, so the
// sliding window is exact to one slice even when nobody reads. The caller
// owns the goroutine running it; Server.Serve runs it while serving.
func (r *Recorder) Run(ctx context.Context) {
	t := time.NewTicker(r.slice)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			r.readMu.Lock()
			r.flushLocked(r.now())
			r.readMu.Unlock()
		}
	}
}

// sliceOf numbers slices from the recorder's start, not from the epoch:
// t.Sub(r.start) reads the monotonic clock, so a wall clock stepped back
// (NTP) neither reopens old slices (counting samples twice in the window)
// nor skips new ones.
func (r *Recorder) sliceOf(t time.Time) int64 {
	n, s := int64(t.Sub(r.start)), int64(r.slice)
	q := n / s
	if n%s < 0 {
		q-- // floor for times before start
	}
	return q
}

func (r *Recorder) flushLocked(now time.Time) {
	slice := r.sliceOf(now)
	for _, s := range r.stages {
		s.flush(slice)
	}
}

// StageSnapshot is one stage's latency over the sliding window and since
// start, in microseconds.
type StageSnapshot struct {
	Name       string      `json:"name"`
	Window     Percentiles `json:"window"`
	SinceStart Percentiles `json:"since_start"`
}

// Snapshot is what /latency serves.
type Snapshot struct {
	Unit      string  `json:"unit"` // latency unit: "us"
	UptimeS   float64 `json:"uptime_s"`
	WindowS   float64 `json:"window_s"`
	Provider  string  `json:"provider"`
	GPU       string  `json:"gpu"`
	VoxelPath string  `json:"voxel_path"`
	Handoff   string  `json:"handoff"`
	// GPUKernels is LabelGPUKernels: "sm_90", "compute_70" (PTX), "none".
	GPUKernels string `json:"gpu_kernels"`
	// Inputs is LabelInputs: "lidar+camera", "lidar", "scan+camera" or "scan".
	Inputs   string             `json:"inputs"`
	Stages   []StageSnapshot    `json:"stages"`
	Counters map[string]float64 `json:"counters"` // built-in frame counters and AddCounterFunc
	Gauges   map[string]float64 `json:"gauges"`   // AddGaugeFunc
}

// Histograms flushes the record buffers and returns each stage's
// since-start histogram by name, HdrHistogram's V2 encoding (base64; values
// in µs), for Between.
func (r *Recorder) Histograms() (map[string]string, error) {
	out := make(map[string]string, len(r.stages))
	r.readMu.Lock()
	defer r.readMu.Unlock()
	r.flushLocked(r.now())
	for _, s := range r.stages {
		enc, err := s.since.Encode()
		if err != nil {
			return nil, fmt.Errorf("telemetry: encode stage %s: %w", s.name, err)
		}
		out[s.name] = string(enc)
	}
	return out, nil
}

// Snapshot flushes the record buffers and summarises everything. It
// allocates; reads are serialised.
func (r *Recorder) Snapshot() Snapshot {
	snap := Snapshot{
		Unit:     "us",
		WindowS:  (time.Duration(r.slots) * r.slice).Seconds(),
		Stages:   make([]StageSnapshot, len(r.stages)),
		Counters: map[string]float64{},
		Gauges:   map[string]float64{},
	}
	r.labelsMu.Lock()
	snap.Provider, snap.GPU, snap.VoxelPath = r.labels[LabelProvider], r.labels[LabelGPU], r.labels[LabelVoxelPath]
	snap.Handoff, snap.GPUKernels, snap.Inputs = r.labels[LabelHandoff], r.labels[LabelGPUKernels], r.labels[LabelInputs]
	r.labelsMu.Unlock()

	r.readMu.Lock()
	// The clock read under readMu: a flush by Run in between could put
	// the newest values in a later slice than the one the window ends at.
	now := r.now()
	snap.UptimeS = now.Sub(r.start).Seconds()
	r.flushLocked(now)
	slice := r.sliceOf(now)
	for i, s := range r.stages {
		s.window(slice, r.scratch)
		snap.Stages[i] = StageSnapshot{Name: s.name, Window: percentilesOf(r.scratch), SinceStart: percentilesOf(s.since)}
	}
	r.readMu.Unlock()

	for c := range numCounters {
		snap.Counters[counterName(c)] = float64(r.counters[c].Load())
	}
	r.extraMu.Lock()
	extras := append([]extraMetric(nil), r.extras...)
	r.extraMu.Unlock()
	for _, e := range extras {
		// JSON has no NaN or Inf: one such value would fail the whole
		// /latency encoding. Left out here, shown as they are on /metrics
		// (a NaN gauge: no value yet).
		v := e.f()
		switch {
		case math.IsNaN(v) || math.IsInf(v, 0):
		case e.counter:
			snap.Counters[e.name] = v
		default:
			snap.Gauges[e.name] = v
		}
	}
	return snap
}

// labelCollector exports the labels as info metrics, read at scrape time so
// that a changed value replaces the old series instead of adding one.
type labelCollector struct{ r *Recorder }

func (c labelCollector) desc(i int) *prometheus.Desc {
	l := labelInfo()[i]
	return prometheus.NewDesc(prometheus.BuildFQName(c.r.namespace, "", l.metric), l.help, []string{l.key}, nil)
}

func (c labelCollector) Describe(ch chan<- *prometheus.Desc) {
	for i := range numLabels {
		ch <- c.desc(i)
	}
}

func (c labelCollector) Collect(ch chan<- prometheus.Metric) {
	var values [numLabels]string
	c.r.labelsMu.Lock()
	for i, l := range labelInfo() {
		values[i] = c.r.labels[l.key]
	}
	c.r.labelsMu.Unlock()
	for i := range values {
		ch <- prometheus.MustNewConstMetric(c.desc(i), prometheus.GaugeValue, 1, values[i])
	}
}
