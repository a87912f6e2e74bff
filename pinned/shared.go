package pinned

import "fmt"

// SharedMemory is a small sealed memfd mapping for control structures that
// sit beside the pools, such as the unix transport's handle rings. The
// process that creates it maps it read-write and is its only writer; peers
// get a read-only fd (ReadOnlyFd) and map it with OpenSharedMemory, which
// checks the seals and the size like OpenView does for a pool.
type SharedMemory struct {
	seg *segment
}

// NewSharedMemory creates a zeroed, sealed memfd of size bytes, mapped
// read-write. name shows in /proc/PID/maps as "memfd:zerohop:NAME".
func NewSharedMemory(name string, size uint64) (*SharedMemory, error) {
	if size == 0 {
		return nil, fmt.Errorf("shared memory %q: size 0", name)
	}
	seg, err := newMemfdSegment(name, size)
	if err != nil {
		return nil, fmt.Errorf("shared memory %q: %w", name, err)
	}
	return &SharedMemory{seg: seg}, nil
}

// OpenSharedMemory maps a received memfd read-only after checking that it
// is sealed against resizing and exactly size bytes long. It takes ownership
// of fd (closed by Close, or at once on error).
func OpenSharedMemory(fd int, size uint64) (*SharedMemory, error) {
	if size == 0 {
		closeFd(fd)
		return nil, fmt.Errorf("open shared memory fd %d: size 0", fd)
	}
	seg, err := openMemfdSegment(fd, size)
	if err != nil {
		closeFd(fd)
		return nil, fmt.Errorf("open shared memory: %w", err)
	}
	return &SharedMemory{seg: seg}, nil
}

// Bytes is the whole mapping: writable for its creator, read-only (writes
// fault) for a peer that opened it.
func (m *SharedMemory) Bytes() []byte { return m.seg.mem }

// ReadOnlyFd returns a new O_RDONLY fd of the memfd for a peer; the caller
// closes it after sending it.
func (m *SharedMemory) ReadOnlyFd() (int, error) { return m.seg.readOnlyFd() }

// WriteSealed is Pool.WriteSealed for this memory (false for a peer's).
func (m *SharedMemory) WriteSealed() bool { return m.seg.writeSealed }

// Close unmaps the memory and closes its fd. Nothing may use Bytes after.
func (m *SharedMemory) Close() error {
	if m == nil || m.seg == nil {
		return nil
	}
	err := m.seg.close()
	m.seg = nil
	return err
}
