package gpu

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/zerohop/zerohop/pinned"
)

// fakeDriver is a FAKE of the driver API used only to test this package's
// plumbing (thread ownership, flags, bookkeeping, error wrapping). It does
// not model CUDA and passing tests against it verify nothing on a GPU.
// Methods it does not implement panic through the nil embedded interface.
type fakeDriver struct {
	cudaAPI

	devices int32
	caps    map[DeviceAttribute]int32
	// unknownAttrs answer CUDA_ERROR_INVALID_VALUE, as attributes newer
	// than the driver do.
	unknownAttrs []DeviceAttribute

	mu            sync.Mutex
	currentOn     map[int]uintptr // thread id → context made current there
	callThreads   map[int]bool    // threads that made context-requiring calls
	registerFlags []uint32
	registered    map[uintptr]int
	allocated     map[uintptr][]byte
	released      int
	registerFails Result
	devMem        map[DevicePtr][]byte // what the synchronous copies wrote, by device address
}

const fakeCtx uintptr = 0xC0FFEE
const fakeDevBase DevicePtr = 0x7000_0000_0000

func newFakeDriver(caps map[DeviceAttribute]int32) *fakeDriver {
	return &fakeDriver{
		devices: 1, caps: caps,
		currentOn: map[int]uintptr{}, callThreads: map[int]bool{},
		registered: map[uintptr]int{}, allocated: map[uintptr][]byte{},
		devMem: map[DevicePtr][]byte{},
	}
}

func (f *fakeDriver) noteThread() {
	f.mu.Lock()
	f.callThreads[unix.Gettid()] = true
	f.mu.Unlock()
}

func (f *fakeDriver) errorName(r Result) (string, bool)   { return r.Name(), true }
func (f *fakeDriver) errorString(r Result) (string, bool) { return "fake description", true }
func (f *fakeDriver) driverGetVersion() (int32, Result)   { return 12040, 0 }
func (f *fakeDriver) deviceGetCount() (int32, Result)     { return f.devices, 0 }
func (f *fakeDriver) deviceGet(o int32) (int32, Result) {
	if o >= f.devices {
		return 0, 101
	}
	return o, 0
}
func (f *fakeDriver) deviceGetName(int32) (string, Result) { return "fakeDriver GPU", 0 }
func (f *fakeDriver) deviceGetAttribute(a DeviceAttribute, _ int32) (int32, Result) {
	if slices.Contains(f.unknownAttrs, a) {
		return 0, 1
	}
	return f.caps[a], 0
}
func (f *fakeDriver) primaryCtxSetFlags(int32, uint32) Result  { return 0 }
func (f *fakeDriver) primaryCtxRetain(int32) (uintptr, Result) { return fakeCtx, 0 }
func (f *fakeDriver) primaryCtxRelease(int32) Result {
	f.mu.Lock()
	f.released++
	f.mu.Unlock()
	return 0
}
func (f *fakeDriver) ctxSetCurrent(ctx uintptr) Result {
	f.mu.Lock()
	f.currentOn[unix.Gettid()] = ctx
	f.mu.Unlock()
	return 0
}
func (f *fakeDriver) memHostRegister(mem []byte, flags uint32) Result {
	f.noteThread()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.registerFails != 0 {
		return f.registerFails
	}
	f.registerFlags = append(f.registerFlags, flags)
	f.registered[addressOf(mem)] = len(mem)
	return 0
}
func (f *fakeDriver) memHostUnregister(mem []byte) Result {
	f.noteThread()
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.registered[addressOf(mem)]; !ok {
		return 713
	}
	delete(f.registered, addressOf(mem))
	return 0
}
func (f *fakeDriver) memHostGetDevicePointer(mem []byte) (DevicePtr, Result) {
	f.noteThread()
	return fakeDevBase + DevicePtr(addressOf(mem)&0xFFFF_FFFF), 0
}
func (f *fakeDriver) memHostAlloc(size int, flags uint32) ([]byte, Result) {
	f.noteThread()
	mem, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, 2
	}
	f.mu.Lock()
	f.allocated[addressOf(mem)] = mem
	f.mu.Unlock()
	return mem, 0
}
func (f *fakeDriver) memFreeHost(mem []byte) Result {
	f.noteThread()
	f.mu.Lock()
	m, ok := f.allocated[addressOf(mem)]
	delete(f.allocated, addressOf(mem))
	f.mu.Unlock()
	if !ok {
		return 1
	}
	unix.Munmap(m)
	return 0
}
func (f *fakeDriver) memcpyHtoDAsync(DevicePtr, []byte, uintptr) Result { f.noteThread(); return 0 }
func (f *fakeDriver) memAlloc(uint64) (DevicePtr, Result)               { f.noteThread(); return 0, 2 }

// memcpyHtoD/memcpyDtoH keep the bytes by destination address, so a round
// trip through one address gives them back; device address 0 or an address
// never written fails with CUDA_ERROR_INVALID_VALUE.
func (f *fakeDriver) memcpyHtoD(dst DevicePtr, src []byte) Result {
	f.noteThread()
	if dst == 0 {
		return 1
	}
	f.mu.Lock()
	f.devMem[dst] = append([]byte(nil), src...)
	f.mu.Unlock()
	return 0
}
func (f *fakeDriver) memcpyDtoH(dst []byte, src DevicePtr) Result {
	f.noteThread()
	f.mu.Lock()
	defer f.mu.Unlock()
	m, ok := f.devMem[src]
	if !ok || len(m) < len(dst) {
		return 1
	}
	copy(dst, m)
	return 0
}

var fullCaps = map[DeviceAttribute]int32{
	AttrComputeCapabilityMajor: 9, AttrComputeCapabilityMinor: 0,
	AttrCanMapHostMemory: 1, AttrHostRegisterSupported: 1, AttrReadOnlyHostRegisterSupported: 1,
}

// fakeDevice is device 0 of a binding over fake.
func fakeDevice(t *testing.T, fake *fakeDriver) Device {
	t.Helper()
	drv, err := newDriver(fake, "fakeDriver")
	if err != nil {
		t.Fatal(err)
	}
	dev, err := drv.Device(0)
	if err != nil {
		t.Fatal(err)
	}
	return dev
}

func fakeContext(t *testing.T, caps map[DeviceAttribute]int32) (*Context, *fakeDriver) {
	t.Helper()
	fake := newFakeDriver(caps)
	dev := fakeDevice(t, fake)
	var notes []string
	c, err := dev.NewContext(ContextOptions{Logf: func(f string, a ...any) { notes = append(notes, f) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, fake
}

func TestFakeDriverNoDevice(t *testing.T) {
	fake := newFakeDriver(fullCaps)
	fake.devices = 0
	_, err := newDriver(fake, "fakeDriver")
	if !errors.Is(err, ErrNoDevice) {
		t.Fatalf("newDriver with 0 devices = %v, want ErrNoDevice", err)
	}
}

func TestFakeDriverCapabilities(t *testing.T) {
	c, _ := fakeContext(t, fullCaps)
	got := c.Capabilities()
	want := Capabilities{Name: "fakeDriver GPU", ComputeMajor: 9, CanMapHostMemory: true, HostRegister: true, ReadOnlyHostRegister: true}
	if got != want {
		t.Fatalf("Capabilities() = %+v, want %+v", got, want)
	}
	if got.Arch() != "sm_90" {
		t.Errorf("Arch() = %q, want sm_90", got.Arch())
	}
}

func TestContextRunsWorkOnOneThreadWithContextCurrent(t *testing.T) {
	c, fake := fakeContext(t, fullCaps)
	var wg sync.WaitGroup
	tids := make(chan int, 64)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 8 {
				if err := c.Do(func() error { tids <- unix.Gettid(); return nil }); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	close(tids)
	for tid := range tids {
		if tid != c.tid {
			t.Fatalf("Do ran on thread %d, want the context thread %d", tid, c.tid)
		}
	}
	fake.mu.Lock()
	cur := fake.currentOn[c.tid]
	fake.mu.Unlock()
	if cur != fakeCtx {
		t.Fatalf("context on thread %d = %#x, want %#x made current", c.tid, cur, fakeCtx)
	}
	// Methods hop onto the thread by themselves, also from inside Do.
	mem, err := c.Allocate(4096)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Do(func() error { return c.Free(mem) }); err != nil {
		t.Fatalf("Free inside Do: %v", err)
	}
	fake.mu.Lock()
	defer fake.mu.Unlock()
	for tid := range fake.callThreads {
		if tid != c.tid {
			t.Errorf("driver call made on thread %d, not the context thread %d", tid, c.tid)
		}
	}
}

func TestContextDoErrorsPanicsAndClose(t *testing.T) {
	c, fake := fakeContext(t, fullCaps)
	sentinel := errors.New("callback failed")
	if err := c.Do(func() error { return sentinel }); err != sentinel {
		t.Errorf("Do returned %v, want the callback's error", err)
	}
	if err := c.Do(func() error { panic("boom") }); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("Do with a panicking callback = %v, want an error naming the panic", err)
	}
	if err := c.Do(func() error { return nil }); err != nil {
		t.Errorf("Do after a recovered panic = %v, want nil", err)
	}
	_, err := c.MemAlloc(1 << 40)
	if !errors.Is(err, Result(2)) || !strings.Contains(err.Error(), "CUDA_ERROR_OUT_OF_MEMORY") {
		t.Errorf("MemAlloc failure = %v, want CUDA_ERROR_OUT_OF_MEMORY", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Do(func() error { return nil }); !errors.Is(err, ErrClosed) {
		t.Errorf("Do after Close = %v, want ErrClosed", err)
	}
	if err := c.Close(); !errors.Is(err, ErrClosed) {
		t.Errorf("second Close = %v, want ErrClosed", err)
	}
	if fake.released != 1 {
		t.Errorf("primary context released %d times, want 1", fake.released)
	}
}

// A read-only segment on a device with neither READ_ONLY registration nor
// host page tables: cuda.h says the registration would fail, so Pin says
// ErrNotSupported without asking the driver (the caller stages instead).
func TestPinReadOnlyUnsupportedAsksNothing(t *testing.T) {
	c, fake := fakeContext(t, map[DeviceAttribute]int32{AttrCanMapHostMemory: 1, AttrHostRegisterSupported: 1})
	mem := cMemory(t, pinned.PageSize)
	if _, err := c.Pin(mem, pinned.ReadOnly); !errors.Is(err, ErrNotSupported) || !strings.Contains(err.Error(), "host page tables") {
		t.Fatalf("Pin read-only without support = %v, want ErrNotSupported naming both capabilities", err)
	}
	if len(fake.registerFlags) != 0 {
		t.Fatalf("registered %d times, want 0", len(fake.registerFlags))
	}
	// The owner's read-write segment still registers.
	r, err := c.Pin(mem, pinned.ReadWrite)
	if err != nil {
		t.Fatal(err)
	}
	r.Unpin()
}

// A driver older than an attribute answers CUDA_ERROR_INVALID_VALUE for it:
// for the host-registration attributes that means "not supported", not a
// device zerohop cannot use.
func TestCapabilitiesOfAnOlderDriver(t *testing.T) {
	fake := newFakeDriver(map[DeviceAttribute]int32{AttrComputeCapabilityMajor: 8, AttrComputeCapabilityMinor: 6, AttrCanMapHostMemory: 1})
	fake.unknownAttrs = []DeviceAttribute{AttrHostRegisterSupported, AttrPageableMemoryAccessUsesHostPageTables, AttrReadOnlyHostRegisterSupported}
	dev := fakeDevice(t, fake)
	caps, err := dev.Capabilities()
	if err != nil {
		t.Fatalf("Capabilities with a driver that predates attributes 99/100/113: %v", err)
	}
	if caps.HostRegister || caps.ReadOnlyHostRegister || caps.PageableUsesHostPageTables || !caps.CanMapHostMemory || caps.Arch() != "sm_86" {
		t.Fatalf("capabilities %+v", caps)
	}
	// A base attribute failing is still an error.
	fake.unknownAttrs = []DeviceAttribute{AttrCanMapHostMemory}
	if _, err := dev.Capabilities(); !errors.Is(err, Result(1)) {
		t.Fatalf("Capabilities with CAN_MAP_HOST_MEMORY unknown = %v, want CUDA_ERROR_INVALID_VALUE", err)
	}
}

func TestRegisterFlags(t *testing.T) {
	const pd = memHostRegisterPortable | memHostRegisterDeviceMap
	tests := []struct {
		name         string
		access       pinned.Access
		readOnlyCap  bool
		wantFlags    uint32
		wantReadOnly bool
		wantNote     bool
	}{
		{"owner registers read-write", pinned.ReadWrite, true, pd, false, false},
		{"subscriber gets READ_ONLY when supported", pinned.ReadOnly, true, pd | memHostRegisterReadOnly, true, false},
		{"subscriber without support falls back with a note where host page tables serve", pinned.ReadOnly, false, pd, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			caps := map[DeviceAttribute]int32{AttrCanMapHostMemory: 1, AttrHostRegisterSupported: 1}
			if tt.readOnlyCap {
				caps[AttrReadOnlyHostRegisterSupported] = 1
			} else {
				caps[AttrPageableMemoryAccessUsesHostPageTables] = 1
			}
			c, fake := fakeContext(t, caps)
			mem := cMemory(t, 3*pinned.PageSize)
			pr, err := c.Pin(mem, tt.access)
			if err != nil {
				t.Fatal(err)
			}
			r := pr.(*Region)
			if got := fake.registerFlags; len(got) != 1 || got[0] != tt.wantFlags {
				t.Errorf("registered with flags %v, want [%#x]", got, tt.wantFlags)
			}
			if r.ReadOnly() != tt.wantReadOnly || (r.Note() != "") != tt.wantNote {
				t.Errorf("ReadOnly %t note %q; want %t, note %t", r.ReadOnly(), r.Note(), tt.wantReadOnly, tt.wantNote)
			}
			// Device pointers per slot: base + offset, bounds-checked.
			base, _ := r.DevicePointer(0)
			if p, err := r.DevicePointer(pinned.PageSize); err != nil || p != base+pinned.PageSize {
				t.Errorf("DevicePointer(page) = %#x, %v; want %#x", p, err, base+pinned.PageSize)
			}
			if _, err := r.DevicePointer(uint64(len(mem))); err == nil {
				t.Error("DevicePointer past the end accepted")
			}
			if p, err := c.HostDevicePointer(mem[pinned.PageSize:]); err != nil || p != base+pinned.PageSize {
				t.Errorf("HostDevicePointer(slot 1) = %#x, %v; want %#x", p, err, base+pinned.PageSize)
			}
			if err := pr.Unpin(); err != nil {
				t.Fatal(err)
			}
			if len(fake.registered) != 0 {
				t.Errorf("%d ranges still registered after Unpin", len(fake.registered))
			}
			if _, err := c.HostDevicePointer(mem); !errors.Is(err, ErrNotPinned) {
				t.Errorf("HostDevicePointer after Unpin = %v, want ErrNotPinned", err)
			}
		})
	}
}

func TestPinFailureCarriesCUDAErrorAndNote(t *testing.T) {
	c, fake := fakeContext(t, map[DeviceAttribute]int32{AttrCanMapHostMemory: 1, AttrHostRegisterSupported: 1,
		AttrPageableMemoryAccessUsesHostPageTables: 1})
	fake.registerFails = 1
	_, err := c.Pin(cMemory(t, pinned.PageSize), pinned.ReadOnly)
	if !errors.Is(err, Result(1)) || !strings.Contains(err.Error(), "CUDA_ERROR_INVALID_VALUE") || !strings.Contains(err.Error(), "READ_ONLY") {
		t.Fatalf("Pin error = %v, want CUDA_ERROR_INVALID_VALUE and the READ_ONLY note", err)
	}
}

func TestPinUnsupportedDevice(t *testing.T) {
	c, _ := fakeContext(t, map[DeviceAttribute]int32{AttrCanMapHostMemory: 1})
	if _, err := c.Pin(cMemory(t, pinned.PageSize), pinned.ReadWrite); !errors.Is(err, ErrNotSupported) {
		t.Fatalf("Pin without HOST_REGISTER_SUPPORTED = %v, want ErrNotSupported", err)
	}
}

func TestAllocatorBookkeeping(t *testing.T) {
	c, fake := fakeContext(t, fullCaps)
	mem, err := c.Allocate(2 * pinned.PageSize)
	if err != nil {
		t.Fatal(err)
	}
	// Pinning allocated memory does not register it again.
	pr, err := c.Pin(mem, pinned.ReadWrite)
	if err != nil || len(fake.registerFlags) != 0 {
		t.Fatalf("Pin of Allocate'd memory: %v, %d registrations", err, len(fake.registerFlags))
	}
	if err := pr.Unpin(); err != nil {
		t.Fatal(err)
	}
	// Async copies accept pinned memory and refuse the Go heap.
	if err := c.CopyToDevice(0x1000, mem[:64], nil); err != nil {
		t.Errorf("CopyToDevice from pinned memory: %v", err)
	}
	if err := c.CopyToDevice(0x1000, make([]byte, 64), nil); !errors.Is(err, ErrNotPinned) {
		t.Errorf("CopyToDevice from the Go heap = %v, want ErrNotPinned", err)
	}
	if err := c.Free(mem[:pinned.PageSize]); err == nil {
		t.Error("Free of a partial block accepted")
	}
	if err := c.Free(mem); err != nil {
		t.Fatal(err)
	}
	if err := c.Free(mem); err == nil {
		t.Error("double Free accepted")
	}
	if len(fake.allocated) != 0 {
		t.Errorf("%d blocks still allocated", len(fake.allocated))
	}
}

func TestKernelArgsFromContext(t *testing.T) {
	c, fake := fakeContext(t, fullCaps)
	a, err := c.NewKernelArgs(4)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.HostDevicePointer(a.mem); err != nil {
		t.Errorf("kernel args block is not pinned host memory: %v", err)
	}
	if err := a.Free(); err != nil {
		t.Fatal(err)
	}
	if len(fake.allocated) != 0 {
		t.Errorf("kernel args block not freed")
	}
}

// The pool hooks, end to end through pinned.Pool with fakeDriver: a shared
// pool is registered once and unregistered at Close; an in-process pool's
// segment comes from Allocate and goes back through Free.
func TestPoolHooksWithFakeDriver(t *testing.T) {
	g := pinned.Geometry{SlotCount: 4, SlotSize: 3000}
	tests := []struct {
		name                          string
		opts                          func(c *Context) pinned.Options
		wantRegistered, wantAllocated int
	}{
		{"shared pool registers its memfd mapping", func(c *Context) pinned.Options {
			return pinned.Options{Name: "gpu-test", Shared: true, Pinner: c}
		}, 1, 0},
		{"in-process pool allocates pinned memory", func(c *Context) pinned.Options {
			return pinned.Options{Name: "gpu-test", Allocator: c, Pinner: c}
		}, 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, fake := fakeContext(t, fullCaps)
			p, err := pinned.New(g, tt.opts(c))
			if err != nil {
				t.Fatal(err)
			}
			fake.mu.Lock()
			registered, allocated := len(fake.registered), len(fake.allocated)
			fake.mu.Unlock()
			if registered != tt.wantRegistered || allocated != tt.wantAllocated {
				t.Errorf("open pool: %d ranges registered, %d blocks allocated; want %d, %d",
					registered, allocated, tt.wantRegistered, tt.wantAllocated)
			}
			slot1 := p.SlotBytes(1)
			if _, err := c.HostDevicePointer(slot1); err != nil {
				t.Errorf("slot 1 has no device pointer: %v", err)
			}
			if err := p.Close(); err != nil {
				t.Fatal(err)
			}
			fake.mu.Lock()
			defer fake.mu.Unlock()
			if len(fake.registered) != 0 || len(fake.allocated) != 0 {
				t.Errorf("after Close: %d registered, %d allocated", len(fake.registered), len(fake.allocated))
			}
			if len(c.host) != 0 {
				t.Errorf("context still tracks %d host ranges", len(c.host))
			}
		})
	}
}

// Plumbing only (fakeDriver proves nothing about CUDA): the synchronous
// copies run on the context thread, from outside and inside Do, accept Go
// heap memory (which the async copies refuse) as well as pinned memory, and
// their errors name the driver call.
func TestFakeDriverSyncCopiesPlumbing(t *testing.T) {
	c, fake := fakeContext(t, fullCaps)
	const dev DevicePtr = 0x1000
	src := make([]byte, 3000) // Go heap
	for i := range src {
		src[i] = byte(i * 7)
	}
	if err := c.CopyToDeviceSync(dev, src); err != nil {
		t.Fatalf("CopyToDeviceSync from the Go heap: %v", err)
	}
	dst := make([]byte, len(src))
	if err := c.CopyFromDeviceSync(dst, dev); err != nil {
		t.Fatalf("CopyFromDeviceSync into the Go heap: %v", err)
	}
	if !bytes.Equal(dst, src) {
		t.Fatal("round trip through the fake changed the bytes")
	}
	pinnedMem, err := c.Allocate(4096)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Do(func() error {
		if err := c.CopyToDeviceSync(dev+0x100, pinnedMem); err != nil {
			return err
		}
		return c.CopyFromDeviceSync(pinnedMem[:64], dev+0x100)
	}); err != nil {
		t.Fatalf("sync copies of pinned memory inside Do: %v", err)
	}
	if err := c.CopyToDeviceSync(dev, nil); err != nil {
		t.Errorf("CopyToDeviceSync of 0 bytes = %v, want nil", err)
	}

	err = c.CopyToDeviceSync(0, src)
	if !errors.Is(err, Result(1)) || !strings.Contains(err.Error(), "cuMemcpyHtoD_v2") ||
		!strings.Contains(err.Error(), "CUDA_ERROR_INVALID_VALUE") {
		t.Errorf("CopyToDeviceSync failure = %v, want cuMemcpyHtoD_v2 and CUDA_ERROR_INVALID_VALUE", err)
	}
	err = c.CopyFromDeviceSync(dst, 0x9000)
	if !errors.Is(err, Result(1)) || !strings.Contains(err.Error(), "cuMemcpyDtoH_v2") {
		t.Errorf("CopyFromDeviceSync failure = %v, want cuMemcpyDtoH_v2 and CUDA_ERROR_INVALID_VALUE", err)
	}

	fake.mu.Lock()
	for tid := range fake.callThreads {
		if tid != c.tid {
			t.Errorf("driver call made on thread %d, not the context thread %d", tid, c.tid)
		}
	}
	fake.mu.Unlock()
	if err := c.Free(pinnedMem); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.CopyToDeviceSync(dev, src); !errors.Is(err, ErrClosed) {
		t.Errorf("CopyToDeviceSync after Close = %v, want ErrClosed", err)
	}
}
