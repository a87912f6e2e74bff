package infer

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	ort "github.com/yalue/onnxruntime_go"
)

// DefaultWarmupRuns is the number of warm-up runs when
// SessionOptions.WarmupRuns is 0.
const DefaultWarmupRuns = 3

// SessionOptions tunes a Session; the zero value is the default everywhere.
type SessionOptions struct {
	// Providers is the execution-provider preference, tried in order (see
	// ParseProviders); empty means DefaultProviders (tensorrt, cuda, cpu).
	Providers []string
	// DeviceID is the GPU for TensorRT and CUDA.
	DeviceID int
	// TensorRTCacheDir holds TensorRT engine and timing caches so that
	// engines are built once per model and GPU, not at every start (building
	// can take minutes). Created if missing. Empty disables the caches.
	TensorRTCacheDir string
	// TensorRTFP16 lets TensorRT run layers in half precision.
	TensorRTFP16 bool
	// IntraOpThreads is ONNX Runtime's CPU thread count for one run; 0 means
	// its default (one per physical core). For small models such as the
	// reference model, 1 gives a lower p99 on a busy machine (BenchmarkReferenceRun)
	// and leaves the other cores to the robot's own software.
	IntraOpThreads int
	// WarmupRuns is how many runs NewSession makes before returning, so that
	// lazy allocations and kernel selection do not land on the first frame:
	// 0 means DefaultWarmupRuns, negative means none. A provider counts as
	// initialised only once its session is created and, if warming up, its
	// first run succeeded.
	WarmupRuns int
	// OnRun, if set, is called after every successful Run with its latency,
	// on Run's goroutine. It must not block.
	OnRun func(latency time.Duration)
	// BEV and Image, if set, are the caller's buffers for those inputs and
	// are used in place (no copy): e.g. the BEV raster voxel/ writes. They
	// must hold at least the configured shape's element count and must not
	// be reallocated while the Session is open. Nil means the Session
	// allocates them.
	BEV, Image []float32
}

// Session runs one model on preallocated tensors. Fill BEV() and Image()
// (or the buffers given in SessionOptions), call Run, read Scores() and
// Clearance().
//
// A Session is not safe for concurrent use: its buffers are shared with
// every Run. Use one per frame loop.
type Session struct {
	rt     *Runtime
	model  string // file path or the name given to NewSessionFromBytes
	cfg    ModelConfig
	adv    *ort.AdvancedSession // nil once closed
	values []ort.Value          // input then output tensors, destroyed by Close

	bev, image, scores, clearance []float32
	outputs                       [][]float32 // for the finite check, config order

	provider string
	skipped  []ProviderSkip
	warmup   []time.Duration
	onRun    func(time.Duration)
}

// modelSource abstracts a model given by path or by bytes.
type modelSource struct {
	name string
	path string // set for a file
	data []byte // set for bytes
}

func (m modelSource) info() ([]ort.InputOutputInfo, []ort.InputOutputInfo, error) {
	if m.data != nil {
		return ort.GetInputOutputInfoWithONNXData(m.data)
	}
	return ort.GetInputOutputInfo(m.path)
}

func (m modelSource) create(in, out []string, inV, outV []ort.Value, so *ort.SessionOptions) (*ort.AdvancedSession, error) {
	if m.data != nil {
		return ort.NewAdvancedSessionWithONNXData(m.data, in, out, inV, outV, so)
	}
	return ort.NewAdvancedSession(m.path, in, out, inV, outV, so)
}

// NewSession loads the ONNX model at modelPath, checks its inputs and
// outputs against cfg, wraps the input and output buffers in tensors, picks
// the first execution provider in opts.Providers that initialises and makes
// the warm-up runs.
//
// Errors name the model file and wrap ErrModel (missing, unreadable or
// corrupt file), ErrConfig, ErrModelMismatch (names, shapes, element types),
// ErrNoProvider or ErrClosed (runtime closed).
func NewSession(rt *Runtime, modelPath string, cfg ModelConfig, opts SessionOptions) (*Session, error) {
	st, err := os.Stat(modelPath)
	if err != nil {
		return nil, fmt.Errorf("infer: model %q: %w: %w", modelPath, ErrModel, err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("infer: model %q: %w: not a regular file", modelPath, ErrModel)
	}
	if st.Size() == 0 {
		return nil, fmt.Errorf("infer: model %q: %w: empty file", modelPath, ErrModel)
	}
	return newSession(rt, modelSource{name: modelPath, path: modelPath}, cfg, opts)
}

// NewSessionFromBytes is NewSession for a model held in memory (such as
// models.ReferenceONNX()); name identifies it in errors. ONNX Runtime
// resolves no external data files for it.
func NewSessionFromBytes(rt *Runtime, name string, model []byte, cfg ModelConfig, opts SessionOptions) (*Session, error) {
	if len(model) == 0 {
		return nil, fmt.Errorf("infer: model %q: %w: no data", name, ErrModel)
	}
	return newSession(rt, modelSource{name: name, data: model}, cfg, opts)
}

func newSession(rt *Runtime, src modelSource, cfg ModelConfig, opts SessionOptions) (_ *Session, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("infer: model %q: %w", src.name, err)
	}
	prefs := opts.Providers
	if len(prefs) == 0 {
		prefs, _ = ParseProviders(DefaultProviders)
	} else {
		if prefs, err = ParseProviders(strings.Join(prefs, ",")); err != nil {
			return nil, err
		}
	}
	if err := rt.acquire(); err != nil {
		return nil, err
	}
	s := &Session{rt: rt, model: src.name, cfg: cfg, onRun: opts.OnRun}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()

	ins, outs, err := src.info()
	if err != nil {
		return nil, fmt.Errorf("infer: model %q: %w: %v", src.name, ErrModel, err)
	}
	if err := checkModel(src.name, cfg, ins, outs); err != nil {
		return nil, err
	}

	inNames := make([]string, len(cfg.Inputs))
	inValues := make([]ort.Value, len(cfg.Inputs))
	for i, in := range cfg.Inputs {
		var given []float32
		var field string
		switch in.Tensor {
		case TensorBEV:
			given, field = opts.BEV, "BEV"
		case TensorImage:
			given, field = opts.Image, "Image"
		}
		buf, t, err := s.newTensor(in.Name, in.Shape, given, field)
		if err != nil {
			return nil, err
		}
		switch in.Tensor {
		case TensorBEV:
			s.bev = buf
		case TensorImage:
			s.image = buf
		}
		inNames[i], inValues[i] = in.Name, t
	}
	outNames := make([]string, len(cfg.Outputs))
	outValues := make([]ort.Value, len(cfg.Outputs))
	for i, out := range cfg.Outputs {
		buf, t, err := s.newTensor(out.Name, out.Shape, nil, "")
		if err != nil {
			return nil, err
		}
		switch out.Role {
		case RoleSectorScores:
			s.scores = buf
		case RoleClearance:
			s.clearance = buf
		}
		s.outputs = append(s.outputs, buf)
		outNames[i], outValues[i] = out.Name, t
	}

	warmups := opts.WarmupRuns
	if warmups == 0 {
		warmups = DefaultWarmupRuns
	}
	for _, p := range prefs {
		adv, first, reason := tryProvider(src, p, prefs, opts, inNames, outNames, inValues, outValues, warmups > 0)
		if adv == nil {
			if shared := filepath.Join(filepath.Dir(rt.Library()), "libonnxruntime_providers_shared.so"); strings.Contains(reason, "libonnxruntime_providers_shared") && !mayExist(shared) {
				// ONNX Runtime's own text (a source path, "[ONNXRuntimeError]
				// : 1 : FAIL") reads like a failure on every start of a
				// CPU-only install, where skipping is expected.
				reason = fmt.Sprintf("this ONNX Runtime library has no GPU execution providers: a CPU-only build (no libonnxruntime_providers_shared.so in %s); use an onnxruntime-gpu build for TensorRT and CUDA",
					filepath.Dir(rt.Library()))
			}
			s.skipped = append(s.skipped, ProviderSkip{Name: p, Reason: reason})
			continue
		}
		s.adv, s.provider = adv, p
		if warmups > 0 {
			s.warmup = append(s.warmup, first)
		}
		break
	}
	if s.adv == nil {
		var b strings.Builder
		for _, sk := range s.skipped {
			fmt.Fprintf(&b, "\n  %s: %s", sk.Name, sk.Reason)
		}
		return nil, fmt.Errorf("infer: model %q: %w from %v:%s", src.name, ErrNoProvider, prefs, b.String())
	}
	for i := len(s.warmup); i < warmups; i++ {
		start := time.Now()
		if err := s.adv.Run(); err != nil {
			return nil, fmt.Errorf("infer: model %q: warm-up run %d on %s: %w", src.name, i+1, s.provider, err)
		}
		s.warmup = append(s.warmup, time.Since(start))
	}
	return s, nil
}

// tryProvider creates the ONNX Runtime session for one provider and, if
// probe, runs it once (the first warm-up run). It returns the session and
// the probe's latency, or nil and why not.
func tryProvider(src modelSource, provider string, prefs []string, opts SessionOptions,
	inNames, outNames []string, inValues, outValues []ort.Value, probe bool) (*ort.AdvancedSession, time.Duration, string) {
	so, err := sessionOptionsFor(provider, prefs, opts)
	if err != nil {
		return nil, 0, err.Error()
	}
	defer so.Destroy()
	adv, err := src.create(inNames, outNames, inValues, outValues, so)
	if err != nil {
		return nil, 0, err.Error()
	}
	var first time.Duration
	if probe {
		start := time.Now()
		if err := adv.Run(); err != nil {
			adv.Destroy()
			return nil, 0, "first run: " + err.Error()
		}
		first = time.Since(start)
	}
	return adv, first, ""
}

// newTensor wraps given (or a new buffer if nil) in a float32 tensor of
// shape and registers it for Close.
func (s *Session) newTensor(name string, shape []int64, given []float32, field string) ([]float32, ort.Value, error) {
	n := elements(shape)
	buf := given
	if buf == nil {
		buf = make([]float32, n)
	} else if len(buf) < n {
		return nil, nil, fmt.Errorf("infer: model %q: SessionOptions.%s holds %d values, input %q %v needs %d", s.model, field, len(buf), name, shape, n)
	}
	buf = buf[:n:n]
	t, err := ort.NewTensor(ort.NewShape(shape...), buf)
	if err != nil {
		return nil, nil, fmt.Errorf("infer: model %q: tensor %q %v: %w", s.model, name, shape, err)
	}
	s.values = append(s.values, t)
	return buf, t, nil
}

// Run runs the model once on the current contents of the input buffers and
// returns its latency; the outputs are then in Scores() and Clearance(). It
// allocates nothing on the Go heap. Outputs containing NaN or Inf give an
// error wrapping ErrNonFinite (the outputs are left as the model wrote them).
func (s *Session) Run() (time.Duration, error) {
	if s.adv == nil {
		return 0, fmt.Errorf("infer: model %q: %w", s.model, ErrClosed)
	}
	start := time.Now()
	if err := s.adv.Run(); err != nil {
		return 0, fmt.Errorf("infer: model %q on %s: %w", s.model, s.provider, err)
	}
	latency := time.Since(start)
	for i, out := range s.outputs {
		for j, v := range out {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return latency, fmt.Errorf("infer: model %q output %q[%d] = %v: %w", s.model, s.cfg.Outputs[i].Name, j, v, ErrNonFinite)
			}
		}
	}
	if s.onRun != nil {
		s.onRun(latency)
	}
	return latency, nil
}

// BEV is the BEV input buffer [1,3,H,W] (nil if the model takes none).
func (s *Session) BEV() []float32 { return s.bev }

// Image is the image input buffer [1,3,H,W] (nil if the model takes none);
// Preprocess writes into it.
func (s *Session) Image() []float32 { return s.image }

// Scores is the sector_scores output [1,S], valid after a successful Run
// until the next Run; index k steers at Config().SectorHeadingsDeg[k].
func (s *Session) Scores() []float32 { return s.scores }

// Clearance is the clearance output [1,S] in metres, or nil if the model
// has none.
func (s *Session) Clearance() []float32 { return s.clearance }

// Config is the model config the Session was checked against.
func (s *Session) Config() ModelConfig { return s.cfg }

// Model is the model's file path or name.
func (s *Session) Model() string { return s.model }

// Provider is the execution provider in use: "tensorrt", "cuda" or "cpu".
func (s *Session) Provider() string { return s.provider }

// Skipped lists the providers tried before Provider() and why each failed.
func (s *Session) Skipped() []ProviderSkip { return append([]ProviderSkip(nil), s.skipped...) }

// Warmup returns the latencies of the warm-up runs NewSession made.
func (s *Session) Warmup() []time.Duration { return append([]time.Duration(nil), s.warmup...) }

// Close releases the ONNX Runtime session and tensors; the buffers stay
// valid Go memory. Closing twice is a no-op.
func (s *Session) Close() error {
	if s.rt == nil {
		return nil
	}
	var errs []error
	if s.adv != nil {
		errs = append(errs, s.adv.Destroy())
		s.adv = nil
	}
	for _, v := range s.values {
		errs = append(errs, v.Destroy())
	}
	s.values = nil
	s.rt.release()
	s.rt = nil
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("infer: close model %q: %w", s.model, err)
	}
	return nil
}

// mayExist reports whether path may name a file: only "not there" says
// no (any other error leaves the loader's own message standing).
func mayExist(path string) bool {
	_, err := os.Stat(path)
	return !errors.Is(err, fs.ErrNotExist)
}
