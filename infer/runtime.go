package infer

import (
	"errors"
	"fmt"
	"os"
	"sync"

	ort "github.com/yalue/onnxruntime_go"
)

// Runtime owns ONNX Runtime's process-global environment (the loaded
// library and its OrtEnv, which onnxruntime_go keeps in package variables).
// Open one per process, before any Session, and Close it after the last
// Session is closed.
//
// OpenRuntime and Close must not race with each other (call them from
// start-up and shut-down code); the other methods are safe for concurrent use.
type Runtime struct {
	library string
	version string

	mu       sync.Mutex
	sessions int  // open sessions; Close refuses while > 0
	closed   bool // set once by Close
}

// OpenRuntime loads the ONNX Runtime library at libraryPath (see FindLibrary)
// and initialises its environment. It fails with ErrRuntimeInUse if ONNX
// Runtime is already initialised in this process, ErrLibraryNotFound if the
// file does not exist and ErrLibraryLoad if it is not a loadable ONNX Runtime.
func OpenRuntime(libraryPath string) (*Runtime, error) {
	if libraryPath == "" {
		return nil, fmt.Errorf("infer: open runtime: empty library path (use FindLibrary): %w", ErrLibraryNotFound)
	}
	if st, err := os.Stat(libraryPath); err != nil || !st.Mode().IsRegular() {
		return nil, &LibraryNotFoundError{Tried: []LibraryCandidate{{Path: libraryPath, Source: "OpenRuntime argument"}}}
	}
	if ort.IsInitialized() {
		return nil, fmt.Errorf("infer: open runtime with %q: %w", libraryPath, ErrRuntimeInUse)
	}
	ort.SetSharedLibraryPath(libraryPath)
	if err := ort.InitializeEnvironment(); err != nil {
		return nil, fmt.Errorf("infer: load %q: %w: %v", libraryPath, ErrLibraryLoad, err)
	}
	return &Runtime{library: libraryPath, version: ort.GetVersion()}, nil
}

// Library is the path of the loaded shared library.
func (r *Runtime) Library() string { return r.library }

// Version is the loaded ONNX Runtime's version string, e.g. "1.30.0".
func (r *Runtime) Version() string { return r.version }

// Close destroys the ONNX Runtime environment and unloads the library. It
// fails with ErrSessionsOpen while sessions are open; closing twice is a
// no-op.
func (r *Runtime) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	if r.sessions > 0 {
		return fmt.Errorf("infer: close runtime: %d %w", r.sessions, ErrSessionsOpen)
	}
	r.closed = true
	if err := ort.DestroyEnvironment(); err != nil {
		return fmt.Errorf("infer: close runtime %q: %w", r.library, err)
	}
	return nil
}

// acquire registers a session being created; release undoes it.
func (r *Runtime) acquire() error {
	if r == nil {
		return errors.New("infer: nil Runtime")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return fmt.Errorf("infer: runtime %q: %w", r.library, ErrClosed)
	}
	r.sessions++
	return nil
}

func (r *Runtime) release() {
	r.mu.Lock()
	r.sessions--
	r.mu.Unlock()
}
