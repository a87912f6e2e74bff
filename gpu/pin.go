package gpu

import (
	"fmt"
	"sync/atomic"

	"github.com/zerohop/zerohop/pinned"
)

// Context implements both pool hooks: Pin for segments the pool maps itself
// (shared memfd pools), Allocate/Free for in-process pools.
var (
	_ pinned.Pinner        = (*Context)(nil)
	_ pinned.HostAllocator = (*Context)(nil)
)

// Region is a host range registered with cuMemHostRegister (or a range of
// cuMemHostAlloc'd memory, which needs no registration). It implements
// pinned.PinnedRegion.
type Region struct {
	c        *Context
	mem      []byte
	dev      DevicePtr
	readOnly bool   // registered with CU_MEMHOSTREGISTER_READ_ONLY
	note     string // why the registration differs from what was asked, if it does
	owned    bool   // false: inside an Allocate'd block; Unpin does nothing
	unpinned atomic.Bool
}

// Pin page-locks mem and maps it into the device's address space with
// cuMemHostRegister(PORTABLE|DEVICEMAP), adding READ_ONLY for
// pinned.ReadOnly segments when the device supports it. Without that
// support the segment is registered without the flag and Region.Note says
// so, but only where the device reads host memory through the host's page
// tables (cuda.h: otherwise a read-only mapping needs the flag); elsewhere
// Pin wraps ErrNotSupported without asking the driver.
// Memory from this Context's Allocate is already pinned and mapped: Pin
// returns a Region over it without registering again.
//
// Pin is meant for start-up (registration costs milliseconds per GiB), never
// per frame. mem must not be Go-heap memory and must stay mapped until Unpin.
func (c *Context) Pin(mem []byte, access pinned.Access) (pinned.PinnedRegion, error) {
	if len(mem) == 0 {
		return nil, fmt.Errorf("gpu: pin: empty range")
	}
	if dev, ok := c.lookup(mem); ok {
		return &Region{c: c, mem: mem, dev: dev, note: "inside cuMemHostAlloc'd memory; not registered again"}, nil
	}
	if !c.caps.HostRegister || !c.caps.CanMapHostMemory {
		return nil, fmt.Errorf("gpu: pin %d bytes on %s (host register %t, map host memory %t): %w",
			len(mem), c.caps.Name, c.caps.HostRegister, c.caps.CanMapHostMemory, ErrNotSupported)
	}
	flags, readOnly, note := registerFlags(access, c.caps)
	if access == pinned.ReadOnly && !readOnly && !c.caps.PageableUsesHostPageTables {
		// cuda.h: without READ_ONLY, memory mapped read-only registers only
		// where the device uses the host's page tables; don't ask.
		return nil, fmt.Errorf("gpu: pin %d-byte read-only segment on %s: the device supports neither READ_ONLY host registration nor pageable access through host page tables: %w",
			len(mem), c.caps.Name, ErrNotSupported)
	}
	if note != "" {
		c.logf("gpu: %s", note)
	}
	reg := &Region{c: c, mem: mem, readOnly: readOnly, note: note, owned: true}
	err := c.Do(func() error {
		if err := check(c.api, "cuMemHostRegister_v2", c.api.memHostRegister(mem, flags)); err != nil {
			return err
		}
		dev, r := c.api.memHostGetDevicePointer(mem)
		if err := check(c.api, "cuMemHostGetDevicePointer_v2", r); err != nil {
			c.api.memHostUnregister(mem)
			return err
		}
		reg.dev = dev
		return nil
	})
	if err != nil {
		if note != "" {
			return nil, fmt.Errorf("gpu: register %d-byte %s segment (%s): %w", len(mem), access, note, err)
		}
		return nil, fmt.Errorf("gpu: register %d-byte %s segment: %w", len(mem), access, err)
	}
	c.track(&hostRange{mem: mem, dev: reg.dev})
	return reg, nil
}

// registerFlags chooses cuMemHostRegister flags for an access mode.
func registerFlags(access pinned.Access, caps Capabilities) (flags uint32, readOnly bool, note string) {
	flags = memHostRegisterPortable | memHostRegisterDeviceMap
	if access != pinned.ReadOnly {
		return flags, false, ""
	}
	if caps.ReadOnlyHostRegister {
		return flags | memHostRegisterReadOnly, true, ""
	}
	return flags, false, fmt.Sprintf("%s does not support READ_ONLY host registration; read-only segment registered without it", caps.Name)
}

// DevicePointer is the device address of the region's byte at offset. For a
// registered range the device mapping is contiguous, so base+offset is valid
// for every offset inside the range (and only there).
func (r *Region) DevicePointer(offset uint64) (DevicePtr, error) {
	if offset >= uint64(len(r.mem)) {
		return 0, fmt.Errorf("gpu: device pointer at offset %d outside the %d-byte region", offset, len(r.mem))
	}
	return r.dev + DevicePtr(offset), nil
}

// Len is the region's size in bytes.
func (r *Region) Len() int { return len(r.mem) }

// ReadOnly reports whether the driver was told the range is read-only.
func (r *Region) ReadOnly() bool { return r.readOnly }

// Note says how the registration differs from what was asked ("" if not).
func (r *Region) Note() string { return r.note }

// Unpin unregisters the range. The pool calls it before unmapping.
func (r *Region) Unpin() error {
	if r.unpinned.Swap(true) {
		return fmt.Errorf("gpu: region unpinned twice")
	}
	if !r.owned {
		return nil
	}
	r.c.untrack(r.mem)
	err := r.c.call("cuMemHostUnregister", func() Result { return r.c.api.memHostUnregister(r.mem) })
	if err != nil {
		return fmt.Errorf("gpu: unregister %d-byte region: %w", len(r.mem), err)
	}
	return nil
}

// Allocate returns size bytes of page-locked host memory mapped into the
// device (cuMemHostAlloc(PORTABLE|DEVICEMAP)). The slice is C memory: valid
// until Free, never to be used after it.
func (c *Context) Allocate(size int) ([]byte, error) {
	if size <= 0 {
		return nil, fmt.Errorf("gpu: allocate %d pinned bytes: size must be positive", size)
	}
	if !c.caps.CanMapHostMemory {
		return nil, fmt.Errorf("gpu: allocate mapped host memory on %s: %w", c.caps.Name, ErrNotSupported)
	}
	var mem []byte
	var dev DevicePtr
	err := c.Do(func() error {
		var r Result
		mem, r = c.api.memHostAlloc(size, memHostAllocPortable|memHostAllocDeviceMap)
		if err := check(c.api, "cuMemHostAlloc", r); err != nil {
			return err
		}
		dev, r = c.api.memHostGetDevicePointer(mem)
		if err := check(c.api, "cuMemHostGetDevicePointer_v2", r); err != nil {
			c.api.memFreeHost(mem)
			return err
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("gpu: allocate %d pinned bytes: %w", size, err)
	}
	c.track(&hostRange{mem: mem, dev: dev, allocated: true})
	return mem, nil
}

// Free releases memory from Allocate; it refuses any other slice.
func (c *Context) Free(mem []byte) error {
	c.hostMu.Lock()
	hr, ok := c.host[addressOf(mem)]
	if ok && (!hr.allocated || len(hr.mem) != len(mem)) {
		ok = false
	}
	if ok {
		delete(c.host, addressOf(mem))
	}
	c.hostMu.Unlock()
	if !ok {
		return fmt.Errorf("gpu: free %d bytes at %#x: not a block from Allocate", len(mem), addressOf(mem))
	}
	return c.call("cuMemFreeHost", func() Result { return c.api.memFreeHost(mem) })
}

// HostDevicePointer is the device address of mem[0], for memory inside a
// block from Allocate or a pinned Region. Pure arithmetic: no driver call,
// fit for per-frame use.
func (c *Context) HostDevicePointer(mem []byte) (DevicePtr, error) {
	if dev, ok := c.lookup(mem); ok {
		return dev, nil
	}
	return 0, fmt.Errorf("gpu: %d bytes at %#x: %w", len(mem), addressOf(mem), ErrNotPinned)
}

func (c *Context) track(hr *hostRange) {
	c.hostMu.Lock()
	c.host[addressOf(hr.mem)] = hr
	c.hostMu.Unlock()
}

func (c *Context) untrack(mem []byte) {
	c.hostMu.Lock()
	delete(c.host, addressOf(mem))
	c.hostMu.Unlock()
}

// lookup finds the pinned range containing all of mem and returns the
// device address of mem[0]. Linear: a process pins a handful of segments.
func (c *Context) lookup(mem []byte) (DevicePtr, bool) {
	start := addressOf(mem)
	if start == 0 {
		return 0, false
	}
	end := start + uintptr(len(mem))
	c.hostMu.Lock()
	defer c.hostMu.Unlock()
	for base, hr := range c.host {
		if start >= base && end <= base+uintptr(len(hr.mem)) {
			return hr.dev + DevicePtr(start-base), true
		}
	}
	return 0, false
}

func (c *Context) requirePinned(mem []byte) error {
	if _, ok := c.lookup(mem); !ok {
		return fmt.Errorf("gpu: async copy of %d bytes at %#x: %w", len(mem), addressOf(mem), ErrNotPinned)
	}
	return nil
}
