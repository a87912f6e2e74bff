// Package gpu is zerohop's only door to CUDA: the driver API (libcuda.so.1)
// and NVRTC, loaded at run time with purego, so that one binary builds
// without CUDA headers or libraries and runs with or without a GPU.
//
// No driver (ErrNoDriver) and no device (ErrNoDevice) are normal conditions:
// callers log the reason once and take their CPU path. Every CUDA failure is
// an *Error carrying the CUresult code and its name; nothing here exits the
// process.
//
// CUDA contexts are current per OS thread. A Context owns one goroutine
// locked to its thread with the device's primary context current; every call
// that needs the context runs there (Context.Do, or transparently through the
// methods of Context, Stream, Event and Module).
//
// All unsafe code and every foreign call lives in unsafe.go, with the
// invariants it relies on written next to it.
package gpu
