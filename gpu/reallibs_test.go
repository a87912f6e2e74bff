//go:build cudalibs

package gpu

// The binding against NVIDIA's REAL libraries on a machine WITHOUT a GPU
// (make test-cuda-libs): Debian 12's libcuda.so.1 (driver 535, CUDA 12.2)
// and NVRTC 11.8, which scripts/cuda-libs/fetch.sh unpacks into the folder
// $ZEROHOP_CUDA_LIBS names. The libraries are loaded by path, as
// $ZEROHOP_NVRTC and an NVRTC outside the linker's path are, not through
// LD_LIBRARY_PATH.
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

// realCUDALibs is the folder of the real libraries; the tests fail (never
// skip) without it.
func realCUDALibs(t *testing.T) string {
	t.Helper()
	dir := os.Getenv(envCUDALibs)
	if dir == "" {
		t.Fatalf("$%s is not set: make test-cuda-libs fetches the libraries and sets it", envCUDALibs)
	}
	for _, f := range []string{"libcuda.so.1", "libnvrtc.so.11.2", "libnvrtc-builtins.so.11.8"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Fatalf("$%s=%s: %v (scripts/cuda-libs/fetch.sh puts it there)", envCUDALibs, dir, err)
		}
	}
	if strings.Contains(os.Getenv("LD_LIBRARY_PATH"), dir) {
		t.Fatalf("LD_LIBRARY_PATH holds %s: these tests load the libraries by path, so that NVRTC finds its builtins only through our preload", dir)
	}
	return dir
}

func openRealNVRTC(t *testing.T) *NVRTC {
	t.Helper()
	nv, err := OpenNVRTC(filepath.Join(realCUDALibs(t), "libnvrtc.so.11.2"))
	if err != nil {
		t.Fatal(err)
	}
	if major, minor := nv.Version(); major != 11 || minor != 8 {
		t.Fatalf("NVRTC %d.%d, want Debian's 11.8", major, minor)
	}
	return nv
}

// maxLaunchBlock is the largest block any voxel kernel is launched with.
var maxLaunchBlock = max(sortThreads, scanThreads, pointThreads)

// TestRealNVRTCCompilesTheVoxelKernels compiles kernels/voxel.cu as the
// filter does (cachedCubin, voxelCompileArgs) for each real architecture
// NVRTC 11.8 supports from sm_70 on, and reads the cubin NVIDIA's compiler
// made: every kernel the Go side launches is in it, with the parameter
// count and sizes its pack function produces, and fits a launch block.
func TestRealNVRTCCompilesTheVoxelKernels(t *testing.T) {
	nv := openRealNVRTC(t)
	archs, err := nv.SupportedArchs()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []int{70, 75, 80, 86, 87, 89, 90} {
		if !slices.Contains(archs, want) {
			t.Errorf("NVRTC 11.8 supports %v, not sm_%d", archs, want)
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
			key := cubinCacheKey(voxelSource, target, 11, 8, options)
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
			t.Logf("%s, %d-byte cubin:%s", target, len(image), table.String())
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
func TestRealNVRTCPTXForANewerGPU(t *testing.T) {
	nv := openRealNVRTC(t)
	archs, err := nv.SupportedArchs()
	if err != nil {
		t.Fatal(err)
	}
	target, err := compileTarget(120, archs) // an RTX 50 (sm_120) on CUDA 11.8's NVRTC
	if err != nil || target != "compute_90" {
		t.Fatalf("compileTarget(sm_120, %v) = %q, %v; want compute_90", archs, target, err)
	}
	options := voxelCompileArgs(target)
	image, _, err := cachedCubin(t.TempDir(), cubinCacheKey(voxelSource, "sm_120", 11, 8, options), nv.Compile, voxelSource, "voxel.cu", options)
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
func TestRealNVRTCCompileErrors(t *testing.T) {
	nv := openRealNVRTC(t)
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
// do, and holds the result against testdata/axpb_sm90.cubin, which
// TestCubinInfoDecodesAKnownKernel reads without NVRTC. With
// ZEROHOP_UPDATE_TESTDATA=1 it rewrites that file.
func TestRealNVRTCCompilesTheTestKernel(t *testing.T) {
	nv := openRealNVRTC(t)
	out, err := nv.Compile(axpbSource, "axpb.cu", "--gpu-architecture=sm_90")
	if err != nil {
		t.Fatal(err)
	}
	const golden = "testdata/axpb_sm90.cubin"
	if os.Getenv("ZEROHOP_UPDATE_TESTDATA") == "1" {
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
	if g, r := got["axpb"], ref["axpb"]; g == nil || r == nil || fmt.Sprint(*g) != fmt.Sprint(*r) {
		t.Errorf("NVRTC 11.8 now gives %+v, %s has %+v", g, golden, r)
	}
}

// TestRealNVRTCErrorNames holds our nvrtcResult names against the real
// library's nvrtcGetErrorString.
func TestRealNVRTCErrorNames(t *testing.T) {
	path := filepath.Join(realCUDALibs(t), "libnvrtc.so.11.2")
	h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_LOCAL)
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
				t.Logf("%d %s: newer than NVRTC 11.8", code, ours)
			}
			continue
		}
		named++
		if ours := NVRTCResult(code).Name(); ours != real {
			t.Errorf("nvrtcResult %d: ours %q, NVRTC 11.8 %q", code, ours, real)
		}
	}
	if named < 12 {
		t.Errorf("NVRTC 11.8 named %d codes, want at least 0..11", named)
	}
	t.Logf("NVRTC 11.8 names %d codes, all as ours do", named)
}

// TestRealDriverWithoutAGPU: the real libcuda.so.1 exports every symbol
// the binding needs (Open would fail with ErrNoDriver naming the first
// missing one), and on a machine without a GPU cuInit fails with
// CUDA_ERROR_NO_DEVICE, which callers take as "use the CPU".
func TestRealDriverWithoutAGPU(t *testing.T) {
	path := filepath.Join(realCUDALibs(t), "libcuda.so.1")
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
// driver's cuGetErrorName, code by code: every code the 535 driver names
// must have the same name in ours. Codes newer than CUDA 12.2 are only
// logged.
func TestRealDriverErrorNames(t *testing.T) {
	path := filepath.Join(realCUDALibs(t), "libcuda.so.1")
	d := &dlDriver{}
	if _, err := loadLibrary(path, d.symbols()); err != nil {
		t.Fatal(err)
	}
	named := 0
	for code := Result(0); code < 1100; code++ {
		real, ok := d.errorName(code)
		if !ok {
			if ours, have := resultNames[code]; have {
				t.Logf("%d %s: newer than driver 535", code, ours)
			}
			continue
		}
		named++
		if ours := resultNames[code]; ours != real {
			t.Errorf("CUresult %d: ours %q, driver 535 %q", code, ours, real)
		}
		if s, ok := d.errorString(code); !ok || s == "" {
			t.Errorf("CUresult %d (%s): no description", code, real)
		}
	}
	if named < 80 {
		t.Errorf("driver 535 named %d codes; is cuGetErrorName answering?", named)
	}
	t.Logf("driver 535 names %d codes, all as ours do", named)
}
