package agent

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/zerohop/zerohop/infer"
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
// its cell_m. The agent used to build 128 × 128 cells of 0.2 m whatever
// the config said (cell_m was checked and then ignored).
func TestBEVConfigFromTheModelConfig(t *testing.T) {
	tests := []struct {
		name    string
		config  string
		want    voxel.BEVConfig
		wantErr []string
	}{
		{"reference", "", voxel.BEVConfig{H: 128, W: 128, Cell: 0.2}, nil},
		{"64 × 96 cells of 0.5 m", modelConfigJSON(64, 96, "0.5"), voxel.BEVConfig{H: 64, W: 96, Cell: 0.5}, nil},
		{"cell_m left out", strings.Replace(modelConfigJSON(32, 32, "0"), `, "cell_m": 0`, "", 1), voxel.BEVConfig{H: 32, W: 32, Cell: 0.2}, nil},
		// float32 rounds it to 0, which voxel.BEV would take as its default.
		{"cell too small for float32", modelConfigJSON(128, 128, "1e-50"), voxel.BEVConfig{}, []string{"cfg.json", `"bev"`, "cell_m 1e-50", "0.001 to 100"}},
		{"cell of a kilometre", modelConfigJSON(128, 128, "1000"), voxel.BEVConfig{}, []string{"cell_m 1000"}},
		{"no bev input", `{"inputs": [{"name": "image", "tensor": "image", "shape": [1, 3, 144, 256]}],
  "outputs": [{"name": "sector_scores", "role": "sector_scores", "shape": [1, 9]}],
  "sector_headings_deg": [-40, -30, -20, -10, 0, 10, 20, 30, 40]}`, voxel.BEVConfig{}, []string{"cfg.json", `no input with tensor "bev"`}},
		{"wider than a raster can be", modelConfigJSON(1, 20000, "0.2"), voxel.BEVConfig{}, []string{"cfg.json", "1 × 20000 cells"}},
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
			got, err := bevConfig(m)
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
			ahead, halfWide := float32(tt.want.H)*tt.want.Cell, float32(tt.want.W)*tt.want.Cell/2
			if c := fcfg.Crop; c == nil || c.Max[0] != ahead+0.4 || c.Min[1] != -halfWide-0.4 || c.Max[1] != halfWide+0.4 {
				t.Errorf("crop %+v, want x up to %g and y within ±%g (two 0.2 m leaves beyond the raster)", fcfg.Crop, ahead+0.4, halfWide+0.4)
			}
		})
	}
}

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
			for _, c := range []string{"frames_dropped", "watchdog_stage_failure_incidents_total"} {
				if n, ok := lat.Counters[c]; !ok || n != 0 {
					t.Errorf("/latency counter %s = %v (present %v), want 0: %+v", c, n, ok, lat.Counters)
				}
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
