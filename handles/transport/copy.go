package transport

// The copy transport is the baseline the zero-copy transport is measured
// against: it sends the whole payload through a unix socket, the way a
// serializing middleware does, so that the kernel copies every payload byte
// twice (into the socket buffer, out of it). It has no pools, leases or
// releases; it exists for benchmarks (cmd/bench-handoff) and must not be
// used by the camera or the agent.
//
// Wire format on a SOCK_STREAM socket (SEQPACKET datagrams cannot carry a
// 16 MiB payload): each message is one handles.Handle record (handles.Size
// bytes) followed by exactly Handle.Length payload bytes, nothing else.
//
// Invariants:
//
//   - Sockets are blocking. A blocked accept, write or read is woken by
//     shutdown(2) on its fd, never by close(2); an fd is closed only when no
//     call can be using it (Publish holds pubMu, Next holds readMu).
//   - Writes to a subscriber that went away fail with EPIPE: the Go runtime
//     ignores SIGPIPE for fds other than 1 and 2 (os/signal docs), so a
//     writev without MSG_NOSIGNAL is safe here.
//   - A subscriber that reads a malformed or oversized record stops: the
//     stream has lost its framing, so every later Next returns that error.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/zerohop/zerohop/handles"
)

// ErrClosed is returned by the copy transport after Close (subscriber) or
// once Serve has ended (server).
var ErrClosed = errors.New("copy transport closed")

// ErrPayloadTooLarge is returned by CopySubscriber.Next for a handle whose
// Length exceeds the subscriber's buffer.
var ErrPayloadTooLarge = errors.New("payload larger than the subscriber's buffer")

// copyDialRetry is how often DialCopy retries while the server's socket is
// missing or refusing.
const copyDialRetry = 5 * time.Millisecond

// CopyServer sends each published payload, whole, to every connected
// CopySubscriber. Publish blocks until every subscriber's socket took the
// whole message (a slow subscriber slows the publisher: fine for a
// baseline, unlike the zero-copy Server).
type CopyServer struct {
	path     string
	lfd      int
	allowGID int
	ownUID   int // the uid peers must have (os.Getuid(); tests change it)
	log      *zap.Logger

	mu     sync.Mutex // guards conns and closed
	conns  []int      // connected subscriber fds
	closed bool

	// pubMu serializes Publish and guards rec and scratch; an fd leaves
	// conns and is closed only while it is held, so Publish never writes to
	// a closed (possibly reused) fd.
	pubMu   sync.Mutex
	rec     [handles.Size]byte
	scratch []int

	dropped, refused atomic.Uint64
}

// CopyServerConfig configures a CopyServer.
type CopyServerConfig struct {
	// Path is the socket; its directory must exist. A stale socket
	// there (its server gone) is removed; a live one is an error. The
	// socket is made mode 0660.
	Path string
	// AllowGID admits peers as ServerConfig.AllowGID does: the camera's
	// own uid always, this primary gid too when ≥ 0. Other peers are
	// disconnected at once, logged and counted (Refused).
	AllowGID int
	Log      *zap.Logger // nil: no logging
}

// NewCopyServer binds a SOCK_STREAM unix socket at cfg.Path. Call Serve to
// accept subscribers.
func NewCopyServer(cfg CopyServerConfig) (*CopyServer, error) {
	path := cfg.Path
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	// As the unix transport: its folder created if missing, a socket left
	// by a camera that was killed removed (it used to fail the restart
	// with EADDRINUSE).
	if err := prepareSocketPath(path, unix.SOCK_STREAM); err != nil {
		return nil, fmt.Errorf("copy server: %w", err)
	}
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("copy server: socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("copy server: %w", withPermissionHint(fmt.Errorf("bind %q: %w", path, err)))
	}
	if err := os.Chmod(path, 0o660); err != nil {
		unix.Close(fd)
		os.Remove(path)
		return nil, fmt.Errorf("copy server: chmod socket %q to 0660: %w", path, err)
	}
	if err := unix.Listen(fd, 16); err != nil {
		unix.Close(fd)
		os.Remove(path)
		return nil, fmt.Errorf("copy server: listen on %q: %w", path, err)
	}
	return &CopyServer{path: path, lfd: fd, allowGID: cfg.AllowGID, ownUID: os.Getuid(), log: cfg.Log}, nil
}

// Path is the socket path.
func (s *CopyServer) Path() string { return s.path }

// Serve accepts subscribers until ctx is done, then disconnects them all,
// closes and removes the socket and returns nil. Call it once.
func (s *CopyServer) Serve(ctx context.Context) error {
	// Called before closeAll closes the listener.
	stopShutdown := shutdownOnDone(ctx, s.lfd)
	var err error
	var pause time.Duration // as Server.Serve: a transient accept error backs off
	for {
		fd, aerr := accept(s.lfd)
		if aerr != nil {
			if ctx.Err() == nil && transientAcceptError(aerr) {
				if pause == 0 {
					s.log.Warn("copy server: accept failed; retrying with backoff", zap.String("socket", s.path), zap.Error(aerr))
				}
				pause = min(max(2*pause, 5*time.Millisecond), time.Second)
				select {
				case <-time.After(pause):
				case <-ctx.Done():
				}
				continue
			}
			if ctx.Err() == nil {
				err = fmt.Errorf("copy server: accept on %q: %w", s.path, aerr)
			}
			break
		}
		pause = 0
		if perr := s.admit(fd); perr != nil {
			s.refused.Add(1)
			s.log.Warn("copy subscriber refused", zap.String("socket", s.path), zap.Error(perr))
			closeFd(fd)
			continue
		}
		s.mu.Lock()
		s.conns = append(s.conns, fd)
		s.mu.Unlock()
	}
	stopShutdown()
	s.closeAll()
	return err
}

// admit checks the connected peer's credentials (SO_PEERCRED: the
// process that connected, as the kernel recorded it).
func (s *CopyServer) admit(fd int) error {
	cred, err := peerCred(fd)
	if err != nil {
		return fmt.Errorf("SO_PEERCRED: %w", err)
	}
	return admitPeer(cred.Pid, cred.Uid, cred.Gid, s.ownUID, s.allowGID)
}

// Refused returns how many connections were refused for their peer's
// credentials.
func (s *CopyServer) Refused() uint64 { return s.refused.Load() }

func (s *CopyServer) closeAll() {
	s.mu.Lock()
	s.closed = true
	for _, fd := range s.conns {
		shutdown(fd) // wakes a Publish blocked writing to it
	}
	s.mu.Unlock()
	s.pubMu.Lock()
	s.mu.Lock()
	for _, fd := range s.conns {
		closeFd(fd)
	}
	s.conns = nil
	s.mu.Unlock()
	s.pubMu.Unlock()
	closeFd(s.lfd)
	os.Remove(s.path)
}

// Subscribers returns how many subscribers are connected (a subscriber that
// went away is noticed at the next Publish).
func (s *CopyServer) Subscribers() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// Dropped returns how many subscribers were disconnected because a write to
// them failed.
func (s *CopyServer) Dropped() uint64 { return s.dropped.Load() }

// Publish sets h.Length to len(payload) and writes h's record followed by
// payload to every connected subscriber, blocking until each socket took
// all of it. A subscriber whose write fails is disconnected and counted in
// Dropped. It returns how many subscribers got the message, and ErrClosed
// once Serve has ended. Calls are serialized; it allocates nothing (beyond
// amortized growth when more subscribers connect).
func (s *CopyServer) Publish(h *handles.Handle, payload []byte) (int, error) {
	s.pubMu.Lock()
	defer s.pubMu.Unlock()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return 0, fmt.Errorf("copy server %q: publish: %w", s.path, ErrClosed)
	}
	s.scratch = append(s.scratch[:0], s.conns...)
	s.mu.Unlock()

	h.Length = uint64(len(payload))
	h.MarshalTo(&s.rec)
	sent := 0
	for _, fd := range s.scratch {
		if err := writeMessage(fd, s.rec[:], payload); err == nil {
			sent++
			continue
		}
		s.dropped.Add(1)
		s.mu.Lock()
		for i, c := range s.conns {
			if c == fd {
				s.conns = append(s.conns[:i], s.conns[i+1:]...)
				break
			}
		}
		s.mu.Unlock()
		closeFd(fd)
	}
	return sent, nil
}

// writeMessage writes record and payload with one writev when the socket
// takes it all, continuing after partial writes (a signal, or a send
// timeout, can end a blocking write after some bytes went). EAGAIN (a send
// timeout with nothing sent) is retried like EINTR: the fd is blocking, so
// this does not spin.
func writeMessage(fd int, record, payload []byte) error {
	iov := [2][]byte{record, payload}
	for len(iov[0])+len(iov[1]) > 0 {
		n, err := unix.Writev(fd, iov[:])
		if err == unix.EINTR || err == unix.EAGAIN {
			continue
		}
		if err != nil {
			return err
		}
		if n < len(iov[0]) {
			iov[0] = iov[0][n:]
			continue
		}
		n -= len(iov[0])
		iov[0], iov[1] = iov[1][n:], nil
	}
	return nil
}

// CopySubscriber receives messages from a CopyServer into its own buffer.
// Next must not be called concurrently with itself; Close may be called
// from any goroutine, also while Next is blocked.
type CopySubscriber struct {
	path string
	fd   int

	readMu sync.Mutex // held by Next; the fd is closed only under it
	rec    [handles.Size]byte
	buf    []byte // len = maxPayload; Next's payloads are prefixes of it
	err    error  // sticky: the stream lost its framing or ended
	closed atomic.Bool
}

// DialCopy connects to the CopyServer at path, retrying while the socket is
// missing or refusing until ctx is done. maxPayload sizes the subscriber's
// buffer, allocated once here.
func DialCopy(ctx context.Context, path string, maxPayload int) (*CopySubscriber, error) {
	if maxPayload < 0 {
		return nil, fmt.Errorf("copy subscriber %q: max payload %d < 0", path, maxPayload)
	}
	for {
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("copy subscriber %q: socket: %w", path, err)
		}
		err = unix.Connect(fd, &unix.SockaddrUnix{Name: path})
		if err == nil {
			return &CopySubscriber{path: path, fd: fd, buf: make([]byte, maxPayload)}, nil
		}
		unix.Close(fd)
		if err != unix.ENOENT && err != unix.ECONNREFUSED && err != unix.EINTR {
			return nil, fmt.Errorf("copy subscriber: connect %q: %w", path, err)
		}
		select {
		case <-ctx.Done():
			hint := ""
			if err == unix.ENOENT {
				hint = "; is the camera running, and with --transport copy? that serves SOCKET.points and SOCKET.image, its default SOCKET alone"
			}
			return nil, fmt.Errorf("copy subscriber: connect %q: %w (last: %v%s)", path, ctx.Err(), err, hint)
		case <-time.After(copyDialRetry):
		}
	}
}

// Next blocks until a whole message has been read and returns its handle
// and payload. The payload aliases the subscriber's buffer: it is valid
// until the next call to Next or Close. The stream ends with an error that
// matches io.EOF when the server closed it between messages,
// io.ErrUnexpectedEOF when it closed inside one, ErrPayloadTooLarge or a
// handles error when a record is invalid, and ErrClosed after Close; every
// later call returns the same error. It allocates nothing on success.
func (s *CopySubscriber) Next() (handles.Handle, []byte, error) {
	s.readMu.Lock()
	defer s.readMu.Unlock()
	var h handles.Handle
	if s.err == nil && s.closed.Load() {
		s.err = fmt.Errorf("copy subscriber %q: %w", s.path, ErrClosed)
	}
	if s.err != nil {
		return h, nil, s.err
	}
	if err := s.next(&h); err != nil {
		if s.closed.Load() {
			err = fmt.Errorf("copy subscriber %q: %w", s.path, ErrClosed)
		}
		s.err = err
		return handles.Handle{}, nil, err
	}
	return h, s.buf[:h.Length], nil
}

func (s *CopySubscriber) next(h *handles.Handle) error {
	got, err := readFull(s.fd, s.rec[:])
	if err != nil {
		if got == 0 && err == io.EOF {
			return fmt.Errorf("copy subscriber %q: server closed the stream: %w", s.path, io.EOF)
		}
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("copy subscriber %q: read handle record: got %d of %d bytes: %w", s.path, got, handles.Size, err)
	}
	if err := h.Unmarshal(s.rec[:]); err != nil {
		return fmt.Errorf("copy subscriber %q: %w", s.path, err)
	}
	if h.Length > uint64(len(s.buf)) {
		return fmt.Errorf("copy subscriber %q: handle seq %d announces %d payload bytes, buffer holds %d: %w", s.path, h.Seq, h.Length, len(s.buf), ErrPayloadTooLarge)
	}
	got, err = readFull(s.fd, s.buf[:h.Length])
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("copy subscriber %q: read payload of handle seq %d: got %d of %d bytes: %w", s.path, h.Seq, got, h.Length, err)
	}
	return nil
}

// readFull reads len(b) bytes. MSG_WAITALL lets the kernel keep filling b
// as data arrives instead of returning to user space for each chunk. It
// returns io.EOF when the peer closed before b was full.
func readFull(fd int, b []byte) (int, error) {
	got := 0
	for got < len(b) {
		n, err := recvNoAddr(fd, b[got:], unix.MSG_WAITALL)
		if err == unix.EINTR {
			continue
		}
		if err == unix.ECONNRESET {
			return got, io.EOF
		}
		if err != nil {
			return got, err
		}
		if n == 0 {
			return got, io.EOF
		}
		got += n
	}
	return got, nil
}

// Close disconnects the subscriber, waking a blocked Next (which returns
// ErrClosed). Closing twice is a no-op.
func (s *CopySubscriber) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	shutdown(s.fd)
	s.readMu.Lock()
	closeFd(s.fd)
	s.readMu.Unlock()
	return nil
}
