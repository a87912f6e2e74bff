package gpu

// A reader for what the CUDA toolchain records about each kernel in a
// cubin (an ELF file), so that tests can hold cubins compiled by NVIDIA's
// own NVRTC against what the Go side launches. The .nv.info sections are
// not documented by NVIDIA; the layout below is the one cuobjdump prints
// and that open tools (CuAssembler, envytools) decode, and
// TestCubinInfoDecodesAKnownKernel checks it on a cubin compiled by NVRTC
// 11.8 (testdata/axpb_sm90.cubin) from a kernel of known signature.
//
//	record: u8 format, u8 attribute, then by format (records stay 4-byte aligned)
//	  0x01 (NVAL) 2 bytes of padding; 0x02 (BVAL) u8 + pad; 0x03 (HVAL) u16;
//	  0x04 (SVAL) u16 size, then size bytes
//	.nv.info.<kernel>, attribute 0x17 (KPARAM_INFO), SVAL of 12 bytes:
//	  u32 index, u16 ordinal, u16 offset, u32 flags (size in bytes = flags >> 18)
//	.nv.info, attribute 0x2f (REGCOUNT), SVAL of 8 bytes: u32 symbol, u32 registers
//	.nv.info, attribute 0x23 (MAX_STACK_SIZE): u32 symbol, u32 bytes
//	.nv.shared.<kernel>: NOBITS, its size is the kernel's static shared memory

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
)

// axpbSource is the small kernel of the GPU tests (device_gpu_test.go) and
// of testdata/axpb_sm90.cubin.
const axpbSource = `
extern "C" __global__ void axpb(const float* x, float* y, float a, float b, unsigned int n) {
	unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) y[i] = a * x[i] + b;
}
`

const (
	eiattrKParamInfo   = 0x17
	eiattrRegCount     = 0x2f
	eiattrMaxStackSize = 0x23
)

// cubinParam is one kernel parameter as the compiler laid it out.
type cubinParam struct {
	Ordinal, Offset, Size int
}

// cubinKernel is what a cubin says about one kernel.
type cubinKernel struct {
	Name         string
	Params       []cubinParam // by ordinal
	Registers    int          // per thread
	StaticShared int          // bytes
	Stack        int          // bytes of local stack (spills, arrays); 0 when none
}

// cubinArch is the SM architecture in the ELF header's e_flags (sm_XY →
// XY; EF_CUDA_SM, the low byte, in cubins of CUDA before 12.9), which
// debug/elf does not expose: e_flags is at offset 48 of an ELF64 header.
func cubinArch(image []byte) int {
	if len(image) < 52 {
		return 0
	}
	return int(binary.LittleEndian.Uint32(image[48:]) & 0xff)
}

// sectionRecords decodes an .nv.info section.
func sectionRecords(s *elf.Section) ([]nvInfoRecord, error) {
	data, err := s.Data()
	if err == nil {
		var recs []nvInfoRecord
		if recs, err = nvInfoRecords(data); err == nil {
			return recs, nil
		}
	}
	return nil, fmt.Errorf("cubin %s: %w", s.Name, err)
}

type nvInfoRecord struct {
	Attr  byte
	Value []byte
}

func nvInfoRecords(data []byte) ([]nvInfoRecord, error) {
	var out []nvInfoRecord
	for i := 0; i < len(data); {
		if i+2 > len(data) {
			return nil, fmt.Errorf("record at %d: truncated", i)
		}
		format, attr := data[i], data[i+1]
		switch format {
		case 0x01, 0x02, 0x03:
			if i+4 > len(data) {
				return nil, fmt.Errorf("record at %d: truncated", i)
			}
			out = append(out, nvInfoRecord{Attr: attr, Value: data[i+2 : i+4]})
			i += 4
		case 0x04:
			if i+4 > len(data) {
				return nil, fmt.Errorf("record at %d: truncated", i)
			}
			n := int(binary.LittleEndian.Uint16(data[i+2:]))
			if i+4+n > len(data) {
				return nil, fmt.Errorf("record at %d: %d value bytes, %d left", i, n, len(data)-i-4)
			}
			out = append(out, nvInfoRecord{Attr: attr, Value: data[i+4 : i+4+n]})
			i += 4 + n
		default:
			return nil, fmt.Errorf("record at %d: unknown format %#x", i, format)
		}
	}
	return out, nil
}

// parseCubin reads every kernel's parameters, registers, static shared
// memory and stack from a cubin.
func parseCubin(image []byte) (map[string]*cubinKernel, error) {
	// A cubin's e_version holds the CUDA version (118 for 11.8), which
	// debug/elf refuses; the copy it reads says EV_CURRENT.
	if len(image) < 24 {
		return nil, fmt.Errorf("cubin: %d bytes", len(image))
	}
	image = slices.Clone(image)
	binary.LittleEndian.PutUint32(image[20:], uint32(elf.EV_CURRENT))
	f, err := elf.NewFile(bytes.NewReader(image))
	if err != nil {
		return nil, fmt.Errorf("cubin: %w", err)
	}
	if f.Class != elf.ELFCLASS64 || f.Data != elf.ELFDATA2LSB {
		return nil, fmt.Errorf("cubin: %v %v, want a little-endian ELF64", f.Class, f.Data)
	}
	syms, err := f.Symbols()
	if err != nil {
		return nil, fmt.Errorf("cubin symbols: %w", err)
	}
	kernels := map[string]*cubinKernel{}
	for _, s := range f.Sections {
		name, ok := strings.CutPrefix(s.Name, ".text.")
		if ok {
			kernels[name] = &cubinKernel{Name: name}
		}
	}
	// Symbols() drops the null symbol 0, so table index i is syms[i-1].
	symbolKernel := func(index uint32) *cubinKernel {
		if index == 0 || int(index) > len(syms) {
			return nil
		}
		return kernels[syms[index-1].Name]
	}
	for _, s := range f.Sections {
		switch {
		case s.Name == ".nv.info":
			recs, err := sectionRecords(s)
			if err != nil {
				return nil, err
			}
			for _, r := range recs {
				if len(r.Value) != 8 || (r.Attr != eiattrRegCount && r.Attr != eiattrMaxStackSize) {
					continue
				}
				k := symbolKernel(binary.LittleEndian.Uint32(r.Value))
				if k == nil {
					continue // a device function's record
				}
				v := int(binary.LittleEndian.Uint32(r.Value[4:]))
				if r.Attr == eiattrRegCount {
					k.Registers = v
				} else {
					k.Stack = v
				}
			}
		case strings.HasPrefix(s.Name, ".nv.info."):
			k := kernels[strings.TrimPrefix(s.Name, ".nv.info.")]
			if k == nil {
				return nil, fmt.Errorf("cubin: %s for a kernel without code", s.Name)
			}
			recs, err := sectionRecords(s)
			if err != nil {
				return nil, err
			}
			for _, r := range recs {
				if r.Attr != eiattrKParamInfo {
					continue
				}
				if len(r.Value) != 12 {
					return nil, fmt.Errorf("cubin %s: KPARAM_INFO of %d bytes, want 12", s.Name, len(r.Value))
				}
				k.Params = append(k.Params, cubinParam{
					Ordinal: int(binary.LittleEndian.Uint16(r.Value[4:])),
					Offset:  int(binary.LittleEndian.Uint16(r.Value[6:])),
					Size:    int(binary.LittleEndian.Uint32(r.Value[8:]) >> 18),
				})
			}
			slices.SortFunc(k.Params, func(a, b cubinParam) int { return a.Ordinal - b.Ordinal })
			for i, p := range k.Params {
				if p.Ordinal != i {
					return nil, fmt.Errorf("cubin %s: parameter ordinals %v are not 0..%d", s.Name, k.Params, len(k.Params)-1)
				}
			}
		case strings.HasPrefix(s.Name, ".nv.shared."):
			if k := kernels[strings.TrimPrefix(s.Name, ".nv.shared.")]; k != nil {
				k.StaticShared = int(s.Size)
			}
		}
	}
	return kernels, nil
}

// paramSizes is each parameter's size in bytes.
func (k *cubinKernel) paramSizes() []int {
	out := make([]int, len(k.Params))
	for i, p := range k.Params {
		out[i] = p.Size
	}
	return out
}

// kindSizes is each argument's C size in bytes.
func kindSizes(kinds []argKind) []int {
	out := make([]int, len(kinds))
	for i, k := range kinds {
		out[i] = k.size()
	}
	return out
}

// TestCubinInfoDecodesAKnownKernel reads a cubin that NVIDIA's NVRTC 11.8
// compiled from axpbSource for sm_90 (make test-cuda-libs regenerates and
// compares it): the reader must find axpb's five parameters with their C
// sizes and natural offsets, and its registers.
func TestCubinInfoDecodesAKnownKernel(t *testing.T) {
	image, err := os.ReadFile("testdata/axpb_sm90.cubin")
	if err != nil {
		t.Fatal(err)
	}
	if got := cubinArch(image); got != 90 {
		t.Errorf("architecture %d, want 90", got)
	}
	kernels, err := parseCubin(image)
	if err != nil {
		t.Fatal(err)
	}
	k := kernels["axpb"]
	if k == nil || len(kernels) != 1 {
		t.Fatalf("kernels %v, want only axpb", kernels)
	}
	// void axpb(const float* x, float* y, float a, float b, unsigned int n)
	want := []cubinParam{{0, 0, 8}, {1, 8, 8}, {2, 16, 4}, {3, 20, 4}, {4, 24, 4}}
	if !slices.Equal(k.Params, want) {
		t.Errorf("parameters %v, want %v", k.Params, want)
	}
	if k.Registers < 4 || k.Registers > 255 {
		t.Errorf("%d registers per thread, want 4..255", k.Registers)
	}
	if k.StaticShared != 0 || k.Stack != 0 {
		t.Errorf("static shared %d, stack %d bytes, want none", k.StaticShared, k.Stack)
	}
}

func TestNVInfoRecordsRejectsTruncation(t *testing.T) {
	for _, data := range [][]byte{
		{0x04},
		{0x01, 0x35},
		{0x04, 0x17, 0x0c, 0x00, 1, 2, 3},
		{0x03, 0x19, 0x48},
		{0x09, 0x17},
	} {
		if recs, err := nvInfoRecords(data); err == nil {
			t.Errorf("% x: decoded %v, want an error", data, recs)
		}
	}
}
