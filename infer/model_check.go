package infer

import (
	"fmt"
	"strings"

	ort "github.com/yalue/onnxruntime_go"
)

// checkModel compares the model's declared inputs and outputs with cfg and
// reports every mismatch at once, under one line naming the model, each
// naming the tensor.
//
// Every model input must be in the config (ONNX Runtime needs a value for
// each); extra model outputs are allowed and not computed. A model dimension
// that is dynamic (-1 or a symbolic name) matches any configured size.
func checkModel(model string, cfg ModelConfig, ins, outs []ort.InputOutputInfo) error {
	var problems []string
	bad := func(format string, args ...any) {
		problems = append(problems, fmt.Sprintf(format, args...))
	}
	byName := func(list []ort.InputOutputInfo, name string) (ort.InputOutputInfo, bool) {
		for _, io := range list {
			if io.Name == name {
				return io, true
			}
		}
		return ort.InputOutputInfo{}, false
	}
	check := func(kind, name string, shape []int64, list []ort.InputOutputInfo) {
		io, ok := byName(list, name)
		if !ok {
			bad("no %s named %q; the model's %ss are %s", kind, name, kind, describe(list))
			return
		}
		if io.OrtValueType != ort.ONNXTypeTensor {
			bad("%s %q is a %v, want a float32 tensor", kind, name, io.OrtValueType)
			return
		}
		if io.DataType != ort.TensorElementDataTypeFloat {
			bad("%s %q has element type %s, want float32", kind, name, elementTypeName(io.DataType))
		}
		if msg := shapeMismatch(io.Dimensions, shape); msg != "" {
			bad("%s %q has shape %v, config says %v: %s", kind, name, []int64(io.Dimensions), shape, msg)
		}
	}
	for _, in := range cfg.Inputs {
		check("input", in.Name, in.Shape, ins)
	}
	for _, io := range ins {
		found := false
		for _, in := range cfg.Inputs {
			found = found || in.Name == io.Name
		}
		if !found {
			bad("input %q (%s) is not in the config; every model input must be fed", io.Name, describeOne(io))
		}
	}
	for _, out := range cfg.Outputs {
		check("output", out.Name, out.Shape, outs)
	}
	head := fmt.Sprintf("infer: model %q", model)
	if cfg.source != "" {
		head += fmt.Sprintf(", config %q", cfg.source)
	}
	switch len(problems) {
	case 0:
		return nil
	case 1:
		return fmt.Errorf("%s: %w: %s", head, ErrModelMismatch, problems[0])
	}
	return fmt.Errorf("%s: %w (%d problems):\n  - %s", head, ErrModelMismatch, len(problems), strings.Join(problems, "\n  - "))
}

// shapeMismatch explains how model dims differ from the configured ones, or
// returns "" if they agree.
func shapeMismatch(model ort.Shape, config []int64) string {
	if len(model) != len(config) {
		return fmt.Sprintf("rank %d vs %d", len(model), len(config))
	}
	for i := range model {
		if model[i] > 0 && model[i] != config[i] {
			return fmt.Sprintf("dim %d is %d in the model, %d in the config", i, model[i], config[i])
		}
	}
	return ""
}

func describeOne(io ort.InputOutputInfo) string {
	return fmt.Sprintf("%s %v", elementTypeName(io.DataType), []int64(io.Dimensions))
}

// elementTypeName is a tensor element type in Go's words (float32, int64).
func elementTypeName(t ort.TensorElementDataType) string {
	switch t {
	case ort.TensorElementDataTypeFloat:
		return "float32"
	case ort.TensorElementDataTypeDouble:
		return "float64"
	}
	return strings.ToLower(strings.TrimPrefix(t.String(), "ONNX_TENSOR_ELEMENT_DATA_TYPE_"))
}

func describe(list []ort.InputOutputInfo) string {
	if len(list) == 0 {
		return "(none)"
	}
	parts := make([]string, len(list))
	for i, io := range list {
		parts[i] = fmt.Sprintf("%q %s", io.Name, describeOne(io))
	}
	return strings.Join(parts, ", ")
}
