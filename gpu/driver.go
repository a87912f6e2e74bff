package gpu

import (
	"errors"
	"fmt"
)

// DriverSoname is the driver library's soname: the one the NVIDIA driver
// installs (libcuda.so without a version is only in the toolkit's -dev
// packages, and stubs/libcuda.so is a link-time stub).
const DriverSoname = "libcuda.so.1"

// Driver is the loaded and initialised CUDA driver. It is safe for
// concurrent use; the library stays loaded for the life of the process.
type Driver struct {
	api     cudaAPI
	soname  string
	version int32 // CUDA_VERSION style: 12040 = 12.4
}

// Open loads libcuda.so.1, resolves the symbols this package needs and
// calls cuInit. It fails with an error wrapping ErrNoDriver when the library
// or a symbol is absent, and with ErrNoDevice when the driver sees no GPU;
// callers log the error once and use their CPU path.
func Open() (*Driver, error) { return OpenLibrary(DriverSoname) }

// OpenLibrary is Open with another library name or path (tests, unusual
// installs).
func OpenLibrary(soname string) (*Driver, error) {
	d := &dlDriver{}
	h, err := loadLibrary(soname, d.symbols())
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoDriver, err)
	}
	d.handle = h
	if err := check(d, "cuInit", d.init()); err != nil {
		return nil, fmt.Errorf("gpu: initialise driver %q: %w", soname, err)
	}
	return newDriver(d, soname)
}

// newDriver finishes Open once cuInit succeeded; fakeDriver tests enter here.
func newDriver(api cudaAPI, soname string) (*Driver, error) {
	v, r := api.driverGetVersion()
	if err := check(api, "cuDriverGetVersion", r); err != nil {
		return nil, fmt.Errorf("gpu: %q: %w", soname, err)
	}
	drv := &Driver{api: api, soname: soname, version: v}
	n, err := drv.DeviceCount()
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, fmt.Errorf("gpu: driver %q (CUDA %s) reports no device: %w", soname, drv.Version(), ErrNoDevice)
	}
	return drv, nil
}

// Version is the CUDA version the driver supports, e.g. "12.4".
func (d *Driver) Version() string {
	return fmt.Sprintf("%d.%d", d.version/1000, d.version%1000/10)
}

// DeviceCount is the number of CUDA devices the driver sees.
func (d *Driver) DeviceCount() (int, error) {
	n, r := d.api.deviceGetCount()
	if err := check(d.api, "cuDeviceGetCount", r); err != nil {
		return 0, fmt.Errorf("gpu: count devices: %w", err)
	}
	return int(n), nil
}

// Device returns the device with the given ordinal (0 ≤ ordinal < DeviceCount).
func (d *Driver) Device(ordinal int) (Device, error) {
	dev, r := d.api.deviceGet(int32(ordinal))
	if err := check(d.api, "cuDeviceGet", r); err != nil {
		return Device{}, fmt.Errorf("gpu: device %d: %w", ordinal, err)
	}
	return Device{drv: d, ordinal: ordinal, handle: dev}, nil
}

// Device is one CUDA device (a CUdevice). The zero value is not usable.
type Device struct {
	drv     *Driver
	ordinal int
	handle  int32
}

// Ordinal is the device's index as passed to Driver.Device.
func (d Device) Ordinal() int { return d.ordinal }

// Name is the product name, e.g. "NVIDIA H200".
func (d Device) Name() (string, error) {
	s, r := d.drv.api.deviceGetName(d.handle)
	if err := check(d.drv.api, "cuDeviceGetName", r); err != nil {
		return "", fmt.Errorf("gpu: device %d name: %w", d.ordinal, err)
	}
	return s, nil
}

// Attribute reads one device attribute.
func (d Device) Attribute(a DeviceAttribute) (int, error) {
	v, r := d.drv.api.deviceGetAttribute(a, d.handle)
	if err := check(d.drv.api, "cuDeviceGetAttribute", r); err != nil {
		return 0, fmt.Errorf("gpu: device %d attribute %d: %w", d.ordinal, int32(a), err)
	}
	return int(v), nil
}

// Capabilities are the device properties zerohop's GPU path depends on.
type Capabilities struct {
	Name                       string
	ComputeMajor, ComputeMinor int
	Integrated                 bool // memory shared with the host (Jetson)
	CanMapHostMemory           bool // mapped pinned memory (zero-copy) works
	HostRegister               bool // cuMemHostRegister works on this platform
	ReadOnlyHostRegister       bool // CU_MEMHOSTREGISTER_READ_ONLY is honoured
	// PageableUsesHostPageTables: read-only host memory registers even
	// without CU_MEMHOSTREGISTER_READ_ONLY (cuda.h, cuMemHostRegister).
	PageableUsesHostPageTables bool
}

// Capabilities reads the attributes zerohop needs, in one call.
func (d Device) Capabilities() (Capabilities, error) {
	name, err := d.Name()
	if err != nil {
		return Capabilities{}, err
	}
	c := Capabilities{Name: name}
	for _, q := range []struct {
		a   DeviceAttribute
		int *int
		b   *bool
		// newer: numbered after CUDA 10 (113 in 11.1), so an older driver
		// answers CUDA_ERROR_INVALID_VALUE, which means "no".
		newer bool
	}{
		{a: AttrComputeCapabilityMajor, int: &c.ComputeMajor},
		{a: AttrComputeCapabilityMinor, int: &c.ComputeMinor},
		{a: AttrIntegrated, b: &c.Integrated},
		{a: AttrCanMapHostMemory, b: &c.CanMapHostMemory},
		{a: AttrHostRegisterSupported, b: &c.HostRegister, newer: true},
		{a: AttrPageableMemoryAccessUsesHostPageTables, b: &c.PageableUsesHostPageTables, newer: true},
		{a: AttrReadOnlyHostRegisterSupported, b: &c.ReadOnlyHostRegister, newer: true},
	} {
		v, err := d.Attribute(q.a)
		if err != nil && q.newer && errors.Is(err, Result(1)) { // CUDA_ERROR_INVALID_VALUE
			v, err = 0, nil
		}
		if err != nil {
			return Capabilities{}, err
		}
		if q.int != nil {
			*q.int = v
		} else {
			*q.b = v != 0
		}
	}
	return c, nil
}

// Arch is the NVRTC/ptxas architecture name, e.g. "sm_90".
func (c Capabilities) Arch() string { return fmt.Sprintf("sm_%d%d", c.ComputeMajor, c.ComputeMinor) }
