// Package childproctest helps tests that start child processes: check that
// a run leaves nothing behind, and that no child outlives the test binary.
package childproctest

import (
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"testing"
)

// LockForPdeathsig has the kernel SIGKILL cmd's process should the test
// binary die (a -timeout panic, a SIGKILL), instead of leaving it running
// on the machine. Pdeathsig is tied to the thread that forks: the calling
// test goroutine stays locked to it, so the thread lives until the
// goroutine ends, after the test's cleanups have stopped the child. Call
// it on the test's own goroutine, before cmd.Start.
func LockForPdeathsig(cmd *exec.Cmd) {
	runtime.LockOSThread()
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

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
