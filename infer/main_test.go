package infer

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// EnvRequireORT set to 1 (the Makefile does) turns a missing ONNX Runtime
// library into a test failure instead of a skip.
const EnvRequireORT = "ZEROHOP_REQUIRE_ORT"

// envHelper marks a re-executed test binary running one helper test in a
// fresh process (ONNX Runtime's environment is process-global).
const envHelper = "ZEROHOP_INFER_TEST_HELPER"

// The one Runtime the tests share; opened by TestMain.
var (
	testRT    *Runtime
	testRTErr error
)

func TestMain(m *testing.M) {
	if os.Getenv(envHelper) == "lifecycle" {
		if err := runtimeLifecycle(); err != nil {
			fmt.Fprintln(os.Stderr, "runtime lifecycle:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if lib, err := testLibraryPath(); err != nil {
		testRTErr = err
	} else {
		testRT, testRTErr = OpenRuntime(lib)
	}
	code := m.Run()
	if testRT != nil {
		// Fails if any test left a session open.
		if err := testRT.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "infer tests:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// testLibraryPath is FindLibrary, plus the repository's cache: go test runs
// in infer/, one level below the .cache that scripts/ort/fetch.sh fills.
func testLibraryPath() (string, error) {
	if os.Getenv(EnvLibrary) == "" && os.Getenv(EnvCache) == "" {
		repoCache := filepath.Join("..", ".cache", "ort", ORTVersion, "libonnxruntime.so.1")
		if _, err := os.Stat(repoCache); err == nil {
			return FindLibrary(repoCache)
		}
	}
	return FindLibrary("")
}

// requireRuntime returns the shared Runtime, or fails (ZEROHOP_REQUIRE_ORT=1)
// or skips the test when the library is missing.
func requireRuntime(t testing.TB) *Runtime {
	t.Helper()
	if testRT != nil {
		return testRT
	}
	if os.Getenv(EnvRequireORT) == "1" {
		t.Fatalf("ONNX Runtime is required (%s=1) but not available: %v", EnvRequireORT, testRTErr)
	}
	t.Skipf("ONNX Runtime not available, skipping (run `make ort`, or set %s=1 to make this a failure): %v", EnvRequireORT, testRTErr)
	return nil
}
