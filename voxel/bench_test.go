package voxel

import (
	"cmp"
	"math"
	"slices"
	"syscall"
	"testing"
	"time"
)

// Benchmarks on deterministic ring scans (see synth_test.go): 112,554 and
// 282,674 points, the sizes of a 64-ring and a 128-ring spinning LiDAR.
// Each filter benchmark reports p50 and p99 latency besides the mean; the
// reference benchmarks run in the same invocation so ratios are side by side.
//
//	go test -run '^$' -bench . -benchmem -count 5 -cpu 1,2 ./voxel/
var benchScans = []struct {
	name string
	spec scanSpec
}{
	{"scan=115k", scan115k},
	{"scan=288k", scan288k},
}

// measure runs op b.N times after one warm-up and reports latency
// percentiles and the process's CPU time per op (all threads, so it counts
// helper goroutines and their spinning) as extra metrics.
func measure(b *testing.B, op func()) {
	op()
	lat := make([]time.Duration, b.N)
	b.ResetTimer()
	cpu0 := processCPU()
	for i := range b.N {
		t0 := time.Now()
		op()
		lat[i] = time.Since(t0)
	}
	cpu := processCPU() - cpu0
	b.StopTimer()
	slices.Sort(lat)
	// Nearest rank: the sample of rank ⌈p·n⌉, the smallest with p of them
	// at or below it.
	rank := func(pct int) time.Duration { return lat[max((len(lat)*pct+99)/100, 1)-1] }
	b.ReportMetric(float64(rank(50).Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(rank(99).Nanoseconds()), "p99-ns")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
}

// processCPU returns the user and system CPU time the process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// bevCrop is a typical agent crop: the default BEV raster's footprint
// (25.6 m ahead, 12.8 m to each side) from 2 m below to 1.5 m above the
// sensor.
var bevCrop = &Box{Min: [3]float32{0, -12.8, -2}, Max: [3]float32{25.6, 12.8, 1.5}}

func BenchmarkFilter(b *testing.B) {
	for _, s := range benchScans {
		cloud, err := KITTI(ringScan(s.spec))
		if err != nil {
			b.Fatal(err)
		}
		for _, c := range []struct {
			name string
			cfg  Config
		}{
			{"leaf=0.2", Config{Leaf: cube(0.2)}},
			{"leaf=0.2/crop=bev", Config{Leaf: cube(0.2), Crop: bevCrop}},
		} {
			b.Run(s.name+"/"+c.name, func(b *testing.B) {
				f, err := NewFilter(c.cfg, cloud.Count)
				if err != nil {
					b.Fatal(err)
				}
				defer f.Close()
				out := NewPoints(cloud.Count)
				measure(b, func() {
					if err := f.Run(cloud, out); err != nil {
						b.Fatal(err)
					}
				})
				b.ReportMetric(float64(len(out.P)), "voxels")
			})
		}
	}
}

// BenchmarkBEV fills the default 3×128×128 raster from the 115k scan
// filtered at 0.2 m.
func BenchmarkBEV(b *testing.B) {
	pts := filteredScan(b, scan115k)
	bev, err := NewBEV(BEVConfig{GroundZ: roadZ})
	if err != nil {
		b.Fatal(err)
	}
	dst := make([]float32, bev.Len())
	measure(b, func() {
		if err := bev.Fill(pts, dst); err != nil {
			b.Fatal(err)
		}
	})
}

// BenchmarkBEVMounted is BenchmarkBEV's fill with a LiDAR mount: the
// scan as a LiDAR pitched down 8°, rolled and turned reports it, each
// voxel moved into the robot frame before it is drawn.
func BenchmarkBEVMounted(b *testing.B) {
	pts := filterMounted(b, intoSensorFrame(scanPoints(b, scan115k), tiltedMount), 0.2, nil, tiltedMount)
	bev, err := NewBEV(BEVConfig{GroundZ: roadZ, Mount: tiltedMount})
	if err != nil {
		b.Fatal(err)
	}
	dst := make([]float32, bev.Len())
	measure(b, func() {
		if err := bev.Fill(pts, dst); err != nil {
			b.Fatal(err)
		}
	})
	b.ReportMetric(float64(len(pts.P)), "voxels")
}

// BenchmarkGroundZEstimate is the agent's once-a-second ground check on
// the scans filtered at 0.2 m (512 voxels sampled, as agent/ground.go),
// beside BenchmarkBEV's fill of the same raster.
func BenchmarkGroundZEstimate(b *testing.B) {
	for _, s := range benchScans {
		pts := filteredScan(b, s.spec)
		bev, err := NewBEV(BEVConfig{GroundZ: roadZ})
		if err != nil {
			b.Fatal(err)
		}
		scratch := make([]float32, 512)
		b.Run(s.name, func(b *testing.B) {
			measure(b, func() { bev.GroundZEstimate(pts, scratch) })
			b.ReportMetric(float64(len(pts.P)), "voxels")
		})
	}
}

// BenchmarkGroundPlaneEstimate is the agent's once-a-second check of the
// LiDAR's tilt on the same scans, as seen by a LiDAR pitched down 8° with
// its mount given (the common case: the plane comes out level).
func BenchmarkGroundPlaneEstimate(b *testing.B) {
	for _, s := range benchScans {
		pts := filtered(b, intoSensorFrame(scanPoints(b, s.spec), tiltedMount))
		bev, err := NewBEV(BEVConfig{GroundZ: roadZ, Mount: tiltedMount})
		if err != nil {
			b.Fatal(err)
		}
		var sc GroundScratch
		b.Run(s.name, func(b *testing.B) {
			measure(b, func() { bev.GroundPlaneEstimate(pts, &sc) })
			b.ReportMetric(float64(len(pts.P)), "voxels")
		})
	}
}

// BenchmarkReference is the brute-force reference the tests compare against
// (a map from voxel index triple to sums, then a sort), as a baseline.
func BenchmarkReference(b *testing.B) {
	for _, s := range benchScans {
		cloud, err := KITTI(ringScan(s.spec))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(s.name+"/leaf=0.2", func(b *testing.B) {
			cfg := Config{Leaf: cube(0.2)}
			measure(b, func() { referenceFilter(cloud, cfg) })
		})
	}
}

// BenchmarkMapFilter is a careful map-based filter: one reused map from a
// packed key to a slot, reused slices, slices.Sort. It shows what a
// straightforward Go implementation achieves without sorting by radix.
func BenchmarkMapFilter(b *testing.B) {
	for _, s := range benchScans {
		cloud, err := KITTI(ringScan(s.spec))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(s.name+"/leaf=0.2", func(b *testing.B) {
			m := newMapFilter(cube(0.2), cloud.Count)
			out := make([]Point, 0, cloud.Count)
			measure(b, func() { out = m.run(cloud, out[:0]) })
		})
	}
}

type mapFilter struct {
	inv  [3]float32
	slot map[uint64]int32
	sums []mapSums
	keys []uint64
}

type mapSums struct {
	x, y, z, i float64
	n          int
}

func newMapFilter(leaf [3]float32, maxPoints int) *mapFilter {
	return &mapFilter{
		inv:  [3]float32{1 / leaf[0], 1 / leaf[1], 1 / leaf[2]},
		slot: make(map[uint64]int32, maxPoints),
		sums: make([]mapSums, 0, maxPoints),
		keys: make([]uint64, 0, maxPoints),
	}
}

// run assumes every index fits 21 bits with a bias, enough for benchmarks.
func (m *mapFilter) run(c Cloud, out []Point) []Point {
	clear(m.slot)
	m.sums, m.keys = m.sums[:0], m.keys[:0]
	r := newPointReader(c)
	for p := range c.Count {
		x, y, z, in := r.at(p)
		if x-x != 0 || y-y != 0 || z-z != 0 || in-in != 0 {
			continue
		}
		key := uint64(int64(math.Floor(float64(z*m.inv[2])))+1<<20)<<42 |
			uint64(int64(math.Floor(float64(y*m.inv[1])))+1<<20)<<21 |
			uint64(int64(math.Floor(float64(x*m.inv[0])))+1<<20)
		s, ok := m.slot[key]
		if !ok {
			s = int32(len(m.sums))
			m.slot[key] = s
			m.sums = append(m.sums, mapSums{})
			m.keys = append(m.keys, key)
		}
		a := &m.sums[s]
		a.x += float64(x)
		a.y += float64(y)
		a.z += float64(z)
		a.i += float64(in)
		a.n++
	}
	slices.SortFunc(m.keys, func(a, b uint64) int { return cmp.Compare(a, b) })
	for _, k := range m.keys {
		a := m.sums[m.slot[k]]
		n := float64(a.n)
		out = append(out, Point{float32(a.x / n), float32(a.y / n), float32(a.z / n), float32(a.i / n)})
	}
	return out
}
