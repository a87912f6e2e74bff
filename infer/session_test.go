package infer

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zerohop/zerohop/models"
)

const refModel = "../models/reference.onnx"

func cpuOnly() SessionOptions { return SessionOptions{Providers: []string{ProviderCPU}} }

func TestNewSessionRejects(t *testing.T) {
	rt := requireRuntime(t)
	empty := filepath.Join(t.TempDir(), "empty.onnx")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	withInput := func(i int, f func(*InputConfig)) ModelConfig {
		cfg := ReferenceConfig()
		f(&cfg.Inputs[i])
		return cfg
	}
	cases := []struct {
		name  string
		model string
		cfg   ModelConfig
		opts  SessionOptions
		is    error
		want  []string // all in the error text
	}{
		{"a missing model file", "testdata/no-such-model.onnx", ReferenceConfig(), cpuOnly(),
			fs.ErrNotExist, []string{"testdata/no-such-model.onnx", "no such file"}},
		{"a directory", "testdata", ReferenceConfig(), cpuOnly(),
			ErrModel, []string{`"testdata"`, "not a regular file"}},
		{"an empty model file", empty, ReferenceConfig(), cpuOnly(),
			ErrModel, []string{empty, "empty file"}},
		{"a corrupt (truncated) model file", "testdata/corrupt.onnx", ReferenceConfig(), cpuOnly(),
			ErrModel, []string{"testdata/corrupt.onnx", "Protobuf parsing failed"}},
		{"an input name the model lacks", refModel, withInput(0, func(in *InputConfig) { in.Name = "grid" }), cpuOnly(),
			ErrModelMismatch, []string{refModel, `config "models/reference.json (embedded)"`, "(2 problems)", `no input named "grid"`, `"bev" float32 [1 3 128 128]`, `input "bev"`, "not in the config"}},
		{"an image size the model does not take", refModel, withInput(1, func(in *InputConfig) { in.Shape = []int64{1, 3, 144, 320} }), cpuOnly(),
			ErrModelMismatch, []string{refModel, `input "image" has shape [1 3 144 256], config says [1 3 144 320]`, "dim 3 is 256 in the model, 320 in the config"}},
		{"an output name the model lacks", refModel, func() ModelConfig {
			cfg := ReferenceConfig()
			cfg.Outputs[1].Name = "distance"
			return cfg
		}(), cpuOnly(), ErrModelMismatch, []string{refModel, `no output named "distance"`, `"clearance"`}},
		{"a model input missing from the config", refModel, func() ModelConfig {
			cfg := ReferenceConfig()
			cfg.Inputs = cfg.Inputs[:1]
			return cfg
		}(), cpuOnly(), ErrModelMismatch, []string{refModel, `input "image"`, "not in the config"}},
		{"a float64 input", "testdata/double_input.onnx", ReferenceConfig(), cpuOnly(),
			ErrModelMismatch, []string{"testdata/double_input.onnx", `input "bev" has element type float64, want float32`}},
		{"an invalid config", refModel, withInput(0, func(in *InputConfig) { in.Tensor = "lidar" }), cpuOnly(),
			ErrConfig, []string{refModel, `tensor "lidar"`}},
		{"a caller BEV buffer that is too small", refModel, ReferenceConfig(), SessionOptions{Providers: []string{ProviderCPU}, BEV: make([]float32, 100)},
			nil, []string{refModel, "SessionOptions.BEV holds 100 values", "needs 49152"}},
		{"an unknown provider", refModel, ReferenceConfig(), SessionOptions{Providers: []string{"tpu"}},
			nil, []string{`unknown provider "tpu"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := NewSession(rt, tc.model, tc.cfg, tc.opts)
			if err == nil {
				s.Close()
				t.Fatal("NewSession succeeded")
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error does not wrap %v: %v", tc.is, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not contain %q:\n%v", w, err)
				}
			}
			// Several mismatches are listed under one heading: the model
			// and the kind of error said once, not once per problem.
			if n := strings.Count(err.Error(), ErrModelMismatch.Error()); n > 1 {
				t.Errorf("%q said %d times:\n%v", ErrModelMismatch, n, err)
			}
		})
	}
}

// With a dynamic batch dim the model accepts the configured [1, ...]; NaN in
// an input must come out as ErrNonFinite, not as a score.
func TestSessionDynamicDimsAndNonFiniteOutput(t *testing.T) {
	rt := requireRuntime(t)
	s, err := NewSession(rt, "testdata/dynamic_batch.onnx", ReferenceConfig(), cpuOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range s.Image() {
		s.Image()[i] = 1
	}
	if _, err := s.Run(); err != nil {
		t.Fatal(err)
	}
	if s.Scores()[8] <= 0 || s.Clearance()[8] != -s.Scores()[8] {
		t.Fatalf("scores %v clearance %v: want positive scores and clearance = -scores", s.Scores(), s.Clearance())
	}
	s.BEV()[12345] = float32(math.NaN())
	_, err = s.Run()
	if !errors.Is(err, ErrNonFinite) || !strings.Contains(err.Error(), `output "sector_scores"[0]`) {
		t.Fatalf("NaN input: got %v, want ErrNonFinite naming the output", err)
	}
}

func TestProviderPreference(t *testing.T) {
	rt := requireRuntime(t)
	// The npm library is a CPU-only build: it has no provider bridge.
	_, err := os.Stat(filepath.Join(filepath.Dir(rt.Library()), "libonnxruntime_providers_shared.so"))
	cpuBuild := errors.Is(err, fs.ErrNotExist)

	s, err := NewSession(rt, refModel, ReferenceConfig(), SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	prefs, _ := ParseProviders(DefaultProviders)
	i := slices.Index(prefs, s.Provider())
	if i < 0 || len(s.Skipped()) != i {
		t.Fatalf("provider %q with skipped %v: want every provider before it skipped", s.Provider(), s.Skipped())
	}
	for k, sk := range s.Skipped() {
		if sk.Name != prefs[k] || sk.Reason == "" {
			t.Fatalf("skipped[%d] = %+v: want %q with a reason", k, sk, prefs[k])
		}
	}
	if cpuBuild {
		if s.Provider() != ProviderCPU {
			t.Fatalf("CPU-only library: provider %q, want cpu", s.Provider())
		}
		for _, sk := range s.Skipped() {
			if !strings.Contains(sk.Reason, "no GPU execution providers") || strings.Contains(sk.Reason, "ONNXRuntimeError") {
				t.Errorf("%s skipped for %q; want the CPU-only build named as the reason, without ONNX Runtime's error text", sk.Name, sk.Reason)
			}
		}
		// TensorRT's engine cache folder is made only once TensorRT is
		// taken: a CPU build left an empty one wherever the agent ran.
		cache := filepath.Join(t.TempDir(), "trt")
		cs, err := NewSession(rt, refModel, ReferenceConfig(), SessionOptions{TensorRTCacheDir: cache})
		if err != nil {
			t.Fatal(err)
		}
		cs.Close()
		if _, err := os.Stat(cache); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("TensorRT cache folder after a CPU build skipped TensorRT: %v, want none made", err)
		}
		// Without cpu in the list, nothing initialises.
		_, err = NewSession(rt, refModel, ReferenceConfig(), SessionOptions{Providers: []string{ProviderTensorRT, ProviderCUDA}})
		if !errors.Is(err, ErrNoProvider) || !strings.Contains(err.Error(), "tensorrt: ") || !strings.Contains(err.Error(), "cuda: ") {
			t.Fatalf("GPU-only preference on a CPU build: got %v, want ErrNoProvider listing both", err)
		}
	}
}

func TestParseProviders(t *testing.T) {
	cases := []struct {
		in   string
		want []string
		err  string
	}{
		{"tensorrt,cuda,cpu", []string{"tensorrt", "cuda", "cpu"}, ""},
		{" CUDA , cpu", []string{"cuda", "cpu"}, ""},
		{"cpu", []string{"cpu"}, ""},
		{"cuda,gpu", nil, `unknown provider "gpu"`},
		{"cpu,cpu", nil, `"cpu" listed twice`},
		{"", nil, `unknown provider ""`},
	}
	for _, tc := range cases {
		got, err := ParseProviders(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseProviders(%q) = %v, %v; want error %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("ParseProviders(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestSessionRunAllocatesNothing(t *testing.T) {
	rt := requireRuntime(t)
	var calls int
	s, err := NewSession(rt, refModel, ReferenceConfig(), SessionOptions{Providers: []string{ProviderCPU}, OnRun: func(time.Duration) { calls++ }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	allocs := testing.AllocsPerRun(50, func() {
		if _, err := s.Run(); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("Session.Run allocates %v times per run, want 0", allocs)
	}
	if calls != 51 { // AllocsPerRun makes one warm-up call
		t.Fatalf("OnRun called %d times for 51 runs", calls)
	}
}

func TestSessionLatencyAndWarmup(t *testing.T) {
	rt := requireRuntime(t)
	for _, tc := range []struct {
		runs, want int
	}{{0, DefaultWarmupRuns}, {5, 5}, {-1, 0}} {
		var reported []time.Duration
		s, err := NewSession(rt, refModel, ReferenceConfig(), SessionOptions{
			Providers: []string{ProviderCPU}, WarmupRuns: tc.runs,
			OnRun: func(d time.Duration) { reported = append(reported, d) },
		})
		if err != nil {
			t.Fatal(err)
		}
		if n := len(s.Warmup()); n != tc.want {
			t.Errorf("WarmupRuns %d: %d warm-up runs, want %d", tc.runs, n, tc.want)
		}
		if len(reported) != 0 {
			t.Errorf("WarmupRuns %d: OnRun reported %d warm-up runs; it reports frames only", tc.runs, len(reported))
		}
		d, err := s.Run()
		if err != nil || d <= 0 || len(reported) != 1 || reported[0] != d {
			t.Errorf("Run returned %v, %v; OnRun got %v: want the same positive latency", d, err, reported)
		}
		s.Close()
	}
}

// Caller-owned buffers are used in place: what the caller writes is what the
// model sees.
func TestSessionUsesCallerBuffers(t *testing.T) {
	rt := requireRuntime(t)
	bev := make([]float32, 3*128*128+7) // longer is fine
	s, err := NewSession(rt, refModel, ReferenceConfig(), SessionOptions{Providers: []string{ProviderCPU}, BEV: bev})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if &s.BEV()[0] != &bev[0] || len(s.BEV()) != 3*128*128 {
		t.Fatal("BEV() is not the caller's buffer")
	}
	scene := newRefScene()
	scene.block(2, 3, -1, 1, 1)
	copy(bev, scene.bev)
	copy(s.Image(), scene.image)
	if _, err := s.Run(); err != nil {
		t.Fatal(err)
	}
	if s.Clearance()[4] >= 3 {
		t.Fatalf("an obstacle written into the caller's buffer 2 m ahead: clearance %v", s.Clearance())
	}
}

func TestSessionFromBytesMatchesFile(t *testing.T) {
	rt := requireRuntime(t)
	fromFile, err := NewSession(rt, refModel, ReferenceConfig(), cpuOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer fromFile.Close()
	fromBytes, err := NewSessionFromBytes(rt, models.ReferenceFile, models.ReferenceONNX(), ReferenceConfig(), cpuOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer fromBytes.Close()
	scene := newRefScene()
	scene.block(3, 4, 0, 2, 1)
	scene.paint(150, 100, 250, 144, orange)
	a, _ := refOutputs(t, fromFile, scene)
	b, _ := refOutputs(t, fromBytes, scene)
	if !slices.Equal(a, b) || maxOf(a) == minOf(a) {
		t.Fatalf("file %v vs embedded %v: want equal, non-uniform scores", a, b)
	}
	if _, err := NewSessionFromBytes(rt, "garbage", []byte("not onnx"), ReferenceConfig(), cpuOnly()); !errors.Is(err, ErrModel) || !strings.Contains(err.Error(), `"garbage"`) {
		t.Fatalf("garbage bytes: %v", err)
	}
}

func TestSessionClosed(t *testing.T) {
	rt := requireRuntime(t)
	s, err := NewSession(rt, refModel, ReferenceConfig(), cpuOnly())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := s.Run(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Run after Close: %v, want ErrClosed", err)
	}
}

func TestOpenRuntimeErrors(t *testing.T) {
	if _, err := OpenRuntime(""); !errors.Is(err, ErrLibraryNotFound) {
		t.Errorf("empty path: %v", err)
	}
	missing := filepath.Join(t.TempDir(), "libonnxruntime.so.1")
	if _, err := OpenRuntime(missing); !errors.Is(err, ErrLibraryNotFound) || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing library: %v", err)
	}
	rt := requireRuntime(t)
	if _, err := OpenRuntime(rt.Library()); !errors.Is(err, ErrRuntimeInUse) {
		t.Errorf("second runtime: %v, want ErrRuntimeInUse", err)
	}
	if rt.Version() != ORTVersion && os.Getenv(EnvLibrary) == "" {
		t.Errorf("runtime version %q, want the pinned %s", rt.Version(), ORTVersion)
	}
}

// Runtime lifecycle needs a process of its own: ONNX Runtime's environment
// is process-global and the other tests share one. TestMain runs
// runtimeLifecycle instead of the tests when envHelper is set.
func TestRuntimeLifecycleInFreshProcess(t *testing.T) {
	rt := requireRuntime(t)
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), envHelper+"=lifecycle", EnvLibrary+"="+rt.Library())
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "runtime lifecycle ok") {
		t.Fatalf("helper process: %v\n%s", err, out)
	}
}

func runtimeLifecycle() error {
	lib := os.Getenv(EnvLibrary)
	dir, err := os.MkdirTemp("", "infer-lifecycle")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	// Not a shared library at all: a clear load error naming the file.
	notLib := filepath.Join(dir, "libonnxruntime.so.1")
	if err := os.WriteFile(notLib, []byte("ELF? no"), 0o644); err != nil {
		return err
	}
	if _, err := OpenRuntime(notLib); !errors.Is(err, ErrLibraryLoad) || !strings.Contains(err.Error(), notLib) {
		return fmt.Errorf("bogus library: %v, want ErrLibraryLoad naming it", err)
	}
	// A shared library that is not ONNX Runtime.
	if libc := "/lib/x86_64-linux-gnu/libc.so.6"; fileExists(libc) {
		if _, err := OpenRuntime(libc); !errors.Is(err, ErrLibraryLoad) || !strings.Contains(err.Error(), "OrtGetApiBase") {
			return fmt.Errorf("libc as ONNX Runtime: %v", err)
		}
	}
	rt, err := OpenRuntime(lib)
	if err != nil {
		return err
	}
	s, err := NewSession(rt, refModel, ReferenceConfig(), cpuOnly())
	if err != nil {
		return err
	}
	if err := rt.Close(); !errors.Is(err, ErrSessionsOpen) {
		return fmt.Errorf("Close with a session open: %v, want ErrSessionsOpen", err)
	}
	if _, err := s.Run(); err != nil {
		return fmt.Errorf("the refused Close must leave the session working: %v", err)
	}
	if err := s.Close(); err != nil {
		return err
	}
	if err := rt.Close(); err != nil {
		return err
	}
	if _, err := NewSession(rt, refModel, ReferenceConfig(), cpuOnly()); !errors.Is(err, ErrClosed) {
		return fmt.Errorf("NewSession on a closed runtime: %v, want ErrClosed", err)
	}
	// The environment can be opened again once closed.
	rt2, err := OpenRuntime(lib)
	if err != nil {
		return fmt.Errorf("reopen: %v", err)
	}
	if err := rt2.Close(); err != nil {
		return err
	}
	fmt.Println("runtime lifecycle ok")
	return nil
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// BenchmarkReferenceRun is one inference of models/reference.onnx on the CPU
// provider, inputs already in place (the per-frame cost after preprocessing).
func BenchmarkReferenceRun(b *testing.B) {
	rt := requireRuntime(b)
	for _, threads := range []int{0, 1} {
		b.Run(fmt.Sprintf("cpu/intra_op_threads=%d", threads), func(b *testing.B) {
			s, err := NewSession(rt, refModel, ReferenceConfig(), SessionOptions{Providers: []string{ProviderCPU}, IntraOpThreads: threads})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			scene := newRefScene()
			scene.block(3, 4, -1, 1, 1)
			copy(s.BEV(), scene.bev)
			copy(s.Image(), scene.image)
			b.ReportAllocs()
			lat := make([]time.Duration, b.N)
			b.ResetTimer()
			for i := range lat {
				d, err := s.Run()
				if err != nil {
					b.Fatal(err)
				}
				lat[i] = d
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		})
	}
}
