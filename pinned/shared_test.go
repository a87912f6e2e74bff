package pinned

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime/debug"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

const childEnv = "ZEROHOP_PINNED_TEST_CHILD"

// TestMain lets the test binary act as the subscriber process of
// TestSharedSegmentAcrossProcesses when re-executed with childEnv set.
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		os.Exit(runChild())
	}
	before := countFds()
	code := m.Run()
	// Every memfd, mapping's fd and socket a test opens must be closed.
	if after := countFds(); code == 0 && after > before {
		fmt.Fprintf(os.Stderr, "fd leak: %d fds open before the tests, %d after\n", before, after)
		code = 1
	}
	os.Exit(code)
}

// countFds counts open fds, leaving out the Go runtime's netpoller
// (anon_inode epoll/eventfd, created lazily).
func countFds() int {
	entries, _ := os.ReadDir("/proc/self/fd")
	n := 0
	for _, e := range entries {
		target, err := os.Readlink("/proc/self/fd/" + e.Name())
		if err == nil && !strings.HasPrefix(target, "anon_inode:") {
			n++
		}
	}
	return n
}

// runChild receives a pool fd and geometry on fd 3, maps the pool
// read-only, checks the pattern and that it cannot write, reports on fd 3,
// then waits to be killed.
func runChild() int {
	conn := 3
	report := func(msg string) { unix.Write(conn, []byte(msg)) }
	buf := make([]byte, 64)
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := unix.Recvmsg(conn, buf, oob, 0)
	if err != nil {
		report("recvmsg: " + err.Error())
		return 1
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		report(fmt.Sprintf("control message: %v (%d)", err, len(msgs)))
		return 1
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 || n != 12 {
		report(fmt.Sprintf("rights: %v %v, %d bytes", err, fds, n))
		return 1
	}
	g := Geometry{SlotCount: binary.LittleEndian.Uint32(buf), SlotSize: binary.LittleEndian.Uint64(buf[4:])}
	v, err := OpenView(fds[0], 7, g, ViewOptions{})
	if err != nil {
		report(err.Error())
		return 1
	}
	for i := uint32(0); i < g.SlotCount; i++ {
		b := v.Slot(i)
		for j := range b {
			if b[j] != pattern(1, j) {
				report(fmt.Sprintf("slot %d byte %d = %d, want %d", i, j, b[j], pattern(1, j)))
				return 1
			}
		}
	}
	// The fd is read-only: no writable shared mapping, no mprotect to write.
	if m, err := unix.Mmap(v.seg.fd, 0, int(g.SegmentSize()), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); !errors.Is(err, unix.EACCES) {
		if err == nil {
			unix.Munmap(m)
		}
		report(fmt.Sprintf("writable mmap of the shared fd: err = %v, want EACCES", err))
		return 1
	}
	if err := unix.Mprotect(v.Memory(), unix.PROT_READ|unix.PROT_WRITE); !errors.Is(err, unix.EACCES) {
		report(fmt.Sprintf("mprotect to write: err = %v, want EACCES", err))
		return 1
	}
	if !writeFaults(v.Slot(0)) {
		report("a write through the read-only mapping did not fault")
		return 1
	}
	if msg := reopenForWriting(v.seg.fd); msg != "" {
		report(msg)
		return 1
	}
	report("ok")
	time.Sleep(time.Minute) // killed by the parent long before
	return 0
}

// reopenForWriting tries to get write access to the memfd behind a
// read-only fd by re-opening it O_RDWR through /proc/self/fd (its inode is
// mode 0777, so the open itself succeeds) and then mapping it writable,
// writing and punching a hole; F_SEAL_FUTURE_WRITE must refuse each with
// EPERM. It returns what went wrong, or "".
func reopenForWriting(fd int) string {
	rw, err := unix.Open(fmt.Sprintf("/proc/self/fd/%d", fd), unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return "" // refused at open: no write access either
	}
	defer unix.Close(rw)
	if m, err := unix.Mmap(rw, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); !errors.Is(err, unix.EPERM) {
		if err == nil {
			unix.Munmap(m)
		}
		return fmt.Sprintf("writable mmap of the fd re-opened O_RDWR: err = %v, want EPERM", err)
	}
	if _, err := unix.Pwrite(rw, []byte{1}, 0); !errors.Is(err, unix.EPERM) {
		return fmt.Sprintf("pwrite to the fd re-opened O_RDWR: err = %v, want EPERM", err)
	}
	if err := unix.Fallocate(rw, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 0, 4096); !errors.Is(err, unix.EPERM) {
		return fmt.Sprintf("hole punch in the fd re-opened O_RDWR: err = %v, want EPERM", err)
	}
	return ""
}

// writeFaults reports whether writing b[0] faults.
func writeFaults(b []byte) (faulted bool) {
	old := debug.SetPanicOnFault(true)
	defer debug.SetPanicOnFault(old)
	defer func() {
		if r := recover(); r != nil {
			_, faulted = r.(interface{ Addr() uintptr })
		}
	}()
	b[0] ^= 0xff
	return false
}

func TestSharedSegmentAcrossProcesses(t *testing.T) {
	const slots = 4
	p := newTestPool(t, slots, 10000, Options{Name: "cross", Shared: true})
	sub, err := p.Subscribe(slots)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < slots; i++ {
		s, err := p.Acquire()
		if err != nil {
			t.Fatal(err)
		}
		b := s.Bytes()
		for j := range b {
			b[j] = pattern(s.Generation(), j)
		}
		if held, err := p.Publish(s, SubscriberSet(1<<sub)); err != nil || !held.Has(sub) {
			t.Fatalf("publish to child: %b %v", held, err)
		}
	}

	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pair[0])
	childEnd := os.NewFile(uintptr(pair[1]), "child-socket")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	cmd.ExtraFiles = []*os.File{childEnd}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	childEnd.Close()
	killed := false
	defer func() {
		if !killed {
			cmd.Process.Kill()
			cmd.Wait()
		}
	}()

	fd, err := p.ShareFd()
	if err != nil {
		t.Fatal(err)
	}
	var geom [12]byte
	binary.LittleEndian.PutUint32(geom[:], p.Geometry().SlotCount)
	binary.LittleEndian.PutUint64(geom[4:], p.Geometry().SlotSize)
	if err := unix.Sendmsg(pair[0], geom[:], unix.UnixRights(fd), nil, 0); err != nil {
		t.Fatal(err)
	}
	unix.Close(fd)

	reply := make([]byte, 256)
	unix.SetsockoptTimeval(pair[0], unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: 20})
	n, err := unix.Read(pair[0], reply)
	if err != nil {
		t.Fatalf("no report from child: %v", err)
	}
	if got := string(reply[:n]); got != "ok" {
		t.Fatalf("child: %s", got)
	}

	// The subscriber dies holding every slot; its socket closing is how the
	// owner learns, and ReleaseAll gets every slot back.
	if st := p.Stats(); st.InUse != slots {
		t.Fatalf("in use before kill = %d, want %d", st.InUse, slots)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	killed = true
	if n, err := unix.Read(pair[0], reply); n != 0 || err != nil {
		t.Fatalf("read after child death = %d, %v; want EOF", n, err)
	}
	if got := p.ReleaseAll(sub); got != slots {
		t.Fatalf("ReleaseAll dropped %d holds, want %d", got, slots)
	}
	p.Unsubscribe(sub)
	if st := p.Stats(); st.InUse != 0 {
		t.Fatalf("in use after ReleaseAll = %d, want 0", st.InUse)
	}
	for i := 0; i < slots; i++ {
		if _, err := p.Acquire(); err != nil {
			t.Fatalf("slot %d not reusable after the child died: %v", i, err)
		}
	}
}

func TestOpenViewRejectsWhatIsNotTheAnnouncedMemfd(t *testing.T) {
	g := Geometry{SlotCount: 2, SlotSize: PageSize}
	memfd := func(size int64, seal bool) int {
		fd, err := unix.MemfdCreate("t", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
		if err != nil {
			t.Fatal(err)
		}
		unix.Ftruncate(fd, size)
		if seal {
			unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW)
		}
		return fd
	}
	tests := []struct {
		name string
		fd   func() int
		want string
	}{
		{"a pipe", func() int {
			var p [2]int
			unix.Pipe2(p[:], unix.O_CLOEXEC)
			unix.Close(p[1])
			return p[0]
		}, "F_GET_SEALS"},
		{"a regular file", func() int {
			f, err := os.CreateTemp(t.TempDir(), "x")
			if err != nil {
				t.Fatal(err)
			}
			f.Truncate(int64(g.SegmentSize()))
			fd, _ := unix.Dup(int(f.Fd()))
			f.Close()
			return fd
		}, "F_GET_SEALS"},
		{"an unsealed memfd", func() int { return memfd(int64(g.SegmentSize()), false) }, "lack SHRINK|GROW"},
		{"a sealed memfd that is too small", func() int { return memfd(PageSize, true) }, "geometry says 12288"},
		{"a sealed memfd that is too large", func() int { return memfd(1<<20, true) }, "is 1048576 bytes"},
		{"a closed fd", func() int { return 1 << 20 }, "F_GET_SEALS"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := OpenView(tt.fd(), 3, g, ViewOptions{})
			if err == nil {
				v.Close()
				t.Fatal("OpenView accepted it")
			}
			if !errors.Is(err, ErrNotMemfd) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("OpenView = %v, want ErrNotMemfd mentioning %q", err, tt.want)
			}
		})
	}
	if _, err := OpenView(memfd(int64(g.SegmentSize()), true), 3, Geometry{}, ViewOptions{}); !errors.Is(err, ErrGeometry) {
		t.Fatalf("OpenView with zero geometry = %v", err)
	}
}

// openTestView maps p, a shared pool, read-only as a subscriber would
// (in this process), closed at the test's end.
func openTestView(t *testing.T, p *Pool) *View {
	t.Helper()
	fd, err := p.ShareFd()
	if err != nil {
		t.Fatal(err)
	}
	v, err := OpenView(fd, 1, p.Geometry(), ViewOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	return v
}

func TestViewSlotBounds(t *testing.T) {
	p := newTestPool(t, 3, 100, Options{Shared: true})
	v := openTestView(t, p)
	s, _ := p.Acquire()
	copy(s.Bytes(), "hello")
	if got := string(v.Slot(s.Index())[:5]); got != "hello" {
		t.Fatalf("view reads %q, want the owner's write", got)
	}
	if v.Slot(3) != nil || v.Slot(^uint32(0)) != nil {
		t.Fatal("out-of-range slot returned memory")
	}
	if len(v.Slot(2)) != 100 {
		t.Fatalf("slot length %d, want 100", len(v.Slot(2)))
	}
	if _, err := newTestPool(t, 1, 1, Options{}).ShareFd(); err == nil {
		t.Fatal("an anonymous pool shared an fd")
	}
}
