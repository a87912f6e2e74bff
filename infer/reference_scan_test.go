package infer

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/zerohop/zerohop/models"
	"github.com/zerohop/zerohop/voxel"
)

// Behaviour of the planar-scan variant (models/reference_scan.onnx, see
// models/MODEL_CARD.md): the LiDAR-only variant with every occupied cell an
// obstacle, whatever its height, for a 2D laser scanner.

func newScanSessions(t *testing.T) (scan, lidar *Session) {
	t.Helper()
	rt := requireRuntime(t)
	cpu := SessionOptions{Providers: []string{ProviderCPU}}
	scan, err := NewSession(rt, "../models/reference_scan.onnx", ReferenceScanConfig(), cpu)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { scan.Close() })
	lidar, err = NewSession(rt, "../models/reference_lidar.onnx", ReferenceLidarConfig(), cpu)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lidar.Close() })
	return scan, lidar
}

// The embedded config parses, describes the LiDAR-only variant's tensors
// (one bev input, no image), and matches the model's own.
func TestReferenceScanConfig(t *testing.T) {
	cfg := ReferenceScanConfig()
	if !strings.Contains(cfg.Source(), "reference_scan.json") {
		t.Fatalf("source %q does not name reference_scan.json", cfg.Source())
	}
	bev, ok := cfg.Input(TensorBEV)
	if !ok || bev.Name != "bev" || !reflect.DeepEqual(bev.Shape, []int64{1, 3, 128, 128}) || bev.CellSizeM() != 0.2 || bev.MinXM != 0 {
		t.Fatalf("bev input: %+v", bev)
	}
	if in, ok := cfg.Input(TensorImage); ok {
		t.Fatalf("the planar-scan config has an image input: %+v", in)
	}
	for _, role := range []OutputRole{RoleSectorScores, RoleClearance} {
		if out, ok := cfg.Output(role); !ok || out.Name != string(role) || !reflect.DeepEqual(out.Shape, []int64{1, 9}) {
			t.Fatalf("%s output: %+v, %v", role, out, ok)
		}
	}
	lidar := ReferenceLidarConfig()
	if !reflect.DeepEqual(cfg.Inputs, lidar.Inputs) || !reflect.DeepEqual(cfg.Outputs, lidar.Outputs) ||
		!reflect.DeepEqual(cfg.SectorHeadingsDeg, lidar.SectorHeadingsDeg) {
		t.Fatalf("planar-scan config %+v differs from the LiDAR-only variant's %+v", cfg, lidar)
	}

	rt := requireRuntime(t)
	cpu := SessionOptions{Providers: []string{ProviderCPU}}
	s, err := NewSessionFromBytes(rt, models.ReferenceScanFile, models.ReferenceScanONNX(), cfg, cpu)
	if err != nil {
		t.Fatalf("the embedded model does not match its config: %v", err)
	}
	defer s.Close()
	if s.Image() != nil || len(s.BEV()) != 3*128*128 || len(s.Scores()) != 9 || len(s.Clearance()) != 9 {
		t.Fatalf("session tensors: bev %d, image %d, scores %d, clearance %d", len(s.BEV()), len(s.Image()), len(s.Scores()), len(s.Clearance()))
	}
	// The camera model's config does not describe it (no image input).
	if _, err := NewSessionFromBytes(rt, models.ReferenceScanFile, models.ReferenceScanONNX(), ReferenceConfig(), cpu); !errors.Is(err, ErrModelMismatch) || !strings.Contains(err.Error(), `"image"`) {
		t.Fatalf("the camera model's config for the planar-scan model: %v, want a mismatch naming the image input", err)
	}
}

// Where every occupied cell is taller than 0.2 m the two variants agree
// exactly: the scan model differs only in the obstacle test.
func TestReferenceScanEqualsLidarOnTallObstacles(t *testing.T) {
	scan, lidar := newScanSessions(t)
	x30, y30 := polar(5, 30)
	scattered := newRefScene()
	// A deterministic scatter of posts of heights 0.25..2.9 m over the
	// whole raster (near and beyond 8 m, both sides).
	seed := uint32(12345)
	for range 40 {
		seed = seed*1664525 + 1013904223
		r := int(seed>>8) % refGrid
		seed = seed*1664525 + 1013904223
		c := int(seed>>8) % refGrid
		seed = seed*1664525 + 1013904223
		h := 0.25 + float32((seed>>8)%1000)/1000*2.65
		x, y := refCellCenter(r, c)
		scattered.block(x-0.1, x+0.1, y-0.1, y+0.1, h)
	}
	scenes := []struct {
		name  string
		scene func(refScene)
	}{
		{"empty", func(refScene) {}},
		{"a tall block ahead-left", func(s refScene) { s.block(3.8, 4.6, 1.6, 2.6, 0.5) }},
		{"a post 5 m away at 30 degrees left", func(s refScene) { s.block(x30-0.1, x30+0.1, y30-0.1, y30+0.1, 1) }},
		{"a wall straight ahead at 2 m", func(s refScene) { s.block(1.9, 2.1, -0.5, 0.6, 1) }},
		{"a block just taller than 0.2 m ahead-right", func(s refScene) { s.block(1, 1.6, -1.5, -0.5, 0.21) }},
		{"tall obstacles beyond 8 m", func(s refScene) { s.block(9, 12, -3, 3, 2) }},
		{"40 scattered posts", func(s refScene) { copy(s.bev, scattered.bev) }},
	}
	for _, tc := range scenes {
		scene := newRefScene()
		tc.scene(scene)
		wantS, wantC := refOutputs(t, lidar, scene)
		gotS, gotC := refOutputs(t, scan, scene)
		if !reflect.DeepEqual(gotS, wantS) || !reflect.DeepEqual(gotC, wantC) {
			t.Fatalf("%s: planar-scan scores %v clearance %v, the LiDAR-only model's %v and %v", tc.name, gotS, gotC, wantS, wantC)
		}
		if tc.name != "empty" && tc.name != "tall obstacles beyond 8 m" && minOf(wantC) >= 8 {
			t.Fatalf("%s: the scene changes no clearance (%v): the comparison shows nothing", tc.name, wantC)
		}
	}
}

// A low occupied cell is an obstacle to the planar-scan model, not to the
// LiDAR-only one; the height channel alone (an unoccupied cell) is nothing.
func TestReferenceScanObstacleIsOccupancyAlone(t *testing.T) {
	scan, lidar := newScanSessions(t)
	for _, height := range []float32{0.1, 0} {
		scene := newRefScene()
		scene.block(1.9, 2.1, -0.5, 0.6, height) // a low wall straight ahead at 2 m
		scores, clearance := refOutputs(t, scan, scene)
		if c := clearance[4]; !(c >= 1.8 && c <= 2.2) || c != minOf(clearance) {
			t.Fatalf("height %v m: planar-scan clearance %v, want the forward sector's (4) nearest, 1.8 to 2.2 m", height, clearance)
		}
		for k := range clearance {
			if !near(clearance[k], clearance[refSectors-1-k]) || !near(scores[k], clearance[k]/8) {
				t.Fatalf("height %v m: planar-scan scores %v, clearance %v: want mirrored, score = clearance / 8", height, scores, clearance)
			}
		}
		_, lc := refOutputs(t, lidar, scene)
		if maxOf(lc) != 8 || minOf(lc) != 8 {
			t.Fatalf("height %v m: LiDAR-only clearance %v, want 8 m everywhere (the cells are below 0.2 m)", height, lc)
		}
	}

	// Height without occupancy: not an obstacle (channel 0 decides); the
	// intensity channel is not read either.
	scene := newRefScene()
	scene.block(1.9, 2.1, -0.5, 0.6, 1)
	plane := refGrid * refGrid
	clear(scene.bev[:plane])
	for k := 2 * plane; k < 3*plane; k++ {
		scene.bev[k] = 100
	}
	if _, clearance := refOutputs(t, scan, scene); minOf(clearance) != 8 {
		t.Fatalf("height and intensity without occupancy: clearance %v, want 8 m everywhere", clearance)
	}
	// Occupancy at or below 0.5 is free.
	scene = newRefScene()
	scene.block(1.9, 2.1, -0.5, 0.6, 1)
	for k := range plane {
		scene.bev[k] *= 0.5
	}
	if _, clearance := refOutputs(t, scan, scene); minOf(clearance) != 8 {
		t.Fatalf("occupancy 0.5: clearance %v, want 8 m everywhere", clearance)
	}
}

// End to end through voxel.BEV: a 2D scanner mounted 0.15 m above the
// floor sees a wall 3 m ahead in its scan plane. The planar-scan model
// stops for it; the LiDAR-only model, for which every return is 0.15 m
// tall, sees nothing.
func TestReferenceScanSeesALowScannersWall(t *testing.T) {
	scan, lidar := newScanSessions(t)
	const scannerHeight = 0.15
	raster, err := voxel.NewBEV(voxel.BEVConfig{GroundZ: -scannerHeight}) // the cloud in the scanner's frame
	if err != nil {
		t.Fatal(err)
	}
	// sensor_msgs/LaserScan, 0.25 degree steps over ±60 degrees, turned
	// into points in the scan plane (z = 0): a wall at x = 3 m.
	pts := &voxel.Points{}
	for a := -60.0; a <= 60; a += 0.25 {
		rad := a * math.Pi / 180
		r := 3 / math.Cos(rad)
		pts.P = append(pts.P, voxel.Point{X: float32(r * math.Cos(rad)), Y: float32(r * math.Sin(rad)), I: 1})
	}
	for _, s := range []*Session{scan, lidar} {
		if err := raster.Fill(pts, s.BEV()); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Run(); err != nil {
			t.Fatal(err)
		}
	}
	c := scan.Clearance()
	if !(c[4] >= 2.9 && c[4] <= 3.2) || c[4] != minOf(c) {
		t.Fatalf("planar-scan clearance %v: want the forward sector nearest, at the wall (2.9 to 3.2 m)", c)
	}
	for k := range c {
		if !(c[k] < 8) {
			t.Fatalf("planar-scan clearance %v: the wall spans every sector", c)
		}
	}
	if lc := lidar.Clearance(); minOf(lc) != 8 {
		t.Fatalf("LiDAR-only clearance %v: want 8 m everywhere (returns 0.15 m above the floor are below its 0.2 m test)", lc)
	}
}
