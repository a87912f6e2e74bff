// Command bench-e2e measures the whole pipeline end to end: a camera
// process (synthetic scene, 1280×720 rgb8 + 115,200 points at 30 Hz) and an
// agent process (voxel → BEV → preprocess → infer → plan), over the
// zero-copy unix transport and over the copy baseline in one run,
// interleaved: each transport's time is split into --segments segments,
// run in rounds that alternate A B B A (A B C C B A with three), each with
// fresh processes and its own warm-up left out, so that drift of a shared
// machine weighs on both sides alike. It reports per-stage and end-to-end
// percentiles from the agent's /latency (the segments' windows pooled), the
// CPU use of both processes, frames published vs processed, and the ratio
// per round of segments, and writes them as markdown.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/zerohop/zerohop/internal/childproc"
	"github.com/zerohop/zerohop/telemetry"
)

func main() {
	// SIGINT/SIGTERM cancel the run: measure stops the camera and agent and removes its temp dir before run returns.
	childproc.RunMain("bench-e2e", run)
}

type options struct {
	seconds    int
	segments   int // per transport
	rate       float64
	bin        string
	out        string
	transports []string
	// healthTimeout bounds the wait for the agent's first healthy answer
	// (healthTimeout; tests shorten it).
	healthTimeout time.Duration
}

// transportNames are the valid --transports values.
var transportNames = []string{"unix", "copy", "unix+spin", "unix+lidar", "unix+scan"}

const (
	maxSeconds = 24 * 60 * 60
	// The camera accepts up to 10 kHz. The agent is healthy only within
	// its 200 ms watchdog after a fresh frame, which healthTimeout must see
	// at least once: below 0.1 Hz a frame may take longer than that to
	// come, and a run measures next to nothing anyway.
	minRate, maxRate float64 = 0.1, 10000
	healthTimeout            = 30 * time.Second
)

// parseOptions parses and checks the flags; usage and flag errors go to
// output. For -h it returns flag.ErrHelp.
func parseOptions(args []string, output io.Writer) (options, error) {
	fs := flag.NewFlagSet("bench-e2e", flag.ContinueOnError)
	fs.SetOutput(output)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `Usage: bench-e2e [flags]

Runs bin/camera and bin/agent as two processes on the synthetic scene for
each transport (zero-copy "unix" and the "copy" baseline), and writes
per-stage latency percentiles, CPU %% of each process and frame counts as a
markdown table (stdout and --out). Build the binaries first (make build).

The transports are interleaved: each one's --seconds is split into
--segments segments, run in rounds that go forward and back (two
transports, 4 segments: unix copy copy unix unix copy copy unix; three:
A B C C B A ...), each segment with a fresh camera and agent whose warm-up
is left out. A transport's table pools its segments' windows; the report
adds the ratio per round of segments and their median.

Flags:
`)
		fs.PrintDefaults()
	}
	var o options
	var long bool
	var transports string
	fs.IntVar(&o.seconds, "seconds", 60, "measured seconds per transport, over all its segments")
	fs.IntVar(&o.segments, "segments", 0, fmt.Sprintf("segments per transport, each measuring at least %g s; even with two or more transports (default: %d, or fewer for a short --seconds, down to 2; 1 with one transport)", minSegment.Seconds(), maxDefaultSegments))
	fs.BoolVar(&long, "long", false, "3-minute mode (--seconds 180)")
	fs.Float64Var(&o.rate, "rate", 30, "camera frame rate, Hz")
	fs.StringVar(&o.bin, "bin", "bin", "directory holding the camera and agent binaries")
	fs.StringVar(&o.out, "out", "", `markdown output file, its SVG charts beside it ("", the default: stdout only; make bench-e2e writes the committed docs/bench-e2e.md)`)
	fs.StringVar(&transports, "transports", "unix,copy", `transports to measure, in order: unix, copy, unix+spin (the agent spinning on its handle rings, --spin), unix+lidar (a robot without a camera: camera --image-size none, agent --lidar-only) or unix+scan (a robot with a planar 2D LiDAR and no camera: camera --planar-lidar --image-size none, agent --planar-lidar)`)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q (see --help)", fs.Args())
	}
	if long {
		o.seconds = 180
	}
	if o.seconds < 5 || o.seconds > maxSeconds {
		return o, fmt.Errorf("--seconds %d: want 5 to %d", o.seconds, maxSeconds)
	}
	if !(o.rate >= minRate && o.rate <= maxRate) { // NaN fails too
		return o, fmt.Errorf("--rate %g: want %g to %g Hz", o.rate, minRate, maxRate)
	}
	if o.bin == "" {
		return o, errors.New(`--bin "": want the directory holding the camera and agent binaries`)
	}
	for _, t := range strings.Split(transports, ",") {
		t = strings.TrimSpace(t)
		switch {
		case !slices.Contains(transportNames, t):
			return o, fmt.Errorf("--transports %q: unknown transport %q, want %s", transports, t, strings.Join(transportNames, ", "))
		case slices.Contains(o.transports, t):
			return o, fmt.Errorf("--transports %q: %s given twice", transports, t)
		}
		o.transports = append(o.transports, t)
	}
	segmentsGiven := false
	fs.Visit(func(f *flag.Flag) { segmentsGiven = segmentsGiven || f.Name == "segments" })
	if !segmentsGiven {
		o.segments = defaultSegments(len(o.transports), o.seconds)
	}
	if err := checkSegments(o.seconds, o.segments, len(o.transports)); err != nil {
		return o, err
	}
	o.healthTimeout = healthTimeout
	return o, nil
}

func run(ctx context.Context, args []string) error {
	o, err := parseOptions(args, os.Stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	for _, b := range []string{"camera", "agent"} {
		if _, err := os.Stat(filepath.Join(o.bin, b)); err != nil {
			return fmt.Errorf("%s: %w (run make build first)", filepath.Join(o.bin, b), err)
		}
	}
	// windows[i] are transport i's segments, in run order: windows[i][r]
	// is its segment of round r.
	windows := make([][]window, len(o.transports))
	order := segmentOrder(len(o.transports), o.segments)
	d := segmentLength(o.seconds, o.segments)
	for k, i := range order {
		t := o.transports[i]
		fmt.Fprintf(os.Stderr, "bench-e2e: segment %d of %d: %s transport, %g s ...\n", k+1, len(order), t, d.Seconds())
		w, err := measure(ctx, o, t, d)
		if ctx.Err() != nil {
			return interrupted(ctx)
		}
		if err != nil {
			return fmt.Errorf("%s transport, segment %d of %d: %w", t, k+1, len(order), err)
		}
		windows[i] = append(windows[i], w)
	}
	var results []result
	for i, t := range o.transports {
		r, err := summarize(t, windows[i])
		if err != nil {
			return fmt.Errorf("%s transport: %w", t, err)
		}
		for j := range windows[i] {
			s, err := summarize(t, windows[i][j:j+1])
			if err != nil {
				return fmt.Errorf("%s transport, its segment %d: %w", t, j+1, err)
			}
			r.segments = append(r.segments, s)
		}
		results = append(results, r)
	}
	md := report(o, results)
	fmt.Print(md)
	if o.out == "" {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(o.out), 0o755); err != nil {
		return err
	}
	// One SVG per run beside the markdown, linked from it.
	for _, r := range results {
		name := svgName(o.out, r.transport)
		if err := os.WriteFile(name, []byte(latencySVG(r)), 0o644); err != nil {
			return err
		}
		md += fmt.Sprintf("![%s end-to-end latency](%s)\n", r.transport, filepath.Base(name))
	}
	return os.WriteFile(o.out, []byte(md), 0o644)
}

// interrupted is run's error once ctx was cancelled (by a signal in main):
// by then measure has stopped the children and removed its temp dir.
func interrupted(ctx context.Context) error {
	return fmt.Errorf("interrupted (%v): camera and agent stopped, temp dir removed", context.Cause(ctx))
}

type percentiles = telemetry.Percentiles

// snapshot is what the report takes from the agent's /latency: the stage
// order and the frame counters.
type snapshot struct {
	Stages []struct {
		Name string `json:"name"`
	} `json:"stages"`
	Counters map[string]float64 `json:"counters"`
}

// histograms is the agent's /latency/hdr.
type histograms struct {
	Unit   string            `json:"unit"`
	Stages map[string]string `json:"stages"`
}

// stage is one stage's latencies over the measured window.
type stage struct {
	name string
	p    percentiles
}

type result struct {
	transport           string
	stages              []stage            // over the measured window, in /latency's order
	counters            map[string]float64 // the agent's, over the measured window
	cameraCPU, agentCPU float64            // percent of one core
	published           float64            // camera frames published (points topic)
	seconds             float64            // measured, summed over the segments
	segments            []result           // each segment alone, one per round in run order
}

func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// measure runs one segment: a fresh camera and agent over transport,
// warmed up, then measured for d.
func measure(ctx context.Context, o options, transport string, d time.Duration) (window, error) {
	// The children's Pdeathsig is bound to the thread that forks them (see
	// startProc): keep this goroutine, and no other, on that thread until
	// they are stopped. The deferred unlock runs after their deferred stops.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	dir, err := os.MkdirTemp("", "zerohop-bench")
	if err != nil {
		return window{}, err
	}
	keep := false // the children's logs, for a hang
	defer func() {
		if !keep {
			os.RemoveAll(dir)
		}
	}()
	camLog, err := os.Create(filepath.Join(dir, "camera.stderr"))
	if err != nil {
		return window{}, err
	}
	defer camLog.Close()
	agentLog, err := os.Create(filepath.Join(dir, "agent.stderr"))
	if err != nil {
		return window{}, err
	}
	defer agentLog.Close()
	sock := filepath.Join(dir, "camera.sock")
	camAddr, err := freePort()
	if err != nil {
		return window{}, err
	}
	agentAddr, err := freePort()
	if err != nil {
		return window{}, err
	}
	// "unix+spin": the unix transport with the agent spinning on its
	// handle rings (--spin); "unix+lidar": a robot without a camera;
	// "unix+scan": one with a planar LiDAR and no camera.
	base, spin := strings.CutSuffix(transport, "+spin")
	base, lidarOnly := strings.CutSuffix(base, "+lidar")
	base, scan := strings.CutSuffix(base, "+scan")
	camArgs := []string{"--socket", sock, "--transport", base,
		"--rate", strconv.FormatFloat(o.rate, 'f', -1, 64), "--metrics", camAddr, "--log-level", "warn"}
	if lidarOnly || scan {
		camArgs = append(camArgs, "--image-size", "none")
	}
	if scan {
		camArgs = append(camArgs, "--planar-lidar")
	}
	cam, err := startProc("camera", filepath.Join(o.bin, "camera"), camLog, camArgs...)
	if err != nil {
		return window{}, err
	}
	defer cam.stop()
	agentArgs := []string{"--socket", sock, "--transport", base, "--http", agentAddr, "--providers", "cpu", "--log-level", "warn"}
	if spin {
		agentArgs = append(agentArgs, "--spin")
	}
	if lidarOnly {
		agentArgs = append(agentArgs, "--lidar-only")
	}
	if scan {
		agentArgs = append(agentArgs, "--planar-lidar")
	}
	agent, err := startProc("agent", filepath.Join(o.bin, "agent"), agentLog, agentArgs...)
	if err != nil {
		return window{}, err
	}
	defer agent.stop()

	// Warm up, then measure: CPU from /proc, counters and latencies as the
	// differences of the agent's since-start counters and histograms
	// between the window's start and end, so that connecting and warm-up
	// are left out. A child that exits meanwhile ends the run with its
	// exit status and stderr.
	if err := waitHealthy(ctx, "http://"+agentAddr+"/healthz", o.healthTimeout, cam, agent); err != nil {
		if errors.Is(err, errNeverHealthy) {
			// Running, and no frame made it through: say how far the
			// frames got, and keep each child's goroutines for a look.
			state := hangState(ctx, camAddr, agentAddr, !lidarOnly && !scan)
			dumpAll(agent, cam)
			keep = true
			return window{}, fmt.Errorf("%w; %s; the children's stderr, ending with their goroutines (SIGQUIT): %s, %s", err, state, agentLog.Name(), camLog.Name())
		}
		return window{}, err
	}
	if err := hold(ctx, 2*time.Second, "during warm-up", cam, agent); err != nil {
		return window{}, err
	}
	c0, a0 := cpuTicks(cam.cmd.Process.Pid), cpuTicks(agent.cmd.Process.Pid)
	w0, err := readCounts(ctx, camAddr, agentAddr)
	if err != nil {
		return window{}, fmt.Errorf("at the window's start: %w", err)
	}
	start := time.Now()
	if err := hold(ctx, d, "while measuring", cam, agent); err != nil {
		return window{}, err
	}
	el := time.Since(start).Seconds()
	c1, a1 := cpuTicks(cam.cmd.Process.Pid), cpuTicks(agent.cmd.Process.Pid)
	w1, err := readCounts(ctx, camAddr, agentAddr)
	if err != nil {
		return window{}, fmt.Errorf("at the window's end: %w", err)
	}
	w := window{seconds: el, cameraTicks: c1 - c0, agentTicks: a1 - a0, published: w1.published - w0.published,
		counters: map[string]float64{}, start: w0.hist.Stages, end: w1.hist.Stages}
	for _, st := range w1.snap.Stages {
		w.stages = append(w.stages, st.Name)
	}
	for name, v := range w1.snap.Counters {
		w.counters[name] = v - w0.snap.Counters[name]
	}
	return w, nil
}

// counts is what a window's start and end read: the camera's published
// clouds, the agent's counters and since-start histograms.
type counts struct {
	published float64
	snap      snapshot
	hist      histograms
}

func readCounts(ctx context.Context, camAddr, agentAddr string) (counts, error) {
	var c counts
	var err error
	if c.published, err = metric(ctx, "http://"+camAddr+"/metrics", `zerohop_camera_published_total{topic="points"}`); err != nil {
		return c, fmt.Errorf("camera metrics: %w", err)
	}
	if err := getJSON(ctx, "http://"+agentAddr+"/latency/hdr", &c.hist); err != nil {
		return c, err
	}
	if err := getJSON(ctx, "http://"+agentAddr+"/latency", &c.snap); err != nil {
		return c, err
	}
	return c, nil
}

// svgName is the histogram file of one transport's run, beside out.
func svgName(out, transport string) string {
	return strings.TrimSuffix(out, filepath.Ext(out)) + "-" + transport + ".svg"
}

// httpClient bounds every request, so that a wedged child cannot hang
// the benchmark.
var httpClient = &http.Client{Timeout: 5 * time.Second}

func get(ctx context.Context, url string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	return httpClient.Do(req)
}

// errNeverHealthy: the children ran, and the agent did not answer healthy
// in time.
var errNeverHealthy = errors.New("agent never became healthy")

// hangState says how far the frames got when the agent never became
// healthy: the clouds and images (if the run has any) the camera
// published and its late frames (a camera blocked in a write falls
// behind), and the agent's frame counters; what cannot be read is said so.
func hangState(ctx context.Context, camAddr, agentAddr string, images bool) string {
	type counter struct{ what, name string }
	counters := []counter{{"clouds published", `zerohop_camera_published_total{topic="points"}`}}
	if images {
		counters = append(counters, counter{"images published", `zerohop_camera_published_total{topic="image"}`})
	}
	counters = append(counters, counter{"frames late", "zerohop_camera_frames_late_total"})
	var parts []string
	for _, m := range counters {
		if v, err := metric(ctx, "http://"+camAddr+"/metrics", m.name); err != nil {
			parts = append(parts, fmt.Sprintf("camera %s: %v", m.what, err))
		} else {
			parts = append(parts, fmt.Sprintf("camera %s %g", m.what, v))
		}
	}
	var snap snapshot
	if err := getJSON(ctx, "http://"+agentAddr+"/latency", &snap); err != nil {
		parts = append(parts, fmt.Sprintf("agent counters: %v", err))
	} else {
		for _, name := range []string{"frames_received", "frames_processed", "frames_dropped", "frames_superseded", "frames_unpaired_total"} {
			parts = append(parts, fmt.Sprintf("agent %s %g", name, snap.Counters[name]))
		}
	}
	return strings.Join(parts, ", ")
}

// waitHealthy polls url until it answers 200, for at most healthTimeout;
// it gives up early when ctx is done or one of procs exits.
func waitHealthy(ctx context.Context, url string, timeout time.Duration, procs ...*proc) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	exited := anyExited(procs...)
	var last string
	for {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		resp, err := get(pctx, url)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
			resp.Body.Close()
			if resp.StatusCode == 200 {
				cancel()
				return nil
			}
			last = fmt.Sprintf("%s: %s %s", url, resp.Status, strings.TrimSpace(string(body)))
		} else {
			last = err.Error()
		}
		cancel()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-exited:
			return errExited("before the agent became healthy", procs...)
		case <-deadline.C:
			return fmt.Errorf("%w within %v (last: %s)", errNeverHealthy, timeout, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func getJSON(ctx context.Context, url string, v any) error {
	resp, err := get(ctx, url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(v)
}

// metric returns the value of the metric line starting with name.
func metric(ctx context.Context, url, name string) (float64, error) {
	resp, err := get(ctx, url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return strconv.ParseFloat(v, 64)
		}
	}
	return 0, fmt.Errorf("%s: no %s", url, name)
}

// cpuTicks is utime+stime of pid in clock ticks (/proc/PID/stat fields 14
// and 15), all threads included.
func cpuTicks(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	k, _ := strconv.ParseInt(f[12], 10, 64)
	return u + k
}

func report(o options, rs []result) string {
	var b strings.Builder
	host, _ := os.Hostname()
	fmt.Fprintf(&b, "# End-to-end benchmark\n\n")
	fmt.Fprintf(&b, "`bench-e2e --seconds %d --segments %d --rate %g --transports %s` — %s, %s, %d CPUs, %s, %s, commit %s.\n\n",
		o.seconds, o.segments, o.rate, strings.Join(o.transports, ","), time.Now().UTC().Format("2006-01-02 15:04 UTC"), cpuModel(), runtime.NumCPU(), runtime.Version(), host, commit())
	fmt.Fprintf(&b, "Camera: synthetic scene, 1280×720 rgb8 (none in the +lidar and +scan runs) + 115,200 points per frame (1,800 of a planar scan in the +scan runs) at %g Hz. Agent: CPU execution provider, ONNX Runtime 1 intra-op thread. ", o.rate)
	b.WriteString("Latencies in µs over the measured window, warm-up left out: the agent's since-start HDR histograms (`/latency/hdr`) at the window's end less those at its start; nearest-rank percentiles. Frame counts and CPU (% of one core, /proc utime+stime) over the same window.")
	if o.segments > 1 {
		order := segmentOrder(len(o.transports), o.segments)
		names := make([]string, len(order))
		for k, i := range order {
			names[k] = o.transports[i]
		}
		fmt.Fprintf(&b, " Each transport's %d s are %d segments of %g s, each with a fresh camera and agent and its own warm-up and window; the segments ran interleaved, in this order: %s. A transport's table pools its segments' windows (histograms merged, frames and CPU time summed).",
			o.seconds, o.segments, segmentLength(o.seconds, o.segments).Seconds(), strings.Join(names, ", "))
	}
	b.WriteString("\n\n")
	for _, r := range rs {
		fmt.Fprintf(&b, "## %s transport\n\n", r.transport)
		b.WriteString("| stage | count | p50 | p90 | p99 | p99.9 | max |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n")
		for _, s := range r.stages {
			p := s.p
			fmt.Fprintf(&b, "| %s | %d | %.0f | %.0f | %.0f | %.0f | %.0f |\n", s.name, p.Count, p.P50, p.P90, p.P99, p.P999, p.Max)
		}
		c := r.counters
		took := "clouds and images"
		if strings.HasSuffix(r.transport, "+lidar") || strings.HasSuffix(r.transport, "+scan") {
			took = "clouds"
		}
		fmt.Fprintf(&b, "\nCPU: camera %.1f %%, agent %.1f %%. Frames in %.0f s: camera published %.0f clouds; agent processed %.0f frames (took up %.0f %s, dropped %.0f, superseded %.0f).\n\n",
			r.cameraCPU, r.agentCPU, r.seconds, r.published, c["frames_processed"], c["frames_received"], took, c["frames_dropped"], c["frames_superseded"])
	}
	// Each transport against the first one (zero-copy by default).
	for _, a := range rs[min(1, len(rs)):] {
		z := rs[0]
		ratio := func(a, b float64) string {
			if b == 0 {
				return "n/a"
			}
			return times(a / b)
		}
		fmt.Fprintf(&b, "## %s vs %s, same run (interleaved, %d segments each)\n\n| | %s | %s | ratio |\n| --- | ---: | ---: | ---: |\n", a.transport, z.transport, o.segments, z.transport, a.transport)
		for _, row := range []struct {
			name string
			f    func(percentiles) float64
		}{{"e2e p50 µs", func(p percentiles) float64 { return p.P50 }}, {"e2e p99 µs", func(p percentiles) float64 { return p.P99 }}, {"e2e max µs", func(p percentiles) float64 { return p.Max }}} {
			fmt.Fprintf(&b, "| %s | %.0f | %.0f | %s |\n", row.name, row.f(z.e2e()), row.f(a.e2e()), ratio(row.f(a.e2e()), row.f(z.e2e())))
		}
		fmt.Fprintf(&b, "| camera CPU %% | %.1f | %.1f | %s |\n", z.cameraCPU, a.cameraCPU, ratio(a.cameraCPU, z.cameraCPU))
		fmt.Fprintf(&b, "| agent CPU %% | %.1f | %.1f | %s |\n\n", z.agentCPU, a.agentCPU, ratio(a.agentCPU, z.agentCPU))
		b.WriteString(pairLine(z, a))
	}
	return b.String()
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "model name"); ok {
			return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
		}
	}
	return runtime.GOARCH
}

func commit() string {
	out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}
