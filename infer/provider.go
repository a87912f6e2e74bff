package infer

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	ort "github.com/yalue/onnxruntime_go"
)

// Execution provider names, as used in a preference list.
const (
	ProviderTensorRT = "tensorrt"
	ProviderCUDA     = "cuda"
	ProviderCPU      = "cpu"
)

// DefaultProviders is the preference used when SessionOptions.Providers is
// empty: TensorRT, then CUDA, then CPU.
const DefaultProviders = "tensorrt,cuda,cpu"

// ProviderSkip records a provider that was tried and not used, and why (the
// ONNX Runtime error text).
type ProviderSkip struct {
	Name   string
	Reason string
}

// ParseProviders reads a comma-separated preference such as "cuda,cpu" (a
// flag value). Names are case-insensitive; duplicates and unknown names are
// errors.
func ParseProviders(list string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, f := range strings.Split(list, ",") {
		name := strings.ToLower(strings.TrimSpace(f))
		switch name {
		case ProviderTensorRT, ProviderCUDA, ProviderCPU:
		default:
			return nil, fmt.Errorf("infer: execution providers %q: unknown provider %q (want %s, %s or %s)", list, f, ProviderTensorRT, ProviderCUDA, ProviderCPU)
		}
		if seen[name] {
			return nil, fmt.Errorf("infer: execution providers %q: %q listed twice", list, name)
		}
		seen[name] = true
		out = append(out, name)
	}
	return out, nil
}

// sessionOptionsFor builds ONNX Runtime session options that register
// provider (and, for TensorRT, CUDA behind it for the nodes TensorRT cannot
// take, when cuda is also in the preference). CPU is always ONNX Runtime's
// last resort for unassigned nodes. The caller destroys the options.
func sessionOptionsFor(provider string, prefs []string, o SessionOptions) (*ort.SessionOptions, error) {
	so, err := ort.NewSessionOptions()
	if err != nil {
		return nil, fmt.Errorf("create session options: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			so.Destroy()
		}
	}()
	if o.IntraOpThreads > 0 {
		if err := so.SetIntraOpNumThreads(o.IntraOpThreads); err != nil {
			return nil, fmt.Errorf("intra-op threads %d: %w", o.IntraOpThreads, err)
		}
	}
	switch provider {
	case ProviderTensorRT:
		if err := appendTensorRT(so, o); err != nil {
			return nil, err
		}
		for _, p := range prefs {
			if p == ProviderCUDA {
				if err := appendCUDA(so, o); err != nil {
					return nil, fmt.Errorf("CUDA behind TensorRT: %w", err)
				}
			}
		}
	case ProviderCUDA:
		if err := appendCUDA(so, o); err != nil {
			return nil, err
		}
	case ProviderCPU:
	default:
		return nil, fmt.Errorf("unknown provider %q", provider)
	}
	ok = true
	return so, nil
}

func appendTensorRT(so *ort.SessionOptions, o SessionOptions) error {
	trt, err := ort.NewTensorRTProviderOptions()
	if err != nil {
		return fmt.Errorf("TensorRT provider options: %w", err)
	}
	defer trt.Destroy()
	settings := map[string]string{"device_id": strconv.Itoa(o.DeviceID)}
	if o.TensorRTCacheDir != "" {
		settings["trt_engine_cache_enable"] = "1"
		settings["trt_engine_cache_path"] = o.TensorRTCacheDir
		settings["trt_timing_cache_enable"] = "1"
		settings["trt_timing_cache_path"] = o.TensorRTCacheDir
	}
	if o.TensorRTFP16 {
		settings["trt_fp16_enable"] = "1"
	}
	if err := trt.Update(settings); err != nil {
		return fmt.Errorf("TensorRT options %v: %w", settings, err)
	}
	if err := so.AppendExecutionProviderTensorRT(trt); err != nil {
		return fmt.Errorf("append TensorRT: %w", err)
	}
	// Only once TensorRT is taken: a CPU build of ONNX Runtime refuses it
	// above, and left an empty cache folder wherever the agent ran.
	if o.TensorRTCacheDir != "" {
		if err := os.MkdirAll(o.TensorRTCacheDir, 0o755); err != nil {
			return fmt.Errorf("TensorRT engine cache: %w", err)
		}
	}
	return nil
}

func appendCUDA(so *ort.SessionOptions, o SessionOptions) error {
	cuda, err := ort.NewCUDAProviderOptions()
	if err != nil {
		return fmt.Errorf("CUDA provider options: %w", err)
	}
	defer cuda.Destroy()
	settings := map[string]string{"device_id": strconv.Itoa(o.DeviceID)}
	if err := cuda.Update(settings); err != nil {
		return fmt.Errorf("CUDA options %v: %w", settings, err)
	}
	if err := so.AppendExecutionProviderCUDA(cuda); err != nil {
		return fmt.Errorf("append CUDA: %w", err)
	}
	return nil
}
