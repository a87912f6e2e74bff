// Package sockdir gives tests a short folder for unix sockets. A socket
// path holds at most 107 bytes, and t.TempDir's (TMPDIR or GOTMPDIR, the
// test's name of up to 64 bytes, random digits) passes that by itself
// once TMPDIR is a dozen bytes long. Only tests import it.
package sockdir

import (
	"os"
	"testing"
)

// Short returns a new empty folder with a short path, under /tmp when it
// is writable (else under os.TempDir()), removed when t ends.
func Short(t testing.TB) string {
	t.Helper()
	base := "/tmp"
	if st, err := os.Stat(base); err != nil || !st.IsDir() {
		base = ""
	}
	dir, err := os.MkdirTemp(base, "zh")
	if err != nil && base != "" {
		dir, err = os.MkdirTemp("", "zh")
	}
	if err != nil {
		t.Fatalf("socket folder: %v", err)
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("remove socket folder: %v", err)
		}
	})
	return dir
}
