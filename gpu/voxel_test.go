package gpu

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/zerohop/zerohop/voxel"
)

// These tests check the pure-Go side of the GPU voxel filter: the embedded
// source, its kernels' signatures against the Go argument packing, launch
// arithmetic and the cubin cache. None of them runs CUDA; the kernels
// themselves are checked against the CPU filter by voxel_gpu_test.go
// (-tags gpu, on a GPU machine).

// kernelSignatures parses the extern "C" __global__ kernels of src into
// their parameters' kinds.
func kernelSignatures(t *testing.T, src string) map[string][]argKind {
	t.Helper()
	re := regexp.MustCompile(`extern "C" __global__ void (\w+)\(([^)]*)\)`)
	sigs := map[string][]argKind{}
	for _, m := range re.FindAllStringSubmatch(src, -1) {
		var kinds []argKind
		for _, p := range strings.Split(m[2], ",") {
			p = strings.Join(strings.Fields(p), " ")
			if p == "" {
				continue
			}
			typ := p[:strings.LastIndexAny(p, " *")+1]
			typ = strings.TrimSpace(strings.TrimPrefix(typ, "const "))
			switch {
			case strings.HasSuffix(typ, "*"):
				kinds = append(kinds, argPtr)
			case typ == "u32":
				kinds = append(kinds, argU32)
			case typ == "int":
				kinds = append(kinds, argI32)
			case typ == "float":
				kinds = append(kinds, argF32)
			case typ == "u64":
				kinds = append(kinds, argU64)
			case typ == "i64":
				kinds = append(kinds, argI64)
			case typ == "double":
				kinds = append(kinds, argF64)
			default:
				t.Fatalf("kernel %s: parameter %q has a type the packing does not know", m[1], p)
			}
		}
		sigs[m[1]] = kinds
	}
	return sigs
}

func TestVoxelSourceIsEmbeddedWithEveryKernel(t *testing.T) {
	if len(voxelSource) < 1000 {
		t.Fatalf("embedded kernels/voxel.cu has %d bytes", len(voxelSource))
	}
	disk, err := os.ReadFile("kernels/voxel.cu")
	if err != nil {
		t.Fatal(err)
	}
	if string(disk) != voxelSource {
		t.Fatal("embedded source differs from kernels/voxel.cu")
	}
	sigs := kernelSignatures(t, voxelSource)
	if len(sigs) != int(numVoxelKernels) {
		t.Errorf("voxel.cu defines %d kernels, Go launches %d", len(sigs), numVoxelKernels)
	}
	for k, name := range voxelKernelNames {
		if name == "" {
			t.Errorf("kernel %d has no name", k)
		}
		if _, ok := sigs[name]; !ok {
			t.Errorf("kernel %s is not defined in voxel.cu", name)
		}
	}
}

// packedVoxelKernels packs each kernel's arguments with its pack function,
// as runOnThread does (values are arbitrary; the kinds are what counts).
func packedVoxelKernels() map[voxelKernel][]argKind {
	var l argList
	c := cloudArgs{pts: 1, n: 2, step: 16, ox: 0, oy: 4, oz: 8, oi: 12}
	crop := cropArgs{crop: 1, min: [3]float32{-1, -2, -3}, max: [3]float32{1, 2, 3}}
	g := voxelGrid{min: [3]int64{-5, -6, -7}, dim: [3]uint64{10, 11, 12}}
	ceil := ceilingArgsOf(voxel.Config{Mount: voxel.Mount{Pitch: 0.1}, Ceiling: new(float32)})
	b := bevArgsOf(voxel.BEVConfig{H: 128, W: 128, Cell: 0.2, MaxHeight: 3, Mount: voxel.Mount{Pitch: 0.1}})
	return map[voxelKernel][]argKind{
		kBounds:       slices.Clone(packBounds(&l, c, crop, ceil, 3).Kinds()),
		kKeys:         slices.Clone(packKeys(&l, c, crop, ceil, [3]float32{5, 5, 5}, g, 4, 5, 3).Kinds()),
		kRadixHist:    slices.Clone(packRadixHist(&l, 4, 2, 8, true, 5).Kinds()),
		kRadixScatter: slices.Clone(packRadixScatter(&l, 4, 5, 2, 8, false, 6, 7, 8).Kinds()),
		kScanTiles:    slices.Clone(packScanTiles(&l, 4, 4, 9, 5).Kinds()),
		kScanSums:     slices.Clone(packScanSums(&l, 5, 1, 6).Kinds()),
		kScanAdd:      slices.Clone(packScanAdd(&l, 4, 5, 9).Kinds()),
		kHeads:        slices.Clone(packHeads(&l, 4, 9, 5).Kinds()),
		kStarts:       slices.Clone(packStarts(&l, 4, 5, 9, 6).Kinds()),
		kReduce:       slices.Clone(packReduce(&l, 3, 4, 5, 6, 9, 1, upRowOf(voxel.Mount{Z: 0.5, Pitch: 0.1}), 7, 10, 8).Kinds()),
		kCompact:      slices.Clone(packCompact(&l, 4, 10, 5, 6, 9, 7, 8, 11, 12).Kinds()),
		kBEVClear:     slices.Clone(packBEVClear(&l, 4, 5, 6, 99).Kinds()),
		kBEVCells:     slices.Clone(packBEVCells(&l, 4, 10, 5, 9, b, 6, 7, 8).Kinds()),
		kBEVFill:      slices.Clone(packBEVFill(&l, 4, 5, 6, 9, 7, 8).Kinds()),
		kBEVFinish:    slices.Clone(packBEVFinish(&l, 4, 5, 6, 7, 8, 99, 9).Kinds()),
	}
}

// TestVoxelKernelPackingMatchesSignatures packs each kernel's arguments as
// runOnThread does and compares them, type by type, with the C signature.
func TestVoxelKernelPackingMatchesSignatures(t *testing.T) {
	sigs := kernelSignatures(t, voxelSource)
	packed := packedVoxelKernels()
	for k := range numVoxelKernels {
		name := voxelKernelNames[k]
		got, ok := packed[k]
		if !ok {
			t.Errorf("%s: no packing tested", name)
			continue
		}
		if want := sigs[name]; !slices.Equal(got, want) {
			t.Errorf("%s: Go packs %v, the kernel takes %v", name, got, want)
		}
		if len(got) > maxKernelArgs {
			t.Errorf("%s: %d arguments exceed maxKernelArgs %d", name, len(got), maxKernelArgs)
		}
	}
}

// TestArgListIntoKernelArgs checks that each kind lands in its slot with its
// C size: 4-byte values zero-padded, 8-byte values whole.
func TestArgListIntoKernelArgs(t *testing.T) {
	a, err := newKernelArgs(cMemory(t, 2*slotSize*maxKernelArgs), maxKernelArgs)
	if err != nil {
		t.Fatal(err)
	}
	var l argList
	l.reset().u32(7).i32(-2).f32(1.5).u64(1<<40 + 3).i64(-5).ptr(0xdead_beef_0000)
	if err := l.into(a); err != nil {
		t.Fatal(err)
	}
	if a.Len() != 6 {
		t.Fatalf("packed %d values, want 6", a.Len())
	}
	want := []uint64{7, 0xffff_fffe, uint64(math.Float32bits(1.5)), 1<<40 + 3, uint64(1<<64 - 5), 0xdead_beef_0000}
	for i, w := range want {
		got := binary.NativeEndian.Uint64(a.mem[a.valueOffset(i):])
		if got != w {
			t.Errorf("value %d (%v) = %#x, want %#x", i, l.kinds[i], got, w)
		}
	}
	l.reset()
	for range maxKernelArgs + 1 {
		l.u32(1)
	}
	if err := l.into(a); err == nil {
		t.Error("an argument list over capacity packed without error")
	}
}

func TestVoxelSourceConstantsMatchGo(t *testing.T) {
	defines := map[string]int{}
	re := regexp.MustCompile(`(?m)^#define (\w+) (\d+)\b`)
	for _, m := range re.FindAllStringSubmatch(voxelSource, -1) {
		v, _ := strconv.Atoi(m[2])
		defines[m[1]] = v
	}
	for name, want := range map[string]int{
		"RADIX": radixSizeGPU, "SORT_THREADS": sortThreads, "SORT_ITEMS": sortItems,
		"SCAN_THREADS": scanThreads, "SCAN_ITEMS": scanItems,
		"ST_MIN": stMin, "ST_MAX": stMax, "ST_ACCEPTED": stAccepted, "ST_SEGMENTS": stSegments,
		"ST_VOXELS": stVoxels, "ST_MISS": stMiss, "ST_BEVTOTAL": stBEVTotal,
	} {
		got, ok := defines[name]
		if !ok || got != want {
			t.Errorf("#define %s = %d (defined %t), Go has %d", name, got, ok, want)
		}
	}
	if stScratch >= stateWords || stBEVTotal >= stateWords {
		t.Errorf("state words %d, %d beyond the %d-word block", stScratch, stBEVTotal, stateWords)
	}
}

func TestLaunchArithmetic(t *testing.T) {
	for _, c := range []struct{ n, per, want int }{
		{0, 256, 0}, {1, 256, 1}, {256, 256, 1}, {257, 256, 2},
		{115_200, sortTile, 57}, {288_000, sortTile, 141}, {288_000, pointThreads, 1125},
	} {
		if got := blocks(c.n, c.per); int(got) != c.want {
			t.Errorf("blocks(%d, %d) = %d, want %d", c.n, c.per, got, c.want)
		}
	}
	for _, c := range []struct{ keyBits, want int }{{0, 1}, {1, 1}, {8, 1}, {9, 2}, {24, 3}, {63, 8}} {
		if got := radixPasses(c.keyBits); got != c.want {
			t.Errorf("radixPasses(%d) = %d, want %d", c.keyBits, got, c.want)
		}
	}
	for _, c := range []struct{ n, want int }{{1, 1}, {1024, 1}, {1025, 2}, {256 * 141, 36}} {
		if got := scanTiles(c.n); got != c.want {
			t.Errorf("scanTiles(%d) = %d, want %d", c.n, got, c.want)
		}
	}
	// The sums kernel scans the tile sums in one block, SCAN_THREADS at a
	// time: any count works, but the layout must hold them all.
	l := newVoxelLayout(288_000, 288_000*16, 128*128)
	need := 4 * uint64(scanTiles(radixSizeGPU*int(blocks(288_000, sortTile))))
	if l.flags-l.tileSum < need {
		t.Errorf("tile sums get %d bytes, the radix scan needs %d", l.flags-l.tileSum, need)
	}
}

func TestVoxelLayoutIsAlignedAndDisjoint(t *testing.T) {
	const n, cells = 115_200, 128 * 128
	l := newVoxelLayout(n, n*16, cells)
	offs := []struct {
		name       string
		off, bytes uint64
	}{
		{"inDev", l.inDev, n * 16}, {"keys0", l.keys0, 8 * n}, {"points", l.points, 16 * n}, {"keyA", l.keyA, 8 * n}, {"keyB", l.keyB, 8 * n},
		{"idxA", l.idxA, 4 * n}, {"idxB", l.idxB, 4 * n}, {"hist", l.hist, 4 * 256 * 57},
		{"flags", l.flags, 4 * n}, {"starts", l.starts, 4 * n}, {"keep", l.keep, 4 * n},
		{"vox", l.vox, 16 * n}, {"voxOut", l.voxOut, 16 * n}, {"state", l.state, 4 * stateWords},
		{"cellOf", l.cellOf, 4 * n}, {"cellLst", l.cellLst, 4 * n}, {"cellCnt", l.cellCnt, 4 * cells},
		{"cellOff", l.cellOff, 4 * cells}, {"cellCur", l.cellCur, 4 * cells}, {"cellH", l.cellH, 4 * cells},
	}
	for i, a := range offs {
		if a.off%256 != 0 {
			t.Errorf("%s at %d is not 256-byte aligned", a.name, a.off)
		}
		if a.off+a.bytes > l.size {
			t.Errorf("%s [%d, %d) beyond the block of %d", a.name, a.off, a.off+a.bytes, l.size)
		}
		for _, b := range offs[i+1:] {
			if a.off < b.off+b.bytes && b.off < a.off+a.bytes {
				t.Errorf("%s [%d, +%d) overlaps %s [%d, +%d)", a.name, a.off, a.bytes, b.name, b.off, b.bytes)
			}
		}
	}
}

// ordered is the kernels' ordered() in Go, to check fromOrdered and the
// order it gives.
func ordered(f float32) uint32 {
	u := math.Float32bits(f)
	if u&(1<<31) != 0 {
		return ^u
	}
	return u | 1<<31
}

func TestOrderedBits(t *testing.T) {
	vals := []float32{float32(math.Inf(-1)), -3e38, -2, -1e-40, float32(math.Copysign(0, -1)), 0, 1e-40, 1, 2.5, 3e38, float32(math.Inf(1))}
	for i, v := range vals {
		if got := fromOrdered(ordered(v)); math.Float32bits(got) != math.Float32bits(v) {
			t.Errorf("fromOrdered(ordered(%g)) = %g", v, got)
		}
		if i > 0 && ordered(vals[i-1]) >= ordered(v) {
			t.Errorf("ordered(%g) = %#x not below ordered(%g) = %#x", vals[i-1], ordered(vals[i-1]), v, ordered(v))
		}
	}
}

func TestGridFor(t *testing.T) {
	inv := [3]float32{5, 5, 5} // float32(1/0.2)
	leaf := [3]float32{0.2, 0.2, 0.2}
	g, err := gridFor([3]float32{-0.1, 0, 1}, [3]float32{0.3, 0.19, 1.2}, inv, leaf)
	if err != nil {
		t.Fatal(err)
	}
	// floor(-0.5) = -1 .. floor(1.5) = 1; 0 .. floor(0.95) = 0; 5 .. 6.
	if want := (voxelGrid{min: [3]int64{-1, 0, 5}, dim: [3]uint64{3, 1, 2}}); g != want {
		t.Errorf("grid %+v, want %+v", g, want)
	}
	if kb := g.keyBits(); kb != 3 {
		t.Errorf("key bits of 3×1×2 voxels = %d, want 3", kb)
	}
	tiny := [3]float32{1e-30, 1e-30, 1e-30}
	_, err = gridFor([3]float32{-1e9, 0, 0}, [3]float32{1e9, 0, 0}, [3]float32{1e30, 1e30, 1e30}, tiny)
	if !errors.Is(err, voxel.ErrGridTooLarge) {
		t.Errorf("indices beyond 2^62: err %v, want ErrGridTooLarge", err)
	}
	_, err = gridFor([3]float32{-1e6, -1e6, -1e6}, [3]float32{1e6, 1e6, 1e6}, [3]float32{1e6, 1e6, 1e6}, [3]float32{1e-6, 1e-6, 1e-6})
	if !errors.Is(err, voxel.ErrGridTooLarge) {
		t.Errorf("more than 2^63 voxels: err %v, want ErrGridTooLarge", err)
	}
	// Exactly ±2^62, as the CPU filter refuses it (its keys pass would miss).
	for _, x := range []float32{1 << 62, -(1 << 62)} {
		if _, err := gridFor([3]float32{x, 0, 0}, [3]float32{x, 0, 0}, [3]float32{1, 1, 1}, [3]float32{1, 1, 1}); !errors.Is(err, voxel.ErrGridTooLarge) {
			t.Errorf("index %g: err %v, want ErrGridTooLarge", x, err)
		}
	}
}

func TestCubinCacheKey(t *testing.T) {
	base := cubinCacheKey("src", "sm_90", 12, 4, []string{"--fmad=false"})
	if len(base) != 64 {
		t.Fatalf("key %q is not a hex sha256", base)
	}
	if again := cubinCacheKey("src", "sm_90", 12, 4, []string{"--fmad=false"}); again != base {
		t.Errorf("same inputs gave keys %s and %s", base, again)
	}
	for name, key := range map[string]string{
		"source":        cubinCacheKey("src2", "sm_90", 12, 4, []string{"--fmad=false"}),
		"arch":          cubinCacheKey("src", "sm_89", 12, 4, []string{"--fmad=false"}),
		"NVRTC major":   cubinCacheKey("src", "sm_90", 13, 4, []string{"--fmad=false"}),
		"NVRTC minor":   cubinCacheKey("src", "sm_90", 12, 5, []string{"--fmad=false"}),
		"options":       cubinCacheKey("src", "sm_90", 12, 4, nil),
		"field borders": cubinCacheKey("sr", "csm_90", 12, 4, []string{"--fmad=false"}),
	} {
		if key == base {
			t.Errorf("changing the %s kept the key", name)
		}
	}
}

func TestCachedCubin(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cubin")
	calls := 0
	compile := func(source, name string, options ...string) (Compiled, error) {
		calls++
		return Compiled{CUBIN: []byte("cubin of " + source + " " + strings.Join(options, " "))}, nil
	}
	opts := []string{"--gpu-architecture=sm_90"}
	first, hit, err := cachedCubin(dir, "k1", compile, "src", "voxel.cu", opts)
	if err != nil || hit || calls != 1 {
		t.Fatalf("first call: hit %t, %d compiles, err %v", hit, calls, err)
	}
	second, hit, err := cachedCubin(dir, "k1", compile, "src", "voxel.cu", opts)
	if err != nil || !hit || calls != 1 || string(second) != string(first) {
		t.Fatalf("second call: hit %t, %d compiles, %q vs %q, err %v", hit, calls, second, first, err)
	}
	if _, hit, _ := cachedCubin(dir, "k2", compile, "src", "voxel.cu", opts); hit || calls != 2 {
		t.Errorf("another key: hit %t after %d compiles", hit, calls)
	}
	entries, _ := filepath.Glob(filepath.Join(dir, "*.tmp"))
	if len(entries) != 0 {
		t.Errorf("temporary files left: %v", entries)
	}

	failing := func(string, string, ...string) (Compiled, error) { return Compiled{}, ErrCompilation }
	if _, _, err := cachedCubin(dir, "k3", failing, "src", "voxel.cu", opts); !errors.Is(err, ErrCompilation) {
		t.Errorf("failing compile: err %v", err)
	}
	empty := func(string, string, ...string) (Compiled, error) { return Compiled{PTX: []byte("ptx")}, nil }
	if _, _, err := cachedCubin(dir, "k4", empty, "src", "voxel.cu", opts); err == nil {
		t.Error("a compile without cubin was accepted")
	}

	// An unwritable cache still yields the cubin.
	blocked := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(blocked, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	got, hit, err := cachedCubin(filepath.Join(blocked, "cubin"), "k5", compile, "src", "voxel.cu", opts)
	if err != nil || hit || len(got) == 0 {
		t.Errorf("unwritable cache: %q, hit %t, err %v", got, hit, err)
	}
}

func TestDefaultCubinCacheDir(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", "/tmp/xdg-test")
	if got, want := DefaultCubinCacheDir(), "/tmp/xdg-test/zerohop/cubin"; got != want {
		t.Errorf("DefaultCubinCacheDir() = %q, want %q", got, want)
	}
	t.Setenv("XDG_CACHE_HOME", "")
	t.Setenv("HOME", "")
	if got, want := DefaultCubinCacheDir(), filepath.Join(".cache", "cubin"); got != want {
		t.Errorf("without XDG_CACHE_HOME and HOME: %q, want %q", got, want)
	}
}

func TestCompileTarget(t *testing.T) {
	cuda129 := []int{50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 89, 90, 100, 101, 103, 120, 121}
	cuda118 := []int{35, 37, 50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 89, 90}
	for _, tc := range []struct {
		dev   int
		archs []int
		want  string // "" = an error
	}{
		{90, cuda129, "sm_90"},
		{87, cuda129, "sm_87"},       // Jetson Orin
		{90, nil, "sm_90"},           // NVRTC before 11.2 cannot say: try the device's own
		{120, cuda118, "compute_90"}, // an RTX 50 with CUDA 11.8's NVRTC: PTX the driver JITs
		{110, cuda118, "compute_90"}, // newer than every listed architecture
		{89, []int{75, 80, 86}, "compute_86"},
		{75, []int{80, 86, 90}, ""},     // nothing the device can run
		{72, []int{52, 53, 60, 61}, ""}, // nothing at sm_70 or newer
	} {
		got, err := compileTarget(tc.dev, tc.archs)
		if tc.want == "" {
			if err == nil || !errors.Is(err, ErrNotSupported) {
				t.Errorf("compileTarget(%d, %v) = %q, %v; want an ErrNotSupported error", tc.dev, tc.archs, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("compileTarget(%d, %v) = %q, %v; want %q", tc.dev, tc.archs, got, err, tc.want)
		}
	}
}

// TestOnlyARefusedImageIsAKernelImageError: the agent retries with the
// embedded PTX only after ErrKernelImage, so only the codes with which a
// driver refuses the image itself may carry it. Out of memory (a Jetson
// sharing its memory with TensorRT), a lost context, a sticky launch
// error, or a missing JIT compiler would fail the PTX too, after a JIT
// compile of seconds. Every error keeps its CUDA code.
func TestOnlyARefusedImageIsAKernelImageError(t *testing.T) {
	tests := []struct {
		code  Result
		image bool
	}{
		{200, true},  // INVALID_IMAGE
		{209, true},  // NO_BINARY_FOR_GPU
		{218, true},  // INVALID_PTX
		{222, true},  // UNSUPPORTED_PTX_VERSION
		{300, true},  // INVALID_SOURCE
		{500, true},  // NOT_FOUND: a kernel missing
		{1, false},   // INVALID_VALUE
		{2, false},   // OUT_OF_MEMORY
		{3, false},   // NOT_INITIALIZED
		{4, false},   // DEINITIALIZED
		{201, false}, // INVALID_CONTEXT
		{221, false}, // JIT_COMPILER_NOT_FOUND
		{223, false}, // JIT_COMPILATION_DISABLED
		{700, false}, // ILLEGAL_ADDRESS (sticky, from an earlier launch)
		{719, false}, // LAUNCH_FAILED
		{999, false}, // UNKNOWN
	}
	f := &VoxelFilter{target: "sm_90"}
	for _, tt := range tests {
		t.Run(tt.code.Name(), func(t *testing.T) {
			// Wrapped as LoadModule wraps the binding's error.
			err := f.imageError(fmt.Errorf("gpu: load module of 4096 bytes: %w", &Error{Op: "cuModuleLoadDataEx", Code: tt.code}))
			if got := errors.Is(err, ErrKernelImage); got != tt.image {
				t.Errorf("errors.Is(%v, ErrKernelImage) = %t, want %t", err, got, tt.image)
			}
			if !errors.Is(err, tt.code) || !strings.Contains(err.Error(), "sm_90") {
				t.Errorf("%v: lost its CUDA code %d or the image's target", err, int32(tt.code))
			}
		})
	}
}
