package voxel

import (
	"math/bits"
	"testing"
)

// hashFilter is the alternative the filter's design was measured against:
// one pass over the cloud accumulating each point into an open-addressing
// table of voxels (with a cache of the last voxel, since consecutive LiDAR
// returns often share one), then a radix sort of the occupied voxels only.
// It is single-threaded; a parallel version would have to merge per-worker
// tables, which changes the order of the float64 sums. It handles only
// clouds whose indices fit the provisional fields, which the benchmarks'
// clouds do.
type hashFilter struct {
	inv    [3]float32
	slots  []hashSlot
	gen    uint32
	shift  uint
	acc    []hashAcc
	keys   []uint64 // per voxel ordinal: provisional key
	sorted []uint64 // compact key << 32 | ordinal, and scratch
	tmp    []uint64
	hist   [1 << 12]uint32
}

// The table keys pack three voxel indices, each biased by provBias into a
// provBits-bit field, z in the high field. The benchmark clouds fit.
const (
	provBits = 21
	provBias = 1 << (provBits - 1)
	provMask = 1<<provBits - 1
)

type hashSlot struct {
	key      uint64
	gen, ord uint32
}

type hashAcc struct {
	x, y, z, i float64
	n          int
}

func newHashFilter(leaf [3]float32, maxPoints int) *hashFilter {
	size := 1 << bits.Len(uint(2*maxPoints-1))
	return &hashFilter{
		inv:    [3]float32{1 / leaf[0], 1 / leaf[1], 1 / leaf[2]},
		slots:  make([]hashSlot, size),
		shift:  uint(64 - bits.Len(uint(size-1))),
		acc:    make([]hashAcc, maxPoints),
		keys:   make([]uint64, maxPoints),
		sorted: make([]uint64, maxPoints),
		tmp:    make([]uint64, maxPoints),
	}
}

func (h *hashFilter) run(c Cloud, out []Point) []Point {
	h.gen++
	r := newPointReader(c)
	voxels := 0
	lastKey, lastOrd := uint64(rejected), uint32(0)
	var lo, hi [3]uint64
	lo = [3]uint64{provMask, provMask, provMask}
	var blk pointBlock
	for base := 0; base < c.Count; base += blockSize {
		pts := blk[:min(blockSize, c.Count-base)]
		r.read(base, pts)
		for k := range pts {
			x, y, z, in := pts[k][0], pts[k][1], pts[k][2], pts[k][3]
			if (x-x)+(y-y)+(z-z)+(in-in) != 0 {
				continue
			}
			px, py, pz := float32(x*h.inv[0]), float32(y*h.inv[1]), float32(z*h.inv[2])
			ux, uy, uz := uint64(floorInt(px)+provBias), uint64(floorInt(py)+provBias), uint64(floorInt(pz)+provBias)
			key := uz<<(2*provBits) | uy<<provBits | ux
			ord := lastOrd
			if key != lastKey {
				s := (key * 0x9e3779b97f4a7c15) >> h.shift
				for {
					sl := &h.slots[s]
					if sl.gen != h.gen {
						*sl = hashSlot{key: key, gen: h.gen, ord: uint32(voxels)}
						h.keys[voxels] = key
						h.acc[voxels] = hashAcc{}
						lo = [3]uint64{min(lo[0], ux), min(lo[1], uy), min(lo[2], uz)}
						hi = [3]uint64{max(hi[0], ux), max(hi[1], uy), max(hi[2], uz)}
						ord = uint32(voxels)
						voxels++
						break
					}
					if sl.key == key {
						ord = sl.ord
						break
					}
					s = (s + 1) & uint64(len(h.slots)-1)
				}
				lastKey, lastOrd = key, ord
			}
			a := &h.acc[ord]
			a.x += float64(x)
			a.y += float64(y)
			a.z += float64(z)
			a.i += float64(in)
			a.n++
		}
	}
	// Sort the voxels by compact key (x fastest), two LSD passes.
	dim0, dim1 := hi[0]-lo[0]+1, hi[1]-lo[1]+1
	keyBits := bits.Len64(dim0*dim1*(hi[2]-lo[2]+1) - 1)
	for o, p := range h.keys[:voxels] {
		key := (p&provMask - lo[0]) + dim0*((p>>provBits&provMask-lo[1])+dim1*(p>>(2*provBits)-lo[2]))
		h.sorted[o] = key<<32 | uint64(o)
	}
	src, dst := h.sorted[:voxels], h.tmp[:voxels]
	for shift := 32; shift < 32+keyBits; shift += 12 {
		h.hist = [1 << 12]uint32{}
		for _, e := range src {
			h.hist[(e>>shift)&(1<<12-1)]++
		}
		var sum uint32
		for d, n := range h.hist {
			h.hist[d] = sum
			sum += n
		}
		for _, e := range src {
			d := (e >> shift) & (1<<12 - 1)
			dst[h.hist[d]] = e
			h.hist[d]++
		}
		src, dst = dst, src
	}
	for _, e := range src {
		a := h.acc[uint32(e)]
		n := float64(a.n)
		out = append(out, Point{float32(a.x / n), float32(a.y / n), float32(a.z / n), float32(a.i / n)})
	}
	return out
}

func TestHashFilterMatchesReference(t *testing.T) {
	cloud, err := KITTI(ringScan(scan115k))
	if err != nil {
		t.Fatal(err)
	}
	for _, leaf := range []float32{0.2, 0.5} {
		h := newHashFilter(cube(leaf), cloud.Count)
		var got []Point
		for range 2 {
			got = h.run(cloud, got[:0])
		}
		requireSamePoints(t, got, referenceFilter(cloud, Config{Leaf: cube(leaf)}))
	}
}

// BenchmarkHashFilter measures the open-addressing alternative on the same
// scans as BenchmarkFilter.
func BenchmarkHashFilter(b *testing.B) {
	for _, s := range benchScans {
		cloud, err := KITTI(ringScan(s.spec))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(s.name+"/leaf=0.2", func(b *testing.B) {
			h := newHashFilter(cube(0.2), cloud.Count)
			out := make([]Point, 0, cloud.Count)
			measure(b, func() { out = h.run(cloud, out[:0]) })
		})
	}
}
