package transport

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestMain fails the run if the tests leave file descriptors open: every
// socket, memfd and view a test opens must be closed by the time it ends.
func TestMain(m *testing.M) {
	before := openFds()
	code := m.Run()
	if code == 0 {
		// Closing is asynchronous in places (a session's fd closes when its
		// last lease goes); give stragglers a moment. 10 s, not 2: under
		// qemu-user (make test-arm64), beside another package's tests, one
		// fresh-clone run found a socket still open after 2 s, which 15
		// reruns here did not reproduce. A real leak stays open for good.
		deadline := time.Now().Add(10 * time.Second)
		for len(openFds()) > len(before) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if after := openFds(); len(after) > len(before) {
			fmt.Fprintf(os.Stderr, "fd leak: %d fds open before the tests, %d after:\n", len(before), len(after))
			for fd, target := range after {
				if _, ok := before[fd]; !ok {
					fmt.Fprintf(os.Stderr, "  fd %s → %s%s\n", fd, target, describeSocket(fd))
				}
			}
			code = 1
		}
	}
	os.Exit(code)
}

func openFds() map[string]string {
	out := map[string]string{}
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return out
	}
	for _, e := range entries {
		target, err := os.Readlink("/proc/self/fd/" + e.Name())
		// The Go runtime's own netpoller (epoll, eventfd) appears lazily;
		// an fd that vanished while we listed is the ReadDir's own.
		if err != nil || strings.HasPrefix(target, "anon_inode:") {
			continue
		}
		out[e.Name()] = target
	}
	return out
}

// describeSocket says what a leaked socket is (its type, its and its
// peer's address, the peer's pid) so that the test that left it can be
// found; "" for anything else.
func describeSocket(name string) string {
	fd, err := strconv.Atoi(name)
	if err != nil {
		return ""
	}
	typ, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE)
	if err != nil {
		return ""
	}
	desc := fmt.Sprintf(" type %d", typ)
	if sa, err := unix.Getsockname(fd); err == nil {
		desc += fmt.Sprintf(" local %+v", sa)
	}
	if sa, err := unix.Getpeername(fd); err == nil {
		desc += fmt.Sprintf(" peer %+v", sa)
	} else {
		desc += fmt.Sprintf(" (no peer: %v)", err)
	}
	if cred, err := unix.GetsockoptUcred(fd, unix.SOL_SOCKET, unix.SO_PEERCRED); err == nil {
		desc += fmt.Sprintf(" peer pid %d (this process %d)", cred.Pid, os.Getpid())
	}
	return desc
}
