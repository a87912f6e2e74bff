package agent

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/zerohop/zerohop/voxel"
)

// The GPU path's start-up self-check: one run of the GPU filter on a
// small fixed cloud, compared bit for bit with the CPU path's points and
// raster. The kernels are meant to give the CPU's results exactly
// (--fmad=false, the same order), but a GPU path that starts and computes
// something else (a driver's JIT, an architecture these kernels have not
// run on, a binding bug) must not steer the robot: the agent uses the CPU
// instead, saying why. The run also makes the driver finish loading the
// kernels (lazy loading, CUDA ≥ 12.2) before the first frame, so a failure
// there shows at start, not on a frame.

// selfCheckPoints is the self-check cloud's size (fewer when the filter
// takes fewer: --max-points): enough for the sort and scan kernels to run
// several blocks and for voxels to hold several points, few enough for the
// CPU reference to take well under a millisecond.
const (
	selfCheckPoints = 4096
	selfCheckStep   = 16 // x, y, z, intensity float32
)

// selfCheckCloud writes the fixed cloud of n points into buf (n ×
// selfCheckStep bytes): clusters of points that share voxels (more points
// each than cfg.MinPoints asks of a voxel, within a quarter leaf), spread
// over the raster's area and beyond it (within cfg.Crop, when set),
// heights from a metre below bev's ground to a metre above its height cap
// (so that both clamps of the height channel are compared, wherever
// --lidar-height puts the ground), and a few non-finite points that both
// paths must skip. With a LiDAR mount (--lidar-xy, --lidar-rpy) the
// clusters are laid out in the robot frame, where the raster and its
// heights are, and moved into the clouds' frame, so that the kernels'
// transform is compared too; cfg.Crop, in the clouds' frame, is then the
// raster's own (filterConfig) and keeps what matters.
func selfCheckCloud(buf []byte, n int, cfg voxel.Config, bev voxel.BEVConfig) voxel.Cloud {
	state := uint32(2463534242) // xorshift32: the same cloud every start
	next := func() float32 {
		state ^= state << 13
		state ^= state >> 17
		state ^= state << 5
		return float32(state>>8) / (1 << 24) // [0, 1)
	}
	maxH := bev.MaxHeight
	if maxH == 0 {
		maxH = 3 // voxel.BEV's default
	}
	lo, hi := [3]float32{-20, -25, bev.GroundZ - 1}, [3]float32{40, 25, bev.GroundZ + maxH + 1}
	mounted, tf := !bev.Mount.IsIdentity(), bev.Mount.Transform()
	if mounted {
		// The raster's window and 5 m around it, in the robot frame
		// (min_x_m may put the window anywhere within a kilometre).
		r, err := voxel.NewBEV(bev)
		if err == nil {
			c := r.Config()
			halfW := float32(c.W) * c.Cell / 2
			lo[0], hi[0] = c.MinX-5, c.MinX+float32(c.H)*c.Cell+5
			lo[1], hi[1] = -halfW-5, halfW+5
		}
	}
	if c := cfg.Crop; c != nil && !mounted {
		for a := range 3 {
			lo[a], hi[a] = max(lo[a], c.Min[a]), min(hi[a], c.Max[a])
			if hi[a] <= lo[a] { // a crop away from that area: inside it instead
				lo[a], hi[a] = c.Min[a], min(c.Max[a], c.Min[a]+60)
			}
		}
	}
	spread := 0.25 * min(cfg.Leaf[0], cfg.Leaf[1], cfg.Leaf[2])
	cluster := max(4, 4*cfg.MinPoints)
	var centre [3]float32
	for i := range n {
		if i%cluster == 0 {
			for a := range 3 {
				centre[a] = lo[a] + (hi[a]-lo[a])*next()
			}
		}
		p := [4]float32{centre[0] + spread*next(), centre[1] + spread*next(), centre[2] + spread*next(), next()}
		if mounted {
			x, y, z := tf.ApplyInverse(float64(p[0]), float64(p[1]), float64(p[2]))
			p[0], p[1], p[2] = float32(x), float32(y), float32(z)
		}
		switch i {
		case 101:
			p[0] = float32(math.NaN())
		case 202:
			p[1] = float32(math.Inf(1))
		case 303:
			p[2] = float32(math.Inf(-1))
		}
		for j, v := range p {
			binary.LittleEndian.PutUint32(buf[i*selfCheckStep+4*j:], math.Float32bits(v))
		}
	}
	return voxel.Cloud{Data: buf[:n*selfCheckStep], Count: n, Step: selfCheckStep, OffX: 0, OffY: 4, OffZ: 8, OffI: 12}
}

// checkGPUFilter runs f once on in, writing its raster into bev, and
// compares its points and raster with voxel.Filter's (cfg) and
// voxel.BEV's raster (bevCfg) of them, bit for bit. It returns the number
// of voxels: 0 when the CPU found none (a --min-points above what the
// cloud's clusters hold), and then only the empty raster was compared.
func checkGPUFilter(f GPUFilter, in voxel.Cloud, bev []byte, cfg voxel.Config, bevCfg voxel.BEVConfig) (int, error) {
	cpu, err := voxel.NewFilter(cfg, in.Count)
	if err != nil {
		return 0, fmt.Errorf("CPU reference filter: %w", err)
	}
	defer cpu.Close()
	want := voxel.NewPoints(in.Count)
	if err := cpu.Run(in, want); err != nil {
		return 0, fmt.Errorf("CPU reference filter: %w", err)
	}
	raster, err := voxel.NewBEV(bevCfg)
	if err != nil {
		return 0, fmt.Errorf("CPU reference raster: %w", err)
	}
	wantBEV := make([]float32, raster.Len())
	if err := raster.Fill(want, wantBEV); err != nil {
		return 0, fmt.Errorf("CPU reference raster: %w", err)
	}
	if len(bev) != 4*len(wantBEV) {
		return 0, fmt.Errorf("BEV buffer of %d bytes, the CPU raster has %d float32", len(bev), len(wantBEV))
	}
	got := voxel.NewPoints(in.Count)
	if err := f.Run(in, got, bev); err != nil {
		return 0, fmt.Errorf("run on %d points: %w", in.Count, err)
	}
	if len(got.P) != len(want.P) {
		return 0, fmt.Errorf("%d points gave %d voxels on the GPU, %d on the CPU", in.Count, len(got.P), len(want.P))
	}
	bad, first := 0, -1
	for i, w := range want.P {
		g := got.P[i]
		if math.Float32bits(g.X) != math.Float32bits(w.X) || math.Float32bits(g.Y) != math.Float32bits(w.Y) ||
			math.Float32bits(g.Z) != math.Float32bits(w.Z) || math.Float32bits(g.I) != math.Float32bits(w.I) {
			if bad++; first < 0 {
				first = i
			}
		}
	}
	if bad > 0 {
		return 0, fmt.Errorf("%d of %d voxels differ from the CPU's (first, voxel %d: GPU %+v, CPU %+v)", bad, len(want.P), first, got.P[first], want.P[first])
	}
	if len(got.Top) != len(want.Top) || got.Mount != want.Mount {
		return 0, fmt.Errorf("the GPU gave %d voxel tops measured with mount %+v, the CPU %d with %+v", len(got.Top), got.Mount, len(want.Top), want.Mount)
	}
	for i, w := range want.Top {
		if math.Float32bits(got.Top[i]) != math.Float32bits(w) {
			if bad++; first < 0 {
				first = i
			}
		}
	}
	if bad > 0 {
		return 0, fmt.Errorf("%d of %d voxel tops differ from the CPU's (first, voxel %d: GPU %g, CPU %g)", bad, len(want.Top), first, got.Top[first], want.Top[first])
	}
	for i, w := range wantBEV {
		if g := binary.LittleEndian.Uint32(bev[4*i:]); g != math.Float32bits(w) {
			bad++
			if first < 0 {
				first = i
			}
		}
	}
	if bad > 0 {
		return 0, fmt.Errorf("%d of %d BEV elements differ from the CPU's (first, element %d: GPU %g, CPU %g)",
			bad, len(wantBEV), first, math.Float32frombits(binary.LittleEndian.Uint32(bev[4*first:])), wantBEV[first])
	}
	return len(want.P), nil
}
