package fakecuda

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The sources are found with and without -trimpath (which makes
// runtime.Caller name github.com/zerohop/zerohop/gpu/fakecuda/fakecuda.go),
// from any folder of the module, and a folder outside it is an error that
// says what is missing.
func TestFindSourceDir(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	want, err := filepath.Abs(filepath.Join(wd, "..", "testdata", "fakecuda"))
	if err != nil {
		t.Fatal(err)
	}
	trimmed := "github.com/zerohop/zerohop/gpu/fakecuda/fakecuda.go"
	for _, tc := range []struct{ name, self, wd string }{
		{"file path", filepath.Join(wd, "fakecuda.go"), "/"},
		{"-trimpath, in this package", trimmed, wd},
		{"-trimpath, in another package", trimmed, filepath.Join(wd, "..", "..", "agent")},
		{"-trimpath, at the module root", trimmed, filepath.Join(wd, "..", "..")},
	} {
		got, err := findSourceDir(tc.self, tc.wd)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if abs, _ := filepath.Abs(got); abs != want {
			t.Errorf("%s: %s, want %s", tc.name, got, want)
		}
	}
	if got, err := findSourceDir(trimmed, t.TempDir()); err == nil || !strings.Contains(err.Error(), "go.mod") {
		t.Errorf("outside the module: %q, %v; want an error naming go.mod", got, err)
	}
}
