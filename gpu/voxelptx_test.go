package gpu

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// ptxEntries reads each .entry's parameter sizes from PTX text.
func ptxEntries(t *testing.T, ptx string) map[string][]int {
	t.Helper()
	entry := regexp.MustCompile(`(?s)\.entry\s+(\w+)\s*\((.*?)\)`)
	param := regexp.MustCompile(`\.param\s+\.([usbf])(8|16|32|64)\s+\w+`)
	out := map[string][]int{}
	for _, m := range entry.FindAllStringSubmatch(ptx, -1) {
		sizes := []int{}
		for _, p := range strings.Split(m[2], ",") {
			if strings.TrimSpace(p) == "" {
				continue
			}
			pm := param.FindStringSubmatch(p)
			if pm == nil {
				t.Fatalf("%s: parameter %q is not a plain scalar", m[1], strings.TrimSpace(p))
			}
			bitsN, _ := strconv.Atoi(pm[2])
			sizes = append(sizes, bitsN/8)
		}
		out[m[1]] = sizes
	}
	return out
}

// TestEmbeddedPTXIsFromTheSource: kernels/voxel.ptx names the voxel.cu it
// was made from (sha256) and how, and holds every kernel the Go side
// launches with the parameters it packs, for compute_70, with no fused
// multiply-add (--fmad=false), in a PTX ISA that R520 drivers JIT.
func TestEmbeddedPTXIsFromTheSource(t *testing.T) {
	ptx := string(voxelPTX)
	if want := fmt.Sprintf("compute_%d", embeddedPTXArch); EmbeddedTarget != want {
		t.Fatalf("EmbeddedTarget %q, but the PTX is made for %s", EmbeddedTarget, want)
	}
	if want := embeddedPTXHeader(voxelSource); !strings.HasPrefix(ptx, want) {
		t.Fatalf("kernels/voxel.ptx starts with\n%.400s\nwant\n%s(kernels/voxel.cu changed: regenerate with ZEROHOP_UPDATE_TESTDATA=1 make test-cuda-libs)", ptx, want)
	}
	if bytes.IndexByte(voxelPTX, 0) >= 0 {
		t.Error("kernels/voxel.ptx holds a NUL byte")
	}
	if !strings.Contains(ptx, "\n.target sm_70\n") {
		t.Error("kernels/voxel.ptx does not target sm_70")
	}
	ver := regexp.MustCompile(`\n\.version (\d+)\.(\d+)\n`).FindStringSubmatch(ptx)
	if ver == nil {
		t.Fatal("kernels/voxel.ptx has no .version line")
	}
	if major, _ := strconv.Atoi(ver[1]); major > 7 || (major == 7 && ver[2] > "8") {
		t.Errorf("kernels/voxel.ptx is PTX ISA %s.%s; drivers before R520 cannot JIT more than 7.8", ver[1], ver[2])
	}
	if regexp.MustCompile(`\bfma\.`).MatchString(ptx) {
		t.Error("kernels/voxel.ptx fuses multiplies and adds (fma.): it was not made with --fmad=false")
	}
	entries := ptxEntries(t, ptx)
	packed := packedVoxelKernels()
	for k := range numVoxelKernels {
		name := voxelKernelNames[k]
		got, ok := entries[name]
		if !ok {
			t.Errorf("%s: not an .entry of kernels/voxel.ptx", name)
			continue
		}
		if want := kindSizes(packed[k]); !slices.Equal(got, want) {
			t.Errorf("%s: PTX parameter sizes %v, Go packs %v (%v)", name, got, want, packed[k])
		}
	}
	if len(entries) != int(numVoxelKernels) {
		t.Errorf("kernels/voxel.ptx has %d entries, Go launches %d", len(entries), numVoxelKernels)
	}
}

// The generator's side of kernels/voxel.ptx (TestRealNVRTCMakesTheEmbeddedPTX
// writes and compares it; TestEmbeddedPTXIsFromTheSource reads the header).

// embeddedPTXOptions are NVRTC's options for kernels/voxel.ptx.
func embeddedPTXOptions() []string {
	return voxelCompileArgs(fmt.Sprintf("compute_%d", embeddedPTXArch))
}

// embeddedPTXHeader is the comment block kernels/voxel.ptx starts with.
func embeddedPTXHeader(source string) string {
	sum := sha256.Sum256([]byte(source))
	return fmt.Sprintf("// zerohop: generated from kernels/voxel.cu by NVRTC %s with %s; do not edit.\n"+
		"// zerohop: regenerate with ZEROHOP_UPDATE_TESTDATA=1 make test-cuda-libs\n"+
		"// zerohop: voxel.cu sha256 %s\n",
		embeddedPTXNVRTC, strings.Join(embeddedPTXOptions(), " "), hex.EncodeToString(sum[:]))
}

// embeddedPTXFile is kernels/voxel.ptx's content for NVRTC's PTX of
// source (its trailing NUL dropped: a text file; LoadModule adds it back).
func embeddedPTXFile(source string, ptx []byte) []byte {
	ptx = bytes.TrimRight(ptx, "\x00")
	return append([]byte(embeddedPTXHeader(source)), ptx...)
}
