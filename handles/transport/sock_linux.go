package transport

// Every socket system call of the unix transport lives here. Invariants:
//
//   - Sockets are SOCK_SEQPACKET: each send is one datagram, delivered whole
//     and in order, or not at all; a receive never merges two messages.
//   - Sends on the camera's publish path use MSG_DONTWAIT|MSG_NOSIGNAL: a
//     full subscriber socket is EAGAIN (a drop for that subscriber), a dead
//     one EPIPE; the camera never blocks and never gets SIGPIPE.
//   - A blocked recv is woken for shutdown by shutdown(2) on the same fd,
//     never by close(2): the fd stays valid until its owner closes it.
//   - Received fds (SCM_RIGHTS) are close-on-exec (MSG_CMSG_CLOEXEC) and
//     every one is either handed to an owner or closed, also on error paths.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"unsafe"

	"golang.org/x/sys/unix"
)

// maxSocketPath is the longest path a socket can be bound or dialled at:
// sun_path's size less its terminating NUL (x/sys/unix refuses a full
// one; the kernel's answer, EINVAL, would not say why).
const maxSocketPath = len(unix.RawSockaddrUnix{}.Path) - 1

func checkSocketPath(path string) error {
	if len(path) > maxSocketPath {
		return fmt.Errorf("socket path %q is %d bytes; a unix socket path holds at most %d (choose a shorter --socket)", path, len(path), maxSocketPath)
	}
	return nil
}

// prepareSocketPath readies path for a listening socket of sockType: a
// path that fits, its folder (created if missing), no stale socket left
// by a camera that died.
func prepareSocketPath(path string, sockType int) error {
	if err := checkSocketPath(path); err != nil {
		return err
	}
	if err := ensureSocketDir(filepath.Dir(path)); err != nil {
		return withPermissionHint(err)
	}
	return withPermissionHint(removeStaleSocket(path, sockType))
}

// withPermissionHint says what to do when err is a permission error on
// the socket's path: the default path, /run/zerohop (no XDG_RUNTIME_DIR),
// is root's.
func withPermissionHint(err error) error {
	if err == nil || !errors.Is(err, fs.ErrPermission) {
		return err
	}
	return fmt.Errorf("%w (this user cannot write there: give --socket a path in a folder it can write, or set XDG_RUNTIME_DIR, under which the default path lies; unset, the default is under /run/zerohop)", err)
}

func listenSeqpacket(path string) (int, error) {
	if err := prepareSocketPath(path, unix.SOCK_SEQPACKET); err != nil {
		return -1, err
	}
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		unix.Close(fd)
		return -1, withPermissionHint(fmt.Errorf("bind %q: %w", path, err))
	}
	if err := os.Chmod(path, 0o660); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("chmod socket %q to 0660: %w", path, err)
	}
	if err := unix.Listen(fd, 16); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("listen on %q: %w", path, err)
	}
	return fd, nil
}

// ensureSocketDir creates a missing socket folder 0750 (whatever the
// umask). An existing folder is the user's and is left as it is: the
// camera once chmodded it, so --socket /tmp/x.sock closed /tmp to other
// users. Who may connect is decided by the socket's 0660 and SO_PEERCRED.
func ensureSocketDir(dir string) error {
	st, err := os.Stat(dir)
	switch {
	case err == nil && !st.IsDir():
		return fmt.Errorf("socket directory %q is not a directory", dir)
	case err == nil:
		return nil
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("socket directory: %w", err)
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("create socket directory %q: %w", dir, err)
	}
	if err := os.Chmod(dir, 0o750); err != nil {
		return fmt.Errorf("chmod socket directory %q to 0750: %w", dir, err)
	}
	return nil
}

// removeStaleSocket removes a socket file left by a camera that died, and
// refuses to touch one a running camera still serves or a non-socket file.
func removeStaleSocket(path string, sockType int) error {
	st, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("stat socket %q: %w", path, err)
	}
	if st.Mode()&os.ModeSocket == 0 {
		return fmt.Errorf("socket path %q exists and is not a socket (%v); refusing to remove it", path, st.Mode())
	}
	fd, err := dialUnix(path, sockType)
	switch {
	case err == nil:
		unix.Close(fd)
		return fmt.Errorf("socket %q is served by a running camera", path)
	case !errors.Is(err, unix.ECONNREFUSED):
		// Only a refused connect means nobody listens. A listener of the
		// other socket type (EPROTOTYPE), a full backlog (EAGAIN) or
		// another user's socket (EACCES) is someone's live socket.
		return fmt.Errorf("socket %q exists and may be in use (probe: %w); refusing to remove it", path, err)
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("remove stale socket %q: %w", path, err)
	}
	return nil
}

func dialSeqpacket(path string) (int, error) { return dialUnix(path, unix.SOCK_SEQPACKET) }

// dialUnix connects a unix socket of sockType (SOCK_SEQPACKET, or the copy
// baseline's SOCK_STREAM) to path.
func dialUnix(path string, sockType int) (int, error) {
	if err := checkSocketPath(path); err != nil {
		return -1, err
	}
	fd, err := unix.Socket(unix.AF_UNIX, sockType|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("socket: %w", err)
	}
	// Bounded: a unix connect waits for room in the listener's backlog up
	// to the send timeout, and forever without one (a camera that has
	// stopped accepting, with its backlog full, would hang Run past ctx).
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &unix.Timeval{Sec: 1}); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("set send timeout: %w", err)
	}
	if err := unix.Connect(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("connect %q: %w%s", path, err, accessHint(path, err))
	}
	return fd, nil
}

// accessHint says, for a connect refused by the socket's permissions
// (EACCES), whose socket it is and who may connect: its owner, and its
// group when the camera allows it (--allow-gid); "" otherwise.
func accessHint(path string, err error) string {
	var st unix.Stat_t
	if err != unix.EACCES || unix.Stat(path, &st) != nil {
		return ""
	}
	return fmt.Sprintf(" (the socket is uid %d gid %d, mode %#o, and this process uid %d gid %d: run it as uid %d, or in gid %d with the camera's --allow-gid %d)",
		st.Uid, st.Gid, st.Mode&0o777, os.Getuid(), os.Getgid(), st.Uid, st.Gid, st.Gid)
}

func accept(lfd int) (int, error) {
	for {
		fd, _, err := unix.Accept4(lfd, unix.SOCK_CLOEXEC)
		if err == unix.EINTR || err == unix.ECONNABORTED {
			continue
		}
		return fd, err
	}
}

func peerCred(fd int) (*unix.Ucred, error) {
	return unix.GetsockoptUcred(fd, unix.SOL_SOCKET, unix.SO_PEERCRED)
}

func setRecvTimeout(fd int, sec int64) error {
	return unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: sec})
}

// pendingRefusal reads, without waiting, a refuse message the camera sent
// before it closed the connection (a refusal carries no fds; any the
// kernel drops for want of room were not ours to keep).
func pendingRefusal(fd int) (string, bool) {
	buf := make([]byte, 512)
	for {
		n, _, err := unix.Recvfrom(fd, buf, unix.MSG_DONTWAIT)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n <= 0 {
			return "", false
		}
		return refusal(buf[:n])
	}
}

// sendNow sends one datagram without blocking.
func sendNow(fd int, b []byte) error {
	for {
		err := unix.Sendto(fd, b, unix.MSG_DONTWAIT|unix.MSG_NOSIGNAL, nil)
		if err != unix.EINTR {
			return err
		}
	}
}

// sendBlocking sends one datagram, waiting for room (control messages only).
func sendBlocking(fd int, b []byte, fds []int) error {
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	for {
		err := unix.Sendmsg(fd, b, oob, nil, unix.MSG_NOSIGNAL)
		if err != unix.EINTR {
			return err
		}
	}
}

// recv receives one datagram into b. A datagram longer than b is reported
// as truncated (MSG_TRUNC gives its full length). n == 0 with a nil error
// is an orderly shutdown by the peer. Non-blocking when dontwait is set.
func recv(fd int, b []byte, dontwait bool) (n int, truncated bool, err error) {
	flags := unix.MSG_TRUNC
	if dontwait {
		flags |= unix.MSG_DONTWAIT
	}
	for {
		n, err = recvNoAddr(fd, b, flags)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, false, err
		}
		return min(n, len(b)), n > len(b), nil
	}
}

// recvNoAddr is recvfrom(2) without the source address. unix.Recvfrom
// allocates a Sockaddr per call, which the per-frame path cannot afford;
// connected SEQPACKET sockets have no use for the address.
func recvNoAddr(fd int, b []byte, flags int) (int, error) {
	var p unsafe.Pointer
	if len(b) > 0 {
		p = unsafe.Pointer(&b[0])
	}
	n, _, errno := unix.Syscall6(unix.SYS_RECVFROM, uintptr(fd), uintptr(p), uintptr(len(b)), uintptr(flags), 0, 0)
	if errno != 0 {
		return 0, errno
	}
	return int(n), nil
}

// recvWithFds receives one datagram and up to maxFds passed fds.
func recvWithFds(fd int, b []byte, maxFds int) (int, []int, error) {
	oob := make([]byte, unix.CmsgSpace(4*maxFds))
	for {
		n, oobn, flags, _, err := unix.Recvmsg(fd, b, oob, unix.MSG_CMSG_CLOEXEC)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, nil, err
		}
		var fds []int
		if oobn > 0 {
			msgs, perr := unix.ParseSocketControlMessage(oob[:oobn])
			if perr != nil {
				return 0, nil, fmt.Errorf("parse control message: %w", perr)
			}
			for i := range msgs {
				got, rerr := unix.ParseUnixRights(&msgs[i])
				if rerr == nil {
					fds = append(fds, got...)
				}
			}
		}
		if flags&(unix.MSG_CTRUNC|unix.MSG_TRUNC) != 0 {
			closeFds(fds)
			return 0, nil, fmt.Errorf("%w: message or its fds truncated (flags %#x)", ErrProtocol, flags)
		}
		return n, fds, nil
	}
}

func closeFds(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

func shutdown(fd int) { unix.Shutdown(fd, unix.SHUT_RDWR) }

// shutdownOnDone shuts fd down once ctx is done, waking an accept or recv
// blocked on it, until stop is called. stop also waits for a shutdown
// that has begun, so call it (once) before fd is closed: a late shutdown
// would hit whatever socket reused the number.
func shutdownOnDone(ctx context.Context, fd int) (stop func()) {
	shut := make(chan struct{})
	stopShut := context.AfterFunc(ctx, func() { shutdown(fd); close(shut) })
	return func() {
		if !stopShut() {
			<-shut
		}
	}
}

// hungUp reports whether a SOCK_SEQPACKET socket's reading side is shut:
// the peer closed or shut down, or we did. A recv of 0 bytes is either
// that or an empty datagram from a live peer, which only poll tells apart
// (the kernel sets RDHUP on a unix socket whose peer is gone).
// A poll interrupted by a signal (the Go runtime's preemption signal
// among them) is asked again, not taken for a hang-up.
func hungUp(fd int) bool {
	pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLRDHUP}}
	n, err := unix.Poll(pfd, 0)
	for err == unix.EINTR {
		n, err = unix.Poll(pfd, 0)
	}
	return err != nil || n > 0 && pfd[0].Revents&(unix.POLLRDHUP|unix.POLLHUP|unix.POLLERR|unix.POLLNVAL) != 0
}

func closeFd(fd int) { unix.Close(fd) }
