package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/zerohop/zerohop/handles"
	"github.com/zerohop/zerohop/internal/sockdir"
)

// noGoroutineLeak fails the test if, after every later cleanup has run, more
// goroutines are alive than when it was called. Call it first in a test.
func noGoroutineLeak(t *testing.T) {
	t.Helper()
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(2 * time.Second)
		for runtime.NumGoroutine() > before {
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<16)
				t.Errorf("%d goroutines after the test, %d before:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
}

// copyFixture is a CopyServer serving on a temp socket until the test ends.
type copyFixture struct {
	srv  *CopyServer
	stop func() error // cancels Serve and returns its error
}

func newCopyFixture(t *testing.T) *copyFixture {
	t.Helper()
	return newCopyFixtureFor(t, -1, os.Getuid())
}

// newCopyFixtureFor serves with AllowGID allowGID, admitting ownUID as the
// camera's own uid (so a test can play a camera of another user).
func newCopyFixtureFor(t *testing.T, allowGID, ownUID int) *copyFixture {
	t.Helper()
	srv, err := NewCopyServer(CopyServerConfig{Path: filepath.Join(sockdir.Short(t), "copy.sock"), AllowGID: allowGID})
	if err != nil {
		t.Fatal(err)
	}
	srv.ownUID = ownUID // before Serve reads it
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	stopped := false
	var serveErr error
	f := &copyFixture{srv: srv, stop: func() error {
		if !stopped {
			cancel()
			serveErr, stopped = <-done, true
		}
		return serveErr
	}}
	t.Cleanup(func() {
		if err := f.stop(); err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return f
}

func dialCopyT(t *testing.T, path string, maxPayload int) *CopySubscriber {
	t.Helper()
	sub, err := DialCopy(ctxT(t), path, maxPayload)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sub.Close() })
	return sub
}

func (f *copyFixture) waitSubscribers(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for f.srv.Subscribers() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d copy subscribers connected, want %d", f.srv.Subscribers(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// pattern fills n bytes that differ per seq, so a stale or shifted payload
// fails the checksum.
func pattern(n int, seq uint64) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(uint64(i)*31 + seq*7)
	}
	return b
}

func TestCopyRoundTripDeliversWholePayloads(t *testing.T) {
	noGoroutineLeak(t)
	f := newCopyFixture(t)
	const maxPayload = 3<<20 + 5
	sub := dialCopyT(t, f.srv.Path(), maxPayload)
	f.waitSubscribers(t, 1)
	// Larger than a unix socket buffer (~208 KiB), so that Publish and Next
	// must interleave: publish from another goroutine.
	sizes := []int{0, 1, 1000, 64 << 10, maxPayload}
	errc := make(chan error, 1)
	go func() {
		for i, n := range sizes {
			p := pattern(n, uint64(i))
			h := handles.Handle{Kind: handles.KindPoints, Seq: uint64(i), PublishNs: int64(1000 + i),
				Points: handles.PointFormat{Count: uint32(n / 16), Step: 16, Y: 4, Z: 8, Intensity: 12, Datatype: handles.DatatypeFloat32}}
			h.Checksum = handles.PayloadChecksum(p)
			sent, err := f.srv.Publish(&h, p)
			if err == nil && sent != 1 {
				err = errors.New("publish reached no subscriber")
			}
			if err == nil && h.Length != uint64(n) {
				err = errors.New("publish did not set Length")
			}
			if err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	for i, n := range sizes {
		h, p, err := sub.Next()
		if err != nil {
			t.Fatalf("message %d (%d bytes): %v", i, n, err)
		}
		if h.Seq != uint64(i) || h.PublishNs != int64(1000+i) || h.Length != uint64(n) || len(p) != n {
			t.Fatalf("message %d: seq %d publish %d length %d, %d bytes; want seq %d publish %d length %d", i, h.Seq, h.PublishNs, h.Length, len(p), i, 1000+i, n)
		}
		if got := handles.PayloadChecksum(p); got != h.Checksum {
			t.Fatalf("message %d (%d bytes): checksum %#x, handle says %#x", i, n, got, h.Checksum)
		}
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// rawStreamServer accepts one connection on a SOCK_STREAM socket and writes
// whatever the test says, to produce what a CopyServer never would.
func rawStreamServer(t *testing.T, write func(fd int)) string {
	t.Helper()
	path := filepath.Join(sockdir.Short(t), "raw.sock")
	lfd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Bind(lfd, &unix.SockaddrUnix{Name: path}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(lfd, 1); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer closeFd(lfd)
		fd, err := accept(lfd)
		if err != nil {
			return
		}
		write(fd)
		closeFd(fd)
	}()
	t.Cleanup(func() {
		shutdown(lfd)
		<-done
	})
	return path
}

func record(h handles.Handle) []byte {
	var rec [handles.Size]byte
	h.MarshalTo(&rec)
	return rec[:]
}

func TestCopyNextReportsBrokenStreams(t *testing.T) {
	announce := func(length uint64) []byte {
		return record(handles.Handle{Kind: handles.KindPoints, Seq: 9, Length: length})
	}
	badMagic := announce(4)
	badMagic[0] ^= 0xff
	tests := []struct {
		name   string
		send   [][]byte
		want   error
		phrase string
	}{
		{"peer closes between messages", nil, io.EOF, "server closed the stream"},
		{"peer closes inside the handle record", [][]byte{announce(0)[:50]}, io.ErrUnexpectedEOF, "got 50 of 128 bytes"},
		{"peer closes inside the payload", [][]byte{announce(1000), make([]byte, 10)}, io.ErrUnexpectedEOF, "got 10 of 1000 bytes"},
		{"payload larger than the buffer", [][]byte{announce(4097)}, ErrPayloadTooLarge, "4097 payload bytes, buffer holds 4096"},
		{"record is not a handle", [][]byte{badMagic}, handles.ErrBadMagic, "magic"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			noGoroutineLeak(t)
			path := rawStreamServer(t, func(fd int) {
				for _, b := range tt.send {
					if err := writeMessage(fd, b, nil); err != nil {
						t.Errorf("raw server write: %v", err)
					}
				}
			})
			sub := dialCopyT(t, path, 4096)
			_, p, err := sub.Next()
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.phrase) {
				t.Fatalf("Next = %v, want %v mentioning %q", err, tt.want, tt.phrase)
			}
			if p != nil {
				t.Fatalf("Next returned %d payload bytes with its error", len(p))
			}
			// The stream has lost its framing: the error sticks.
			if _, _, again := sub.Next(); again == nil || again.Error() != err.Error() {
				t.Fatalf("second Next = %v, want the same error %v", again, err)
			}
		})
	}
}

func TestCopyCloseWakesABlockedNext(t *testing.T) {
	noGoroutineLeak(t)
	f := newCopyFixture(t)
	sub := dialCopyT(t, f.srv.Path(), 16)
	f.waitSubscribers(t, 1)
	errc := make(chan error, 1)
	go func() {
		_, _, err := sub.Next()
		errc <- err
	}()
	time.Sleep(20 * time.Millisecond) // let Next block in recv
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("Next after Close = %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not wake Next")
	}
	if err := sub.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, _, err := sub.Next(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Next after Close = %v, want ErrClosed", err)
	}
}

func TestCopyPublishDropsAGoneSubscriber(t *testing.T) {
	noGoroutineLeak(t)
	f := newCopyFixture(t)
	gone := dialCopyT(t, f.srv.Path(), 1<<20)
	stays := dialCopyT(t, f.srv.Path(), 1<<20)
	f.waitSubscribers(t, 2)
	gone.Close()
	// Larger than the socket buffer: the write to the closed peer fails
	// (EPIPE; SIGPIPE must not kill the process) instead of being buffered.
	payload := pattern(1<<20, 1)
	errc := make(chan error, 1)
	go func() {
		_, p, err := stays.Next()
		if err == nil && len(p) != len(payload) {
			err = errors.New("short payload")
		}
		errc <- err
	}()
	h := handles.Handle{Kind: handles.KindPoints}
	sent, err := f.srv.Publish(&h, payload)
	if err != nil {
		t.Fatal(err)
	}
	if sent != 1 || f.srv.Dropped() != 1 || f.srv.Subscribers() != 1 {
		t.Fatalf("sent %d, dropped %d, %d connected; want 1, 1, 1", sent, f.srv.Dropped(), f.srv.Subscribers())
	}
	if err := <-errc; err != nil {
		t.Fatalf("remaining subscriber: %v", err)
	}
}

func TestCopyServeEndsCleanly(t *testing.T) {
	noGoroutineLeak(t)
	f := newCopyFixture(t)
	sub := dialCopyT(t, f.srv.Path(), 16)
	f.waitSubscribers(t, 1)
	if err := f.stop(); err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if _, err := os.Stat(f.srv.Path()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("socket file after Serve ended: %v, want it removed", err)
	}
	if _, _, err := sub.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("Next after the server stopped = %v, want io.EOF", err)
	}
	h := handles.Handle{Kind: handles.KindPoints}
	if _, err := f.srv.Publish(&h, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Publish after Serve ended = %v, want ErrClosed", err)
	}
}

func TestCopyPublishAndNextAllocateNothing(t *testing.T) {
	f := newCopyFixture(t)
	sub := dialCopyT(t, f.srv.Path(), 4096)
	f.waitSubscribers(t, 1)
	payload := pattern(4096, 3) // fits the socket buffer: one goroutine can do both ends
	h := handles.Handle{Kind: handles.KindPoints}
	var failed error
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := f.srv.Publish(&h, payload); err != nil {
			failed = err
		}
		if _, p, err := sub.Next(); err != nil || len(p) != len(payload) {
			failed = errors.Join(failed, err, errors.New("short payload"))
		}
	})
	if failed != nil {
		t.Fatal(failed)
	}
	if allocs != 0 {
		t.Fatalf("Publish+Next allocate %.1f times per message, want 0", allocs)
	}
}

func TestCopyWriteMessageResumesPartialWrites(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	w, r := fds[0], fds[1]
	defer closeFd(w)
	defer closeFd(r)
	// A send timeout makes a blocking writev return after part of the
	// message went, as a signal can; writeMessage must carry on from there.
	if err := unix.SetsockoptTimeval(w, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &unix.Timeval{Usec: 500}); err != nil {
		t.Fatal(err)
	}
	rec := record(handles.Handle{Kind: handles.KindPoints, Seq: 5, Length: 512 << 10})
	payload := pattern(512<<10, 5)
	got := make(chan []byte, 1)
	go func() {
		b := make([]byte, len(rec)+len(payload))
		n := 0
		for n < len(b) {
			// Pause longer than the send timeout (rounded up to a jiffy,
			// ≤ 10 ms): the writer times out with part of the message sent.
			time.Sleep(20 * time.Millisecond)
			m, err := recvNoAddr(r, b[n:min(n+64<<10, len(b))], 0)
			if err == unix.EINTR {
				continue
			}
			if err != nil || m == 0 {
				break
			}
			n += m
		}
		got <- b[:n]
	}()
	werr := writeMessage(w, rec, payload)
	shutdown(w) // the reader sees the end of what was written, short or not
	b := <-got
	if werr != nil {
		t.Fatalf("writeMessage: %v", werr)
	}
	if len(b) != len(rec)+len(payload) || string(b[:len(rec)]) != string(rec) || handles.PayloadChecksum(b[len(rec):]) != handles.PayloadChecksum(payload) {
		t.Fatalf("received %d bytes that differ from the %d-byte record and %d-byte payload sent", len(b), len(rec), len(payload))
	}
}

func TestCopyServeEndWakesAPublishBlockedOnAStalledSubscriber(t *testing.T) {
	noGoroutineLeak(t)
	f := newCopyFixture(t)
	sub := dialCopyT(t, f.srv.Path(), 16) // connected, never reads
	f.waitSubscribers(t, 1)
	type result struct {
		sent int
		err  error
	}
	done := make(chan result, 1)
	go func() {
		h := handles.Handle{Kind: handles.KindPoints}
		sent, err := f.srv.Publish(&h, make([]byte, 4<<20)) // far more than the socket buffers hold
		done <- result{sent, err}
	}()
	// Publish is under way once bytes wait in the subscriber's socket (a
	// fixed sleep was too short on a loaded machine: Publish had not
	// started, found the server closed and said so).
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		if n, err := unix.IoctlGetInt(sub.fd, unix.SIOCINQ); err == nil && n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Publish wrote nothing to the subscriber in 5 s")
		}
	}
	time.Sleep(20 * time.Millisecond) // and is blocked in writev, the buffers full
	select {
	case r := <-done:
		t.Fatalf("Publish to a subscriber that never reads returned early: %+v", r)
	default:
	}
	if err := f.stop(); err != nil {
		t.Fatalf("Serve: %v", err)
	}
	select {
	case r := <-done:
		if r.sent != 0 || r.err != nil || f.srv.Dropped() != 1 {
			t.Fatalf("Publish woken by the end of Serve: sent %d, err %v, dropped %d; want 0, nil, 1", r.sent, r.err, f.srv.Dropped())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the end of Serve did not wake a blocked Publish")
	}
}

// The copy baseline admits peers by SO_PEERCRED like the zero-copy
// server: the camera's uid, or the allowed gid; anyone else is dropped at
// once and counted. The test plays a camera of another uid.
func TestCopyServerAdmitsByPeerCredentials(t *testing.T) {
	for _, tc := range []struct {
		name     string
		allowGID int
		admitted bool
	}{
		{"other uid, no gid allowed", -1, false},
		{"other uid, our gid allowed", os.Getgid(), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newCopyFixtureFor(t, tc.allowGID, os.Getuid()+1)
			sub := dialCopyT(t, f.srv.Path(), 64)
			if !tc.admitted {
				if _, _, err := sub.Next(); err == nil {
					t.Fatal("a refused subscriber received a message")
				}
				if f.srv.Refused() != 1 || f.srv.Subscribers() != 0 {
					t.Fatalf("refused %d, subscribers %d; want 1, 0", f.srv.Refused(), f.srv.Subscribers())
				}
				return
			}
			f.waitSubscribers(t, 1)
			h := handles.Handle{Kind: handles.KindImage, Seq: 9}
			if n, err := f.srv.Publish(&h, []byte("ok")); err != nil || n != 1 {
				t.Fatalf("Publish = %d, %v", n, err)
			}
			if got, p, err := sub.Next(); err != nil || got.Seq != 9 || string(p) != "ok" {
				t.Fatalf("Next = %+v %q %v", got, p, err)
			}
			if f.srv.Refused() != 0 {
				t.Fatalf("refused %d", f.srv.Refused())
			}
		})
	}
}

func TestCopyServerSocketMode(t *testing.T) {
	f := newCopyFixture(t)
	st, err := os.Stat(f.srv.Path())
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o660 {
		t.Fatalf("copy socket mode %v, want 0660", st.Mode().Perm())
	}
}

// A camera killed with SIGKILL leaves its copy socket behind; the next one
// must start (it failed with EADDRINUSE), and a live one must not be
// displaced.
func TestCopyServerReplacesAStaleSocket(t *testing.T) {
	path := filepath.Join(sockdir.Short(t), "copy.sock")
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		t.Fatal(err)
	}
	unix.Close(fd) // the file stays, nobody listens: what a killed camera leaves
	srv, err := NewCopyServer(CopyServerConfig{Path: path})
	if err != nil {
		t.Fatalf("over a stale socket: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	defer func() { cancel(); <-done }()
	if _, err := NewCopyServer(CopyServerConfig{Path: path}); err == nil || !strings.Contains(err.Error(), "running camera") {
		t.Fatalf("second server on a live socket: %v", err)
	}

	// A live socket of the other type (the unix transport's
	// SOCK_SEQPACKET) answers a stream probe with EPROTOTYPE: in use, not
	// stale; it once was removed and replaced.
	f := newFixture(t, 1)
	if _, err := NewCopyServer(CopyServerConfig{Path: f.path}); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("copy server over a live seqpacket socket: %v", err)
	}
	if _, err := os.Stat(f.path); err != nil {
		t.Fatalf("the live socket is gone: %v", err)
	}
}

// TestCopyServerCreatesItsSocketFolder: as the unix transport's, the copy
// server creates a missing socket folder (--socket's help promises it);
// it failed with "bind …: no such file or directory" on a fresh machine.
func TestCopyServerCreatesItsSocketFolder(t *testing.T) {
	path := filepath.Join(sockdir.Short(t), "new", "copy.sock")
	srv, err := NewCopyServer(CopyServerConfig{Path: path, AllowGID: -1})
	if err != nil {
		t.Fatalf("NewCopyServer in a missing folder: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	defer srv.Serve(ctx) // closes its socket
	st, err := os.Stat(filepath.Dir(path))
	if err != nil || st.Mode().Perm() != 0o750 {
		t.Fatalf("socket folder: %v, %v; want it created 0750", st, err)
	}
}

// A permission error on the socket's path says what to do about it.
func TestSocketPermissionErrorsSayWhatToDo(t *testing.T) {
	for _, tc := range []struct {
		err  error
		hint bool
	}{
		{fmt.Errorf("bind %q: %w", "/run/zerohop/camera.sock", unix.EACCES), true},
		{fmt.Errorf("create socket directory: %w", unix.EPERM), true},
		{fmt.Errorf("bind: %w", unix.EADDRINUSE), false},
		{nil, false},
	} {
		err := withPermissionHint(tc.err)
		if hint := err != nil && strings.Contains(err.Error(), "give --socket a path in a folder it can write"); hint != tc.hint {
			t.Errorf("withPermissionHint(%v) = %v; want the hint: %t", tc.err, err, tc.hint)
		}
		if tc.err != nil && !errors.Is(err, tc.err) {
			t.Errorf("withPermissionHint(%v) = %v, which does not wrap it", tc.err, err)
		}
	}
}

// An agent on the copy baseline with no copy camera (none, or one on the
// unix transport, which serves SOCKET alone) is told to check both.
func TestDialCopyWithoutACopyCameraSaysWhy(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := DialCopy(ctx, filepath.Join(sockdir.Short(t), "camera.sock.points"), 16)
	if err == nil || !strings.Contains(err.Error(), "with --transport copy?") {
		t.Fatalf("DialCopy with no camera = %v, want it to ask whether the camera runs with --transport copy", err)
	}
}
