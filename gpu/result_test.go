package gpu

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestResultNames(t *testing.T) {
	// Codes and names as printed in cuda.h (CUDA 12.x); a wrong or missing
	// table entry fails here.
	tests := []struct {
		code Result
		name string
	}{
		{0, "CUDA_SUCCESS"},
		{1, "CUDA_ERROR_INVALID_VALUE"},
		{2, "CUDA_ERROR_OUT_OF_MEMORY"},
		{3, "CUDA_ERROR_NOT_INITIALIZED"},
		{34, "CUDA_ERROR_STUB_LIBRARY"},
		{100, "CUDA_ERROR_NO_DEVICE"},
		{101, "CUDA_ERROR_INVALID_DEVICE"},
		{200, "CUDA_ERROR_INVALID_IMAGE"},
		{201, "CUDA_ERROR_INVALID_CONTEXT"},
		{209, "CUDA_ERROR_NO_BINARY_FOR_GPU"},
		{218, "CUDA_ERROR_INVALID_PTX"},
		{222, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION"},
		{400, "CUDA_ERROR_INVALID_HANDLE"},
		{500, "CUDA_ERROR_NOT_FOUND"},
		{600, "CUDA_ERROR_NOT_READY"},
		{700, "CUDA_ERROR_ILLEGAL_ADDRESS"},
		{701, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"},
		{712, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED"},
		{713, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED"},
		{719, "CUDA_ERROR_LAUNCH_FAILED"},
		{801, "CUDA_ERROR_NOT_SUPPORTED"},
		{803, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"},
		{999, "CUDA_ERROR_UNKNOWN"},
		{12345, "CUDA_ERROR_12345"}, // unknown to the table: still readable
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.code.Name(); got != tt.name {
				t.Errorf("Result(%d).Name() = %q, want %q", tt.code, got, tt.name)
			}
		})
	}
}

func TestResultNamesAreUniqueAndWellFormed(t *testing.T) {
	seen := map[string]Result{}
	for code, name := range resultNames {
		if !strings.HasPrefix(name, "CUDA_") {
			t.Errorf("code %d: name %q lacks the CUDA_ prefix", code, name)
		}
		if prev, dup := seen[name]; dup {
			t.Errorf("name %q used by codes %d and %d", name, prev, code)
		}
		seen[name] = code
	}
}

func TestErrorMatchesSentinels(t *testing.T) {
	tests := []struct {
		name     string
		err      error
		target   error
		wantIs   bool
		wantText string
	}{
		{"no device matches ErrNoDevice", &Error{Op: "cuInit", Code: 100}, ErrNoDevice, true, "cuInit: CUDA_ERROR_NO_DEVICE (100)"},
		{"wrapped no device still matches", fmt.Errorf("open: %w", &Error{Op: "cuInit", Code: 100}), ErrNoDevice, true, "open: cuInit: CUDA_ERROR_NO_DEVICE (100)"},
		{"not supported matches ErrNotSupported", &Error{Op: "cuMemHostRegister_v2", Code: 801, Description: "operation not supported"}, ErrNotSupported, true, "cuMemHostRegister_v2: CUDA_ERROR_NOT_SUPPORTED (801): operation not supported"},
		{"other code does not match ErrNoDevice", &Error{Op: "cuMemAlloc_v2", Code: 2}, ErrNoDevice, false, "cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY (2)"},
		{"a CUDA error is never ErrNoDriver", &Error{Op: "cuInit", Code: 34}, ErrNoDriver, false, "cuInit: CUDA_ERROR_STUB_LIBRARY (34)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := errors.Is(tt.err, tt.target); got != tt.wantIs {
				t.Errorf("errors.Is(%v, %v) = %t, want %t", tt.err, tt.target, got, tt.wantIs)
			}
			if got := tt.err.Error(); got != tt.wantText {
				t.Errorf("Error() = %q, want %q", got, tt.wantText)
			}
			var ce *Error
			if !errors.As(tt.err, &ce) {
				t.Fatalf("errors.As(*Error) failed for %v", tt.err)
			}
		})
	}
}

func TestCheckSuccessIsNil(t *testing.T) {
	if err := check(nil, "cuInit", 0); err != nil {
		t.Fatalf("check(CUDA_SUCCESS) = %v, want nil", err)
	}
	err := check(nil, "cuInit", 100)
	if !errors.Is(err, ErrNoDevice) {
		t.Fatalf("check(100) = %v, want ErrNoDevice", err)
	}
}
