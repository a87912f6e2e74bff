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
	}{
		{"KITTI scan, leaf 0.2", kitti, 0.2, 1},
		{"KITTI scan, leaf 0.05", kitti, 0.05, 1},
		{"KITTI scan, leaf 0.2, min points 3", kitti, 0.2, 3},
		{"115k-point ring scan, leaf 0.2", ring, 0.2, 1},
		{"115k-point ring scan, leaf 0.5, min points 2", ring, 0.5, 2},
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
			bev, err := voxel.NewBEV(voxel.BEVConfig{GroundZ: -1})
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
			run := exec.Command(harness, in, out, strconv.FormatFloat(float64(c.leaf), 'g', -1, 32), strconv.Itoa(c.minPoints))
			log, err := run.CombinedOutput()
			if err != nil {
				t.Fatalf("emulator: %v\n%s", err, log)
			}
			t.Logf("emulator: %s", bytes.TrimSpace(log))
			got, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if wantBytes := want.AppendKITTI(nil); !bytes.Equal(got, wantBytes) {
				t.Fatalf("emulated kernels give %d voxels (%d bytes), CPU %d; first difference at byte %d",
					len(got)/16, len(got), len(want.P), firstDiff(got, wantBytes))
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
