package gpu

import (
	"fmt"
	"time"
)

// Per-frame driver calls of VoxelFilter.runOnThread. The public methods
// (Launch, CopyToDevice, Record, ...) each hop through Context.Do with a
// closure, which costs a heap allocation per call even on the context
// thread; these call the driver directly and allocate only on failure.
//
// Invariant: called only from inside Context.Do (on the context's locked
// thread, with its context current); runOnThread is only ever run by Do.

func (f *VoxelFilter) launchKernel(fn Function, grid, block Dim3) error {
	if err := check(f.c.api, "cuLaunchKernel", f.c.api.launchKernel(fn.h, grid, block, 0, f.stream.h, f.args)); err != nil {
		return fmt.Errorf("launch %s grid %v block %v: %w", fn.name, grid, block, err)
	}
	return nil
}

// copyIn enqueues src → dst; src must be pinned by this context (the caller
// has looked it up).
func (f *VoxelFilter) copyIn(dst DevicePtr, src []byte) error {
	return check(f.c.api, "cuMemcpyHtoDAsync_v2", f.c.api.memcpyHtoDAsync(dst, src, f.stream.h))
}

// copyOut enqueues src → dst; dst is the filter's own pinned block.
func (f *VoxelFilter) copyOut(dst []byte, src DevicePtr) error {
	return check(f.c.api, "cuMemcpyDtoHAsync_v2", f.c.api.memcpyDtoHAsync(dst, src, f.stream.h))
}

func (f *VoxelFilter) record(e *Event) error {
	return check(f.c.api, "cuEventRecord", f.c.api.eventRecord(e.h, f.stream.h))
}

func (f *VoxelFilter) sync() error {
	return check(f.c.api, "cuStreamSynchronize", f.c.api.streamSynchronize(f.stream.h))
}

func (f *VoxelFilter) elapsed(start, end *Event) (time.Duration, error) {
	ms, r := f.c.api.eventElapsedTime(start.h, end.h)
	if err := check(f.c.api, "cuEventElapsedTime", r); err != nil {
		return 0, err
	}
	return time.Duration(float64(ms) * float64(time.Millisecond)), nil
}
