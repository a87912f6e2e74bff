package agent

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/zerohop/zerohop/handles"
	"github.com/zerohop/zerohop/infer"
	"github.com/zerohop/zerohop/sensor"
	"github.com/zerohop/zerohop/telemetry"
	"github.com/zerohop/zerohop/voxel"
)

// slowGPUFilter is a fakeGPUFilter whose every call first sleeps for delay
// (an overloaded GPU, a heavy model on a small board).
type slowGPUFilter struct {
	*fakeGPUFilter
	delay atomic.Int64 // time.Duration
}

func (s *slowGPUFilter) Run(in voxel.Cloud, out *voxel.Points, bev []byte) error {
	time.Sleep(time.Duration(s.delay.Load()))
	return s.fakeGPUFilter.Run(in, out, bev)
}

// runCamera publishes a frame into g every period until ctx ends; the
// returned function waits for it to stop.
func runCamera(ctx context.Context, g *composed, period time.Duration) (wait func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		var h handles.Handle
		for seq := uint64(0); ctx.Err() == nil; seq++ {
			_ = g.cam.Frame(seq, g.inproc, &h)
			time.Sleep(period)
		}
	}()
	return func() { <-done }
}

// probeHealth asks g's pipeline for its health every 10 ms for d: how
// many answers were healthy, of how many, and the last reason given.
func probeHealth(g *composed, d time.Duration) (healthy, probes int, why string) {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		probes++
		if err := g.pipe.Health(time.Now()); err == nil {
			healthy++
		} else {
			why = err.Error()
		}
	}
	return healthy, probes, why
}

// TestHealthSaysWhenSlowFramesZeroEveryCommand: every frame's stages take
// 300 ms under a 200 ms watchdog, so every command is zero (the stall
// guard's, then the late frame's) while fresh frames keep arriving. The
// watchdog alone said healthy for most of each frame (60 % of probes): a
// compose healthcheck needing three 503s in a row kept the container
// healthy while the robot never moved. Once frames are fast again, health
// returns.
func TestHealthSaysWhenSlowFramesZeroEveryCommand(t *testing.T) {
	fake := newFakeGPUFilter(t, 0.2)
	slow := &slowGPUFilter{fakeGPUFilter: fake}
	slow.delay.Store(int64(300 * time.Millisecond))
	g := newComposedWith(t, composedOptions{gpu: slow, gpuBEV: make([]byte, 4*fake.bev.Len()), watchdog: 200 * time.Millisecond})
	g.pipe.cfg.PairTolerance = time.Second
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.pipe.Run(ctx) }()
	waitCamera := runCamera(ctx, g, 33*time.Millisecond)
	defer func() { cancel(); <-done; waitCamera() }()

	for deadline := time.Now().Add(10 * time.Second); g.pipe.Stalls() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no stall within 10 s of 300 ms frames under a 200 ms watchdog")
		}
	}
	healthy, probes, why := probeHealth(g, 1500*time.Millisecond)
	if healthy > 0 {
		t.Fatalf("healthy in %d of %d probes while every frame outlasted the watchdog", healthy, probes)
	}
	if !strings.Contains(why, "zeroed for") {
		t.Errorf("health reason %q does not say for how long", why)
	}

	slow.delay.Store(0)
	for deadline := time.Now().Add(10 * time.Second); g.pipe.Health(time.Now()) != nil; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("still unhealthy 10 s after frames became fast: %v", g.pipe.Health(time.Now()))
		}
	}
}

// TestHealthSaysHowLongCommandsHaveBeenZero: /healthz's reason gives the
// incident's duration at the time asked, not only its age when it began.
func TestHealthSaysHowLongCommandsHaveBeenZero(t *testing.T) {
	g := newComposed(t)
	t0 := time.Now()
	if err := g.pipe.Health(t0); err == nil || !strings.Contains(err.Error(), "no frame received yet (cmd_vel zeroed for 0s)") {
		t.Fatalf("Health before any frame = %v", err)
	}
	if err := g.pipe.Health(t0.Add(8500 * time.Millisecond)); err == nil || !strings.Contains(err.Error(), "zeroed for 8.5s") {
		t.Fatalf("Health 8.5 s on = %v, want it to say 8.5s", err)
	}
}

// TestFramesSupersededCountsTheTransportsQueue: frames the transport's
// queue released for newer ones, before the pipeline took any, are
// superseded frames too. frames_superseded left them out: with a slow
// agent it read 27 while 1100 clouds went unprocessed.
func TestFramesSupersededCountsTheTransportsQueue(t *testing.T) {
	g := newComposed(t)
	var h handles.Handle
	for seq := range uint64(3) { // the queue keeps one per topic: 2 clouds and 2 images superseded
		if err := g.cam.Frame(seq, g.inproc, &h); err != nil {
			t.Fatal(err)
		}
	}
	queued := g.inproc.Stats().Superseded
	if queued < 4 {
		t.Fatalf("setup: the transport superseded %d, want 4", queued)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.pipe.Run(ctx) }()
	for deadline := time.Now().Add(10 * time.Second); g.rec.Count(telemetry.FramesProcessed) == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			cancel()
			<-done
			t.Fatal("no frame processed within 10 s")
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := g.rec.Count(telemetry.FramesSuperseded); got < queued {
		t.Fatalf("frames_superseded %d, the transport's queue alone superseded %d", got, queued)
	}
}

// TestHealthSaysWhenTheSinkRefusesCommands: frames flow and the watchdog
// is quiet, but no command reaches the robot: health said 200.
func TestHealthSaysWhenTheSinkRefusesCommands(t *testing.T) {
	g := newComposedWith(t, composedOptions{watchdog: slowStepWatchdog})
	sink := &failingSink{err: errors.New("dds_write: DDS_RETCODE_ERROR")}
	g.pipe.cfg.Sink = sink
	var h handles.Handle
	g.step(t, 0, &h)
	if err := g.pipe.Health(time.Now()); err == nil || !strings.Contains(err.Error(), "DDS_RETCODE_ERROR") {
		t.Fatalf("Health while the sink refuses every command = %v", err)
	}
	sink.err = nil
	g.step(t, 1, &h)
	if err := g.pipe.Health(time.Now()); err != nil {
		t.Fatalf("Health once the sink takes commands again = %v", err)
	}
}

// garbagePointSource writes x = FLT_MAX into the first point of every
// cloud: some drivers mark "no return" so.
type garbagePointSource struct{ sensor.Source }

func (s garbagePointSource) FillPoints(seq uint64, dst []byte) (int, error) {
	n, err := s.Source.FillPoints(seq, dst)
	if n > 0 {
		binary.LittleEndian.PutUint32(dst[0:], math.Float32bits(math.MaxFloat32))
	}
	return n, err
}

// TestAGarbagePointFarAwayIsNotAFailedFrame: one point at x = FLT_MAX
// made the voxel grid too large, so every frame failed and cmd_vel stayed
// zero for as long as the driver sent such points, at any --leaf. The
// agent's filter is cropped to what the raster sees (filterConfig).
func TestAGarbagePointFarAwayIsNotAFailedFrame(t *testing.T) {
	g := newComposedWith(t, composedOptions{wrap: func(s sensor.Source) sensor.Source { return garbagePointSource{s} }})
	var h handles.Handle
	for seq := range uint64(3) {
		g.step(t, seq, &h)
	}
	if d, n := g.rec.Count(telemetry.FramesDropped), g.rec.Count(telemetry.FramesProcessed); d != 0 || n != 3 {
		t.Fatalf("%d frames dropped, %d processed, want 0 and 3 (watchdog: %v)", d, n, g.pipe.Health(time.Now()))
	}
}

// blindSource writes NaN into every point while blind is set: a covered or
// failed LiDAR whose driver still publishes clouds.
type blindSource struct {
	sensor.Source
	blind *atomic.Bool
}

func (s blindSource) FillPoints(seq uint64, dst []byte) (int, error) {
	n, err := s.Source.FillPoints(seq, dst)
	if s.blind.Load() {
		for i := range n {
			binary.LittleEndian.PutUint32(dst[i*sensor.PointStep:], math.Float32bits(float32(math.NaN())))
		}
	}
	return n, err
}

// TestABlindLiDARIsNotAnEmptyWorld: a cloud with no point left after the
// filter filled an empty raster, which the model reads as open space: the
// robot drove on with its eyes shut. Such a frame is a failed stage now
// (zero command, health says why), on the CPU and the GPU path alike, and
// commands resume with the first cloud that sees something.
func TestABlindLiDARIsNotAnEmptyWorld(t *testing.T) {
	for _, onGPU := range []bool{false, true} {
		t.Run(map[bool]string{false: "cpu", true: "gpu (fake)"}[onGPU], func(t *testing.T) {
			var blind atomic.Bool
			o := composedOptions{wrap: func(s sensor.Source) sensor.Source { return blindSource{s, &blind} }, watchdog: slowStepWatchdog}
			if onGPU {
				fake := newFakeGPUFilter(t, 0.2)
				o.gpu, o.gpuBEV = fake, make([]byte, 4*fake.bev.Len())
			}
			g := newComposedWith(t, o)
			var h handles.Handle
			g.step(t, 0, &h)
			blind.Store(true)
			published := len(g.sink.since(time.Time{}))
			g.step(t, 1, &h)
			if d, n := g.rec.Count(telemetry.FramesDropped), g.rec.Count(telemetry.FramesProcessed); d != 1 || n != 1 {
				t.Fatalf("after a cloud of NaN points: %d frames dropped, %d processed; want it dropped", d, n)
			}
			if cmds := g.sink.since(time.Time{})[published:]; len(cmds) != 0 {
				t.Fatalf("commands %+v planned from a cloud of NaN points", cmds)
			}
			if err := g.pipe.Health(time.Now()); err == nil || !strings.Contains(err.Error(), "blind or covered LiDAR") {
				t.Fatalf("Health after a blind cloud = %v", err)
			}
			blind.Store(false)
			g.step(t, 2, &h)
			if err := g.pipe.Health(time.Now()); err != nil || g.rec.Count(telemetry.FramesProcessed) != 2 {
				t.Fatalf("once the LiDAR sees again: Health %v, %d frames processed", err, g.rec.Count(telemetry.FramesProcessed))
			}
		})
	}
}

// atXSource puts every point at x = X in the clouds' frame.
type atXSource struct {
	sensor.Source
	x float32
}

func (s atXSource) FillPoints(seq uint64, dst []byte) (int, error) {
	n, err := s.Source.FillPoints(seq, dst)
	for i := range n {
		binary.LittleEndian.PutUint32(dst[i*sensor.PointStep:], math.Float32bits(s.x))
	}
	return n, err
}

// TestNothingInTheRasterIsBlindToo: points the filter keeps, but none
// inside the raster, give the model the same empty raster: 0.1 m behind
// the robot (inside the filter's crop margin, outside the raster, x ≥ 0),
// and 0.1 m ahead of a LiDAR mounted facing backwards (--lidar-rpy
// 0,0,180deg), which is as far behind the robot: the check must place
// the points as the raster does (it read them in the LiDAR's frame, and
// found them ahead).
func TestNothingInTheRasterIsBlindToo(t *testing.T) {
	for _, tc := range []struct {
		name  string
		x     float32
		mount voxel.Mount
	}{
		{"behind the robot", -0.1, voxel.Mount{}},
		{"ahead of a LiDAR facing backwards", 0.1, voxel.Mount{Yaw: math.Pi}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bev, err := bevConfig(infer.ReferenceConfig(), lidarPose{mount: tc.mount})
			if err != nil {
				t.Fatal(err)
			}
			g := newComposedWith(t, composedOptions{bev: bev, wrap: func(s sensor.Source) sensor.Source { return atXSource{s, tc.x} }})
			var h handles.Handle
			g.step(t, 0, &h)
			if d := g.rec.Count(telemetry.FramesDropped); d != 1 {
				t.Fatalf("%d frames dropped, want the frame with nothing in the raster dropped", d)
			}
			if err := g.pipe.Health(time.Now()); err == nil || !strings.Contains(err.Error(), "blind or covered LiDAR") {
				t.Fatalf("Health = %v", err)
			}
		})
	}
}

// TestHealthSaysWhenCommandsExpireBetweenFrames: each image pairs 300 ms
// older than its cloud (the most --pair-tolerance allows under a 600 ms
// watchdog), and frames come 400 ms apart, so each command ends with its
// image, about 300 ms after its cloud, and the stall guard zeroes it
// before the next frame; the robot crawls from rest, frame after frame.
// The watchdog, which orders and ages frames by their clouds, saw fresh
// clouds throughout: /healthz said healthy and nothing counted it. Once
// the images are as new as their clouds, commands last until the next
// frame and health returns.
func TestHealthSaysWhenCommandsExpireBetweenFrames(t *testing.T) {
	g := newComposedWith(t, composedOptions{watchdog: 600 * time.Millisecond})
	g.pipe.cfg.PairTolerance = 300 * time.Millisecond
	core, logs := observer.New(zap.InfoLevel)
	g.pipe.log = zap.New(core)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.pipe.Run(ctx) }()
	var lag atomic.Int64
	lag.Store(int64(300 * time.Millisecond))
	cameraDone := make(chan struct{})
	go func() {
		defer close(cameraDone)
		var h handles.Handle
		var imageAt int64
		for seq := uint64(0); ctx.Err() == nil; seq++ {
			_ = g.cam.Frame(seq, imageAger{g.inproc, time.Duration(lag.Load()), &imageAt}, &h)
			time.Sleep(400 * time.Millisecond)
		}
	}()
	defer func() { cancel(); <-done; <-cameraDone }()

	for deadline := time.Now().Add(10 * time.Second); g.pipe.Expiries() < 2; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d commands expired within 10 s of images 300 ms older than their clouds, frames 400 ms apart, under a 600 ms watchdog; want 2 or more", g.pipe.Expiries())
		}
	}
	incidents := g.pipe.cfg.Watchdog.Counts()
	healthy, probes, why := probeHealth(g, 1500*time.Millisecond)
	if healthy > 0 {
		t.Fatalf("healthy in %d of %d probes while every command expired before the next frame", healthy, probes)
	}
	if !strings.Contains(why, "expire between frames") || !strings.Contains(why, "--pair-tolerance, 300ms") {
		t.Errorf("health reason %q does not say that commands expire, nor name the pairing tolerance", why)
	}
	if lines := logs.FilterMessageSnippet("cmd_vel zeroed between frames").Len(); lines != 1 {
		t.Errorf("%d log lines for a run of %d expiries, want 1", lines, g.pipe.Expiries())
	}
	if now := g.pipe.cfg.Watchdog.Counts(); now != incidents {
		t.Errorf("watchdog incidents went from %+v to %+v: want none, the clouds were fresh (the test is of the expiries alone)", incidents, now)
	}

	lag.Store(0)
	for deadline := time.Now().Add(10 * time.Second); g.pipe.Health(time.Now()) != nil; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("still unhealthy 10 s after images became as new as their clouds: %v", g.pipe.Health(time.Now()))
		}
	}
}

// TestExpiryIsNotCountedWhenTheCloudIsStale: a command the stall guard
// zeroes at its stale moment is counted as expired (and held against
// /healthz) only while the newest cloud is fresh; once the cloud is
// stale too (the camera stopped), the watchdog's incident explains the
// zero.
func TestExpiryIsNotCountedWhenTheCloudIsStale(t *testing.T) {
	for _, tc := range []struct {
		name    string
		wait    time.Duration // after the last frame, under a 300 ms watchdog
		counted uint64
	}{{"cloud fresh", 0, 1}, {"cloud stale", 400 * time.Millisecond, 0}} {
		t.Run(tc.name, func(t *testing.T) {
			g := newComposedWith(t, composedOptions{watchdog: 300 * time.Millisecond})
			var h handles.Handle
			for seq := range uint64(5) { // moving by now
				g.step(t, seq, &h)
				time.Sleep(20 * time.Millisecond)
			}
			if last := g.pipe.Last(); last.IsZero() {
				t.Fatal("not moving after 5 frames")
			}
			time.Sleep(tc.wait)
			g.pipe.cmdUntil.Store(1) // its stale moment long past
			g.pipe.expireCommand()
			if last := g.pipe.Last(); !last.IsZero() {
				t.Fatalf("the expired command %+v is still in force", last)
			}
			if n := g.pipe.Expiries(); n != tc.counted {
				t.Fatalf("%d expiries counted, want %d", n, tc.counted)
			}
			if err := g.pipe.Health(time.Now()); (err != nil && strings.Contains(err.Error(), "expire between frames")) != (tc.counted == 1) {
				t.Fatalf("health %v; want it to name the expiry: %v", err, tc.counted == 1)
			}
		})
	}
}
