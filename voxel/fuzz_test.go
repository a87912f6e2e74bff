package voxel

import (
	"errors"
	"math"
	"testing"
)

// FuzzFilter feeds arbitrary bytes as a KITTI cloud, with arbitrary leaf
// sizes and minimum counts. The filter must either equal the brute-force
// reference bit for bit or fail with ErrGridTooLarge; it must never panic or
// pass its input through.
func FuzzFilter(f *testing.F) {
	f.Add(kittiCloud(uniformCloud(50, -3, 3, 1)).Data, float32(0.5), float32(0.5), float32(0.5), uint8(1), false)
	f.Add(kittiCloud(faceCloud(0.2)).Data, float32(0.2), float32(0.2), float32(0.2), uint8(2), true)
	f.Add(kittiCloud(withNonFinite(uniformCloud(40, -1e6, 1e6, 2), 3)).Data, float32(1e-3), float32(1), float32(10), uint8(0), true)
	f.Add([]byte{0, 0, 0x80, 0x7f, 1, 2, 3}, float32(1), float32(1), float32(1), uint8(1), false)
	f.Fuzz(func(t *testing.T, data []byte, lx, ly, lz float32, minPoints uint8, crop bool) {
		data = data[:len(data)/XYZIStep*XYZIStep]
		cloud, err := KITTI(data)
		if err != nil {
			t.Fatal(err)
		}
		cfg := Config{Leaf: [3]float32{lx, ly, lz}, MinPoints: int(minPoints % 8), Workers: 2}
		if crop {
			cfg.Crop = &Box{Min: [3]float32{-100, -100, -10}, Max: [3]float32{100, 100, 10}}
		}
		filter, err := NewFilter(cfg, max(cloud.Count, 1))
		if err != nil {
			for _, l := range cfg.Leaf {
				if !(l > 0) || math.IsInf(float64(l), 0) || math.IsInf(float64(1/l), 0) {
					return // an invalid leaf must be refused, and was
				}
			}
			t.Fatalf("NewFilter(%+v): %v", cfg, err)
		}
		defer filter.Close()
		filter.parallelMin = 0
		out := NewPoints(max(cloud.Count, 1))
		if err := filter.Run(cloud, out); err != nil {
			if errors.Is(err, ErrGridTooLarge) && len(out.P) == 0 {
				return
			}
			t.Fatalf("Run: %v (%d points left in out)", err, len(out.P))
		}
		requireSamePoints(t, out.P, referenceFilter(cloud, cfg))
	})
}
