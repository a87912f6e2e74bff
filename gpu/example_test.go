package gpu_test

import (
	"errors"
	"fmt"
	"strings"

	"github.com/zerohop/zerohop/gpu"
)

// sumPath is a stand-in for a stage with a GPU and a CPU implementation
// (e.g. the voxel filter): it opens the driver and, when that fails for any
// reason, logs one line and runs the CPU code.
func sumPath(open func() (*gpu.Driver, error), xs []float32, log func(msg string, err error)) (float32, string) {
	if _, err := open(); err != nil {
		switch {
		case errors.Is(err, gpu.ErrNoDriver):
			log("no CUDA driver, using the CPU path", err)
		case errors.Is(err, gpu.ErrNoDevice):
			log("no CUDA device, using the CPU path", err)
		default:
			log("CUDA unusable, using the CPU path", err)
		}
		var s float32
		for _, x := range xs {
			s += x
		}
		return s, "cpu"
	}
	// The GPU path would go here (kernels are not part of this package yet).
	return 0, "gpu"
}

// A caller uses the GPU when the driver opens and the CPU otherwise. Here
// the library name is one that exists nowhere, so the example takes the CPU
// path on every machine.
func Example_cpuFallback() {
	open := func() (*gpu.Driver, error) { return gpu.OpenLibrary("libcuda-example-absent.so.1") }
	sum, path := sumPath(open, []float32{1, 2, 3.5}, func(msg string, err error) {
		// A real caller: logger.Info(msg, zap.Error(err)). The error text
		// ends with the C library's dlerror message, so it is not printed.
		fmt.Println(msg)
		fmt.Println("names the library:", strings.Contains(err.Error(), "libcuda-example-absent.so.1"))
	})
	fmt.Println(path, sum)
	// Output:
	// no CUDA driver, using the CPU path
	// names the library: true
	// cpu 6.5
}
