// Package childproctest helps the benchmark commands' tests check that a
// run leaves nothing behind.
package childproctest

import (
	"os"
	"testing"
)

// EmptyTempDir points os.TempDir at a new directory for t and returns a
// check that it is empty again (a run removed what it wrote there).
func EmptyTempDir(t *testing.T) func() {
	t.Helper()
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	return func() {
		t.Helper()
		if left, _ := os.ReadDir(tmp); len(left) != 0 {
			t.Errorf("left behind in the temp dir: %v", left)
		}
	}
}
