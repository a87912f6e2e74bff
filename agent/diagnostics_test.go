package agent

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zerohop/zerohop/planner"
	"github.com/zerohop/zerohop/telemetry"
	"github.com/zerohop/zerohop/telemetry/status"
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
		level  status.Level
		msg    string
	}{
		{"healthy", func(*nodeState) {}, statusFrames, status.OK, "30.0 Hz"},
		{"latency when healthy", func(*nodeState) {}, statusLatency, status.OK, "end-to-end p50 4.10 ms, p99 7.20 ms"},
		{"commands zeroed", func(s *nodeState) {
			s.health = errors.New("no fresh frame within 200ms (cmd_vel zeroed for 3.2s)")
		}, statusCmdVel, status.Error, "no fresh frame within 200ms (cmd_vel zeroed for 3.2s)"},
		// 1 of 31 is an unpaired cloud now and then: no warning.
		{"a drop now and then", func(s *nodeState) { s.snap.Counters["frames_dropped"] = 3 }, statusFrames, status.OK, "30.0 Hz"},
		{"frames dropped in the period", func(s *nodeState) { s.snap.Counters["frames_dropped"] = 5 }, statusFrames, status.Warn,
			"3 of 33 frames dropped in the last 1s (30.0 Hz processed)"},
		// Most of the period's drops found no image: the warning says so and
		// names the flag; without that, it does not.
		{"every cloud unpaired", func(s *nodeState) {
			s.snap.Counters["frames_processed"] = 300
			s.snap.Counters["frames_dropped"] = 32
			s.snap.Counters["frames_unpaired_total"] = 30
		}, statusFrames, status.Warn, "no frame processed in the last 1s: 30 clouds found no image within 20ms (--pair-tolerance"},
		{"frames dropped unpaired", func(s *nodeState) {
			s.snap.Counters["frames_dropped"] = 12
			s.snap.Counters["frames_unpaired_total"] = 9
		}, statusFrames, status.Warn, "10 of 40 frames dropped in the last 1s (30.0 Hz processed): 9 clouds found no image within 20ms (--pair-tolerance"},
		{"no frame in the period", func(s *nodeState) { s.snap.Counters["frames_processed"] = 300 }, statusFrames, status.Warn,
			"no frame processed in the last 1s"},
		{"the first period counts from the start", func(s *nodeState) {
			s.prev, s.elapsed = nil, 11*time.Second
			s.snap.Counters["frames_dropped"] = 20
		}, statusFrames, status.Warn, "20 of 350 frames dropped in the last 11s (30.0 Hz processed)"},
		// 130 ms p99 + 33 ms between frames = 163 ms > 160 ms.
		{"e2e p99 and the frame gap near the watchdog", func(s *nodeState) { s.snap.Stages[1].Window.P99 = 130_000 }, statusLatency, status.Warn,
			"end-to-end p99 130.00 ms plus 33.33 ms between frames is past 80% of the watchdog period (200ms)"},
		{"e2e p99 and the frame gap short of it", func(s *nodeState) { s.snap.Stages[1].Window.P99 = 125_000 }, statusLatency, status.OK,
			"p99 125.00 ms"},
		// At 5 Hz the 200 ms between frames alone is past the watchdog.
		{"frames too far apart for the watchdog", func(s *nodeState) { s.snap.Counters["frames_processed"] = 305 }, statusLatency, status.Warn,
			"plus 200.00 ms between frames"},
		{"no frames in the window", func(s *nodeState) { s.snap.Stages[1].Window = telemetry.Percentiles{} }, statusLatency, status.OK,
			"no frames in the window"},
		{"ground mismatch", func(s *nodeState) { s.snap.Gauges["ground_mismatch"] = 1 }, statusLidar, status.Warn, "suggested_lidar_rpy"},
		{"ground mismatch with the mount from /tf_static", func(s *nodeState) {
			s.snap.Gauges["ground_mismatch"] = 1
			s.lidarFrame, s.mountFrom = "velodyne", "/tf_static base_footprint→velodyne"
		}, statusLidar, status.Warn, "not where the mount from /tf_static base_footprint→velodyne puts it: check the URDF's"},
		{"no ground check yet", func(s *nodeState) { s.snap.Gauges = map[string]float64{} }, statusLidar, status.OK, "no ground check yet"},
		{"clouds in another frame than the mount's", func(s *nodeState) {
			s.lidarFrame, s.mountFrom = "velodyne", "/tf_static base_footprint→velodyne"
			s.snap.Counters["lidar_frame_mismatch_total"] = 4
		}, statusLidar, status.Error, "clouds dropped: they are not in frame velodyne"},
		{"clouds in another frame only before the period", func(s *nodeState) {
			s.lidarFrame, s.mountFrom = "velodyne", "/tf_static base_footprint→velodyne"
			s.snap.Counters["lidar_frame_mismatch_total"] = 4
			s.prev = map[string]float64{"frames_processed": 300, "frames_dropped": 2, "lidar_frame_mismatch_total": 4}
		}, statusLidar, status.OK, "the ground is where"},
		{"scans to a 3D agent", func(s *nodeState) { s.snap.Counters["lidar_scan_mismatch_total"] = 3 }, statusLidar, status.Error,
			"they are a planar LiDAR's scans (marked so by the camera, or lying in one level plane above the ground), and this agent takes 3D clouds: run it with --planar-lidar"},
		{"3D clouds to a planar agent", func(s *nodeState) {
			s.planar = true
			s.snap.Counters["lidar_scan_mismatch_total"] = 3
		}, statusLidar, status.Error, "they are 3D clouds, and this agent takes a planar LiDAR's scans (--planar-lidar)"},
		{"a planar agent checks no ground", func(s *nodeState) {
			s.planar = true
			s.snap.Gauges = map[string]float64{}
		}, statusLidar, status.OK, "no ground check: a planar LiDAR's scans show no ground"},
		{"the GPU failed", func(s *nodeState) { s.snap.Counters["gpu_voxel_failures_total"] = 1 }, statusCompute, status.Warn,
			"moved to the CPU"},
		{"limits that cannot stop in time", func(s *nodeState) { s.planner = planner.Config{MaxSpeed: 3, MaxDecel: 0.5} }, statusCmdVel, status.Warn,
			"needs 9.00 m to stop, more than slow_distance (3 m)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := nodeState{snap: healthySnapshot(), prev: prev, elapsed: time.Second, watchdog: 200 * time.Millisecond, pairTolerance: DefaultPairTolerance}
			tc.change(&st)
			got := diagnose("/robot1/front_agent", st)
			if len(got) != 5 {
				t.Fatalf("%d statuses, want 5", len(got))
			}
			for _, s := range got {
				part := strings.TrimPrefix(s.Name, "robot1/front_agent: ")
				if part == s.Name || s.HardwareID != "/robot1/front_agent" {
					t.Errorf("status %q (hardware_id %q) not named after the node", s.Name, s.HardwareID)
				}
				if part != tc.part {
					if s.Level != status.OK {
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
	tuning := NewPlannerTuning()
	if err := tuning.SetNumber("max_speed", 0.35); err != nil {
		t.Fatal(err)
	}
	got := diagnose("/zerohop_agent", nodeState{snap: healthySnapshot(), elapsed: 11 * time.Second, watchdog: 200 * time.Millisecond, planner: tuning.Config()})
	want := map[string]map[string]string{
		"zerohop_agent: cmd_vel": {"watchdog": "200ms", "stale incidents": "0", "max speed m/s": "0.35", "max yaw rate rad/s": "1"},
		"zerohop_agent: frames":  {"rate Hz": "30.0", "processed": "330", "dropped": "2", "handoff": "unix"},
		"zerohop_agent: latency": {"e2e p50/p99/max ms": "4.10 / 7.20 / 26.00", "voxel p50/p99/max ms": "1.60 / 4.10 / 13.00", "window s": "10"},
		"zerohop_agent: lidar":   {"ground z m": "-0.004", "ground tilt deg": "0.08", "mount from": "--lidar-xy, --lidar-height, --lidar-rpy"},
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

// fakeStatusSink records what a status.Sink is given. A fake for the
// node's plumbing; seen, when set, is called with each array.
type fakeStatusSink struct {
	mu    sync.Mutex
	calls [][]status.Status
	seen  func([]status.Status)
}

func (f *fakeStatusSink) PublishStatus(_ time.Time, st []status.Status) error {
	f.mu.Lock()
	f.calls = append(f.calls, st)
	seen := f.seen
	f.mu.Unlock()
	if seen != nil {
		seen(st)
	}
	return nil
}

func (f *fakeStatusSink) snapshot() [][]status.Status {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([][]status.Status(nil), f.calls...)
}

// A composed agent says it is starting at once, then sends its status
// while it runs (cmd_vel and frames OK once it has warmed up), and STALE
// when it stops.
func TestRunNodePublishesStatus(t *testing.T) {
	requireORT(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sink := &fakeStatusSink{seen: func(st []status.Status) {
		if st[0].Level == status.OK && st[0].Message == "commands get through" && st[1].Level == status.OK && strings.HasSuffix(st[1].Message, "Hz") {
			cancel() // seen running: stop
		}
	}}
	// Duration bounds the run should the running status never come.
	err = RunNode(ctx, NodeConfig{Camera: "synthetic", Rate: 30, Beams: 16, AzimuthSteps: 300,
		Duration: 60 * time.Second, Listener: ln, Sink: &recordingSink{}, Threads: 1, Providers: "cpu",
		Status: sink, StatusPeriod: 100 * time.Millisecond, StatusNode: "/robot1/front_agent"})
	if err != nil {
		t.Fatal(err)
	}
	calls := sink.snapshot()
	if len(calls) < 3 {
		t.Fatalf("%d status publishes, want starting, running and stopped", len(calls))
	}
	for i, want := range map[int]struct {
		level status.Level
		msg   string
	}{0: {status.OK, "starting up"}, len(calls) - 2: {status.OK, "commands get through"}, len(calls) - 1: {status.Stale, "the node stopped"}} {
		if st := calls[i]; len(st) != 5 || st[0].Name != "robot1/front_agent: cmd_vel" || st[0].Level != want.level || st[0].Message != want.msg {
			t.Errorf("publish %d: %+v, want cmd_vel level %d %q", i, st, want.level, want.msg)
		}
	}
}

// A node that fails to start says so on its status before it returns.
func TestRunNodeStatusWhenStartFails(t *testing.T) {
	sink := &fakeStatusSink{}
	err := RunNode(context.Background(), NodeConfig{Model: "/nonexistent/model.onnx", Status: sink, Providers: "cpu", ORTLib: "/nonexistent/libonnxruntime.so"})
	if err == nil {
		t.Fatal("started")
	}
	calls := sink.snapshot()
	if len(calls) != 2 || calls[0][0].Message != "starting up" || calls[1][0].Level != status.Error ||
		!strings.Contains(calls[1][0].Message, "failed to start: ") || !strings.Contains(calls[1][0].Message, "nonexistent") {
		t.Errorf("statuses %+v", calls)
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

// BenchmarkStatusCollect is what the agent's status costs each period: a
// /latency snapshot of a recorder holding a minute of 30 Hz frames, and
// diagnose. Once a second, off the frame path.
func BenchmarkStatusCollect(b *testing.B) {
	rec, err := telemetry.New(telemetry.Options{})
	if err != nil {
		b.Fatal(err)
	}
	for i := range 1800 {
		for s := telemetry.StageHandoff; s <= telemetry.StageE2E; s++ {
			rec.Record(s, time.Duration(1000+i%700)*time.Microsecond)
		}
		rec.Inc(telemetry.FramesProcessed)
	}
	loop := statusLoop(NodeConfig{StatusNode: "/robot1/zerohop_agent", StatusPeriod: time.Second}, 200*time.Millisecond, rec,
		func(time.Time) error { return nil }, NewPlannerTuning().Config)
	b.ReportAllocs()
	for b.Loop() {
		if st := loop.Collect(time.Now(), time.Second); len(st) != 5 {
			b.Fatal(len(st))
		}
	}
}

// The frames status names what the model is fed, and for a camera+LiDAR
// model the clouds that found no image and the tolerance; a LiDAR-only
// one has no pairing to report.
func TestDiagnoseFramesValues(t *testing.T) {
	for _, tc := range []struct {
		inputs   string
		unpaired bool
	}{{"lidar+camera", true}, {"lidar", false}, {"scan+camera", true}, {"scan", false}} {
		snap := healthySnapshot()
		snap.Inputs = tc.inputs
		snap.Counters["frames_unpaired_total"] = 7
		st := nodeState{snap: snap, elapsed: time.Second, watchdog: 200 * time.Millisecond, pairTolerance: 35 * time.Millisecond}
		values := map[string]string{}
		for _, s := range diagnose("/zerohop_agent", st) {
			if strings.HasSuffix(s.Name, ": "+statusFrames) {
				for _, kv := range s.Values {
					values[kv.Key] = kv.Value
				}
			}
		}
		if _, ok := values["inputs"]; !ok || values["inputs"] != tc.inputs {
			t.Errorf("%s: inputs %q", tc.inputs, values["inputs"])
		}
		_, hasUnpaired := values["unpaired"]
		if hasUnpaired != tc.unpaired || tc.unpaired && (values["unpaired"] != "7" || values["pair tolerance"] != "35ms") {
			t.Errorf("%s: values %v; want unpaired 7 and pair tolerance 35ms only with images", tc.inputs, values)
		}
	}
}

// Drops that are mostly not unpaired clouds do not blame the pairing.
func TestDiagnoseDropsNotFromPairing(t *testing.T) {
	snap := healthySnapshot()
	snap.Counters["frames_dropped"] = 12
	snap.Counters["frames_unpaired_total"] = 4
	st := nodeState{snap: snap, prev: map[string]float64{"frames_processed": 300, "frames_dropped": 2}, elapsed: time.Second,
		watchdog: 200 * time.Millisecond, pairTolerance: DefaultPairTolerance}
	for _, s := range diagnose("/zerohop_agent", st) {
		if strings.HasSuffix(s.Name, ": "+statusFrames) {
			if s.Level != status.Warn || !strings.HasPrefix(s.Message, "10 of 40 frames dropped") || strings.Contains(s.Message, "pair-tolerance") {
				t.Fatalf("frames: level %d, %q; want a warning about the drops that does not name --pair-tolerance (4 of 10 unpaired)", s.Level, s.Message)
			}
			return
		}
	}
	t.Fatal("no frames status")
}
