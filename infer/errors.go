package infer

import (
	"errors"
	"strings"
)

// Sentinels for what callers branch on; every returned error wraps one of
// them (test with errors.Is) and names the file, tensor or provider involved.
var (
	// ErrLibraryNotFound: no libonnxruntime where FindLibrary or
	// OpenRuntime looked. The error is a *LibraryNotFoundError.
	ErrLibraryNotFound = errors.New("ONNX Runtime library not found")
	// ErrLibraryLoad: the library exists but could not be loaded or is not
	// a usable ONNX Runtime.
	ErrLibraryLoad = errors.New("ONNX Runtime library could not be loaded")
	// ErrRuntimeInUse: ONNX Runtime is already initialised in this process
	// (another Runtime is open).
	ErrRuntimeInUse = errors.New("ONNX Runtime already initialised in this process")
	// ErrSessionsOpen: Runtime.Close was called while sessions are open.
	ErrSessionsOpen = errors.New("sessions still open")
	// ErrClosed: the Runtime, Session or Preprocessor was closed.
	ErrClosed = errors.New("closed")
	// ErrConfig: the model config is malformed or inconsistent.
	ErrConfig = errors.New("invalid model config")
	// ErrModel: the model file is missing, unreadable or not a valid ONNX model.
	ErrModel = errors.New("bad model")
	// ErrModelMismatch: the model's inputs or outputs do not match the config.
	ErrModelMismatch = errors.New("model does not match config")
	// ErrNoProvider: none of the preferred execution providers initialised.
	ErrNoProvider = errors.New("no execution provider initialised")
	// ErrNonFinite: the model produced NaN or Inf.
	ErrNonFinite = errors.New("model output not finite")
	// ErrImage: an image view or destination buffer is malformed.
	ErrImage = errors.New("invalid image")
)

// LibraryNotFoundError lists every place that was looked at, in order.
type LibraryNotFoundError struct {
	Tried []LibraryCandidate
}

func (e *LibraryNotFoundError) Error() string {
	var b strings.Builder
	b.WriteString("infer: ONNX Runtime library (libonnxruntime.so.1) not found; looked at:")
	for _, c := range e.Tried {
		b.WriteString("\n  ")
		b.WriteString(c.Path)
		b.WriteString("  (")
		b.WriteString(c.Source)
		b.WriteString(")")
	}
	b.WriteString("\nrun `make ort` (scripts/ort/fetch.sh), or point -ort-lib or $" + EnvLibrary + " at the library")
	return b.String()
}

// Is makes errors.Is(err, ErrLibraryNotFound) true.
func (e *LibraryNotFoundError) Is(target error) bool { return target == ErrLibraryNotFound }
