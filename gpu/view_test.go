package gpu

// The agent's cross-process input path, within one test process: the
// camera owns a shared (memfd) pool and never touches the GPU; the agent
// maps it READ-ONLY from a read-only fd, as handles/transport's subscriber
// does, and registers that PROT_READ MAP_SHARED mapping through the view's
// Pinner hook; the GPU voxel filter then reads the slot in place.
//
// The helpers here are shared by TestGPUVoxelOnAgentViewOfSharedPool
// (view_gpu_test.go, build tag gpu: the GPU verification) and the no-GPU
// tests below (plumbing only; they prove nothing about CUDA).

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/zerohop/zerohop/pinned"
	"github.com/zerohop/zerohop/voxel"
)

// recordingPinner is what the agent's subscriber is given, minus the
// agent's best-effort wrapper (agent/gpu.go bestEffortPinner turns a failed
// registration into one log line): it passes Context.Pin's region or error
// through unchanged and keeps what it saw.
type recordingPinner struct {
	c      *Context
	calls  int
	access pinned.Access
	region *Region
}

func (p *recordingPinner) Pin(mem []byte, access pinned.Access) (pinned.PinnedRegion, error) {
	p.calls++
	p.access = access
	r, err := p.c.Pin(mem, access)
	if err != nil {
		return nil, err
	}
	p.region = r.(*Region)
	return r, nil
}

// agentView is a camera's shared pool and the agent's registered read-only
// view of it.
type agentView struct {
	c      *Context
	pool   *pinned.Pool // the camera's: read-write, no Pinner
	view   *pinned.View // the agent's: read-only, registered through c
	region *Region      // the view's registration
}

// agentViewFallback ends every registration problem: what the agent does
// when its subscriber's registration fails.
const agentViewFallback = "the agent (agent/gpu.go bestEffortPinner) then logs one warning " +
	"(\"GPU registration of a camera pool failed\") and copies every frame of the pool into " +
	"pinned staging memory (VoxelOptions.StageUnpinned): the zero-copy read of the camera's " +
	"pool never runs, and a GPU run still passes"

// readOnlyViewProblem judges how the agent's read-only view of a camera
// pool was registered on a device with caps: pinErr is the error opening
// the view returned, r the region Pin returned (nil if none). It returns
// "" when the view is registered as the zero-copy path needs, else what is
// wrong and what the agent does then.
//
// pin.go has exactly one documented fallback for a device whose
// CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED (113) is 0: where
// CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES (100) is
// 1 (Grace, HMM), cuda.h lets a read-only mapping register without
// CU_MEMHOSTREGISTER_READ_ONLY, and Pin does so with a Note; the GPU still
// reads the pool in place, so that is accepted (and must carry the note).
// Where both are 0 (an x86 H200 has 100 = 0), cuda.h says the registration
// cannot work, Pin refuses it, and this is a failure, not a skip: the
// agent would stage every frame.
func readOnlyViewProblem(caps Capabilities, r *Region, pinErr error) string {
	attrs := fmt.Sprintf("%s: CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED (%d) = %d, CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES (%d) = %d",
		caps.Name, AttrReadOnlyHostRegisterSupported, b2i(caps.ReadOnlyHostRegister),
		AttrPageableMemoryAccessUsesHostPageTables, b2i(caps.PageableUsesHostPageTables))
	switch {
	case pinErr != nil && !caps.ReadOnlyHostRegister && !caps.PageableUsesHostPageTables:
		return fmt.Sprintf("%s: without READ_ONLY host registration a PROT_READ mapping cannot be registered (cuda.h), so opening the camera's pool read-only failed: %v; %s",
			attrs, pinErr, agentViewFallback)
	case pinErr != nil:
		return fmt.Sprintf("%s: opening the camera's pool read-only with the GPU as Pinner failed: %v; %s", attrs, pinErr, agentViewFallback)
	case r == nil:
		return fmt.Sprintf("%s: the view opened but its Pinner returned no region", attrs)
	case caps.ReadOnlyHostRegister:
		if !r.ReadOnly() || r.Note() != "" {
			return fmt.Sprintf("%s: the view is registered with READ_ONLY %t, note %q; want READ_ONLY and no note", attrs, r.ReadOnly(), r.Note())
		}
	case caps.PageableUsesHostPageTables: // pin.go's documented fallback
		if r.ReadOnly() || r.Note() == "" {
			return fmt.Sprintf("%s: the view is registered with READ_ONLY %t, note %q; want pin.go's fallback: no READ_ONLY, and a note saying so", attrs, r.ReadOnly(), r.Note())
		}
	default:
		return fmt.Sprintf("%s: the read-only view registered although cuda.h (and pin.go) say it cannot: READ_ONLY %t, note %q", attrs, r.ReadOnly(), r.Note())
	}
	return ""
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// openAgentView creates a shared pool of 4 slots of slotBytes as the camera
// does (no Pinner: the camera does not use the GPU), and opens it as the
// agent's subscriber does (handles/transport/subscriber.go: OpenView of the
// read-only fd the server got from Pool.ShareFd, the geometry from the
// welcome, the GPU context as Pinner). Both close in t's cleanup. The error
// is readOnlyViewProblem's verdict, or a broken precondition.
func openAgentView(t *testing.T, c *Context, slotBytes int) (*agentView, error) {
	t.Helper()
	pool, err := pinned.New(pinned.Geometry{SlotCount: 4, SlotSize: uint64(slotBytes)},
		pinned.Options{Name: "points", ID: 1, Shared: true})
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { pool.Close() })
	fd, err := pool.ShareFd()
	if err != nil {
		return nil, err
	}
	if fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0); err != nil || fl&unix.O_ACCMODE != unix.O_RDONLY {
		unix.Close(fd)
		return nil, fmt.Errorf("the camera's shared fd has flags %#x (%v), want O_RDONLY", fl, err)
	}
	g := pool.Geometry() // what the welcome carries: pool id, slot count, slot capacity
	rp := &recordingPinner{c: c}
	view, err := pinned.OpenView(fd, pool.ID(), pinned.Geometry{SlotCount: g.SlotCount, SlotSize: g.SlotSize},
		pinned.ViewOptions{Pinner: rp})
	if err != nil {
		return nil, errors.New(readOnlyViewProblem(c.Capabilities(), nil, err))
	}
	t.Cleanup(func() {
		if err := view.Close(); err != nil {
			t.Errorf("close the view (unregisters it): %v", err)
		}
	})
	if rp.calls != 1 || rp.access != pinned.ReadOnly {
		return nil, fmt.Errorf("the view called its Pinner %d times, last with %s access; want once, read-only", rp.calls, rp.access)
	}
	if p := readOnlyViewProblem(c.Capabilities(), rp.region, nil); p != "" {
		return nil, errors.New(p)
	}
	if rp.region.Len() != len(view.Memory()) {
		return nil, fmt.Errorf("registered %d bytes of the %d-byte view", rp.region.Len(), len(view.Memory()))
	}
	// The mapping is what the agent has: PROT_READ from a read-only fd.
	if err := unix.Mprotect(view.Memory()[:pinned.PageSize], unix.PROT_READ|unix.PROT_WRITE); err == nil {
		return nil, errors.New("the agent's view of the pool could be made writable")
	}
	return &agentView{c: c, pool: pool, view: view, region: rp.region}, nil
}

// writeFrame writes src into a slot as the camera does, after the agent
// registered its view (as at run time: the agent connects, then frames
// come), and returns the slot as the agent's view shows it. It fails t if
// the slot has no device address.
func (v *agentView) writeFrame(t *testing.T, src []byte) voxel.Cloud {
	t.Helper()
	w, err := v.pool.Acquire()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.pool.Abort(w) })
	copy(w.Bytes(), src)
	slot := v.view.Slot(w.Index())[:len(src)]
	fromRegion, err := v.region.DevicePointer(uint64(w.Index()) * v.pool.Geometry().Stride())
	if err != nil {
		t.Fatal(err)
	}
	mapped, err := v.c.HostDevicePointer(slot)
	if err != nil || mapped == 0 || mapped != fromRegion {
		t.Fatalf("slot %d of the view: device pointer %#x, %v; the region says %#x", w.Index(), uint64(mapped), err, uint64(fromRegion))
	}
	return voxel.XYZI(slot, len(src)/16)
}

// filterAgentView runs the GPU voxel filter and BEV on src as the agent
// reads it (a slot of the registered read-only view), with mapped and then
// copied input, and wants the CPU filter's voxels and raster of src bit for
// bit. Staging of unpinned input is off, so an unregistered slot is an
// error (ErrNotPinned), never a silent copy.
func filterAgentView(t *testing.T, c *Context, nv *NVRTC, src []byte) {
	t.Helper()
	n := len(src) / 16
	v, err := openAgentView(t, c, len(src))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("agent's view: %d bytes registered, READ_ONLY %t, note %q", v.region.Len(), v.region.ReadOnly(), v.region.Note())
	cloud := v.writeFrame(t, src)

	cfg := voxel.Config{Leaf: [3]float32{0.2, 0.2, 0.2}}
	// The CPU reads the camera's bytes (src), not the view: the GPU must
	// see what the camera wrote.
	want, wantBEV := cpuReferenceBEV(t, cfg, voxel.BEVConfig{}, voxel.XYZI(src, n))
	vf, bev := newFilterAndBEV(t, c, nv, cfg, VoxelOptions{MaxPoints: n, StageUnpinned: false, CacheDir: t.TempDir()})
	got := voxel.NewPoints(n)
	for _, copyInput := range []bool{false, true} {
		mode := map[bool]string{false: "mapped", true: "copied"}[copyInput] + " input from the agent's view"
		vf.SetCopyInput(copyInput)
		clear(bev)
		if err := vf.Run(cloud, got, bev); err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		if vf.Timing().Staged {
			t.Fatalf("%s: the frame was staged, not read from the registered view", mode)
		}
		samePoints(t, mode, got.P, want.P)
		sameBEV(t, mode, bev, wantBEV)
	}
	t.Logf("%d points → %d voxels from the agent's read-only view, equal to the CPU with mapped and copied input", n, len(want.P))
}

// TestFakeCUDAAgentViewOfSharedPool is TestGPUVoxelOnAgentViewOfSharedPool
// on the FAKE libcuda (real binding, kernels on the host emulation), on a
// small cloud. It proves the plumbing (the view's registration reaches
// cuMemHostRegister through the Pinner hook, the filter reads the slot's
// device address) and nothing about CUDA or a GPU: the fake does not know
// that the memory is mapped read-only, so it would accept a registration
// without READ_ONLY that a real x86 driver refuses.
func TestFakeCUDAAgentViewOfSharedPool(t *testing.T) {
	f := openFakeCUDA(t)
	filterAgentView(t, f.c, f.nv, ring(8, 600))
}

// TestAgentViewRegistrationVerdicts opens the agent's view through the Go
// fakeDriver (plumbing only) on devices with and without READ_ONLY host
// registration, and checks openAgentView's verdicts: the check the GPU test
// relies on fires on a device whose attribute 113 is 0, naming it and what
// the agent then does.
func TestAgentViewRegistrationVerdicts(t *testing.T) {
	base := map[DeviceAttribute]int32{AttrComputeCapabilityMajor: 9, AttrCanMapHostMemory: 1, AttrHostRegisterSupported: 1}
	with := func(a DeviceAttribute) map[DeviceAttribute]int32 {
		m := map[DeviceAttribute]int32{a: 1}
		for k, v := range base {
			m[k] = v
		}
		return m
	}
	t.Run("READ_ONLY supported", func(t *testing.T) {
		c, fake := fakeContext(t, with(AttrReadOnlyHostRegisterSupported))
		v, err := openAgentView(t, c, 3*pinned.PageSize)
		if err != nil {
			t.Fatal(err)
		}
		if !v.region.ReadOnly() || v.region.Note() != "" || len(fake.registerFlags) != 1 || fake.registerFlags[0]&memHostRegisterReadOnly == 0 {
			t.Fatalf("READ_ONLY %t note %q flags %v", v.region.ReadOnly(), v.region.Note(), fake.registerFlags)
		}
	})
	t.Run("no READ_ONLY, host page tables: pin.go's fallback", func(t *testing.T) {
		c, _ := fakeContext(t, with(AttrPageableMemoryAccessUsesHostPageTables))
		v, err := openAgentView(t, c, 3*pinned.PageSize)
		if err != nil {
			t.Fatal(err)
		}
		if v.region.ReadOnly() || !strings.Contains(v.region.Note(), "READ_ONLY") {
			t.Fatalf("READ_ONLY %t note %q; want the fallback's note", v.region.ReadOnly(), v.region.Note())
		}
	})
	t.Run("no READ_ONLY, no host page tables (x86 without attribute 113)", func(t *testing.T) {
		c, _ := fakeContext(t, base)
		_, err := openAgentView(t, c, 3*pinned.PageSize)
		if err == nil {
			t.Fatal("openAgentView passed on a device without READ_ONLY host registration")
		}
		for _, want := range []string{"CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED (113) = 0", "PAGE_TABLES (100) = 0",
			"CUDA_ERROR_NOT_SUPPORTED", "bestEffortPinner", "staging"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error does not say %q: %v", want, err)
			}
		}
		t.Logf("on such a device the GPU test fails with: %v", err)
	})
	t.Run("driver refuses the registration", func(t *testing.T) {
		c, fake := fakeContext(t, with(AttrReadOnlyHostRegisterSupported))
		fake.registerFails = 801 // CUDA_ERROR_NOT_SUPPORTED
		_, err := openAgentView(t, c, 3*pinned.PageSize)
		if err == nil || !strings.Contains(err.Error(), "CUDA_ERROR_NOT_SUPPORTED") || !strings.Contains(err.Error(), "(113) = 1") || !strings.Contains(err.Error(), "staging") {
			t.Fatalf("openAgentView with cuMemHostRegister failing = %v", err)
		}
	})
	t.Run("region without READ_ONLY on a device that has it", func(t *testing.T) {
		caps := Capabilities{Name: "x", ReadOnlyHostRegister: true}
		if p := readOnlyViewProblem(caps, &Region{readOnly: false}, nil); !strings.Contains(p, "want READ_ONLY") {
			t.Fatalf("verdict %q", p)
		}
		if p := readOnlyViewProblem(caps, &Region{readOnly: true, note: "n"}, nil); !strings.Contains(p, "no note") {
			t.Fatalf("verdict %q", p)
		}
	})
}
