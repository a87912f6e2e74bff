//go:build cudaemu

// The voxel kernels' logic on a host emulation of CUDA, against the CPU
// filter, bit for bit. Built only with -tags cudaemu; needs g++ (C++20) and
// FAILS without it. testdata/cudaemu/harness.cpp mirrors runOnThread's
// launches; prelude.h emulates the CUDA built-ins the kernels use. This
// checks the algorithm (keys, stable radix sort, scans, segments, means,
// BEV) as written in kernels/voxel.cu — not NVRTC, the driver or a GPU.

package gpu

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/zerohop/zerohop/voxel"
)

func TestEmulatedKernelsMatchCPU(t *testing.T) {
	dir := t.TempDir()
	harness := filepath.Join(dir, "harness")
	build := exec.Command("g++", "-std=c++20", "-O1", "-ffp-contract=off", "-pthread", "-o", harness, "testdata/cudaemu/harness.cpp")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the emulator (needs g++ with C++20): %v\n%s", err, out)
	}
	kitti, err := os.ReadFile("../voxel/testdata/scan_small.bin")
	if err != nil {
		t.Fatal(err)
	}
	ring := make([]byte, 16*64*1800)
	ringScan(ring, 64, 1800, 115200)
	for _, c := range []struct {
		name      string
		data      []byte
		leaf      float32
		minPoints int
		bevCell   float32 // 0: the default 0.2 m
		// reverse hands zh_bev_finish every cell's voxel list in
		// descending order; longList requires a list longer than the
		// kernel's insertion-sort limit (32), so its heap sort runs.
		reverse, longList bool
	}{
		{name: "KITTI scan, leaf 0.2", data: kitti, leaf: 0.2, minPoints: 1},
		{name: "KITTI scan, leaf 0.05", data: kitti, leaf: 0.05, minPoints: 1},
		{name: "KITTI scan, leaf 0.2, min points 3", data: kitti, leaf: 0.2, minPoints: 3},
		{name: "115k-point ring scan, leaf 0.2", data: ring, leaf: 0.2, minPoints: 1},
		{name: "115k-point ring scan, leaf 0.5, min points 2", data: ring, leaf: 0.5, minPoints: 2},
		{name: "115k-point ring scan, leaf 0.2, cell lists reversed", data: ring, leaf: 0.2, minPoints: 1, reverse: true},
		{name: "KITTI scan, leaf 0.05, BEV cell 1 m, cell lists reversed", data: kitti, leaf: 0.05, minPoints: 1, bevCell: 1, reverse: true, longList: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := len(c.data) / 16
			cpu, err := voxel.NewFilter(voxel.Config{Leaf: [3]float32{c.leaf, c.leaf, c.leaf}, MinPoints: c.minPoints}, n)
			if err != nil {
				t.Fatal(err)
			}
			defer cpu.Close()
			want := voxel.NewPoints(n)
			if err := cpu.Run(voxel.XYZI(c.data, n), want); err != nil {
				t.Fatal(err)
			}
			bevCell := c.bevCell
			if bevCell == 0 {
				bevCell = 0.2
			}
			bev, err := voxel.NewBEV(voxel.BEVConfig{GroundZ: -1, Cell: bevCell})
			if err != nil {
				t.Fatal(err)
			}
			wantBEV := make([]float32, bev.Len())
			if err := bev.Fill(want, wantBEV); err != nil {
				t.Fatal(err)
			}

			in, out := filepath.Join(dir, "in.bin"), filepath.Join(dir, "out.bin")
			if err := os.WriteFile(in, c.data, 0o644); err != nil {
				t.Fatal(err)
			}
			args := []string{in, out, strconv.FormatFloat(float64(c.leaf), 'g', -1, 32), strconv.Itoa(c.minPoints), strconv.FormatFloat(float64(bevCell), 'g', -1, 32)}
			if c.reverse {
				args = append(args, "reverse")
			}
			log, err := exec.Command(harness, args...).CombinedOutput()
			if err != nil {
				t.Fatalf("emulator: %v\n%s", err, log)
			}
			t.Logf("emulator: %s", bytes.TrimSpace(log))
			if !bytes.Contains(log, []byte("cell lists out of order 0\n")) {
				t.Fatal("zh_bev_finish left cell lists out of voxel order")
			}
			if c.reverse {
				var longest int
				at := bytes.Index(log, []byte("longest cell list"))
				if at < 0 {
					t.Fatal("emulator did not report its longest cell list")
				}
				if _, err := fmt.Sscanf(string(log[at:]), "longest cell list %d", &longest); err != nil {
					t.Fatalf("emulator did not report its longest cell list: %v", err)
				}
				if c.longList && longest <= 32 {
					t.Fatalf("longest cell list %d: the case does not reach the heap sort (> 32)", longest)
				}
			}
			got, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if wantBytes := want.AppendKITTI(nil); !bytes.Equal(got, wantBytes) {
				t.Fatalf("emulated kernels give %d voxels (%d bytes), CPU %d; first difference at byte %d",
					len(got)/16, len(got), len(want.P), firstDiff(got, wantBytes))
			}
			gotTop, err := os.ReadFile(out + ".top")
			if err != nil {
				t.Fatal(err)
			}
			if len(gotTop) != 4*len(want.Top) {
				t.Fatalf("%d bytes of tops, want %d", len(gotTop), 4*len(want.Top))
			}
			for i, w := range want.Top {
				if g := binary.LittleEndian.Uint32(gotTop[4*i:]); g != math.Float32bits(w) {
					t.Fatalf("top %d = %g, CPU %g", i, math.Float32frombits(g), w)
				}
			}
			gotBEV, err := os.ReadFile(out + ".bev")
			if err != nil {
				t.Fatal(err)
			}
			if len(gotBEV) != 4*len(wantBEV) {
				t.Fatalf("BEV of %d bytes, want %d", len(gotBEV), 4*len(wantBEV))
			}
			for i, w := range wantBEV {
				if g := binary.LittleEndian.Uint32(gotBEV[4*i:]); g != math.Float32bits(w) {
					t.Fatalf("BEV element %d = %g, CPU %g", i, math.Float32frombits(g), w)
				}
			}
		})
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
