package voxel

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/zerohop/zerohop/internal/team"
)

// kittiCloud packs points as KITTI XYZI.
func kittiCloud(pts [][4]float32) Cloud {
	b := make([]byte, 0, len(pts)*XYZIStep)
	for _, p := range pts {
		for _, v := range p {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
		}
	}
	return XYZI(b, len(pts))
}

// strided repacks an XYZI cloud with another step and field order; the other
// bytes are filled with 0xff (a NaN pattern, which must never be read).
func strided(c Cloud, step, offX, offY, offZ, offI int) Cloud {
	b := make([]byte, c.Count*step)
	for i := range b {
		b[i] = 0xff
	}
	for p := range c.Count {
		src := c.Data[p*c.Step:]
		dst := b[p*step:]
		copy(dst[offX:offX+4], src[0:4])
		copy(dst[offY:offY+4], src[4:8])
		copy(dst[offZ:offZ+4], src[8:12])
		if offI >= 0 {
			copy(dst[offI:offI+4], src[12:16])
		}
	}
	return Cloud{Data: b, Count: c.Count, Step: step, OffX: offX, OffY: offY, OffZ: offZ, OffI: offI}
}

func uniformCloud(n int, lo, hi float32, seed uint64) [][4]float32 {
	rng := rand.New(rand.NewPCG(seed, 1))
	pts := make([][4]float32, n)
	for i := range pts {
		for a := range 3 {
			pts[i][a] = lo + (hi-lo)*rng.Float32()
		}
		pts[i][3] = rng.Float32()
	}
	return pts
}

// faceCloud puts points exactly on voxel faces, and one float32 step to
// either side, along every axis, for leaf l.
func faceCloud(l float32) [][4]float32 {
	var pts [][4]float32
	for k := -12; k <= 12; k++ {
		for _, v := range []float32{float32(k) * l, float32(float64(k) * float64(l)), float32(k) * l * (1 + 1e-7)} {
			for _, w := range []float32{v, math.Nextafter32(v, -1e9), math.Nextafter32(v, 1e9)} {
				pts = append(pts, [4]float32{w, 0.5 * l, -w, 0.25}, [4]float32{0.5 * l, w, w, 0.5}, [4]float32{-w, w, 0.5 * l, 1})
			}
		}
	}
	return pts
}

func withNonFinite(pts [][4]float32, seed uint64) [][4]float32 {
	rng := rand.New(rand.NewPCG(seed, 2))
	bad := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))}
	out := make([][4]float32, len(pts))
	copy(out, pts)
	for i := range out {
		if rng.IntN(8) == 0 {
			out[i][rng.IntN(4)] = bad[rng.IntN(len(bad))]
		}
	}
	return out
}

func offset(pts [][4]float32, dx, dy, dz float32) [][4]float32 {
	out := make([][4]float32, len(pts))
	for i, p := range pts {
		out[i] = [4]float32{p[0] + dx, p[1] + dy, p[2] + dz, p[3]}
	}
	return out
}

func cube(l float32) [3]float32 { return [3]float32{l, l, l} }

// variant is one way of running the filter; all must give the same result.
type variant struct {
	name        string
	workers     int
	chunks      int // 0: as NewFilter sets
	parallelMin int // -1: as NewFilter sets
	unpacked    bool
	exact       bool
}

var variants = []variant{
	{"one worker", 1, 0, -1, false, false},
	{"two workers", 2, 0, 0, false, false},
	{"two workers, 13 chunks, unpacked", 2, 13, 0, true, false},
	{"one worker, 3 chunks", 1, 3, 0, false, false},
	{"exact path, two workers", 2, 0, 0, false, true},
	{"exact path, 5 chunks, unpacked", 1, 5, 0, true, true},
}

// newVariantFilter builds a filter as the variant says.
func newVariantFilter(t testing.TB, cfg Config, maxPoints int, v variant) *Filter {
	t.Helper()
	cfg.Workers = v.workers
	f, err := NewFilter(cfg, maxPoints)
	if err != nil {
		t.Fatalf("NewFilter: %v", err)
	}
	t.Cleanup(func() { f.Close() })
	chunks := v.chunks
	if chunks == 0 && v.workers > 1 {
		chunks = v.workers * chunksPerWorker
	}
	if chunks > 0 && len(f.chunks) != chunks {
		f.chunks = make([]chunkState, chunks)
		f.hist = make([][radixSize]uint32, chunks)
		f.job.outOff = make([]int, chunks)
	}
	if chunks > 0 && f.team == nil {
		f.team = team.New(max(v.workers, 1)-1, f.runChunk) // Close stops it
	}
	if v.parallelMin >= 0 {
		f.parallelMin = v.parallelMin
	}
	f.forceUnpacked = v.unpacked
	f.forceExact = v.exact
	return f
}

func requireSamePoints(t *testing.T, got, want []Point) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d points, want %d", len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if math.Float32bits(g.X) != math.Float32bits(w.X) || math.Float32bits(g.Y) != math.Float32bits(w.Y) ||
			math.Float32bits(g.Z) != math.Float32bits(w.Z) || math.Float32bits(g.I) != math.Float32bits(w.I) {
			t.Fatalf("point %d of %d: got %+v, want %+v", i, len(got), g, w)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// requireSameTops checks out's tops bit for bit and their mount.
func requireSameTops(t *testing.T, out *Points, want []float32, mount Mount) {
	t.Helper()
	if out.Mount != mount {
		t.Fatalf("tops measured with mount %+v, want %+v", out.Mount, mount)
	}
	if len(out.Top) != len(want) {
		t.Fatalf("got %d tops, want %d", len(out.Top), len(want))
	}
	for i := range want {
		if math.Float32bits(out.Top[i]) != math.Float32bits(want[i]) {
			t.Fatalf("top %d of %d: got %v, want %v", i, len(want), out.Top[i], want[i])
		}
	}
}

// filterCases are clouds and configurations where the filter must equal the
// brute-force reference bit for bit, or fail with wantErr.
func filterCases() []struct {
	name    string
	cloud   Cloud
	cfg     Config
	wantErr error
} {
	uniform := uniformCloud(5000, -10, 10, 1)
	scan := ringScan(scan115k)
	scanCloud, _ := KITTI(scan)
	return []struct {
		name    string
		cloud   Cloud
		cfg     Config
		wantErr error
	}{
		{name: "uniform cloud with negative coordinates", cloud: kittiCloud(uniform), cfg: Config{Leaf: cube(0.5)}},
		{name: "uniform cloud, anisotropic leaf", cloud: kittiCloud(uniform), cfg: Config{Leaf: [3]float32{0.3, 1.7, 0.05}}},
		{name: "ring scan at 0.2 m", cloud: scanCloud, cfg: Config{Leaf: cube(0.2)}},
		{name: "ring scan, min 3 points, crop box", cloud: scanCloud,
			cfg: Config{Leaf: [3]float32{0.25, 0.25, 0.1}, MinPoints: 3, Crop: &Box{Min: [3]float32{-30, -15, -2}, Max: [3]float32{40, 15, 1}}}},
		{name: "ring scan, height band crop with open sides", cloud: scanCloud,
			cfg: Config{Leaf: cube(0.4), Crop: &Box{Min: [3]float32{float32(math.Inf(-1)), float32(math.Inf(-1)), -1.5}, Max: [3]float32{float32(math.Inf(1)), float32(math.Inf(1)), 0.5}}}},
		{name: "points on voxel faces", cloud: kittiCloud(faceCloud(0.2)), cfg: Config{Leaf: cube(0.2)}},
		{name: "points on voxel faces, leaf 0.1", cloud: kittiCloud(faceCloud(0.1)), cfg: Config{Leaf: cube(0.1)}},
		{name: "NaN and Inf in every field", cloud: kittiCloud(withNonFinite(uniform, 3)), cfg: Config{Leaf: cube(1)}},
		{name: "only non-finite points", cloud: kittiCloud([][4]float32{{float32(math.NaN()), 0, 0, 0}, {0, float32(math.Inf(1)), 0, 0}}), cfg: Config{Leaf: cube(1)}},
		{name: "empty cloud", cloud: kittiCloud(nil), cfg: Config{Leaf: cube(0.2)}},
		{name: "single point", cloud: kittiCloud([][4]float32{{-1.05, 2.5, -0.01, 0.7}}), cfg: Config{Leaf: cube(0.2)}},
		{name: "everything in one voxel", cloud: kittiCloud(uniformCloud(20000, 0.01, 0.19, 4)), cfg: Config{Leaf: cube(0.2)}},
		{name: "min points drops sparse voxels", cloud: kittiCloud(uniform), cfg: Config{Leaf: cube(1), MinPoints: 4}},
		{name: "min points above every voxel", cloud: kittiCloud(uniform), cfg: Config{Leaf: cube(0.5), MinPoints: 1000}},
		{name: "crop box removes everything", cloud: kittiCloud(uniform), cfg: Config{Leaf: cube(1), Crop: &Box{Min: [3]float32{50, 50, 50}, Max: [3]float32{60, 60, 60}}}},
		{name: "UTM-sized coordinates", cloud: kittiCloud(offset(uniform, 452000, 5411000, 310)), cfg: Config{Leaf: cube(0.5)}},
		{name: "huge spread along one axis", cloud: kittiCloud([][4]float32{{-1e17, 0, 0, 1}, {1e17, 0, 0, 1}, {3, 4, 5, 0}, {3.1, 4.1, 5.1, 0.5}}), cfg: Config{Leaf: cube(1)}},
		{name: "tiny leaf that still fits 64-bit keys", cloud: kittiCloud(uniform), cfg: Config{Leaf: cube(1e-4)}},
		{name: "tiny leaf beyond 64-bit keys", cloud: kittiCloud(uniform), cfg: Config{Leaf: cube(1e-6)}, wantErr: ErrGridTooLarge},
		{name: "leaf so small the index overflows", cloud: kittiCloud(uniform), cfg: Config{Leaf: cube(1e-37)}, wantErr: ErrGridTooLarge},
		{name: "one far outlier beyond 64-bit keys", cloud: kittiCloud(append([][4]float32{{3e38, -3e38, 3e38, 0}}, uniform...)), cfg: Config{Leaf: cube(0.2)}, wantErr: ErrGridTooLarge},
		{name: "strided layout without intensity", cloud: strided(kittiCloud(uniform), 24, 8, 0, 16, -1), cfg: Config{Leaf: cube(0.5)}},
		{name: "PointCloud2-style padded layout", cloud: strided(scanCloud, 32, 0, 4, 8, 16), cfg: Config{Leaf: cube(0.2)}},
		{name: "ring scan, tops under a tilted mount", cloud: scanCloud, cfg: Config{Leaf: cube(0.2), Mount: tiltedMount}},
		{name: "ring scan, ceiling under a tilted mount, crop box", cloud: scanCloud,
			cfg: Config{Leaf: cube(0.2), Mount: tiltedMount, Ceiling: ptr(float32(0.3)), Crop: &Box{Min: [3]float32{-30, -15, -3}, Max: [3]float32{40, 15, 2}}}},
		{name: "uniform cloud, ceiling in the clouds' frame, min points", cloud: kittiCloud(withNonFinite(uniform, 5)),
			cfg: Config{Leaf: cube(0.5), MinPoints: 2, Ceiling: ptr(float32(-2.5))}},
		{name: "uniform cloud, ceiling above everything", cloud: kittiCloud(uniform), cfg: Config{Leaf: cube(0.5), Ceiling: ptr(float32(11))}},
		{name: "uniform cloud, ceiling below everything", cloud: kittiCloud(uniform), cfg: Config{Leaf: cube(0.5), Ceiling: ptr(float32(-11))}},
		{name: "uniform cloud, tops under an upside-down mount, min points", cloud: kittiCloud(uniform),
			cfg: Config{Leaf: cube(1), MinPoints: 3, Mount: Mount{Z: 2, Roll: math.Pi, Yaw: 0.3}}},
	}
}

func TestFilterMatchesReference(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(max(2, runtime.GOMAXPROCS(0))))
	for _, tc := range filterCases() {
		t.Run(tc.name, func(t *testing.T) {
			var want []Point
			var wantTops []float32
			if tc.wantErr == nil {
				want, wantTops = referenceFilterTops(tc.cloud, tc.cfg)
			}
			for _, v := range variants {
				t.Run(v.name, func(t *testing.T) {
					f := newVariantFilter(t, tc.cfg, max(tc.cloud.Count, 1), v)
					out := NewPoints(max(tc.cloud.Count, 1))
					for range 2 { // the second run reuses the buffers
						err := f.Run(tc.cloud, out)
						if tc.wantErr != nil {
							if !errors.Is(err, tc.wantErr) {
								t.Fatalf("Run: got error %v, want %v", err, tc.wantErr)
							}
							if len(out.P) != 0 || len(out.Top) != 0 {
								t.Fatalf("Run failed but left %d points and %d tops in out", len(out.P), len(out.Top))
							}
							continue
						}
						if err != nil {
							t.Fatalf("Run: %v", err)
						}
						requireSamePoints(t, out.P, want)
						requireSameTops(t, out, wantTops, tc.cfg.Mount)
					}
				})
			}
		})
	}
}

// TestFilterKnownVoxels checks hand-computed results.
func TestFilterKnownVoxels(t *testing.T) {
	nan := float32(math.NaN())
	tests := []struct {
		name string
		pts  [][4]float32
		cfg  Config
		want []Point
	}{
		{
			name: "negative coordinates floor, not truncate",
			pts:  [][4]float32{{-0.1, 0.05, 0.05, 1}, {0.1, 0.05, 0.05, 3}},
			cfg:  Config{Leaf: cube(0.2)},
			want: []Point{{-0.1, 0.05, 0.05, 1}, {0.1, 0.05, 0.05, 3}}, // voxels x=-1 and x=0
		},
		{
			name: "a point on a face joins the voxel above it",
			// 0.2 * float32(1/0.2) rounds to exactly 1: voxel 1, with 0.3.
			pts:  [][4]float32{{0.2, 0, 0, 0}, {0.3, 0, 0, 1}, {0.1, 0, 0, 0}},
			cfg:  Config{Leaf: cube(0.2)},
			want: []Point{{0.1, 0, 0, 0}, {0.25, 0, 0, 0.5}},
		},
		{
			name: "centroid and mean intensity",
			pts:  [][4]float32{{1, 1, 1, 0}, {1.5, 1.25, 1.75, 1}, {1.25, 1.5, 1, 0.5}},
			cfg:  Config{Leaf: cube(1)},
			want: []Point{{1.25, 1.25, 1.25, 0.5}},
		},
		{
			name: "order is z, then y, then x",
			pts:  [][4]float32{{0.5, 0.5, 1.5, 1}, {1.5, 0.5, 0.5, 2}, {0.5, 1.5, 0.5, 3}, {0.5, 0.5, 0.5, 4}},
			cfg:  Config{Leaf: cube(1)},
			want: []Point{{0.5, 0.5, 0.5, 4}, {1.5, 0.5, 0.5, 2}, {0.5, 1.5, 0.5, 3}, {0.5, 0.5, 1.5, 1}},
		},
		{
			name: "min points drops the voxel with two",
			pts:  [][4]float32{{0.1, 0, 0, 0}, {0.2, 0, 0, 0}, {0.3, 0, 0, 0}, {5, 0, 0, 0}, {5.1, 0, 0, 0}},
			cfg:  Config{Leaf: cube(1), MinPoints: 3},
			want: []Point{{0.2, 0, 0, 0}},
		},
		{
			name: "NaN in any field skips the point",
			pts:  [][4]float32{{nan, 0, 0, 0}, {0, nan, 0, 0}, {0, 0, nan, 0}, {0, 0, 0, nan}, {0.5, 0.5, 0.5, 1}},
			cfg:  Config{Leaf: cube(1)},
			want: []Point{{0.5, 0.5, 0.5, 1}},
		},
		{
			name: "crop box is inclusive on its faces",
			pts:  [][4]float32{{-1, -1, -1, 1}, {1, 1, 1, 1}, {1.0001, 0, 0, 9}, {0, -1.0001, 0, 9}},
			cfg:  Config{Leaf: cube(4), Crop: &Box{Min: [3]float32{-1, -1, -1}, Max: [3]float32{1, 1, 1}}},
			want: []Point{{-1, -1, -1, 1}, {1, 1, 1, 1}},
		},
		{
			name: "anisotropic leaf",
			pts:  [][4]float32{{0.5, 0, 0, 0}, {1.5, 0, 0, 0}, {0, 0, 0.5, 0}},
			cfg:  Config{Leaf: [3]float32{2, 1, 0.25}},
			want: []Point{{1, 0, 0, 0}, {0, 0, 0.5, 0}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, v := range variants {
				t.Run(v.name, func(t *testing.T) {
					f := newVariantFilter(t, tc.cfg, len(tc.pts), v)
					out := NewPoints(len(tc.pts))
					if err := f.Run(kittiCloud(tc.pts), out); err != nil {
						t.Fatal(err)
					}
					if len(out.P) != len(tc.want) {
						t.Fatalf("got %v, want %v", out.P, tc.want)
					}
					for i := range tc.want {
						g, w := out.P[i], tc.want[i]
						for a, d := range []float32{g.X - w.X, g.Y - w.Y, g.Z - w.Z, g.I - w.I} {
							if math.Abs(float64(d)) > 1e-6 {
								t.Fatalf("point %d field %d: got %v, want %v", i, a, out.P, tc.want)
							}
						}
					}
				})
			}
		})
	}
}

// TestFilterProperties checks, on random clouds and leaf sizes, properties
// that hold whatever the arithmetic: every centroid lies in the voxel its
// points came from, voxels come out once each in (z, y, x) order, and their
// number equals the number of voxels with at least MinPoints points.
func TestFilterProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for trial := range 60 {
		n := 1 + rng.IntN(40000)
		spread := float32(math.Pow(10, rng.Float64()*4-1)) // 0.1 to 1000 m
		pts := uniformCloud(n, -spread, spread, uint64(trial))
		if trial%3 == 0 { // a dense cluster, to fill voxels
			for i := range pts[:n/2] {
				for a := range 3 {
					pts[i][a] *= 0.01
				}
			}
		}
		leaf := [3]float32{}
		for a := range leaf {
			leaf[a] = spread * float32(math.Pow(10, rng.Float64()*3-3.5))
		}
		cfg := Config{Leaf: leaf, MinPoints: 1 + rng.IntN(3), Workers: 1 + rng.IntN(2)}
		t.Run(fmt.Sprintf("trial %d: %d points, leaf %v, min %d", trial, n, leaf, cfg.MinPoints), func(t *testing.T) {
			f, err := NewFilter(cfg, n)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			f.parallelMin = 0
			out := NewPoints(n)
			if err := f.Run(kittiCloud(pts), out); err != nil {
				if errors.Is(err, ErrGridTooLarge) {
					return // allowed for tiny leaves; never a pass-through
				}
				t.Fatal(err)
			}
			inv := [3]float32{1 / leaf[0], 1 / leaf[1], 1 / leaf[2]}
			counts := map[[3]float64]int{}
			for _, p := range pts {
				counts[[3]float64{voxelIndex(p[0], inv[0]), voxelIndex(p[1], inv[1]), voxelIndex(p[2], inv[2])}]++
			}
			occupied := 0
			for _, c := range counts {
				if c >= cfg.MinPoints {
					occupied++
				}
			}
			if len(out.P) != occupied {
				t.Fatalf("%d output points, %d voxels with at least %d points", len(out.P), occupied, cfg.MinPoints)
			}
			var prev [3]float64
			for i, p := range out.P {
				v := [3]float64{voxelIndex(p.X, inv[0]), voxelIndex(p.Y, inv[1]), voxelIndex(p.Z, inv[2])}
				if counts[v] < cfg.MinPoints {
					t.Fatalf("point %d %+v lies in voxel %v, which has %d points", i, p, v, counts[v])
				}
				if i > 0 && !(v[2] > prev[2] || v[2] == prev[2] && (v[1] > prev[1] || v[1] == prev[1] && v[0] > prev[0])) {
					t.Fatalf("point %d in voxel %v does not follow voxel %v", i, v, prev)
				}
				prev = v
			}
		})
	}
}

func TestRunErrors(t *testing.T) {
	good := kittiCloud(uniformCloud(100, -1, 1, 1))
	tests := []struct {
		name      string
		cloud     Cloud
		maxPoints int
		capacity  int
		wantErr   string
	}{
		{"cloud larger than max points", good, 50, 100, "exceeds the filter's max points 50"},
		{"output too small for the voxels", good, 100, 3, "output holds 3 points"},
		{"count beyond the data", Cloud{Data: good.Data, Count: 101, Step: 16, OffY: 4, OffZ: 8, OffI: 12}, 200, 200, "need 1616 bytes, data holds 1600"},
		{"field beyond the step", Cloud{Data: good.Data, Count: 10, Step: 16, OffY: 4, OffZ: 8, OffI: 13}, 100, 100, "intensity field at byte offset 13"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := NewFilter(Config{Leaf: cube(0.1)}, tc.maxPoints)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			out := NewPoints(tc.capacity)
			out.P = append(out.P, Point{1, 2, 3, 4}) // stale content must go
			err = f.Run(tc.cloud, out)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("got error %v, want one containing %q", err, tc.wantErr)
			}
			if len(out.P) != 0 {
				t.Fatalf("failed Run left %d points", len(out.P))
			}
		})
	}
}

func TestRunAfterClose(t *testing.T) {
	f, err := NewFilter(Config{Leaf: cube(1), Workers: 2}, 10)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := f.Run(kittiCloud(nil), NewPoints(10)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Run after Close: %v, want ErrClosed", err)
	}
}

// teamHelpers counts the goroutines running a team's helper loop: the
// filters' helpers, whatever else the test binary runs (a count of all
// goroutines failed when another test's goroutine ended meanwhile).
func teamHelpers() int {
	buf := make([]byte, 8<<20)
	n := runtime.Stack(buf, true)
	return strings.Count(string(buf[:n]), "internal/team.(*Team).helperLoop(")
}

// waitTeamHelpers waits up to 2 s for want helper goroutines: Close waits
// for the helpers' WaitGroup, the goroutines themselves end a moment after.
func waitTeamHelpers(want int) int {
	deadline := time.Now().Add(2 * time.Second)
	got := teamHelpers()
	for got != want && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
		got = teamHelpers()
	}
	return got
}

// TestCloseStopsHelpers checks that every helper goroutine ends with Close.
func TestCloseStopsHelpers(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	if got := waitTeamHelpers(0); got != 0 {
		t.Fatalf("%d helper goroutines left by earlier tests", got)
	}
	cloud := kittiCloud(uniformCloud(parallelMin*2, -20, 20, 3))
	var filters []*Filter
	for range 3 {
		f, err := NewFilter(Config{Leaf: cube(0.5), Workers: 4}, cloud.Count)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Run(cloud, NewPoints(cloud.Count)); err != nil {
			t.Fatal(err)
		}
		filters = append(filters, f)
	}
	if got := teamHelpers(); got != 9 {
		t.Fatalf("%d helper goroutines with 3 filters of 4 workers, want 9", got)
	}
	for _, f := range filters {
		f.Close()
	}
	if got := waitTeamHelpers(0); got != 0 {
		t.Fatalf("%d helper goroutines after Close, want 0", got)
	}
}

// TestCloudChangedDuringRun changes the cloud between the exact path's two
// passes, as a writer ignoring the lease would. Run must fail, not write
// outside its buffers or return a mix.
func TestCloudChangedDuringRun(t *testing.T) {
	pts := uniformCloud(1000, -5, 5, 9)
	for _, change := range []struct {
		name string
		edit func(c Cloud)
	}{
		{"a point moves out of the grid", func(c Cloud) { binary.LittleEndian.PutUint32(c.Data[16*500:], math.Float32bits(1e4)) }},
		{"a point becomes NaN", func(c Cloud) { binary.LittleEndian.PutUint32(c.Data[16*7+4:], math.Float32bits(float32(math.NaN()))) }},
	} {
		t.Run(change.name, func(t *testing.T) {
			cloud := kittiCloud(pts)
			f := newVariantFilter(t, Config{Leaf: cube(0.5)}, cloud.Count, variant{"", 2, 4, 0, false, true})
			f.testHookAfterBounds = func() { change.edit(cloud) }
			err := f.Run(cloud, NewPoints(cloud.Count))
			if err == nil || !strings.Contains(err.Error(), "changed while it was being filtered") {
				t.Fatalf("got %v, want a changed-data error", err)
			}
		})
	}
}

// TestRunDoesNotAllocate proves that Run and Fill allocate nothing per
// frame after warm-up, with helpers and on every path.
func TestRunDoesNotAllocate(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(max(2, runtime.GOMAXPROCS(0))))
	scan, err := KITTI(ringScan(scan115k))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		cfg  Config
		v    variant
	}{
		{"one worker", Config{Leaf: cube(0.2)}, variants[0]},
		{"two workers", Config{Leaf: cube(0.2)}, variant{"", 2, 0, -1, false, false}},
		{"two workers with crop and min points", Config{Leaf: cube(0.2), MinPoints: 2, Crop: &Box{Min: [3]float32{-20, -20, -3}, Max: [3]float32{20, 20, 2}}}, variant{"", 2, 0, -1, false, false}},
		{"unpacked", Config{Leaf: cube(0.2)}, variant{"", 2, 0, -1, true, false}},
		{"exact path", Config{Leaf: cube(0.2)}, variant{"", 2, 0, -1, false, true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newVariantFilter(t, tc.cfg, scan.Count, tc.v)
			if tc.v.workers > 1 && f.team == nil {
				t.Fatal("no helpers started")
			}
			out := NewPoints(scan.Count)
			bev, err := NewBEV(BEVConfig{})
			if err != nil {
				t.Fatal(err)
			}
			tensor := make([]float32, bev.Len())
			allocs := testing.AllocsPerRun(20, func() {
				if err := f.Run(scan, out); err != nil {
					t.Fatal(err)
				}
				if err := bev.Fill(out, tensor); err != nil {
					t.Fatal(err)
				}
			})
			if allocs != 0 {
				t.Fatalf("%v allocations per frame, want 0", allocs)
			}
		})
	}
}

func TestFloorInt(t *testing.T) {
	vals := []float32{0, float32(math.Copysign(0, -1)), 0.5, -0.5, 1, -1, 1.5, -1.5, 2.9999998, -2.9999998,
		1e-30, -1e-30, 1 << 23, -(1 << 23), 1<<23 + 1, -(1<<23 + 1), 8388607.5, -8388607.5, 1 << 40, -(1 << 40), 4.6e18, -4.6e18}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 100000 {
		v := float32(rng.NormFloat64() * math.Pow(10, rng.Float64()*10-3))
		vals = append(vals, v, math.Nextafter32(v, 0), math.Nextafter32(v, float32(math.Inf(1))))
	}
	for _, v := range vals {
		if got, want := floorInt(v), int64(math.Floor(float64(v))); got != want {
			t.Fatalf("floorInt(%v) = %d, want %d", v, got, want)
		}
	}
}

// TestFilterSequence feeds one filter a sequence of different clouds, so
// that each is keyed on the grid guessed from the one before (a hit, or a
// miss and the exact path), and checks each result.
func TestFilterSequence(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(max(2, runtime.GOMAXPROCS(0))))
	scan, err := KITTI(ringScan(scan115k))
	if err != nil {
		t.Fatal(err)
	}
	uniform := uniformCloud(20000, -10, 10, 5)
	for i := range uniform {
		uniform[i][2] = uniform[i][2]/10 - 0.5 // within the scan's heights
	}
	clouds := []struct {
		name  string
		cloud Cloud
		miss  bool // the guess from the previous cloud cannot cover it
	}{
		{"first cloud", scan, true},
		{"same cloud", scan, false},
		{"smaller cloud inside", kittiCloud(uniform), false},
		{"cloud that grew past the margin", kittiCloud(append(uniformCloud(100, -10, 10, 6), [4]float32{40, 0, 0, 1})), true},
		{"cloud moved far away", kittiCloud(offset(uniform, 500, -300, 20)), true},
		{"empty cloud keeps the guess", kittiCloud(nil), false},
		{"all points rejected", kittiCloud(withNonFinite([][4]float32{{float32(math.NaN()), 0, 0, 0}}, 1)), false},
		{"back to the scan", scan, true},
		{"scan again", scan, false},
		{"tiny cloud", kittiCloud([][4]float32{{1, 1, 1, 1}}), false},
	}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			cfg := Config{Leaf: cube(0.3), MinPoints: 2}
			f := newVariantFilter(t, cfg, scan.Count, v)
			out := NewPoints(scan.Count)
			for _, c := range clouds {
				before := f.exactRuns
				if err := f.Run(c.cloud, out); err != nil {
					t.Fatalf("%s: %v", c.name, err)
				}
				requireSamePoints(t, out.P, referenceFilter(c.cloud, cfg))
				if took := f.exactRuns > before; took != (c.miss || v.exact) && c.cloud.Count > 0 && len(out.P) > 0 {
					t.Errorf("%s: exact path %v, want %v", c.name, took, c.miss || v.exact)
				}
			}
		})
	}
}

func TestCropGridNeverMisses(t *testing.T) {
	scan, err := KITTI(ringScan(scan115k))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		crop  *Box
		fixed bool
	}{
		{"BEV footprint", &Box{Min: [3]float32{0, -12.8, -2}, Max: [3]float32{25.6, 12.8, 1.5}}, true},
		{"open sides", &Box{Min: [3]float32{float32(math.Inf(-1)), -5, -2}, Max: [3]float32{float32(math.Inf(1)), 5, 1}}, false},
		{"loose box", &Box{Min: [3]float32{-1e4, -1e4, -1e4}, Max: [3]float32{1e4, 1e4, 1e4}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Leaf: cube(0.2), Crop: tc.crop}
			f, err := NewFilter(cfg, scan.Count)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if f.fixedGrid != tc.fixed {
				t.Fatalf("fixed grid %v, want %v", f.fixedGrid, tc.fixed)
			}
			out := NewPoints(scan.Count)
			for range 2 {
				if err := f.Run(scan, out); err != nil {
					t.Fatal(err)
				}
				requireSamePoints(t, out.P, referenceFilter(scan, cfg))
			}
			if want := map[bool]int{true: 0, false: 1}[tc.fixed]; f.exactRuns != want {
				t.Fatalf("%d exact runs, want %d", f.exactRuns, want)
			}
		})
	}
}

// TestVoxelIndexAtTheLimitIsRefused: a point whose voxel index is exactly
// ±2^62 passed the grid check and then missed every key, so Run reported
// the cloud as changed while it was filtered (pointing at the transport)
// instead of ErrGridTooLarge.
func TestVoxelIndexAtTheLimitIsRefused(t *testing.T) {
	for _, x := range []float32{1 << 62, -(1 << 62)} {
		for _, v := range variants {
			cloud := kittiCloud([][4]float32{{x, 0, 0, 1}})
			f := newVariantFilter(t, Config{Leaf: cube(1)}, 1, v)
			if err := f.Run(cloud, NewPoints(1)); !errors.Is(err, ErrGridTooLarge) {
				t.Errorf("x=%g %s: Run: %v, want ErrGridTooLarge", x, v.name, err)
			}
		}
	}
}

// TestTopOfAZeroIsPlusZero: a top that rounds to zero is +0 however it
// got there, so that the CPU's and GPU's maxima, which may keep another
// of equal zeros, give the same bits.
func TestTopOfAZeroIsPlusZero(t *testing.T) {
	for _, tc := range []struct {
		h    float64
		want uint32
	}{
		{math.Copysign(0, -1), 0},
		{-1e-50, 0}, // below float32's smallest: rounds to -0
		{1e-50, 0},
		{-1.5, math.Float32bits(-1.5)},
		{0.25, math.Float32bits(0.25)},
	} {
		if got := math.Float32bits(topOf(tc.h)); got != tc.want {
			t.Errorf("topOf(%g) = %#x, want %#x", tc.h, got, tc.want)
		}
	}
}
