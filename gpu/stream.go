package gpu

import (
	"fmt"
	"time"
)

// Stream is a CUDA stream (non-blocking with respect to the legacy default
// stream). A nil *Stream means the default stream.
type Stream struct {
	c *Context
	h uintptr
}

func (s *Stream) handle() uintptr {
	if s == nil {
		return 0
	}
	return s.h
}

// NewStream creates a non-blocking stream.
func (c *Context) NewStream() (*Stream, error) {
	s := &Stream{c: c}
	err := c.call("cuStreamCreate", func() (r Result) { s.h, r = c.api.streamCreate(streamNonBlocking); return })
	if err != nil {
		return nil, fmt.Errorf("gpu: create stream: %w", err)
	}
	return s, nil
}

// Synchronize waits until all work queued on s is done.
func (s *Stream) Synchronize() error {
	return s.c.call("cuStreamSynchronize", func() Result { return s.c.api.streamSynchronize(s.h) })
}

// Destroy releases the stream; queued work still completes.
func (s *Stream) Destroy() error {
	return s.c.call("cuStreamDestroy_v2", func() Result { return s.c.api.streamDestroy(s.h) })
}

// Event is a CUDA event with timing enabled.
type Event struct {
	c *Context
	h uintptr
}

// NewEvent creates a timing event.
func (c *Context) NewEvent() (*Event, error) {
	e := &Event{c: c}
	err := c.call("cuEventCreate", func() (r Result) { e.h, r = c.api.eventCreate(eventDefault); return })
	if err != nil {
		return nil, fmt.Errorf("gpu: create event: %w", err)
	}
	return e, nil
}

// Record enqueues the event on s (nil: default stream).
func (e *Event) Record(s *Stream) error {
	return e.c.call("cuEventRecord", func() Result { return e.c.api.eventRecord(e.h, s.handle()) })
}

// Synchronize waits until the event has completed.
func (e *Event) Synchronize() error {
	return e.c.call("cuEventSynchronize", func() Result { return e.c.api.eventSynchronize(e.h) })
}

// Destroy releases the event.
func (e *Event) Destroy() error {
	return e.c.call("cuEventDestroy_v2", func() Result { return e.c.api.eventDestroy(e.h) })
}

// Elapsed is the device time between two completed events (resolution about
// 0.5 µs per the CUDA documentation).
func Elapsed(start, end *Event) (time.Duration, error) {
	var ms float32
	err := start.c.call("cuEventElapsedTime", func() (r Result) {
		ms, r = start.c.api.eventElapsedTime(start.h, end.h)
		return
	})
	if err != nil {
		return 0, fmt.Errorf("gpu: elapsed time: %w", err)
	}
	return time.Duration(float64(ms) * float64(time.Millisecond)), nil
}

// Module is loaded device code (cubin or PTX).
type Module struct {
	c *Context
	h uintptr
}

// Function is a kernel in a Module.
type Function struct {
	name string
	h    uintptr
}

// Name is the kernel's (extern "C") name.
func (f Function) Name() string { return f.name }

// LoadModule loads a cubin, fatbin or PTX image. PTX must be NUL-terminated
// for the driver; LoadModule adds the NUL when missing (harmless for ELF).
func (c *Context) LoadModule(image []byte) (*Module, error) {
	if len(image) == 0 {
		return nil, fmt.Errorf("gpu: load module: empty image")
	}
	if image[len(image)-1] != 0 {
		image = append(image[:len(image):len(image)], 0)
	}
	m := &Module{c: c}
	var jitLog string
	err := c.call("cuModuleLoadDataEx", func() (r Result) { m.h, jitLog, r = c.api.moduleLoadData(image); return })
	if err != nil {
		if jitLog != "" {
			return nil, fmt.Errorf("gpu: load module of %d bytes: %w; JIT log: %s", len(image), err, jitLog)
		}
		return nil, fmt.Errorf("gpu: load module of %d bytes: %w", len(image), err)
	}
	return m, nil
}

// Function looks up a kernel by its extern "C" name.
func (m *Module) Function(name string) (Function, error) {
	f := Function{name: name}
	err := m.c.call("cuModuleGetFunction", func() (r Result) { f.h, r = m.c.api.moduleGetFunction(m.h, name); return })
	if err != nil {
		return Function{}, fmt.Errorf("gpu: kernel %q: %w", name, err)
	}
	return f, nil
}

// Unload releases the module; its Functions become invalid.
func (m *Module) Unload() error {
	return m.c.call("cuModuleUnload", func() Result { return m.c.api.moduleUnload(m.h) })
}

// Launch enqueues f on s (nil: default stream) with the arguments packed in
// args (nil: none). args may be Reset and refilled as soon as Launch
// returns: the driver copies the parameter values at launch.
func (c *Context) Launch(f Function, grid, block Dim3, sharedMem uint32, s *Stream, args *KernelArgs) error {
	if args != nil && args.err != nil {
		return fmt.Errorf("gpu: launch %s: %w", f.name, args.err)
	}
	err := c.call("cuLaunchKernel", func() Result {
		return c.api.launchKernel(f.h, grid, block, sharedMem, s.handle(), args)
	})
	if err != nil {
		return fmt.Errorf("gpu: launch %s grid %v block %v: %w", f.name, grid, block, err)
	}
	return nil
}
