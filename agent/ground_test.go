package agent

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/zerohop/zerohop/handles"
	"github.com/zerohop/zerohop/infer"
	"github.com/zerohop/zerohop/sensor"
	"github.com/zerohop/zerohop/voxel"
)

// The ground check on the pipeline's own filtered clouds of the synthetic
// scene (LiDAR 1.73 m up), in the robot frame or in the sensor's, with
// --lidar-height right or wrong: it warns exactly when the two disagree,
// only after groundMisses checks, and suggests the height that is right.
func TestGroundCheckOnTheSyntheticScene(t *testing.T) {
	const mount = 1.73
	rt := sharedRuntime(t)
	tests := []struct {
		name        string
		sensorFrame bool
		lidarHeight float32
		want        string  // "" (agrees), "below" or "above"
		suggest     float32 // suggested_lidar_height_m when it warns
	}{
		{"robot frame, no --lidar-height", false, 0, "", 0},
		{"sensor frame, --lidar-height 1.73", true, mount, "", 0},
		{"sensor frame, no --lidar-height", true, 0, "below", mount},
		{"robot frame, --lidar-height 1.73", false, mount, "above", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := composedOptions{synth: sensor.SyntheticConfig{LidarHeight: mount}, watchdog: slowStepWatchdog, rt: rt}
			if tt.sensorFrame {
				o.wrap = func(s sensor.Source) sensor.Source { return sensorFrameSource{s, mount} }
			}
			var err error
			if o.bev, err = bevConfig(infer.ReferenceConfig(), lidarPose{height: tt.lidarHeight}); err != nil {
				t.Fatal(err)
			}
			c := newComposedWith(t, o)
			var h handles.Handle
			c.step(t, 45, &h)
			// Run checks the ground after a frame that frame marks planned
			// (TestEndToEndTwoProcesses reads the check's /metrics).
			if !c.pipe.planned {
				t.Fatal("a planned frame not marked for the ground check")
			}
			core, logs := observer.New(zap.InfoLevel)
			g := newGroundWatch(c.pipe.cfg.BEV, zap.New(core))
			t0 := time.Now()
			for k := range groundMisses {
				g.observe(t0.Add(time.Duration(k)*groundEvery), c.pipe.pts)
				if warns := logs.FilterLevelExact(zapcore.WarnLevel).Len(); k < groundMisses-1 && warns != 0 {
					t.Fatalf("a warning after %d checks, want none before %d", k+1, groundMisses)
				}
			}
			// Checks not yet due, and checks after the warning: no more lines.
			g.observe(t0.Add((groundMisses-1)*groundEvery+time.Millisecond), c.pipe.pts)
			g.observe(t0.Add(time.Minute), c.pipe.pts)
			all := logs.All()
			if len(all) != 1 {
				t.Fatalf("%d log lines, want 1: %v", len(all), all)
			}
			line := all[0]
			f := line.ContextMap()
			t.Logf("%s: %s %v", line.Level, line.Message, f)
			if f["lidar_height_m"] != tt.lidarHeight {
				t.Errorf("lidar_height_m %v, want %v", f["lidar_height_m"], tt.lidarHeight)
			}
			if tt.want == "" {
				if line.Level != zapcore.InfoLevel || !strings.Contains(line.Message, "lies where") {
					t.Fatalf("want the info line that they agree, got %s %q", line.Level, line.Message)
				}
				return
			}
			if line.Level != zapcore.WarnLevel || !strings.Contains(line.Message, "lies "+tt.want) || !strings.Contains(line.Message, "--lidar-height") {
				t.Fatalf("want a warning that the ground lies %s, naming --lidar-height; got %s %q", tt.want, line.Level, line.Message)
			}
			if s, ok := f["suggested_lidar_height_m"].(float32); !ok || math.Abs(float64(s-tt.suggest)) > 0.1 {
				t.Errorf("suggested_lidar_height_m %v, want %v within 0.1 m", f["suggested_lidar_height_m"], tt.suggest)
			}
			// A check that logs nothing, on a scene with a ground plane.
			if a := testing.AllocsPerRun(20, func() { g.next = time.Time{}; g.observe(t0, c.pipe.pts) }); a != 0 {
				t.Errorf("a check that logs nothing allocates %v times, want 0", a)
			}
		})
	}
}

// The ground check on the synthetic scene seen by a LiDAR 1.73 m up,
// 0.45 m ahead, pitched down 8°, rolled 1.5° and turned 12° (as
// TestLidarMountPutsTheCloudInTheRobotFrame): with its whole mount the
// ground is level and where the BEV takes it; with the angles left out
// but the yaw, it warns after groundMisses checks that the ground is not
// level, naming --lidar-rpy, with suggested_lidar_rpy the mount's angles
// (within 0.5°) and the height, and not also that the height is wrong
// (a tilt distorts heights, and is what to fix first).
func TestGroundCheckSeesATiltedLiDAR(t *testing.T) {
	const height = 1.73
	mount := voxel.Mount{X: 0.45, Y: -0.12, Roll: 1.5 * math.Pi / 180, Pitch: 8 * math.Pi / 180, Yaw: 12 * math.Pi / 180}
	withHeight := mount
	withHeight.Z = height
	rt := sharedRuntime(t)
	for _, tt := range []struct {
		name   string
		given  voxel.Mount
		height float32
		warn   bool
	}{
		{"whole mount", mount, height, false},
		{"roll and pitch left out", voxel.Mount{X: mount.X, Y: mount.Y, Yaw: mount.Yaw}, height, true},
		// The height is wrong too, but the tilt is what to fix first: one
		// warning, which suggests both.
		{"roll, pitch and height left out", voxel.Mount{X: mount.X, Y: mount.Y, Yaw: mount.Yaw}, 0, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := composedOptions{synth: sensor.SyntheticConfig{LidarHeight: height}, watchdog: slowStepWatchdog, rt: rt,
				wrap: func(s sensor.Source) sensor.Source { return tiltedFrameSource{s, withHeight.Transform()} }}
			var err error
			if o.bev, err = bevConfig(infer.ReferenceConfig(), lidarPose{height: tt.height, mount: tt.given}); err != nil {
				t.Fatal(err)
			}
			c := newComposedWith(t, o)
			var h handles.Handle
			c.step(t, 45, &h)
			core, logs := observer.New(zap.InfoLevel)
			g := newGroundWatch(c.pipe.cfg.BEV, zap.New(core))
			t0 := time.Now()
			for k := range groundMisses + 2 {
				g.observe(t0.Add(time.Duration(k)*groundEvery), c.pipe.pts)
			}
			all := logs.All()
			if len(all) != 1 {
				t.Fatalf("%d log lines, want 1: %v", len(all), all)
			}
			line := all[0]
			f := line.ContextMap()
			t.Logf("%s: %s %v", line.Level, line.Message, f)
			if !tt.warn {
				if line.Level != zapcore.InfoLevel || f["ground_tilt_deg"].(float64) > 0.5 || g.Mismatch() {
					t.Fatalf("want the info line with a tilt under 0.5°, and no mismatch (%v)", g.Mismatch())
				}
				return
			}
			if line.Level != zapcore.WarnLevel || !strings.Contains(line.Message, "not level") || !strings.Contains(line.Message, "--lidar-rpy") || !g.Mismatch() {
				t.Fatalf("want the warning that the ground is not level, naming --lidar-rpy, and a mismatch (%v)", g.Mismatch())
			}
			if s, ok := f["suggested_lidar_height_m"].(float32); !ok || math.Abs(float64(s-height)) > 0.1 {
				t.Errorf("suggested_lidar_height_m %v, want %v within 0.1 m", f["suggested_lidar_height_m"], height)
			}
			if tilt := g.TiltDeg(); math.Abs(tilt-8.1) > 0.5 {
				t.Errorf("TiltDeg %v, want about 8.1 (8° pitch and 1.5° roll)", tilt)
			}
			var r, p, y float64
			if _, err := fmt.Sscanf(f["suggested_lidar_rpy"].(string), "%gdeg,%gdeg,%gdeg", &r, &p, &y); err != nil {
				t.Fatalf("suggested_lidar_rpy %q: %v", f["suggested_lidar_rpy"], err)
			}
			const toDeg = 180 / math.Pi
			for _, a := range []struct {
				name      string
				got, want float64
			}{{"roll", r, mount.Roll * toDeg}, {"pitch", p, mount.Pitch * toDeg}, {"yaw", y, mount.Yaw * toDeg}} {
				if math.Abs(a.got-a.want) > 0.5 {
					t.Errorf("suggested %s %.2f°, the mount's %.2f°", a.name, a.got, a.want)
				}
			}
		})
	}
}

// sharedRuntime opens ONNX Runtime for a test and its subtests (a
// runtime per process; a subtest's own would close it for the next).
func sharedRuntime(t *testing.T) *infer.Runtime {
	t.Helper()
	requireORT(t)
	lib, err := infer.FindLibrary("")
	if err != nil {
		t.Fatal(err)
	}
	rt, err := infer.OpenRuntime(lib)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	return rt
}

// flatGround is a 20 × 20 grid of voxels 0.2 m apart at height z, in the
// reference raster's window, with one 1 m post.
func flatGround(z float32) *voxel.Points {
	var pts voxel.Points
	for i := range 20 {
		for j := range 20 {
			pts.P = append(pts.P, voxel.Point{X: 2 + 0.2*float32(i), Y: -2 + 0.2*float32(j), Z: z})
		}
	}
	for k := range 5 {
		pts.P = append(pts.P, voxel.Point{X: 3, Y: 0, Z: z + 0.2*float32(k+1)})
	}
	return &pts
}

// The watch's states: a warning stands until the ground is right again,
// which is said once; a disagreement that does not last groundMisses
// checks in a row says nothing; too few voxels give no verdict and do not
// break a run of disagreements.
func TestGroundWatchStates(t *testing.T) {
	bev, err := voxel.NewBEV(voxel.BEVConfig{GroundZ: -1.73})
	if err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zap.InfoLevel)
	g := newGroundWatch(bev, zap.New(core))
	right, wrong, sparse := flatGround(-1.73), flatGround(0), &voxel.Points{P: flatGround(0).P[:groundMinVoxels-1]}
	t0 := time.Now()
	at := func(k int) time.Time { return t0.Add(time.Duration(k) * groundEvery) }
	if z := g.FoundZ(); !math.IsNaN(z) || g.Mismatch() {
		t.Fatalf("before any check: FoundZ %v, Mismatch %v; want NaN and false", z, g.Mismatch())
	}
	low := flatGround(-4) // 2.27 m below the BEV's ground
	steps := []struct {
		pts      *voxel.Points
		want     string // the line this check writes: "", "info", "warn above" or "warn below"
		mismatch bool   // Mismatch after it: the warning stands
	}{
		{right, "info", false},
		{right, "", false}, // agreement is said once
		{wrong, "", false}, {wrong, "", false}, {wrong, "", false}, {wrong, "", false},
		{right, "", false}, // four in a row, then right: no warning, the run starts over
		{wrong, "", false}, {wrong, "", false}, {sparse, "", false}, {wrong, "", false}, {wrong, "", false},
		{wrong, "warn above", true}, // five disagreements; the sparse check in between judged nothing
		{wrong, "", true},           // the warning stands
		{right, "info", false},      // and is lifted
		{right, "", false},
		{low, "", false}, {low, "", false}, {low, "", false}, {low, "", false},
		{low, "warn below", true},
		// From below to above without an agreement between: a new run of
		// five, and a new warning with the new suggestion.
		{wrong, "", true}, {wrong, "", true}, {wrong, "", true}, {wrong, "", true},
		{wrong, "warn above", true},
	}
	for k, s := range steps {
		before := logs.Len()
		g.observe(at(k), s.pts)
		lines := logs.All()[before:]
		got := ""
		if len(lines) == 1 {
			got = map[zapcore.Level]string{zapcore.InfoLevel: "info", zapcore.WarnLevel: "warn"}[lines[0].Level]
			if got == "warn" {
				f := lines[0].ContextMap()
				switch {
				case strings.Contains(lines[0].Message, "lies above") && f["suggested_lidar_height_m"] == float32(0) && f["above_m"] == float32(1.73):
					got = "warn above"
				case strings.Contains(lines[0].Message, "lies below") && f["suggested_lidar_height_m"] == float32(4) && f["below_m"] == float32(4-1.73):
					got = "warn below"
				default:
					t.Errorf("check %d: warning %q %v: neither above (suggest 0, above_m 1.73) nor below (suggest 4, below_m 2.27)", k, lines[0].Message, f)
				}
			}
		}
		if len(lines) > 1 || got != s.want {
			t.Fatalf("check %d: lines %v, want %q", k, lines, s.want)
		}
		if wantZ := float64(s.pts.P[0].Z); s.pts != sparse && g.FoundZ() != wantZ {
			t.Errorf("check %d: FoundZ %v, want %v", k, g.FoundZ(), wantZ)
		}
		if g.Mismatch() != s.mismatch {
			t.Errorf("check %d: Mismatch %v, want %v (true from a warning until the ground is right again)", k, g.Mismatch(), s.mismatch)
		}
	}
	if a := testing.AllocsPerRun(100, func() { g.next = time.Time{}; g.observe(t0, right) }); a != 0 {
		t.Errorf("a check that logs nothing allocates %v times, want 0", a)
	}
}

// windowGround is ground over the reference raster's whole window, 0.4 m
// apart, at z = z0 + tan(tiltDeg)·x: enough for a plane.
func windowGround(z0, tiltDeg float64) *voxel.Points {
	var pts voxel.Points
	slope := math.Tan(tiltDeg * math.Pi / 180)
	for x := 0.2; x < 25.6; x += 0.4 {
		for y := -12.6; y < 12.8; y += 0.4 {
			pts.P = append(pts.P, voxel.Point{X: float32(x), Y: float32(y), Z: float32(z0 + slope*x)})
		}
	}
	return &pts
}

// The tilt's states beside the height's: a tilt warns after groundMisses
// checks; while it stands, or a run of tilted checks is under way, a
// height warning waits (it came from a check too small for a plane, the
// reviewer's case) and no check says the ground agrees; a tilt between
// agreeing (1°) and the tolerance (1.5°) neither lifts nor raises a
// warning, so a camber at the tolerance does not warn, lift, warn.
func TestGroundWatchTiltStates(t *testing.T) {
	bev, err := voxel.NewBEV(voxel.BEVConfig{GroundZ: -1})
	if err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zap.InfoLevel)
	g := newGroundWatch(bev, zap.New(core))
	tilted, slight, level := windowGround(-1, 3), windowGround(-1, 1.3), windowGround(-1, 0)
	patchRight, patchWrong := flatGround(-1), flatGround(0) // no plane: too small
	steps := []struct {
		pts      *voxel.Points
		want     string // "", "info", "warn tilt", "warn height"
		mismatch bool
	}{
		{level, "info", false},
		{tilted, "", false}, {tilted, "", false}, {tilted, "", false},
		{patchRight, "", false}, // a tilt run under way: the ground does not agree
		{tilted, "", false},
		{tilted, "warn tilt", true}, // the fifth tilted check
		// The height is off by 1 m on five checks with no plane: it waits.
		{patchWrong, "", true}, {patchWrong, "", true}, {patchWrong, "", true}, {patchWrong, "", true}, {patchWrong, "", true},
		{slight, "", true}, {slight, "", true}, // 1.3°: the warning stands, nothing said
		{level, "info", false},
		{slight, "", false}, {slight, "", false}, {slight, "", false}, {slight, "", false}, {slight, "", false}, {slight, "", false}, // no warning either
	}
	t0 := time.Now()
	for k, s := range steps {
		before := logs.Len()
		g.observe(t0.Add(time.Duration(k)*groundEvery), s.pts)
		lines := logs.All()[before:]
		got := ""
		if len(lines) == 1 {
			l := lines[0]
			switch {
			case l.Level == zapcore.InfoLevel:
				got = "info"
			case strings.Contains(l.Message, "not level"):
				got = "warn tilt"
			default:
				got = "warn height"
			}
		}
		if len(lines) > 1 || got != s.want {
			t.Fatalf("check %d: lines %v, want %q", k, lines, s.want)
		}
		if g.Mismatch() != s.mismatch {
			t.Errorf("check %d: Mismatch %v, want %v", k, g.Mismatch(), s.mismatch)
		}
	}
	if tilt := g.TiltDeg(); math.Abs(tilt-1.3) > 0.05 {
		t.Errorf("TiltDeg %v, want 1.3", tilt)
	}
	if a := testing.AllocsPerRun(20, func() { g.next = time.Time{}; g.observe(t0, slight) }); a != 0 {
		t.Errorf("a check with a plane that logs nothing allocates %v times, want 0", a)
	}
}
