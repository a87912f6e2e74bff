package gpu

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// ContextOptions configure a Context. The zero value is the default.
type ContextOptions struct {
	// Logf receives the few notes worth a log line (e.g. a read-only
	// registration that fell back). Default: discard.
	Logf func(format string, args ...any)
	// Sync is how a thread waiting for the GPU waits (SyncAuto: the
	// primary context's flags are left as they are).
	Sync SyncMode
}

// SyncMode is how a CPU thread waits for the GPU in a synchronize: the
// primary context's scheduling flags (CU_CTX_SCHED_*). It applies to the
// whole process's use of the device's primary context, ONNX Runtime's CUDA
// provider included.
type SyncMode uint32

const (
	// SyncAuto is the driver's choice: spin while the process has fewer
	// active contexts than the machine has CPUs (one context, so: spin).
	SyncAuto SyncMode = 0
	// SyncSpin spins: the lowest wake-up latency, a core busy for as long
	// as the GPU works.
	SyncSpin SyncMode = 1
	// SyncYield spins, yielding the CPU between looks.
	SyncYield SyncMode = 2
	// SyncBlock sleeps on a synchronisation primitive until the GPU is
	// done (CU_CTX_SCHED_BLOCKING_SYNC): no core spent waiting, a wake-up
	// per synchronize.
	SyncBlock SyncMode = 4
)

// ParseSyncMode reads a SyncMode's name: auto, spin, yield or block.
func ParseSyncMode(s string) (SyncMode, error) {
	for _, m := range []SyncMode{SyncAuto, SyncSpin, SyncYield, SyncBlock} {
		if s == m.String() {
			return m, nil
		}
	}
	return 0, fmt.Errorf("GPU sync mode %q: want auto, spin, yield or block", s)
}

func (m SyncMode) String() string {
	switch m {
	case SyncAuto:
		return "auto"
	case SyncSpin:
		return "spin"
	case SyncYield:
		return "yield"
	case SyncBlock:
		return "block"
	}
	return fmt.Sprintf("SyncMode(%d)", uint32(m))
}

// Context is a device's primary context made current on one OS thread,
// owned by a goroutine locked to that thread. Every driver call that needs a
// current context runs there: through Do, or through the methods below,
// which hop onto the thread themselves (directly when already on it, so they
// may be used inside Do without deadlock).
//
// Close stops the goroutine and releases the primary context. Free device
// memory, streams, events, modules and pinned host memory first: releasing
// the last reference to the primary context destroys them.
type Context struct {
	api  cudaAPI
	dev  Device
	caps Capabilities
	logf func(string, ...any)
	ctx  uintptr // CUcontext, opaque

	tid int // the worker's thread id; written before ready, read-only after

	doMu   sync.Mutex // serialises Do callers; work/reply carry one call at a time
	work   chan func() error
	reply  chan error
	stop   chan struct{}
	done   chan struct{}
	closed atomic.Bool

	hostMu sync.Mutex
	host   map[uintptr]*hostRange // pinned host memory by start address
}

// hostRange is host memory the driver can reach: cuMemHostAlloc'd
// (allocated) or cuMemHostRegister'ed (registered).
type hostRange struct {
	mem       []byte
	dev       DevicePtr // device address of mem[0] (mapped memory)
	allocated bool
}

// NewContext retains the device's primary context and starts the goroutine
// that keeps it current on a locked OS thread.
func (d Device) NewContext(opts ContextOptions) (*Context, error) {
	caps, err := d.Capabilities()
	if err != nil {
		return nil, err
	}
	api := d.drv.api
	logf := opts.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	// Before the retain, which activates the context with its flags. A
	// refusal costs the wait's CPU, not the GPU path: logged, not failed.
	if opts.Sync != SyncAuto {
		if err := check(api, "cuDevicePrimaryCtxSetFlags_v2", api.primaryCtxSetFlags(d.handle, uint32(opts.Sync))); err != nil {
			logf("gpu: device %d (%s): waits for the GPU are the driver's default, not %s: %v", d.ordinal, caps.Name, opts.Sync, err)
		}
	}
	ctx, r := api.primaryCtxRetain(d.handle)
	if err := check(api, "cuDevicePrimaryCtxRetain", r); err != nil {
		return nil, fmt.Errorf("gpu: device %d (%s): %w", d.ordinal, caps.Name, err)
	}
	c := &Context{
		api: api, dev: d, caps: caps, logf: logf, ctx: ctx,
		work:  make(chan func() error),
		reply: make(chan error),
		stop:  make(chan struct{}),
		done:  make(chan struct{}),
		host:  make(map[uintptr]*hostRange),
	}
	ready := make(chan error, 1)
	go c.loop(ready)
	if err := <-ready; err != nil {
		api.primaryCtxRelease(d.handle)
		return nil, fmt.Errorf("gpu: device %d (%s): %w", d.ordinal, caps.Name, err)
	}
	return c, nil
}

// loop is the Context's goroutine. It never calls UnlockOSThread: when it
// returns, the runtime terminates the thread, so the thread's current-context
// binding can never leak to another goroutine.
func (c *Context) loop(ready chan<- error) {
	runtime.LockOSThread()
	c.tid = unix.Gettid()
	if err := check(c.api, "cuCtxSetCurrent", c.api.ctxSetCurrent(c.ctx)); err != nil {
		close(c.done)
		ready <- err
		return
	}
	ready <- nil
	for {
		select {
		case fn := <-c.work:
			c.reply <- runRecovered(fn)
		case <-c.stop:
			c.api.ctxSetCurrent(0)
			close(c.done)
			return
		}
	}
}

// runRecovered keeps a panicking callback from killing the context thread
// silently; the panic comes back as an error from Do.
func runRecovered(fn func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("gpu: panic in Context.Do callback: %v", p)
		}
	}()
	return fn()
}

// Do runs fn on the context's thread with the context current and returns
// its error. Calls from several goroutines are serialised. Called from
// inside fn (same thread), Do runs its argument directly.
func (c *Context) Do(fn func() error) error {
	if c.closed.Load() {
		return ErrClosed
	}
	if c.onThread() {
		return fn()
	}
	c.doMu.Lock()
	defer c.doMu.Unlock()
	if c.closed.Load() {
		return ErrClosed
	}
	c.work <- fn
	return <-c.reply
}

// onThread reports whether the caller runs on the context's locked thread.
// Only the owning goroutine can: a locked thread runs no other goroutine.
func (c *Context) onThread() bool { return unix.Gettid() == c.tid }

// Close stops the context's goroutine and releases the primary context.
// It waits for a Do in progress; later calls return ErrClosed. It must not
// be called from inside Do.
func (c *Context) Close() error {
	if c.onThread() {
		return fmt.Errorf("gpu: Context.Close called from inside Do")
	}
	c.doMu.Lock()
	defer c.doMu.Unlock()
	if c.closed.Swap(true) {
		return ErrClosed
	}
	close(c.stop)
	<-c.done
	if err := check(c.api, "cuDevicePrimaryCtxRelease_v2", c.api.primaryCtxRelease(c.dev.handle)); err != nil {
		return fmt.Errorf("gpu: release context of device %d: %w", c.dev.ordinal, err)
	}
	return nil
}

// Device is the context's device.
func (c *Context) Device() Device { return c.dev }

// Capabilities are the device's, read when the context was created.
func (c *Context) Capabilities() Capabilities { return c.caps }

// call runs one driver call on the context thread and wraps its failure.
func (c *Context) call(op string, f func() Result) error {
	return c.Do(func() error { return check(c.api, op, f()) })
}

// MemAlloc allocates n bytes of device memory.
func (c *Context) MemAlloc(n uint64) (DevicePtr, error) {
	var p DevicePtr
	err := c.call("cuMemAlloc_v2", func() (r Result) { p, r = c.api.memAlloc(n); return })
	if err != nil {
		return 0, fmt.Errorf("gpu: allocate %d device bytes: %w", n, err)
	}
	return p, nil
}

// MemFree frees device memory from MemAlloc.
func (c *Context) MemFree(p DevicePtr) error {
	return c.call("cuMemFree_v2", func() Result { return c.api.memFree(p) })
}

// MemsetD8 sets n bytes at p to v and waits until it is done.
// cuMemsetD8 on device memory returns before the memset runs, on the legacy
// default stream, which zerohop's CU_STREAM_NON_BLOCKING streams do not
// wait for: without the wait a kernel launched next could run first and
// have its output wiped (or read memory not yet cleared).
func (c *Context) MemsetD8(p DevicePtr, v uint8, n uint64) error {
	return c.Do(func() error {
		if err := check(c.api, "cuMemsetD8_v2", c.api.memsetD8(p, v, n)); err != nil {
			return err
		}
		return check(c.api, "cuStreamSynchronize", c.api.streamSynchronize(0))
	})
}

// CopyToDevice enqueues a copy of src to dst on s. src must be pinned host
// memory of this context (Allocate or a pinned Region), because the copy
// outlives the call; it must stay unchanged until s is synchronised.
func (c *Context) CopyToDevice(dst DevicePtr, src []byte, s *Stream) error {
	if err := c.requirePinned(src); err != nil {
		return err
	}
	return c.call("cuMemcpyHtoDAsync_v2", func() Result { return c.api.memcpyHtoDAsync(dst, src, s.handle()) })
}

// CopyFromDevice enqueues a copy of len(dst) bytes from src into dst on s.
// dst must be pinned host memory of this context, untouched until s is
// synchronised.
func (c *Context) CopyFromDevice(dst []byte, src DevicePtr, s *Stream) error {
	if err := c.requirePinned(dst); err != nil {
		return err
	}
	return c.call("cuMemcpyDtoHAsync_v2", func() Result { return c.api.memcpyDtoHAsync(dst, src, s.handle()) })
}

// CopyToDeviceSync copies src to dst and returns once src may be reused. src
// may be any host memory, pageable Go heap included (unsafe.go, invariant 1:
// the driver reads it only during the call, through its own staging buffer
// when it is not pinned). It runs on the legacy default stream, so it waits
// for work queued there first; it does not order with non-blocking Streams.
// From pageable memory the DMA from the staging buffer may still be in
// flight when it returns (an Event recorded on the default stream afterwards
// completes once it has landed). Slower than CopyToDevice from pinned
// memory; measured by TestGPUHostToDeviceBandwidth.
func (c *Context) CopyToDeviceSync(dst DevicePtr, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	err := c.call("cuMemcpyHtoD_v2", func() Result { return c.api.memcpyHtoD(dst, src) })
	if err != nil {
		return fmt.Errorf("gpu: copy %d host bytes to device %#x: %w", len(src), dst, err)
	}
	return nil
}

// CopyFromDeviceSync copies len(dst) bytes from src into dst and returns
// once they are there. dst may be any host memory, pageable Go heap included
// (invariant 1: written only during the call). Like CopyToDeviceSync it runs
// on the legacy default stream.
func (c *Context) CopyFromDeviceSync(dst []byte, src DevicePtr) error {
	if len(dst) == 0 {
		return nil
	}
	err := c.call("cuMemcpyDtoH_v2", func() Result { return c.api.memcpyDtoH(dst, src) })
	if err != nil {
		return fmt.Errorf("gpu: copy %d bytes from device %#x to the host: %w", len(dst), src, err)
	}
	return nil
}
