package agent

import (
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/zerohop/zerohop/handles"
	"github.com/zerohop/zerohop/internal/sockdir"
	"github.com/zerohop/zerohop/sensor"
	"github.com/zerohop/zerohop/telemetry"
)

// A robot whose LiDAR is a 2D laser scanner: the camera process marks its
// scans planar, and the agent with --planar-lidar runs the embedded
// planar-LiDAR model on them and drives, /latency and /metrics saying
// "scan"; nothing is dropped, and the ground check, which a scan cannot
// answer, stays silent (NaN).
func TestPlanarLidarAgentDrivesFromAScanningCamera(t *testing.T) {
	requireORT(t)
	socket := filepath.Join(sockdir.Short(t), "zh", "camera.sock")
	startCameraProc(t, socket, envSmallScene+"=1", envNoImage+"=1", envPlanar+"=1")
	sink := &recordingSink{}
	base := runNodeUntil(t, NodeConfig{Socket: socket, Sink: sink, Threads: 1, Providers: "cpu", PlanarLidar: true, Watchdog: slowStepWatchdog},
		60*time.Second, "20 moving commands", func(string) bool { return movingCommands(sink) > 20 })
	inputs, counts := latencyInputs(t, base)
	if inputs != "scan" {
		t.Errorf("/latency inputs %q, want scan", inputs)
	}
	if counts["preprocess"] != 0 || counts["infer"] == 0 {
		t.Errorf("/latency stage counts %v: want frames inferred, none preprocessed", counts)
	}
	mb := getBody(t, base+"/metrics")
	if !strings.Contains(string(mb), `zerohop_inputs_info{inputs="scan"} 1`) {
		t.Errorf("/metrics lacks zerohop_inputs_info{inputs=\"scan\"} 1")
	}
	for _, name := range []string{"zerohop_frames_dropped_total", "zerohop_lidar_scan_mismatch_total"} {
		if v := metricValue(t, mb, name); v != 0 {
			t.Errorf("%s = %v, want 0", name, v)
		}
	}
	if z := metricValue(t, mb, "zerohop_ground_found_z_m"); !math.IsNaN(z) {
		t.Errorf("zerohop_ground_found_z_m = %v: the ground check ran on scans", z)
	}
}

func movingCommands(sink *recordingSink) int {
	moving := 0
	for _, c := range sink.since(time.Time{}) {
		if c.cmd.LinearX > 0 {
			moving++
		}
	}
	return moving
}

// Clouds of the other kind than the agent takes are dropped, every one,
// counted, and logged once with the fix: a 3D model given a scan finds no
// obstacle below its obstacle height, and the scan model given a 3D cloud
// takes the ground for an obstacle. The robot never moves.
func TestScanAndThreeDCloudsAreNotMixedUp(t *testing.T) {
	requireORT(t)
	for _, tc := range []struct {
		name         string
		cameraPlanar bool
		agent        NodeConfig
		want         []string // in the log line
	}{
		{"scans to a 3D agent", true, NodeConfig{LidarOnly: true}, []string{"planar (2D) LiDAR's scans", "run the agent with --planar-lidar"}},
		{"3D clouds to a planar agent", false, NodeConfig{PlanarLidar: true}, []string{"3D clouds", "without --planar-lidar", "--ros2-scan-topic"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			socket := filepath.Join(sockdir.Short(t), "zh", "camera.sock")
			env := []string{envSmallScene + "=1", envNoImage + "=1"}
			if tc.cameraPlanar {
				env = append(env, envPlanar+"=1")
			}
			startCameraProc(t, socket, env...)
			core, logs := observer.New(zap.InfoLevel)
			cfg := tc.agent
			cfg.Socket, cfg.Threads, cfg.Providers, cfg.Watchdog, cfg.Log = socket, 1, "cpu", slowStepWatchdog, zap.New(core)
			sink := &recordingSink{}
			cfg.Sink = sink
			var mismatched float64
			base := runNodeUntil(t, cfg, 60*time.Second, "10 clouds dropped as the other kind", func(base string) bool {
				mismatched = metricValue(t, getBody(t, base+"/metrics"), "zerohop_lidar_scan_mismatch_total")
				return mismatched >= 10
			})
			// A scrape reads its counters one after another while frames
			// go on, so the drops are read from a later scrape: a cloud is
			// counted dropped before it is counted mismatched, and the
			// counters only grow.
			mb := getBody(t, base+"/metrics")
			if dropped := metricValue(t, mb, "zerohop_frames_dropped_total"); dropped < mismatched {
				t.Errorf("%v mismatched clouds, %v dropped: want every one dropped", mismatched, dropped)
			}
			if n := movingCommands(sink); n != 0 {
				t.Errorf("%d moving commands from clouds of the other kind", n)
			}
			lines := logs.FilterMessageSnippet("clouds dropped").All()
			if len(lines) != 1 {
				t.Fatalf("%d \"clouds dropped\" log lines, want 1", len(lines))
			}
			for _, w := range tc.want {
				if !strings.Contains(lines[0].Message, w) {
					t.Errorf("log %q does not say %q", lines[0].Message, w)
				}
			}
		})
	}
}

// A scanner 0.15 m above the floor, below the 3D models' 0.2 m obstacle
// height: the planar-LiDAR model sees the moving obstacle in its scan (its
// sector's clearance below the mirror sector's), and a frame allocates
// nothing.
func TestPlanarLidarModelSeesALowScannersObstacle(t *testing.T) {
	c := newComposedWith(t, composedOptions{planar: true, synth: sensor.SyntheticConfig{LidarHeight: 0.15, AzimuthSteps: 720}})
	var h handles.Handle
	for _, sec := range []float64{1.5, 4.5} {
		seq := uint64(sec * 30)
		c.step(t, seq, &h)
		if h.Points.Flags != handles.PointsPlanar {
			t.Fatalf("handle flags %d, want planar", h.Points.Flags)
		}
		ob := c.src.Truth(seq).Obstacle.Center
		obs := min(max(int((57.29577951308232*atan2(ob.Y, ob.X)+40)/10+0.5), 0), 8)
		clear := c.sess.Clearance()
		if !(clear[obs] < clear[8-obs]) || clear[obs] >= 8 {
			t.Errorf("t=%vs: obstacle in sector %d: clearance %v, mirror sector %d %v; want lower, below 8 m", sec, obs, clear[obs], 8-obs, clear[8-obs])
		}
	}
	if n := c.rec.Count(telemetry.FramesProcessed); n != 2 {
		t.Fatalf("%d frames processed, want 2", n)
	}
	seq := uint64(200)
	if allocs := testing.AllocsPerRun(20, func() { c.step(t, seq, &h); seq++ }); allocs != 0 {
		t.Errorf("a planar frame allocates %.1f times, want 0", allocs)
	}
}

// unmarkedSource hides its source's Planar method: a 2D scanner's clouds
// that reach the camera as plain PointCloud2, unmarked.
type unmarkedSource struct{ sensor.Source }

// A planar scan whose camera did not mark it (a scanner publishing
// PointCloud2 without the camera's --planar-lidar) still never reaches a
// 3D model: at 0.15 m every return is below its obstacle height, and it
// would drive into walls. The pipeline sees every point in one level
// plane above the ground and drops the frame, counted with the marked
// ones and logged once; the 3D scene's frames pass (the ground is in
// them).
func TestUnmarkedScanDoesNotReachA3DModel(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	c := newComposedWith(t, composedOptions{lidarOnly: true, log: zap.New(core),
		synth: sensor.SyntheticConfig{Planar: true, LidarHeight: 0.15, AzimuthSteps: 720},
		wrap:  func(s sensor.Source) sensor.Source { return unmarkedSource{s} }})
	var h handles.Handle
	for seq := range uint64(3) {
		c.step(t, seq, &h)
	}
	if h.Points.Flags != 0 {
		t.Fatalf("the fixture marked the clouds (flags %d)", h.Points.Flags)
	}
	if p, d, m := c.rec.Count(telemetry.FramesProcessed), c.rec.Count(telemetry.FramesDropped), c.pipe.ScanMismatches(); p != 0 || d != 3 || m != 3 {
		t.Errorf("%d processed, %d dropped, %d scan mismatches; want 0, 3, 3", p, d, m)
	}
	if n := movingCommands(c.sink); n != 0 {
		t.Errorf("%d moving commands", n)
	}
	lines := logs.FilterMessageSnippet("one level plane above the ground").All()
	if len(lines) != 1 || lines[0].ContextMap()["plane_height_m"] != float32(0.15) {
		t.Errorf("log lines %v: want one, with plane_height_m 0.15", lines)
	}
	// The 3D scene, every cloud with its ground: planned.
	c3 := newComposedWith(t, composedOptions{lidarOnly: true, rt: c.rt})
	c3.step(t, 0, &h)
	if p := c3.rec.Count(telemetry.FramesProcessed); p != 1 || c3.pipe.ScanMismatches() != 0 {
		t.Errorf("3D scene: %d processed, %d scan mismatches; want 1, 0", p, c3.pipe.ScanMismatches())
	}
}
