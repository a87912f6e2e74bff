package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/zerohop/zerohop/handles"
	"github.com/zerohop/zerohop/handles/transport"
	"github.com/zerohop/zerohop/monotime"
	"github.com/zerohop/zerohop/pinned"
)

// lane is one transport's publishing side and, once started, its
// subscriber process.
type lane struct {
	name  string
	spec  childSpec
	extra []*os.File // handed to the child (fd 4 onwards)
	// connected reports that the subscriber is ready (polled during setup).
	connected func() bool
	// publish fills and sends message i and returns how many subscribers
	// got it.
	publish func(i int) (int, error)
	// close stops the publishing side, after the child is gone.
	close func()

	child *child
	next  int   // next message index
	cpuNs int64 // publisher CPU over this lane's measured chunks
	waits int   // zero-copy: publishes that waited for a free slot
}

// benchHandle is the handle of every message of a size: a point cloud of
// size/16 points, so that the zero-copy subscriber's validator accepts it.
func benchHandle(size int) handles.Handle {
	return handles.Handle{
		Kind:   handles.KindPoints,
		Length: uint64(size),
		Points: handles.PointFormat{Count: uint32(size / 16), Step: 16, X: 0, Y: 4, Z: 8, Intensity: 12, Datatype: handles.DatatypeFloat32},
	}
}

// serve runs serve(ctx) on a goroutine and returns the function that stops
// it and waits for it.
func serve(run func(context.Context) error) func() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		run(ctx)
	}()
	return func() {
		cancel()
		<-done
	}
}

// newZeroCopyLane serves a shared pool of cfg.Slots slots of exactly size
// bytes, written once here; per message the publisher writes only the seq
// into the first and last byte of the slot.
// name is zeroCopy, zeroCopySpin or zeroCopySpinSocket: how the subscriber
// waits.
func newZeroCopyLane(cfg benchConfig, size int, name string) (*lane, error) {
	pool, err := pinned.New(pinned.Geometry{SlotCount: uint32(cfg.Slots), SlotSize: uint64(size)},
		pinned.Options{Name: "bench-handoff", ID: 1, Shared: true})
	if err != nil {
		return nil, err
	}
	for i := range uint32(cfg.Slots) {
		fill(pool.SlotBytes(i)[:size])
	}
	sock := filepath.Join(cfg.Dir, name+".sock")
	// The subscriber sends its release before its ack, but the server
	// applies releases on its own goroutine, which a busy machine can stall
	// for a millisecond or more; with the default slack of 2 the subscriber
	// would then sit at its in-flight limit and miss a message. Allow it
	// every slot but the writer's instead (one subscriber: its share is
	// all of them); acquire waits (unmeasured) when none is free.
	srv, err := transport.NewServer(transport.ServerConfig{Path: sock, AllowGID: -1, Slack: cfg.Slots - 1, Subscribers: 1,
		Topics: []transport.Topic{{Name: topicName, Kind: handles.KindPoints, Pool: pool}}})
	if err != nil {
		pool.Close()
		return nil, err
	}
	stop := serve(srv.Serve)
	l := &lane{
		name:      name,
		spec:      childSpec{Transport: name, Socket: sock, Size: size},
		connected: func() bool { return srv.Subscribers(0).Len() == 1 },
		close: func() {
			stop()
			pool.Close()
		},
	}
	base := benchHandle(size)
	l.publish = func(i int) (int, error) {
		slot, err := acquire(pool, &l.waits)
		if err != nil {
			return 0, err
		}
		b := slot.Bytes()
		b[0], b[size-1] = byte(i), byte(i)
		h := base
		h.Seq = uint64(i)
		h.PublishNs = monotime.Now()
		n, err := srv.Publish(0, slot, &h)
		if err == nil && n != 1 {
			err = fmt.Errorf("reached %d subscribers, want 1 (server %+v, pool %+v)", n, srv.Stats(), pool.Stats())
		}
		return n, err
	}
	return l, nil
}

// acquire takes a free slot once every earlier message is released. With
// one message in flight and its release sent before its ack, that is
// normally at once, but releases may still be on their way to the server:
// then it retries (before the publish time is stamped, so unmeasured) and
// counts the wait. Waiting for all of them, not just for a free slot,
// matters: the server lets a subscriber hold all but one slot, so under
// load (releases lagging) a publish with a free slot could still reach
// nobody.
func acquire(pool *pinned.Pool, waits *int) (pinned.Slot, error) {
	deadline := time.Now().Add(time.Second)
	for try := 0; ; try++ {
		if pool.Stats().InUse > 0 && !time.Now().After(deadline) {
			pace(10 * time.Microsecond)
			continue
		}
		slot, err := pool.Acquire()
		if !errors.Is(err, pinned.ErrExhausted) || time.Now().After(deadline) {
			if try > 0 {
				*waits++
			}
			return slot, err
		}
		pace(10 * time.Microsecond)
	}
}

// newCopyLane serves the copy transport. The publisher's payload buffer is
// written once here; per message the publisher writes the seq into its
// first and last byte, and the whole payload goes through the socket.
func newCopyLane(cfg benchConfig, size int) (*lane, error) {
	sock := filepath.Join(cfg.Dir, "copy.sock")
	srv, err := transport.NewCopyServer(transport.CopyServerConfig{Path: sock, AllowGID: -1})
	if err != nil {
		return nil, err
	}
	stop := serve(srv.Serve)
	payload := make([]byte, size)
	fill(payload)
	base := benchHandle(size)
	return &lane{
		name:      copyStream,
		spec:      childSpec{Transport: copyStream, Socket: sock, Size: size},
		connected: func() bool { return srv.Subscribers() == 1 },
		close:     stop,
		publish: func(i int) (int, error) {
			payload[0], payload[size-1] = byte(i), byte(i)
			h := base
			h.Seq = uint64(i)
			h.PublishNs = monotime.Now()
			return srv.Publish(&h, payload)
		},
	}, nil
}

// newPipeLane is the wake-up floor: the publisher writes only its 8-byte
// publish time into a pipe, and the subscriber, blocked in read(2) on a
// locked thread, wakes. No event-driven transport can hand off faster than
// the machine wakes a blocked thread of another process.
func newPipeLane() (*lane, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("data pipe: %w", err)
	}
	wfd := int(w.Fd()) // blocking mode
	var msg [8]byte
	return &lane{
		name:      pipeWake,
		spec:      childSpec{Transport: pipeWake, Size: len(msg)},
		extra:     []*os.File{r},
		connected: func() bool { return true },
		close:     func() { w.Close() },
		publish: func(i int) (int, error) {
			binary.LittleEndian.PutUint64(msg[:], uint64(monotime.Now()))
			if _, err := unix.Write(wfd, msg[:]); err != nil {
				return 0, err
			}
			return 1, nil
		},
	}, nil
}

// fill writes a non-zero pattern, faulting every page in before measuring.
func fill(b []byte) {
	for i := range b {
		b[i] = byte(i*7 + 1)
	}
}
