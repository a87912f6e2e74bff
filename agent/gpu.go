package agent

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/zerohop/zerohop/gpu"
	"github.com/zerohop/zerohop/pinned"
	"github.com/zerohop/zerohop/voxel"
)

// GPU modes (NodeConfig.GPU, agent --gpu).
const (
	// GPUAuto runs voxel filtering and BEV on the GPU when one works, else
	// on the CPU with one log line saying why (the default).
	GPUAuto = "auto"
	// GPUOn requires the GPU path: start-up fails, naming the step, if it
	// cannot start.
	GPUOn = "on"
	// GPUOff always uses the CPU path.
	GPUOff = "off"
)

// GPU input modes (NodeConfig.GPUInput, agent --gpu-input).
const (
	// GPUInputMapped: the kernels read the points in place from the
	// registered slot through its device pointer (zero-copy, the default).
	GPUInputMapped = "mapped"
	// GPUInputCopy: one async copy of the points into device memory first.
	GPUInputCopy = "copy"
)

// GPUFilter is the voxel filter and BEV raster on the GPU
// (gpu.VoxelFilter): one call filters the cloud into out and writes the
// [3,H,W] float32 raster into bev. It must give the CPU path's results.
type GPUFilter interface {
	Run(in voxel.Cloud, out *voxel.Points, bev []byte) error
}

// stagingCounter is the GPU filter, counting the frames it staged through
// pinned memory (their slot was not registered with the GPU: one CPU copy
// each) for gpu_voxel_staged_total. Zero-copy is the GPU path's point, and
// a registration that failed at start shows nowhere else but one log line.
type stagingCounter struct {
	filter *gpu.VoxelFilter
	staged atomic.Uint64
}

func (s *stagingCounter) Run(in voxel.Cloud, out *voxel.Points, bev []byte) error {
	err := s.filter.Run(in, out, bev)
	if err == nil && s.filter.Timing().Staged {
		s.staged.Add(1)
	}
	return err
}

// gpuVoxel is the agent's GPU path, set up at start: the device's context,
// the compiled kernels, and the BEV input of the model in pinned, mapped
// memory, which the kernels write and ONNX Runtime reads (no copy).
type gpuVoxel struct {
	name   string // the device, e.g. "NVIDIA H200"
	ctx    *gpu.Context
	filter *gpu.VoxelFilter
	bev    []byte    // cuMemHostAlloc'd; the model's BEV input
	bevF   []float32 // the same memory, for infer.SessionOptions.BEV
}

// gpuStartError says which step of the GPU path's start-up failed.
type gpuStartError struct {
	Device string // "" before a device was found
	Step   string
	Err    error
}

func (e *gpuStartError) Error() string {
	if e.Device == "" {
		return fmt.Sprintf("gpu voxel path: %s: %v", e.Step, e.Err)
	}
	return fmt.Sprintf("gpu voxel path on %s: %s: %v", e.Device, e.Step, e.Err)
}

func (e *gpuStartError) Unwrap() error { return e.Err }

// gpuVoxelConfig is what the GPU path is built from.
type gpuVoxelConfig struct {
	Filter    voxel.Config
	BEV       voxel.BEVConfig // the model's raster; zero: voxel.BEV's default
	MaxPoints int
	CopyInput bool
	CacheDir  string
	Sync      gpu.SyncMode // how waits for the GPU wait (--gpu-sync)
	Log       *zap.Logger
}

// openGPUVoxel starts the GPU path on device 0 (CUDA_VISIBLE_DEVICES picks
// it): driver, context, NVRTC, kernels (compiled for the device or loaded
// from the cubin cache; without NVRTC, the embedded PTX), pinned BEV buffer. Any failure is a *gpuStartError;
// what was started is undone.
func openGPUVoxel(cfg gpuVoxelConfig) (*gpuVoxel, error) {
	log := cfg.Log
	if log == nil {
		log = zap.NewNop()
	}
	fail := func(dev, step string, err error) (*gpuVoxel, error) {
		return nil, &gpuStartError{Device: dev, Step: step, Err: err}
	}
	drv, err := gpu.Open()
	if err != nil {
		return fail("", "load the CUDA driver", err)
	}
	n, err := drv.DeviceCount()
	if err == nil && n == 0 {
		err = gpu.ErrNoDevice
	}
	if err != nil {
		return fail("", "CUDA driver "+drv.Version()+": count devices", err)
	}
	dev, err := drv.Device(0)
	if err != nil {
		return fail("", "device 0", err)
	}
	name, err := dev.Name()
	if err != nil {
		return fail("", "device 0 name", err)
	}
	v := &gpuVoxel{name: name}
	if v.ctx, err = dev.NewContext(gpu.ContextOptions{Sync: cfg.Sync, Logf: func(format string, args ...any) {
		log.Info(fmt.Sprintf(format, args...))
	}}); err != nil {
		return fail(name, "primary context", err)
	}
	ok := false
	defer func() {
		if !ok {
			v.Close()
		}
	}()
	nv, err := drv.OpenNVRTC() // none newer than the driver can load
	if err != nil {
		// A driver without the toolkit (a container with only the driver
		// mounted) still runs the kernels: the driver JIT-compiles the
		// embedded PTX. NVRTC is better (a cubin for the device's own
		// architecture, cached), so say how to get it.
		log.Info("gpu: no NVRTC, so the voxel kernels are the embedded PTX, JIT-compiled by the driver "+
			"(install NVRTC, e.g. CUDA's cuda-nvrtc package, or set $ZEROHOP_NVRTC, to compile them for the device)",
			zap.String("device", name), zap.String("embedded_ptx", gpu.EmbeddedTarget), zap.Error(err))
		nv = nil
	}
	bevCfg := cfg.BEV
	opt := gpu.VoxelOptions{
		MaxPoints: cfg.MaxPoints, CopyInput: cfg.CopyInput, BEV: &bevCfg, CacheDir: cfg.CacheDir,
		// Slots the GPU could not register (or heap buffers) cost one CPU
		// copy into pinned memory, not the GPU path.
		StageUnpinned: true,
	}
	v.filter, err = gpu.NewVoxelFilter(v.ctx, nv, cfg.Filter, opt)
	if err != nil && nv != nil && errors.Is(err, gpu.ErrKernelImage) {
		// An NVRTC that cannot compile for this device, or whose cubin
		// the driver refuses, need not cost the GPU path either.
		major, minor := nv.Version()
		log.Warn("gpu: the voxel kernels from NVRTC did not load; trying the embedded PTX, JIT-compiled by the driver",
			zap.String("device", name), zap.String("nvrtc", fmt.Sprintf("%d.%d (%s)", major, minor, nv.Soname())),
			zap.String("embedded_ptx", gpu.EmbeddedTarget), zap.Error(err))
		nvErr := err
		if v.filter, err = gpu.NewVoxelFilter(v.ctx, nil, cfg.Filter, opt); err != nil {
			err = errors.Join(nvErr, fmt.Errorf("then the embedded PTX: %w", err))
		}
	}
	if err != nil {
		return fail(name, "voxel kernels", err)
	}
	if v.bev, err = v.ctx.Allocate(v.filter.BEVBytes()); err != nil {
		return fail(name, "pinned BEV buffer", err)
	}
	if v.bevF, err = gpu.Float32View(v.bev); err != nil {
		return fail(name, "pinned BEV buffer", err)
	}
	points := min(selfCheckPoints, cfg.MaxPoints)
	input, err := v.ctx.Allocate(points * selfCheckStep)
	if err != nil {
		return fail(name, "self-check input", err)
	}
	voxels, err := checkGPUFilter(v.filter, selfCheckCloud(input, points, cfg.Filter, cfg.BEV), v.bev, cfg.Filter, cfg.BEV)
	if ferr := v.ctx.Free(input); err == nil && ferr != nil {
		err = ferr
	}
	if err != nil {
		return fail(name, "self-check against the CPU path ("+v.filter.Target()+" kernels)", err)
	}
	fields := []zap.Field{zap.String("device", name), zap.String("kernels", v.filter.Target()), zap.Int("points", points), zap.Int("voxels", voxels)}
	if voxels == 0 {
		log.Warn("gpu: self-check compared no voxels (the CPU found none in its cloud at this --min-points): the voxel kernels are not checked", fields...)
	} else {
		log.Info("gpu: self-check passed: the voxel kernels give the CPU path's points and raster, bit for bit", fields...)
	}
	ok = true
	return v, nil
}

// Close frees what openGPUVoxel made. Call it after everything that uses
// the BEV buffer (the inference session) and the registered pools (camera,
// subscriber) is closed.
func (g *gpuVoxel) Close() error {
	var errs []error
	if g.filter != nil {
		errs = append(errs, g.filter.Close())
	}
	if g.bev != nil {
		errs = append(errs, g.ctx.Free(g.bev))
		g.bev, g.bevF = nil, nil
	}
	if g.ctx != nil {
		errs = append(errs, g.ctx.Close())
	}
	return errors.Join(errs...)
}

// bestEffortPinner registers segments with the GPU but never fails a
// mapping because of it: a failed registration is reported (once per
// pinner) and the segment stays as it is. The GPU filter stages frames in
// such a segment through pinned memory (one CPU copy each): a registration
// must never cost frames.
type bestEffortPinner struct {
	pinner pinned.Pinner
	once   sync.Once
	report func(error)
}

func (b *bestEffortPinner) Pin(mem []byte, access pinned.Access) (pinned.PinnedRegion, error) {
	r, err := b.pinner.Pin(mem, access)
	if err != nil {
		b.once.Do(func() { b.report(err) })
		return unpinnedRegion{}, nil
	}
	return r, nil
}

// unpinnedRegion stands for a segment whose registration failed.
type unpinnedRegion struct{}

func (unpinnedRegion) Unpin() error { return nil }

// bestEffortAllocator hands out the GPU's pinned, mapped host memory
// (cuMemHostAlloc) for in-process pools, and ordinary memory from fallback
// when that fails (reported once; such frames are staged), for the same
// reason as bestEffortPinner.
type bestEffortAllocator struct {
	gpu, fallback pinned.HostAllocator
	report        func(error)
	once          sync.Once
	mu            sync.Mutex
	fromFallback  map[*byte]bool // first byte of each fallback allocation
}

func (b *bestEffortAllocator) Allocate(size int) ([]byte, error) {
	mem, err := b.gpu.Allocate(size)
	if err == nil {
		return mem, nil
	}
	b.once.Do(func() { b.report(err) })
	mem, err = b.fallback.Allocate(size)
	if err != nil {
		return nil, err
	}
	if len(mem) > 0 {
		b.mu.Lock()
		if b.fromFallback == nil {
			b.fromFallback = make(map[*byte]bool)
		}
		b.fromFallback[&mem[0]] = true
		b.mu.Unlock()
	}
	return mem, nil
}

func (b *bestEffortAllocator) Free(mem []byte) error {
	if len(mem) == 0 {
		return nil
	}
	b.mu.Lock()
	fallback := b.fromFallback[&mem[0]]
	delete(b.fromFallback, &mem[0])
	b.mu.Unlock()
	if fallback {
		return b.fallback.Free(mem)
	}
	return b.gpu.Free(mem)
}

// gpuModes returns cfg's --gpu, --gpu-input and --gpu-sync, defaults
// applied, or an error naming the flag.
func gpuModes(cfg NodeConfig) (mode, input string, sync gpu.SyncMode, err error) {
	mode, input = orDefault(cfg.GPU, GPUAuto), orDefault(cfg.GPUInput, GPUInputMapped)
	switch {
	case mode != GPUAuto && mode != GPUOn && mode != GPUOff:
		return "", "", 0, fmt.Errorf("--gpu %q: want %q, %q or %q", cfg.GPU, GPUAuto, GPUOn, GPUOff)
	case input != GPUInputMapped && input != GPUInputCopy:
		return "", "", 0, fmt.Errorf("--gpu-input %q: want %q or %q", cfg.GPUInput, GPUInputMapped, GPUInputCopy)
	}
	if sync, err = gpu.ParseSyncMode(orDefault(cfg.GPUSync, gpu.SyncAuto.String())); err != nil {
		return "", "", 0, fmt.Errorf("--gpu-sync: %w", err)
	}
	return mode, input, sync, nil
}

// startGPU applies NodeConfig.GPU and GPUInput. It returns the GPU path, or
// nil and why the CPU path is used; device names the GPU when one was
// found ("none" otherwise). An error only for --gpu on (or a bad value).
func startGPU(cfg NodeConfig, bevCfg voxel.BEVConfig, log *zap.Logger) (g *gpuVoxel, device, why string, err error) {
	mode, input, sync, err := gpuModes(cfg)
	if err != nil {
		return nil, "none", "", err
	}
	if mode == GPUOff {
		return nil, "none", "--gpu off", nil
	}
	filter, err := filterConfig(cfg, bevCfg)
	if err != nil {
		return nil, "none", "", err
	}
	g, err = openGPUVoxel(gpuVoxelConfig{
		Filter: filter, BEV: bevCfg,
		MaxPoints: cfg.MaxPoints, CopyInput: input == GPUInputCopy, CacheDir: cfg.CubinCache, Sync: sync, Log: log,
	})
	if err != nil {
		device = "none"
		var se *gpuStartError
		if errors.As(err, &se) && se.Device != "" {
			device = se.Device
		}
		if mode == GPUOn {
			return nil, device, "", fmt.Errorf("--gpu on: %w", err)
		}
		return nil, device, err.Error(), nil
	}
	return g, g.name, "", nil
}
