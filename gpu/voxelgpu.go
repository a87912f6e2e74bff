package gpu

import (
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"time"

	"github.com/zerohop/zerohop/voxel"
)

// voxelSource is the CUDA C of the voxel filter and BEV kernels.
//
//go:embed kernels/voxel.cu
var voxelSource string

// voxelKernelNames lists the kernels of kernels/voxel.cu in launch order;
// voxelKernel values index it.
var voxelKernelNames = [...]string{
	kBounds:       "zh_bounds",
	kKeys:         "zh_keys",
	kRadixHist:    "zh_radix_hist",
	kRadixScatter: "zh_radix_scatter",
	kScanTiles:    "zh_scan_tiles",
	kScanSums:     "zh_scan_sums",
	kScanAdd:      "zh_scan_add",
	kHeads:        "zh_heads",
	kStarts:       "zh_starts",
	kReduce:       "zh_reduce",
	kCompact:      "zh_compact",
	kBEVClear:     "zh_bev_clear",
	kBEVCells:     "zh_bev_cells",
	kBEVFill:      "zh_bev_fill",
	kBEVFinish:    "zh_bev_finish",
}

type voxelKernel int

const (
	kBounds voxelKernel = iota
	kKeys
	kRadixHist
	kRadixScatter
	kScanTiles
	kScanSums
	kScanAdd
	kHeads
	kStarts
	kReduce
	kCompact
	kBEVClear
	kBEVCells
	kBEVFill
	kBEVFinish
	numVoxelKernels
)

// voxelCompileOptions are NVRTC's options besides the architecture.
// --fmad=false: no multiply may be fused with an add (the key and BEV
// arithmetic must round as the Go code does). No --std: the kernels are
// plain C-like CUDA valid in every dialect, so NVRTC's default (C++17
// since CUDA 11) serves, and no future NVRTC can refuse an old dialect.
var voxelCompileOptions = [...]string{"--fmad=false"}

// VoxelOptions configures a VoxelFilter. The zero value of each field is
// its default, except MaxPoints.
type VoxelOptions struct {
	// MaxPoints is the largest cloud Run accepts; scratch is sized for it.
	MaxPoints int
	// CopyInput makes Run copy the points into device memory (one async
	// copy) before the kernels read them, instead of reading the mapped
	// host memory in place. SetCopyInput changes it between runs.
	CopyInput bool
	// MaxInputBytes bounds Count*Step for CopyInput and StageUnpinned
	// (a larger cloud: ErrInputTooLarge); default MaxPoints*16. Clouds read
	// in place have no byte bound.
	MaxInputBytes int
	// StageUnpinned makes Run accept input memory this Context has not
	// pinned (a pool whose registration failed, a device without host
	// registration, heap buffers): the CPU first copies it into a pinned
	// staging buffer of MaxInputBytes, one memcpy per frame, instead of
	// Run failing with ErrNotPinned. Pinned input is read in place as ever.
	StageUnpinned bool
	// BEV is the raster Run fills when given a destination; nil: the voxel
	// package's defaults, with the filter's Config.Mount (a raster's mount
	// must be the filter's: the heights it draws are the filter's tops).
	BEV *voxel.BEVConfig
	// CacheDir holds compiled cubins; "" is DefaultCubinCacheDir().
	CacheDir string
}

// VoxelTiming is the device time of the last Run, from CUDA events.
type VoxelTiming struct {
	Copy  time.Duration // the input copy (0 when reading mapped memory)
	Total time.Duration // from before the copy to the end of the last kernel
	// Staged reports that the input was not pinned and went through the
	// staging buffer (StageUnpinned); the CPU copy is not in Copy or Total.
	Staged bool
	// CacheHit reports whether NewVoxelFilter found the cubin on disk.
	CacheHit bool
}

// VoxelFilter runs voxel.Filter's voxel grid filter, and optionally the BEV
// raster of voxel.BEV, on the GPU with results equal bit for bit to the CPU
// ones. All its GPU work runs inside the Context's Do. It is not safe for
// concurrent use.
type VoxelFilter struct {
	c      *Context
	cfg    voxel.Config    // resolved
	bevCfg voxel.BEVConfig // resolved
	inv    [3]float32
	crop   cropArgs
	ceil   ceilingArgs // cfg.Ceiling and cfg.Mount's up row, with which zh_reduce also measures each voxel's top
	opt    VoxelOptions
	target string // compileTarget's choice

	mod    *Module
	fn     [numVoxelKernels]Function
	stream *Stream
	start  *Event
	copied *Event
	end    *Event
	args   *KernelArgs
	list   argList

	dev     DevicePtr // one device block, carved into the buffers below
	inDev   DevicePtr // CopyInput's copy of the points
	keys0   DevicePtr // u64 per point, INVALID_KEY for rejected points
	points  DevicePtr // float4 per point: zh_keys' device copy of accepted points
	keyA    DevicePtr
	keyB    DevicePtr
	idxA    DevicePtr
	idxB    DevicePtr
	hist    DevicePtr // u32 [RADIX][tiles]
	tileSum DevicePtr
	flags   DevicePtr // heads → segment ids → output positions
	starts  DevicePtr
	keep    DevicePtr
	vox     DevicePtr // float4 per segment
	voxTop  DevicePtr // float per segment: its top
	voxOut  DevicePtr // float4 per output voxel
	topOut  DevicePtr // float per output voxel
	state   DevicePtr // stateWords u32
	cellOf  DevicePtr
	cellLst DevicePtr
	cellCnt DevicePtr
	cellOff DevicePtr
	cellCur DevicePtr
	cellH   DevicePtr

	host      []byte // pinned: state init | state readback | output points | output tops
	stage     []byte // pinned staging for unpinned input (StageUnpinned), else nil
	stageDev  DevicePtr
	hostInit  []byte
	hostState []byte
	hostOut   []byte
	hostOutD  DevicePtr
	hostTop   []byte
	hostTopD  DevicePtr

	timing VoxelTiming
	job    voxelJob
	runFn  func() error // f.runOnThread, bound once so Run does not allocate it
	closed bool
}

// voxelJob is the Run in progress.
type voxelJob struct {
	in  voxel.Cloud
	out *voxel.Points
	bev []byte
}

// NewVoxelFilter compiles (or loads from the cache) the kernels for the
// context's device, allocates scratch for opt.MaxPoints points, and checks
// cfg as voxel.NewFilter does. With nv nil it loads the embedded PTX
// (EmbeddedTarget) instead, which the driver JIT-compiles.
func NewVoxelFilter(c *Context, nv *NVRTC, cfg voxel.Config, opt VoxelOptions) (*VoxelFilter, error) {
	cpu, err := voxel.NewFilter(cfg, 1)
	if err != nil {
		return nil, fmt.Errorf("gpu voxel filter: %w", err)
	}
	cfg = cpu.Config()
	cpu.Close()
	if opt.MaxPoints < 1 || opt.MaxPoints > 1<<30 {
		return nil, fmt.Errorf("gpu voxel filter: max points %d out of range [1, 2^30]", opt.MaxPoints)
	}
	if opt.MaxInputBytes == 0 {
		opt.MaxInputBytes = opt.MaxPoints * voxel.XYZIStep
	}
	bevCfg := voxel.BEVConfig{Mount: cfg.Mount}
	if opt.BEV != nil {
		bevCfg = *opt.BEV
	}
	bev, err := voxel.NewBEV(bevCfg)
	if err != nil {
		return nil, fmt.Errorf("gpu voxel filter: %w", err)
	}
	if cfg.Mount != bevCfg.Mount {
		// The raster's heights are the voxels' tops, measured in
		// cfg.Mount's frame: another mount would draw wrong heights.
		return nil, fmt.Errorf("gpu voxel filter: the filter's mount %+v differs from the BEV raster's %+v; give both the same", cfg.Mount, bevCfg.Mount)
	}
	caps := c.Capabilities()
	if caps.ComputeMajor < 7 {
		return nil, fmt.Errorf("gpu voxel filter: %s is %s; the kernels need sm_70 or newer (__match_any_sync): %w", caps.Name, caps.Arch(), ErrNotSupported)
	}
	f := &VoxelFilter{c: c, cfg: cfg, bevCfg: bev.Config(), opt: opt, ceil: ceilingArgsOf(cfg)}
	for a := range 3 {
		f.inv[a] = 1 / cfg.Leaf[a]
	}
	if cfg.Crop != nil {
		f.crop = cropArgs{crop: 1, min: cfg.Crop.Min, max: cfg.Crop.Max}
	}
	f.runFn = f.runAndDrain

	var cubin []byte
	var hit bool
	var recompile func() ([]byte, error) // a refused cache entry: compile anew, replace it
	if nv == nil {
		// No NVRTC: the embedded PTX, JIT-compiled by the driver at load.
		f.target, cubin = EmbeddedTarget, voxelPTX
	} else {
		major, minor := nv.Version()
		archs, _ := nv.SupportedArchs() // nil when NVRTC cannot say: compile for the device's own
		target, err := compileTarget(caps.ComputeMajor*10+caps.ComputeMinor, archs)
		if err != nil {
			return nil, fmt.Errorf("gpu voxel filter: %w: %s is %s, NVRTC %d.%d (%s): %w", ErrKernelImage, caps.Name, caps.Arch(), major, minor, nv.Soname(), err)
		}
		f.target = target
		options := voxelCompileArgs(target)
		dir := opt.CacheDir
		if dir == "" {
			dir = DefaultCubinCacheDir()
		}
		key := cubinCacheKey(voxelSource, caps.Arch(), major, minor, options)
		if cubin, hit, err = cachedCubin(dir, key, nv.Compile, voxelSource, "voxel.cu", options); err != nil {
			return nil, fmt.Errorf("gpu voxel filter: %w: %w", ErrKernelImage, err)
		}
		recompile = func() ([]byte, error) {
			dropCachedCubin(dir, key)
			cubin, _, err := cachedCubin(dir, key, nv.Compile, voxelSource, "voxel.cu", options)
			return cubin, err
		}
	}
	f.timing.CacheHit = hit
	err = f.setup(cubin)
	if err != nil && hit && errors.Is(err, ErrKernelImage) {
		// A cached image the driver refuses (damaged on disk, or made by
		// an NVRTC whose output this driver does not take) would be
		// refused at every start, each falling back to the embedded PTX:
		// compiled anew and replaced instead. setup refuses an image
		// before it allocates anything but the module.
		if f.mod != nil {
			f.mod.Unload()
			f.mod = nil
		}
		f.timing.CacheHit = false
		var again []byte
		if again, err = recompile(); err == nil {
			err = f.setup(again)
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("gpu voxel filter: %w", err)
	}
	return f, nil
}

// voxelCompileArgs are NVRTC's options for the kernels on target (sm_XY
// for a cubin, compute_XY for PTX).
func voxelCompileArgs(target string) []string {
	return append([]string{"--gpu-architecture=" + target}, voxelCompileOptions[:]...)
}

// compileTarget picks what NVRTC compiles the kernels for on a device of
// compute capability dev (× 10; 90 for sm_90), given the real
// architectures NVRTC supports (nil: unknown). The device's own
// architecture, a cubin, when NVRTC supports it or cannot say; otherwise
// (a GPU newer than the NVRTC found) PTX for the newest architecture
// NVRTC knows that the device can run, which the driver JIT-compiles at
// module load. The kernels need sm_70 or newer.
func compileTarget(dev int, archs []int) (string, error) {
	own := fmt.Sprintf("sm_%d", dev)
	if archs == nil || slices.Contains(archs, dev) {
		return own, nil
	}
	best := 0
	for _, a := range archs {
		if a >= 70 && a <= dev && a > best {
			best = a
		}
	}
	if best == 0 {
		return "", fmt.Errorf("NVRTC compiles for none of sm_70…%s (it supports %v): %w", own, archs, ErrNotSupported)
	}
	return fmt.Sprintf("compute_%d", best), nil
}

// Target is what the kernels were compiled for: the device's real
// architecture ("sm_90", a cubin) or a virtual one ("compute_89", PTX the
// driver JIT-compiled) when NVRTC predates the GPU, or EmbeddedTarget
// when the filter was made without NVRTC.
func (f *VoxelFilter) Target() string { return f.target }

// voxelLayout is the device block's carving for maxPoints points and a
// raster of cells cells: offsets in bytes, each 256-byte aligned.
type voxelLayout struct {
	inDev, keys0, points, keyA, keyB, idxA, idxB, hist, tileSum, flags, starts, keep, vox, voxOut, state uint64
	voxTop, topOut                                                                                       uint64
	cellOf, cellLst, cellCnt, cellOff, cellCur, cellH                                                    uint64
	size                                                                                                 uint64
}

func newVoxelLayout(maxPoints, maxInputBytes, cells int) voxelLayout {
	var l voxelLayout
	n := uint64(maxPoints)
	at := func(bytes uint64) uint64 {
		off := l.size
		l.size += (bytes + 255) &^ 255
		return off
	}
	sortTiles := uint64(blocks(maxPoints, sortTile))
	scanMax := max(radixSizeGPU*int(sortTiles), maxPoints, cells)
	l.inDev = at(uint64(maxInputBytes))
	l.keys0 = at(8 * n)
	l.points = at(16 * n)
	l.keyA = at(8 * n)
	l.keyB = at(8 * n)
	l.idxA = at(4 * n)
	l.idxB = at(4 * n)
	l.hist = at(4 * radixSizeGPU * sortTiles)
	l.tileSum = at(4 * uint64(scanTiles(scanMax)))
	l.flags = at(4 * n)
	l.starts = at(4 * n)
	l.keep = at(4 * n)
	l.vox = at(16 * n)
	l.voxOut = at(16 * n)
	l.voxTop = at(4 * n)
	l.topOut = at(4 * n)
	l.state = at(4 * stateWords)
	l.cellOf = at(4 * n)
	l.cellLst = at(4 * n)
	l.cellCnt = at(4 * uint64(cells))
	l.cellOff = at(4 * uint64(cells))
	l.cellCur = at(4 * uint64(cells))
	l.cellH = at(4 * uint64(cells))
	return l
}

// imageRefusals are the codes with which a driver refuses a module or a
// kernel for the image itself: another image (the embedded PTX) may load.
// Not these: out of memory, a lost or uninitialised context, a sticky error
// from an earlier launch, or no JIT compiler (221, 223), which the PTX
// needs as much as any image NVRTC made. Retrying with the PTX then costs a
// JIT compile (seconds on a Jetson) that cannot help.
var imageRefusals = []Result{
	200, // CUDA_ERROR_INVALID_IMAGE
	209, // CUDA_ERROR_NO_BINARY_FOR_GPU
	218, // CUDA_ERROR_INVALID_PTX
	222, // CUDA_ERROR_UNSUPPORTED_PTX_VERSION (PTX newer than the driver)
	300, // CUDA_ERROR_INVALID_SOURCE
	500, // CUDA_ERROR_NOT_FOUND (cuModuleGetFunction: a kernel missing from the image)
}

// imageError is a failed module load or kernel lookup, marked
// ErrKernelImage when the image itself was refused (imageRefusals).
func (f *VoxelFilter) imageError(err error) error {
	for _, code := range imageRefusals {
		if errors.Is(err, code) {
			return fmt.Errorf("%w (%s): %w", ErrKernelImage, f.target, err)
		}
	}
	return fmt.Errorf("kernels (%s): %w", f.target, err)
}

func (f *VoxelFilter) setup(cubin []byte) error {
	c := f.c
	return c.Do(func() error {
		var err error
		if f.mod, err = c.LoadModule(cubin); err != nil {
			return f.imageError(err)
		}
		for k, name := range voxelKernelNames {
			if f.fn[k], err = f.mod.Function(name); err != nil {
				return f.imageError(err)
			}
		}
		if f.stream, err = c.NewStream(); err != nil {
			return err
		}
		for _, e := range []**Event{&f.start, &f.copied, &f.end} {
			if *e, err = c.NewEvent(); err != nil {
				return err
			}
		}
		if f.args, err = c.NewKernelArgs(maxKernelArgs); err != nil {
			return err
		}
		cells := f.bevCfg.H * f.bevCfg.W
		l := newVoxelLayout(f.opt.MaxPoints, f.opt.MaxInputBytes, cells)
		if f.dev, err = c.MemAlloc(l.size); err != nil {
			return err
		}
		// Zeroed once so that every index a kernel reads is in bounds even
		// for a cloud that changed mid-frame (zh_keys then drops accepted
		// points, and the sort passes after the first read scratch entries
		// it did not write): stale entries are earlier frames' indices, all
		// below MaxPoints. Such a frame ends in an error (ST_MISS, or a keys
		// count other than the bounds count) instead of an illegal address,
		// which would poison the context for good.
		if err = c.MemsetD8(f.dev, 0, l.size); err != nil {
			return err
		}
		d := f.dev
		f.inDev, f.keys0, f.keyA, f.keyB = d+DevicePtr(l.inDev), d+DevicePtr(l.keys0), d+DevicePtr(l.keyA), d+DevicePtr(l.keyB)
		f.points = d + DevicePtr(l.points)
		f.idxA, f.idxB, f.hist, f.tileSum = d+DevicePtr(l.idxA), d+DevicePtr(l.idxB), d+DevicePtr(l.hist), d+DevicePtr(l.tileSum)
		f.flags, f.starts, f.keep, f.vox = d+DevicePtr(l.flags), d+DevicePtr(l.starts), d+DevicePtr(l.keep), d+DevicePtr(l.vox)
		f.voxOut, f.state, f.cellOf, f.cellLst = d+DevicePtr(l.voxOut), d+DevicePtr(l.state), d+DevicePtr(l.cellOf), d+DevicePtr(l.cellLst)
		f.voxTop, f.topOut = d+DevicePtr(l.voxTop), d+DevicePtr(l.topOut)
		f.cellCnt, f.cellOff, f.cellCur, f.cellH = d+DevicePtr(l.cellCnt), d+DevicePtr(l.cellOff), d+DevicePtr(l.cellCur), d+DevicePtr(l.cellH)

		stateBytes := 4 * stateWords
		outBytes := 16 * f.opt.MaxPoints
		if f.host, err = c.Allocate(2*stateBytes + outBytes + 4*f.opt.MaxPoints); err != nil {
			return err
		}
		f.hostInit = f.host[:stateBytes:stateBytes]
		f.hostState = f.host[stateBytes : 2*stateBytes : 2*stateBytes]
		f.hostOut = f.host[2*stateBytes : 2*stateBytes+outBytes : 2*stateBytes+outBytes]
		f.hostTop = f.host[2*stateBytes+outBytes:]
		for w := range stateWords {
			v := uint32(0)
			if w >= stMin && w < stMin+3 {
				v = math.MaxUint32
			}
			binary.LittleEndian.PutUint32(f.hostInit[4*w:], v)
		}
		if f.hostOutD, err = c.HostDevicePointer(f.hostOut); err != nil {
			return err
		}
		if f.hostTopD, err = c.HostDevicePointer(f.hostTop); err != nil {
			return err
		}
		if f.opt.StageUnpinned {
			if f.stage, err = c.Allocate(f.opt.MaxInputBytes); err != nil {
				return err
			}
			f.stageDev, err = c.HostDevicePointer(f.stage)
		}
		return err
	})
}

// SetCopyInput chooses between reading the points in place through the
// mapped host memory (false) and an async copy into device memory first.
func (f *VoxelFilter) SetCopyInput(copyInput bool) { f.opt.CopyInput = copyInput }

// BEVConfig is the resolved raster configuration.
func (f *VoxelFilter) BEVConfig() voxel.BEVConfig { return f.bevCfg }

// BEVBytes is the size of Run's BEV destination: 3·H·W float32.
func (f *VoxelFilter) BEVBytes() int { return 4 * voxel.BEVChannels * f.bevCfg.H * f.bevCfg.W }

// Timing returns the device times of the last successful Run.
func (f *VoxelFilter) Timing() VoxelTiming { return f.timing }

// Run filters the cloud into out as voxel.Filter.Run does (same points,
// same order, same bits) and, when bev is not nil, writes the [3,H,W]
// float32 raster of voxel.BEV.Fill (little-endian) into it. in.Data must be
// memory pinned by this Context (Allocate or a Region from Pin) — read in
// place through its device pointer, or copied first with CopyInput — and
// must not change during the call. bev must be BEVBytes long, in memory
// from Allocate (the kernels write it through its device pointer). On
// error out is left empty.
func (f *VoxelFilter) Run(in voxel.Cloud, out *voxel.Points, bev []byte) error {
	out.P, out.Top, out.Mount = out.P[:0], out.Top[:0], f.cfg.Mount
	if f.closed {
		return ErrClosed
	}
	if err := in.Validate(); err != nil {
		return fmt.Errorf("gpu voxel filter: %w", err)
	}
	if in.Count > f.opt.MaxPoints {
		return fmt.Errorf("gpu voxel filter: cloud of %d points exceeds the filter's max points %d", in.Count, f.opt.MaxPoints)
	}
	if bev != nil && len(bev) != f.BEVBytes() {
		return fmt.Errorf("gpu voxel filter: BEV destination of %d bytes, want %d (3 × %d × %d float32)", len(bev), f.BEVBytes(), f.bevCfg.H, f.bevCfg.W)
	}
	f.job = voxelJob{in: in, out: out, bev: bev}
	err := f.c.Do(f.runFn)
	f.job = voxelJob{}
	if err != nil {
		out.P, out.Top = out.P[:0], out.Top[:0]
		return fmt.Errorf("gpu voxel filter: %w", err)
	}
	return nil
}

func (f *VoxelFilter) launch(k voxelKernel, grid, block uint32, l *argList) error {
	if grid == 0 {
		return nil
	}
	if err := l.into(f.args); err != nil {
		return fmt.Errorf("%s: %w", voxelKernelNames[k], err)
	}
	return f.launchKernel(f.fn[k], Dim3{grid, 1, 1}, Dim3{block, 1, 1})
}

// scan is an exclusive scan of n u32 words from in to out (may be equal),
// with the total written to the device word total.
func (f *VoxelFilter) scan(in, out DevicePtr, n int, total DevicePtr) error {
	tiles := scanTiles(n)
	l := &f.list
	if err := f.launch(kScanTiles, uint32(tiles), scanThreads, packScanTiles(l, in, out, uint32(n), f.tileSum)); err != nil {
		return err
	}
	if err := f.launch(kScanSums, 1, scanThreads, packScanSums(l, f.tileSum, uint32(tiles), total)); err != nil {
		return err
	}
	return f.launch(kScanAdd, blocks(n, pointThreads), pointThreads, packScanAdd(l, out, f.tileSum, uint32(n)))
}

func (f *VoxelFilter) stateWord(i int) uint32 {
	return binary.LittleEndian.Uint32(f.hostState[4*i:])
}

// readState copies the device state words into hostState and waits.
func (f *VoxelFilter) readState() error {
	if err := f.copyOut(f.hostState, f.state); err != nil {
		return err
	}
	return f.sync()
}

// runAndDrain is runOnThread, and after a failure a best-effort wait for
// whatever was already queued: kernels may still be reading the input and
// writing the BEV raster, and the caller may reuse both (release the slot,
// or fill the raster on the CPU) as soon as Run returns.
func (f *VoxelFilter) runAndDrain() error {
	err := f.runOnThread()
	if err != nil && f.stream != nil {
		_ = f.sync() // its own error adds nothing to err
	}
	return err
}

// runOnThread is the pipeline; it runs on the context thread.
func (f *VoxelFilter) runOnThread() error {
	in, out, bev := f.job.in, f.job.out, f.job.bev
	n := in.Count
	f.timing.Staged = false // also for an empty cloud, which returns early
	l := &f.list
	var bevPtr DevicePtr
	if bev != nil {
		var err error
		if bevPtr, err = f.c.HostDevicePointer(bev); err != nil {
			return fmt.Errorf("BEV destination: %w", err)
		}
	}
	if n == 0 {
		clear(bev)
		return nil
	}
	if err := f.record(f.start); err != nil {
		return err
	}
	data := in.Data[:n*in.Step]
	// One lookup per frame: where the input is pinned, or that it is not.
	inPtr, pinned := f.c.lookup(data)
	if !pinned && f.stage != nil {
		if len(data) > len(f.stage) {
			return fmt.Errorf("unpinned cloud of %d bytes (%d points × %d) exceeds the staging buffer of %d bytes: %w", len(data), n, in.Step, len(f.stage), ErrInputTooLarge)
		}
		data = f.stage[:copy(f.stage, data)]
		inPtr, pinned = f.stageDev, true
		f.timing.Staged = true
	}
	if !pinned {
		return fmt.Errorf("input points: %d bytes at %#x: %w", len(data), addressOf(data), ErrNotPinned)
	}
	ca := cloudArgs{n: uint32(n), step: uint32(in.Step), ox: int32(in.OffX), oy: int32(in.OffY), oz: int32(in.OffZ), oi: int32(in.OffI)}
	if f.opt.CopyInput {
		if len(data) > f.opt.MaxInputBytes {
			return fmt.Errorf("cloud of %d bytes (%d points × %d) exceeds the input copy buffer of %d bytes: %w", len(data), n, in.Step, f.opt.MaxInputBytes, ErrInputTooLarge)
		}
		if err := f.copyIn(f.inDev, data); err != nil {
			return fmt.Errorf("copy input: %w", err)
		}
		ca.pts = f.inDev
	} else {
		ca.pts = inPtr
	}
	if err := f.record(f.copied); err != nil {
		return err
	}

	// 1. Bounds, then the grid on the host (as voxel's exact path).
	if err := f.copyIn(f.state, f.hostInit); err != nil {
		return err
	}
	if err := f.launch(kBounds, min(blocks(n, pointThreads), boundsBlocks), pointThreads, packBounds(l, ca, f.crop, f.ceil, f.state)); err != nil {
		return err
	}
	if err := f.readState(); err != nil {
		return err
	}
	m := int(f.stateWord(stAccepted))
	if m == 0 {
		clear(bev)
		return nil
	}
	var lo, hi [3]float32
	for a := range 3 {
		lo[a] = fromOrdered(f.stateWord(stMin + a))
		hi[a] = fromOrdered(f.stateWord(stMax + a))
	}
	g, err := gridFor(lo, hi, f.inv, f.cfg.Leaf)
	if err != nil {
		return err
	}

	// 2. Keys, then a stable LSD radix sort; pass 0 compacts.
	if err := f.launch(kKeys, blocks(n, pointThreads), pointThreads, packKeys(l, ca, f.crop, f.ceil, f.inv, g, f.keys0, f.points, f.state)); err != nil {
		return err
	}
	src, srcIdx, dst, dstIdx := f.keys0, DevicePtr(0), f.keyA, f.idxA
	count := n
	for p := range radixPasses(g.keyBits()) {
		first := p == 0
		tiles := blocks(count, sortTile)
		shift := keyShiftOf(p)
		if err := f.launch(kRadixHist, tiles, sortThreads, packRadixHist(l, src, uint32(count), shift, first, f.hist)); err != nil {
			return err
		}
		total := f.state + 4*stScratch
		if first {
			total = f.state + 4*stKeyed // the points zh_keys kept: pass 0 compacts
		}
		if err := f.scan(f.hist, f.hist, radixSizeGPU*int(tiles), total); err != nil {
			return err
		}
		if err := f.launch(kRadixScatter, tiles, sortThreads, packRadixScatter(l, src, srcIdx, uint32(count), shift, first, f.hist, dst, dstIdx)); err != nil {
			return err
		}
		count = m
		if first {
			src, srcIdx, dst, dstIdx = f.keyA, f.idxA, f.keyB, f.idxB
		} else {
			src, srcIdx, dst, dstIdx = dst, dstIdx, src, srcIdx
		}
	}

	// 3. Voxels: segment starts, means, min-points filter, output in key order.
	mb := blocks(m, pointThreads)
	if err := f.launch(kHeads, mb, pointThreads, packHeads(l, src, uint32(m), f.flags)); err != nil {
		return err
	}
	if err := f.scan(f.flags, f.flags, m, f.state+4*stSegments); err != nil {
		return err
	}
	if err := f.launch(kStarts, mb, pointThreads, packStarts(l, src, f.flags, uint32(m), f.starts)); err != nil {
		return err
	}
	if err := f.launch(kReduce, mb, pointThreads, packReduce(l, f.points, srcIdx, f.starts, f.state, uint32(m), minPointsArg(f.cfg.MinPoints), f.ceil.up, f.vox, f.voxTop, f.keep)); err != nil {
		return err
	}
	if err := f.scan(f.keep, f.flags, m, f.state+4*stVoxels); err != nil {
		return err
	}
	if err := f.launch(kCompact, mb, pointThreads, packCompact(l, f.vox, f.voxTop, f.keep, f.flags, uint32(m), f.voxOut, f.hostOutD, f.topOut, f.hostTopD)); err != nil {
		return err
	}

	// 4. The BEV raster of the output voxels.
	if bev != nil {
		cells := f.bevCfg.H * f.bevCfg.W
		cb := blocks(cells, pointThreads)
		ba := bevArgsOf(f.bevCfg)
		if err := f.launch(kBEVClear, cb, pointThreads, packBEVClear(l, f.cellCnt, f.cellCur, f.cellH, uint32(cells))); err != nil {
			return err
		}
		if err := f.launch(kBEVCells, mb, pointThreads, packBEVCells(l, f.voxOut, f.topOut, f.state, uint32(m), ba, f.cellOf, f.cellCnt, f.cellH)); err != nil {
			return err
		}
		if err := f.scan(f.cellCnt, f.cellOff, cells, f.state+4*stBEVTotal); err != nil {
			return err
		}
		if err := f.launch(kBEVFill, mb, pointThreads, packBEVFill(l, f.cellOf, f.cellOff, f.state, uint32(m), f.cellCur, f.cellLst)); err != nil {
			return err
		}
		if err := f.launch(kBEVFinish, cb, pointThreads, packBEVFinish(l, f.voxOut, f.cellOff, f.cellCnt, f.cellH, f.cellLst, uint32(cells), bevPtr)); err != nil {
			return err
		}
	}
	if err := f.record(f.end); err != nil {
		return err
	}
	if err := f.readState(); err != nil {
		return err
	}
	if miss := f.stateWord(stMiss); miss != 0 {
		return fmt.Errorf("%d points fell outside the grid of their own bounds: cloud data changed while it was being filtered (slot written while leased?)", miss)
	}
	if keyed := int(f.stateWord(stKeyed)); keyed != m {
		// A point turned non-finite (or left the crop box) after the
		// bounds pass, or the reverse: the sort then ran over m
		// elements of which keyed were this frame's.
		return fmt.Errorf("the bounds pass accepted %d points, the keys pass %d: cloud data changed while it was being filtered (slot written while leased?)", m, keyed)
	}
	voxels := int(f.stateWord(stVoxels))
	if voxels > cap(out.P) || voxels > cap(out.Top) {
		return fmt.Errorf("output holds %d points and %d tops, result has %d voxels (make it with voxel.NewPoints)", cap(out.P), cap(out.Top), voxels)
	}
	out.P, out.Top = out.P[:voxels], out.Top[:voxels]
	decodePoints(out.P, f.hostOut)
	decodeFloats(out.Top, f.hostTop)
	f.timing.Copy, f.timing.Total = 0, 0
	if f.opt.CopyInput {
		if f.timing.Copy, err = f.elapsed(f.start, f.copied); err != nil {
			return err
		}
	}
	f.timing.Total, err = f.elapsed(f.start, f.end)
	return err
}

// minPointsArg is MinPoints as zh_reduce's u32, clamped: no voxel holds
// 2^32 points, and uint32(1<<32) would be 0 and keep every voxel.
func minPointsArg(minPoints int) uint32 { return uint32(min(minPoints, math.MaxUint32)) }

// decodePoints reads len(dst) float4 (x, y, z, intensity) from src.
func decodePoints(dst []voxel.Point, src []byte) {
	for i := range dst {
		b := src[16*i : 16*i+16]
		dst[i] = voxel.Point{
			X: math.Float32frombits(binary.LittleEndian.Uint32(b[0:4])),
			Y: math.Float32frombits(binary.LittleEndian.Uint32(b[4:8])),
			Z: math.Float32frombits(binary.LittleEndian.Uint32(b[8:12])),
			I: math.Float32frombits(binary.LittleEndian.Uint32(b[12:16])),
		}
	}
}

// decodeFloats reads len(dst) float32 from src.
func decodeFloats(dst []float32, src []byte) {
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
	}
}

// Close frees the filter's device and pinned memory, stream, events and
// module. Run returns ErrClosed afterwards.
func (f *VoxelFilter) Close() error {
	if f.closed {
		return nil
	}
	f.closed = true
	var first error
	keep := func(err error) {
		if first == nil && err != nil {
			first = err
		}
	}
	if f.dev != 0 {
		keep(f.c.MemFree(f.dev))
	}
	if f.host != nil {
		keep(f.c.Free(f.host))
	}
	if f.stage != nil {
		keep(f.c.Free(f.stage))
	}
	if f.args != nil {
		keep(f.args.Free())
	}
	for _, e := range []*Event{f.start, f.copied, f.end} {
		if e != nil {
			keep(e.Destroy())
		}
	}
	if f.stream != nil {
		keep(f.stream.Destroy())
	}
	if f.mod != nil {
		keep(f.mod.Unload())
	}
	return first
}

// fromOrdered inverts the kernels' ordered(): the float whose ordered bits
// are u.
func fromOrdered(u uint32) float32 {
	if u&(1<<31) != 0 {
		return math.Float32frombits(u &^ (1 << 31))
	}
	return math.Float32frombits(^u)
}

// voxelGrid mirrors voxel's grid: dim[a] voxels along axis a from index
// min[a]; key = ix + dim0*(iy + dim1*iz) on index offsets from min.
type voxelGrid struct {
	min [3]int64
	dim [3]uint64
}

func (g voxelGrid) keyBits() int { return bits.Len64(g.dim[0]*g.dim[1]*g.dim[2] - 1) }

// indexLimitGPU is voxel's indexLimit: indices strictly within ±2^62.
const indexLimitGPU = 1 << 62

// gridFor mirrors voxel's gridOf on the accepted points' bounds lo..hi:
// the same grid, or an error wrapping voxel.ErrGridTooLarge.
func gridFor(lo, hi [3]float32, inv, leaf [3]float32) (voxelGrid, error) {
	var g voxelGrid
	for a := range 3 {
		first := math.Floor(float64(float32(lo[a] * inv[a])))
		last := math.Floor(float64(float32(hi[a] * inv[a])))
		if !(first > -indexLimitGPU && last < indexLimitGPU && first <= last) {
			return voxelGrid{}, fmt.Errorf("%w: leaf %s = %g m over %s from %g to %g m gives voxel indices %g to %g, not within ±2^62; use a larger leaf or a crop box",
				voxel.ErrGridTooLarge, axisName(a), leaf[a], axisName(a), lo[a], hi[a], first, last)
		}
		g.min[a] = int64(first)
		g.dim[a] = uint64(int64(last)) - uint64(g.min[a]) + 1
	}
	h1, xy := bits.Mul64(g.dim[0], g.dim[1])
	h2, xyz := bits.Mul64(xy, g.dim[2])
	if h1 != 0 || h2 != 0 || xyz > 1<<63 {
		return voxelGrid{}, fmt.Errorf("%w: leaf (%g, %g, %g) m over x [%g, %g] y [%g, %g] z [%g, %g] m spans more than 2^63 voxels; use a larger leaf or a crop box",
			voxel.ErrGridTooLarge, leaf[0], leaf[1], leaf[2], lo[0], hi[0], lo[1], hi[1], lo[2], hi[2])
	}
	return g, nil
}

func axisName(a int) string { return [3]string{"x", "y", "z"}[a] }
