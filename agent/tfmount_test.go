package agent

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/zerohop/zerohop/handles"
	"github.com/zerohop/zerohop/ros2/tf"
	"github.com/zerohop/zerohop/telemetry"
)

// fakeTransforms is a fake TransformSource for MountFromTF's plumbing:
// it answers one lookup with a fixed transform or error, as
// ros2.StaticTransforms would once /tf_static held it, and records what
// was asked and whether the wait had a deadline.
type fakeTransforms struct {
	t        tf.Transform
	path     []string
	err      error
	target   string
	source   string
	deadline time.Duration
}

func (f *fakeTransforms) Lookup(ctx context.Context, target, source string) (tf.Transform, []string, error) {
	f.target, f.source = target, source
	if d, ok := ctx.Deadline(); ok {
		f.deadline = time.Until(d)
	}
	if f.err != nil {
		return tf.Transform{}, nil, f.err
	}
	return f.t, f.path, nil
}

func TestMountFromTF(t *testing.T) {
	pitch := 10 * math.Pi / 180
	src := &fakeTransforms{
		t:    tf.Transform{Translation: [3]float64{0.2, -0.05, 0.62}, Rotation: tf.FromRPY(0.01, pitch, -0.3)},
		path: []string{"base_footprint", "base_link", "velodyne"},
	}
	var cfg NodeConfig
	if err := MountFromTF(context.Background(), &cfg, src, "/base_footprint", "velodyne", 3*time.Second); err != nil {
		t.Fatal(err)
	}
	if src.target != "base_footprint" || src.source != "velodyne" {
		t.Errorf("looked up %q→%q, want base_footprint→velodyne (leading / stripped, as tf2 does)", src.target, src.source)
	}
	if src.deadline <= 2*time.Second || src.deadline > 3*time.Second {
		t.Errorf("lookup deadline %v away, want about --tf-timeout 3s", src.deadline)
	}
	if cfg.LidarXY != [2]float64{0.2, -0.05} || cfg.LidarHeight != float32(0.62) {
		t.Errorf("xy %v height %v, want 0.2,-0.05 and 0.62", cfg.LidarXY, cfg.LidarHeight)
	}
	for i, want := range [3]float64{0.01, pitch, -0.3} {
		if math.Abs(cfg.LidarRPY[i]-want) > 1e-12 {
			t.Errorf("rpy %v, want 0.01,%v,-0.3", cfg.LidarRPY, pitch)
			break
		}
	}
	if cfg.LidarFrame != "velodyne" || cfg.LidarMountFrom != "/tf_static base_footprint→base_link→velodyne" {
		t.Errorf("frame %q, from %q", cfg.LidarFrame, cfg.LidarMountFrom)
	}
	// What it sets passes the flags' own checks.
	if err := CheckNodeConfig(cfg); err != nil {
		t.Errorf("the mount from /tf_static fails the node's checks: %v", err)
	}
}

func TestMountFromTFRefuses(t *testing.T) {
	at := func(x, y, z float64) *fakeTransforms {
		return &fakeTransforms{t: tf.Transform{Translation: [3]float64{x, y, z}, Rotation: tf.Quaternion{W: 1}}, path: []string{"base_footprint", "velodyne"}}
	}
	missing := errors.New(`frame "velodyne" is not on /tf_static`)
	for _, tc := range []struct {
		name        string
		src         *fakeTransforms
		base, lidar string
		timeout     time.Duration
		want        string
	}{
		{"LiDAR below the base frame", at(0, 0, -0.3), "base_link", "velodyne", time.Second, "velodyne lies 0.300 m below base_link"},
		{"centimetres", at(0, 0, 62), "base_footprint", "velodyne", time.Second, ""},
		{"too high", at(0, 0, 120), "base_footprint", "velodyne", time.Second, "120 m above base_footprint"},
		{"too far", at(150, 0, 1), "base_footprint", "velodyne", time.Second, "x 150, y 0 m from base_footprint"},
		{"same frame", at(0, 0, 1), "base_footprint", "/base_footprint", time.Second, "is --base-frame"},
		{"short timeout", at(0, 0, 1), "base_footprint", "velodyne", time.Millisecond, "--tf-timeout 1ms: want 100ms to 10m0s"},
		{"long timeout", at(0, 0, 1), "base_footprint", "velodyne", time.Hour, "--tf-timeout 1h0m0s"},
		{"not printable", at(0, 0, 1), "base_footprint", "velo\x01dyne", time.Second, "not a frame id a cloud can carry"},
		{"lookup fails", &fakeTransforms{err: missing}, "base_footprint", "velodyne", time.Second,
			`LiDAR mount base_footprint→velodyne: not on /tf_static after 1s (--tf-timeout): frame "velodyne" is not on /tf_static`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var cfg NodeConfig
			err := MountFromTF(context.Background(), &cfg, tc.src, tc.base, tc.lidar, tc.timeout)
			if tc.want == "" { // 62 m is legal, if odd: the checks are the flags' bounds
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want it to say %q", err, tc.want)
			}
			if tc.src.err != nil && !errors.Is(err, missing) {
				t.Errorf("the lookup's error is not wrapped: %v", err)
			}
			if cfg.LidarFrame != "" || cfg.LidarHeight != 0 {
				t.Errorf("a refused mount changed the config: %+v", cfg)
			}
		})
	}
}

// Stopping the agent (SIGINT) while it waits for /tf_static says so
// rather than blaming the timeout.
func TestMountFromTFCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var cfg NodeConfig
	err := MountFromTF(ctx, &cfg, &fakeTransforms{err: context.Canceled}, "base_footprint", "velodyne", time.Second)
	if !errors.Is(err, context.Canceled) || strings.Contains(err.Error(), "--tf-timeout") {
		t.Fatalf("err %v", err)
	}
}

func TestLidarFrameIDsMatch(t *testing.T) {
	id := func(s string) handles.FrameID {
		var f handles.FrameID
		copy(f[:], s) // as the camera cuts a long header.frame_id
		return f
	}
	for _, tc := range []struct {
		lidar, cloud string
		want         bool
	}{
		{"", "anything", true}, // no --lidar-frame: no check
		{"velodyne", "velodyne", true},
		{"velodyne", "/velodyne", true}, // tf2 strips the slash; drivers may not
		{"/velodyne", "velodyne", true},
		{"velodyne", "lidar", false},
		{"velodyne", "velodyne2", false},
		{"front_lidar_link_optical", "front_lidar_link_optical", true}, // both cut to 16 bytes
		{"velodyne", "", false},
	} {
		ids := newLidarFrameIDs(tc.lidar)
		f := id(tc.cloud)
		if got := ids.matches(&f); got != tc.want {
			t.Errorf("lidar frame %q, cloud frame %q: matches %v, want %v", tc.lidar, tc.cloud, got, tc.want)
		}
	}
	ids := newLidarFrameIDs("velodyne")
	f := id("/velodyne")
	if a := testing.AllocsPerRun(100, func() { ids.matches(&f) }); a != 0 {
		t.Errorf("matches allocates %.1f times", a)
	}
}

// A cloud whose frame is not the one the mount from /tf_static is for is
// dropped before any stage (its points would land where another sensor's
// belong), counted and logged once; clouds in the right frame still run
// and allocate nothing.
func TestCloudsInAnotherFrameAreDropped(t *testing.T) {
	c := newComposed(t)
	var h handles.Handle
	c.step(t, 0, &h) // warm up, no frame check
	commands := len(c.sink.since(time.Time{}))
	if commands == 0 {
		t.Fatal("no command from the warm-up frame")
	}

	// The in-process camera's clouds are in frame "lidar".
	c.pipe.cfg.LidarFrame, c.pipe.lidarIDs = "velodyne", newLidarFrameIDs("velodyne")
	dropped := c.rec.Count(telemetry.FramesDropped)
	for seq := uint64(1); seq <= 3; seq++ {
		c.step(t, seq, &h)
	}
	if got := c.pipe.FrameMismatches(); got != 3 {
		t.Errorf("FrameMismatches %d, want 3", got)
	}
	if got := c.rec.Count(telemetry.FramesDropped) - dropped; got != 3 {
		t.Errorf("%d frames counted dropped, want 3", got)
	}
	if got := len(c.sink.since(time.Time{})); got != commands {
		t.Errorf("%d commands after clouds in the wrong frame, want none (%d before)", got-commands, commands)
	}
	if n := c.cam.Pool(0).InUse(); n != 0 { // their images wait in the channel, for Run's loop
		t.Errorf("dropped clouds kept %d slots", n)
	}
	seq := uint64(4)
	if a := testing.AllocsPerRun(10, func() { c.step(t, seq, &h); seq++ }); a != 0 {
		t.Errorf("a dropped cloud allocates %.1f times", a)
	}

	c.pipe.cfg.LidarFrame, c.pipe.lidarIDs = "lidar", newLidarFrameIDs("lidar")
	before := len(c.sink.since(time.Time{}))
	for range 3 { // warm up the pairing after the drops
		c.step(t, seq, &h)
		seq++
	}
	if len(c.sink.since(time.Time{})) == before {
		t.Fatal("clouds in the LiDAR's frame made no command")
	}
	if a := testing.AllocsPerRun(10, func() { c.step(t, seq, &h); seq++ }); a != 0 {
		t.Errorf("a checked frame allocates %.1f times", a)
	}
}

// A frame id longer than a handle's 16 bytes is checked on its first 16:
// said at start, since another sensor's frame could then pass.
func TestMountFromTFWarnsOfLongFrameIDs(t *testing.T) {
	for _, tc := range []struct {
		lidar string
		warns int
	}{{"front_lidar_link", 0}, {"front_lidar_link_left", 1}} {
		core, logs := observer.New(zap.InfoLevel)
		cfg := NodeConfig{Log: zap.New(core)}
		src := &fakeTransforms{t: tf.Transform{Translation: [3]float64{0, 0, 0.5}, Rotation: tf.Quaternion{W: 1}}, path: []string{"base_footprint", tc.lidar}}
		if err := MountFromTF(context.Background(), &cfg, src, "base_footprint", tc.lidar, time.Second); err != nil {
			t.Fatal(err)
		}
		if n := logs.FilterMessageSnippet("longer than a handle's 16-byte frame id").Len(); n != tc.warns {
			t.Errorf("%s: %d warnings, want %d", tc.lidar, n, tc.warns)
		}
	}
}
