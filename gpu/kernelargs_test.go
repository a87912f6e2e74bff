package gpu

import (
	"encoding/binary"
	"errors"
	"math"
	"testing"

	"golang.org/x/sys/unix"
)

// cMemory returns n bytes of mmap'd memory: outside the Go heap, like the
// cuMemHostAlloc block KernelArgs uses on a GPU.
func cMemory(t testing.TB, n int) []byte {
	t.Helper()
	mem, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatalf("mmap %d bytes: %v", n, err)
	}
	t.Cleanup(func() { unix.Munmap(mem) })
	return mem
}

func TestKernelArgsLayout(t *testing.T) {
	const capacity = 6
	mem := cMemory(t, 4096)
	for i := range mem {
		mem[i] = 0xAA // garbage that the packer must overwrite/zero-pad
	}
	a, err := newKernelArgs(mem, capacity)
	if err != nil {
		t.Fatal(err)
	}
	a.Pointer(0x7f00_dead_beef_0000).Uint32(115_000).Int32(-3).Float32(0.25).Uint64(1 << 40)

	want := []struct {
		name  string
		value [8]byte // expected slot contents, little-endian, zero padded
	}{
		{"pointer", le64(0x7f00_dead_beef_0000)},
		{"uint32", le32(115_000)},
		{"int32", le32(uint32(0xFFFF_FFFD))},
		{"float32", le32(math.Float32bits(0.25))},
		{"uint64", le64(1 << 40)},
	}
	if a.Len() != len(want) {
		t.Fatalf("Len() = %d, want %d", a.Len(), len(want))
	}
	base := uint64(addressOf(mem))
	if got := uint64(a.paramsAddress()); got != base {
		t.Fatalf("params array at %#x, want block start %#x", got, base)
	}
	for i, w := range want {
		ptr := binary.LittleEndian.Uint64(mem[i*8:])
		wantPtr := base + 8*capacity + 8*uint64(i)
		if ptr != wantPtr {
			t.Errorf("params[%d] (%s) = %#x, want %#x", i, w.name, ptr, wantPtr)
			continue
		}
		off := ptr - base
		var got [8]byte
		copy(got[:], mem[off:off+8])
		if got != w.value {
			t.Errorf("value %d (%s) = % x, want % x", i, w.name, got, w.value)
		}
	}
	// Unused params entries still point at their own slots (written once).
	for i := len(want); i < capacity; i++ {
		if ptr := binary.LittleEndian.Uint64(mem[i*8:]); ptr != base+8*capacity+8*uint64(i) {
			t.Errorf("unused params[%d] = %#x", i, ptr)
		}
	}
	// Nothing past the 16·capacity block is touched.
	if mem[16*capacity] != 0xAA {
		t.Errorf("byte after the block was overwritten")
	}
}

func le64(v uint64) (b [8]byte) { binary.LittleEndian.PutUint64(b[:], v); return }
func le32(v uint32) (b [8]byte) { binary.LittleEndian.PutUint32(b[:], v); return }

func TestKernelArgsOverflowIsSticky(t *testing.T) {
	a, err := newKernelArgs(cMemory(t, 4096), 2)
	if err != nil {
		t.Fatal(err)
	}
	a.Uint32(1).Uint32(2).Uint32(3).Uint32(4)
	if !errors.Is(a.Err(), errTooManyArgs) {
		t.Fatalf("Err() = %v after 4 args into capacity 2, want errTooManyArgs", a.Err())
	}
	if a.Len() != 2 {
		t.Fatalf("Len() = %d, want 2", a.Len())
	}
	if err := (&Context{}).Launch(Function{name: "k"}, Dim3{1, 1, 1}, Dim3{1, 1, 1}, 0, nil, a); !errors.Is(err, errTooManyArgs) {
		t.Fatalf("Launch with overflowed args = %v, want errTooManyArgs before any driver call", err)
	}
	a.Reset()
	if a.Err() != nil || a.Len() != 0 {
		t.Fatalf("after Reset: Err %v, Len %d", a.Err(), a.Len())
	}
}

func TestKernelArgsRejectsSmallOrMisalignedBlocks(t *testing.T) {
	mem := cMemory(t, 4096)
	if _, err := newKernelArgs(mem[:31], 2); err == nil {
		t.Error("31-byte block accepted for 2 arguments (needs 32)")
	}
	if _, err := newKernelArgs(mem[4:], 2); err == nil {
		t.Error("block at a 4-byte offset accepted")
	}
}

func TestKernelArgsPackingDoesNotAllocate(t *testing.T) {
	a, err := newKernelArgs(cMemory(t, 4096), 8)
	if err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(1000, func() {
		a.Reset().Pointer(0x1000).Pointer(0x2000).Uint32(115_000).Float32(0.1).Float32(0.1).Float32(0.2).Int32(-1).Uint64(7)
	})
	if allocs != 0 {
		t.Fatalf("packing 8 arguments allocates %.1f times per frame, want 0", allocs)
	}
}
