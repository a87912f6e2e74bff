package gpu

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// KernelArgs packs kernel parameters for cuLaunchKernel's void **kernelParams.
//
// cgo's pointer rule forbids passing C a Go pointer to memory that holds Go
// pointers, and kernelParams is exactly that shape (an array of pointers to
// the values). So the array and the values live in one C-allocated block
// (cuMemHostAlloc), laid out for capacity n as:
//
//	offset 0        8·n                       16·n
//	       | params[0..n) | value[0..n), 8 bytes each |
//	params[i] = address of value[i] = base + 8·n + 8·i   (written once)
//
// Each value sits in its own 8-byte slot, in host byte order, low bytes first
// and zero-padded: natural alignment for every type up to 8 bytes, as
// cuLaunchKernel reads each parameter through its own pointer. The driver
// copies the values at launch, so the block can be Reset and refilled right
// after Launch returns. Packing never allocates.
//
// A KernelArgs is not safe for concurrent use.
type KernelArgs struct {
	mem      []byte // C memory, 16·capacity bytes
	capacity int
	n        int
	err      error // sticky: the first overflow; Launch refuses to run with it
	free     func([]byte) error
}

// slotSize is the size of one params entry and of one value slot.
const slotSize = 8

// errTooManyArgs is wrapped by the overflow error.
var errTooManyArgs = errors.New("too many kernel arguments")

// NewKernelArgs allocates a block for up to capacity parameters in pinned
// host memory of this context. Free it with Free before closing the context.
func (c *Context) NewKernelArgs(capacity int) (*KernelArgs, error) {
	if capacity <= 0 {
		return nil, fmt.Errorf("gpu: kernel args capacity %d must be positive", capacity)
	}
	mem, err := c.Allocate(2 * slotSize * capacity)
	if err != nil {
		return nil, fmt.Errorf("gpu: kernel args block: %w", err)
	}
	a, err := newKernelArgs(mem, capacity)
	if err != nil {
		c.Free(mem)
		return nil, err
	}
	a.free = c.Free
	return a, nil
}

// newKernelArgs lays out a block over mem, which must be C (non-Go-heap)
// memory of at least 16·capacity bytes, 8-byte aligned.
func newKernelArgs(mem []byte, capacity int) (*KernelArgs, error) {
	need := 2 * slotSize * capacity
	if len(mem) < need {
		return nil, fmt.Errorf("gpu: kernel args block of %d bytes, need %d for %d arguments", len(mem), need, capacity)
	}
	base := addressOf(mem)
	if base%slotSize != 0 {
		return nil, fmt.Errorf("gpu: kernel args block at %#x is not 8-byte aligned", base)
	}
	a := &KernelArgs{mem: mem[:need], capacity: capacity}
	for i := range capacity {
		binary.NativeEndian.PutUint64(a.mem[i*slotSize:], uint64(base)+uint64(a.valueOffset(i)))
	}
	return a, nil
}

func (a *KernelArgs) valueOffset(i int) int { return a.capacity*slotSize + i*slotSize }

// Reset forgets the packed arguments (and a previous overflow).
func (a *KernelArgs) Reset() *KernelArgs {
	a.n, a.err = 0, nil
	return a
}

// Len is the number of packed arguments.
func (a *KernelArgs) Len() int { return a.n }

// Err is the first packing error since Reset, if any.
func (a *KernelArgs) Err() error { return a.err }

func (a *KernelArgs) put(v uint64, size int) *KernelArgs {
	if a.n >= a.capacity {
		if a.err == nil {
			a.err = fmt.Errorf("gpu: argument %d: %w (capacity %d)", a.n+1, errTooManyArgs, a.capacity)
		}
		return a
	}
	slot := a.mem[a.valueOffset(a.n):][:slotSize]
	clear(slot)
	switch size {
	case 4:
		binary.NativeEndian.PutUint32(slot, uint32(v))
	default:
		binary.NativeEndian.PutUint64(slot, v)
	}
	a.n++
	return a
}

// Uint32 appends an unsigned int / uint32_t parameter.
func (a *KernelArgs) Uint32(v uint32) *KernelArgs { return a.put(uint64(v), 4) }

// Int32 appends an int parameter.
func (a *KernelArgs) Int32(v int32) *KernelArgs { return a.put(uint64(uint32(v)), 4) }

// Float32 appends a float parameter.
func (a *KernelArgs) Float32(v float32) *KernelArgs { return a.put(uint64(math.Float32bits(v)), 4) }

// Uint64 appends an unsigned long long / uint64_t / size_t parameter.
func (a *KernelArgs) Uint64(v uint64) *KernelArgs { return a.put(v, 8) }

// Pointer appends a device pointer parameter (T* in the kernel).
func (a *KernelArgs) Pointer(p DevicePtr) *KernelArgs { return a.put(uint64(p), 8) }

// paramsAddress is the void** passed to cuLaunchKernel (0 for no block).
func (a *KernelArgs) paramsAddress() uintptr {
	if a == nil {
		return 0
	}
	return addressOf(a.mem)
}

// Free releases the block. The KernelArgs must not be used afterwards.
func (a *KernelArgs) Free() error {
	if a.free == nil {
		return nil
	}
	f := a.free
	a.free = nil
	return f(a.mem)
}
