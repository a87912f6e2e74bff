package gpu

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

func TestOpenNVRTCAbsent(t *testing.T) {
	names := []string{"libnvrtc-zerohop-absent.so.12", "libc.so.6"}
	_, err := OpenNVRTC(names...)
	if !errors.Is(err, ErrNoNVRTC) {
		t.Fatalf("OpenNVRTC(%q) = %v, want ErrNoNVRTC", names, err)
	}
	for _, want := range []string{names[0], "lacks symbol nvrtc"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

// TestOpenNVRTCDefault: without CUDA (CI, the dev VM) no soname loads and
// the error lists every one tried; with NVRTC installed it reports a version.
func TestOpenNVRTCDefault(t *testing.T) {
	n, err := OpenNVRTC()
	if err == nil {
		major, _ := n.Version()
		if major < 11 {
			t.Fatalf("%s reports version %d, want ≥ 11", n.Soname(), major)
		}
		return
	}
	if !errors.Is(err, ErrNoNVRTC) {
		t.Fatalf("OpenNVRTC() = %v, want ErrNoNVRTC", err)
	}
	for _, s := range NVRTCSonames {
		if !strings.Contains(err.Error(), fmt.Sprintf("%q", s)) {
			t.Errorf("error does not list %s: %v", s, err)
		}
	}
}

func TestNVRTCResultNames(t *testing.T) {
	tests := []struct {
		code NVRTCResult
		name string
	}{
		{0, "NVRTC_SUCCESS"},
		{3, "NVRTC_ERROR_INVALID_INPUT"},
		{5, "NVRTC_ERROR_INVALID_OPTION"},
		{6, "NVRTC_ERROR_COMPILATION"},
		{11, "NVRTC_ERROR_INTERNAL_ERROR"},
		{12, "NVRTC_ERROR_TIME_FILE_WRITE_FAILED"},
		{99, "NVRTC_ERROR_99"},
	}
	for _, tt := range tests {
		if got := tt.code.Name(); got != tt.name {
			t.Errorf("NVRTCResult(%d).Name() = %q, want %q", tt.code, got, tt.name)
		}
	}
}

func TestNVRTCCompileErrorCarriesLog(t *testing.T) {
	err := fmt.Errorf("gpu: compile voxel.cu: %w", &NVRTCError{Op: "nvrtcCompileProgram", Code: 6, Log: "voxel.cu(3): error: identifier \"x\" is undefined\n"})
	if !errors.Is(err, ErrCompilation) {
		t.Fatalf("%v does not match ErrCompilation", err)
	}
	if errors.Is(err, NVRTCResult(5)) {
		t.Errorf("%v matches NVRTC_ERROR_INVALID_OPTION", err)
	}
	want := "gpu: compile voxel.cu: nvrtcCompileProgram: NVRTC_ERROR_COMPILATION (6):\nvoxel.cu(3): error: identifier \"x\" is undefined"
	if err.Error() != want {
		t.Errorf("Error() = %q, want %q", err.Error(), want)
	}
}

func TestNVRTCCandidates(t *testing.T) {
	env := map[string]string{EnvNVRTC: "/opt/nvrtc/libnvrtc.so.12", "CUDA_HOME": "/opt/cuda"}
	present := map[string]bool{
		"/opt/cuda/lib64/libnvrtc.so.12":                          true,
		"/usr/local/cuda/targets/x86_64-linux/lib/libnvrtc.so.13": true,
		"/usr/local/cuda-12.4/lib64/libnvrtc.so.12":               true,
		"/usr/local/cuda-12.4/lib64/libnvrtc.so.11.2":             false,
		"/opt/nvrtc/libnvrtc.so.12":                               true,
	}
	got := nvrtcCandidates(func(k string) string { return env[k] },
		func(string) ([]string, error) { return []string{"/usr/local/cuda-12.4"}, nil },
		func(p string) bool { return present[p] })
	want := append([]string{"/opt/nvrtc/libnvrtc.so.12"}, NVRTCSonames...)
	want = append(want, "/usr/local/cuda/targets/x86_64-linux/lib/libnvrtc.so.13", // newest soname first
		"/opt/cuda/lib64/libnvrtc.so.12", "/usr/local/cuda-12.4/lib64/libnvrtc.so.12")
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("candidates:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Nothing set, nothing installed: the sonames alone.
	got = nvrtcCandidates(func(string) string { return "" }, func(string) ([]string, error) { return nil, nil },
		func(string) bool { return false })
	if strings.Join(got, " ") != strings.Join(NVRTCSonames, " ") {
		t.Fatalf("bare candidates %q, want %q", got, NVRTCSonames)
	}
}

func TestPreloadBuiltins(t *testing.T) {
	files := []string{"/cuda/lib64/libnvrtc-builtins.so.12.8", "/cuda/lib64/libnvrtc-builtins.so.12.8.93", "/pip/lib/libnvrtc-builtins.so.13.0"}
	glob := func(pattern string) ([]string, error) {
		var out []string
		for _, f := range files {
			if ok, _ := filepath.Match(pattern, f); ok {
				out = append(out, f)
			}
		}
		return out, nil
	}
	for _, tc := range []struct {
		nvrtc        string
		major, minor int
		loadErr      error
		want, loaded string
	}{
		{nvrtc: "libnvrtc.so.12", major: 12, minor: 8, want: ""}, // on the linker's path
		{nvrtc: "/cuda/lib64/libnvrtc.so.12", major: 12, minor: 8,
			want: "preloaded /cuda/lib64/libnvrtc-builtins.so.12.8", loaded: "/cuda/lib64/libnvrtc-builtins.so.12.8"},
		{nvrtc: "/pip/lib/libnvrtc.so.13", major: 13, minor: 1, // no 13.1: the one there
			want: "preloaded /pip/lib/libnvrtc-builtins.so.13.0", loaded: "/pip/lib/libnvrtc-builtins.so.13.0"},
		{nvrtc: "/elsewhere/libnvrtc.so.12", major: 12, minor: 8, want: "no libnvrtc-builtins.so.12.8 beside /elsewhere/libnvrtc.so.12"},
		{nvrtc: "/cuda/lib64/libnvrtc.so.12", major: 12, minor: 8, loadErr: errors.New("dlopen: bad ELF"),
			want: "dlopen: bad ELF", loaded: "/cuda/lib64/libnvrtc-builtins.so.12.8"},
	} {
		var loaded string
		got := preloadBuiltins(tc.nvrtc, tc.major, tc.minor, glob, func(p string) error { loaded = p; return tc.loadErr })
		if got != tc.want || loaded != tc.loaded {
			t.Errorf("preloadBuiltins(%q, %d.%d) = %q, loaded %q; want %q, loaded %q", tc.nvrtc, tc.major, tc.minor, got, loaded, tc.want, tc.loaded)
		}
	}
}

// $ZEROHOP_NVRTC=none: no NVRTC, whatever the machine has; sonames given
// explicitly are still tried.
func TestOpenNVRTCNone(t *testing.T) {
	t.Setenv(EnvNVRTC, NVRTCNone)
	nv, err := OpenNVRTC()
	if !errors.Is(err, ErrNoNVRTC) || !strings.Contains(err.Error(), "$ZEROHOP_NVRTC=none") || nv != nil {
		t.Fatalf("OpenNVRTC with $%s=none: %v, %v; want ErrNoNVRTC naming the variable", EnvNVRTC, nv, err)
	}
	if _, err := OpenNVRTC("libzerohop-no-such-nvrtc.so"); err == nil || strings.Contains(err.Error(), "=none") {
		t.Fatalf("OpenNVRTC with a soname and $%s=none: %v; want that soname tried", EnvNVRTC, err)
	}
}
