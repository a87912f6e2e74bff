package sockdir

import (
	"os"
	"path/filepath"
	"testing"
)

// The folder is short whatever TMPDIR says, empty, and gone after the test.
func TestShort(t *testing.T) {
	t.Setenv("TMPDIR", filepath.Join(t.TempDir(), "a-temp-folder-name-long-enough-to-break-socket-paths-on-its-own"))
	if err := os.MkdirAll(os.Getenv("TMPDIR"), 0o755); err != nil {
		t.Fatal(err)
	}
	var dir string
	t.Run("use", func(t *testing.T) {
		dir = Short(t)
		if len(dir) > 24 {
			t.Fatalf("folder %q is %d bytes", dir, len(dir))
		}
		if entries, err := os.ReadDir(dir); err != nil || len(entries) != 0 {
			t.Fatalf("folder %q: %v %v, want empty", dir, entries, err)
		}
	})
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("folder %q after the test: %v, want removed", dir, err)
	}
}
