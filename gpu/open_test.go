package gpu

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
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
// machine it must find at least one device. With ZEROHOP_REQUIRE_GPU=1 (make
// gpu-check's device info step) no driver or no device is a failure: a GPU
// the process cannot see must not pass as "no GPU here". It proves nothing
// about the GPU path beyond that.
func TestOpen(t *testing.T) {
	require, err := requireGPU()
	if err != nil {
		t.Fatal(err)
	}
	drv, openErr := Open()
	msg, err := checkOpen(drv, openErr, require, libcudaInstalled())
	if err != nil {
		t.Fatal(err)
	}
	t.Log(msg)
}

// requireGPU reads $ZEROHOP_REQUIRE_GPU: "1" requires a driver and a device,
// unset (or "" or "0") does not; anything else is a mistake, not a "no".
func requireGPU() (bool, error) {
	switch v := os.Getenv("ZEROHOP_REQUIRE_GPU"); v {
	case "", "0":
		return false, nil
	case "1":
		return true, nil
	default:
		return false, fmt.Errorf("ZEROHOP_REQUIRE_GPU=%q: want 1 (a GPU is required) or unset", v)
	}
}

// checkOpen judges Open's result (drv, openErr) for TestOpen: a line to log,
// or why the test fails. libcudaPresent: the driver library is installed.
func checkOpen(drv *Driver, openErr error, require, libcudaPresent bool) (string, error) {
	switch {
	case openErr == nil:
		n, err := drv.DeviceCount()
		if err != nil || n < 1 {
			return "", fmt.Errorf("Open succeeded but DeviceCount = %d, %v", n, err)
		}
		return fmt.Sprintf("driver CUDA %s, %d device(s)", drv.Version(), n), nil
	case errors.Is(openErr, ErrNoDriver):
		var errs []error
		if !strings.Contains(openErr.Error(), DriverSoname) {
			errs = append(errs, fmt.Errorf("error %q does not name %s", openErr, DriverSoname))
		}
		if libcudaPresent {
			errs = append(errs, fmt.Errorf("Open reports no driver although libcuda.so.1 is installed: %v", openErr))
		}
		if require {
			errs = append(errs, fmt.Errorf("ZEROHOP_REQUIRE_GPU=1 but there is no CUDA driver: %s did not load (%v); is the NVIDIA driver installed, and its library on the loader path (or mounted into the container)?", DriverSoname, openErr))
		}
		return "no CUDA driver: " + openErr.Error(), errors.Join(errs...)
	case errors.Is(openErr, ErrNoDevice):
		if require {
			return "", fmt.Errorf("ZEROHOP_REQUIRE_GPU=1 but the CUDA driver sees no device: %v (CUDA_VISIBLE_DEVICES %s; is the GPU given to this container or VM, and does nvidia-smi list it?)", openErr, cudaVisibleDevices())
		}
		return "driver present, no device: " + openErr.Error(), nil
	default:
		return "", fmt.Errorf("Open failed with an error that is neither ErrNoDriver nor ErrNoDevice: %v", openErr)
	}
}

func cudaVisibleDevices() string {
	if v, ok := os.LookupEnv("CUDA_VISIBLE_DEVICES"); ok {
		return fmt.Sprintf("= %q", v)
	}
	return "unset"
}

// TestOpenRequireGPU runs TestOpen's judgement on the errors Open gives
// without a driver and without a device (made here without a GPU: an absent
// library, and the Go fakeDriver reporting 0 devices): with
// ZEROHOP_REQUIRE_GPU=1 each must fail and say what was missing; without it
// each passes, as on CI.
func TestOpenRequireGPU(t *testing.T) {
	// A path that names the soname but holds no library: the real loader's error.
	_, noDriver := OpenLibrary(filepath.Join(t.TempDir(), DriverSoname))
	fake := newFakeDriver(fullCaps)
	fake.devices = 0
	_, noDevice := newDriver(fake, DriverSoname)
	// What OpenLibrary returns when cuInit finds no GPU (CUDA_VISIBLE_DEVICES="", a container without the device).
	cuInitNoDevice := fmt.Errorf("gpu: initialise driver %q: %w", DriverSoname, check(fake, "cuInit", 100))
	for _, err := range []error{noDevice, cuInitNoDevice} {
		if !errors.Is(err, ErrNoDevice) {
			t.Fatalf("setup: %v is not ErrNoDevice", err)
		}
	}
	if !errors.Is(noDriver, ErrNoDriver) {
		t.Fatalf("setup: %v is not ErrNoDriver", noDriver)
	}
	for _, tc := range []struct {
		name    string
		openErr error
		missing string // what the failure must say
	}{
		{"no driver", noDriver, "no CUDA driver"},
		{"no device", noDevice, "sees no device"},
		{"cuInit: no device", cuInitNoDevice, "sees no device"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if msg, err := checkOpen(nil, tc.openErr, false, false); err != nil {
				t.Errorf("without ZEROHOP_REQUIRE_GPU: %v, want a pass (CI has no GPU)", err)
			} else {
				t.Logf("without ZEROHOP_REQUIRE_GPU: pass, %s", msg)
			}
			_, err := checkOpen(nil, tc.openErr, true, false)
			if err == nil {
				t.Fatal("with ZEROHOP_REQUIRE_GPU=1: pass, want a failure")
			}
			for _, want := range []string{"ZEROHOP_REQUIRE_GPU=1", tc.missing, tc.openErr.Error()} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("failure does not say %q: %v", want, err)
				}
			}
			t.Logf("with ZEROHOP_REQUIRE_GPU=1: %v", err)
		})
	}
	for v, want := range map[string]bool{"": false, "0": false, "1": true} {
		t.Setenv("ZEROHOP_REQUIRE_GPU", v)
		if got, err := requireGPU(); got != want || err != nil {
			t.Errorf("ZEROHOP_REQUIRE_GPU=%q: %t, %v; want %t", v, got, err, want)
		}
	}
	t.Setenv("ZEROHOP_REQUIRE_GPU", "yes")
	if _, err := requireGPU(); err == nil {
		t.Error(`ZEROHOP_REQUIRE_GPU="yes" accepted`)
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
