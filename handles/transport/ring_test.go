package transport

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/zerohop/zerohop/handles"
	"github.com/zerohop/zerohop/internal/sockdir"
	"github.com/zerohop/zerohop/pinned"
)

func TestRingEntriesFor(t *testing.T) {
	for _, tc := range []struct {
		limit   int
		want    uint32
		wantErr bool
	}{
		{limit: 1, want: 8},
		{limit: 3, want: 8}, // depth 1 + slack 2
		{limit: 7, want: 8},
		{limit: 8, want: 16},
		{limit: 18, want: 32}, // MaxDepth + slack 2
		{limit: 1023, want: 1024},
		{limit: 1024, want: 2048}, // bench-handoff --slots 1024: slack slots-1, capped by the pool
		{limit: 2047, want: 2048},
		{limit: 0, wantErr: true},
		{limit: 2048, wantErr: true},
	} {
		got, err := ringEntriesFor(tc.limit)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("ringEntriesFor(%d) = %d, %v; want %d, error %t", tc.limit, got, err, tc.want, tc.wantErr)
		}
		if err == nil && int(got) <= tc.limit {
			t.Errorf("ringEntriesFor(%d) = %d: not above the hold limit", tc.limit, got)
		}
	}
}

// newTestRing is a writer and a reader over one page-aligned mapping.
func newTestRing(t *testing.T, entries uint32) (*ringWriter, *ringReader) {
	m, err := pinned.NewSharedMemory("test-ring", ringBytes(entries))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	r := newRingReader(m.Bytes(), entries)
	return newRingWriter(m.Bytes(), entries), &r
}

func testRecord(seq uint64) *[handles.Size]byte {
	var rec [handles.Size]byte
	for i := range rec {
		rec[i] = byte(seq) + byte(i)
	}
	return &rec
}

func TestRingReaderFollowsTheWriterAcrossLaps(t *testing.T) {
	w, r := newTestRing(t, 8)
	var got [handles.Size]byte
	if ok, err := r.poll(&got); ok || err != nil {
		t.Fatalf("poll of an empty ring = %t, %v; want false, nil", ok, err)
	}
	// Up to entries-1 unread at once, five laps round the ring.
	seq, read := uint64(0), uint64(0)
	for lap := 0; lap < 5; lap++ {
		for range 7 {
			seq++
			w.put(testRecord(seq))
		}
		for read < seq {
			ok, err := r.poll(&got)
			if err != nil || !ok {
				t.Fatalf("poll for handle %d = %t, %v", read+1, ok, err)
			}
			read++
			if got != *testRecord(read) {
				t.Fatalf("handle %d came back with other bytes", read)
			}
		}
		if ok, err := r.poll(&got); ok || err != nil {
			t.Fatalf("poll after reading all %d = %t, %v; want false, nil", seq, ok, err)
		}
	}
}

func TestRingReaderReportsOverrunAndGarbage(t *testing.T) {
	var got [handles.Size]byte
	t.Run("overrun", func(t *testing.T) {
		w, r := newTestRing(t, 8)
		for seq := uint64(1); seq <= 9; seq++ { // one more than the ring holds
			w.put(testRecord(seq))
		}
		if _, err := r.poll(&got); !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), "holds handle 9") {
			t.Fatalf("poll of an overrun ring = %v, want ErrProtocol naming handle 9", err)
		}
	})
	t.Run("garbage seq", func(t *testing.T) {
		w, r := newTestRing(t, 8)
		seqWord(w.mem[3*ringStride:]).Store(0xdead) // where handle 4 goes
		for seq := uint64(1); seq <= 3; seq++ {
			w.put(testRecord(seq))
			if ok, err := r.poll(&got); !ok || err != nil {
				t.Fatalf("poll for handle %d = %t, %v", seq, ok, err)
			}
		}
		if _, err := r.poll(&got); !errors.Is(err, ErrProtocol) {
			t.Fatalf("poll of a garbage entry = %v, want ErrProtocol", err)
		}
	})
}

// TestSpinRingsCarryTheHandles checks that a spinning subscriber gets its
// handles through rings the camera writes and it cannot, many laps round
// them, in order, with nothing invalid.
func TestSpinRingsCarryTheHandles(t *testing.T) {
	f := newFixture(t, 8)
	const frames = 2000
	var (
		mu       sync.Mutex
		lastSeq  uint64
		disorder int
		ringErr  error
		checked  bool
	)
	got := make(chan struct{}, 1)
	sub, _, _ := startSubscriber(t, SubscriberConfig{Path: f.path, Spin: true, OnLease: func(l Lease) {
		mu.Lock()
		if !checked {
			checked = true
			ss := l.owner.(*session)
			if ss.ringMem == nil {
				ringErr = errors.New("spinning subscriber's session has no handle rings")
			} else if err := unix.Mprotect(ss.ringMem.Bytes(), unix.PROT_READ|unix.PROT_WRITE); !errors.Is(err, unix.EACCES) {
				ringErr = errors.New("the subscriber could make its ring mapping writable: " + errString(err))
			} else if err := reopenRingsWritable(ss.ringMem); err != nil {
				ringErr = err
			}
		}
		if l.Handle.Seq != lastSeq+1 {
			disorder++
		}
		lastSeq = l.Handle.Seq
		mu.Unlock()
		l.Release()
		got <- struct{}{}
	}})
	f.waitSubscribers(1)
	f.srv.mu.Lock()
	for c := range f.srv.conns {
		if c.rings[0] == nil {
			t.Error("the camera's connection has no ring for the topic")
		}
	}
	f.srv.mu.Unlock()
	for seq := uint64(1); seq <= frames; seq++ {
		f.waitInUse(0) // the release of the last frame is applied
		if n := f.publish(seq); n != 1 {
			t.Fatalf("frame %d reached %d subscribers", seq, n)
		}
		select {
		case <-got:
		case <-time.After(5 * time.Second):
			t.Fatalf("frame %d never arrived", seq)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if ringErr != nil {
		t.Fatal(ringErr)
	}
	if disorder != 0 || lastSeq != frames {
		t.Fatalf("%d frames out of order, last %d; want 0, %d", disorder, lastSeq, frames)
	}
	if st := sub.Stats(); st.Invalid != 0 || st.Received != frames || st.Connects != 1 {
		t.Fatalf("subscriber stats %+v", st)
	}
}

func errString(err error) string {
	if err == nil {
		return "no error"
	}
	return err.Error()
}

// TestForgedRingEntryDropsTheConnection: garbage in the ring (a camera bug)
// is a protocol violation: counted, the connection dropped, its holds
// reclaimed, and the subscriber reconnects.
func TestForgedRingEntryDropsTheConnection(t *testing.T) {
	f := newFixture(t, 4)
	sub, _, _ := startSubscriber(t, SubscriberConfig{Path: f.path, Spin: true,
		MinBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond})
	f.waitSubscribers(1)
	f.srv.mu.Lock()
	for c := range f.srv.conns {
		c.mu.Lock()
		seqWord(c.rings[0].mem).Store(42) // entry 0 should hold handle 1 or nothing
		c.mu.Unlock()
	}
	f.srv.mu.Unlock()
	deadline := time.Now().Add(5 * time.Second)
	for st := sub.Stats(); st.Invalid == 0 || st.Connects < 2; st = sub.Stats() {
		if time.Now().After(deadline) {
			t.Fatalf("subscriber stats %+v: want the forged entry counted invalid and a reconnect", st)
		}
		time.Sleep(time.Millisecond)
	}
	f.waitSubscribers(1)
	f.publish(1)
	l, err := sub.Latest(ctxT(t), 0)
	if err != nil {
		t.Fatal(err)
	}
	if l.Handle.Seq != 1 {
		t.Fatalf("after reconnecting got frame %d, want 1", l.Handle.Seq)
	}
	l.Release()
	f.waitInUse(0)
}

// TestRingsSizedForEachTopicsHoldLimit: the rings share one length, which
// must exceed the hold limit of every topic, not only of the one with the
// smallest pool. A subscriber of depth 16 (hold limit 18) on a 64-slot
// "points" pool and a 4-slot "image" pool stalls on its first frame while
// the camera publishes 18 "points" frames: all 18 must arrive, none
// overwritten in the ring (sized for the 4-slot pool, the ring had 8
// entries, and the subscriber saw an overrun and dropped the connection).
func TestRingsSizedForEachTopicsHoldLimit(t *testing.T) {
	path := filepath.Join(sockdir.Short(t), "camera.sock")
	newPool := func(name string, id uint32, slots uint32) *pinned.Pool {
		p, err := pinned.New(pinned.Geometry{SlotCount: slots, SlotSize: 4096}, pinned.Options{Name: name, ID: id, Shared: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		return p
	}
	points, image := newPool("points", 1, 64), newPool("image", 2, 4)
	srv, err := NewServer(ServerConfig{Path: path, AllowGID: -1, Topics: []Topic{
		{Name: "points", Kind: handles.KindPoints, Pool: points}, {Name: "image", Kind: handles.KindPoints, Pool: image}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	defer func() { cancel(); <-done }()

	gate := make(chan struct{})
	var first atomic.Bool
	first.Store(true)
	sub, _, _ := startSubscriber(t, SubscriberConfig{Path: path, Spin: true, Depth: 16,
		Topics: []string{"points", "image"}, MinBackoff: time.Hour, MaxBackoff: time.Hour,
		OnLease: func(l Lease) {
			if first.Swap(false) { // the receive goroutine stalls once (GC pause, a slow callback)
				<-gate
			}
			l.Release()
		}})
	waitFor(t, 5*time.Second, "the subscriber joins both topics", func() bool { return srv.Subscribers(0) == 1 && srv.Subscribers(1) == 1 })
	const frames = 18 // depth 16 + slack 2: all may be in flight
	for seq := uint64(1); seq <= frames; seq++ {
		slot, err := points.Acquire()
		if err != nil {
			t.Fatal(err)
		}
		h := handles.Handle{Kind: handles.KindPoints, Seq: seq, Length: 32,
			Points: handles.PointFormat{Count: 2, Step: 16, X: 0, Y: 4, Z: 8, Intensity: 12, Datatype: handles.DatatypeFloat32}}
		h.Checksum = handles.PayloadChecksum(slot.Bytes()[:32])
		if n, err := srv.Publish(0, slot, &h); err != nil || n != 1 {
			t.Fatalf("publish %d: to %d subscribers, %v", seq, n, err)
		}
	}
	close(gate)
	waitFor(t, 5*time.Second, "18 frames received", func() bool { return sub.Stats().Received == frames })
	if st := sub.Stats(); st.Invalid != 0 || st.Connects != 1 {
		t.Fatalf("subscriber %+v: want no invalid handle and one connection", st)
	}
}

// waitFor polls cond until it holds, failing the test after timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: not yet %s", timeout, what)
		}
		time.Sleep(time.Millisecond)
	}
}

// reopenRingsWritable tries what a hostile subscriber could: re-open its
// read-only rings fd O_RDWR through /proc/self/fd and map that writable.
// The camera's F_SEAL_FUTURE_WRITE must refuse the mapping (EPERM).
func reopenRingsWritable(m *pinned.SharedMemory) error {
	fd, err := m.ReadOnlyFd()
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	rw, err := unix.Open(fmt.Sprintf("/proc/self/fd/%d", fd), unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil // refused at open: no write access either
	}
	defer unix.Close(rw)
	w, err := unix.Mmap(rw, 0, len(m.Bytes()), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err == nil {
		unix.Munmap(w)
		return errors.New("the subscriber mapped its rings writable through a re-opened fd")
	}
	if !errors.Is(err, unix.EPERM) {
		return fmt.Errorf("writable mmap of the re-opened rings fd: %v, want EPERM", err)
	}
	return nil
}
