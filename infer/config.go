package infer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/zerohop/zerohop/models"
)

// TensorKind says which zerohop tensor feeds a model input.
type TensorKind string

const (
	// TensorBEV is the bird's-eye-view raster [1,3,H,W] from voxel/:
	// channel 0 occupancy (0/1), 1 max height above ground (m), 2 mean
	// intensity; row 0 farthest ahead, last row at the robot, column index
	// growing to the robot's right, straight ahead on the border of columns
	// W/2-1 and W/2 (voxel.BEV.CellCenter).
	TensorBEV TensorKind = "bev"
	// TensorImage is the forward camera image [1,3,H,W], float32 CHW,
	// x/255 then (x-mean)/std, channels in the config's color order.
	TensorImage TensorKind = "image"
)

// OutputRole says how the planner reads a model output.
type OutputRole string

const (
	// RoleSectorScores is [1,S]: one score per steering sector, higher is
	// better; sector k steers at SectorHeadingsDeg[k].
	RoleSectorScores OutputRole = "sector_scores"
	// RoleClearance is [1,S]: free distance ahead per sector, in metres.
	RoleClearance OutputRole = "clearance"
)

// DefaultBEVCellM is the BEV cell size when a config gives none.
const DefaultBEVCellM = 0.2

// DefaultBEVMaxHeightM is the BEV height channel's cap when a config
// gives none.
const DefaultBEVMaxHeightM = 3.0

// maxBEVMinXM bounds min_x_m: a raster starting a kilometre or more from
// the robot is a typo, and float32 cell edges lose centimetres there.
const maxBEVMinXM = 1000.0

// maxTensorElements bounds one configured tensor (256 MiB of float32), so
// that a typo in a shape fails in validation rather than in an allocation.
const maxTensorElements = 64 << 20

// InputConfig binds one model input to a zerohop tensor.
type InputConfig struct {
	Name   string     `json:"name"`   // the model's input name
	Tensor TensorKind `json:"tensor"` // "bev" or "image"
	Shape  []int64    `json:"shape"`  // [1, 3, H, W]; fixed sizes (the model may leave dims dynamic)

	// bev only: cell size in metres (default 0.2); the x of the raster's
	// bottom edge in the robot frame, metres (default 0: the robot on the
	// bottom edge; negative shows the area behind it); the cap of the
	// height channel, metres above the ground (default 3). These are how
	// the model was trained; where the ground is in the cloud's frame is
	// the robot's, the agent's --lidar-height.
	CellM      float64 `json:"cell_m,omitempty"`
	MinXM      float64 `json:"min_x_m,omitempty"`
	MaxHeightM float64 `json:"max_height_m,omitempty"`

	// image only: channel order the model expects, "rgb" (default) or "bgr",
	// and per-channel normalisation applied after x/255, in that order:
	// (x/255 - mean[c]) / std[c]. Defaults: mean 0, std 1.
	Color string    `json:"color,omitempty"`
	Mean  []float32 `json:"mean,omitempty"`
	Std   []float32 `json:"std,omitempty"`
}

// OutputConfig binds one model output to a planner role.
type OutputConfig struct {
	Name  string     `json:"name"`  // the model's output name
	Role  OutputRole `json:"role"`  // "sector_scores" or "clearance"
	Shape []int64    `json:"shape"` // [1, S], S = len(SectorHeadingsDeg)
}

// ModelConfig tells zerohop how to feed a model and read its outputs. It is
// read from JSON (see models/README.md); ReferenceConfig describes the
// shipped reference model.
type ModelConfig struct {
	Inputs  []InputConfig  `json:"inputs"`
	Outputs []OutputConfig `json:"outputs"`
	// SectorHeadingsDeg[k] is sector k's heading in degrees, positive to the
	// left (ROS yaw), strictly increasing: index 0 is the rightmost sector.
	SectorHeadingsDeg []float64 `json:"sector_headings_deg"`

	source string // ParseConfig's source, for a model mismatch's message; "" for a literal
}

// ReferenceConfig returns the config of models/reference.onnx (embedded). It
// panics if the embedded config is invalid, which the package tests rule out.
func ReferenceConfig() ModelConfig {
	cfg, err := ParseConfig(models.ReferenceConfigJSON(), "models/reference.json (embedded)")
	if err != nil {
		panic(err)
	}
	return cfg
}

// ReferenceLidarConfig returns the config of models/reference_lidar.onnx
// (embedded): the reference model without its image input. It panics if
// the embedded config is invalid, which the package tests rule out.
func ReferenceLidarConfig() ModelConfig {
	cfg, err := ParseConfig(models.ReferenceLidarConfigJSON(), "models/reference_lidar.json (embedded)")
	if err != nil {
		panic(err)
	}
	return cfg
}

// ReferenceScanConfig returns the config of models/reference_scan.onnx
// (embedded): the reference model for a planar (2D) laser scanner, whose
// every occupied BEV cell is an obstacle. Its tensors, raster and headings
// are the LiDAR-only variant's (the two JSON files hold the same config),
// so a config that describes one describes the other. It panics if the
// embedded config is invalid, which the package tests rule out.
func ReferenceScanConfig() ModelConfig {
	cfg, err := ParseConfig(models.ReferenceScanConfigJSON(), "models/reference_scan.json (embedded)")
	if err != nil {
		panic(err)
	}
	return cfg
}

// LoadConfig reads and validates a JSON model config file.
func LoadConfig(path string) (ModelConfig, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return ModelConfig{}, fmt.Errorf("infer: read config: %w: %w", ErrConfig, err)
	}
	return ParseConfig(data, path)
}

// ParseConfig decodes and validates a JSON model config; source names it in
// errors. Unknown fields are errors, so that typos do not pass silently.
func ParseConfig(data []byte, source string) (ModelConfig, error) {
	var cfg ModelConfig
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		return ModelConfig{}, fmt.Errorf("infer: config %q: %w: %v", source, ErrConfig, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return ModelConfig{}, fmt.Errorf("infer: config %q: %w: trailing data after the JSON object", source, ErrConfig)
	}
	if err := cfg.Validate(); err != nil {
		return ModelConfig{}, fmt.Errorf("infer: config %q: %w", source, err)
	}
	cfg.source = source
	return cfg, nil
}

// Validate checks the config on its own (Session checks it against the
// model). Errors wrap ErrConfig and name the offending entry.
func (c ModelConfig) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrConfig}, args...)...))
	}
	if len(c.Inputs) == 0 {
		bad("no inputs")
	}
	names := map[string]string{}
	kinds := map[TensorKind]bool{}
	for i, in := range c.Inputs {
		where := fmt.Sprintf("inputs[%d] %q", i, in.Name)
		if in.Name == "" {
			bad("inputs[%d]: empty name", i)
		} else if prev, dup := names[in.Name]; dup {
			bad("%s: name already used by %s", where, prev)
		} else {
			names[in.Name] = where
		}
		switch in.Tensor {
		case TensorBEV, TensorImage:
			if kinds[in.Tensor] {
				bad("%s: a second %q input; at most one of each", where, in.Tensor)
			}
			kinds[in.Tensor] = true
		default:
			bad("%s: tensor %q: want %q or %q", where, in.Tensor, TensorBEV, TensorImage)
		}
		if err := checkShapeNCHW(in.Shape); err != nil {
			bad("%s: shape %v: %v", where, in.Shape, err)
		}
		switch in.Tensor {
		case TensorBEV:
			if in.CellM < 0 || math.IsNaN(in.CellM) || math.IsInf(in.CellM, 0) {
				bad("%s: cell_m %v: want a positive size in metres", where, in.CellM)
			}
			if math.IsNaN(in.MinXM) || math.Abs(in.MinXM) > maxBEVMinXM {
				bad("%s: min_x_m %v: want metres from %g to %g", where, in.MinXM, -maxBEVMinXM, maxBEVMinXM)
			}
			if in.MaxHeightM < 0 || math.IsNaN(in.MaxHeightM) || math.IsInf(in.MaxHeightM, 0) {
				bad("%s: max_height_m %v: want a height in metres above 0 (0 or left out: %g)", where, in.MaxHeightM, DefaultBEVMaxHeightM)
			}
			if in.Color != "" || in.Mean != nil || in.Std != nil {
				bad("%s: color, mean and std apply to image inputs only", where)
			}
		case TensorImage:
			if in.CellM != 0 || in.MinXM != 0 || in.MaxHeightM != 0 {
				bad("%s: cell_m, min_x_m and max_height_m apply to bev inputs only", where)
			}
			if in.Color != "" && in.Color != "rgb" && in.Color != "bgr" {
				bad("%s: color %q: want \"rgb\" or \"bgr\"", where, in.Color)
			}
			meanErr, stdErr := checkTriple(in.Mean, false), checkTriple(in.Std, true)
			if meanErr != nil {
				bad("%s: mean %v: %v", where, in.Mean, meanErr)
			}
			if stdErr != nil {
				bad("%s: std %v: %v", where, in.Std, stdErr)
			}
			if meanErr == nil && stdErr == nil {
				if err := checkNormalization(in.Mean, in.Std); err != nil {
					bad("%s: mean %v, std %v: %v", where, in.Mean, in.Std, err)
				}
			}
		}
	}

	s := len(c.SectorHeadingsDeg)
	if s == 0 {
		bad("sector_headings_deg: empty")
	}
	for i, h := range c.SectorHeadingsDeg {
		if math.IsNaN(h) || h < -180 || h > 180 {
			bad("sector_headings_deg[%d] = %v: want degrees in [-180, 180]", i, h)
		} else if i > 0 && !(h > c.SectorHeadingsDeg[i-1]) {
			bad("sector_headings_deg[%d] = %v: headings must increase (index 0 = rightmost)", i, h)
		}
	}
	if len(c.Outputs) == 0 {
		bad("no outputs")
	}
	roles := map[OutputRole]bool{}
	for i, out := range c.Outputs {
		where := fmt.Sprintf("outputs[%d] %q", i, out.Name)
		if out.Name == "" {
			bad("outputs[%d]: empty name", i)
		} else if prev, dup := names[out.Name]; dup {
			bad("%s: name already used by %s", where, prev)
		} else {
			names[out.Name] = where
		}
		switch out.Role {
		case RoleSectorScores, RoleClearance:
			if roles[out.Role] {
				bad("%s: a second %q output", where, out.Role)
			}
			roles[out.Role] = true
		default:
			bad("%s: role %q: want %q or %q", where, out.Role, RoleSectorScores, RoleClearance)
		}
		if len(out.Shape) != 2 || out.Shape[0] != 1 || out.Shape[1] != int64(s) {
			bad("%s: shape %v: want [1, %d] (one value per sector heading)", where, out.Shape, s)
		}
	}
	if len(c.Outputs) > 0 && !roles[RoleSectorScores] {
		bad("no output with role %q", RoleSectorScores)
	}
	return errors.Join(errs...)
}

func checkShapeNCHW(shape []int64) error {
	if len(shape) != 4 || shape[0] != 1 || shape[1] != 3 {
		return errors.New("want [1, 3, H, W]")
	}
	if shape[2] <= 0 || shape[3] <= 0 {
		return errors.New("H and W must be positive")
	}
	// Each side first: their product could overflow int64 and pass.
	if shape[2] > maxTensorElements || shape[3] > maxTensorElements || shape[2]*shape[3]*3 > maxTensorElements {
		return fmt.Errorf("more than %d elements", maxTensorElements)
	}
	return nil
}

// checkNormalization checks that preprocessing with mean and std (as
// Preprocess computes it: pixel/255 - mean, over std) keeps every input
// value finite: a denormal std or a huge mean would feed the model Inf.
func checkNormalization(mean, std []float32) error {
	for c := range 3 {
		m, sd := float32(0), float32(1)
		if mean != nil {
			m = mean[c]
		}
		if std != nil {
			sd = std[c]
		}
		scale, bias := 1/(255*sd), -m/sd
		for _, v := range []float32{0, 255} {
			if x := float64(v*scale + bias); math.IsInf(x, 0) || math.IsNaN(x) || math.IsInf(float64(scale), 0) {
				return fmt.Errorf("channel %d: pixel %v normalizes to %v, not a finite float32", c, v, float32(x))
			}
		}
	}
	return nil
}

func checkTriple(v []float32, positive bool) error {
	if v == nil {
		return nil
	}
	if len(v) != 3 {
		return errors.New("want 3 values, one per channel")
	}
	for _, x := range v {
		f := float64(x)
		if math.IsNaN(f) || math.IsInf(f, 0) || (positive && !(x > 0)) {
			if positive {
				return errors.New("want finite values > 0")
			}
			return errors.New("want finite values")
		}
	}
	return nil
}

// Input returns the input fed by tensor kind k.
func (c ModelConfig) Input(k TensorKind) (InputConfig, bool) {
	for _, in := range c.Inputs {
		if in.Tensor == k {
			return in, true
		}
	}
	return InputConfig{}, false
}

// Output returns the output with role r.
func (c ModelConfig) Output(r OutputRole) (OutputConfig, bool) {
	for _, out := range c.Outputs {
		if out.Role == r {
			return out, true
		}
	}
	return OutputConfig{}, false
}

// Source names where the config came from (ParseConfig's source), or
// "model config" for one built in code.
func (c ModelConfig) Source() string {
	if c.source == "" {
		return "model config"
	}
	return c.source
}

// CellSizeM is the BEV cell size in metres (DefaultBEVCellM when unset).
func (in InputConfig) CellSizeM() float64 {
	if in.CellM == 0 {
		return DefaultBEVCellM
	}
	return in.CellM
}

// HeightCapM is the BEV height channel's cap in metres
// (DefaultBEVMaxHeightM when unset).
func (in InputConfig) HeightCapM() float64 {
	if in.MaxHeightM == 0 {
		return DefaultBEVMaxHeightM
	}
	return in.MaxHeightM
}

// PreprocessParams returns the preprocessing for the config's image input.
func (c ModelConfig) PreprocessParams() (PreprocessParams, error) {
	in, ok := c.Input(TensorImage)
	if !ok {
		return PreprocessParams{}, fmt.Errorf("infer: %w: no %q input", ErrConfig, TensorImage)
	}
	p := PreprocessParams{Width: int(in.Shape[3]), Height: int(in.Shape[2])}
	if in.Color == "bgr" {
		p.Order = ColorBGR
	}
	copy(p.Mean[:], in.Mean)
	copy(p.Std[:], in.Std)
	return p, nil
}

// elements is the number of values in a validated shape.
func elements(shape []int64) int {
	n := 1
	for _, d := range shape {
		n *= int(d)
	}
	return n
}
