// Package fakecuda builds and inspects the FAKE CUDA driver and NVRTC of
// gpu/testdata/fakecuda (C++ over the host emulation of
// gpu/testdata/cudaemu), for plumbing tests on machines without a GPU.
//
// A test that passes on the fake proves that zerohop's Go code drives a C
// library with cuda.h's and nvrtc.h's signatures correctly (symbols,
// argument order, context thread, device vs host pointers, cleanup) and
// that the kernels' launches reproduce the CPU filter on the emulation. It
// proves nothing about CUDA, NVRTC or a GPU; it never counts as GPU
// verification (that is make gpu-check, on a GPU machine). Only tests
// import it.
package fakecuda

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"

	"github.com/ebitengine/purego"
)

// Libraries are the built fakes. Dir holds them under the sonames zerohop
// looks for (libcuda.so.1, libnvrtc.so.13), so a process started with
// LD_LIBRARY_PATH=Dir loads them in place of the real ones; their
// DT_SONAMEs differ, so loading them by path in a process does not make
// dlopen("libcuda.so.1") find them.
type Libraries struct {
	Dir, Driver, NVRTC string
}

// BuiltinsName is the fake libnvrtc-builtins Build puts beside the fake
// NVRTC: the file name and soname for the version it reports by default.
const BuiltinsName = "libnvrtc-builtins.so.12.9"

// Build compiles the fakes into dir with g++ (C++20), or with the
// compiler $ZEROHOP_FAKECUDA_CXX names: aarch64-linux-gnu-g++ for the
// arm64 tests under emulation (make test-arm64).
func Build(dir string) (Libraries, error) {
	src, err := sourceDir()
	if err != nil {
		return Libraries{}, err
	}
	cxx := os.Getenv("ZEROHOP_FAKECUDA_CXX")
	if cxx == "" {
		cxx = "g++"
	}
	libs := Libraries{Dir: dir, Driver: filepath.Join(dir, "libcuda.so.1"), NVRTC: filepath.Join(dir, "libnvrtc.so.13")}
	for _, b := range []struct{ out, src, soname string }{
		{libs.Driver, "fakecuda.cpp", "libzerohop-fake-cuda.so"},
		{libs.NVRTC, "fakenvrtc.cpp", "libzerohop-fake-nvrtc.so"},
		// Beside the NVRTC, like a CUDA toolkit's lib64 (see BuiltinsName).
		{filepath.Join(dir, BuiltinsName), "fakenvrtc_builtins.cpp", BuiltinsName},
	} {
		cmd := exec.Command(cxx, "-std=c++20", "-O1", "-ffp-contract=off", "-fPIC", "-shared", "-pthread",
			"-Wl,-soname,"+b.soname, "-o", b.out, filepath.Join(src, b.src))
		if out, err := cmd.CombinedOutput(); err != nil {
			return Libraries{}, fmt.Errorf("fakecuda: build %s with %s (needs C++20): %v\n%s", b.src, cxx, err, out)
		}
	}
	if _, err := os.Stat(libs.Driver); err != nil {
		return Libraries{}, err
	}
	return libs, nil
}

// sourceDir finds gpu/testdata/fakecuda: beside this file, or, when the
// test was built with -trimpath (runtime.Caller then names a module path,
// not a file), in the module whose go.mod is at or above the working
// directory (go test runs a test in its package's folder).
func sourceDir() (string, error) {
	_, self, _, _ := runtime.Caller(0)
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("fakecuda: find the sources: %w", err)
	}
	return findSourceDir(self, wd)
}

// findSourceDir is sourceDir for this file's name as runtime.Caller gives
// it (self) and the working directory wd.
func findSourceDir(self, wd string) (string, error) {
	const rel = "gpu/testdata/fakecuda"
	if filepath.IsAbs(self) {
		dir := filepath.Join(filepath.Dir(self), "..", "testdata", "fakecuda")
		if _, err := os.Stat(dir); err == nil {
			return dir, nil
		}
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			src := filepath.Join(dir, filepath.FromSlash(rel))
			if _, err := os.Stat(src); err != nil {
				return "", fmt.Errorf("fakecuda: the module at %s has no %s: %w", dir, rel, err)
			}
			return src, nil
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("fakecuda: %s is not a file and no go.mod is at or above %s, so %s cannot be found (run the tests inside the zerohop module)", self, wd, rel)
		}
	}
}

// What Live counts in the fake driver.
const (
	LiveHostAllocs = iota
	LiveRegistrations
	LiveDeviceAllocs
	LiveStreams
	LiveEvents
	LiveModules
	LivePrimaryRefs
	Launches
	PrimaryFlags // the primary context's flags (cuDevicePrimaryCtxSetFlags_v2)
)

// callFake calls the exported function name of the fake library at path
// (loaded in this process: dlopen finds the copy already there) with
// plain integer arguments.
func callFake(path, name string, args ...uintptr) (uintptr, error) {
	h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		return 0, err
	}
	fn, err := purego.Dlsym(h, name)
	if err != nil {
		return 0, err
	}
	r, _, _ := purego.SyscallN(fn, args...)
	return r, nil
}

// Live reads one of the fake driver's counters, from the copy loaded at
// path in this process.
func Live(path string, kind int) (uint64, error) {
	r, err := callFake(path, "zhfake_live", uintptr(kind))
	return uint64(r), err
}

// MoveAfterBounds makes the fake driver loaded at path, right after its
// next zh_bounds launch, move the first point of the cloud that kernel
// read far outside the bounds it measured: what a producer writing the
// slot during the filter would do.
func MoveAfterBounds(path string) error {
	_, err := callFake(path, "zhfake_move_after_bounds")
	return err
}

// MoveAfterBoundsTo is MoveAfterBounds writing x as the first point's x
// coordinate: NaN drops a point the bounds pass accepted, a finite x for a
// point that was NaN adds one.
func MoveAfterBoundsTo(path string, x float32) error {
	_, err := callFake(path, "zhfake_move_after_bounds_to", uintptr(math.Float32bits(x)))
	return err
}

// SetNVRTCArchs makes the fake NVRTC loaded at path report archs (at most
// 8, compute capability × 10) from nvrtcGetSupportedArchs and refuse the
// others, as an NVRTC older than the GPU does; none restores its default
// (CUDA 12.9's list).
func SetNVRTCArchs(path string, archs ...int) error {
	if len(archs) > 8 {
		return fmt.Errorf("fakecuda: %d architectures, at most 8", len(archs))
	}
	a := make([]uintptr, 9)
	a[0] = uintptr(len(archs))
	for i, v := range archs {
		a[1+i] = uintptr(v)
	}
	_, err := callFake(path, "zhfake_nvrtc_set_archs", a...)
	return err
}

// SetNVRTCVersion sets the version the fake NVRTC loaded at path reports
// (its default is 12.9).
func SetNVRTCVersion(path string, major, minor int) error {
	_, err := callFake(path, "zhfake_nvrtc_set_version", uintptr(major), uintptr(minor))
	return err
}

// NVRTCCompiles is how many programs the fake NVRTC loaded at path compiled.
func NVRTCCompiles(path string) (int, error) {
	r, err := callFake(path, "zhfake_nvrtc_compiles")
	return int(int32(r)), err
}

// Leaks lists what the fake driver loaded at path still holds (e.g. "2
// device allocations"), empty when everything made has been freed.
func Leaks(path string) ([]string, error) {
	var left []string
	for kind, what := range []string{"host allocations", "host registrations", "device allocations", "streams", "events", "modules", "primary context references"} {
		n, err := Live(path, kind)
		if err != nil {
			return nil, err
		}
		if n != 0 {
			left = append(left, fmt.Sprintf("%d %s", n, what))
		}
	}
	return left, nil
}
