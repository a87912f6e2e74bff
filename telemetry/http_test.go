package telemetry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func newTestServer(t *testing.T, health func() error) (*Recorder, *httptest.Server) {
	t.Helper()
	r, _ := newRecorder(t, Options{})
	s, err := NewServer(r, ServerOptions{Health: health})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return r, ts
}

func get(t *testing.T, url string) (int, http.Header, string) {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, res.Header, string(body)
}

func TestLatencyJSON(t *testing.T) {
	r, ts := newTestServer(t, nil)
	for us := 1; us <= 1000; us++ {
		r.Record(StageE2E, time.Duration(us)*time.Microsecond)
	}
	r.Add(FramesReceived, 12)
	r.Add(FramesSuperseded, 2)
	r.SetProvider("cpu")
	r.SetVoxelPath("cpu")

	code, hdr, body := get(t, ts.URL+"/latency")
	if code != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "application/json") {
		t.Fatalf("status %d, content type %q", code, hdr.Get("Content-Type"))
	}
	var snap Snapshot
	dec := json.NewDecoder(strings.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&snap); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	if snap.Unit != "us" || snap.WindowS != 10 || snap.Provider != "cpu" || snap.GPU != "none" || snap.VoxelPath != "cpu" {
		t.Fatalf("header fields %+v", snap)
	}
	if len(snap.Stages) != 7 || snap.Stages[6].Name != "e2e" {
		t.Fatalf("stages %+v", snap.Stages)
	}
	e2e := snap.Stages[6]
	if e2e.SinceStart.Count != 1000 || !near(e2e.SinceStart.P50, 500) || !near(e2e.Window.P99, 990) {
		t.Fatalf("e2e %+v", e2e)
	}
	if snap.Counters["frames_received"] != 12 || snap.Counters["frames_superseded"] != 2 || snap.Counters["frames_dropped"] != 0 {
		t.Fatalf("counters %v", snap.Counters)
	}
	// The raw JSON uses the documented keys.
	for _, key := range []string{`"p50"`, `"p90"`, `"p99"`, `"p999"`, `"max"`, `"count"`, `"since_start"`, `"window"`, `"uptime_s"`} {
		if !strings.Contains(body, key) {
			t.Errorf("JSON lacks %s", key)
		}
	}
}

// TestHistogramsBetweenTwoReads: /latency/hdr at two times, subtracted by
// Between, summarises only what was recorded in between: a slow warm-up
// before the first read is left out.
func TestHistogramsBetweenTwoReads(t *testing.T) {
	r, ts := newTestServer(t, nil)
	read := func() map[string]string {
		t.Helper()
		code, hdr, body := get(t, ts.URL+"/latency/hdr")
		if code != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "application/json") {
			t.Fatalf("status %d, content type %q", code, hdr.Get("Content-Type"))
		}
		var h struct {
			Unit   string            `json:"unit"`
			Stages map[string]string `json:"stages"`
		}
		if err := json.Unmarshal([]byte(body), &h); err != nil || h.Unit != "us" || len(h.Stages) != 7 {
			t.Fatalf("decode %.200s: %v (unit %q, %d stages)", body, err, h.Unit, len(h.Stages))
		}
		return h.Stages
	}
	for range 50 { // warm-up: slow
		r.Record(StageE2E, 40*time.Millisecond)
	}
	first := read()
	for us := 1; us <= 1000; us++ {
		r.Record(StageE2E, time.Duration(us)*time.Microsecond)
	}
	second := read()
	got, err := Between(first["e2e"], second["e2e"])
	if err != nil {
		t.Fatal(err)
	}
	if want := (Percentiles{Count: 1000, P50: 500, P90: 900, P99: 990, P999: 999, Max: 1000}); got != want {
		t.Fatalf("between the reads %+v, want %+v", got, want)
	}
	if got, err := Between(first["voxel"], second["voxel"]); err != nil || got != (Percentiles{}) {
		t.Fatalf("an untouched stage between the reads: %+v, %v", got, err)
	}
	if _, err := Between(second["e2e"], first["e2e"]); err == nil {
		t.Fatal("Between of the reads swapped: no error")
	}
	if _, err := Between(first["e2e"], "not a histogram"); err == nil {
		t.Fatal("Between of garbage: no error")
	}
}

func TestMetricsText(t *testing.T) {
	r, ts := newTestServer(t, nil)
	r.Record(StageInfer, 3*time.Millisecond)
	r.Inc(FramesDropped)
	r.SetProvider("cpu")
	if err := r.AddGaugeFunc("pool_in_use", "Slots leased.", func() float64 { return 4 }); err != nil {
		t.Fatal(err)
	}
	code, _, body := get(t, ts.URL+"/metrics")
	if code != 200 {
		t.Fatalf("status %d", code)
	}
	for _, want := range []string{
		"# TYPE zerohop_stage_latency_seconds histogram",
		`zerohop_stage_latency_seconds_bucket{stage="infer",le="0.0022"} 0`,
		`zerohop_stage_latency_seconds_bucket{stage="infer",le="0.0033"} 1`,
		`zerohop_stage_latency_seconds_bucket{stage="infer",le="1e-06"} 0`,
		`zerohop_stage_latency_seconds_count{stage="infer"} 1`,
		`zerohop_stage_latency_seconds_count{stage="e2e"} 0`,
		"zerohop_frames_received_total 0",
		"zerohop_frames_dropped_total 1",
		"zerohop_frames_processed_total 0",
		"zerohop_frames_superseded_total 0",
		`zerohop_execution_provider_info{provider="cpu"} 1`,
		`zerohop_gpu_info{gpu="none"} 1`,
		`zerohop_voxel_path_info{voxel_path="unknown"} 1`,
		`zerohop_gpu_kernels_info{gpu_kernels="none"} 1`,
		"zerohop_pool_in_use 4",
		"zerohop_uptime_seconds",
		"go_goroutines",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// A gauge that is NaN (no value yet) or infinite, and a counter that is:
// /latency stays valid JSON without them, and shows the others; /metrics
// shows them as they are. One NaN gauge used to fail the whole /latency
// encoding (an empty body).
func TestNonFiniteMetricsLeaveLatencyValid(t *testing.T) {
	r, ts := newTestServer(t, nil)
	nan, inf := math.NaN(), math.Inf(1)
	for _, m := range []struct {
		name    string
		counter bool
		v       float64
	}{{"not_yet", false, nan}, {"too_far", false, inf}, {"odd_total", true, nan}, {"fine", false, 4}} {
		add := r.AddGaugeFunc
		if m.counter {
			add = r.AddCounterFunc
		}
		if err := add(m.name, "h", func() float64 { return m.v }); err != nil {
			t.Fatal(err)
		}
	}
	code, _, body := get(t, ts.URL+"/latency")
	var snap Snapshot
	if err := json.Unmarshal([]byte(body), &snap); code != 200 || err != nil {
		t.Fatalf("/latency: %d, %v: %q", code, err, body)
	}
	if _, ok := snap.Gauges["not_yet"]; ok || snap.Gauges["fine"] != 4 {
		t.Errorf("/latency gauges %v: want fine = 4 and no not_yet", snap.Gauges)
	}
	if _, ok := snap.Gauges["too_far"]; ok {
		t.Errorf("/latency gauges %v: want no too_far", snap.Gauges)
	}
	if _, ok := snap.Counters["odd_total"]; ok {
		t.Errorf("/latency counters %v: want no odd_total", snap.Counters)
	}
	_, _, metrics := get(t, ts.URL+"/metrics")
	for _, want := range []string{"zerohop_not_yet NaN", "zerohop_too_far +Inf", "zerohop_odd_total NaN", "zerohop_fine 4"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

func TestHealthz(t *testing.T) {
	var failing error
	_, ts := newTestServer(t, func() error { return failing })
	tests := []struct {
		name     string
		err      error
		wantCode int
		wantBody string
	}{
		{"healthy", nil, 200, "ok\n"},
		{"unhealthy", errors.New("watchdog: stale: newest frame is 350ms old"), 503, "watchdog: stale: newest frame is 350ms old\n"},
		{"healthy again", nil, 200, "ok\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			failing = tt.err
			code, _, body := get(t, ts.URL+"/healthz")
			if code != tt.wantCode || body != tt.wantBody {
				t.Fatalf("got %d %q, want %d %q", code, body, tt.wantCode, tt.wantBody)
			}
		})
	}
	// No health function: always healthy.
	_, plain := newTestServer(t, nil)
	if code, _, _ := get(t, plain.URL+"/healthz"); code != 200 {
		t.Fatalf("no health func: %d", code)
	}
}

func TestPageIsSelfContained(t *testing.T) {
	r, _ := newRecorder(t, Options{Stages: []string{"handoff", "infer", "e2e", `<b>"odd"</b>`}})
	s, err := NewServer(r, ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	defer ts.Close()
	code, hdr, body := get(t, ts.URL+"/")
	if code != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "text/html") {
		t.Fatalf("status %d, content type %q", code, hdr.Get("Content-Type"))
	}
	// Every label of /latency shows in the info line.
	for _, name := range []string{`data-stage="handoff"`, `data-stage="infer"`, `data-stage="e2e"`, "<h2>infer</h2>", `<canvas data-stage="infer"`, `<canvas data-stage="e2e"`,
		"snap.provider", "snap.gpu", "snap.voxel_path", "snap.gpu_kernels", "snap.handoff", "snap.inputs"} {
		if !strings.Contains(body, name) {
			t.Errorf("page lacks %q", name)
		}
	}
	if strings.Contains(body, `<b>"odd"</b>`) {
		t.Error("a stage name reached the page unescaped")
	}
	// No external resources: every src/href is relative, and nothing loads a
	// script or stylesheet from elsewhere.
	attr := regexp.MustCompile(`(?i)\b(src|href)\s*=\s*["']?([^"'\s>]*)`)
	for _, m := range attr.FindAllStringSubmatch(body, -1) {
		if u := m[2]; strings.Contains(u, ":") || strings.HasPrefix(u, "//") {
			t.Errorf("page references %s=%q", m[1], u)
		}
	}
	for _, bad := range []string{"http://", "https://", "<script src", "<link", "@import"} {
		if strings.Contains(strings.ToLower(body), bad) {
			t.Errorf("page contains %q", bad)
		}
	}
	if !strings.Contains(body, `fetch("latency"`) {
		t.Error("page does not poll latency")
	}
	if code, _, _ := get(t, ts.URL+"/nope"); code != 404 {
		t.Errorf("unknown path: %d, want 404", code)
	}
}

func TestPprofOnOwnMux(t *testing.T) {
	_, ts := newTestServer(t, nil)
	code, _, body := get(t, ts.URL+"/debug/pprof/")
	if code != 200 || !strings.Contains(body, "goroutine") || !strings.Contains(body, "heap") {
		t.Fatalf("pprof index: %d %.200q", code, body)
	}
	code, _, body = get(t, ts.URL+"/debug/pprof/goroutine?debug=1")
	if code != 200 || !strings.Contains(body, "goroutine profile") {
		t.Fatalf("goroutine profile: %d %.200q", code, body)
	}
	if code, _, _ := get(t, ts.URL+"/debug/pprof/cmdline"); code != 200 {
		t.Fatalf("cmdline: %d", code)
	}
}

// TestPprofSymbolReadsABoundedBody: /debug/pprof/symbol answers each
// address a POST names, built in memory; a body of 4 MiB of one address
// gave a reply of about 20 MiB. Bodies are cut at maxRequestBody.
func TestPprofSymbolReadsABoundedBody(t *testing.T) {
	_, ts := newTestServer(t, nil)
	word := fmt.Sprintf("%#x+", reflect.ValueOf(NewServer).Pointer())
	body := strings.Repeat(word, (4<<20)/len(word))
	resp, err := http.Post(ts.URL+"/debug/pprof/symbol", "text/plain", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	reply, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(reply), "NewServer") {
		t.Fatalf("the reply does not name the address: %.200q", reply)
	}
	if limit := 8 * maxRequestBody; len(reply) > limit {
		t.Fatalf("a %d-byte body got a %d-byte reply, want at most %d: the body is read whole", len(body), len(reply), limit)
	}
}

func TestServeRefusesAmbiguousAddress(t *testing.T) {
	r, _ := newRecorder(t, Options{})
	s, err := NewServer(r, ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// A Serve that wrongly accepts an address stops after 200 ms and
	// returns nil, failing the test instead of hanging it.
	short := func() context.Context {
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		t.Cleanup(cancel)
		return ctx
	}
	for _, addr := range []string{":0", "9090", "localhost"} {
		err := s.Serve(short(), addr)
		if err == nil || !strings.Contains(err.Error(), addr) {
			t.Errorf("Serve(%q) = %v, want an error naming the address", addr, err)
		}
	}
	if err := s.Serve(short(), "9090"); err == nil || !strings.Contains(err.Error(), "want HOST:PORT, e.g. 127.0.0.1:9090") {
		t.Errorf("Serve(9090) = %v, want it to say what an address looks like", err)
	}
	if err := s.Serve(short(), ":0"); err == nil || !strings.Contains(err.Error(), "all interfaces") {
		t.Errorf("Serve(:0) = %v, want a refusal to listen on all interfaces", err)
	}
	if ln, err := Listen(t.Context(), ":0"); err == nil {
		ln.Close()
		t.Error("Listen(:0) accepted an address without a host")
	}
	ln, err := Listen(t.Context(), "127.0.0.1:0")
	if err != nil {
		t.Fatalf("Listen(127.0.0.1:0): %v", err)
	}
	ln.Close()
}

func TestServeShutsDownOnCancel(t *testing.T) {
	s, ln, cancel, done := serveOnLoopback(t)
	url := "http://" + ln.Addr().String()
	if code, _, body := get(t, url+"/healthz"); code != 200 || body != "ok\n" {
		t.Fatalf("healthz %d %q", code, body)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ServeListener after cancel: %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ServeListener did not return after cancel")
	}
	if _, err := http.Get(url + "/healthz"); err == nil {
		t.Fatal("still serving after shutdown")
	}

	// Serve itself, on a loopback port: starts, stops, returns nil.
	ctx2, cancel2 := context.WithCancel(t.Context())
	go func() { time.Sleep(50 * time.Millisecond); cancel2() }()
	if err := s.Serve(ctx2, "127.0.0.1:0"); err != nil {
		t.Fatalf("Serve: %v", err)
	}
}

func TestServeReportsListenError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	r, _ := newRecorder(t, Options{})
	s, err := NewServer(r, ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Serve(t.Context(), ln.Addr().String()); err == nil || !strings.Contains(err.Error(), ln.Addr().String()) {
		t.Fatalf("Serve on a busy port = %v, want an error naming it", err)
	}
}

// failingListener accepts one connection, then fails every Accept with
// a permanent error.
type failingListener struct {
	net.Listener
	accepted atomic.Bool
}

func (l *failingListener) Accept() (net.Conn, error) {
	if l.accepted.Swap(true) {
		return nil, errors.New("accept: a permanent failure (fake)")
	}
	return l.Listener.Accept()
}

// TestServeErrorClosesOpenConnections: when accepting fails for good,
// ServeListener returns the error, and connections still open are
// closed, not left to their idle timeout (60 s).
func TestServeErrorClosesOpenConnections(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := &failingListener{Listener: inner}
	defer ln.Close()
	r, _ := newRecorder(t, Options{})
	s, err := NewServer(r, ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", inner.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	done := make(chan error, 1)
	go func() { done <- s.ServeListener(t.Context(), ln) }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "a permanent failure") {
			t.Fatalf("ServeListener = %v, want the accept error", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ServeListener still runs 10 s after accepting failed")
	}
	// The connection accepted before is closed: a read ends (EOF), and
	// soon, not at the server's 5 s ReadHeaderTimeout.
	if err := conn.SetReadDeadline(time.Now().Add(2 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("read on the connection accepted before: %v, want EOF (closed by the server)", err)
	}
}

func TestNoPprof(t *testing.T) {
	r, _ := newRecorder(t, Options{})
	s, err := NewServer(r, ServerOptions{NoPprof: true})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	defer ts.Close()
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/cmdline", "/debug/pprof/profile?seconds=1"} {
		if code, _, _ := get(t, ts.URL+path); code != http.StatusNotFound {
			t.Errorf("%s with NoPprof: %d, want 404", path, code)
		}
	}
	if code, _, _ := get(t, ts.URL+"/latency"); code != 200 {
		t.Errorf("/latency with NoPprof: %d", code)
	}
}

func TestLoopback(t *testing.T) {
	for _, tc := range []struct {
		addr net.Addr
		want bool
	}{
		{&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9090}, true},
		{&net.TCPAddr{IP: net.IPv6loopback, Port: 9090}, true},
		{&net.TCPAddr{IP: net.IPv4zero, Port: 9090}, false},
		{&net.TCPAddr{IP: net.IPv4(192, 168, 1, 5), Port: 9090}, false},
		{&net.UnixAddr{Name: "/x"}, false},
	} {
		if got := Loopback(tc.addr); got != tc.want {
			t.Errorf("Loopback(%v) = %v, want %v", tc.addr, got, tc.want)
		}
	}
}

// TestShutdownCutsOffALongRequest: a running CPU profile held the stop for
// 5 s, as long as the agent's whole shutdown grace, which then reported a
// stuck stage. The server now cuts it off after shutdownGrace, cleanly.
func TestShutdownCutsOffALongRequest(t *testing.T) {
	_, ln, cancel, done := serveOnLoopback(t)
	started := make(chan struct{})
	go func() {
		req, _ := http.NewRequest("GET", "http://"+ln.Addr().String()+"/debug/pprof/profile?seconds=30", nil)
		close(started)
		if res, err := http.DefaultClient.Do(req); err == nil {
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
		}
	}()
	<-started
	time.Sleep(200 * time.Millisecond) // the profile is running
	stopped := time.Now()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("ServeListener: %v, want nil", err)
		}
		if d := time.Since(stopped); d > shutdownGrace+time.Second {
			t.Errorf("stopped %v after cancel, want about %v", d, shutdownGrace)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ServeListener still waiting for the profile 10 s after cancel")
	}
}

// serveOnLoopback runs a Server on a loopback port until cancel; done gets
// ServeListener's result.
func serveOnLoopback(t *testing.T) (*Server, net.Listener, context.CancelFunc, <-chan error) {
	t.Helper()
	r, _ := newRecorder(t, Options{})
	s, err := NewServer(r, ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	done := make(chan error, 1)
	go func() { done <- s.ServeListener(ctx, ln) }()
	return s, ln, cancel, done
}

// TestLoopbackHostsOnly: on a loopback listener, a request for another
// name (a web page that resolved its own name to 127.0.0.1: DNS
// rebinding) is refused before it reaches any endpoint, pprof included;
// the names a local client uses are served.
func TestLoopbackHostsOnly(t *testing.T) {
	r, _ := newRecorder(t, Options{})
	s, err := NewServer(r, ServerOptions{LoopbackHostsOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		host string
		want int
	}{
		{"127.0.0.1:9090", 200},
		{"localhost:9090", 200},
		{"LOCALHOST", 200},
		{"[::1]:9090", 200},
		{"127.0.0.2", 200},
		{"evil.example:9090", 403},
		{"192.168.1.10:9090", 403},
		{"localhost.evil.example", 403},
		{"localhost.:9090", 200},
		{"", 200}, // HTTP/1.0 probes send none; a browser always does
	} {
		for _, path := range []string{"/healthz", "/debug/pprof/cmdline"} {
			req := httptest.NewRequest("GET", "http://x"+path, nil)
			req.Host = tc.host
			rw := httptest.NewRecorder()
			s.ServeHTTP(rw, req)
			if rw.Code != tc.want {
				t.Errorf("GET %s with Host %q: %d, want %d", path, tc.host, rw.Code, tc.want)
			}
		}
	}
	// Without the option (a listener other machines reach), any name.
	open, err := NewServer(r, ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest("GET", "http://robot.lan:9090/healthz", nil)
	rw := httptest.NewRecorder()
	open.ServeHTTP(rw, req)
	if rw.Code != 200 {
		t.Errorf("GET /healthz for robot.lan without LoopbackHostsOnly: %d", rw.Code)
	}
}
