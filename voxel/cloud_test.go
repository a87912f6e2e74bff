package voxel

import (
	"bytes"
	"math"
	"runtime"
	"strings"
	"testing"
)

func TestCloudValidate(t *testing.T) {
	data := make([]byte, 64)
	tests := []struct {
		name    string
		cloud   Cloud
		wantErr string // "" for valid
	}{
		{"standard layout", XYZI(data, 4), ""},
		{"fewer points than the data holds", XYZI(data, 2), ""},
		{"no points, no data", XYZI(nil, 0), ""},
		{"no intensity", Cloud{Data: data, Count: 5, Step: 12, OffX: 0, OffY: 4, OffZ: 8, OffI: -1}, ""},
		{"padded and reordered", Cloud{Data: data, Count: 2, Step: 32, OffX: 16, OffY: 20, OffZ: 24, OffI: 0}, ""},
		{"negative count", XYZI(data, -1), "point count -1 is negative"},
		{"zero step", Cloud{Data: data, Count: 1, Step: 0}, "point step 0 must be positive"},
		{"count beyond data", XYZI(data, 5), "5 points of 16 bytes need 80 bytes, data holds 64"},
		{"count times step overflows", Cloud{Data: data, Count: math.MaxInt / 2, Step: 16, OffY: 4, OffZ: 8, OffI: 12}, "data holds 64"},
		{"x beyond step", Cloud{Data: data, Count: 1, Step: 16, OffX: 13, OffY: 4, OffZ: 8, OffI: -1}, "x field at byte offset 13 does not fit a 16-byte point step"},
		{"negative z offset", Cloud{Data: data, Count: 1, Step: 16, OffX: 0, OffY: 4, OffZ: -4, OffI: -1}, "z field at byte offset -4"},
		{"intensity -2", Cloud{Data: data, Count: 1, Step: 16, OffX: 0, OffY: 4, OffZ: 8, OffI: -2}, "intensity field at byte offset -2"},
		{"overlapping fields", Cloud{Data: data, Count: 1, Step: 16, OffX: 0, OffY: 2, OffZ: 8, OffI: 12}, "y field at offset 2 overlaps x field at offset 0"},
		{"intensity on z", Cloud{Data: data, Count: 1, Step: 16, OffX: 0, OffY: 4, OffZ: 8, OffI: 8}, "intensity field at offset 8 overlaps z field"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cloud.Validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("Validate: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("Validate: got %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestKITTIRoundTrip(t *testing.T) {
	pts := []Point{{1, -2, 3.5, 0.25}, {float32(math.Inf(-1)), 0, -0.125, 1}}
	b := (&Points{P: pts}).AppendKITTI(nil)
	if len(b) != 32 {
		t.Fatalf("%d bytes, want 32", len(b))
	}
	c, err := KITTI(b)
	if err != nil {
		t.Fatal(err)
	}
	if c.Count != 2 || c.Validate() != nil {
		t.Fatalf("view %+v", c)
	}
	r := newPointReader(c)
	for i, p := range pts {
		x, y, z, in := r.at(i)
		if (Point{x, y, z, in}) != p {
			t.Fatalf("point %d: got %v, want %v", i, Point{x, y, z, in}, p)
		}
	}
	// Appending keeps what was there.
	if got := (&Points{P: pts[:1]}).AppendKITTI([]byte("ab")); !bytes.HasPrefix(got, []byte("ab")) || len(got) != 18 {
		t.Fatalf("append: %q", got)
	}
	if _, err := KITTI(make([]byte, 17)); err == nil || !strings.Contains(err.Error(), "17 bytes is not a whole number of 16-byte points") {
		t.Fatalf("KITTI of 17 bytes: %v", err)
	}
}

func TestConfigErrors(t *testing.T) {
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	tests := []struct {
		name      string
		cfg       Config
		maxPoints int
		wantErr   string
	}{
		{"zero leaf", Config{Leaf: [3]float32{0.2, 0, 0.2}}, 10, "leaf y = 0 m"},
		{"negative leaf", Config{Leaf: [3]float32{-1, 1, 1}}, 10, "leaf x = -1 m"},
		{"NaN leaf", Config{Leaf: [3]float32{1, 1, nan}}, 10, "leaf z = NaN m"},
		{"infinite leaf", Config{Leaf: [3]float32{inf, 1, 1}}, 10, "leaf x = +Inf m"},
		{"leaf without a finite inverse", Config{Leaf: cube(1e-40)}, 10, "finite inverse"},
		{"negative min points", Config{Leaf: cube(1), MinPoints: -1}, 10, "min points -1"},
		{"empty crop", Config{Leaf: cube(1), Crop: &Box{Min: [3]float32{0, 1, 0}, Max: [3]float32{1, 0, 1}}}, 10, "crop y range [1, 0]"},
		{"NaN crop", Config{Leaf: cube(1), Crop: &Box{Max: [3]float32{1, 1, nan}}}, 10, "crop z range [0, NaN]"},
		{"negative workers", Config{Leaf: cube(1), Workers: -2}, 10, "workers -2"},
		{"too many workers", Config{Leaf: cube(1), Workers: 65}, 10, "workers 65 exceeds 64"},
		{"no points", Config{Leaf: cube(1)}, 0, "max points 0 out of range"},
		{"NaN ceiling", Config{Leaf: cube(1), Ceiling: &nan}, 10, "ceiling NaN m must be finite"},
		{"infinite ceiling", Config{Leaf: cube(1), Ceiling: &inf}, 10, "ceiling +Inf m must be finite"},
		{"NaN mount", Config{Leaf: cube(1), Mount: Mount{Pitch: math.NaN()}}, 10, "mount pitch NaN is not finite"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := NewFilter(tc.cfg, tc.maxPoints)
			if err == nil {
				f.Close()
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("NewFilter: got %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestConfigDefaults(t *testing.T) {
	box := &Box{Min: [3]float32{-1, -1, -1}, Max: [3]float32{1, 1, 1}}
	f, err := NewFilter(Config{Leaf: cube(0.2), Crop: box, Workers: 64}, 10)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	box.Max[0] = -5 // the filter keeps its own copy
	cfg := f.Config()
	if cfg.MinPoints != 1 {
		t.Errorf("min points %d, want 1", cfg.MinPoints)
	}
	if cfg.Workers < 1 || cfg.Workers > runtimeProcs() {
		t.Errorf("workers %d, want 1..GOMAXPROCS", cfg.Workers)
	}
	if cfg.Crop == nil || cfg.Crop.Max[0] != 1 {
		t.Errorf("crop %+v, want the box as it was given", cfg.Crop)
	}
	if f.MaxPoints() != 10 {
		t.Errorf("max points %d", f.MaxPoints())
	}
}

func runtimeProcs() int { return runtime.GOMAXPROCS(0) }
