package transport

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"golang.org/x/sys/unix"

	"github.com/zerohop/zerohop/handles"
	"github.com/zerohop/zerohop/internal/sockdir"
	"github.com/zerohop/zerohop/pinned"
)

// fixture is a server with one points pool on a socket in a temp dir.
type fixture struct {
	t      *testing.T
	pool   *pinned.Pool
	srv    *Server
	path   string
	cancel context.CancelFunc
	done   chan error
	log    *zap.Logger // the server's; nil: none
}

func newFixture(t *testing.T, slots uint32) *fixture {
	t.Helper()
	return newFixtureLogged(t, slots, nil)
}

// newFixtureLogged is newFixture with the server logging to log.
func newFixtureLogged(t *testing.T, slots uint32, log *zap.Logger) *fixture {
	t.Helper()
	path := filepath.Join(sockdir.Short(t), "sock", "camera.sock")
	pool, err := pinned.New(pinned.Geometry{SlotCount: slots, SlotSize: 4096}, pinned.Options{Name: "points", ID: 1, Shared: true})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, pool: pool, path: path, log: log}
	f.start()
	t.Cleanup(func() {
		f.stop()
		pool.Close()
	})
	return f
}

func (f *fixture) start() {
	srv, err := NewServer(ServerConfig{Path: f.path, AllowGID: -1, Topics: []Topic{{Name: "points", Kind: handles.KindPoints, Pool: f.pool}}, Log: f.log})
	if err != nil {
		f.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.srv, f.cancel, f.done = srv, cancel, make(chan error, 1)
	go func() { f.done <- srv.Serve(ctx) }()
}

func (f *fixture) stop() {
	if f.cancel == nil {
		return
	}
	f.cancel()
	if err := <-f.done; err != nil {
		f.t.Error(err)
	}
	f.cancel = nil
}

// publish writes a frame whose first byte is seq and publishes it.
func (f *fixture) publish(seq uint64) int {
	f.t.Helper()
	// A released slot is counted free (Stats) a moment before it is back
	// on the free list: wait that moment out, as a camera would drop the
	// frame. (Acquire alone failed so under qemu's arm64 emulation.)
	slot, err := f.pool.AcquireBefore(time.Now().Add(time.Second))
	if err != nil {
		f.t.Fatalf("acquire for frame %d: %v", seq, err)
	}
	b := slot.Bytes()
	b[0] = byte(seq)
	h := handles.Handle{Kind: handles.KindPoints, Seq: seq, Length: 32,
		Points: handles.PointFormat{Count: 2, Step: 16, X: 0, Y: 4, Z: 8, Intensity: 12, Datatype: handles.DatatypeFloat32}}
	h.Checksum = handles.PayloadChecksum(b[:32])
	n, err := f.srv.Publish(0, slot, &h)
	if err != nil {
		f.t.Fatal(err)
	}
	return n
}

func (f *fixture) waitInUse(want int64) {
	f.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for f.pool.Stats().InUse != want {
		if time.Now().After(deadline) {
			f.t.Fatalf("pool in use = %d, want %d", f.pool.Stats().InUse, want)
		}
		time.Sleep(time.Millisecond)
	}
}

func (f *fixture) waitSubscribers(n int) {
	f.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for f.srv.Subscribers(0).Len() != n {
		if time.Now().After(deadline) {
			f.t.Fatalf("%d subscribers connected, want %d", f.srv.Subscribers(0).Len(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

func startSubscriber(t *testing.T, cfg SubscriberConfig) (*Subscriber, context.CancelFunc, func() error) {
	t.Helper()
	if cfg.Name == "" {
		cfg.Name = "test"
	}
	if cfg.Topics == nil {
		cfg.Topics = []string{"points"}
	}
	s, err := NewSubscriber(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	var once sync.Once
	var runErr error
	wait := func() error {
		once.Do(func() { runErr = <-done })
		return runErr
	}
	t.Cleanup(func() {
		cancel()
		wait()
	})
	return s, cancel, wait
}

// waitMode is how a subscriber waits for handles: blocked in recv (the
// default), or spinning on the socket or on the handle rings (Spin).
type waitMode struct {
	name             string
	spin, spinSocket bool
}

var waitModes = []waitMode{{"blocking", false, false}, {"spin-socket", true, true}, {"spin-rings", true, false}}

func (m waitMode) apply(cfg SubscriberConfig) SubscriberConfig {
	cfg.Spin, cfg.SpinSocket = m.spin, m.spinSocket
	return cfg
}

// eachWaitMode runs test as a subtest per wait mode: every guarantee of the
// transport holds however the subscriber waits.
func eachWaitMode(t *testing.T, test func(t *testing.T, mode waitMode)) {
	for _, m := range waitModes {
		t.Run(m.name, func(t *testing.T) { test(t, m) })
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestHandoffDeliversAViewOfTheSlot(t *testing.T) {
	eachWaitMode(t, func(t *testing.T, mode waitMode) {
		f := newFixture(t, 4)
		sub, _, _ := startSubscriber(t, mode.apply(SubscriberConfig{Path: f.path}))
		f.waitSubscribers(1)
		if n := f.publish(7); n != 1 {
			t.Fatalf("publish reached %d subscribers, want 1", n)
		}
		l, err := sub.Latest(ctxT(t), 0)
		if err != nil {
			t.Fatal(err)
		}
		if l.Handle.Seq != 7 || len(l.Bytes()) != 32 || l.Bytes()[0] != 7 {
			t.Fatalf("lease seq %d, %d bytes, first %d; want seq 7, 32 bytes, first 7", l.Handle.Seq, len(l.Bytes()), l.Bytes()[0])
		}
		if handles.PayloadChecksum(l.Bytes()) != l.Handle.Checksum {
			t.Fatal("payload checksum mismatch")
		}
		if !l.Valid() {
			t.Fatal("fresh lease not valid")
		}
		f.waitInUse(1)
		if err := l.Release(); err != nil {
			t.Fatal(err)
		}
		if err := l.Release(); !errors.Is(err, ErrReleased) {
			t.Fatalf("second release = %v, want ErrReleased", err)
		}
		f.waitInUse(0)
		if st := f.pool.Stats(); st.Rejected.Total() != 0 {
			t.Fatalf("the camera rejected %d releases", st.Rejected.Total())
		}
	})
}

func TestKeepLastReleasesSupersededAtOnce(t *testing.T) {
	eachWaitMode(t, func(t *testing.T, mode waitMode) {
		f := newFixture(t, 8)
		sub, _, _ := startSubscriber(t, mode.apply(SubscriberConfig{Path: f.path, Depth: 1}))
		f.waitSubscribers(1)
		// Superseded leases go back without the consumer doing anything.
		for seq := uint64(1); seq <= 4; seq++ {
			f.publish(seq)
			deadline := time.Now().Add(5 * time.Second)
			for sub.Stats().Received < seq && time.Now().Before(deadline) {
				time.Sleep(100 * time.Microsecond)
			}
			f.waitInUse(1)
		}
		l, err := sub.Latest(ctxT(t), 0)
		if err != nil {
			t.Fatal(err)
		}
		if l.Handle.Seq != 4 {
			t.Fatalf("latest is frame %d, want 4", l.Handle.Seq)
		}
		if got := sub.Stats().Superseded; got != 3 {
			t.Fatalf("superseded = %d, want 3", got)
		}
		l.Release()
		f.waitInUse(0)
	})
}

func TestDisconnectReclaimsEveryLease(t *testing.T) {
	eachWaitMode(t, func(t *testing.T, mode waitMode) {
		f := newFixture(t, 8)
		var mu sync.Mutex
		var kept []Lease
		_, cancel, done := startSubscriber(t, mode.apply(SubscriberConfig{Path: f.path, OnLease: func(l Lease) {
			mu.Lock()
			kept = append(kept, l) // never released
			mu.Unlock()
		}}))
		f.waitSubscribers(1)
		for seq := uint64(1); seq <= 3; seq++ {
			f.publish(seq)
		}
		f.waitInUse(3)
		cancel()
		done()
		f.waitInUse(0)
		mu.Lock()
		defer mu.Unlock()
		for _, l := range kept {
			if l.Valid() {
				t.Fatal("lease still valid after its connection closed")
			}
			_ = l.Bytes()[0] // still mapped: reading must not fault
		}
		// The last release unmaps the old connection's pools and closes its fd.
		for _, l := range kept {
			if err := l.Release(); err != nil {
				t.Fatalf("release of an invalidated lease: %v", err)
			}
		}
	})
}

func TestInFlightLimitDropsInsteadOfBlocking(t *testing.T) {
	eachWaitMode(t, func(t *testing.T, mode waitMode) {
		f := newFixture(t, 16)
		var mu sync.Mutex
		var held []Lease // never released while publishing
		t.Cleanup(func() {
			mu.Lock()
			defer mu.Unlock()
			for _, l := range held {
				l.Release()
			}
		})
		_, _, _ = startSubscriber(t, mode.apply(SubscriberConfig{Path: f.path, Depth: 1, OnLease: func(l Lease) {
			mu.Lock()
			held = append(held, l)
			mu.Unlock()
		}}))
		f.waitSubscribers(1)
		// Depth 1 + slack 2 = 3 in flight; the rest are dropped for it.
		start := time.Now()
		for seq := uint64(1); seq <= 10; seq++ {
			f.publish(seq)
		}
		if el := time.Since(start); el > time.Second {
			t.Fatalf("10 publishes took %v", el)
		}
		st := f.pool.Stats()
		if len(st.Subscribers) != 1 || st.Subscribers[0].Drops != 7 {
			t.Fatalf("subscriber stats %+v, want 7 drops", st.Subscribers)
		}
		if st.InUse != 3 {
			t.Fatalf("in use = %d, want 3", st.InUse)
		}
	})
}

// The camera's subscriber_drops_total sums every subscriber's; the
// disconnect line says how many frames this one missed at its hold limit,
// so that the slow one can be named.
func TestDisconnectLogNamesTheFramesMissed(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	f := newFixtureLogged(t, 16, zap.New(core))
	var mu sync.Mutex
	var held []Lease
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, l := range held {
			l.Release()
		}
	}()
	_, cancel, wait := startSubscriber(t, SubscriberConfig{Path: f.path, Name: "slow-agent", Depth: 1, OnLease: func(l Lease) {
		mu.Lock()
		held = append(held, l)
		mu.Unlock()
	}})
	f.waitSubscribers(1)
	for seq := uint64(1); seq <= 10; seq++ {
		f.publish(seq) // 3 in flight (depth 1 + slack 2), 7 missed
	}
	cancel()
	wait()
	deadline := time.Now().Add(5 * time.Second)
	for logs.FilterMessageSnippet("subscriber disconnected").Len() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no disconnect line within 5 s: %v", logs.All())
		}
		time.Sleep(5 * time.Millisecond)
	}
	line := logs.FilterMessageSnippet("subscriber disconnected").All()[0]
	ctx := line.ContextMap()
	if ctx["subscriber"] != "slow-agent" || fmt.Sprint(ctx["frames_missed_at_hold_limit"]) != "map[points:7]" {
		t.Fatalf("disconnect line %q %v: want subscriber slow-agent with 7 frames missed on points", line.Message, ctx)
	}
}

func TestReconnectAfterCameraRestart(t *testing.T) {
	eachWaitMode(t, func(t *testing.T, mode waitMode) {
		f := newFixture(t, 4)
		sub, _, _ := startSubscriber(t, mode.apply(SubscriberConfig{Path: f.path, MinBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond}))
		f.waitSubscribers(1)
		f.publish(1)
		old, err := sub.Latest(ctxT(t), 0)
		if err != nil {
			t.Fatal(err)
		}
		f.stop()
		f.waitInUse(0)
		f.start()
		f.waitSubscribers(1)
		if old.Valid() {
			t.Fatal("lease from the old connection still valid")
		}
		_ = old.Bytes()[0] // mapped, not dangling
		if err := old.Release(); err != nil {
			t.Fatalf("release of an invalidated lease: %v", err)
		}
		f.publish(2)
		l, err := sub.Latest(ctxT(t), 0)
		if err != nil {
			t.Fatal(err)
		}
		if l.Handle.Seq != 2 {
			t.Fatalf("after reconnect got frame %d, want 2", l.Handle.Seq)
		}
		l.Release()
		f.waitInUse(0)
		if got := sub.Stats().Connects; got != 2 {
			t.Fatalf("connects = %d, want 2", got)
		}
	})
}

func TestRefusals(t *testing.T) {
	f := newFixture(t, 2)
	tests := []struct {
		name   string
		topics []string
		want   string
	}{
		{"unknown topic", []string{"lasers"}, `unknown topic "lasers"`},
		{"topic twice", []string{"points", "points"}, "asked for twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := NewSubscriber(SubscriberConfig{Path: f.path, Name: "x", Topics: tt.topics})
			if err != nil {
				t.Fatal(err)
			}
			err = s.Run(ctxT(t))
			if !errors.Is(err, ErrRefused) || !contains(err.Error(), tt.want) {
				t.Fatalf("Run = %v, want ErrRefused mentioning %q", err, tt.want)
			}
		})
	}
	if f.srv.Stats().Refused != 2 {
		t.Fatalf("refused = %d, want 2", f.srv.Stats().Refused)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

func TestSocketFileRules(t *testing.T) {
	f := newFixture(t, 1)
	st, err := os.Stat(f.path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o660 {
		t.Fatalf("socket mode %v, want 0660", st.Mode().Perm())
	}
	dst, _ := os.Stat(filepath.Dir(f.path))
	if dst.Mode().Perm() != 0o750 {
		t.Fatalf("created socket directory mode %v, want 0750", dst.Mode().Perm())
	}
	// An existing folder is the user's: its mode stays (the camera once
	// chmodded it to 0750, so a socket in /tmp closed /tmp to others).
	shared := filepath.Join(sockdir.Short(t), "shared")
	if err := os.Mkdir(shared, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, fs.ModeSticky|fs.ModePerm); err != nil {
		t.Fatal(err)
	}
	srv, err := NewServer(ServerConfig{Path: filepath.Join(shared, "camera.sock"), Topics: []Topic{{Name: "points", Kind: handles.KindPoints, Pool: f.pool}}, Log: f.log})
	if err != nil {
		t.Fatal(err)
	}
	stopped, stop := context.WithCancel(context.Background())
	stop()
	if err := srv.Serve(stopped); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(shared); err != nil || st.Mode()&(fs.ModePerm|fs.ModeSticky) != fs.ModePerm|fs.ModeSticky {
		t.Fatalf("existing socket directory after serving in it: %v %v, want drwxrwxrwt", st.Mode(), err)
	}
	// A file where the folder should be is named.
	notDir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := NewServer(ServerConfig{Path: filepath.Join(notDir, "camera.sock"), Topics: []Topic{{Name: "points", Kind: handles.KindPoints, Pool: f.pool}}, Log: f.log}); err == nil || !contains(err.Error(), "not a directory") {
		t.Fatalf("socket under a file: %v", err)
	}
	// A second camera on the same socket is refused, not allowed to steal it.
	if _, err := NewServer(ServerConfig{Path: f.path, Topics: []Topic{{Name: "points", Kind: handles.KindPoints, Pool: f.pool}}, Log: f.log}); err == nil || !contains(err.Error(), "running camera") {
		t.Fatalf("second server on a live socket: %v", err)
	}
	// A regular file in the way is not deleted.
	other := filepath.Join(t.TempDir(), "file")
	os.WriteFile(other, []byte("keep"), 0o600)
	if _, err := NewServer(ServerConfig{Path: other, Topics: []Topic{{Name: "points", Kind: handles.KindPoints, Pool: f.pool}}, Log: f.log}); err == nil || !contains(err.Error(), "not a socket") {
		t.Fatalf("server over a regular file: %v", err)
	}
	// A stale socket from a dead camera is replaced.
	f.stop()
	fd, err := listenSeqpacket(f.path)
	if err != nil {
		t.Fatal(err)
	}
	closeFd(fd) // bound, now nobody listens: stale
	f.start()
}

func TestAdmitPeer(t *testing.T) {
	tests := []struct {
		name          string
		uid, gid      uint32
		myUID, allow  int
		admit         bool
		wantInMessage string
	}{
		{"same uid", 1000, 1000, 1000, -1, true, ""},
		{"same uid, other gid", 1000, 5, 1000, 44, true, ""},
		{"other uid, no gid allowed", 1001, 1001, 1000, -1, false, "no gid is allowed"},
		{"other uid, allowed gid", 1001, 44, 1000, 44, true, ""},
		{"other uid, other gid", 1001, 45, 1000, 44, false, "not the allowed gid 44"},
		{"root peer is not special", 0, 0, 1000, -1, false, "uid 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := admitPeer(42, tt.uid, tt.gid, tt.myUID, tt.allow)
			if (err == nil) != tt.admit {
				t.Fatalf("admitPeer = %v, want admit=%v", err, tt.admit)
			}
			if err != nil && (!strings.Contains(err.Error(), tt.wantInMessage) || !strings.Contains(err.Error(), "pid 42")) {
				t.Fatalf("refusal %q should name pid 42 and %q", err, tt.wantInMessage)
			}
		})
	}
}

// A path of 108 bytes fills sun_path with no room for its NUL: refused by
// name, as a longer one is (it used to reach bind and fail with EINVAL),
// and the copy server checks as the unix one does.
func TestSocketPathLimit(t *testing.T) {
	dir := sockdir.Short(t)
	path := filepath.Join(dir, strings.Repeat("s", 108-len(dir)-1))
	if len(path) != 108 {
		t.Fatalf("test path is %d bytes", len(path))
	}
	pool, err := pinned.New(pinned.Geometry{SlotCount: 2, SlotSize: 4096}, pinned.Options{Name: "points", ID: 1, Shared: true})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := NewServer(ServerConfig{Path: path, Topics: []Topic{{Name: "points", Kind: handles.KindPoints, Pool: pool}}}); err == nil || !strings.Contains(err.Error(), "at most 107") {
		t.Errorf("unix server at a 108-byte path: %v", err)
	}
	if _, err := NewCopyServer(CopyServerConfig{Path: path}); err == nil || !strings.Contains(err.Error(), "at most 107") {
		t.Errorf("copy server at a 108-byte path: %v", err)
	}
	ok := path[:107]
	srv, err := NewServer(ServerConfig{Path: ok, Topics: []Topic{{Name: "points", Kind: handles.KindPoints, Pool: pool}}})
	if err != nil {
		t.Fatalf("unix server at a 107-byte path: %v", err)
	}
	stopped, stop := context.WithCancel(context.Background())
	stop()
	if err := srv.Serve(stopped); err != nil {
		t.Fatal(err)
	}
}

// A subscriber the camera cannot admit for a reason of its own that
// passes (here every subscriber id of the pool taken; out of fds is
// another) is not refused, which would end it for good (the agent
// exited): the connection closes, it retries with its backoff, and gets
// in once an id is free.
func TestTransientAdmitFailureIsRetried(t *testing.T) {
	f := newFixture(t, 4)
	var ids []pinned.SubscriberID
	for range pinned.MaxSubscribers {
		id, err := f.pool.Subscribe(1)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	core, logs := observer.New(zap.InfoLevel)
	s, _, wait := startSubscriber(t, SubscriberConfig{Path: f.path, MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond, Log: zap.New(core)})
	ended := make(chan error, 1)
	go func() { ended <- wait() }()
	select {
	case err := <-ended:
		t.Fatalf("Run ended while the pool had no free subscriber id: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	if n := f.srv.Stats().Refused; n != 0 {
		t.Fatalf("%d subscribers refused for the camera's own trouble, want 0", n)
	}
	// Its log says why it waits.
	lines := logs.FilterMessage("waiting for the camera").All()
	if len(lines) == 0 || !strings.Contains(fmt.Sprint(lines[0].ContextMap()["error"]), "closed the connection before its welcome") {
		t.Fatalf("subscriber's log %+v: want \"waiting for the camera\" saying the camera closed before its welcome", logs.All())
	}
	f.pool.Unsubscribe(ids[0])
	if err := s.WaitConnected(ctxT(t)); err != nil {
		t.Fatalf("not connected once an id was free: %v", err)
	}
}

// A camera refusing our credentials says so and closes before it reads
// our hello: the hello may then fail (EPIPE), and the refusal waits to
// be read. The subscriber read it only when its hello got there first;
// else it retried, refused again each time, and never said why.
func TestRefusalReadAfterTheHelloFailed(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	camera, sub := fds[0], fds[1]
	defer unix.Close(sub)
	if err := sendBlocking(camera, marshalRefuse("peer uid 1000: not the camera's uid 0"), nil); err != nil {
		t.Fatal(err)
	}
	unix.Close(camera)
	if err := sendBlocking(sub, []byte("hello"), nil); !errors.Is(err, unix.EPIPE) {
		t.Fatalf("hello to a closed camera: %v, want EPIPE", err)
	}
	if reason, ok := pendingRefusal(sub); !ok || reason != "peer uid 1000: not the camera's uid 0" {
		t.Fatalf("pendingRefusal = %q, %t; want the camera's refusal", reason, ok)
	}
}

// A subscriber of another uid is refused once and stops, saying why,
// whichever of its hello and the camera's refusal comes first.
func TestCredentialRefusalStopsTheSubscriberAtOnce(t *testing.T) {
	pool, err := pinned.New(pinned.Geometry{SlotCount: 2, SlotSize: 4096}, pinned.Options{Name: "points", ID: 1, Shared: true})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	for i := range 20 {
		path := filepath.Join(sockdir.Short(t), "camera.sock")
		srv, err := NewServer(ServerConfig{Path: path, AllowGID: -1, Topics: []Topic{{Name: "points", Kind: handles.KindPoints, Pool: pool}}})
		if err != nil {
			t.Fatal(err)
		}
		srv.ownUID = os.Getuid() + 1 // before Serve reads it
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- srv.Serve(ctx) }()
		s, err := NewSubscriber(SubscriberConfig{Path: path, Name: "x", Topics: []string{"points"}})
		if err != nil {
			t.Fatal(err)
		}
		err = s.Run(ctxT(t))
		refused := srv.Stats().Refused
		cancel()
		<-done
		if !errors.Is(err, ErrRefused) || !contains(err.Error(), "not the camera's uid") {
			t.Fatalf("run %d: Run = %v, want ErrRefused naming the uid", i, err)
		}
		if refused != 1 {
			t.Fatalf("run %d: refused %d times, want once: the subscriber retried a refusal", i, refused)
		}
	}
}

// A connect refused by the socket's permissions says whose socket it is
// and who may connect.
func TestAccessHintNamesTheSocketsOwner(t *testing.T) {
	path := filepath.Join(t.TempDir(), "camera.sock")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o660); err != nil { // whatever the umask
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	hint := accessHint(path, unix.EACCES)
	if want := fmt.Sprintf("the socket is uid %d gid %d, mode 0660", st.Uid, st.Gid); !strings.Contains(hint, want) || !strings.Contains(hint, "--allow-gid") {
		t.Errorf("accessHint = %q, want it to say %q and name --allow-gid", hint, want)
	}
	if hint := accessHint(path, unix.ECONNREFUSED); hint != "" {
		t.Errorf("accessHint for ECONNREFUSED = %q, want none", hint)
	}
}
