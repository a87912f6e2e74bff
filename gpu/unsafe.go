package gpu

// This file holds every foreign call and every use of package unsafe in gpu.
//
// Invariants (cgo pointer-passing rules, https://pkg.go.dev/cmd/cgo#hdr-Passing_pointers,
// which purego follows, https://pkg.go.dev/github.com/ebitengine/purego):
//
//  1. A Go pointer is passed to C only for the duration of the call, and the
//     memory it points to holds no Go pointers: out-parameters (&n, &ptr), the
//     name buffer of cuDeviceGetName, the NUL-terminated kernel name, the
//     module image (cuModuleLoadDataEx copies it before returning), and the
//     host buffer of the synchronous copies cuMemcpyHtoD_v2/cuMemcpyDtoH_v2
//     (Context.CopyToDeviceSync/CopyFromDeviceSync: any []byte, Go heap
//     included). Those two return only once the driver is done with the host
//     buffer: HtoD from pageable memory returns after the last byte has been
//     staged into the driver's own pinned buffer (the DMA from there may
//     still be in flight, but it no longer reads our memory); DtoH returns
//     after the data has landed in dst. They call purego.SyscallN directly
//     so that invariant 2 covers the Go pointer.
//  2. purego.SyscallN, and our wrappers call and nvrtcCall, are
//     //go:uintptrescapes: writing uintptr(unsafe.Pointer(&x)) in their
//     argument list moves x to the heap and keeps it alive until the call
//     returns. The conversion must stay inside the call expression of such
//     a function; never store it in a variable first, and never pass it
//     through a wrapper that lacks the directive (see call).
//  3. Memory the driver keeps using after the call returns — registered
//     ranges, the source/destination of async copies, the kernelParams array
//     and the values it points to — is never Go-heap memory: it comes from
//     cuMemHostAlloc or mmap (pinned.Pool segments). Context enforces this
//     for async copies (ErrNotPinned) and KernelArgs is always C-allocated.
//  4. Pointers returned by C (cuMemHostAlloc, cuGetErrorName) are received
//     into unsafe.Pointer / *byte out-parameters, so no uintptr→Pointer
//     conversion happens; the GC ignores pointers outside its heap.
//  5. Slices made over C memory (unsafe.Slice) are freed only through
//     memFreeHost, and callers must not use them afterwards (documented on
//     Context.HostAlloc / pinned.HostAllocator).
//  6. The per-frame calls (launch, event record and elapsed time, async
//     copies, stream synchronize) must not allocate: a variadic SyscallN
//     call heap-allocates its argument array (go:uintptrescapes), about 40
//     allocations a frame. They pass a slice of a pooled callScratch
//     instead. Its arguments are plain values, C addresses (invariant 3),
//     or the address of callScratch.ms: a Go heap object, which does not
//     move, kept alive by the caller until the call returns; so storing
//     these addresses as uintptr before the call is safe.

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"unsafe"

	"github.com/ebitengine/purego"
	"golang.org/x/sys/unix"
)

// dlDriver is cudaAPI backed by the real libcuda.so.1.
type dlDriver struct {
	handle uintptr
	// scratch serves the per-frame calls' argument arrays (invariant 6).
	scratch scratchSet

	cuGetErrorName, cuGetErrorString                                        uintptr
	cuInit, cuDriverGetVersion                                              uintptr
	cuDeviceGetCount, cuDeviceGet, cuDeviceGetName, cuDeviceGetAttribute    uintptr
	cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRelease, cuCtxSetCurrent    uintptr
	cuDevicePrimaryCtxSetFlags                                              uintptr
	cuMemHostAlloc, cuMemFreeHost, cuMemHostRegister, cuMemHostUnregister   uintptr
	cuMemHostGetDevicePointer                                               uintptr
	cuMemAlloc, cuMemFree, cuMemsetD8, cuMemcpyHtoDAsync, cuMemcpyDtoHAsync uintptr
	cuMemcpyHtoD, cuMemcpyDtoH                                              uintptr
	cuStreamCreate, cuStreamDestroy, cuStreamSynchronize                    uintptr
	cuEventCreate, cuEventRecord, cuEventSynchronize                        uintptr
	cuEventElapsedTime, cuEventDestroy                                      uintptr
	cuModuleLoadDataEx, cuModuleGetFunction, cuModuleUnload, cuLaunchKernel uintptr
}

// symbols lists the exported names, with the _v2 (64-bit size / current
// ABI) entry points that cuda.h's #defines select since CUDA 3.2/11.0.
// cuEventElapsedTime keeps its original name: its _v2 appeared only in
// 12.8, and the original still exists in every driver.
func (d *dlDriver) symbols() map[string]*uintptr {
	return map[string]*uintptr{
		"cuGetErrorName":                &d.cuGetErrorName,
		"cuGetErrorString":              &d.cuGetErrorString,
		"cuInit":                        &d.cuInit,
		"cuDriverGetVersion":            &d.cuDriverGetVersion,
		"cuDeviceGetCount":              &d.cuDeviceGetCount,
		"cuDeviceGet":                   &d.cuDeviceGet,
		"cuDeviceGetName":               &d.cuDeviceGetName,
		"cuDeviceGetAttribute":          &d.cuDeviceGetAttribute,
		"cuDevicePrimaryCtxRetain":      &d.cuDevicePrimaryCtxRetain,
		"cuDevicePrimaryCtxRelease_v2":  &d.cuDevicePrimaryCtxRelease,
		"cuDevicePrimaryCtxSetFlags_v2": &d.cuDevicePrimaryCtxSetFlags,
		"cuCtxSetCurrent":               &d.cuCtxSetCurrent,
		"cuMemHostAlloc":                &d.cuMemHostAlloc,
		"cuMemFreeHost":                 &d.cuMemFreeHost,
		"cuMemHostRegister_v2":          &d.cuMemHostRegister,
		"cuMemHostUnregister":           &d.cuMemHostUnregister,
		"cuMemHostGetDevicePointer_v2":  &d.cuMemHostGetDevicePointer,
		"cuMemAlloc_v2":                 &d.cuMemAlloc,
		"cuMemFree_v2":                  &d.cuMemFree,
		"cuMemsetD8_v2":                 &d.cuMemsetD8,
		"cuMemcpyHtoDAsync_v2":          &d.cuMemcpyHtoDAsync,
		"cuMemcpyDtoHAsync_v2":          &d.cuMemcpyDtoHAsync,
		"cuMemcpyHtoD_v2":               &d.cuMemcpyHtoD,
		"cuMemcpyDtoH_v2":               &d.cuMemcpyDtoH,
		"cuStreamCreate":                &d.cuStreamCreate,
		"cuStreamDestroy_v2":            &d.cuStreamDestroy,
		"cuStreamSynchronize":           &d.cuStreamSynchronize,
		"cuEventCreate":                 &d.cuEventCreate,
		"cuEventRecord":                 &d.cuEventRecord,
		"cuEventSynchronize":            &d.cuEventSynchronize,
		"cuEventElapsedTime":            &d.cuEventElapsedTime,
		"cuEventDestroy_v2":             &d.cuEventDestroy,
		"cuModuleLoadDataEx":            &d.cuModuleLoadDataEx,
		"cuModuleGetFunction":           &d.cuModuleGetFunction,
		"cuModuleUnload":                &d.cuModuleUnload,
		"cuLaunchKernel":                &d.cuLaunchKernel,
	}
}

// loadLibrary dlopens soname and resolves syms. Once loaded, the handle is
// never closed: unloading a driver with live contexts is undefined, and the
// process keeps one driver for its lifetime.
func loadLibrary(soname string, syms map[string]*uintptr) (uintptr, error) {
	h, err := purego.Dlopen(soname, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		return 0, fmt.Errorf("dlopen %q: %v", soname, err)
	}
	for name, p := range syms {
		fn, err := purego.Dlsym(h, name)
		if err != nil || fn == 0 {
			purego.Dlclose(h) // not a usable library: nothing of it is in use yet
			return 0, fmt.Errorf("%q lacks symbol %s (driver too old?): %v", soname, name, err)
		}
		*p = fn
	}
	return h, nil
}

// preloadLibrary dlopens path with RTLD_GLOBAL and keeps it loaded, so
// that a later dlopen of its soname by another library finds it.
func preloadLibrary(path string) error {
	if _, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_GLOBAL); err != nil {
		return fmt.Errorf("dlopen %q: %v", path, err)
	}
	return nil
}

// call is SyscallN for a CUresult. It must be //go:uintptrescapes itself:
// the directive applies only to the function that carries it, so without
// it an out-parameter whose address its caller converted to uintptr (&p in
// call(fn, uintptr(unsafe.Pointer(&p)))) could stay on the goroutine's
// stack, the stack could move before SyscallN runs, and the driver would
// write to the old place. The fake driver caught exactly that under -race
// (cuMemHostAlloc's pointer read back as nil). Invariant 2.
//
//go:uintptrescapes
func call(fn uintptr, args ...uintptr) Result {
	r, _, _ := purego.SyscallN(fn, args...)
	return Result(int32(r))
}

// cString copies a NUL-terminated C string (invariant 4).
func cString(p *byte) string {
	if p == nil {
		return ""
	}
	n := 0
	for *(*byte)(unsafe.Add(unsafe.Pointer(p), n)) != 0 {
		n++
	}
	return string(unsafe.Slice(p, n))
}

// addressOf is the address of mem's first byte, for memory that is not on
// the Go heap (invariant 3) or for reporting.
func addressOf(mem []byte) uintptr {
	if len(mem) == 0 {
		return 0
	}
	return uintptr(unsafe.Pointer(unsafe.SliceData(mem)))
}

func (d *dlDriver) errorName(r Result) (string, bool) {
	var s *byte
	if call(d.cuGetErrorName, uintptr(r), uintptr(unsafe.Pointer(&s))) != 0 {
		return "", false
	}
	return cString(s), true
}

func (d *dlDriver) errorString(r Result) (string, bool) {
	var s *byte
	if call(d.cuGetErrorString, uintptr(r), uintptr(unsafe.Pointer(&s))) != 0 {
		return "", false
	}
	return cString(s), true
}

func (d *dlDriver) init() Result { return call(d.cuInit, 0) }

func (d *dlDriver) driverGetVersion() (int32, Result) {
	var v int32
	r := call(d.cuDriverGetVersion, uintptr(unsafe.Pointer(&v)))
	return v, r
}

func (d *dlDriver) deviceGetCount() (int32, Result) {
	var n int32
	r := call(d.cuDeviceGetCount, uintptr(unsafe.Pointer(&n)))
	return n, r
}

func (d *dlDriver) deviceGet(ordinal int32) (int32, Result) {
	var dev int32
	r := call(d.cuDeviceGet, uintptr(unsafe.Pointer(&dev)), uintptr(ordinal))
	return dev, r
}

func (d *dlDriver) deviceGetName(dev int32) (string, Result) {
	var buf [256]byte
	r := call(d.cuDeviceGetName, uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), uintptr(dev))
	if r != 0 {
		return "", r
	}
	return cString(&buf[0]), 0
}

func (d *dlDriver) deviceGetAttribute(a DeviceAttribute, dev int32) (int32, Result) {
	var v int32
	r := call(d.cuDeviceGetAttribute, uintptr(unsafe.Pointer(&v)), uintptr(a), uintptr(dev))
	return v, r
}

func (d *dlDriver) primaryCtxRetain(dev int32) (uintptr, Result) {
	var ctx uintptr // CUcontext: an opaque driver handle, not Go memory
	r := call(d.cuDevicePrimaryCtxRetain, uintptr(unsafe.Pointer(&ctx)), uintptr(dev))
	return ctx, r
}

func (d *dlDriver) primaryCtxSetFlags(dev int32, flags uint32) Result {
	return call(d.cuDevicePrimaryCtxSetFlags, uintptr(dev), uintptr(flags))
}

func (d *dlDriver) primaryCtxRelease(dev int32) Result {
	return call(d.cuDevicePrimaryCtxRelease, uintptr(dev))
}

func (d *dlDriver) ctxSetCurrent(ctx uintptr) Result { return call(d.cuCtxSetCurrent, ctx) }

func (d *dlDriver) memHostAlloc(size int, flags uint32) ([]byte, Result) {
	var p unsafe.Pointer // receives C memory (invariant 4)
	r := call(d.cuMemHostAlloc, uintptr(unsafe.Pointer(&p)), uintptr(size), uintptr(flags))
	if r != 0 || p == nil {
		return nil, r
	}
	return unsafe.Slice((*byte)(p), size), 0 // invariant 5
}

func (d *dlDriver) memFreeHost(mem []byte) Result {
	return call(d.cuMemFreeHost, addressOf(mem))
}

func (d *dlDriver) memHostRegister(mem []byte, flags uint32) Result {
	return call(d.cuMemHostRegister, addressOf(mem), uintptr(len(mem)), uintptr(flags)) // invariant 3
}

func (d *dlDriver) memHostUnregister(mem []byte) Result {
	return call(d.cuMemHostUnregister, addressOf(mem))
}

func (d *dlDriver) memHostGetDevicePointer(mem []byte) (DevicePtr, Result) {
	var p DevicePtr
	r := call(d.cuMemHostGetDevicePointer, uintptr(unsafe.Pointer(&p)), addressOf(mem), 0)
	return p, r
}

func (d *dlDriver) memAlloc(size uint64) (DevicePtr, Result) {
	var p DevicePtr
	r := call(d.cuMemAlloc, uintptr(unsafe.Pointer(&p)), uintptr(size))
	return p, r
}

func (d *dlDriver) memFree(p DevicePtr) Result { return call(d.cuMemFree, uintptr(p)) }

func (d *dlDriver) memsetD8(p DevicePtr, value uint8, n uint64) Result {
	return call(d.cuMemsetD8, uintptr(p), uintptr(value), uintptr(n))
}

func (d *dlDriver) memcpyHtoDAsync(dst DevicePtr, src []byte, stream uintptr) Result {
	return d.call4(d.cuMemcpyHtoDAsync, uintptr(dst), addressOf(src), uintptr(len(src)), stream, 4) // invariants 3, 6
}

func (d *dlDriver) memcpyDtoHAsync(dst []byte, src DevicePtr, stream uintptr) Result {
	return d.call4(d.cuMemcpyDtoHAsync, addressOf(dst), uintptr(src), uintptr(len(dst)), stream, 4) // invariants 3, 6
}

// memcpyHtoD is CUresult cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void
// *srcHost, size_t ByteCount), on the legacy default stream. src may be
// Go-heap memory (invariant 1): the pointer conversion is in SyscallN's
// argument list (invariant 2), which keeps src alive and unmoved until the
// driver returns, and the driver is done reading src when it returns.
func (d *dlDriver) memcpyHtoD(dst DevicePtr, src []byte) Result {
	r, _, _ := purego.SyscallN(d.cuMemcpyHtoD, uintptr(dst), uintptr(unsafe.Pointer(unsafe.SliceData(src))), uintptr(len(src)))
	runtime.KeepAlive(src)
	return Result(int32(r))
}

// memcpyDtoH is CUresult cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr
// srcDevice, size_t ByteCount): synchronous, dst (any memory, Go heap
// included; invariants 1 and 2) is written only during the call.
func (d *dlDriver) memcpyDtoH(dst []byte, src DevicePtr) Result {
	r, _, _ := purego.SyscallN(d.cuMemcpyDtoH, uintptr(unsafe.Pointer(unsafe.SliceData(dst))), uintptr(src), uintptr(len(dst)))
	runtime.KeepAlive(dst)
	return Result(int32(r))
}

func (d *dlDriver) streamCreate(flags uint32) (uintptr, Result) {
	var s uintptr
	r := call(d.cuStreamCreate, uintptr(unsafe.Pointer(&s)), uintptr(flags))
	return s, r
}

func (d *dlDriver) streamDestroy(s uintptr) Result { return call(d.cuStreamDestroy, s) }
func (d *dlDriver) streamSynchronize(s uintptr) Result {
	return d.call4(d.cuStreamSynchronize, s, 0, 0, 0, 1) // invariant 6
}

func (d *dlDriver) eventCreate(flags uint32) (uintptr, Result) {
	var e uintptr
	r := call(d.cuEventCreate, uintptr(unsafe.Pointer(&e)), uintptr(flags))
	return e, r
}

func (d *dlDriver) eventRecord(e, stream uintptr) Result {
	return d.call4(d.cuEventRecord, e, stream, 0, 0, 2) // invariant 6
}
func (d *dlDriver) eventSynchronize(e uintptr) Result { return call(d.cuEventSynchronize, e) }
func (d *dlDriver) eventDestroy(e uintptr) Result     { return call(d.cuEventDestroy, e) }

func (d *dlDriver) eventElapsedTime(start, end uintptr) (float32, Result) {
	// The result comes back through sc.ms, Go heap memory that does not
	// move and that sc keeps alive (invariant 6); by pointer, so
	// SyscallN's int-only limit does not apply.
	sc := d.getScratch()
	sc.args[0], sc.args[1], sc.args[2] = uintptr(unsafe.Pointer(&sc.ms)), start, end
	r, _, _ := purego.SyscallN(d.cuEventElapsedTime, sc.args[:3]...)
	ms := sc.ms
	runtime.KeepAlive(sc)
	d.putScratch(sc)
	return ms, Result(int32(r))
}

// JIT options of cuModuleLoadDataEx (cuda.h's CUjit_option).
const (
	cuJITErrorLogBuffer          = 5
	cuJITErrorLogBufferSizeBytes = 6
	jitLogBytes                  = 8 << 10
)

// moduleLoadData loads a cubin or PTX with cuModuleLoadDataEx, asking for
// the JIT's error log, which says why PTX did not compile (a PTX ISA newer
// than the driver, a missing libnvidia-ptxjitcompiler); a bare
// CUDA_ERROR_INVALID_PTX says nothing. The option arrays hold a pointer
// to the log buffer, which cgo's rules forbid in Go memory (invariant 1),
// so options, values and log are one mmap'd block (C memory), unmapped
// after the call: the driver keeps none of it. The driver writes the log
// and, into values[1], its length. image is Go memory the driver reads
// (and copies) during the call only.
func (d *dlDriver) moduleLoadData(image []byte) (uintptr, string, Result) {
	var m uintptr
	const valuesAt, logAt = 16, 4096
	block, err := unix.Mmap(-1, 0, logAt+jitLogBytes, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil { // no log, then
		r := call(d.cuModuleLoadDataEx, uintptr(unsafe.Pointer(&m)), uintptr(unsafe.Pointer(unsafe.SliceData(image))), 0, 0, 0)
		return m, "", r
	}
	defer unix.Munmap(block)
	base := addressOf(block)
	binary.NativeEndian.PutUint32(block[0:], cuJITErrorLogBuffer)
	binary.NativeEndian.PutUint32(block[4:], cuJITErrorLogBufferSizeBytes)
	binary.NativeEndian.PutUint64(block[valuesAt:], uint64(base)+logAt)
	binary.NativeEndian.PutUint64(block[valuesAt+8:], jitLogBytes)
	r := call(d.cuModuleLoadDataEx, uintptr(unsafe.Pointer(&m)), uintptr(unsafe.Pointer(unsafe.SliceData(image))),
		2, base, base+valuesAt)
	n := int(min(binary.NativeEndian.Uint64(block[valuesAt+8:]), jitLogBytes))
	log := block[logAt : logAt+n]
	if i := bytes.IndexByte(log, 0); i >= 0 {
		log = log[:i]
	}
	return m, strings.TrimSpace(string(log)), r
}

func (d *dlDriver) moduleGetFunction(mod uintptr, name string) (uintptr, Result) {
	var f uintptr
	cname := append([]byte(name), 0)
	r := call(d.cuModuleGetFunction, uintptr(unsafe.Pointer(&f)), mod, uintptr(unsafe.Pointer(&cname[0])))
	return f, r
}

func (d *dlDriver) moduleUnload(mod uintptr) Result { return call(d.cuModuleUnload, mod) }

func (d *dlDriver) launchKernel(f uintptr, grid, block Dim3, sharedMem uint32, stream uintptr, params *KernelArgs) Result {
	// params.mem is C memory (invariant 3); extra is NULL. Invariant 6.
	sc := d.getScratch()
	sc.args = [maxCallArgs]uintptr{f,
		uintptr(grid.X), uintptr(grid.Y), uintptr(grid.Z),
		uintptr(block.X), uintptr(block.Y), uintptr(block.Z),
		uintptr(sharedMem), stream, params.paramsAddress(), 0}
	return d.callScratch(d.cuLaunchKernel, sc, 11)
}

// maxCallArgs is the most arguments a per-frame call takes (cuLaunchKernel).
const maxCallArgs = 11

// callScratch is one per-frame call's arguments and out-parameter
// (invariant 6).
type callScratch struct {
	args [maxCallArgs]uintptr
	ms   float32 // cuEventElapsedTime's result
}

// scratchSet hands out callScratch values without allocating while at most
// len(slots) calls are in flight (one per Context thread in practice);
// beyond that it allocates. Not a sync.Pool: the race detector makes a
// pool drop items at random, which would allocate per frame under -race.
type scratchSet struct {
	slots [8]callScratch
	busy  [8]atomic.Bool
}

func (d *dlDriver) getScratch() *callScratch {
	for i := range d.scratch.busy {
		if d.scratch.busy[i].CompareAndSwap(false, true) {
			return &d.scratch.slots[i]
		}
	}
	return new(callScratch)
}

func (d *dlDriver) putScratch(sc *callScratch) {
	for i := range d.scratch.slots {
		if sc == &d.scratch.slots[i] {
			d.scratch.busy[i].Store(false)
			return
		}
	}
}

// callScratch calls fn with sc.args[:n] and gives sc back.
func (d *dlDriver) callScratch(fn uintptr, sc *callScratch, n int) Result {
	r, _, _ := purego.SyscallN(fn, sc.args[:n]...)
	d.putScratch(sc)
	return Result(int32(r))
}

// call4 is a per-frame call of up to 4 plain arguments (n of them).
func (d *dlDriver) call4(fn, a, b, c, e uintptr, n int) Result {
	sc := d.getScratch()
	sc.args[0], sc.args[1], sc.args[2], sc.args[3] = a, b, c, e
	return d.callScratch(fn, sc, n)
}

// dlNVRTC is the NVRTC library.
type dlNVRTC struct {
	nvrtcVersion, nvrtcCreateProgram, nvrtcCompileProgram, nvrtcDestroyProgram uintptr
	nvrtcGetPTXSize, nvrtcGetPTX, nvrtcGetCUBINSize, nvrtcGetCUBIN             uintptr
	nvrtcGetProgramLogSize, nvrtcGetProgramLog                                 uintptr
	// Optional (NVRTC 11.2 and later): 0 when the library lacks them.
	nvrtcGetNumSupportedArchs, nvrtcGetSupportedArchs uintptr
}

// bindOptional looks up the optional NVRTC symbols in the loaded handle h.
func (l *dlNVRTC) bindOptional(h uintptr) {
	for name, p := range map[string]*uintptr{
		"nvrtcGetNumSupportedArchs": &l.nvrtcGetNumSupportedArchs,
		"nvrtcGetSupportedArchs":    &l.nvrtcGetSupportedArchs,
	} {
		if fn, err := purego.Dlsym(h, name); err == nil {
			*p = fn
		}
	}
}

// supportedArchs lists the real architectures NVRTC can compile for
// (75 for sm_75, ...), ok = false when the library cannot say. The array
// it fills is Go memory holding no pointers (invariant 1).
func (l *dlNVRTC) supportedArchs() (archs []int, ok bool, r NVRTCResult) {
	if l.nvrtcGetNumSupportedArchs == 0 || l.nvrtcGetSupportedArchs == 0 {
		return nil, false, 0
	}
	var n int32
	if r = nvrtcCall(l.nvrtcGetNumSupportedArchs, uintptr(unsafe.Pointer(&n))); r != 0 {
		return nil, true, r
	}
	if n <= 0 || n > 1024 {
		return nil, true, 0
	}
	buf := make([]int32, n)
	if r = nvrtcCall(l.nvrtcGetSupportedArchs, uintptr(unsafe.Pointer(&buf[0]))); r != 0 {
		return nil, true, r
	}
	for _, a := range buf {
		archs = append(archs, int(a))
	}
	return archs, true, 0
}

// symbols: nvrtcGetCUBIN/Size exist since CUDA 11.1.
func (l *dlNVRTC) symbols() map[string]*uintptr {
	return map[string]*uintptr{
		"nvrtcVersion":           &l.nvrtcVersion,
		"nvrtcCreateProgram":     &l.nvrtcCreateProgram,
		"nvrtcCompileProgram":    &l.nvrtcCompileProgram,
		"nvrtcDestroyProgram":    &l.nvrtcDestroyProgram,
		"nvrtcGetPTXSize":        &l.nvrtcGetPTXSize,
		"nvrtcGetPTX":            &l.nvrtcGetPTX,
		"nvrtcGetCUBINSize":      &l.nvrtcGetCUBINSize,
		"nvrtcGetCUBIN":          &l.nvrtcGetCUBIN,
		"nvrtcGetProgramLogSize": &l.nvrtcGetProgramLogSize,
		"nvrtcGetProgramLog":     &l.nvrtcGetProgramLog,
	}
}

// nvrtcCall is SyscallN for an nvrtcResult; //go:uintptrescapes for the
// reason given at call.
//
//go:uintptrescapes
func nvrtcCall(fn uintptr, args ...uintptr) NVRTCResult {
	r, _, _ := purego.SyscallN(fn, args...)
	return NVRTCResult(int32(r))
}

func (l *dlNVRTC) version() (major, minor int, r NVRTCResult) {
	var ma, mi int32
	r = nvrtcCall(l.nvrtcVersion, uintptr(unsafe.Pointer(&ma)), uintptr(unsafe.Pointer(&mi)))
	return int(ma), int(mi), r
}

func (l *dlNVRTC) createProgram(source, name string) (uintptr, NVRTCResult) {
	var prog uintptr
	src := append([]byte(source), 0) // NUL-terminated copies; NVRTC copies them (invariant 1)
	nm := append([]byte(name), 0)
	r := nvrtcCall(l.nvrtcCreateProgram, uintptr(unsafe.Pointer(&prog)),
		uintptr(unsafe.Pointer(&src[0])), uintptr(unsafe.Pointer(&nm[0])), 0, 0, 0)
	return prog, r
}

func (l *dlNVRTC) destroyProgram(prog uintptr) NVRTCResult {
	p := prog
	return nvrtcCall(l.nvrtcDestroyProgram, uintptr(unsafe.Pointer(&p)))
}

// compileProgram passes options as a const char*[]: an array of pointers,
// which cgo's rules forbid in Go memory (invariant 1). The array and the
// strings are therefore laid out in one mmap'd block (C memory), freed after
// the call (NVRTC does not keep them).
func (l *dlNVRTC) compileProgram(prog uintptr, options []string) NVRTCResult {
	if len(options) == 0 {
		return nvrtcCall(l.nvrtcCompileProgram, prog, 0, 0)
	}
	size := 8 * len(options)
	for _, o := range options {
		size += len(o) + 1
	}
	block, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return 1 // NVRTC_ERROR_OUT_OF_MEMORY
	}
	defer unix.Munmap(block)
	base := addressOf(block)
	off := 8 * len(options)
	for i, o := range options {
		binary.NativeEndian.PutUint64(block[8*i:], uint64(base)+uint64(off))
		off += copy(block[off:], o)
		block[off] = 0
		off++
	}
	return nvrtcCall(l.nvrtcCompileProgram, prog, uintptr(len(options)), base)
}

// output reads one of NVRTC's size/get pairs into a Go buffer, which NVRTC
// writes during the call only (invariant 1). trimNUL drops the terminator of
// text outputs.
func (l *dlNVRTC) output(prog, sizeFn, getFn uintptr, trimNUL bool) ([]byte, NVRTCResult) {
	var n uintptr
	if r := nvrtcCall(sizeFn, prog, uintptr(unsafe.Pointer(&n))); r != 0 {
		return nil, r
	}
	if n == 0 {
		return nil, 0
	}
	buf := make([]byte, n)
	if r := nvrtcCall(getFn, prog, uintptr(unsafe.Pointer(&buf[0]))); r != 0 {
		return nil, r
	}
	if trimNUL && buf[len(buf)-1] == 0 {
		buf = buf[:len(buf)-1]
	}
	return buf, 0
}

func (l *dlNVRTC) programLog(prog uintptr) (string, NVRTCResult) {
	b, r := l.output(prog, l.nvrtcGetProgramLogSize, l.nvrtcGetProgramLog, true)
	return string(b), r
}

func (l *dlNVRTC) ptx(prog uintptr) ([]byte, NVRTCResult) {
	return l.output(prog, l.nvrtcGetPTXSize, l.nvrtcGetPTX, false) // keep the NUL: cuModuleLoadData wants it
}

func (l *dlNVRTC) cubin(prog uintptr) ([]byte, NVRTCResult) {
	return l.output(prog, l.nvrtcGetCUBINSize, l.nvrtcGetCUBIN, false)
}

// Float32View returns mem as float32 values (little-endian host order), the
// same memory, no copy: how a pinned BEV buffer from Allocate becomes the
// model's []float32 input tensor while VoxelFilter.Run writes it through its
// device pointer. mem must be 4-byte aligned (Allocate's memory is
// page-aligned) and a multiple of 4 bytes long. The view is valid exactly as
// long as mem (invariant 5: after Free it must not be used).
func Float32View(mem []byte) ([]float32, error) {
	if len(mem) == 0 {
		return nil, nil
	}
	if len(mem)%4 != 0 {
		return nil, fmt.Errorf("gpu: float32 view of %d bytes: not a multiple of 4", len(mem))
	}
	if a := addressOf(mem); a%4 != 0 {
		return nil, fmt.Errorf("gpu: float32 view at %#x: not 4-byte aligned", a)
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(mem))), len(mem)/4), nil
}
