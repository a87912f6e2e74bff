package agent

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/zerohop/zerohop/camera"
	"github.com/zerohop/zerohop/handles/transport"
	"github.com/zerohop/zerohop/internal/sockdir"
)

// latencyInputs reads /latency's inputs label and the count of each stage.
func latencyInputs(t *testing.T, base string) (inputs string, counts map[string]uint64) {
	t.Helper()
	var lat struct {
		Inputs string `json:"inputs"`
		Stages []struct {
			Name       string `json:"name"`
			SinceStart struct {
				Count uint64 `json:"count"`
			} `json:"since_start"`
		} `json:"stages"`
	}
	if err := json.Unmarshal(getBody(t, base+"/latency"), &lat); err != nil {
		t.Fatalf("/latency: %v", err)
	}
	counts = map[string]uint64{}
	for _, s := range lat.Stages {
		counts[s.Name] = s.SinceStart.Count
	}
	return lat.Inputs, counts
}

// A robot without a camera: the camera process serves clouds only, and the
// agent with --lidar-only takes them alone over the socket and drives, its
// /latency saying so; no frame is dropped for want of an image.
func TestLidarOnlyAgentDrivesFromACameraWithoutImages(t *testing.T) {
	requireORT(t)
	socket := filepath.Join(sockdir.Short(t), "zh", "camera.sock")
	startCameraProc(t, socket, envSmallScene+"=1", envNoImage+"=1")
	sink := &recordingSink{}
	base := runNodeUntil(t, NodeConfig{Socket: socket, Sink: sink, Threads: 1, Providers: "cpu", LidarOnly: true, Watchdog: slowStepWatchdog},
		60*time.Second, "20 moving commands", func(string) bool {
			moving := 0
			for _, c := range sink.since(time.Time{}) {
				if c.cmd.LinearX > 0 {
					moving++
				}
			}
			return moving > 20
		})
	inputs, counts := latencyInputs(t, base)
	if inputs != "lidar" {
		t.Errorf("/latency inputs %q, want lidar", inputs)
	}
	if counts["preprocess"] != 0 || counts["infer"] == 0 || counts["e2e"] == 0 {
		t.Errorf("/latency stage counts %v: want frames inferred, none preprocessed", counts)
	}
	mb := getBody(t, base+"/metrics")
	if !strings.Contains(string(mb), `zerohop_inputs_info{inputs="lidar"} 1`) {
		t.Errorf("/metrics lacks zerohop_inputs_info{inputs=\"lidar\"} 1")
	}
	if d := metricValue(t, mb, "zerohop_frames_dropped_total"); d != 0 {
		t.Errorf("%v frames dropped", d)
	}
}

// runNodeUntil runs RunNode(cfg) on a fresh loopback listener until ready
// (polled every 50 ms against the node's base URL) holds, failing the test
// if the node stops first or timeout passes; it returns the base URL and
// stops the node when the test ends, failing it on a non-nil result.
func runNodeUntil(t *testing.T, cfg NodeConfig, timeout time.Duration, what string, ready func(base string) bool) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listener = ln
	base := "http://" + ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- RunNode(ctx, cfg) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	for deadline := time.Now().Add(timeout); !ready(base); time.Sleep(50 * time.Millisecond) {
		select {
		case err := <-done:
			done <- err
			t.Fatalf("agent stopped: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: not %s", timeout, what)
		}
	}
	return base
}

// Composed mode: --lidar-only with the in-process camera makes no image
// pool and plans clouds alone, from the synthetic scene (which then renders
// no image) and from a replay folder that has images (hidden). The
// replay's few-point clouds see nothing inside the raster, so its frames
// are taken (handoff) and fail at the voxel stage, as they would with
// images.
func TestLidarOnlyComposedAgent(t *testing.T) {
	requireORT(t)
	mixed, err := filepath.Abs(filepath.Join("..", "sensor", "testdata", "replay", "mixed"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		camera string
		stage  string // counted once per cloud
	}{{"synthetic", "e2e"}, {"replay:" + mixed, "handoff"}} {
		t.Run(strings.SplitN(tc.camera, ":", 2)[0], func(t *testing.T) {
			cfg := NodeConfig{Camera: tc.camera, Rate: 30, Beams: 16, AzimuthSteps: 300, LidarOnly: true,
				Sink: &recordingSink{}, Threads: 1, Providers: "cpu", Watchdog: slowStepWatchdog, Log: zaptest.NewLogger(t)}
			base := runNodeUntil(t, cfg, 30*time.Second, "10 clouds in stage "+tc.stage, func(base string) bool {
				_, counts := latencyInputs(t, base)
				return counts[tc.stage] >= 10
			})
			inputs, counts := latencyInputs(t, base)
			if inputs != "lidar" || counts["preprocess"] != 0 {
				t.Errorf("/latency inputs %q, stage counts %v; want lidar, nothing preprocessed", inputs, counts)
			}
			mb := getBody(t, base+"/metrics")
			if !strings.Contains(string(mb), "zerohop_pool_in_use_points") || strings.Contains(string(mb), "zerohop_pool_in_use_image") {
				t.Errorf("/metrics: want the points pool's gauge and no image pool's:\n%s", mb)
			}
		})
	}
}

// An agent whose model needs images, subscribed to a camera without them,
// is refused and ends with the camera's reason and the fix (it used to log
// the refusal and end with no error, which a supervisor reads as success).
func TestAgentRefusedByACameraWithoutImagesEndsWithTheReason(t *testing.T) {
	requireORT(t)
	socket := filepath.Join(sockdir.Short(t), "zh", "camera.sock")
	startCameraProc(t, socket, envSmallScene+"=1", envNoImage+"=1")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err = RunNode(ctx, NodeConfig{Socket: socket, Listener: ln, Sink: &recordingSink{}, Threads: 1, Providers: "cpu"})
	if ctx.Err() != nil {
		t.Fatal("the agent ran on for 60 s instead of ending on the refusal")
	}
	if err == nil {
		t.Fatal("the agent ended without an error")
	}
	for _, want := range []string{`no topic "image"`, "no image stream", "--lidar-only"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

// Over the copy baseline, a camera without images serves no image
// socket: an agent whose model needs images ends with that reason once
// the points socket answered and the image one did not come, instead of
// waiting without a word; with --lidar-only it takes the points alone.
func TestCopyTransportCameraWithoutImages(t *testing.T) {
	requireORT(t)
	socket := filepath.Join(sockdir.Short(t), "camera.sock")
	serveCtx, stopServing := context.WithCancel(context.Background())
	srv, err := transport.NewCopyServer(transport.CopyServerConfig{Path: socket + "." + camera.PointsTopicName})
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(serveCtx) }()
	// A cleanup, not a defer: it must run after runNodeUntil's, which
	// stops the agent; the copy baseline ends the agent with an error
	// when its camera goes away first.
	t.Cleanup(func() { stopServing(); <-served })

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	err = RunNode(ctx, NodeConfig{Socket: socket, Transport: "copy", HTTP: "127.0.0.1:0", Sink: &recordingSink{}, Threads: 1, Providers: "cpu"})
	if ctx.Err() != nil {
		t.Fatal("the agent waited 30 s for the image socket")
	}
	for _, want := range []string{socket + ".image", "did not appear", "--lidar-only"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("RunNode: %v; want it to say %q", err, want)
		}
	}
	t.Logf("ended after %v: %v", time.Since(start).Round(time.Millisecond), err)

	runNodeUntil(t, NodeConfig{Socket: socket, Transport: "copy", Sink: &recordingSink{}, Threads: 1, Providers: "cpu", LidarOnly: true},
		20*time.Second, "up", func(base string) bool {
			r, err := http.Get(base + "/healthz")
			if err != nil {
				return false
			}
			r.Body.Close()
			return true
		})
}
