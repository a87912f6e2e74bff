package gpu

// The real binding (dlDriver, purego, unsafe.go) and VoxelFilter's launch
// sequence against the FAKE CUDA driver and NVRTC of testdata/fakecuda (C++
// with cuda.h's signatures, kernels on the host emulation). This is
// plumbing: it proves nothing about CUDA, NVRTC or a GPU, and never counts
// as GPU verification (make gpu-check does, on a GPU machine). It does
// catch, without a GPU, a wrong symbol, argument order or width, a call off
// the context thread, a host address passed as a device one, a launch that
// disagrees with the kernels, and anything left allocated.

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/zerohop/zerohop/gpu/fakecuda"
	"github.com/zerohop/zerohop/pinned"
	"github.com/zerohop/zerohop/voxel"
)

// The fakes are built once per test binary: g++ takes seconds.
var fakeLibs struct {
	once sync.Once
	dir  string // where they are built, removed by TestMain
	libs fakecuda.Libraries
	err  error
}

// TestMain removes the fakes' folder after the package's tests (a runner
// reused for many runs would keep one per run).
func TestMain(m *testing.M) {
	code := m.Run()
	if fakeLibs.dir != "" {
		os.RemoveAll(fakeLibs.dir)
	}
	os.Exit(code)
}

func buildFakeCUDA(t *testing.T) fakecuda.Libraries {
	t.Helper()
	fakeLibs.once.Do(func() {
		dir, err := os.MkdirTemp("", "zerohop-fakecuda-")
		if err != nil {
			fakeLibs.err = err
			return
		}
		fakeLibs.dir = dir
		fakeLibs.libs, fakeLibs.err = fakecuda.Build(dir)
	})
	if fakeLibs.err != nil {
		t.Fatal(fakeLibs.err)
	}
	return fakeLibs.libs
}

type fakeFixture struct {
	libs fakecuda.Libraries
	c    *Context
	nv   *NVRTC
}

func openFakeCUDA(t *testing.T) fakeFixture {
	t.Helper()
	libs := buildFakeCUDA(t)
	drv, err := OpenLibrary(libs.Driver)
	if err != nil {
		t.Fatalf("open the fake driver through the real binding: %v", err)
	}
	dev, err := drv.Device(0)
	if err != nil {
		t.Fatal(err)
	}
	caps, err := dev.Capabilities()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(caps.Name, "fake") || caps.Arch() != "sm_90" || !caps.CanMapHostMemory || !caps.HostRegister || !caps.ReadOnlyHostRegister {
		t.Fatalf("capabilities through the binding: %+v", caps)
	}
	if drv.Version() != "12.9" {
		t.Fatalf("driver version %q, the fake says 12.9", drv.Version())
	}
	c, err := dev.NewContext(ContextOptions{Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	nv, err := OpenNVRTC(libs.NVRTC)
	if err != nil {
		c.Close()
		t.Fatalf("open the fake NVRTC through the real binding: %v", err)
	}
	if ma, mi := nv.Version(); ma != 12 || mi != 9 {
		t.Fatalf("NVRTC version %d.%d, the fake says 12.9", ma, mi)
	}
	f := fakeFixture{libs: libs, c: c, nv: nv}
	// First registered, so it runs after the test's other cleanups.
	t.Cleanup(func() { f.closeAndCheckLeaks(t) })
	return f
}

// pinnedBuffer is n bytes of the context's mapped pinned memory, freed
// when the test ends (before the leak check).
func (f fakeFixture) pinnedBuffer(t *testing.T, n int) []byte {
	t.Helper()
	b, err := f.c.Allocate(n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.c.Free(b) })
	return b
}

// smallRingCloud is an 8 × 600 ring scan (with NaN/Inf) in the context's
// pinned memory, its point count and a 0.2 m leaf.
func (f fakeFixture) smallRingCloud(t *testing.T) (voxel.Cloud, int, voxel.Config) {
	t.Helper()
	src := ring(8, 600)
	data := f.pinnedBuffer(t, len(src))
	return layOut(data, src, 16), len(src) / 16, voxel.Config{Leaf: [3]float32{0.2, 0.2, 0.2}}
}

// closeAndCheckLeaks closes the context and fails if the fake driver still
// holds anything this test made; openFakeCUDA registers it as a cleanup.
func (f fakeFixture) closeAndCheckLeaks(t *testing.T) {
	t.Helper()
	if err := f.c.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if left, err := fakecuda.Leaks(f.libs.Driver); err != nil || len(left) > 0 {
		t.Errorf("fake driver after Close: left %v %v", left, err)
	}
}

func TestFakeCUDAVoxelFilterMatchesCPU(t *testing.T) {
	tiltedKITTI := voxel.Mount{X: 0.45, Y: -0.12, Roll: 0.026, Pitch: 0.14, Yaw: 0.21}
	upsideDown := voxel.Mount{Z: 1, Roll: math.Pi, Yaw: -0.3}
	ceiling := float32(0.3)
	f := openFakeCUDA(t)
	kitti, err := os.ReadFile("../voxel/testdata/scan_small.bin")
	if err != nil {
		t.Fatal(err)
	}
	crop := &voxel.Box{Min: [3]float32{-0.2, -12.8, -3}, Max: [3]float32{25.4, 12.8, 3}}
	for _, sc := range []struct {
		name string
		// data is XYZI; step > 16 re-lays it out with the fields shuffled
		// and padding, as a ROS PointCloud2 may arrive.
		data []byte
		step int
		cfg  voxel.Config
		bev  voxel.BEVConfig // zero: the default raster
	}{
		{"KITTI scan, leaf 0.2", kitti, 16, voxel.Config{Leaf: [3]float32{0.2, 0.2, 0.2}}, voxel.BEVConfig{}},
		{"KITTI scan, leaf 0.05, min points 2, crop", kitti, 16, voxel.Config{Leaf: [3]float32{0.05, 0.05, 0.05}, MinPoints: 2, Crop: crop}, voxel.BEVConfig{}},
		{"ring scan 8×600 with NaN/Inf, anisotropic leaf", ring(8, 600), 16, voxel.Config{Leaf: [3]float32{0.1, 0.3, 0.7}}, voxel.BEVConfig{}},
		{"ring scan, 32-byte points, shuffled fields", ring(8, 600), 32, voxel.Config{Leaf: [3]float32{0.2, 0.2, 0.2}}, voxel.BEVConfig{}},
		// Cells of up to 69 voxels: zh_bev_finish's heap sort (over 32).
		{"KITTI scan, leaf 0.05, BEV cell 1 m", kitti, 16, voxel.Config{Leaf: [3]float32{0.05, 0.05, 0.05}}, voxel.BEVConfig{Cell: 1}},
		// zh_bev_cells moves each voxel into the robot frame, as voxel.BEV.place;
		// zh_reduce measures its top there.
		{"KITTI scan, LiDAR tilted, offset and turned", kitti, 16, voxel.Config{Leaf: [3]float32{0.2, 0.2, 0.2}, Mount: tiltedKITTI},
			voxel.BEVConfig{GroundZ: -1.73, Mount: tiltedKITTI}},
		// zh_bounds and zh_keys drop points above the ceiling, as voxel.Filter.
		{"KITTI scan, LiDAR tilted, ceiling 0.3 m above the sensor, crop", kitti, 16,
			voxel.Config{Leaf: [3]float32{0.2, 0.2, 0.2}, Mount: tiltedKITTI, Ceiling: &ceiling, Crop: crop},
			voxel.BEVConfig{GroundZ: -1.73, Mount: tiltedKITTI}},
		{"ring scan with NaN/Inf, upside down, window behind, shuffled fields", ring(8, 600), 32, voxel.Config{Leaf: [3]float32{0.2, 0.2, 0.2}, Mount: upsideDown},
			voxel.BEVConfig{MinX: -6.4, Mount: upsideDown}},
	} {
		t.Run(sc.name, func(t *testing.T) {
			n := len(sc.data) / 16
			data, err := f.c.Allocate(sc.step * n)
			if err != nil {
				t.Fatal(err)
			}
			defer f.c.Free(data)
			cloud := layOut(data, sc.data, sc.step)

			want, wantBEV := cpuReferenceBEV(t, sc.cfg, sc.bev, cloud)
			vf, bev := newFilterAndBEV(t, f.c, f.nv, sc.cfg, VoxelOptions{MaxPoints: n, MaxInputBytes: sc.step * n, CacheDir: t.TempDir(), BEV: &sc.bev})
			got := voxel.NewPoints(n)
			for _, copyInput := range []bool{false, true} {
				vf.SetCopyInput(copyInput)
				mode := map[bool]string{false: "mapped", true: "copied"}[copyInput]
				if err := vf.Run(cloud, got, bev); err != nil {
					t.Fatalf("%s input: %v", mode, err)
				}
				samePoints(t, mode+" input", got.P, want.P)
				sameTops(t, mode+" input", got, want)
				sameBEV(t, mode+" input", bev, wantBEV)
				if tm := vf.Timing(); tm.Total <= 0 || copyInput != (tm.Copy > 0) {
					t.Fatalf("%s input: timing %+v", mode, tm)
				}
			}
			t.Logf("%d points → %d voxels, equal on the emulation with mapped and copied input", n, len(want.P))
		})
	}
}

// TestFakeCUDARegisteredReadOnlyInput reads the cloud from a read-only
// view of a shared pool registered through the pool's Pinner hook, as the
// agent reads the camera's slots.
func TestFakeCUDARegisteredReadOnlyInput(t *testing.T) {
	f := openFakeCUDA(t)
	src := ring(8, 600)
	n := len(src) / 16
	pool, err := pinned.New(pinned.Geometry{SlotCount: 2, SlotSize: uint64(len(src))}, pinned.Options{Name: "points", ID: 1, Shared: true})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	w, err := pool.Acquire()
	if err != nil {
		t.Fatal(err)
	}
	copy(w.Bytes(), src)
	fd, err := pool.ShareFd()
	if err != nil {
		t.Fatal(err)
	}
	view, err := pinned.OpenView(fd, pool.ID(), pool.Geometry(), pinned.ViewOptions{Pinner: f.c})
	if err != nil {
		t.Fatalf("register the read-only view: %v", err)
	}
	if live, _ := fakecuda.Live(f.libs.Driver, fakecuda.LiveRegistrations); live != 1 {
		t.Fatalf("%d registrations after the view opened, want 1", live)
	}
	cloud := voxel.XYZI(view.Slot(w.Index())[:len(src)], n)
	if err := unix.Mprotect(view.Slot(w.Index())[:4096], unix.PROT_READ|unix.PROT_WRITE); err == nil {
		t.Fatal("the view could be made writable")
	}

	cfg := voxel.Config{Leaf: [3]float32{0.2, 0.2, 0.2}}
	cpu, _ := voxel.NewFilter(cfg, n)
	defer cpu.Close()
	want := voxel.NewPoints(n)
	if err := cpu.Run(cloud, want); err != nil {
		t.Fatal(err)
	}
	vf, err := NewVoxelFilter(f.c, f.nv, cfg, VoxelOptions{MaxPoints: n, CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	got := voxel.NewPoints(n)
	if err := vf.Run(cloud, got, nil); err != nil {
		t.Fatal(err)
	}
	samePoints(t, "registered read-only input", got.P, want.P)
	if err := vf.Close(); err != nil {
		t.Fatal(err)
	}
	if err := view.Close(); err != nil {
		t.Fatal(err)
	}
	if live, _ := fakecuda.Live(f.libs.Driver, fakecuda.LiveRegistrations); live != 0 {
		t.Fatalf("%d registrations after the view closed, want 0 (Unpin)", live)
	}
	if err := pool.Abort(w); err != nil {
		t.Fatal(err)
	}
}

func TestFakeCUDACubinCacheSkipsNVRTC(t *testing.T) {
	f := openFakeCUDA(t)
	dir := t.TempDir()
	before, err := fakecuda.NVRTCCompiles(f.libs.NVRTC)
	if err != nil {
		t.Fatal(err)
	}
	for i, wantHit := range []bool{false, true} {
		vf, err := NewVoxelFilter(f.c, f.nv, voxel.Config{Leaf: [3]float32{0.2, 0.2, 0.2}}, VoxelOptions{MaxPoints: 100, CacheDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		if vf.Timing().CacheHit != wantHit {
			t.Fatalf("filter %d: cache hit %t, want %t", i, vf.Timing().CacheHit, wantHit)
		}
		vf.Close()
	}
	if after, _ := fakecuda.NVRTCCompiles(f.libs.NVRTC); after != before+1 {
		t.Fatalf("NVRTC compiled %d times for two filters, want 1", after-before)
	}
}

// TestFakeCUDACubinCacheReplacesARefusedEntry: a cache entry the driver
// refuses (damaged on disk: CUDA_ERROR_INVALID_IMAGE) is compiled anew
// and replaced, not refused again at every start.
func TestFakeCUDACubinCacheReplacesARefusedEntry(t *testing.T) {
	f := openFakeCUDA(t)
	dir := t.TempDir()
	cfg, opt := voxel.Config{Leaf: [3]float32{0.2, 0.2, 0.2}}, VoxelOptions{MaxPoints: 100, CacheDir: dir}
	vf, err := NewVoxelFilter(f.c, f.nv, cfg, opt)
	if err != nil {
		t.Fatal(err)
	}
	vf.Close()
	entries, err := filepath.Glob(filepath.Join(dir, "*.cubin"))
	if err != nil || len(entries) != 1 {
		t.Fatalf("cache entries %v (%v), want one", entries, err)
	}
	if err := os.WriteFile(entries[0], []byte("not a cubin: damaged on disk"), 0o644); err != nil {
		t.Fatal(err)
	}
	for i, wantHit := range []bool{false, true} { // compiled anew, then a hit again
		vf, err := NewVoxelFilter(f.c, f.nv, cfg, opt)
		if err != nil {
			t.Fatalf("filter %d after the entry was damaged: %v", i, err)
		}
		if vf.Timing().CacheHit != wantHit || vf.Target() == EmbeddedTarget {
			t.Fatalf("filter %d after the entry was damaged: cache hit %t, target %s; want hit %t, NVRTC's target", i, vf.Timing().CacheHit, vf.Target(), wantHit)
		}
		vf.Close()
	}
	if b, err := os.ReadFile(entries[0]); err != nil || strings.HasPrefix(string(b), "not a cubin") {
		t.Fatalf("the damaged entry was not replaced (%v): %.40q", err, b)
	}
}

// TestFakeCUDAContextSyncMode: ContextOptions.Sync sets the primary
// context's scheduling flags before the retain; SyncAuto leaves them as
// they are; flags the driver refuses cost a log line, not the context.
func TestFakeCUDAContextSyncMode(t *testing.T) {
	libs := buildFakeCUDA(t)
	drv, err := OpenLibrary(libs.Driver)
	if err != nil {
		t.Fatal(err)
	}
	dev, err := drv.Device(0)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		mode  SyncMode
		flags uint64 // the fake's after NewContext
		note  bool   // a log line says the flags were refused
	}{
		{SyncBlock, 4, false},
		{SyncYield, 2, false},
		{SyncAuto, 2, false}, // left as the last context set them
		{SyncMode(3), 2, true},
		{SyncSpin, 1, false},
	} {
		var notes []string
		c, err := dev.NewContext(ContextOptions{Sync: tc.mode, Logf: func(f string, a ...any) { notes = append(notes, fmt.Sprintf(f, a...)) }})
		if err != nil {
			t.Fatalf("%s: %v", tc.mode, err)
		}
		flags, ferr := fakecuda.Live(libs.Driver, fakecuda.PrimaryFlags)
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if ferr != nil || flags != tc.flags {
			t.Errorf("%s: primary context flags %d (%v), want %d", tc.mode, flags, ferr, tc.flags)
		}
		if noted := slices.ContainsFunc(notes, func(n string) bool { return strings.Contains(n, "CUDA_ERROR_INVALID_VALUE") }); noted != tc.note {
			t.Errorf("%s: notes %q; want a refusal noted: %t", tc.mode, notes, tc.note)
		}
	}
	for _, name := range []string{"auto", "spin", "yield", "block"} {
		if m, err := ParseSyncMode(name); err != nil || m.String() != name {
			t.Errorf("ParseSyncMode(%q) = %v, %v", name, m, err)
		}
	}
	if _, err := ParseSyncMode("blocking"); err == nil {
		t.Error("ParseSyncMode(blocking) accepted")
	}
}

func TestFakeCUDACopiesAndFrameAllocations(t *testing.T) {
	f := openFakeCUDA(t)
	// Async copies refuse pageable memory before the driver sees it.
	dev, err := f.c.MemAlloc(64)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.c.CopyToDevice(dev, make([]byte, 64), nil); err == nil {
		t.Fatal("async copy from Go heap memory accepted")
	}
	if err := f.c.MemFree(dev); err != nil {
		t.Fatal(err)
	}
	// A whole Run allocates nothing per frame, through the real binding.
	src := ring(8, 600)
	n := len(src) / 16
	data := f.pinnedBuffer(t, len(src))
	copy(data, src)
	vf, bev := newFilterAndBEV(t, f.c, f.nv, voxel.Config{Leaf: [3]float32{0.5, 0.5, 0.5}}, VoxelOptions{MaxPoints: n, CacheDir: t.TempDir()})
	out := voxel.NewPoints(n)
	cloud := voxel.XYZI(data, n)
	if err := vf.Run(cloud, out, bev); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(3, func() {
		if err := vf.Run(cloud, out, bev); err != nil {
			t.Fatal(err)
		}
	})
	switch {
	case raceEnabled:
		t.Logf("-race: %.1f allocations per Run not judged (see race_on_test.go)", allocs)
	case allocs != 0:
		t.Fatalf("VoxelFilter.Run allocates %.1f times per frame through the real binding, want 0", allocs)
	}
}

// ring is a small ring scan (with NaN/Inf points), XYZI.
func ring(rings, columns int) []byte {
	b := make([]byte, 16*rings*columns)
	n := ringScan(b, rings, columns, uint64(rings*columns))
	return b[:16*n]
}

// layOut copies XYZI points into dst with the given step: 16 keeps the
// layout, 32 puts intensity first, then z, x, y, with padding between.
func layOut(dst, xyzi []byte, step int) voxel.Cloud {
	n := len(xyzi) / 16
	if step == 16 {
		copy(dst, xyzi)
		return voxel.XYZI(dst[:16*n], n)
	}
	const offI, offZ, offX, offY = 0, 8, 16, 24
	clear(dst)
	for i := range n {
		p, q := xyzi[16*i:], dst[step*i:]
		copy(q[offX:offX+4], p[0:4])
		copy(q[offY:offY+4], p[4:8])
		copy(q[offZ:offZ+4], p[8:12])
		copy(q[offI:offI+4], p[12:16])
	}
	return voxel.Cloud{Data: dst[:step*n], Count: n, Step: step, OffX: offX, OffY: offY, OffZ: offZ, OffI: offI}
}

// TestFakeCUDAOutParametersSurviveStackMoves calls the driver with
// out-parameters right after garbage collections, which shrink goroutine
// stacks, so that a call's stack may move between taking an
// out-parameter's address and the C call (see call in unsafe.go: without
// //go:uintptrescapes on the wrapper, the driver writes to the old stack).
// It catches that bug only under -race (larger frames, more stack moves),
// which is how make test runs it.
func TestFakeCUDAOutParametersSurviveStackMoves(t *testing.T) {
	f := openFakeCUDA(t)
	for i := range 300 {
		if i%10 == 0 {
			runtime.GC()
		}
		mem, err := f.c.Allocate(4096)
		if err != nil {
			t.Fatalf("allocation %d: %v", i, err)
		}
		if err := f.c.Free(mem); err != nil {
			t.Fatalf("free %d: %v", i, err)
		}
		dev, err := f.c.MemAlloc(256)
		if err != nil || dev == 0 {
			t.Fatalf("device allocation %d: %#x, %v", i, uint64(dev), err)
		}
		if err := f.c.MemFree(dev); err != nil {
			t.Fatalf("device free %d: %v", i, err)
		}
	}
}

// TestFakeCUDARehearsesTheGPUTests builds the -tags gpu test binary (the
// one make gpu-check runs on a GPU machine) and runs its quick tests and
// the bandwidth benchmark against the fake driver, so that their own logic
// has run before the GPU session that depends on it. The voxel tests on
// 115k/288k points and BenchmarkGPUVoxel take minutes on the emulation and
// are left to the GPU; TestFakeCUDAVoxelFilterMatchesCPU covers their code
// paths on smaller clouds. A pass here verifies no GPU behaviour.
func TestFakeCUDARehearsesTheGPUTests(t *testing.T) {
	libs := buildFakeCUDA(t)
	bin := filepath.Join(t.TempDir(), "gpu.test")
	build := exec.Command("go", "test", "-c", "-tags", "gpu", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the -tags gpu test binary: %v\n%s", err, out)
	}
	tests := []string{"TestOpen", "TestGPUZeroCopyHostAlloc", "TestGPURegisteredMmap", "TestGPUDeviceMemoryCopiesAndEvents",
		"TestGPUErrorsCarryCUDANames", "TestGPUHostToDeviceBandwidth"}
	run := exec.Command(bin, "-test.run", "^("+strings.Join(tests, "|")+")$", "-test.v", "-test.count=1",
		"-test.bench", "^BenchmarkGPUHostToDevice$", "-test.benchtime", "1x", "-test.timeout", "2m")
	run.Env = append(os.Environ(), "LD_LIBRARY_PATH="+libs.Dir)
	out, err := run.CombinedOutput()
	if err != nil {
		t.Fatalf("the GPU tests on the fake driver: %v\n%s", err, out)
	}
	for _, name := range tests {
		if !strings.Contains(string(out), "--- PASS: "+name+" ") {
			t.Errorf("%s did not pass on the fake driver", name)
		}
	}
	if !strings.Contains(string(out), "BenchmarkGPUHostToDevice/pinned") || !strings.Contains(string(out), "MB/s") {
		t.Errorf("BenchmarkGPUHostToDevice printed no pinned MB/s line")
	}
	if !strings.Contains(string(out), "fake CUDA device") {
		t.Errorf("the GPU tests did not run on the fake driver")
	}
	if t.Failed() {
		t.Logf("output:\n%s", out)
	}
}

var fakeCUDADir = flag.String("fakecuda-dir", "", "TestBuildFakeCUDAForRehearsal: where to build the fake libcuda.so.1 and libnvrtc.so.13")

// TestBuildFakeCUDAForRehearsal builds the fakes into -fakecuda-dir for make
// gpu-check-rehearse; without the flag it only checks that they build.
func TestBuildFakeCUDAForRehearsal(t *testing.T) {
	dir := *fakeCUDADir
	if dir == "" {
		buildFakeCUDA(t)
		return
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := fakecuda.Build(dir); err != nil {
		t.Fatal(err)
	}
}

// TestFakeCUDAStagesUnpinnedInput: heap memory is refused unless
// StageUnpinned, which copies it into pinned memory first; pinned input is
// still read in place.
func TestFakeCUDAStagesUnpinnedInput(t *testing.T) {
	f := openFakeCUDA(t)
	src := ring(8, 600)
	n := len(src) / 16
	heap := voxel.XYZI(append([]byte(nil), src...), n)
	cfg := voxel.Config{Leaf: [3]float32{0.2, 0.2, 0.2}}
	want, wantBEV := cpuReference(t, cfg, heap)
	got := voxel.NewPoints(n)

	strict, bev := newFilterAndBEV(t, f.c, f.nv, cfg, VoxelOptions{MaxPoints: n, CacheDir: t.TempDir()})
	if err := strict.Run(heap, got, bev); !errors.Is(err, ErrNotPinned) {
		t.Fatalf("heap input without StageUnpinned: %v, want ErrNotPinned", err)
	}
	staging, bev2 := newFilterAndBEV(t, f.c, f.nv, cfg, VoxelOptions{MaxPoints: n, StageUnpinned: true, CacheDir: t.TempDir()})
	if err := staging.Run(heap, got, bev2); err != nil {
		t.Fatal(err)
	}
	samePoints(t, "staged heap input", got.P, want.P)
	sameBEV(t, "staged heap input", bev2, wantBEV)
	if !staging.Timing().Staged {
		t.Fatal("heap input not reported as staged")
	}
	pinnedData, err := f.c.Allocate(len(src))
	if err != nil {
		t.Fatal(err)
	}
	defer f.c.Free(pinnedData)
	copy(pinnedData, src)
	if err := staging.Run(voxel.XYZI(pinnedData, n), got, bev2); err != nil {
		t.Fatal(err)
	}
	samePoints(t, "pinned input", got.P, want.P)
	if staging.Timing().Staged {
		t.Fatal("pinned input was staged")
	}
	allocs := testing.AllocsPerRun(2, func() {
		if err := staging.Run(heap, got, bev2); err != nil {
			t.Fatal(err)
		}
	})
	if !raceEnabled && allocs != 0 {
		t.Fatalf("a staged Run allocates %.1f times, want 0", allocs)
	}
	// An empty cloud after a staged one copies nothing: not staged (the
	// agent's gpu_voxel_staged_total counts from this).
	if err := staging.Run(voxel.XYZI(nil, 0), got, bev2); err != nil {
		t.Fatal(err)
	}
	if staging.Timing().Staged {
		t.Fatal("an empty cloud after a staged one is reported as staged")
	}
}

// TestFakeCUDAWideCloudsTooLargeToCopyIn: a cloud of 32-byte points that
// the filter must stage, or copy with CopyInput, beyond MaxInputBytes
// (default MaxPoints × 16) fails with ErrInputTooLarge, which the agent
// takes as that cloud's property, not a GPU failure; read in place, the
// same cloud is filtered.
func TestFakeCUDAWideCloudsTooLargeToCopyIn(t *testing.T) {
	f := openFakeCUDA(t)
	src := ring(8, 600)
	n := len(src) / 16
	cfg := voxel.Config{Leaf: [3]float32{0.2, 0.2, 0.2}}
	got := voxel.NewPoints(n)
	vf, bev := newFilterAndBEV(t, f.c, f.nv, cfg, VoxelOptions{MaxPoints: n, StageUnpinned: true, CacheDir: t.TempDir()})
	heap := layOut(make([]byte, 32*n), src, 32)
	if err := vf.Run(heap, got, bev); !errors.Is(err, ErrInputTooLarge) {
		t.Errorf("staging %d bytes into %d: %v, want ErrInputTooLarge", 32*n, 16*n, err)
	}
	mapped := layOut(f.pinnedBuffer(t, 32*n), src, 32)
	if err := vf.Run(mapped, got, bev); err != nil {
		t.Errorf("the same cloud read in place: %v", err)
	}
	vf.SetCopyInput(true)
	if err := vf.Run(mapped, got, bev); !errors.Is(err, ErrInputTooLarge) || !strings.Contains(err.Error(), "× 32") {
		t.Errorf("copying %d bytes into %d: %v, want ErrInputTooLarge naming the step", 32*n, 16*n, err)
	}
}

// TestFakeCUDANVRTCFoundInTheToolkitFolder: OpenNVRTC() finds an NVRTC
// that is only in $CUDA_HOME/lib64, off the dynamic linker's path.
func TestFakeCUDANVRTCFoundInTheToolkitFolder(t *testing.T) {
	libs := buildFakeCUDA(t)
	home := t.TempDir()
	lib := filepath.Join(home, "lib64", "libnvrtc.so.13")
	if err := os.MkdirAll(filepath.Dir(lib), 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(libs.NVRTC)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(lib, b, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvNVRTC, "")
	t.Setenv("CUDA_HOME", home)
	nv, err := OpenNVRTC()
	if err != nil {
		t.Fatalf("OpenNVRTC with NVRTC in $CUDA_HOME/lib64: %v", err)
	}
	if s := nv.Soname(); s != lib && !slices.Contains(NVRTCSonames, s) {
		t.Fatalf("loaded %q, want %q (or a system NVRTC)", s, lib)
	}
}

// A cloud that changes between the bounds pass and the keys pass (a slot
// written while the filter reads it): Run must say so, not read past its
// buffers nor return a wrong result. An accepted point moved outside the
// grid is counted by zh_keys (ST_MISS); one turned NaN, or a NaN turned
// finite, changes how many points got a key, so the sort ran over a count
// that was not this frame's: one stale scratch element averaged into a
// phantom voxel, or a point lost, with no error, until the keys count was
// compared with the bounds count. Sort scratch that a dropped point leaves
// unwritten holds stale values then; were they arbitrary (device memory is
// not zeroed; the fake fills it with 0x5A), the reduce kernel would read
// points far out of bounds: on a GPU an illegal address, which poisons the
// context for good. The filter stays usable.
func TestFakeCUDADataChangedMidFrameIsAnError(t *testing.T) {
	f := openFakeCUDA(t)
	src := ring(8, 600)
	n := len(src) / 16
	x0 := math.Float32frombits(binary.LittleEndian.Uint32(src[0:]))
	for k := range 4 {
		if v := math.Float32frombits(binary.LittleEndian.Uint32(src[4*k:])); math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			t.Fatalf("setup: the ring's first point has field %d = %v; the cases need it accepted", k, v)
		}
	}
	accepted := 0 // the ring's points with every field finite
	for i := range n {
		ok := true
		for k := range 4 {
			v := float64(math.Float32frombits(binary.LittleEndian.Uint32(src[16*i+4*k:])))
			ok = ok && !math.IsNaN(v) && !math.IsInf(v, 0)
		}
		if ok {
			accepted++
		}
	}
	// other is a different cloud: run before each case, it leaves its own
	// elements in the sort scratch, which a wrong count would read.
	other := ring(6, 500)
	data := f.pinnedBuffer(t, max(len(src), len(other)))
	cfg := voxel.Config{Leaf: [3]float32{0.2, 0.2, 0.2}}
	vf, bev := newFilterAndBEV(t, f.c, f.nv, cfg, VoxelOptions{MaxPoints: n, CacheDir: t.TempDir()})
	got := voxel.NewPoints(n)
	nan := float32(math.NaN())
	for _, tc := range []struct {
		name   string
		firstX float32 // the first point's x as the bounds pass reads it
		moveTo float32 // and as the keys pass reads it
		want   string
	}{
		{"a point moved outside the grid", x0, 1e4, "1 points fell outside the grid"},
		{"a point turned NaN", x0, nan, fmt.Sprintf("the bounds pass accepted %d points, the keys pass %d", accepted, accepted-1)},
		{"a NaN point turned finite", nan, x0, fmt.Sprintf("the bounds pass accepted %d points, the keys pass %d", accepted-1, accepted)},
	} {
		for _, copyInput := range []bool{false, true} {
			vf.SetCopyInput(copyInput)
			if err := vf.Run(layOut(data, other, 16), got, bev); err != nil {
				t.Fatalf("%s, copy input %t: the other cloud: %v", tc.name, copyInput, err)
			}
			cloud := layOut(data, src, 16)
			binary.LittleEndian.PutUint32(cloud.Data[0:], math.Float32bits(tc.firstX))
			if err := fakecuda.MoveAfterBoundsTo(f.libs.Driver, tc.moveTo); err != nil {
				t.Fatal(err)
			}
			err := vf.Run(cloud, got, bev)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "cloud data changed") {
				t.Fatalf("%s, copy input %t: Run = %v (%d voxels), want the data-changed error %q", tc.name, copyInput, err, len(got.P), tc.want)
			}
			cloud = layOut(data, src, 16) // the cloud as it was
			want, wantBEV := cpuReference(t, cfg, cloud)
			if err := vf.Run(cloud, got, bev); err != nil {
				t.Fatalf("%s, copy input %t: the next Run: %v", tc.name, copyInput, err)
			}
			samePoints(t, tc.name+": after a changed cloud", got.P, want.P)
			sameBEV(t, tc.name+": after a changed cloud", bev, wantBEV)
		}
	}
}

// A GPU newer than the NVRTC found (its own architecture unknown to it):
// the kernels go in as PTX for the newest architecture NVRTC knows, which
// the driver JIT-compiles, and the results are the same. With no usable
// architecture at all, NewVoxelFilter says so (the agent then runs the
// CPU filter).
func TestFakeCUDAPTXWhenNVRTCPredatesTheGPU(t *testing.T) {
	f := openFakeCUDA(t)
	t.Cleanup(func() { fakecuda.SetNVRTCArchs(f.libs.NVRTC) })
	cloud, n, cfg := f.smallRingCloud(t)
	want, wantBEV := cpuReference(t, cfg, cloud)

	if err := fakecuda.SetNVRTCArchs(f.libs.NVRTC, 75, 80, 86, 89); err != nil {
		t.Fatal(err)
	}
	vf, bev := newFilterAndBEV(t, f.c, f.nv, cfg, VoxelOptions{MaxPoints: n, CacheDir: t.TempDir()})
	if vf.Target() != "compute_89" {
		t.Fatalf("target %q on the sm_90 fake with an NVRTC that stops at sm_89, want compute_89", vf.Target())
	}
	got := voxel.NewPoints(n)
	if err := vf.Run(cloud, got, bev); err != nil {
		t.Fatal(err)
	}
	samePoints(t, "PTX for compute_89", got.P, want.P)
	sameBEV(t, "PTX for compute_89", bev, wantBEV)

	if err := fakecuda.SetNVRTCArchs(f.libs.NVRTC, 52, 60, 61); err != nil {
		t.Fatal(err)
	}
	if vf, err := NewVoxelFilter(f.c, f.nv, cfg, VoxelOptions{MaxPoints: n, CacheDir: t.TempDir()}); err == nil || !errors.Is(err, ErrNotSupported) || !errors.Is(err, ErrKernelImage) {
		if vf != nil {
			vf.Close()
		}
		t.Fatalf("NewVoxelFilter with an NVRTC for sm_52…sm_61 only = %v, want ErrNotSupported and ErrKernelImage", err)
	}
	// A bad configuration is not the kernels' fault: no other image helps.
	if vf, err := NewVoxelFilter(f.c, f.nv, cfg, VoxelOptions{MaxPoints: 0, CacheDir: t.TempDir()}); err == nil || errors.Is(err, ErrKernelImage) {
		if vf != nil {
			vf.Close()
		}
		t.Fatalf("NewVoxelFilter with MaxPoints 0 = %v, want an error that is not ErrKernelImage", err)
	}
}

// The driver's OpenNVRTC passes over an NVRTC of a newer CUDA major
// version than the driver's (the fake driver is 12.9): its cubins would
// not load. The package's OpenNVRTC, without a driver, takes it.
func TestFakeCUDADriverSkipsANewerNVRTC(t *testing.T) {
	libs := buildFakeCUDA(t)
	drv, err := OpenLibrary(libs.Driver)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fakecuda.SetNVRTCVersion(libs.NVRTC, 12, 9) })
	if err := fakecuda.SetNVRTCVersion(libs.NVRTC, 13, 0); err != nil {
		t.Fatal(err)
	}
	if nv, err := drv.OpenNVRTC(libs.NVRTC); !errors.Is(err, ErrNoNVRTC) || !strings.Contains(err.Error(), "NVRTC 13.0, newer than the driver's CUDA 12") {
		t.Fatalf("driver 12.9, NVRTC 13.0: OpenNVRTC = %v, %v; want ErrNoNVRTC saying why", nv, err)
	}
	if nv, err := OpenNVRTC(libs.NVRTC); err != nil {
		t.Fatalf("package OpenNVRTC of NVRTC 13.0: %v", err)
	} else if ma, _ := nv.Version(); ma != 13 {
		t.Fatalf("package OpenNVRTC: version %d", ma)
	}
	if err := fakecuda.SetNVRTCVersion(libs.NVRTC, 12, 4); err != nil {
		t.Fatal(err)
	}
	nv, err := drv.OpenNVRTC(libs.NVRTC)
	if err != nil {
		t.Fatalf("driver 12.9, NVRTC 12.4: %v", err)
	}
	if ma, mi := nv.Version(); ma != 12 || mi != 4 {
		t.Fatalf("version %d.%d", ma, mi)
	}
}

// An NVRTC loaded by path compiles only with its libnvrtc-builtins loaded:
// OpenNVRTC preloads the one beside it (every fake test relies on that:
// the fakes' folder is not on the linker's path). When none of the version
// NVRTC wants is there, the compile error says what is missing and where
// to point LD_LIBRARY_PATH.
func TestFakeCUDANVRTCNeedsItsBuiltins(t *testing.T) {
	libs := buildFakeCUDA(t)
	nv, err := OpenNVRTC(libs.NVRTC)
	if err != nil {
		t.Fatal(err)
	}
	if want := "preloaded " + filepath.Join(libs.Dir, fakecuda.BuiltinsName); nv.builtins != want {
		t.Fatalf("builtins %q, want %q", nv.builtins, want)
	}
	t.Cleanup(func() { fakecuda.SetNVRTCVersion(libs.NVRTC, 12, 9) })
	if err := fakecuda.SetNVRTCVersion(libs.NVRTC, 12, 8); err != nil {
		t.Fatal(err)
	}
	nv, err = OpenNVRTC(libs.NVRTC)
	if err != nil {
		t.Fatal(err)
	}
	_, err = nv.Compile(`extern "C" __global__ void k() {}`, "k.cu", "--gpu-architecture=sm_90")
	if !errors.Is(err, NVRTCResult(7)) || !strings.Contains(err.Error(), "libnvrtc-builtins.so.12.8") || !strings.Contains(err.Error(), "LD_LIBRARY_PATH") {
		t.Fatalf("compile with NVRTC 12.8 and only 12.9's builtins = %v; want NVRTC_ERROR_BUILTIN_OPERATION_FAILURE naming libnvrtc-builtins.so.12.8 and LD_LIBRARY_PATH", err)
	}
}

// Without NVRTC (nil), the filter loads the embedded PTX (kernels/voxel.ptx,
// real NVRTC output) through the real binding: every kernel is found in it
// by name, nothing is compiled, and the results are the CPU's. The fake
// runs its host emulation of voxel.cu, not the PTX: this is plumbing only.
func TestFakeCUDAEmbeddedPTXWithoutNVRTC(t *testing.T) {
	f := openFakeCUDA(t)
	cloud, n, cfg := f.smallRingCloud(t)
	want, wantBEV := cpuReference(t, cfg, cloud)

	compiles, err := fakecuda.NVRTCCompiles(f.libs.NVRTC)
	if err != nil {
		t.Fatal(err)
	}
	vf, bev := newFilterAndBEV(t, f.c, nil, cfg, VoxelOptions{MaxPoints: n, CacheDir: t.TempDir()})
	if vf.Target() != EmbeddedTarget || vf.Timing().CacheHit {
		t.Fatalf("target %q, cache hit %t; want %q, no cache", vf.Target(), vf.Timing().CacheHit, EmbeddedTarget)
	}
	if after, err := fakecuda.NVRTCCompiles(f.libs.NVRTC); err != nil || after != compiles {
		t.Fatalf("NVRTC compiled %d programs for a filter without NVRTC (%v)", after-compiles, err)
	}
	matchesCPUBothInputs(t, "embedded PTX", vf, cloud, voxel.NewPoints(n), bev, want, wantBEV)
}

// A module the JIT refuses comes back with the JIT's error log
// (cuModuleLoadDataEx's CU_JIT_ERROR_LOG_BUFFER), not a bare code.
func TestFakeCUDAModuleLoadCarriesTheJITLog(t *testing.T) {
	f := openFakeCUDA(t)
	broken := []byte("//\n// Generated by NVIDIA NVVM Compiler\n//\n\n.entry k()\n{\n\tret;\n}\n")
	err := f.c.Do(func() error {
		m, err := f.c.LoadModule(broken)
		if err == nil {
			m.Unload()
		}
		return err
	})
	if !errors.Is(err, Result(218)) || !strings.Contains(err.Error(), "CUDA_ERROR_INVALID_PTX") ||
		!strings.Contains(err.Error(), "JIT log: fake JIT: ptxas fatal: no .version or .target directive") {
		t.Fatalf("load of PTX without .version/.target: %v; want CUDA_ERROR_INVALID_PTX with the JIT log", err)
	}
	m, err := f.c.LoadModule(voxelPTX)
	if err != nil {
		t.Fatalf("load of the embedded PTX: %v", err)
	}
	if err := m.Unload(); err != nil {
		t.Fatal(err)
	}
}

// TestFakeCUDAVoxelFilterMountMustBeTheRasters: the raster draws the
// filter's tops, measured with the filter's mount, so a raster of
// another mount is refused; without a raster config the default raster
// takes the filter's mount.
func TestFakeCUDAVoxelFilterMountMustBeTheRasters(t *testing.T) {
	f := openFakeCUDA(t)
	cfg := voxel.Config{Leaf: [3]float32{0.2, 0.2, 0.2}, Mount: voxel.Mount{Z: 0.5, Pitch: 0.1}}
	vf, err := NewVoxelFilter(f.c, f.nv, cfg, VoxelOptions{MaxPoints: 100, CacheDir: t.TempDir()})
	if err != nil {
		t.Fatalf("no raster config: %v", err)
	}
	if got := vf.BEVConfig().Mount; got != cfg.Mount {
		t.Errorf("default raster's mount %+v, want the filter's %+v", got, cfg.Mount)
	}
	vf.Close()
	other := voxel.BEVConfig{Mount: voxel.Mount{Z: 0.5}}
	if vf, err := NewVoxelFilter(f.c, f.nv, cfg, VoxelOptions{MaxPoints: 100, CacheDir: t.TempDir(), BEV: &other}); err == nil {
		vf.Close()
		t.Fatal("a raster of another mount was accepted")
	} else if !strings.Contains(err.Error(), "differs from the BEV raster's") {
		t.Fatalf("a raster of another mount: %v", err)
	}
}
