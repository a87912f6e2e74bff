package main

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const smallScan = "../../voxel/testdata/scan_small.bin"

// TestMatchesPCLGolden runs the command end to end on the committed scan
// and compares its output file with pcl::VoxelGrid's on the same file.
func TestMatchesPCLGolden(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		golden string
	}{
		{[]string{"--leaf", "0.2"}, "scan_small.leaf0.2.pcl.bin"},
		{[]string{"--leaf", "0.5"}, "scan_small.leaf0.5.pcl.bin"},
		{[]string{"--leaf", "0.3,0.3,0.2", "--min-points", "3"}, "scan_small.leaf0.3x0.3x0.2.min3.pcl.bin"},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out.bin")
			var stderr bytes.Buffer
			args := append([]string{"--in", smallScan, "--out", out}, tc.args...)
			if code := run(args, nil, &bytes.Buffer{}, &stderr); code != 0 {
				t.Fatalf("exit %d: %s", code, stderr.String())
			}
			got := readFloats(t, out)
			want := readFloats(t, filepath.Join("../../voxel/testdata/pcl", tc.golden))
			if len(got) != len(want) {
				t.Fatalf("%d floats, PCL %d", len(got), len(want))
			}
			for i := range got {
				if d := math.Abs(float64(got[i] - want[i])); d > 1e-5*max(1, math.Abs(float64(want[i]))) {
					t.Fatalf("point %d field %d: %v, PCL %v", i/4, i%4, got[i], want[i])
				}
			}
			if !strings.Contains(stderr.String(), "2898 points from") {
				t.Errorf("summary: %q", stderr.String())
			}
		})
	}
}

func TestStdinToStdout(t *testing.T) {
	in, err := os.ReadFile(smallScan)
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"--in", "-", "--out", "-", "--leaf", "0.5", "--crop", "-10,-10,-3,10,10,3"}, bytes.NewReader(in), &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if stdout.Len() == 0 || stdout.Len()%16 != 0 {
		t.Fatalf("%d bytes on stdout", stdout.Len())
	}
	for i := 0; i < stdout.Len(); i += 16 {
		x := math.Float32frombits(binary.LittleEndian.Uint32(stdout.Bytes()[i:]))
		if x < -10 || x > 10 {
			t.Fatalf("x = %v outside the crop box", x)
		}
	}
}

func TestErrors(t *testing.T) {
	dir := t.TempDir()
	odd := filepath.Join(dir, "odd.bin")
	if err := os.WriteFile(odd, make([]byte, 17), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out.bin")
	for _, tc := range []struct {
		name    string
		args    []string
		code    int
		wantErr string
	}{
		{"no input", []string{"--out", out}, 2, "--in is required"},
		{"no output", []string{"--in", smallScan}, 2, "--out is required"},
		{"stray argument", []string{"--in", smallScan, "--out", out, "extra"}, 2, `unexpected argument "extra"`},
		{"two leaf values", []string{"--in", smallScan, "--out", out, "--leaf", "0.1,0.2"}, 2, `--leaf "0.1,0.2": want one number or 3`},
		{"leaf not a number", []string{"--in", smallScan, "--out", out, "--leaf", "big"}, 2, `"big" is not a number`},
		{"zero leaf", []string{"--in", smallScan, "--out", out, "--leaf", "0"}, 2, "leaf x = 0 m"},
		{"short crop", []string{"--in", smallScan, "--out", out, "--crop", "1,2,3"}, 2, "want 6 comma-separated numbers, got 3"},
		{"negative min points", []string{"--in", smallScan, "--out", out, "--min-points", "-1"}, 2, "min points -1"},
		{"missing file", []string{"--in", filepath.Join(dir, "none.bin"), "--out", out}, 1, `read "` + filepath.Join(dir, "none.bin")},
		{"not KITTI", []string{"--in", odd, "--out", out}, 1, `read "` + odd + `": KITTI cloud: 17 bytes is not a whole number of 16-byte points`},
		{"leaf too small", []string{"--in", smallScan, "--out", out, "--leaf", "1e-9"}, 1, "voxel grid too large"},
		{"unwritable output", []string{"--in", smallScan, "--out", filepath.Join(dir, "no/such/dir.bin")}, 1, "write \"" + filepath.Join(dir, "no/such/dir.bin")},
		{"unknown flag", []string{"--in", smallScan, "--out", out, "--voxel", "1"}, 2, "flag provided but not defined: -voxel"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			code := run(tc.args, nil, &bytes.Buffer{}, &stderr)
			if code != tc.code || !strings.Contains(stderr.String(), tc.wantErr) {
				t.Fatalf("exit %d, stderr %q; want exit %d and %q", code, stderr.String(), tc.code, tc.wantErr)
			}
		})
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("a failed run wrote the output file")
	}
}

func TestHelp(t *testing.T) {
	var stderr bytes.Buffer
	if code := run([]string{"--help"}, nil, &bytes.Buffer{}, &stderr); code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"KITTI", "pcl::VoxelGrid", "--leaf L | --leaf LX,LY,LZ", "-min-points", "-crop", "voxelgrid.cpp"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("help lacks %q", want)
		}
	}
}

func readFloats(t *testing.T, path string) []float32 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f := make([]float32, len(b)/4)
	for i := range f {
		f[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return f
}
