//go:build gpu

// GPU voxel filter and BEV against the CPU ones, bit for bit. Built only
// with -tags gpu; FAILS (never skips) without a GPU or its driver. Without
// NVRTC the filters run the embedded PTX, and the cubin cache test is
// skipped by name.

package gpu

import (
	"encoding/binary"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/zerohop/zerohop/pinned"
	"github.com/zerohop/zerohop/voxel"
)

type voxelGPUFixture struct {
	c  *Context
	nv *NVRTC
}

func openVoxelGPU(t *testing.T) voxelGPUFixture {
	t.Helper()
	f := openGPU(t) // device_gpu_test.go: fails without a GPU; nv nil without NVRTC
	return voxelGPUFixture{c: f.c, nv: f.nv}
}

// ringCloud is a rings × columns ring scan (seed) in the context's pinned,
// mapped memory, freed when t ends.
func (g voxelGPUFixture) ringCloud(t *testing.T, rings, columns int, seed uint64) voxel.Cloud {
	t.Helper()
	n := rings * columns
	data, err := g.c.Allocate(16 * n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.c.Free(data) })
	if got := ringScan(data, rings, columns, seed); got != n {
		t.Fatalf("scan has %d points, want %d", got, n)
	}
	return voxel.XYZI(data, n)
}

func TestGPUVoxelMatchesCPU(t *testing.T) {
	g := openVoxelGPU(t)
	crop := &voxel.Box{Min: [3]float32{-0.2, -12.8, -3}, Max: [3]float32{25.4, 12.8, 3}}
	tilted := voxel.Mount{X: 0.45, Y: -0.12, Roll: 0.026, Pitch: 0.14, Yaw: 0.21}
	ceiling := float32(0.3)
	for _, sc := range []struct {
		name           string
		rings, columns int
		cfg            voxel.Config
		bev            voxel.BEVConfig // zero: the default raster
	}{
		{"115k points, leaf 0.2", 64, 1800, voxel.Config{Leaf: [3]float32{0.2, 0.2, 0.2}}, voxel.BEVConfig{}},
		{"288k points, leaf 0.2", 128, 2250, voxel.Config{Leaf: [3]float32{0.2, 0.2, 0.2}}, voxel.BEVConfig{}},
		{"115k points, leaf 0.1, min points 3, crop", 64, 1800, voxel.Config{Leaf: [3]float32{0.1, 0.1, 0.1}, MinPoints: 3, Crop: crop}, voxel.BEVConfig{}},
		{"288k points, anisotropic leaf 0.05/0.3/0.7", 128, 2250, voxel.Config{Leaf: [3]float32{0.05, 0.3, 0.7}}, voxel.BEVConfig{}},
		// Cells of hundreds of voxels: zh_bev_finish's heap sort.
		{"288k points, leaf 0.05, BEV cell 1 m", 128, 2250, voxel.Config{Leaf: [3]float32{0.05, 0.05, 0.05}}, voxel.BEVConfig{Cell: 1}},
		// The voxels moved into the robot frame in float64 (--lidar-xy, --lidar-rpy),
		// their tops measured there.
		{"115k points, LiDAR tilted, offset and turned", 64, 1800, voxel.Config{Leaf: [3]float32{0.2, 0.2, 0.2}, Mount: tilted},
			voxel.BEVConfig{GroundZ: -1.73, Mount: tilted}},
		// Points above the robot-frame ceiling dropped per point (--max-obstacle-height).
		{"115k points, LiDAR tilted, ceiling 0.3 m above the sensor", 64, 1800, voxel.Config{Leaf: [3]float32{0.2, 0.2, 0.2}, Mount: tilted, Ceiling: &ceiling, Crop: crop},
			voxel.BEVConfig{GroundZ: -1.73, Mount: tilted}},
	} {
		t.Run(sc.name, func(t *testing.T) {
			n := sc.rings * sc.columns
			cloud := g.ringCloud(t, sc.rings, sc.columns, uint64(n))

			want, wantBEV := cpuReferenceBEV(t, sc.cfg, sc.bev, cloud)
			vf, bev := newFilterAndBEV(t, g.c, g.nv, sc.cfg, VoxelOptions{MaxPoints: n, CacheDir: t.TempDir(), BEV: &sc.bev})
			got := voxel.NewPoints(n)
			times := map[bool][]time.Duration{}
			for _, copyInput := range []bool{false, true, false, true} {
				vf.SetCopyInput(copyInput)
				mode := map[bool]string{false: "mapped", true: "copied"}[copyInput]
				clear(bev)
				if err := vf.Run(cloud, got, bev); err != nil {
					t.Fatalf("%s input: %v", mode, err)
				}
				samePoints(t, mode+" input", got.P, want.P)
				sameTops(t, mode+" input", got, want)
				sameBEV(t, mode+" input", bev, wantBEV)
				for range 20 {
					if err := vf.Run(cloud, got, bev); err != nil {
						t.Fatal(err)
					}
					times[copyInput] = append(times[copyInput], vf.Timing().Total)
				}
				samePoints(t, mode+" input, run 21", got.P, want.P)
				sameTops(t, mode+" input, run 21", got, want)
			}
			t.Logf("%d points → %d voxels; device time median of 40 runs: mapped %v, copied %v (copy alone %v)",
				n, len(want.P), median(times[false]), median(times[true]), vf.Timing().Copy)
		})
	}
}

// TestGPUEmbeddedPTXMatchesCPU runs the filter as a machine without NVRTC
// does: the embedded PTX (kernels/voxel.ptx), JIT-compiled by the driver,
// on 115k and 288k points, mapped and copied input, against the CPU. With
// NVRTC present it also times the NVRTC cubin beside it.
func TestGPUEmbeddedPTXMatchesCPU(t *testing.T) {
	g := openVoxelGPU(t)
	cfg := voxel.Config{Leaf: [3]float32{0.2, 0.2, 0.2}}
	for _, sc := range []struct {
		name           string
		rings, columns int
	}{{"115k points", 64, 1800}, {"288k points", 128, 2250}} {
		t.Run(sc.name, func(t *testing.T) {
			n := sc.rings * sc.columns
			cloud := g.ringCloud(t, sc.rings, sc.columns, uint64(n)+1)
			want, wantBEV := cpuReferenceBEV(t, cfg, voxel.BEVConfig{}, cloud)
			start := time.Now()
			vf, bev := newFilterAndBEV(t, g.c, nil, cfg, VoxelOptions{MaxPoints: n, BEV: &voxel.BEVConfig{}})
			load := time.Since(start)
			if vf.Target() != EmbeddedTarget {
				t.Fatalf("kernels for %q, want the embedded %s", vf.Target(), EmbeddedTarget)
			}
			filters := map[string]*VoxelFilter{"embedded PTX": vf}
			if g.nv != nil {
				cubin, _ := newFilterAndBEV(t, g.c, g.nv, cfg, VoxelOptions{MaxPoints: n, CacheDir: t.TempDir(), BEV: &voxel.BEVConfig{}})
				filters["NVRTC "+cubin.Target()] = cubin
			}
			got := voxel.NewPoints(n)
			matchesCPUBothInputs(t, "embedded PTX", vf, cloud, got, bev, want, wantBEV)
			for name, f := range filters {
				f.SetCopyInput(false)
				var times []time.Duration
				for range 20 {
					if err := f.Run(cloud, got, bev); err != nil {
						t.Fatal(err)
					}
					times = append(times, f.Timing().Total)
				}
				t.Logf("%s, mapped input: device time median of 20 runs %v", name, median(times))
			}
			t.Logf("%d points → %d voxels; embedded PTX loaded (driver JIT) in %v", n, len(want.P), load)
		})
	}
}

// TestGPUVoxelRegisteredReadOnlyInput reads a cuMemHostRegister'ed mmap
// region (READ_ONLY where supported), as the agent reads a shared pool.
func TestGPUVoxelRegisteredReadOnlyInput(t *testing.T) {
	g := openVoxelGPU(t)
	const rings, columns = 64, 1800
	n := rings * columns
	size := (16*n + pinned.PageSize - 1) &^ (pinned.PageSize - 1)
	data := cMemory(t, size)
	ringScan(data, rings, columns, 7)
	region := pinForReading(t, g.c, data)
	defer region.Unpin()
	t.Logf("read-only registration: %t %s", region.ReadOnly(), region.Note())
	cfg := voxel.Config{Leaf: [3]float32{0.2, 0.2, 0.2}}
	cpu, err := voxel.NewFilter(cfg, n)
	if err != nil {
		t.Fatal(err)
	}
	defer cpu.Close()
	want := voxel.NewPoints(n)
	cloud := voxel.XYZI(data, n)
	if err := cpu.Run(cloud, want); err != nil {
		t.Fatal(err)
	}
	vf, err := NewVoxelFilter(g.c, g.nv, cfg, VoxelOptions{MaxPoints: n, CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer vf.Close()
	got := voxel.NewPoints(n)
	for _, copyInput := range []bool{false, true} {
		vf.SetCopyInput(copyInput)
		if err := vf.Run(cloud, got, nil); err != nil {
			t.Fatal(err)
		}
		samePoints(t, "registered input", got.P, want.P)
	}
}

func TestGPUVoxelCacheAndAllocations(t *testing.T) {
	g := openVoxelGPU(t)
	dir := t.TempDir()
	cfg := voxel.Config{Leaf: [3]float32{0.2, 0.2, 0.2}}
	const n = 64 * 1800
	t.Run("cubin cache", func(t *testing.T) {
		if g.nv == nil {
			t.Skip("no NVRTC on this machine: the cubin cache holds what NVRTC compiles")
		}
		start := time.Now()
		vf, err := NewVoxelFilter(g.c, g.nv, cfg, VoxelOptions{MaxPoints: n, CacheDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		compile := time.Since(start)
		if vf.Timing().CacheHit {
			t.Error("first filter in an empty cache reports a cache hit")
		}
		vf.Close()
		start = time.Now()
		vf, err = NewVoxelFilter(g.c, g.nv, cfg, VoxelOptions{MaxPoints: n, CacheDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		defer vf.Close()
		if !vf.Timing().CacheHit {
			t.Error("second filter did not find the cached cubin")
		}
		major, minor := g.nv.Version()
		t.Logf("NewVoxelFilter: %v compiling (NVRTC %d.%d, kernels for %s), %v from the cache", compile, major, minor, vf.Target(), time.Since(start))
	})

	vf, err := NewVoxelFilter(g.c, g.nv, cfg, VoxelOptions{MaxPoints: n, CacheDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer vf.Close()
	data, err := g.c.Allocate(16 * n)
	if err != nil {
		t.Fatal(err)
	}
	defer g.c.Free(data)
	ringScan(data, 64, 1800, 3)
	bev, err := g.c.Allocate(vf.BEVBytes())
	if err != nil {
		t.Fatal(err)
	}
	defer g.c.Free(bev)
	out := voxel.NewPoints(n)
	cloud := voxel.XYZI(data, n)
	var runErr error
	allocs := testing.AllocsPerRun(20, func() {
		if err := vf.Run(cloud, out, bev); err != nil {
			runErr = err
		}
	})
	if runErr != nil {
		t.Fatal(runErr)
	}
	if allocs != 0 {
		t.Errorf("Run allocates %.1f times per call, want 0", allocs)
	}
}

func BenchmarkGPUVoxel(b *testing.B) {
	drv, err := Open()
	if err != nil {
		b.Fatal(err)
	}
	dev, err := drv.Device(0)
	if err != nil {
		b.Fatal(err)
	}
	c, err := dev.NewContext(ContextOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	nv, err := drv.OpenNVRTC()
	if err != nil {
		b.Logf("no NVRTC (%v): the embedded PTX (%s)", err, EmbeddedTarget)
		nv = nil
	}
	for _, sc := range []struct {
		name           string
		rings, columns int
	}{{"115k", 64, 1800}, {"288k", 128, 2250}} {
		n := sc.rings * sc.columns
		data, err := c.Allocate(16 * n)
		if err != nil {
			b.Fatal(err)
		}
		ringScan(data, sc.rings, sc.columns, uint64(n))
		vf, err := NewVoxelFilter(c, nv, voxel.Config{Leaf: [3]float32{0.2, 0.2, 0.2}}, VoxelOptions{MaxPoints: n})
		if err != nil {
			b.Fatal(err)
		}
		b.Logf("%s: kernels for %s", sc.name, vf.Target())
		bev, err := c.Allocate(vf.BEVBytes())
		if err != nil {
			b.Fatal(err)
		}
		out := voxel.NewPoints(n)
		for _, copyInput := range []bool{false, true} {
			name := sc.name + map[bool]string{false: "/mapped", true: "/copied"}[copyInput]
			b.Run(name, func(b *testing.B) {
				vf.SetCopyInput(copyInput)
				b.ReportAllocs()
				var device time.Duration
				for b.Loop() {
					if err := vf.Run(voxel.XYZI(data, n), out, bev); err != nil {
						b.Fatal(err)
					}
					device += vf.Timing().Total
				}
				b.ReportMetric(float64(device.Microseconds())/float64(b.N), "device-µs/op")
			})
		}
		vf.Close()
		c.Free(bev)
		c.Free(data)
	}
}

// TestGPUCloudChangingMidRunNeverFaults: a goroutine rewrites a point of the
// mapped cloud over and over while the GPU filters it in place (a slot
// written while leased). Runs that see the change must end in the
// data-changed error, never in a CUDA error (an out-of-bounds read would be
// an illegal address, which poisons the context), and afterwards the
// filter must still equal the CPU. Bounded to 200 runs or 3 s.
func TestGPUCloudChangingMidRunNeverFaults(t *testing.T) {
	g := openVoxelGPU(t)
	src := ring(8, 600)
	n := len(src) / 16
	data, err := g.c.Allocate(len(src))
	if err != nil {
		t.Fatal(err)
	}
	defer g.c.Free(data)
	cloud := layOut(data, src, 16)
	cfg := voxel.Config{Leaf: [3]float32{0.2, 0.2, 0.2}}
	vf, bev := newFilterAndBEV(t, g.c, g.nv, cfg, VoxelOptions{MaxPoints: n, CacheDir: t.TempDir()})
	got := voxel.NewPoints(n)

	orig := binary.LittleEndian.Uint32(data[0:4])
	far := math.Float32bits(1e4)
	stop, done := make(chan struct{}), make(chan struct{})
	go func() { // owned by this test: stopped below
		defer close(done)
		for k := 0; ; k++ {
			select {
			case <-stop:
				return
			default:
			}
			v := orig
			if k&1 == 0 {
				v = far
			}
			binary.LittleEndian.PutUint32(data[0:4], v)
		}
	}()
	runs, changed := 0, 0
	for deadline := time.Now().Add(3 * time.Second); runs < 200 && time.Now().Before(deadline); runs++ {
		err := vf.Run(cloud, got, bev)
		switch {
		case err == nil:
		case strings.Contains(err.Error(), "fell outside the grid"):
			changed++
		default:
			close(stop)
			<-done
			t.Fatalf("run %d with the cloud changing: %v", runs, err)
		}
	}
	close(stop)
	<-done
	binary.LittleEndian.PutUint32(data[0:4], orig)
	want, wantBEV := cpuReference(t, cfg, cloud)
	if err := vf.Run(cloud, got, bev); err != nil {
		t.Fatalf("after the changing runs: %v", err)
	}
	samePoints(t, "after the changing runs", got.P, want.P)
	sameBEV(t, "after the changing runs", bev, wantBEV)
	t.Logf("%d runs while a point moved; %d saw it move mid-run and said so; the filter still equals the CPU", runs, changed)
}
