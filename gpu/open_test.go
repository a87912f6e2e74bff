package gpu

import (
	"errors"
	"os"
	"strings"
	"testing"
)

func TestOpenLibraryAbsent(t *testing.T) {
	const soname = "libcuda-zerohop-test-absent.so.1"
	drv, err := OpenLibrary(soname)
	if drv != nil || !errors.Is(err, ErrNoDriver) {
		t.Fatalf("OpenLibrary(%q) = %v, %v; want nil, ErrNoDriver", soname, drv, err)
	}
	if !strings.Contains(err.Error(), soname) {
		t.Errorf("error %q does not name the library %q", err, soname)
	}
	if errors.Is(err, ErrNoDevice) {
		t.Errorf("absent library reported as ErrNoDevice: %v", err)
	}
}

func TestOpenLibraryWithoutCUDASymbols(t *testing.T) {
	// libc loads but exports no cu* function: not a driver.
	const soname = "libc.so.6"
	_, err := OpenLibrary(soname)
	if !errors.Is(err, ErrNoDriver) {
		t.Fatalf("OpenLibrary(%q) = %v, want ErrNoDriver", soname, err)
	}
	if !strings.Contains(err.Error(), "lacks symbol cu") {
		t.Errorf("error %q does not name the missing symbol", err)
	}
}

// TestOpen checks the real Open against this machine. Without a driver
// (CI, the dev VM) it must report ErrNoDriver naming libcuda.so.1; on a GPU
// machine it must find at least one device. It proves nothing about the GPU
// path beyond that.
func TestOpen(t *testing.T) {
	drv, err := Open()
	switch {
	case err == nil:
		n, err := drv.DeviceCount()
		if err != nil || n < 1 {
			t.Fatalf("Open succeeded but DeviceCount = %d, %v", n, err)
		}
		t.Logf("driver CUDA %s, %d device(s)", drv.Version(), n)
	case errors.Is(err, ErrNoDriver):
		if !strings.Contains(err.Error(), DriverSoname) {
			t.Errorf("error %q does not name %s", err, DriverSoname)
		}
		if libcudaInstalled() {
			t.Errorf("Open reports no driver although libcuda.so.1 is installed: %v", err)
		}
	case errors.Is(err, ErrNoDevice):
		t.Logf("driver present, no device: %v", err)
	default:
		t.Fatalf("Open failed with an error that is neither ErrNoDriver nor ErrNoDevice: %v", err)
	}
}

// libcudaInstalled looks for the driver where Debian/Ubuntu and the NVIDIA
// installer put it.
func libcudaInstalled() bool {
	for _, dir := range []string{"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib"} {
		if _, err := os.Stat(dir + "/" + DriverSoname); err == nil {
			return true
		}
	}
	return false
}
