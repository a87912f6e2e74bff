package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/zerohop/zerohop/camera"
	"github.com/zerohop/zerohop/gpu"
	"github.com/zerohop/zerohop/handles/transport"
	"github.com/zerohop/zerohop/internal/childproc/childproctest"
	"github.com/zerohop/zerohop/internal/sockdir"
	"github.com/zerohop/zerohop/planner"
	"github.com/zerohop/zerohop/sensor"
)

const (
	envRole   = "ZEROHOP_AGENT_TEST_ROLE"
	envSocket = "ZEROHOP_AGENT_TEST_SOCKET"
	// envSmallScene=1 makes the camera process render smallScene.
	envSmallScene = "ZEROHOP_AGENT_TEST_SMALL_SCENE"
	// envNoImage=1 makes the camera process serve clouds only, as a
	// robot's without a camera (--image-size none).
	envNoImage = "ZEROHOP_AGENT_TEST_NO_IMAGE"
	// envPlanar=1 makes the camera process's LiDAR a planar scanner
	// (--planar-lidar).
	envPlanar = "ZEROHOP_AGENT_TEST_PLANAR"
)

// smallScene is a synthetic scene small enough for the fake CUDA driver's
// host emulation (~5k points, 320×180).
var smallScene = sensor.SyntheticConfig{Beams: 16, AzimuthSteps: 300, ImageWidth: 320, ImageHeight: 180}

// The test binary doubles as the camera process.
func TestMain(m *testing.M) {
	if os.Getenv(envRole) == "camera" {
		ctx, stop := signalContext()
		defer stop()
		cfg := camera.NodeConfig{Source: "synthetic", Rate: 30, Socket: os.Getenv(envSocket), AllowGID: -1}
		if os.Getenv(envSmallScene) == "1" {
			cfg.Beams, cfg.AzimuthSteps = smallScene.Beams, smallScene.AzimuthSteps
			cfg.ImageWidth, cfg.ImageHeight = smallScene.ImageWidth, smallScene.ImageHeight
		}
		cfg.NoImage = os.Getenv(envNoImage) == "1"
		cfg.PlanarLidar = os.Getenv(envPlanar) == "1"
		err := camera.RunNode(ctx, cfg)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// recordingSink is a CmdSink that keeps every command with its time.
type recordingSink struct {
	mu   sync.Mutex
	cmds []timedCmd
}

type timedCmd struct {
	at  time.Time
	cmd planner.Twist
}

func (s *recordingSink) PublishTwist(t planner.Twist, _ time.Time) error {
	s.mu.Lock()
	s.cmds = append(s.cmds, timedCmd{time.Now(), t})
	s.mu.Unlock()
	return nil
}

func (s *recordingSink) since(t0 time.Time) []timedCmd {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []timedCmd
	for _, c := range s.cmds {
		if !c.at.Before(t0) {
			out = append(out, c)
		}
	}
	return out
}

// requireORT points the library search at the repository's cache (tests
// run in agent/) and skips only when the library was never fetched and
// make test (ZEROHOP_REQUIRE_ORT=1) is not asking for it.
func requireORT(t *testing.T) {
	t.Helper()
	cache, _ := filepath.Abs(filepath.Join("..", ".cache"))
	if os.Getenv("ZEROHOP_CACHE") == "" {
		t.Setenv("ZEROHOP_CACHE", cache)
	}
	if os.Getenv("ZEROHOP_REQUIRE_ORT") != "1" {
		if _, err := os.Stat(filepath.Join(cache, "ort")); err != nil {
			t.Skip("ONNX Runtime library not fetched; run `make ort` (make test requires it)")
		}
	}
}

// startCameraProc starts the test binary as a camera process serving
// socket; env adds to its environment (envSmallScene=1, envNoImage=1,
// envPlanar=1).
func startCameraProc(t *testing.T, socket string, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), envRole+"=camera", envSocket+"="+socket), env...)
	cmd.Stderr = io.Discard
	if testing.Verbose() {
		cmd.Stderr = os.Stderr
	}
	childproctest.LockForPdeathsig(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return cmd
}

func TestEndToEndTwoProcesses(t *testing.T) {
	requireORT(t)
	// Blocked in recv (the default), and spinning on the handle rings
	// (--spin): the same guarantees either way.
	for _, spin := range []bool{false, true} {
		t.Run(map[bool]string{false: "blocking", true: "spin"}[spin], func(t *testing.T) { testEndToEndTwoProcesses(t, spin) })
	}
}

func testEndToEndTwoProcesses(t *testing.T, spin bool) {
	socket := filepath.Join(sockdir.Short(t), "zh", "camera.sock")
	cam := startCameraProc(t, socket)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	sink := &recordingSink{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- RunNode(ctx, NodeConfig{Socket: socket, Listener: ln, Sink: sink, Threads: 1, Providers: "cpu", Spin: spin})
	}()
	stopped := false
	stopAgent := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
	defer stopAgent()

	// Commands flow and change as the obstacle moves. About 6 s on an idle
	// machine; the bound leaves room for a starved one (the loop ends at
	// the first success).
	deadline := time.Now().Add(60 * time.Second)
	t0 := time.Now()
	for {
		cmds := sink.since(t0)
		moving, left, right := 0, 0, 0
		for _, c := range cmds {
			if c.cmd.LinearX > 0 {
				moving++
			}
			if c.cmd.AngularZ > 0.05 {
				left++
			}
			if c.cmd.AngularZ < -0.05 {
				right++
			}
		}
		if moving > 30 && left > 3 && right > 3 {
			t.Logf("%d commands: %d moving, %d turning left, %d turning right", len(cmds), moving, left, right)
			break
		}
		select {
		case err := <-done:
			done <- err
			t.Fatalf("agent stopped: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 60 s: %d commands, %d moving, %d left, %d right; want motion and turns both ways", len(cmds), moving, left, right)
		}
		time.Sleep(100 * time.Millisecond)
	}

	resp, err := http.Get(base + "/latency")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var lat struct {
		GPU       string `json:"gpu"`
		VoxelPath string `json:"voxel_path"`
		Provider  string `json:"provider"`
		Handoff   string `json:"handoff"`
		Stages    []struct {
			Name       string `json:"name"`
			SinceStart struct {
				Count uint64  `json:"count"`
				P50   float64 `json:"p50"`
				Max   float64 `json:"max"`
			} `json:"since_start"`
		} `json:"stages"`
	}
	if err := json.Unmarshal(body, &lat); err != nil {
		t.Fatalf("/latency: %v", err)
	}
	for _, s := range lat.Stages {
		if s.SinceStart.Count == 0 || s.SinceStart.P50 <= 0 || s.SinceStart.P50 > 1e6 || s.SinceStart.Max < s.SinceStart.P50 {
			t.Errorf("stage %s: implausible %+v", s.Name, s.SinceStart)
		}
	}
	if lat.Provider != "cpu" {
		t.Errorf("/latency provider %q, want cpu", lat.Provider)
	}
	if want := map[bool]string{false: "socket", true: "rings"}[spin]; lat.Handoff != want {
		t.Errorf("/latency handoff %q, want %q", lat.Handoff, want)
	}
	if _, err := gpu.Open(); err != nil {
		// No CUDA driver here: the CPU path, and /latency says so.
		if lat.GPU != "none" || lat.VoxelPath != "cpu" {
			t.Errorf("/latency gpu %q, voxel path %q without a CUDA driver (%v); want none, cpu", lat.GPU, lat.VoxelPath, err)
		}
	} else if lat.GPU == "" || lat.VoxelPath != "gpu" && lat.VoxelPath != "cpu" {
		t.Errorf("/latency gpu %q, voxel path %q", lat.GPU, lat.VoxelPath)
	}
	for _, stage := range []string{"handoff", "voxel", "bev", "preprocess", "infer", "plan", "e2e"} {
		if !strings.Contains(string(body), `"`+stage+`"`) {
			t.Errorf("/latency lacks stage %q", stage)
		}
	}
	// While frames flow: healthy, and commands not held at zero. Under
	// -race on a loaded machine a frame now and then outlasts the
	// watchdog (its command is zeroed, and health says so until the next
	// one in time): ask until both agree, for up to 10 s.
	var incidentsBefore float64
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		mb := getBody(t, base+"/metrics")
		h, err := http.Get(base + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		why, _ := io.ReadAll(h.Body)
		h.Body.Close()
		zeroed := metricValue(t, mb, "zerohop_cmd_vel_zeroed")
		incidentsBefore = metricValue(t, mb, "zerohop_watchdog_stale_incidents_total") + metricValue(t, mb, "zerohop_watchdog_stage_failure_incidents_total")
		if h.StatusCode == 200 && zeroed == 0 {
			// Before the first frame commands were zeroed: a stale incident.
			if incidentsBefore < 1 {
				t.Errorf("/metrics counts %v watchdog incidents; the wait for the first frame is one", incidentsBefore)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("for 10 s while frames flow: /healthz %d %q, cmd_vel_zeroed %v", h.StatusCode, why, zeroed)
		}
	}
	// The ground check has judged the first frame: the synthetic scene's
	// robot-frame clouds have their ground at z = 0, where the BEV takes it.
	mb := getBody(t, base+"/metrics")
	if z, m, tilt := metricValue(t, mb, "zerohop_ground_found_z_m"), metricValue(t, mb, "zerohop_ground_mismatch"), metricValue(t, mb, "zerohop_ground_tilt_deg"); !(math.Abs(z) < 0.1) || m != 0 || !(tilt < 0.5) {
		t.Errorf("/metrics: ground_found_z_m %v, ground_mismatch %v, ground_tilt_deg %v; want about 0 (the synthetic ground), 0 and under 0.5", z, m, tilt)
	}
	// The GPU path's counters are there on the CPU path too, at 0
	// (metricValue fails the test on a missing one).
	for _, name := range []string{"zerohop_gpu_voxel_failures_total", "zerohop_gpu_voxel_oversize_total", "zerohop_gpu_voxel_staged_total", "zerohop_cmd_vel_expired_total"} {
		if v := metricValue(t, mb, name); v != 0 {
			t.Errorf("/metrics: %s %v on the CPU path, want 0", name, v)
		}
	}

	// Kill the camera: zero command within the watchdog period.
	cam.Process.Signal(syscall.SIGKILL)
	cam.Wait()
	killed := time.Now()
	var zeroAt time.Time
	for time.Since(killed) < 2*time.Second && zeroAt.IsZero() {
		for _, c := range sink.since(killed) {
			if c.cmd.IsZero() {
				zeroAt = c.at
				break
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	if zeroAt.IsZero() {
		t.Fatal("no zero command within 2 s of the camera dying")
	}
	// The watchdog counts from the last fresh frame (≤ one frame before the
	// kill) and is checked every quarter period; allow 100 ms of scheduling.
	if d := zeroAt.Sub(killed); d > 200*time.Millisecond+50*time.Millisecond+100*time.Millisecond {
		t.Fatalf("zero command %v after the camera died; watchdog is 200 ms", d)
	} else {
		t.Logf("zero command %v after the camera died", d)
	}
	for _, c := range sink.since(zeroAt.Add(time.Millisecond)) {
		if !c.cmd.IsZero() {
			t.Fatalf("non-zero command %+v after the camera died", c.cmd)
		}
	}
	if h, err := http.Get(base + "/healthz"); err != nil || h.StatusCode != 503 {
		t.Fatalf("/healthz with no camera = %v %v, want 503", h, err)
	}
	// The camera's death is an incident: stale, or a stage failure when
	// it reclaimed the slots of the frame the stages read.
	mb = getBody(t, base+"/metrics")
	incidents := metricValue(t, mb, "zerohop_watchdog_stale_incidents_total") + metricValue(t, mb, "zerohop_watchdog_stage_failure_incidents_total")
	if zeroed := metricValue(t, mb, "zerohop_cmd_vel_zeroed"); zeroed != 1 || incidents <= incidentsBefore {
		t.Errorf("/metrics with no camera: cmd_vel_zeroed %v, watchdog incidents %v (were %v); want 1 and more", zeroed, incidents, incidentsBefore)
	}

	// Camera back: commands resume.
	startCameraProc(t, socket)
	back := time.Now()
	for {
		resumed := false
		for _, c := range sink.since(back) {
			if c.cmd.LinearX > 0 {
				resumed = true
			}
		}
		if resumed {
			break
		}
		if time.Since(back) > 20*time.Second {
			t.Fatal("commands did not resume after the camera came back")
		}
		time.Sleep(50 * time.Millisecond)
	}

	// Shutdown (SIGINT/SIGTERM cancel the same context): the last command
	// is zero.
	stopAgent()
	cmds := sink.since(back)
	if last := cmds[len(cmds)-1].cmd; !last.IsZero() {
		t.Fatalf("last command at shutdown = %+v, want zero", last)
	}
}

// getBody is the body of a GET of url.
func getBody(t *testing.T, url string) []byte {
	t.Helper()
	r, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// metricValue is the value of an unlabelled metric in a /metrics body.
func metricValue(t *testing.T, body []byte, name string) float64 {
	t.Helper()
	for line := range strings.Lines(string(body)) {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("/metrics %s: %v", name, err)
			}
			return f
		}
	}
	t.Fatalf("/metrics has no %s", name)
	return 0
}

func TestStartupErrorsNameTheProblem(t *testing.T) {
	requireORT(t)
	dir := t.TempDir()
	corrupt := filepath.Join(dir, "corrupt.onnx")
	os.WriteFile(corrupt, []byte("not a model"), 0o644)
	// The reference config with its BEV input renamed: valid JSON, valid
	// config, wrong for the model.
	ref, err := os.ReadFile(filepath.Join("..", "models", "reference.json"))
	if err != nil {
		t.Fatal(err)
	}
	badConfig := filepath.Join(dir, "config.json")
	os.WriteFile(badConfig, []byte(strings.Replace(string(ref), `"name": "bev"`, `"name": "nope"`, 1)), 0o644)
	// A replay folder of clouds alone, for the camera model.
	cloudsOnly := filepath.Join(dir, "clouds")
	if err := os.Mkdir(cloudsOnly, 0o755); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join("..", "sensor", "testdata", "replay", "mixed", "000000.bin")); err != nil || os.WriteFile(filepath.Join(cloudsOnly, "000000.bin"), b, 0o644) != nil {
		t.Fatalf("replay cloud: %v", err)
	}
	centredConfig := filepath.Join(dir, "config.centred.json")
	os.WriteFile(centredConfig, []byte(strings.Replace(string(ref), `"cell_m": 0.2`, `"cell_m": 0.2, "min_x_m": -12.8`, 1)), 0o644)
	tests := []struct {
		name string
		cfg  NodeConfig
		want []string
	}{
		{"missing model", NodeConfig{Model: filepath.Join(dir, "missing.onnx")}, []string{"missing.onnx"}},
		{"corrupt model", NodeConfig{Model: corrupt}, []string{"corrupt.onnx"}},
		{"model config naming an input the model lacks", NodeConfig{ModelConfig: badConfig}, []string{"nope"}},
		{"model config of another raster for the embedded model", NodeConfig{ModelConfig: centredConfig}, []string{"config.centred.json", "from x = -12.8 m", "--model"}},
		{"missing library", NodeConfig{ORTLib: filepath.Join(dir, "libonnxruntime.so.1")}, []string{"libonnxruntime.so.1"}},
		{"unknown provider", NodeConfig{Providers: "warp-drive"}, []string{"warp-drive"}},
		{"replay of clouds alone for the camera model", NodeConfig{Camera: "replay:" + cloudsOnly}, []string{"no image stream", "run with --lidar-only"}},
		{"recorded timing of a replay without timestamps", NodeConfig{Camera: "replay:" + cloudsOnly, ReplayTiming: camera.ReplayTimingRecorded},
			[]string{"--camera replay:" + cloudsOnly, "--replay-timing recorded: no timestamps file", "--replay-timing rate"}},
	}
	if _, err := gpu.Open(); err != nil {
		// Only where no CUDA driver is installed (here, CI).
		tests = append(tests, struct {
			name string
			cfg  NodeConfig
			want []string
		}{"GPU required without a driver", NodeConfig{GPU: GPUOn}, []string{"--gpu on", gpu.DriverSoname}})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.Providers = orDefault(tt.cfg.Providers, "cpu")
			startupError(t, dir, tt.cfg, tt.want)
		})
	}
}

// startupError runs RunNode on cfg (no camera at dir/none.sock; HTTP on
// any free port unless set), which must fail at once with an error
// naming each of want, and returns that error.
func startupError(t *testing.T, dir string, cfg NodeConfig, want []string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cfg.Socket = filepath.Join(dir, "none.sock")
	if cfg.HTTP == "" {
		cfg.HTTP = "127.0.0.1:0"
	}
	err := RunNode(ctx, cfg)
	if err == nil {
		t.Fatal("RunNode started")
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not mention %q", err, w)
		}
	}
	if ctx.Err() != nil {
		t.Fatal("RunNode hung instead of failing at start-up")
	}
	return err
}

// TestFlagErrorsComeBeforeAnythingStarts gives RunNode a bad setting and
// an ONNX Runtime library that does not exist: the error must name the
// setting, not the library, since it is checked before anything slow
// starts (the model, a GPU JIT compile, a TensorRT engine build).
func TestFlagErrorsComeBeforeAnythingStarts(t *testing.T) {
	dir := t.TempDir()
	notDir := filepath.Join(dir, "file")
	if err := os.WriteFile(notDir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	tests := []struct {
		name string
		cfg  NodeConfig
		want []string
	}{
		{"transport", NodeConfig{Transport: "carrier-pigeon"}, []string{"--transport", "carrier-pigeon"}},
		{"GPU mode", NodeConfig{GPU: "maybe"}, []string{"--gpu", "maybe"}},
		{"GPU input", NodeConfig{GPUInput: "teleport"}, []string{"--gpu-input", "teleport"}},
		{"GPU sync", NodeConfig{GPUSync: "blocking"}, []string{"--gpu-sync", `"blocking"`, "auto, spin, yield or block"}},
		{"unknown execution provider", NodeConfig{Providers: "cuda,tpu"}, []string{"--providers", `unknown provider "tpu"`}},
		{"negative watchdog", NodeConfig{Watchdog: -time.Second}, []string{"--watchdog", "-1s"}},
		{"watchdog too short to tick", NodeConfig{Watchdog: 3}, []string{"--watchdog 3ns", "1ms to 1h"}},
		{"watchdog beyond an hour", NodeConfig{Watchdog: 2 * time.Hour}, []string{"--watchdog 2h0m0s", "1ms to 1h"}},
		{"negative min points", NodeConfig{MinPoints: -3}, []string{"--min-points", "-3"}},
		{"negative preprocessing threads", NodeConfig{PrepThreads: -3}, []string{"--prep-threads", "-3"}},
		{"negative duration", NodeConfig{Duration: -time.Second}, []string{"--duration", "-1s"}},
		{"max points", NodeConfig{MaxPoints: maxMaxPoints + 1}, []string{"--max-points"}},
		{"ONNX Runtime threads", NodeConfig{Threads: 5000}, []string{"--ort-threads", "5000"}},
		{"leaf", NodeConfig{Leaf: 1e-30}, []string{"--leaf 1e-30"}},
		{"NaN leaf", NodeConfig{Leaf: float32(math.NaN())}, []string{"--leaf NaN"}},
		{"LiDAR below the ground", NodeConfig{LidarHeight: -1.73}, []string{"--lidar-height -1.73", "0 (clouds in the robot frame"}},
		{"LiDAR height in centimetres", NodeConfig{LidarHeight: 173}, []string{"--lidar-height 173", "to 100 metres"}},
		{"NaN LiDAR height", NodeConfig{LidarHeight: float32(math.NaN())}, []string{"--lidar-height NaN"}},
		{"robot height under the obstacle height", NodeConfig{MaxObstacleHeight: 0.1}, []string{"--max-obstacle-height 0.1", "0.3 to 100 metres"}},
		{"NaN robot height", NodeConfig{MaxObstacleHeight: float32(math.NaN())}, []string{"--max-obstacle-height NaN"}},
		{"LiDAR 150 m ahead", NodeConfig{LidarXY: [2]float64{150, 0}}, []string{"--lidar-xy 150,0", "-100 to 100 metres"}},
		{"NaN LiDAR y", NodeConfig{LidarXY: [2]float64{0, math.NaN()}}, []string{"--lidar-xy 0,NaN"}},
		{"LiDAR pitch in degrees as radians", NodeConfig{LidarRPY: [3]float64{0, 8, 0}}, []string{"--lidar-rpy 0,8,0", "in degrees 0,458.4,0", "pitch -π/2 to π/2", "8deg"}},
		{"LiDAR pitch of 3 meant as 3°", NodeConfig{LidarRPY: [3]float64{0, 3, 0}}, []string{"--lidar-rpy 0,3,0", "in degrees 0,171.9,0", "pitch -π/2 to π/2"}},
		{"LiDAR roll of 200°", NodeConfig{LidarRPY: [3]float64{200 * math.Pi / 180, 0, 0}}, []string{"in degrees 200,0,0", "roll and yaw -π to π"}},
		{"NaN LiDAR yaw", NodeConfig{LidarRPY: [3]float64{0, 0, math.NaN()}}, []string{"--lidar-rpy 0,0,NaN"}},
		{"unknown in-process camera", NodeConfig{Camera: "bogus"}, []string{`--camera "bogus"`}},
		{"replay without a folder", NodeConfig{Camera: "replay:"}, []string{"--camera replay:DIR"}},
		{"replay of a missing folder", NodeConfig{Camera: "replay:" + filepath.Join(dir, "missing")}, []string{"--camera", "missing", "no such file"}},
		{"replay of a file", NodeConfig{Camera: "replay:" + notDir}, []string{"--camera", notDir, "not a directory"}},
		{"in-process camera rate", NodeConfig{Camera: "synthetic", Rate: 20000}, []string{"--rate", "20000 Hz"}},
		{"unknown replay timing", NodeConfig{Camera: "synthetic", ReplayTiming: "wall"}, []string{`--replay-timing "wall"`, `"recorded"`}},
		{"recorded timing without an in-process replay", NodeConfig{ReplayTiming: camera.ReplayTimingRecorded}, []string{"--replay-timing recorded", "--camera replay:DIR", "--camera is not given"}},
		{"replay speed of the synthetic scene", NodeConfig{Camera: "synthetic", ReplaySpeed: 2}, []string{"--replay-speed 2", `not --camera "synthetic"`}},
		{"replay speed beyond 100", NodeConfig{Camera: "replay:" + dir, ReplaySpeed: 500}, []string{"--replay-speed 500", "0.01 to 100"}},
		{"--lidar-only with a model config that has an image input", NodeConfig{LidarOnly: true, ModelConfig: filepath.Join("..", "models", "reference.json")},
			[]string{"--lidar-only", "reference.json", `image input "image"`}},
		{"LiDAR-only model config for the embedded camera model", NodeConfig{ModelConfig: filepath.Join("..", "models", "reference_lidar.json")},
			[]string{"reference_lidar.json", "no image input", "--lidar-only"}},
		{"model config that is no file", NodeConfig{ModelConfig: filepath.Join(dir, "missing.json")}, []string{"missing.json"}},
		{"pair tolerance under a millisecond", NodeConfig{PairTolerance: 500 * time.Microsecond}, []string{"--pair-tolerance 500µs", "1ms up to half the watchdog period, 100ms"}},
		{"pair tolerance over half the watchdog", NodeConfig{PairTolerance: 150 * time.Millisecond, Watchdog: 250 * time.Millisecond}, []string{"--pair-tolerance 150ms", "125ms", "--watchdog 250ms"}},
		{"taken HTTP port", NodeConfig{HTTP: taken.Addr().String()}, []string{"--http", taken.Addr().String()}},
		{"HTTP address without a port", NodeConfig{HTTP: "localhost"}, []string{`--http "localhost"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.ORTLib = filepath.Join(dir, "libonnxruntime.so.1")
			if err := startupError(t, dir, tt.cfg, tt.want); strings.Contains(err.Error(), "libonnxruntime") {
				t.Fatalf("error %q is about the library: the setting was not checked first", err)
			}
		})
	}
}

// TestComposedNodeStopsCleanly stops a composed agent (camera in the
// process) again and again while its camera is filling slots: the pools
// must outlive the camera goroutine (a pool freed under it crashed the
// process under -race).
func TestComposedNodeStopsCleanly(t *testing.T) {
	requireORT(t)
	for i := range 8 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		sink := &recordingSink{}
		err = RunNode(context.Background(), NodeConfig{Camera: "synthetic", Rate: 100, Beams: 16, AzimuthSteps: 300,
			Duration: 400 * time.Millisecond, Listener: ln, Sink: sink, Threads: 1, Providers: "cpu"})
		if err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
		cmds := sink.since(time.Time{})
		if len(cmds) == 0 || !cmds[len(cmds)-1].cmd.IsZero() {
			t.Fatalf("run %d: %d commands, last %+v; want the last one zero", i, len(cmds), cmds)
		}
	}
}

// The copy baseline does not reconnect: when its camera goes away the
// agent ends with an error saying so. It used to log a warning and run on
// with zero cmd_vel until restarted by hand.
func TestCopyTransportEndingEndsTheAgent(t *testing.T) {
	requireORT(t)
	socket := filepath.Join(sockdir.Short(t), "camera.sock")
	serveCtx, stopServing := context.WithCancel(context.Background())
	defer stopServing()
	var served []chan error
	for i := range 2 {
		srv, err := transport.NewCopyServer(transport.CopyServerConfig{Path: socket + "." + camera.TopicName(i)})
		if err != nil {
			t.Fatal(err)
		}
		ch := make(chan error, 1)
		go func() { ch <- srv.Serve(serveCtx) }()
		served = append(served, ch)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- RunNode(ctx, NodeConfig{Socket: socket, Transport: "copy", Listener: ln, Sink: &recordingSink{}, Threads: 1, Providers: "cpu"})
	}()
	// Up: /healthz answers (503, no frames: the servers publish none).
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if r, err := http.Get("http://" + ln.Addr().String() + "/healthz"); err == nil {
			r.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("agent did not come up")
		}
	}
	stopServing() // the camera goes away: both streams end
	for _, ch := range served {
		<-ch
	}
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "copy transport ended") {
			t.Fatalf("RunNode = %v, want the copy transport's end", err)
		}
		if ctx.Err() != nil {
			t.Fatal("RunNode ended only with its context")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("agent still running 10 s after its copy camera went away")
	}
}
