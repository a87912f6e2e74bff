package gpu

// cudaAPI is the slice of the driver API this package uses, in Go types.
// The real implementation (dlDriver, unsafe.go) calls libcuda.so.1; tests
// replace it with fakeDriver to check this package's plumbing only — a fake
// proves nothing about CUDA itself.
//
// Host memory arguments are []byte that must not live on the Go heap when
// the driver keeps the address past the call (registration, async copies);
// the callers in this package guarantee that. The synchronous copies take
// any host memory. Results are raw CUresult codes;
// check() turns them into *Error.
type cudaAPI interface {
	errorName(r Result) (string, bool)
	errorString(r Result) (string, bool)

	driverGetVersion() (int32, Result)
	deviceGetCount() (int32, Result)
	deviceGet(ordinal int32) (int32, Result)
	deviceGetName(dev int32) (string, Result)
	deviceGetAttribute(a DeviceAttribute, dev int32) (int32, Result)

	primaryCtxSetFlags(dev int32, flags uint32) Result
	primaryCtxRetain(dev int32) (uintptr, Result)
	primaryCtxRelease(dev int32) Result
	ctxSetCurrent(ctx uintptr) Result

	memHostAlloc(size int, flags uint32) ([]byte, Result)
	memFreeHost(mem []byte) Result
	memHostRegister(mem []byte, flags uint32) Result
	memHostUnregister(mem []byte) Result
	memHostGetDevicePointer(mem []byte) (DevicePtr, Result)

	memAlloc(size uint64) (DevicePtr, Result)
	memFree(p DevicePtr) Result
	memsetD8(p DevicePtr, value uint8, n uint64) Result
	memcpyHtoDAsync(dst DevicePtr, src []byte, stream uintptr) Result
	memcpyDtoHAsync(dst []byte, src DevicePtr, stream uintptr) Result
	// memcpyHtoD and memcpyDtoH are synchronous: host memory of any kind
	// (Go heap included) is used only during the call.
	memcpyHtoD(dst DevicePtr, src []byte) Result
	memcpyDtoH(dst []byte, src DevicePtr) Result

	streamCreate(flags uint32) (uintptr, Result)
	streamDestroy(s uintptr) Result
	streamSynchronize(s uintptr) Result

	eventCreate(flags uint32) (uintptr, Result)
	eventRecord(e, stream uintptr) Result
	eventSynchronize(e uintptr) Result
	eventElapsedTime(start, end uintptr) (float32, Result)
	eventDestroy(e uintptr) Result

	moduleLoadData(image []byte) (mod uintptr, jitLog string, r Result) // cuModuleLoadDataEx
	moduleGetFunction(mod uintptr, name string) (uintptr, Result)
	moduleUnload(mod uintptr) Result

	launchKernel(f uintptr, grid, block Dim3, sharedMem uint32, stream uintptr, params *KernelArgs) Result
}

// check turns a CUresult into nil or an *Error naming the call.
func check(api cudaAPI, op string, r Result) error {
	if r == 0 {
		return nil
	}
	e := &Error{Op: op, Code: r}
	if api != nil {
		if s, ok := api.errorString(r); ok {
			e.Description = s
		}
	}
	return e
}

// DevicePtr is a CUdeviceptr: an address in the device's (unified) address
// space. It is a number, never dereferenced on the host.
type DevicePtr uint64

// Dim3 is a grid or block size.
type Dim3 struct{ X, Y, Z uint32 }
