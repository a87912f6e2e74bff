//go:build cudalibs

package gpu

// The binding against NVIDIA's REAL libraries on a machine WITHOUT a GPU
// (make test-cuda-libs): Debian 12's libcuda.so.1 (driver 535, CUDA 12.2)
// with NVRTC 11.8, and Debian 13's (driver 550, CUDA 12.4) with NVRTC 12.4,
// which scripts/cuda-libs/fetch.sh unpacks into the folders that
// $ZEROHOP_CUDA_LIBS lists (colon-separated); every test runs once per
// folder. The libraries are loaded by path, as $ZEROHOP_NVRTC and an NVRTC
// outside the linker's path are, not through LD_LIBRARY_PATH.
//
// What this verifies that the fake driver cannot: that NVIDIA's compiler
// accepts kernels/voxel.cu for every architecture from sm_70 to sm_90 and
// lays out each kernel's parameters as the Go side packs them; that every
// launch fits the registers and shared memory of a block; that NVRTC finds
// its builtins through our preload; that the real libcuda.so.1 exports
// every symbol the binding resolves, answers cuInit without a GPU with
// CUDA_ERROR_NO_DEVICE (the agent's "no GPU" condition), and names each
// CUresult as our table does. What it cannot verify: anything that runs on
// a GPU (make gpu-check).

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ebitengine/purego"
)

const envCUDALibs = "ZEROHOP_CUDA_LIBS"

// cudaLibSet is one folder of real libraries: a driver and an NVRTC.
type cudaLibSet struct {
	name   string // the Debian release, from the folder's path
	dir    string
	driver string // libcuda.so.1
	nvrtc  string // libnvrtc.so.<soname version>
}

// realCUDALibs lists the folders of real libraries; the tests fail (never
// skip) without them.
func realCUDALibs(t *testing.T) []cudaLibSet {
	t.Helper()
	list := os.Getenv(envCUDALibs)
	if list == "" {
		t.Fatalf("$%s is not set: make test-cuda-libs fetches the libraries and sets it", envCUDALibs)
	}
	var sets []cudaLibSet
	for _, dir := range filepath.SplitList(list) {
		set := cudaLibSet{name: filepath.Base(filepath.Dir(dir)), dir: dir, driver: filepath.Join(dir, "libcuda.so.1")}
		// The soname is the shortest libnvrtc.so.* name (libnvrtc.so.12, not
		// libnvrtc.so.12.4.127).
		names, _ := filepath.Glob(filepath.Join(dir, "libnvrtc.so.*"))
		for _, n := range names {
			if set.nvrtc == "" || len(n) < len(set.nvrtc) {
				set.nvrtc = n
			}
		}
		builtins, _ := filepath.Glob(filepath.Join(dir, "libnvrtc-builtins.so.*"))
		if _, err := os.Stat(set.driver); err != nil || set.nvrtc == "" || len(builtins) == 0 {
			t.Fatalf("$%s: %s lacks libcuda.so.1, libnvrtc.so.* or libnvrtc-builtins.so.* (scripts/cuda-libs/fetch.sh puts them there)", envCUDALibs, dir)
		}
		if strings.Contains(os.Getenv("LD_LIBRARY_PATH"), dir) {
			t.Fatalf("LD_LIBRARY_PATH holds %s: these tests load the libraries by path, so that NVRTC finds its builtins only through our preload", dir)
		}
		sets = append(sets, set)
	}
	return sets
}

// eachCUDALibSet runs f as a subtest per folder of real libraries.
func eachCUDALibSet(t *testing.T, f func(t *testing.T, set cudaLibSet)) {
	for _, set := range realCUDALibs(t) {
		t.Run(set.name, func(t *testing.T) { f(t, set) })
	}
}

func openRealNVRTC(t *testing.T, set cudaLibSet) *NVRTC {
	t.Helper()
	nv, err := OpenNVRTC(set.nvrtc)
	if err != nil {
		t.Fatal(err)
	}
	if major, minor := nv.Version(); major < 11 {
		t.Fatalf("%s is NVRTC %d.%d, want 11.2 or newer", set.nvrtc, major, minor)
	}
	return nv
}

// maxLaunchBlock is the largest block any voxel kernel is launched with.
var maxLaunchBlock = max(sortThreads, scanThreads, pointThreads)

// TestRealNVRTCCompilesTheVoxelKernels compiles kernels/voxel.cu as the
// filter does (cachedCubin, voxelCompileArgs) for each real architecture
// NVRTC supports from sm_70 on, and reads the cubin NVIDIA's compiler
// made: every kernel the Go side launches is in it, with the parameter
// count and sizes its pack function produces, and fits a launch block.
func TestRealNVRTCCompilesTheVoxelKernels(t *testing.T) { eachCUDALibSet(t, realVoxelKernels) }

func realVoxelKernels(t *testing.T, set cudaLibSet) {
	nv := openRealNVRTC(t, set)
	major, minor := nv.Version()
	archs, err := nv.SupportedArchs()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []int{70, 75, 80, 86, 87, 89, 90} {
		if !slices.Contains(archs, want) {
			t.Errorf("NVRTC %d.%d supports %v, not sm_%d", major, minor, archs, want)
		}
	}
	packed := packedVoxelKernels()
	cache := t.TempDir()
	for _, arch := range archs {
		if arch < 70 {
			continue // compileTarget never picks these: the kernels use sm_70's warp intrinsics
		}
		target := fmt.Sprintf("sm_%d", arch)
		t.Run(target, func(t *testing.T) {
			options := voxelCompileArgs(target)
			key := cubinCacheKey(voxelSource, target, major, minor, options)
			image, hit, err := cachedCubin(cache, key, nv.Compile, voxelSource, "voxel.cu", options)
			if err != nil || hit {
				t.Fatalf("compile: hit %t, %v", hit, err)
			}
			if again, hit, err := cachedCubin(cache, key, nv.Compile, voxelSource, "voxel.cu", options); err != nil || !hit || !slices.Equal(again, image) {
				t.Errorf("second compile: hit %t, same %t, %v; want the cached cubin", hit, slices.Equal(again, image), err)
			}
			if got := cubinArch(image); got != arch {
				t.Errorf("cubin is for sm_%d", got)
			}
			kernels, err := parseCubin(image)
			if err != nil {
				t.Fatal(err)
			}
			if len(kernels) != int(numVoxelKernels) {
				t.Errorf("cubin has %d kernels, Go launches %d", len(kernels), numVoxelKernels)
			}
			var table strings.Builder
			for k := range numVoxelKernels {
				name := voxelKernelNames[k]
				kern := kernels[name]
				if kern == nil {
					t.Errorf("%s: not in the cubin", name)
					continue
				}
				if got, want := kern.paramSizes(), kindSizes(packed[k]); !slices.Equal(got, want) {
					t.Errorf("%s: the compiler's parameter sizes %v, Go packs %v (%v)", name, got, want, packed[k])
				}
				checkLaunchFits(t, kern)
				fmt.Fprintf(&table, "\n  %-16s %3d registers, %5d B shared, %3d B stack, %2d params", name, kern.Registers, kern.StaticShared, kern.Stack, len(kern.Params))
			}
			t.Logf("NVRTC %d.%d, %s, %d-byte cubin:%s", major, minor, target, len(image), table.String())
		})
	}
}

// checkLaunchFits fails when a block of maxLaunchBlock threads could not be
// launched on any architecture from sm_70 to sm_90 (65,536 registers and
// 48 KiB of static shared memory per block, 4 KiB of parameters), which a
// GPU would report only at the first launch
// (CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES).
func checkLaunchFits(t *testing.T, k *cubinKernel) {
	t.Helper()
	// Registers are allocated per warp in units of 256, so a thread's count
	// rounds up to a multiple of 8.
	regs := (k.Registers + 7) &^ 7
	if k.Registers <= 0 || regs*maxLaunchBlock > 65536 {
		t.Errorf("%s: %d registers per thread × %d threads exceed a block's 65,536", k.Name, k.Registers, maxLaunchBlock)
	}
	if k.StaticShared > 48<<10 {
		t.Errorf("%s: %d bytes of static shared memory exceed 48 KiB", k.Name, k.StaticShared)
	}
	if n := len(k.Params); n > 0 && k.Params[n-1].Offset+k.Params[n-1].Size > 4096 {
		t.Errorf("%s: %d bytes of parameters exceed 4 KiB", k.Name, k.Params[n-1].Offset+k.Params[n-1].Size)
	}
}

// TestRealNVRTCPTXForANewerGPU is the path of a GPU newer than the NVRTC
// found: PTX for the newest architecture NVRTC knows, JIT-compiled by the
// driver. The cache returns the PTX (no cubin), and it has every kernel.
func TestRealNVRTCPTXForANewerGPU(t *testing.T) { eachCUDALibSet(t, realPTXForANewerGPU) }

func realPTXForANewerGPU(t *testing.T, set cudaLibSet) {
	nv := openRealNVRTC(t, set)
	major, minor := nv.Version()
	archs, err := nv.SupportedArchs()
	if err != nil {
		t.Fatal(err)
	}
	target, err := compileTarget(120, archs) // an RTX 50 (sm_120) on an NVRTC that predates it
	if err != nil || target != "compute_90" {
		t.Fatalf("compileTarget(sm_120, %v) = %q, %v; want compute_90", archs, target, err)
	}
	options := voxelCompileArgs(target)
	image, _, err := cachedCubin(t.TempDir(), cubinCacheKey(voxelSource, "sm_120", major, minor, options), nv.Compile, voxelSource, "voxel.cu", options)
	if err != nil {
		t.Fatal(err)
	}
	ptx := string(image)
	if !strings.Contains(ptx, ".target sm_90") {
		t.Errorf("PTX does not target sm_90: %.200q", ptx)
	}
	for _, name := range voxelKernelNames {
		if !strings.Contains(ptx, ".entry "+name+"(") {
			t.Errorf("PTX has no entry %s", name)
		}
	}
}

// TestRealNVRTCCompileErrors: a kernel that needs a newer architecture
// and a syntax error both come back as ErrCompilation with NVIDIA's log.
func TestRealNVRTCCompileErrors(t *testing.T) { eachCUDALibSet(t, realCompileErrors) }

func realCompileErrors(t *testing.T, set cudaLibSet) {
	nv := openRealNVRTC(t, set)
	for _, tc := range []struct{ source, arch, inLog string }{
		{voxelSource, "sm_60", "__match_any_sync"},
		{`extern "C" __global__ void k(int* p) { p[0] = ; }`, "sm_90", "expected an expression"},
	} {
		_, err := nv.Compile(tc.source, "bad.cu", "--gpu-architecture="+tc.arch)
		var ne *NVRTCError
		if !errors.Is(err, ErrCompilation) || !errors.As(err, &ne) || !strings.Contains(ne.Log, tc.inLog) {
			t.Errorf("%s: %v; want ErrCompilation with %q in the log", tc.arch, err, tc.inLog)
		}
	}
}

// TestRealNVRTCCompilesTheTestKernel compiles axpbSource as the GPU tests
// do, and holds its parameters against testdata/axpb_sm90.cubin, which
// TestCubinInfoDecodesAKnownKernel reads without NVRTC. With
// ZEROHOP_UPDATE_TESTDATA=1, NVRTC 11.8 rewrites that file.
func TestRealNVRTCCompilesTheTestKernel(t *testing.T) { eachCUDALibSet(t, realTestKernel) }

func realTestKernel(t *testing.T, set cudaLibSet) {
	nv := openRealNVRTC(t, set)
	major, minor := nv.Version()
	out, err := nv.Compile(axpbSource, "axpb.cu", "--gpu-architecture=sm_90")
	if err != nil {
		t.Fatal(err)
	}
	const golden = "testdata/axpb_sm90.cubin"
	if os.Getenv("ZEROHOP_UPDATE_TESTDATA") == "1" && major == 11 && minor == 8 {
		if err := os.WriteFile(golden, out.CUBIN, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	got, err := parseCubin(out.CUBIN)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := parseCubin(want)
	if err != nil {
		t.Fatal(err)
	}
	if g, r := got["axpb"], ref["axpb"]; g == nil || r == nil || !slices.Equal(g.Params, r.Params) {
		t.Errorf("NVRTC %d.%d gives %+v, %s has %+v", major, minor, g, golden, r)
	}
	// The GPU tests' kernel as PTX, for a GPU machine without NVRTC: made
	// by NVRTC 11.8, as the embedded voxel PTX is.
	const ptxFile = "testdata/axpb_compute70.ptx"
	if fmt.Sprintf("%d.%d", major, minor) != embeddedPTXNVRTC {
		return
	}
	ptx, err := nv.Compile(axpbSource, "axpb.cu", "--gpu-architecture=compute_70")
	if err != nil {
		t.Fatal(err)
	}
	wantPTX := bytes.TrimRight(ptx.PTX, "\x00")
	if os.Getenv("ZEROHOP_UPDATE_TESTDATA") == "1" {
		if err := os.WriteFile(ptxFile, wantPTX, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if gotPTX, err := os.ReadFile(ptxFile); err != nil || !slices.Equal(gotPTX, wantPTX) {
		t.Errorf("%s is not what NVRTC %d.%d makes of axpbSource for compute_70 (%v): regenerate it with ZEROHOP_UPDATE_TESTDATA=1 make test-cuda-libs", ptxFile, major, minor, err)
	}
}

// TestRealNVRTCErrorNames holds our nvrtcResult names against the real
// library's nvrtcGetErrorString.
func TestRealNVRTCErrorNames(t *testing.T) { eachCUDALibSet(t, realNVRTCErrorNames) }

func realNVRTCErrorNames(t *testing.T, set cudaLibSet) {
	major, minor := openRealNVRTC(t, set).Version()
	h, err := purego.Dlopen(set.nvrtc, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		t.Fatal(err)
	}
	var errorString func(int32) string
	purego.RegisterLibFunc(&errorString, h, "nvrtcGetErrorString")
	named := 0
	for code := int32(0); code < 64; code++ {
		real := errorString(code)
		if real == "NVRTC_ERROR unknown" {
			if ours, have := nvrtcNames[NVRTCResult(code)]; have {
				t.Logf("%d %s: newer than NVRTC %d.%d", code, ours, major, minor)
			}
			continue
		}
		named++
		if ours := NVRTCResult(code).Name(); ours != real {
			t.Errorf("nvrtcResult %d: ours %q, NVRTC %d.%d %q", code, ours, major, minor, real)
		}
	}
	if named < 12 {
		t.Errorf("NVRTC %d.%d named %d codes, want at least 0..11", major, minor, named)
	}
	t.Logf("NVRTC %d.%d names %d codes, all as ours do", major, minor, named)
}

// TestRealDriverWithoutAGPU: the real libcuda.so.1 exports every symbol
// the binding needs (Open would fail with ErrNoDriver naming the first
// missing one), and on a machine without a GPU cuInit fails with
// CUDA_ERROR_NO_DEVICE, which callers take as "use the CPU".
func TestRealDriverWithoutAGPU(t *testing.T) { eachCUDALibSet(t, realDriverWithoutAGPU) }

func realDriverWithoutAGPU(t *testing.T, set cudaLibSet) {
	path := set.driver
	d, err := OpenLibrary(path)
	if err == nil {
		t.Fatalf("opened %s on a machine without a GPU: %v", path, d)
	}
	if errors.Is(err, ErrNoDriver) || !errors.Is(err, ErrNoDevice) {
		t.Fatalf("%v; want ErrNoDevice after every symbol resolved", err)
	}
	for _, s := range []string{"cuInit", "CUDA_ERROR_NO_DEVICE", path} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("%q does not name %s", err, s)
		}
	}
	t.Log(err)
}

// TestRealDriverErrorNames holds our CUresult table against the real
// driver's cuGetErrorName, code by code: every code the driver names must
// have the same name in ours. Codes newer than the driver are only logged.
func TestRealDriverErrorNames(t *testing.T) { eachCUDALibSet(t, realDriverErrorNames) }

func realDriverErrorNames(t *testing.T, set cudaLibSet) {
	d := &dlDriver{}
	if _, err := loadLibrary(set.driver, d.symbols()); err != nil {
		t.Fatal(err)
	}
	// cuDriverGetVersion needs no cuInit.
	version, r := d.driverGetVersion()
	if r != 0 || version < 12000 {
		t.Fatalf("cuDriverGetVersion: %d, %v; want CUDA 12.x or newer", version, r)
	}
	driver := fmt.Sprintf("the CUDA %d.%d driver", version/1000, version%1000/10)
	named := 0
	for code := Result(0); code < 1100; code++ {
		real, ok := d.errorName(code)
		if !ok {
			if ours, have := resultNames[code]; have {
				t.Logf("%d %s: newer than %s", code, ours, driver)
			}
			continue
		}
		named++
		if ours := resultNames[code]; ours != real {
			t.Errorf("CUresult %d: ours %q, %s %q", code, ours, driver, real)
		}
		if s, ok := d.errorString(code); !ok || s == "" {
			t.Errorf("CUresult %d (%s): no description", code, real)
		}
	}
	if named < 80 {
		t.Errorf("%s named %d codes; is cuGetErrorName answering?", driver, named)
	}
	t.Logf("%s names %d codes, all as ours do", driver, named)
}

// TestRealNVRTCMakesTheEmbeddedPTX compiles kernels/voxel.cu as
// kernels/voxel.ptx says it was made (NVRTC 11.8, compute_70) and wants the
// same bytes; with ZEROHOP_UPDATE_TESTDATA=1 it rewrites the file. Only the
// folder whose NVRTC is 11.8 can check it; the others that still target
// sm_70 (CUDA 13 does not) compile the same source for it.
func TestRealNVRTCMakesTheEmbeddedPTX(t *testing.T) {
	checked := false
	eachCUDALibSet(t, func(t *testing.T, set cudaLibSet) {
		nv := openRealNVRTC(t, set)
		major, minor := nv.Version()
		if archs, err := nv.SupportedArchs(); err != nil || !slices.Contains(archs, embeddedPTXArch) {
			// CUDA 13 dropped Volta: its NVRTC cannot make compute_70 PTX
			// (the driver still JITs the PTX an older NVRTC made).
			t.Logf("NVRTC %d.%d does not target sm_%d (%v, %v): nothing to compare", major, minor, embeddedPTXArch, archs, err)
			return
		}
		out, err := nv.Compile(voxelSource, "voxel.cu", embeddedPTXOptions()...)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprintf("%d.%d", major, minor) != embeddedPTXNVRTC {
			t.Logf("NVRTC %d.%d: %d bytes of PTX for %s; the embedded one comes from NVRTC %s", major, minor, len(out.PTX), EmbeddedTarget, embeddedPTXNVRTC)
			return
		}
		checked = true
		want := embeddedPTXFile(voxelSource, out.PTX)
		const file = "kernels/voxel.ptx"
		if os.Getenv("ZEROHOP_UPDATE_TESTDATA") == "1" {
			if err := os.WriteFile(file, want, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		got, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s (%d bytes) is not what NVRTC %d.%d makes of kernels/voxel.cu (%d bytes): regenerate it with ZEROHOP_UPDATE_TESTDATA=1 make test-cuda-libs", file, len(got), major, minor, len(want))
		}
	})
	if !checked {
		t.Errorf("no folder of $%s has NVRTC %s, which makes the embedded PTX", envCUDALibs, embeddedPTXNVRTC)
	}
}
