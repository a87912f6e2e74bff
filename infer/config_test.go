package infer

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReferenceConfig(t *testing.T) {
	cfg := ReferenceConfig()
	bev, ok := cfg.Input(TensorBEV)
	if !ok || bev.Name != "bev" || elements(bev.Shape) != 3*128*128 || bev.CellSizeM() != 0.2 {
		t.Fatalf("bev input: %+v", bev)
	}
	p, err := cfg.PreprocessParams()
	if err != nil || p.Width != 256 || p.Height != 144 || p.Order != ColorRGB || p.Std != [3]float32{1, 1, 1} {
		t.Fatalf("image params: %+v, %v", p, err)
	}
	if out, ok := cfg.Output(RoleSectorScores); !ok || out.Name != "sector_scores" {
		t.Fatalf("sector_scores output: %+v", out)
	}
	h := cfg.SectorHeadingsDeg
	if len(h) != 9 || h[0] != -40 || h[4] != 0 || h[8] != 40 {
		t.Fatalf("headings %v: want -40..40 in steps of 10, index 0 rightmost", h)
	}
}

func TestLoadConfigFile(t *testing.T) {
	cfg, err := LoadConfig("testdata/bgr_model_config.json")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cfg.Input(TensorBEV); ok {
		t.Fatal("config has no bev input, Input(bev) found one")
	}
	p, err := cfg.PreprocessParams()
	if err != nil {
		t.Fatal(err)
	}
	want := PreprocessParams{Width: 224, Height: 224, Order: ColorBGR,
		Mean: [3]float32{0.406, 0.456, 0.485}, Std: [3]float32{0.225, 0.224, 0.229}}
	if p != want {
		t.Fatalf("params %+v, want %+v", p, want)
	}
	if _, ok := cfg.Output(RoleClearance); ok {
		t.Fatal("config has no clearance output, Output(clearance) found one")
	}
	_, err = LoadConfig("testdata/no-such-config.json")
	if !errors.Is(err, ErrConfig) || !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "no-such-config.json") {
		t.Fatalf("missing file: %v", err)
	}
}

func TestParseConfigRejects(t *testing.T) {
	ref := string(mustRead(t, "../models/reference.json"))
	cases := []struct {
		name string
		json string
		want string // in the error text
	}{
		{"not JSON", `{"inputs": [`, "unexpected EOF"},
		{"an unknown field (a typo)", strings.Replace(ref, `"cell_m"`, `"cell_size"`, 1), `unknown field "cell_size"`},
		{"trailing data", ref + `{}`, "trailing data"},
		{"no inputs", `{"inputs": [], "outputs": [{"name": "s", "role": "sector_scores", "shape": [1, 1]}], "sector_headings_deg": [0]}`, "no inputs"},
		{"no headings", `{"inputs": [{"name": "b", "tensor": "bev", "shape": [1, 3, 8, 8]}], "outputs": [{"name": "s", "role": "sector_scores", "shape": [1, 0]}], "sector_headings_deg": []}`, "sector_headings_deg: empty"},
		{"an unknown tensor kind", strings.Replace(ref, `"tensor": "bev"`, `"tensor": "lidar"`, 1), `tensor "lidar"`},
		{"two image inputs", strings.Replace(ref, `"tensor": "bev"`, `"tensor": "image"`, 1), `second "image" input`},
		{"a 3-dim shape", strings.Replace(ref, `[1, 3, 128, 128]`, `[3, 128, 128]`, 1), `inputs[0] "bev": shape [3 128 128]`},
		{"batch 2", strings.Replace(ref, `[1, 3, 128, 128]`, `[2, 3, 128, 128]`, 1), `want [1, 3, H, W]`},
		{"a huge shape", strings.Replace(ref, `[1, 3, 128, 128]`, `[1, 3, 100000, 100000]`, 1), "more than"},
		// H × W × 3 wraps int64 to a negative number (it once passed, and
		// the session then panicked in make).
		{"a shape whose size overflows", strings.Replace(ref, `[1, 3, 144, 256]`, `[1, 3, 4611686018427387904, 2]`, 1), "more than"},
		{"a shape whose size wraps to 0", strings.Replace(ref, `[1, 3, 144, 256]`, `[1, 3, 4294967296, 4294967296]`, 1), "more than"},
		{"a denormal std (Inf input)", strings.Replace(ref, `"std": [1, 1, 1]`, `"std": [1e-39, 1, 1]`, 1), "not a finite float32"},
		{"a huge mean (Inf input)", strings.Replace(strings.Replace(ref, `"mean": [0, 0, 0]`, `"mean": [0, 1e38, 0]`, 1), `"std": [1, 1, 1]`, `"std": [1, 0.01, 1]`, 1), "not a finite float32"},
		{"a negative cell size", strings.Replace(ref, `"cell_m": 0.2`, `"cell_m": -1`, 1), "cell_m -1"},
		{"colour on a bev input", strings.Replace(ref, `"cell_m": 0.2`, `"color": "rgb"`, 1), "image inputs only"},
		{"a raster starting a kilometre and more behind", strings.Replace(ref, `"cell_m": 0.2`, `"cell_m": 0.2, "min_x_m": -1e4`, 1), "min_x_m -10000: want metres from -1000 to 1000"},
		{"a negative height cap", strings.Replace(ref, `"cell_m": 0.2`, `"cell_m": 0.2, "max_height_m": -3`, 1), "max_height_m -3"},
		{"min_x_m on an image input", strings.Replace(ref, `"color": "rgb"`, `"color": "rgb", "min_x_m": -2`, 1), "apply to bev inputs only"},
		{"max_height_m on an image input", strings.Replace(ref, `"color": "rgb"`, `"color": "rgb", "max_height_m": 2`, 1), "apply to bev inputs only"},
		{"an unknown colour order", strings.Replace(ref, `"color": "rgb"`, `"color": "yuv"`, 1), `color "yuv"`},
		{"two means", strings.Replace(ref, `"mean": [0, 0, 0]`, `"mean": [0, 0]`, 1), "want 3 values"},
		{"a zero std", strings.Replace(ref, `"std": [1, 1, 1]`, `"std": [1, 0, 1]`, 1), "values > 0"},
		{"an unknown output role", strings.Replace(ref, `"role": "clearance"`, `"role": "speed"`, 1), `role "speed"`},
		{"no sector_scores output", strings.Replace(ref, `"role": "sector_scores"`, `"role": "clearance"`, 1), `no output with role "sector_scores"`},
		{"an output name reused", strings.Replace(ref, `"name": "clearance"`, `"name": "bev"`, 1), `name already used by inputs[0]`},
		{"an output size that does not match the headings", strings.Replace(ref, `"shape": [1, 9]}`, `"shape": [1, 8]}`, 1), "want [1, 9]"},
		{"headings out of order", strings.Replace(ref, `-40.0, -30.0`, `-30.0, -40.0`, 1), "must increase"},
		{"a heading beyond 180", strings.Replace(ref, `40.0]`, `400.0]`, 1), "[-180, 180]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.json == ref {
				t.Fatal("the case did not change the reference config; fix the test")
			}
			_, err := ParseConfig([]byte(tc.json), "case.json")
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), `"case.json"`) {
				t.Fatalf("got %v\nwant ErrConfig naming case.json and containing %q", err, tc.want)
			}
		})
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.FromSlash(path))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// The example in models/README.md must stay a valid config.
func TestReadmeExampleConfigParses(t *testing.T) {
	readme := string(mustRead(t, "../models/README.md"))
	start := strings.Index(readme, "```json\n")
	end := strings.Index(readme[start+1:], "\n```")
	if start < 0 || end < 0 {
		t.Fatal("models/README.md has no ```json block")
	}
	cfg, err := ParseConfig([]byte(readme[start+len("```json\n"):start+1+end]), "models/README.md example")
	if err != nil {
		t.Fatal(err)
	}
	if in, ok := cfg.Input(TensorImage); !ok || in.Color != "bgr" || len(cfg.SectorHeadingsDeg) != 5 {
		t.Fatalf("parsed %+v", cfg)
	}
}
