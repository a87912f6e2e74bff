package agent

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/zerohop/zerohop/telemetry"
)

// healthySnapshot is /latency of an agent at 30 Hz on the CPU, nothing
// wrong.
func healthySnapshot() telemetry.Snapshot {
	return telemetry.Snapshot{
		WindowS: 10, Provider: "cpu", GPU: "none", VoxelPath: "cpu", Handoff: "unix", GPUKernels: "none",
		Stages: []telemetry.StageSnapshot{
			{Name: "voxel", Window: telemetry.Percentiles{Count: 300, P50: 1600, P99: 4100, Max: 13000}},
			{Name: "e2e", Window: telemetry.Percentiles{Count: 300, P50: 4100, P99: 7200, Max: 26000}},
		},
		Counters: map[string]float64{"frames_processed": 330, "frames_dropped": 2, "frames_superseded": 0},
		Gauges:   map[string]float64{"ground_found_z_m": -0.004, "ground_tilt_deg": 0.08, "ground_mismatch": 0},
	}
}

func TestDiagnose(t *testing.T) {
	prev := map[string]float64{"frames_processed": 300, "frames_dropped": 2}
	for _, tc := range []struct {
		name   string
		change func(*nodeState)
		part   string // the status that changes; the others stay OK
		level  StatusLevel
		msg    string
	}{
		{"healthy", func(*nodeState) {}, statusFrames, StatusOK, "30.0 Hz"},
		{"latency when healthy", func(*nodeState) {}, statusLatency, StatusOK, "end-to-end p50 4.10 ms, p99 7.20 ms"},
		{"commands zeroed", func(s *nodeState) {
			s.health = errors.New("no fresh frame within 200ms (cmd_vel zeroed for 3.2s)")
		}, statusCmdVel, StatusError, "no fresh frame within 200ms (cmd_vel zeroed for 3.2s)"},
		{"frames dropped in the period", func(s *nodeState) { s.snap.Counters["frames_dropped"] = 5 }, statusFrames, StatusWarn,
			"3 frames dropped in the last 1s (30.0 Hz processed)"},
		{"no frame in the period", func(s *nodeState) { s.snap.Counters["frames_processed"] = 300 }, statusFrames, StatusWarn,
			"no frame processed in the last 1s"},
		{"the first period counts from the start", func(s *nodeState) { s.prev = nil; s.elapsed = 11 * time.Second }, statusFrames, StatusWarn,
			"2 frames dropped in the last 11s (30.0 Hz processed)"},
		{"e2e p99 past half the watchdog", func(s *nodeState) { s.snap.Stages[1].Window.P99 = 101_000 }, statusLatency, StatusWarn,
			"end-to-end p99 101.00 ms is past half the watchdog period (200ms)"},
		{"no frames in the window", func(s *nodeState) { s.snap.Stages[1].Window = telemetry.Percentiles{} }, statusLatency, StatusOK,
			"no frames in the window"},
		{"ground mismatch", func(s *nodeState) { s.snap.Gauges["ground_mismatch"] = 1 }, statusLidar, StatusWarn, "suggested_lidar_rpy"},
		{"no ground check yet", func(s *nodeState) { s.snap.Gauges = map[string]float64{} }, statusLidar, StatusOK, "no ground check yet"},
		{"the GPU failed", func(s *nodeState) { s.snap.Counters["gpu_voxel_failures_total"] = 1 }, statusCompute, StatusWarn,
			"moved to the CPU"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := nodeState{snap: healthySnapshot(), prev: prev, elapsed: time.Second, watchdog: 200 * time.Millisecond}
			tc.change(&st)
			got := diagnose("front_agent", st)
			if len(got) != 5 {
				t.Fatalf("%d statuses, want 5", len(got))
			}
			for _, s := range got {
				part := strings.TrimPrefix(s.Name, "front_agent: ")
				if part == s.Name {
					t.Errorf("status %q not named after the node", s.Name)
				}
				if part != tc.part {
					if s.Level != StatusOK {
						t.Errorf("%s: level %d (%s), want OK", s.Name, s.Level, s.Message)
					}
					continue
				}
				if s.Level != tc.level || !strings.Contains(s.Message, tc.msg) {
					t.Errorf("%s: level %d, %q; want level %d with %q", s.Name, s.Level, s.Message, tc.level, tc.msg)
				}
			}
		})
	}
}

// The values a robot engineer reads in rqt_robot_monitor.
func TestDiagnoseValues(t *testing.T) {
	got := diagnose("zerohop_agent", nodeState{snap: healthySnapshot(), elapsed: 11 * time.Second, watchdog: 200 * time.Millisecond})
	want := map[string]map[string]string{
		"zerohop_agent: cmd_vel": {"watchdog": "200ms", "stale incidents": "0"},
		"zerohop_agent: frames":  {"rate Hz": "30.0", "processed": "330", "dropped": "2", "handoff": "unix"},
		"zerohop_agent: latency": {"e2e p50/p99/max ms": "4.10 / 7.20 / 26.00", "voxel p50/p99/max ms": "1.60 / 4.10 / 13.00", "window s": "10"},
		"zerohop_agent: lidar":   {"ground z m": "-0.004", "ground tilt deg": "0.08"},
		"zerohop_agent: compute": {"voxel path": "cpu", "inference provider": "cpu", "gpu": "none"},
	}
	for _, s := range got {
		values := map[string]string{}
		for _, kv := range s.Values {
			values[kv.Key] = kv.Value
		}
		for k, v := range want[s.Name] {
			if values[k] != v {
				t.Errorf("%s: %s = %q, want %q", s.Name, k, values[k], v)
			}
		}
		delete(want, s.Name)
	}
	if len(want) != 0 {
		t.Errorf("statuses missing: %v", want)
	}
}

// fakeStatusSink records what a StatusSink is given; err, when set, is
// what PublishStatus returns. A fake for the loop's plumbing.
type fakeStatusSink struct {
	mu    sync.Mutex
	calls [][]Status
	err   error
}

func (f *fakeStatusSink) PublishStatus(_ time.Time, st []Status) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, st)
	return f.err
}

func (f *fakeStatusSink) snapshot() [][]Status {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([][]Status(nil), f.calls...)
}

func (f *fakeStatusSink) setErr(err error) {
	f.mu.Lock()
	f.err = err
	f.mu.Unlock()
}

// The loop publishes every period, logs a failing sink once and its
// recovery once, keeps going through failures, and ends with every part
// STALE.
func TestStatusLoop(t *testing.T) {
	rec, err := telemetry.New(telemetry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zapcore.InfoLevel)
	sink := &fakeStatusSink{err: errors.New("ros2: write rt/diagnostics: timeout")}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- statusLoop(ctx, sink, 10*time.Millisecond, "zerohop_agent", 200*time.Millisecond, rec,
			func(time.Time) error { return nil }, zap.New(core))
	}()
	waitUntil := func(what string, cond func() bool) {
		deadline := time.Now().Add(10 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitUntil("three failing publishes", func() bool { return len(sink.snapshot()) >= 3 })
	sink.setErr(nil)
	n := len(sink.snapshot())
	waitUntil("two more publishes", func() bool { return len(sink.snapshot()) >= n+2 })
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("statusLoop did not return after cancel")
	}
	calls := sink.snapshot()
	for _, s := range calls[0] {
		if s.Level == StatusStale {
			t.Errorf("first publish: %s STALE", s.Name)
		}
	}
	last := calls[len(calls)-1]
	if len(last) != 5 {
		t.Fatalf("last publish: %d statuses", len(last))
	}
	for _, s := range last {
		if s.Level != StatusStale || s.Message != "the node stopped" {
			t.Errorf("last publish: %s level %d %q, want STALE", s.Name, s.Level, s.Message)
		}
	}
	if n := logs.FilterMessageSnippet("diagnostics: publish failed").Len(); n != 1 {
		t.Errorf("%d failure lines, want 1", n)
	}
	if n := logs.FilterMessageSnippet("diagnostics: publishing again").Len(); n != 1 {
		t.Errorf("%d recovery lines, want 1", n)
	}
}

// A composed agent sends its status while it runs, cmd_vel OK and frames
// flowing once it has warmed up, and STALE when it stops.
func TestRunNodePublishesStatus(t *testing.T) {
	requireORT(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	status := &fakeStatusSink{}
	err = RunNode(context.Background(), NodeConfig{Camera: "synthetic", Rate: 30, Beams: 16, AzimuthSteps: 300,
		Duration: 2 * time.Second, Listener: ln, Sink: &recordingSink{}, Threads: 1, Providers: "cpu",
		Status: status, StatusPeriod: 200 * time.Millisecond, StatusName: "front_agent"})
	if err != nil {
		t.Fatal(err)
	}
	calls := status.snapshot()
	if len(calls) < 4 {
		t.Fatalf("%d status publishes in 2 s at 200 ms, want at least 4", len(calls))
	}
	var sawRunning bool
	for _, st := range calls[:len(calls)-1] {
		if st[0].Name == "front_agent: cmd_vel" && st[0].Level == StatusOK && st[1].Level == StatusOK && strings.HasSuffix(st[1].Message, "Hz") {
			sawRunning = true
		}
	}
	if !sawRunning {
		t.Errorf("no status with cmd_vel and frames OK: %+v", calls)
	}
	for _, s := range calls[len(calls)-1] {
		if s.Level != StatusStale {
			t.Errorf("after the node stopped: %s level %d", s.Name, s.Level)
		}
	}
}

// An unusable period is refused before anything starts, naming the flag.
func TestStatusPeriodChecked(t *testing.T) {
	for _, p := range []time.Duration{-time.Second, 5 * time.Millisecond, 2 * time.Hour} {
		if err := CheckNodeConfig(NodeConfig{StatusPeriod: p}); err == nil || !strings.Contains(err.Error(), "--diagnostics-period") {
			t.Errorf("period %v: %v", p, err)
		}
	}
	if err := CheckNodeConfig(NodeConfig{StatusPeriod: 10 * time.Millisecond}); err != nil {
		t.Errorf("10ms: %v", err)
	}
}
