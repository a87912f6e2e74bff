package agent

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"strings"
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

// modelConfigJSON is the reference model's config with the bev input's
// shape and cell_m replaced.
func modelConfigJSON(h, w int, cell string) string {
	return fmt.Sprintf(`{
  "inputs": [
    {"name": "bev", "tensor": "bev", "shape": [1, 3, %d, %d], "cell_m": %s},
    {"name": "image", "tensor": "image", "shape": [1, 3, 144, 256]}
  ],
  "outputs": [
    {"name": "sector_scores", "role": "sector_scores", "shape": [1, 9]},
    {"name": "clearance", "role": "clearance", "shape": [1, 9]}
  ],
  "sector_headings_deg": [-40, -30, -20, -10, 0, 10, 20, 30, 40]
}`, h, w, cell)
}

// The raster follows the model config's bev input: its shape's H and W,
// its cell_m, min_x_m and max_height_m; the ground lies --lidar-height
// below the cloud's origin. The agent used to build 128 × 128 cells of
// 0.2 m whatever the config said (cell_m was checked and then ignored),
// and to put the ground at the cloud's z = 0 whatever the LiDAR's height.
func TestBEVConfigFromTheModelConfig(t *testing.T) {
	tests := []struct {
		name        string
		config      string
		lidarHeight float32
		want        voxel.BEVConfig
		wantErr     []string
	}{
		{"reference", "", 0, voxel.BEVConfig{H: 128, W: 128, Cell: 0.2, MaxHeight: 3}, nil},
		{"reference, clouds from a LiDAR 1.73 m up", "", 1.73, voxel.BEVConfig{H: 128, W: 128, Cell: 0.2, MaxHeight: 3, GroundZ: -1.73}, nil},
		{"64 × 96 cells of 0.5 m", modelConfigJSON(64, 96, "0.5"), 0, voxel.BEVConfig{H: 64, W: 96, Cell: 0.5, MaxHeight: 3}, nil},
		{"cell_m left out", strings.Replace(modelConfigJSON(32, 32, "0"), `, "cell_m": 0`, "", 1), 0, voxel.BEVConfig{H: 32, W: 32, Cell: 0.2, MaxHeight: 3}, nil},
		{"6.4 m behind the robot, heights to 2 m", modelConfigJSON(96, 64, `0.2, "min_x_m": -6.4, "max_height_m": 2`), 0.5,
			voxel.BEVConfig{H: 96, W: 64, Cell: 0.2, MinX: -6.4, MaxHeight: 2, GroundZ: -0.5}, nil},
		{"height cap too small for float32", modelConfigJSON(128, 128, `0.2, "max_height_m": 1e-50`), 0, voxel.BEVConfig{}, []string{"cfg.json", `"bev"`, "max_height_m 1e-50"}},
		// float32 rounds it to 0, which voxel.BEV would take as its default.
		{"cell too small for float32", modelConfigJSON(128, 128, "1e-50"), 0, voxel.BEVConfig{}, []string{"cfg.json", `"bev"`, "cell_m 1e-50", "0.001 to 100"}},
		{"cell of a kilometre", modelConfigJSON(128, 128, "1000"), 0, voxel.BEVConfig{}, []string{"cell_m 1000"}},
		{"no bev input", `{"inputs": [{"name": "image", "tensor": "image", "shape": [1, 3, 144, 256]}],
  "outputs": [{"name": "sector_scores", "role": "sector_scores", "shape": [1, 9]}],
  "sector_headings_deg": [-40, -30, -20, -10, 0, 10, 20, 30, 40]}`, 0, voxel.BEVConfig{}, []string{"cfg.json", `no input with tensor "bev"`}},
		{"wider than a raster can be", modelConfigJSON(1, 20000, "0.2"), 0, voxel.BEVConfig{}, []string{"cfg.json", "1 × 20000 cells"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := infer.ReferenceConfig()
			if tt.config != "" {
				var err error
				if m, err = infer.ParseConfig([]byte(tt.config), "cfg.json"); err != nil {
					t.Fatal(err)
				}
			}
			got, err := bevConfig(m, lidarPose{height: tt.lidarHeight})
			if tt.wantErr != nil {
				if err == nil {
					t.Fatalf("bevConfig = %+v, want an error naming %q", got, tt.wantErr)
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not name %q", err, w)
					}
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("bevConfig = %+v, %v; want %+v", got, err, tt.want)
			}
			// The filter's crop is the raster's window, as RunNode builds it.
			fcfg, err := filterConfig(NodeConfig{Leaf: 0.2}, got)
			if err != nil {
				t.Fatal(err)
			}
			w := tt.want
			behind, ahead, halfWide := w.MinX-0.4, w.MinX+float32(w.H)*w.Cell+0.4, float32(w.W)*w.Cell/2+0.4
			if c := fcfg.Crop; c == nil || !near(c.Min[0], behind) || !near(c.Max[0], ahead) || c.Min[1] != -halfWide || c.Max[1] != halfWide ||
				c.Min[2] != w.GroundZ-voxel.CropFarZ || c.Max[2] != w.GroundZ+voxel.CropFarZ {
				t.Errorf("crop %+v, want x from %g to %g, y within ±%g (two 0.2 m leaves beyond the raster) and z within %g m of %g",
					fcfg.Crop, behind, ahead, halfWide, float32(voxel.CropFarZ), w.GroundZ)
			}
		})
	}
}

func near(a, b float32) bool { return math.Abs(float64(a-b)) < 1e-5 }

// RunNode with a model whose BEV input is not the reference's: it starts,
// says which raster it builds, and processes frames. It used to refuse a
// shape other than 3 × 128 × 128 and run any cell_m at 0.2 m.
func TestRunNodeTakesTheModelsRaster(t *testing.T) {
	requireORT(t)
	model, err := filepath.Abs(filepath.Join("..", "infer", "testdata", "any_bev_size.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		h, w       int
		cell       string
		wantCell   float32
		wantAheadM float32
	}{
		{"64 × 96 cells of 0.5 m", 64, 96, "0.5", 0.5, 32},
		{"128 × 128 cells of 0.1 m", 128, 128, "0.1", 0.1, 12.8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfgPath := filepath.Join(t.TempDir(), "model.json")
			if err := os.WriteFile(cfgPath, []byte(modelConfigJSON(tt.h, tt.w, tt.cell)), 0o644); err != nil {
				t.Fatal(err)
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			core, logs := observer.New(zap.InfoLevel)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() {
				done <- RunNode(ctx, NodeConfig{Camera: "synthetic", Rate: 30, Beams: 16, AzimuthSteps: 300,
					Model: model, ModelConfig: cfgPath, Listener: ln, Sink: &recordingSink{}, Log: zap.New(core),
					Threads: 1, Providers: "cpu", GPU: GPUOff, Watchdog: 5 * time.Second})
			}()
			lat := waitFrames(t, ln.Addr().String(), done, 3, 30*time.Second, nil)
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			// A raster the stages or the model refused would fail every
			// frame. Not frames_dropped: under -race on a busy 2-core
			// machine the in-process camera can take longer than the 20 ms
			// pairing tolerance to render a frame's 1280×720 image, and
			// that cloud is dropped unpaired (half of the runs here, at
			// a362bd3 too), which says nothing about the raster.
			if n, ok := lat.Counters["watchdog_stage_failure_incidents_total"]; !ok || n != 0 {
				t.Errorf("/latency counter watchdog_stage_failure_incidents_total = %v (present %v), want 0: %+v", n, ok, lat.Counters)
			}
			lines := logs.FilterMessage("BEV raster").All()
			if len(lines) != 1 {
				t.Fatalf("%d \"BEV raster\" log lines, want 1", len(lines))
			}
			f := lines[0].ContextMap()
			if f["rows"] != int64(tt.h) || f["cols"] != int64(tt.w) || f["cell_m"] != tt.wantCell || f["ahead_m"] != tt.wantAheadM || f["from"] != cfgPath {
				t.Errorf("BEV raster logged as %v; want %d rows, %d cols, cell %g m, %g m ahead, from %s", f, tt.h, tt.w, tt.wantCell, tt.wantAheadM, cfgPath)
			}
		})
	}
}

// sensorFrameSource gives the synthetic scene's clouds in the LiDAR's own
// frame, origin at the sensor, as ROS 2 drivers and KITTI give them: every
// z lowered by the LiDAR's height.
type sensorFrameSource struct {
	sensor.Source
	height float32
}

func (s sensorFrameSource) FillPoints(seq uint64, dst []byte) (int, error) {
	n, err := s.Source.FillPoints(seq, dst)
	for i := range n {
		z := dst[i*sensor.PointStep+8:]
		binary.LittleEndian.PutUint32(z, math.Float32bits(math.Float32frombits(binary.LittleEndian.Uint32(z))-s.height))
	}
	return n, err
}

// obstacleClearances runs one frame of the synthetic scene at t = 1.5 s
// (the obstacle at y = +3, left) through a composed pipeline with o and
// the raster lidar gives, and returns the obstacle's sector, its
// mirror's, the model's clearances and the runtime to share.
func obstacleClearances(t *testing.T, o composedOptions, lidar lidarPose) (obs, mirror int, clear []float32, rt *infer.Runtime) {
	t.Helper()
	var err error
	if o.bev, err = bevConfig(infer.ReferenceConfig(), lidar); err != nil {
		t.Fatal(err)
	}
	c := newComposedWith(t, o)
	const seq = 45 // t = 1.5 s at 30 Hz
	var h handles.Handle
	c.step(t, seq, &h)
	if n := c.rec.Count(telemetry.FramesProcessed); n != 1 {
		t.Fatalf("%d frames processed, want 1", n)
	}
	ob := c.src.Truth(seq).Obstacle.Center
	obs = min(max(int((57.29577951308232*math.Atan2(ob.Y, ob.X)+40)/10+0.5), 0), 8)
	return obs, 8 - obs, append([]float32(nil), c.sess.Clearance()...), c.rt
}

// A cloud in the sensor's frame, from a LiDAR 1.73 m up (KITTI's), with
// --lidar-height 1.73: the model sees the 1 m obstacle as it does in the
// robot-frame cloud. Without the flag (the ground taken at the sensor's
// z = 0, as the agent always did) the obstacle's top is 0.73 m below
// that "ground", its cells read 0 m tall, and the model sees no obstacle:
// the robot would drive into it.
func TestLidarHeightPutsTheGroundUnderTheSensor(t *testing.T) {
	const mount = 1.73
	synth := sensor.SyntheticConfig{LidarHeight: mount}
	var rt *infer.Runtime // one per process
	clearances := func(t *testing.T, sensorFrame bool, lidarHeight float32) (obs, mirror int, clear []float32) {
		t.Helper()
		o := composedOptions{synth: synth, watchdog: slowStepWatchdog, rt: rt}
		if sensorFrame {
			o.wrap = func(s sensor.Source) sensor.Source { return sensorFrameSource{s, mount} }
		}
		obs, mirror, clear, rt = obstacleClearances(t, o, lidarPose{height: lidarHeight})
		return obs, mirror, clear
	}
	obs, mirror, robotFrame := clearances(t, false, 0)
	if !(robotFrame[obs] < robotFrame[mirror]) {
		t.Fatalf("robot-frame cloud: clearance %v in the obstacle's sector %d, %v in its mirror %d; want lower", robotFrame[obs], obs, robotFrame[mirror], mirror)
	}
	_, _, withHeight := clearances(t, true, mount)
	for k := range robotFrame {
		if math.Abs(float64(withHeight[k]-robotFrame[k])) > 1e-3 {
			t.Errorf("sensor-frame cloud with --lidar-height %g: clearances %.3f, want the robot frame's %.3f", mount, withHeight, robotFrame)
			break
		}
	}
	// The control: the same cloud with the ground at the sensor.
	_, _, without := clearances(t, true, 0)
	if without[obs] != without[mirror] {
		t.Errorf("control: sensor-frame cloud without --lidar-height: clearance %v in the obstacle's sector, %v in its mirror; the obstacle was expected to vanish (why the flag exists)", without[obs], without[mirror])
	}
	t.Logf("clearance, obstacle sector %d / mirror %d: robot frame %.2f / %.2f, sensor frame with --lidar-height %.2f / %.2f, without %.2f / %.2f",
		obs, mirror, robotFrame[obs], robotFrame[mirror], withHeight[obs], withHeight[mirror], without[obs], without[mirror])
}

// A --model-config for the embedded reference model (no --model) must
// describe that model: reference.json as it is, or with its inputs
// reordered, passes; a raster, image normalisation or sector headings of
// another model are refused, naming what differs. The agent used to run
// the reference model on such a raster: with min_x_m -12.8 it saw what
// lies behind the robot where it looks ahead, and drove straight into a
// box 5 m ahead (found by trying it on a replayed recording).
func TestModelConfigForTheEmbeddedModel(t *testing.T) {
	ref, err := os.ReadFile(filepath.Join("..", "models", "reference.json"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		from string // "" keeps reference.json as it is
		to   string
		want []string // nil: accepted
	}{
		{"reference.json itself", "", "", nil},
		{"cell_m written out as its default", `"cell_m": 0.2`, `"cell_m": 0.2, "min_x_m": 0, "max_height_m": 3`, nil},
		{"the raster centred on the robot", `"cell_m": 0.2`, `"cell_m": 0.2, "min_x_m": -12.8`, []string{"cfg.json", "from x = -12.8 m", "from x = 0 m", "--model"}},
		{"heights to 2 m", `"cell_m": 0.2`, `"cell_m": 0.2, "max_height_m": 2`, []string{"heights to 2 m", "heights to 3 m"}},
		{"cells of 0.1 m", `"cell_m": 0.2`, `"cell_m": 0.1`, []string{"cells of 0.1 m"}},
		{"another normalisation", `"std": [1, 1, 1]`, `"std": [0.5, 0.5, 0.5]`, []string{"image preprocessing"}},
		{"BGR", `"color": "rgb"`, `"color": "bgr"`, []string{"image preprocessing"}},
		{"other headings", `-40.0, -30.0`, `-45.0, -30.0`, []string{"sector_headings_deg [-45 -30"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			text := string(ref)
			if tt.from != "" {
				if !strings.Contains(text, tt.from) {
					t.Fatalf("reference.json has no %q; fix the test", tt.from)
				}
				text = strings.Replace(text, tt.from, tt.to, 1)
			}
			m, err := infer.ParseConfig([]byte(text), "cfg.json")
			if err != nil {
				t.Fatal(err)
			}
			wantRefusal(t, describesTheReferenceModel(m, referenceFor(NodeConfig{})), tt.want)
		})
	}
}

// tiltedFrameSource gives the synthetic scene's clouds as a LiDAR mounted
// at m reports them: every robot-frame point p becomes Rᵀ(p − T), T with
// the LiDAR's height as z.
type tiltedFrameSource struct {
	sensor.Source
	tf voxel.Transform
}

func (s tiltedFrameSource) FillPoints(seq uint64, dst []byte) (int, error) {
	n, err := s.Source.FillPoints(seq, dst)
	for i := range n {
		p := dst[i*sensor.PointStep:]
		get := func(o int) float64 { return float64(math.Float32frombits(binary.LittleEndian.Uint32(p[o:]))) }
		x, y, z := s.tf.ApplyInverse(get(0), get(4), get(8))
		for o, v := range map[int]float64{0: x, 4: y, 8: z} {
			binary.LittleEndian.PutUint32(p[o:], math.Float32bits(float32(v)))
		}
	}
	return n, err
}

// A LiDAR 1.73 m up, 0.45 m ahead of the robot's origin and 0.12 m to its
// right, pitched down 8°, rolled 1.5° and turned 12° left: with
// --lidar-height, --lidar-xy and --lidar-rpy the model sees what it sees
// in the robot-frame cloud (the obstacle's sector closer than its
// mirror, each sector's clearance within a cell of the robot frame's).
// With the height alone the road ahead rises into a wall of obstacles
// and every sector reads blocked.
func TestLidarMountPutsTheCloudInTheRobotFrame(t *testing.T) {
	const height = 1.73
	mount := voxel.Mount{X: 0.45, Y: -0.12, Roll: 1.5 * math.Pi / 180, Pitch: 8 * math.Pi / 180, Yaw: 12 * math.Pi / 180}
	withHeight := mount
	withHeight.Z = height
	synth := sensor.SyntheticConfig{LidarHeight: height}
	var rt *infer.Runtime // one per process
	clearances := func(t *testing.T, tilted bool, lidar lidarPose) (obs, mirror int, clear []float32) {
		t.Helper()
		o := composedOptions{synth: synth, watchdog: slowStepWatchdog, rt: rt}
		if tilted {
			o.wrap = func(s sensor.Source) sensor.Source { return tiltedFrameSource{s, withHeight.Transform()} }
		}
		obs, mirror, clear, rt = obstacleClearances(t, o, lidar)
		return obs, mirror, clear
	}
	obs, mirror, robot := clearances(t, false, lidarPose{})
	_, _, mounted := clearances(t, true, lidarPose{height: height, mount: mount})
	_, _, heightOnly := clearances(t, true, lidarPose{height: height})
	t.Logf("clearance, obstacle sector %d / mirror %d: robot frame %.2f / %.2f, mounted %.2f / %.2f, height only %.2f / %.2f",
		obs, mirror, robot[obs], robot[mirror], mounted[obs], mounted[mirror], heightOnly[obs], heightOnly[mirror])
	t.Logf("all sectors: robot frame %.2f, mounted %.2f, height only %.2f", robot, mounted, heightOnly)
	if !(mounted[obs] < mounted[mirror]) {
		t.Errorf("mounted: clearance %v in the obstacle's sector, %v in its mirror; want lower", mounted[obs], mounted[mirror])
	}
	for k := range robot {
		if math.Abs(float64(mounted[k]-robot[k])) > 0.2 {
			t.Errorf("mounted: sector %d clearance %.2f, the robot frame's %.2f: want within 0.2 m (a cell)", k, mounted[k], robot[k])
		}
	}
	far := 0
	for k := range robot {
		if math.Abs(float64(heightOnly[k]-robot[k])) > 1 {
			far++
		}
	}
	if far < 3 {
		t.Errorf("control: with the height alone only %d sectors' clearances are a metre off the robot frame's: the tilt was expected to show (why --lidar-rpy exists)", far)
	}
}

// With --lidar-only the embedded model is the LiDAR-only variant, with
// --planar-lidar the planar-LiDAR one: its own config passes, a raster of
// another model is refused naming that model, and without either flag a
// config with no image input is refused with the flag that runs it.
func TestModelConfigForTheEmbeddedLidarOnlyModels(t *testing.T) {
	lidar, err := os.ReadFile(filepath.Join("..", "models", "reference_lidar.json"))
	if err != nil {
		t.Fatal(err)
	}
	scan, err := os.ReadFile(filepath.Join("..", "models", "reference_scan.json"))
	if err != nil {
		t.Fatal(err)
	}
	lidarOnly, planar := NodeConfig{LidarOnly: true}, NodeConfig{PlanarLidar: true}
	tests := []struct {
		name string
		text string
		cfg  NodeConfig
		want []string // nil: accepted
	}{
		{"reference_lidar.json with --lidar-only", string(lidar), lidarOnly, nil},
		{"reference_lidar.json without --lidar-only", string(lidar), NodeConfig{}, []string{"cfg.json", "no image input", "--lidar-only"}},
		{"another raster", strings.Replace(string(lidar), `"cell_m": 0.2`, `"cell_m": 0.2, "min_x_m": -12.8`, 1), lidarOnly,
			[]string{"from x = -12.8 m", "LiDAR-only reference model"}},
		{"reference_scan.json with --planar-lidar", string(scan), planar, nil},
		{"reference_scan.json with --planar-lidar --lidar-only", string(scan), NodeConfig{PlanarLidar: true, LidarOnly: true}, nil},
		{"another raster, --planar-lidar", strings.Replace(string(scan), `"cell_m": 0.2`, `"cell_m": 0.1`, 1), planar,
			[]string{"cells of 0.1 m", "planar-LiDAR reference model"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := infer.ParseConfig([]byte(tt.text), "cfg.json")
			if err != nil {
				t.Fatal(err)
			}
			wantRefusal(t, describesTheReferenceModel(m, referenceFor(tt.cfg)), tt.want)
		})
	}
}

// referenceFor picks the embedded model by the flags, planar first: the
// planar-LiDAR model takes no image, as the LiDAR-only one.
func TestReferenceForPicksTheEmbeddedModel(t *testing.T) {
	for _, tt := range []struct {
		cfg  NodeConfig
		file string
	}{
		{NodeConfig{}, "reference.onnx"},
		{NodeConfig{LidarOnly: true}, "reference_lidar.onnx"},
		{NodeConfig{PlanarLidar: true}, "reference_scan.onnx"},
		{NodeConfig{PlanarLidar: true, LidarOnly: true}, "reference_scan.onnx"},
	} {
		ref := referenceFor(tt.cfg)
		want, err := os.ReadFile(filepath.Join("..", "models", tt.file))
		if err != nil {
			t.Fatal(err)
		}
		if ref.file != tt.file || !bytes.Equal(ref.onnx(), want) {
			t.Errorf("%+v: %s (%d bytes), want %s's %d bytes", tt.cfg, ref.file, len(ref.onnx()), tt.file, len(want))
		}
	}
}

// wantRefusal checks err: nil when want is nil, else an error naming each
// of want.
func wantRefusal(t *testing.T, err error, want []string) {
	t.Helper()
	if want == nil {
		if err != nil {
			t.Fatalf("refused: %v", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("accepted; want an error naming %q", want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not name %q", err, w)
		}
	}
}

// TestMaxObstacleHeightTopsTheCrop: --max-obstacle-height puts the voxel
// filter's crop top at the robot's height above the ground, in the
// clouds' frame (the LiDAR 1.73 m up: 2 m above the ground is 0.27 m
// above the sensor); without it the top is CropFarZ away.
func TestMaxObstacleHeightTopsTheCrop(t *testing.T) {
	bev, err := bevConfig(infer.ReferenceConfig(), lidarPose{height: 1.73})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		robot float32
		top   float32
	}{{0, -1.73 + voxel.CropFarZ}, {2, 0.27}} {
		fcfg, err := filterConfig(NodeConfig{Leaf: 0.2, MaxObstacleHeight: tc.robot}, bev)
		if err != nil {
			t.Fatal(err)
		}
		if got := fcfg.Crop.Max[2]; math.Abs(float64(got-tc.top)) > 1e-5 {
			t.Errorf("--max-obstacle-height %v: crop top %v, want %v", tc.robot, got, tc.top)
		}
	}
}

// TestMaxObstacleHeightIsExactUnderATiltedLiDAR: with a LiDAR that
// pitches or rolls, the crop box can only bound the tilted ceiling, so
// the filter gets a per-point ceiling at the robot's height above the
// ground, in the robot frame; a level or only yawed LiDAR's box top is
// the ceiling itself and needs none. The filter then keeps a point just
// under the ceiling far ahead and drops one just above it.
func TestMaxObstacleHeightIsExactUnderATiltedLiDAR(t *testing.T) {
	for _, tc := range []struct {
		name    string
		mount   voxel.Mount
		perPnt  bool
		farX    float64
		ceiling float32
	}{
		{"level", voxel.Mount{}, false, 20, 1.2},
		{"yawed", voxel.Mount{Yaw: 0.4}, false, 20, 1.2},
		{"pitched down 10°", voxel.Mount{Pitch: 10 * math.Pi / 180}, true, 20, 1.2},
		{"rolled 5°", voxel.Mount{X: 0.3, Roll: 5 * math.Pi / 180}, true, 20, 1.2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bev, err := bevConfig(infer.ReferenceConfig(), lidarPose{height: 0.5, mount: tc.mount})
			if err != nil {
				t.Fatal(err)
			}
			fcfg, err := filterConfig(NodeConfig{Leaf: 0.2, MaxObstacleHeight: tc.ceiling}, bev)
			if err != nil {
				t.Fatal(err)
			}
			if (fcfg.Ceiling != nil) != tc.perPnt {
				t.Fatalf("per-point ceiling %v, want one: %t", fcfg.Ceiling, tc.perPnt)
			}
			if fcfg.Ceiling != nil && math.Abs(float64(*fcfg.Ceiling-(bev.GroundZ+tc.ceiling))) > 1e-6 {
				t.Fatalf("ceiling at z %v, want the ground's %v plus %v", *fcfg.Ceiling, bev.GroundZ, tc.ceiling)
			}
			// Two points ahead within the raster's window, 5 cm under
			// and over the ceiling in the robot frame, in the clouds'
			// frame.
			tf := tc.mount.Transform()
			var cloud []byte
			for _, dz := range []float64{-0.05, 0.05} {
				x, y, z := tf.ApplyInverse(tc.farX, 1, float64(bev.GroundZ+tc.ceiling)+dz)
				for _, v := range []float32{float32(x), float32(y), float32(z), 1} {
					cloud = binary.LittleEndian.AppendUint32(cloud, math.Float32bits(v))
				}
			}
			f, err := voxel.NewFilter(fcfg, 2)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			out := voxel.NewPoints(2)
			if err := f.Run(voxel.XYZI(cloud, 2), out); err != nil {
				t.Fatal(err)
			}
			if len(out.Top) != 1 || math.Abs(float64(out.Top[0]-(bev.GroundZ+tc.ceiling-0.05))) > 1e-5 {
				t.Fatalf("kept tops %v, want only the point under the ceiling, at %v", out.Top, bev.GroundZ+tc.ceiling-0.05)
			}
		})
	}
}
