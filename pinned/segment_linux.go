package pinned

// This file holds every system call the pool makes. Invariants it relies on:
//
//   - Mappings come from unix.Mmap and go back through unix.Munmap, which
//     tracks live mappings and refuses slices it did not hand out.
//   - A memfd segment's size is fixed at creation: F_SEAL_SHRINK|F_SEAL_GROW
//     then F_SEAL_SEAL, so no process holding the fd can truncate it and
//     make our mapping fault (SIGBUS) under a reader.
//   - Subscribers get a file description opened O_RDONLY (re-opened through
//     /proc/self/fd), so they cannot create a writable shared mapping of it
//     even with mmap or mprotect of their own; the kernel answers EACCES.
//   - That alone does not stop a subscriber from re-opening its fd O_RDWR
//     through its own /proc/self/fd (a memfd's inode is mode 0777). So once
//     the owner holds its writable mapping, the memfd also gets
//     F_SEAL_FUTURE_WRITE (Linux ≥ 5.1): no new writable mapping, write(2)
//     or hole punch by anyone, while the owner's mapping keeps working. On
//     an older kernel the seal is not available (EINVAL) and the segment
//     says so (writeSealed false), which the camera logs.
//
//	segment (memfd or anonymous), Stride = roundup(SlotSize, 4096)
//	0        Stride     2*Stride          (N-1)*Stride     N*Stride
//	+----------+----------+----- ... -----+----------------+-------------+
//	| slot 0   | slot 1   |               | slot N-1       | generations |
//	+----------+----------+----- ... -----+----------------+-------------+
//	 ^ payload starts on a page boundary. The lease state (slot words,
//	   holds, free list) lives in the owner's private memory, never in the
//	   segment; the generation table after the last slot is a published
//	   copy of each slot's current generation, u64 per slot, rounded up to
//	   a page (generations.go).

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// ErrNotMemfd reports an fd that is not a sealed memfd of the expected size.
var ErrNotMemfd = errors.New("not a sealed memfd of the announced size")

const requiredSeals = unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_SEAL

// segment is one contiguous mapping holding every slot of a pool.
type segment struct {
	mem   []byte
	fd    int // memfd, or -1 for anonymous memory
	alloc HostAllocator
	// allocated is what alloc.Allocate returned (mem is its first size
	// bytes): Free must get exactly that slice back.
	allocated []byte
	pinned    PinnedRegion
	locked    bool
	// writeSealed: the owner's memfd has F_SEAL_FUTURE_WRITE, so no one
	// else can get write access to it.
	writeSealed bool
}

// mmapAllocator is the default HostAllocator: private anonymous pages.
type mmapAllocator struct{}

func (mmapAllocator) Allocate(size int) ([]byte, error) {
	mem, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("mmap %d anonymous bytes: %w", size, err)
	}
	return mem, nil
}

func (mmapAllocator) Free(mem []byte) error { return unix.Munmap(mem) }

func newAnonSegment(size uint64, alloc HostAllocator) (*segment, error) {
	if alloc == nil {
		alloc = mmapAllocator{}
	}
	mem, err := alloc.Allocate(int(size))
	if err != nil {
		return nil, err
	}
	if uint64(len(mem)) < size {
		_ = alloc.Free(mem)
		return nil, fmt.Errorf("host allocator returned %d bytes, want %d", len(mem), size)
	}
	return &segment{mem: mem[:size:size], fd: -1, alloc: alloc, allocated: mem}, nil
}

func newMemfdSegment(name string, size uint64) (*segment, error) {
	fd, err := unix.MemfdCreate("zerohop:"+name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("memfd_create %q: %w", name, err)
	}
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("size memfd %q to %d bytes: %w", name, size, err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("seal memfd %q: %w", name, err)
	}
	mem, err := unix.Mmap(fd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("mmap memfd %q (%d bytes): %w", name, size, err)
	}
	// After our writable mapping exists: from now on no one (a subscriber
	// re-opening its fd O_RDWR included) can write the memfd but through it.
	writeSealed := true
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_FUTURE_WRITE|unix.F_SEAL_SEAL); err != nil {
		writeSealed = false // EINVAL before Linux 5.1
		_, err = unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SEAL)
		if err != nil {
			unix.Munmap(mem)
			unix.Close(fd)
			return nil, fmt.Errorf("seal memfd %q: %w", name, err)
		}
	}
	return &segment{mem: mem, fd: fd, writeSealed: writeSealed}, nil
}

// openMemfdSegment maps a received memfd read-only after checking that it is
// a sealed memfd of exactly size bytes: the geometry came over a socket and
// is not trusted until the kernel confirms it.
func openMemfdSegment(fd int, size uint64) (*segment, error) {
	seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: fd %d: F_GET_SEALS: %v", ErrNotMemfd, fd, err)
	}
	if seals&(unix.F_SEAL_SHRINK|unix.F_SEAL_GROW) != unix.F_SEAL_SHRINK|unix.F_SEAL_GROW {
		return nil, fmt.Errorf("%w: fd %d: seals %#x lack SHRINK|GROW", ErrNotMemfd, fd, seals)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("%w: fd %d: fstat: %v", ErrNotMemfd, fd, err)
	}
	if uint64(st.Size) != size {
		return nil, fmt.Errorf("%w: fd %d is %d bytes, geometry says %d", ErrNotMemfd, fd, st.Size, size)
	}
	mem, err := unix.Mmap(fd, 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mmap fd %d read-only (%d bytes): %w", fd, size, err)
	}
	return &segment{mem: mem, fd: fd}, nil
}

// readOnlyFd returns a new O_RDONLY file description of the memfd, for
// handing to a subscriber. The caller owns (and must close) it.
func (s *segment) readOnlyFd() (int, error) {
	if s.fd < 0 {
		return -1, errors.New("anonymous segment has no fd to share")
	}
	fd, err := unix.Open(fmt.Sprintf("/proc/self/fd/%d", s.fd), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("reopen memfd %d read-only: %w", s.fd, err)
	}
	return fd, nil
}

func (s *segment) lock() error {
	if err := unix.Mlock(s.mem); err != nil {
		var rl unix.Rlimit
		if gerr := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &rl); gerr != nil {
			return fmt.Errorf("mlock %d bytes: %w", len(s.mem), err)
		}
		return mlockError(err, uint64(len(s.mem)), rl)
	}
	s.locked = true
	return nil
}

// mlockError explains a failed mlock with the limit that most likely caused
// it and how to raise it.
func mlockError(err error, size uint64, rl unix.Rlimit) error {
	return fmt.Errorf("mlock %s: %w (RLIMIT_MEMLOCK soft %s, hard %s; need %s: raise it with `ulimit -l`, systemd LimitMEMLOCK= or docker --ulimit memlock=-1)",
		fmtBytes(size), err, fmtLimit(rl.Cur), fmtLimit(rl.Max), fmtBytes(size))
}

func (s *segment) close() error {
	var errs []error
	if s.pinned != nil {
		if err := s.pinned.Unpin(); err != nil {
			errs = append(errs, fmt.Errorf("unpin: %w", err))
		}
		s.pinned = nil
	}
	if s.mem != nil {
		if s.locked {
			_ = unix.Munlock(s.mem)
		}
		var err error
		if s.alloc != nil {
			err = s.alloc.Free(s.allocated)
		} else {
			err = unix.Munmap(s.mem)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("unmap: %w", err))
		}
		s.mem = nil
	}
	if s.fd >= 0 {
		if err := unix.Close(s.fd); err != nil {
			errs = append(errs, fmt.Errorf("close fd %d: %w", s.fd, err))
		}
		s.fd = -1
	}
	return errors.Join(errs...)
}

func fmtLimit(v uint64) string {
	if v == unix.RLIM_INFINITY {
		return "unlimited"
	}
	return fmtBytes(v)
}

func fmtBytes(v uint64) string {
	switch {
	case v >= 1<<30 && v%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", v>>30)
	case v >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(v)/(1<<20))
	case v >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(v)/(1<<10))
	}
	return fmt.Sprintf("%d B", v)
}

func closeFd(fd int) {
	if fd >= 0 {
		unix.Close(fd)
	}
}

// AnonymousMemory is the HostAllocator in-process pools use when none is
// given (private anonymous mappings): a fallback for allocators that may
// fail, such as pinned GPU memory.
func AnonymousMemory() HostAllocator { return mmapAllocator{} }
