package voxel

import (
	"cmp"
	"encoding/binary"
	"math"
	"slices"
)

// referenceFilter is the brute-force voxel filter that Filter must equal bit
// for bit: a map from voxel index triple to sums, then a sort. It shares no
// code with Filter. Indices are kept as float64 integers, so it handles any
// finite coordinate and leaf.
func referenceFilter(in Cloud, cfg Config) []Point {
	pts, _ := referenceFilterTops(in, cfg)
	return pts
}

// referenceFilterTops is referenceFilter with each voxel's top: the
// largest robot-frame z (cfg.Mount's Transform.Apply) of its points.
func referenceFilterTops(in Cloud, cfg Config) ([]Point, []float32) {
	type sums struct {
		x, y, z, i float64
		top        float64
		n          int
	}
	tf := cfg.Mount.Transform()
	var inv [3]float32
	for a := range 3 {
		inv[a] = float32(1) / cfg.Leaf[a]
	}
	f32 := func(p, off int) float32 {
		if off < 0 {
			return 0
		}
		return math.Float32frombits(binary.LittleEndian.Uint32(in.Data[p*in.Step+off:]))
	}
	finite := func(v float32) bool { return !math.IsNaN(float64(v)) && !math.IsInf(float64(v), 0) }
	voxels := map[[3]float64]*sums{}
	for p := range in.Count {
		v := [4]float32{f32(p, in.OffX), f32(p, in.OffY), f32(p, in.OffZ), f32(p, in.OffI)}
		if !finite(v[0]) || !finite(v[1]) || !finite(v[2]) || !finite(v[3]) {
			continue
		}
		if _, _, h := tf.Apply(float64(v[0]), float64(v[1]), float64(v[2])); cfg.Ceiling != nil && !(h <= float64(*cfg.Ceiling)) {
			continue
		}
		if b := cfg.Crop; b != nil {
			if v[0] < b.Min[0] || v[0] > b.Max[0] || v[1] < b.Min[1] || v[1] > b.Max[1] || v[2] < b.Min[2] || v[2] > b.Max[2] {
				continue
			}
		}
		var key [3]float64
		for a := range 3 {
			prod := v[a] * inv[a] // float32 product, as PCL
			key[a] = math.Floor(float64(prod))
		}
		s := voxels[key]
		if s == nil {
			s = &sums{top: math.Inf(-1)}
			voxels[key] = s
		}
		if _, _, h := tf.Apply(float64(v[0]), float64(v[1]), float64(v[2])); h > s.top {
			s.top = h
		}
		s.x += float64(v[0])
		s.y += float64(v[1])
		s.z += float64(v[2])
		s.i += float64(v[3])
		s.n++
	}
	keys := make([][3]float64, 0, len(voxels))
	for k, s := range voxels {
		if s.n >= max(cfg.MinPoints, 1) {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b [3]float64) int {
		return cmp.Or(cmp.Compare(a[2], b[2]), cmp.Compare(a[1], b[1]), cmp.Compare(a[0], b[0]))
	})
	out, tops := make([]Point, len(keys)), make([]float32, len(keys))
	for k, key := range keys {
		s := voxels[key]
		n := float64(s.n)
		out[k] = Point{float32(s.x / n), float32(s.y / n), float32(s.z / n), float32(s.i / n)}
		tops[k] = float32(s.top)
		if tops[k] == 0 {
			tops[k] = 0 // +0, never -0
		}
	}
	return out, tops
}
