package gpu

import (
	"encoding/binary"
	"math"
	"testing"
)

func TestFloat32ViewSharesMemory(t *testing.T) {
	mem := make([]byte, 16)
	f, err := Float32View(mem)
	if err != nil {
		t.Fatal(err)
	}
	if len(f) != 4 {
		t.Fatalf("view of 16 bytes has %d values, want 4", len(f))
	}
	f[2] = 1.5
	if got := math.Float32frombits(binary.LittleEndian.Uint32(mem[8:])); got != 1.5 {
		t.Fatalf("write through the view: bytes 8..12 read %v, want 1.5", got)
	}
	binary.LittleEndian.PutUint32(mem[4:], math.Float32bits(-3))
	if f[1] != -3 {
		t.Fatalf("write to the bytes: view[1] = %v, want -3", f[1])
	}
}

func TestFloat32ViewRefusesBadLayouts(t *testing.T) {
	mem := make([]byte, 64)
	for _, tc := range []struct {
		name string
		mem  []byte
	}{
		{"a length not a multiple of 4", mem[:6]},
		{"a misaligned start", mem[1:9]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Float32View(tc.mem); err == nil {
				t.Fatal("no error")
			}
		})
	}
	if f, err := Float32View(nil); err != nil || f != nil {
		t.Fatalf("empty: %v, %v", f, err)
	}
}
