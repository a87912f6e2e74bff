//go:build gpu

// These tests need an NVIDIA GPU and its driver; they are built only with
// -tags gpu and FAIL (never skip) when either is missing, because running
// them is the GPU verification. See README.md. Without NVRTC they run the
// kernels from PTX (testdata/axpb_compute70.ptx, the embedded voxel PTX),
// which the driver JIT-compiles; only what needs NVRTC itself (the cubin
// cache) is then skipped, by name.

package gpu

import (
	_ "embed"
	"encoding/binary"
	"errors"
	"math"
	"testing"

	"github.com/zerohop/zerohop/pinned"
)

// axpbPTX is axpbSource for compute_70 (make test-cuda-libs checks it), the
// test kernel on a machine without NVRTC.
//
//go:embed testdata/axpb_compute70.ptx
var axpbPTX []byte

type gpuFixture struct {
	c   *Context
	nv  *NVRTC // as the agent opens it: none newer than the driver; nil: none found
	fn  Function
	mod *Module
}

// openGPUContext opens device 0's context, closed in tb's cleanup; it
// fails tb (never skips) without a GPU.
func openGPUContext(tb testing.TB) (*Driver, *Context) {
	tb.Helper()
	drv, err := Open()
	if err != nil {
		tb.Fatalf("this test needs a GPU: %v", err)
	}
	dev, err := drv.Device(0)
	if err != nil {
		tb.Fatal(err)
	}
	c, err := dev.NewContext(ContextOptions{Logf: tb.Logf})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := c.Close(); err != nil {
			tb.Error(err)
		}
	})
	return drv, c
}

func openGPU(t *testing.T) gpuFixture {
	t.Helper()
	drv, c := openGPUContext(t)
	caps := c.Capabilities()
	t.Logf("driver CUDA %s; device 0: %+v", drv.Version(), caps)

	nv, image := openTestNVRTC(t, drv, caps)
	mod, err := c.LoadModule(image)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mod.Unload() })
	fn, err := mod.Function("axpb")
	if err != nil {
		t.Fatal(err)
	}
	return gpuFixture{c: c, nv: nv, fn: fn, mod: mod}
}

// openTestNVRTC opens NVRTC as the agent does and compiles the test kernel
// for the device; without NVRTC (nil) the kernel is axpbPTX.
func openTestNVRTC(t *testing.T, drv *Driver, caps Capabilities) (*NVRTC, []byte) {
	t.Helper()
	nv, err := drv.OpenNVRTC()
	if err != nil {
		t.Logf("no NVRTC (%v): kernels from PTX, JIT-compiled by the driver", err)
		return nil, axpbPTX
	}
	major, minor := nv.Version()
	t.Logf("NVRTC %d.%d loaded from %s", major, minor, nv.Soname())
	out, err := nv.Compile(axpbSource, "axpb.cu", "--gpu-architecture="+caps.Arch())
	if err != nil {
		t.Fatal(err)
	}
	if len(out.CUBIN) == 0 {
		t.Fatalf("NVRTC %d.%d (%s) produced no cubin for %s", major, minor, nv.Soname(), caps.Arch())
	}
	return nv, out.CUBIN
}

// pinForReading registers mem as the agent registers a camera's pool:
// READ_ONLY where the device supports it. A device that supports neither
// that nor host page tables refuses read-only registration (the agent then
// stages such pools); the test registers mem read-write instead, so that
// the kernels still read registered memory, and says so.
func pinForReading(t *testing.T, c *Context, mem []byte) *Region {
	t.Helper()
	r, err := c.Pin(mem, pinned.ReadOnly)
	if errors.Is(err, ErrNotSupported) {
		t.Logf("read-only registration refused (%v; capabilities %+v): registering read-write", err, c.Capabilities())
		r, err = c.Pin(mem, pinned.ReadWrite)
	}
	if err != nil {
		t.Fatal(err)
	}
	return r.(*Region)
}

func putFloats(b []byte, n int) {
	for i := range n {
		binary.NativeEndian.PutUint32(b[4*i:], math.Float32bits(float32(i)))
	}
}

func checkAxpb(t *testing.T, y []byte, n int) {
	t.Helper()
	for i := range n {
		got := math.Float32frombits(binary.NativeEndian.Uint32(y[4*i:]))
		if want := 2*float32(i) + 1; got != want {
			t.Fatalf("y[%d] = %v, want %v", i, got, want)
		}
	}
}

func (f gpuFixture) launch(t *testing.T, x, y DevicePtr, n int, s *Stream) {
	t.Helper()
	args, err := f.c.NewKernelArgs(5)
	if err != nil {
		t.Fatal(err)
	}
	defer args.Free()
	args.Pointer(x).Pointer(y).Float32(2).Float32(1).Uint32(uint32(n))
	grid := Dim3{uint32((n + 255) / 256), 1, 1}
	if err := f.c.Launch(f.fn, grid, Dim3{256, 1, 1}, 0, s, args); err != nil {
		t.Fatal(err)
	}
}

func TestGPUZeroCopyHostAlloc(t *testing.T) {
	f := openGPU(t)
	const n = 115_000
	x, err := f.c.Allocate(4 * n)
	if err != nil {
		t.Fatal(err)
	}
	defer f.c.Free(x)
	y, err := f.c.Allocate(4 * n)
	if err != nil {
		t.Fatal(err)
	}
	defer f.c.Free(y)
	putFloats(x, n)
	dx, _ := f.c.HostDevicePointer(x)
	dy, _ := f.c.HostDevicePointer(y)
	s, err := f.c.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy()
	f.launch(t, dx, dy, n, s)
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	checkAxpb(t, y, n)
}

func TestGPURegisteredMmap(t *testing.T) {
	f := openGPU(t)
	const n = 288_000
	size := (4*n + pinned.PageSize - 1) &^ (pinned.PageSize - 1)
	x := cMemory(t, size)
	y := cMemory(t, size)
	putFloats(x, n)
	rx := pinForReading(t, f.c, x)
	defer rx.Unpin()
	ry, err := f.c.Pin(y, pinned.ReadWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer ry.Unpin()
	t.Logf("read-only registration: %t %s", rx.ReadOnly(), rx.Note())
	dx, _ := rx.DevicePointer(0)
	dy, _ := ry.(*Region).DevicePointer(0)
	s, err := f.c.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy()
	f.launch(t, dx, dy, n, s)
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	checkAxpb(t, y, n)
}

func TestGPUDeviceMemoryCopiesAndEvents(t *testing.T) {
	f := openGPU(t)
	const n = 115_000
	host, err := f.c.Allocate(4 * n)
	if err != nil {
		t.Fatal(err)
	}
	defer f.c.Free(host)
	putFloats(host, n)
	dx, err := f.c.MemAlloc(4 * n)
	if err != nil {
		t.Fatal(err)
	}
	defer f.c.MemFree(dx)
	dy, err := f.c.MemAlloc(4 * n)
	if err != nil {
		t.Fatal(err)
	}
	defer f.c.MemFree(dy)
	s, err := f.c.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy()
	start, _ := f.c.NewEvent()
	end, _ := f.c.NewEvent()
	defer start.Destroy()
	defer end.Destroy()

	if err := f.c.MemsetD8(dy, 0xFF, 4*n); err != nil {
		t.Fatal(err)
	}
	if err := f.c.CopyToDevice(dx, host, s); err != nil {
		t.Fatal(err)
	}
	start.Record(s)
	f.launch(t, dx, dy, n, s)
	end.Record(s)
	// The copy in reads host asynchronously: it must be done before host
	// is cleared (the fake copies at enqueue; a GPU does not).
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	clear(host)
	if err := f.c.CopyFromDevice(host, dy, s); err != nil {
		t.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	checkAxpb(t, host, n)
	d, err := Elapsed(start, end)
	if err != nil || d <= 0 {
		t.Fatalf("kernel time %v, %v", d, err)
	}
	t.Logf("axpb on %d floats: %v", n, d)
}

func TestGPUErrorsCarryCUDANames(t *testing.T) {
	f := openGPU(t)
	_, err := f.c.LoadModule([]byte("not a cubin"))
	var ce *Error
	if !errors.As(err, &ce) || ce.Code == 0 {
		t.Fatalf("LoadModule(garbage) = %v, want a CUDA *Error", err)
	}
	t.Logf("garbage module: %v", err)
	if _, err := f.mod.Function("no_such_kernel"); !errors.Is(err, Result(500)) {
		t.Fatalf("Function(no_such_kernel) = %v, want CUDA_ERROR_NOT_FOUND", err)
	}
	if err := f.c.CopyToDevice(0, make([]byte, 8), nil); !errors.Is(err, ErrNotPinned) {
		t.Fatalf("copy from the Go heap = %v, want ErrNotPinned", err)
	}
}
