package transport

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/zerohop/zerohop/handles"
	"github.com/zerohop/zerohop/monotime"
	"github.com/zerohop/zerohop/pinned"
)

// SubscriberConfig configures the agent's side of the unix transport.
type SubscriberConfig struct {
	Path   string   // camera socket; default DefaultSocketPath()
	Name   string   // shown in the camera's logs
	Topics []string // e.g. "points", "image"
	// Depth is keep-last-N per topic (default 1; fewer, with a warning, when
	// the camera grants fewer than Depth+2 slots): older undelivered leases
	// are released as soon as a newer one arrives.
	Depth int
	// Spin makes the receive goroutine poll instead of sleeping in recv:
	// lower handoff latency for the price of one busy core. It polls
	// handle rings in memory the camera writes (ring.go): no system call
	// per handle on either side.
	Spin bool
	// SpinSocket, with Spin, polls the socket with non-blocking recv
	// instead of the rings: the older spin mode, kept as the baseline that
	// bench-handoff measures the rings against.
	SpinSocket bool
	// Reconnect backoff bounds; defaults 20 ms and 1 s.
	MinBackoff, MaxBackoff time.Duration
	// WaitReminder is how often a subscriber that cannot reach the camera
	// says so again, as a warning with the socket and how long it has
	// waited (default 10 s): a wrong path must not look like an idle robot.
	WaitReminder time.Duration
	// OnLease, if set, is called on the receive goroutine with every lease
	// (inline delivery) instead of queueing it for Latest; it must Release
	// the lease, now or later.
	OnLease func(Lease)
	// Pinner registers each mapped pool with the GPU (read-only).
	Pinner pinned.Pinner
	Log    *zap.Logger
}

// SubscriberStats counts a subscriber's traffic.
type SubscriberStats struct {
	Received, Superseded, Invalid, Connects uint64
	Connected                               bool
}

// Subscriber receives handles from a camera over the unix transport and
// hands out leases. Run owns the connection; Latest and Lease.Release may be
// called from any goroutine.
type Subscriber struct {
	cfg  SubscriberConfig
	log  *zap.Logger
	mail []*mailbox

	connected                               atomic.Bool
	received, superseded, invalid, connects atomic.Uint64
	connectedCh                             chan struct{}
}

// NewSubscriber validates cfg. Call Run to connect.
func NewSubscriber(cfg SubscriberConfig) (*Subscriber, error) {
	if cfg.Path == "" {
		cfg.Path = DefaultSocketPath()
	}
	if cfg.Depth == 0 {
		cfg.Depth = 1
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = 20 * time.Millisecond
	}
	if cfg.MaxBackoff < cfg.MinBackoff {
		cfg.MaxBackoff = max(time.Second, cfg.MinBackoff)
	}
	if cfg.WaitReminder <= 0 {
		cfg.WaitReminder = 10 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	if cfg.Depth < 1 || cfg.Depth > MaxDepth {
		return nil, fmt.Errorf("subscriber: depth %d, want 1..%d", cfg.Depth, MaxDepth)
	}
	if err := checkName(cfg.Name, "subscriber name", NameSize); err != nil {
		return nil, fmt.Errorf("subscriber: %w", err)
	}
	if len(cfg.Topics) == 0 || len(cfg.Topics) > MaxTopics {
		return nil, fmt.Errorf("subscriber: %d topics, want 1..%d", len(cfg.Topics), MaxTopics)
	}
	s := &Subscriber{cfg: cfg, log: cfg.Log, connectedCh: make(chan struct{}, 1)}
	for _, t := range cfg.Topics {
		if err := checkName(t, "topic", TopicNameSize); err != nil {
			return nil, fmt.Errorf("subscriber: %w", err)
		}
		s.mail = append(s.mail, newMailbox(cfg.Depth, &s.superseded))
	}
	return s, nil
}

// Stats returns the subscriber's counters.
func (s *Subscriber) Stats() SubscriberStats {
	return SubscriberStats{
		Received: s.received.Load(), Superseded: s.superseded.Load(),
		Invalid: s.invalid.Load(), Connects: s.connects.Load(), Connected: s.connected.Load(),
	}
}

// Connected reports whether a camera connection is up.
func (s *Subscriber) Connected() bool { return s.connected.Load() }

// Latest waits until topic has a lease, and returns the freshest one,
// releasing any older queued ones. The caller must Release it.
func (s *Subscriber) Latest(ctx context.Context, topic int) (Lease, error) {
	return s.mail[topic].latest(ctx)
}

// TryLatest is Latest without waiting; ok is false when nothing is queued.
func (s *Subscriber) TryLatest(topic int) (Lease, bool) { return s.mail[topic].tryLatest() }

// C is topic's keep-last-N queue, for select loops: after receiving from
// it, call TryLatest for anything fresher (keep-last-N may hold more).
func (s *Subscriber) C(topic int) <-chan Lease { return s.mail[topic].ch }

// Run connects to the camera and receives until ctx is done, reconnecting
// with backoff whenever the camera goes away. It returns ctx's error, or
// at once an error the camera gave when refusing this subscriber.
func (s *Subscriber) Run(ctx context.Context) error {
	backoff := s.cfg.MinBackoff
	failing := false
	var waitingSince, remindAt time.Time
	for ctx.Err() == nil {
		sess, err := s.connect(ctx)
		if err != nil {
			if errors.Is(err, ErrRefused) {
				return err
			}
			if ctx.Err() != nil {
				break // stopped mid-handshake: the cut-off welcome is ours
			}
			if now := time.Now(); !failing {
				s.log.Info("waiting for the camera", zap.String("socket", s.cfg.Path), zap.Error(err))
				failing = true
				waitingSince, remindAt = now, now.Add(s.cfg.WaitReminder)
			} else if !now.Before(remindAt) {
				s.log.Warn("still waiting for the camera: is it running, and serving this socket? (it logs the socket it serves; the default depends on $XDG_RUNTIME_DIR)",
					zap.String("socket", s.cfg.Path), zap.Duration("waited", now.Sub(waitingSince).Round(time.Second)), zap.Error(err))
				remindAt = now.Add(s.cfg.WaitReminder)
			}
			select {
			case <-time.After(backoff):
			case <-ctx.Done():
			}
			backoff = min(2*backoff, s.cfg.MaxBackoff)
			continue
		}
		failing = false
		started := time.Now()
		s.connects.Add(1)
		s.connected.Store(true)
		select {
		case s.connectedCh <- struct{}{}:
		default:
		}
		s.log.Info("connected to the camera", zap.String("socket", s.cfg.Path))
		err = s.receive(ctx, sess)
		s.connected.Store(false)
		sess.dead.Store(true)
		// Tell the camera now, even while leases keep the fd open: it
		// reclaims every hold of this connection on seeing it close.
		shutdown(sess.fd)
		for _, m := range s.mail {
			m.drain()
		}
		sess.unref()
		if err != nil {
			s.log.Warn("camera connection dropped", zap.Error(err))
		} else if ctx.Err() == nil {
			s.log.Info("camera went away; reconnecting")
		}
		// A camera that drops us right after the welcome (or at the first
		// handle) must not get a reconnect loop without pause: backoff
		// grows across short sessions and resets only after a long one,
		// so a camera restart after a normal session is still joined at
		// once.
		if time.Since(started) < shortSession {
			select {
			case <-time.After(backoff):
			case <-ctx.Done():
			}
			backoff = min(2*backoff, s.cfg.MaxBackoff)
		} else {
			backoff = s.cfg.MinBackoff
		}
	}
	return ctx.Err()
}

// shortSession: a connection that ended sooner than this counts as a
// failed attempt for the reconnect backoff.
const shortSession = time.Second

// WaitConnected waits until Run has connected (at least once since the last
// call) or ctx is done.
func (s *Subscriber) WaitConnected(ctx context.Context) error {
	select {
	case <-s.connectedCh:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// session is one connection to the camera: its socket, the pools it
// mapped and the holds taken through it. It is freed (views unmapped, fd
// closed) when the connection is gone and the last lease is released, so a
// lease never points at unmapped memory.
type session struct {
	fd        int
	topicPool [MaxTopics]uint32
	views     [MaxTopics]*pinned.View
	// rings[i] carries topic i's handles when the camera granted rings.
	rings     [MaxTopics]ringReader
	ringMem   *pinned.SharedMemory
	validator *handles.Validator
	holds     holdTable
	refs      atomic.Int64
	dead      atomic.Bool
	log       *zap.Logger
}

func (ss *session) unref() {
	if ss.refs.Add(-1) != 0 {
		return
	}
	for _, v := range ss.views {
		if v != nil {
			v.Close()
		}
	}
	ss.ringMem.Close()
	closeFd(ss.fd)
}

// valid: held, the connection alive as far as we know, and the slot not
// acquired again by the camera. The last is exact where the first two can
// lag: the camera reclaims a connection's holds the moment it sees the
// connection end, and may be rewriting them before our receive goroutine
// learns of it; the generation table tells (pinned/generations.go). The
// reference keeps the view mapped while it is read, should a copy of this
// lease be released on another goroutine meanwhile.
func (ss *session) valid(topic int, slot uint32, gen, _ uint64) bool {
	if ss.dead.Load() || !ss.holds.holds(topic, slot, gen) || !ss.tryRef() {
		return false
	}
	defer ss.unref()
	return ss.views[topic].Current(slot, gen)
}

// tryRef takes a reference unless the session is already freed.
func (ss *session) tryRef() bool {
	for {
		n := ss.refs.Load()
		if n <= 0 {
			return false
		}
		if ss.refs.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

func (ss *session) release(topic int, pool, slot uint32, gen, _ uint64) error {
	if !ss.holds.give(topic, slot, gen) {
		return ErrReleased
	}
	defer ss.unref()
	if ss.dead.Load() {
		return nil // the camera reclaimed everything when we went away
	}
	r := handles.Release{PoolID: pool, Slot: slot, Generation: gen}
	var rec [handles.ReleaseSize]byte
	r.MarshalTo(&rec)
	err := sendNow(ss.fd, rec[:])
	if err == unix.EAGAIN {
		err = sendBlocking(ss.fd, rec[:], nil) // bounded by SO_SNDTIMEO
	}
	if err != nil {
		// The camera cannot learn of this release; drop the connection so
		// that it reclaims every hold instead of leaking this one.
		ss.log.Warn("release not delivered; reconnecting", zap.Error(err))
		// Dead before the camera can see the close and reclaim: a lease
		// read after this is not Valid (the reader would set it later).
		ss.dead.Store(true)
		shutdown(ss.fd)
		return fmt.Errorf("send release of pool %d slot %d: %w", r.PoolID, r.Slot, err)
	}
	return nil
}

func (s *Subscriber) connect(ctx context.Context) (*session, error) {
	fd, err := dialSeqpacket(s.cfg.Path)
	if err != nil {
		return nil, err
	}
	ss := &session{fd: fd, log: s.log}
	ss.refs.Store(1)
	ok := false
	defer func() {
		if !ok {
			ss.unref()
		}
	}()
	// ctx ends the wait for the welcome (up to 5 s from a camera that has
	// queued us but not yet accepted): shutdown wakes the recv. Deferred
	// after unref's defer, so it runs first: the fd is still open while a
	// started shutdown finishes.
	defer shutdownOnDone(ctx, fd)()
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &unix.Timeval{Sec: 1}); err != nil {
		return nil, fmt.Errorf("set send timeout: %w", err)
	}
	h := hello{depth: s.cfg.Depth, name: s.cfg.Name, topics: s.cfg.Topics}
	useRings := s.cfg.Spin && !s.cfg.SpinSocket
	if useRings {
		h.flags |= helloRing
	}
	if err := sendBlocking(fd, h.marshal(), nil); err != nil {
		// A camera that refuses our credentials says so as it accepts,
		// before it reads our hello, and closes: the hello may then fail
		// (EPIPE) with the refusal waiting to be read. Retrying would be
		// refused the same way, forever, only sometimes told why.
		if reason, refused := pendingRefusal(fd); refused {
			return nil, fmt.Errorf("%w: %s", ErrRefused, reason)
		}
		return nil, fmt.Errorf("send hello: %w", err)
	}
	if err := setRecvTimeout(fd, 5); err != nil {
		return nil, err
	}
	buf := make([]byte, 512)
	n, fds, err := recvWithFds(fd, buf, MaxTopics+1)
	if err != nil {
		// A refusal sent before our hello was read: the camera closed
		// with the hello unread, and the reset is reported ahead of the
		// refusal queued before it.
		if errors.Is(err, unix.ECONNRESET) {
			if reason, refused := pendingRefusal(fd); refused {
				return nil, fmt.Errorf("%w: %s", ErrRefused, reason)
			}
		}
		return nil, fmt.Errorf("waiting for welcome: %w", err)
	}
	if n == 0 && len(fds) == 0 {
		// The camera admits a subscriber it cannot serve for now (out of
		// fds, every subscriber id taken) by closing, not refusing.
		return nil, errCameraClosedBeforeWelcome
	}
	if reason, refused := refusal(buf[:n]); refused {
		closeFds(fds)
		return nil, fmt.Errorf("%w: %s", ErrRefused, reason)
	}
	pools, ringEntries, err := unmarshalWelcome(buf[:n], useRings)
	wantFds := len(pools)
	if useRings {
		wantFds++
	}
	if err != nil || len(fds) != wantFds || len(pools) != len(s.cfg.Topics) {
		closeFds(fds)
		if err == nil {
			err = fmt.Errorf("%w: welcome announces %d pools with %d fds for %d topics (rings: %t)", ErrProtocol, len(pools), len(fds), len(s.cfg.Topics), useRings)
		}
		return nil, err
	}
	if useRings {
		size := ringBytes(ringEntries)
		last := len(fds) - 1
		if ss.ringMem, err = pinned.OpenSharedMemory(fds[last], size*uint64(len(pools))); err != nil {
			closeFds(fds[:last])
			return nil, fmt.Errorf("handle rings: %w", err)
		}
		fds = fds[:last]
		mem := ss.ringMem.Bytes()
		for i, p := range pools {
			for j, t := range s.cfg.Topics {
				if t == p.topic {
					ss.rings[j] = newRingReader(mem[uint64(i)*size:][:size], ringEntries)
				}
			}
		}
	}
	geoms := make([]handles.Geometry, len(pools))
	for i, p := range pools {
		ti := -1
		for j, t := range s.cfg.Topics {
			if t == p.topic {
				ti = j
			}
		}
		if ti < 0 || ss.views[ti] != nil {
			closeFds(fds[i:])
			return nil, fmt.Errorf("%w: welcome announces topic %q", ErrProtocol, p.topic)
		}
		v, err := pinned.OpenView(fds[i], p.geom.PoolID,
			pinned.Geometry{SlotCount: p.geom.SlotCount, SlotSize: p.geom.SlotCapacity},
			pinned.ViewOptions{Pinner: s.cfg.Pinner})
		if err != nil {
			closeFds(fds[i+1:])
			return nil, fmt.Errorf("topic %q: %w", p.topic, err)
		}
		ss.views[ti] = v
		ss.topicPool[ti] = p.geom.PoolID
		ss.holds.init(ti, p.geom.SlotCount)
		geoms[i] = p.geom
		s.keepWithin(ti, p.topic, int(p.hold))
	}
	if ss.validator, err = handles.NewValidator(geoms...); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrProtocol, err)
	}
	if err := setRecvTimeout(fd, 0); err != nil {
		return nil, err
	}
	ok = true
	return ss, nil
}

// keepWithin sets how many leases topic ti's mailbox keeps queued under a
// hold limit of hold slots: keep-last-N needs N+2 (the lease being worked
// on, N queued, and one arriving to supersede the oldest). With fewer, a
// busy subscriber would sit at its limit with N stale leases queued, the
// camera would skip it, and it would take those up next.
func (s *Subscriber) keepWithin(ti int, topic string, hold int) {
	keep := min(s.cfg.Depth, max(1, hold-2))
	s.mail[ti].keep = keep
	if keep < s.cfg.Depth {
		s.log.Warn("the camera grants fewer slots than keep-last-N needs: keeping fewer frames",
			zap.String("topic", topic), zap.Int("granted_slots", hold), zap.Int("depth", s.cfg.Depth), zap.Int("keeping", keep),
			zap.String("why", "keep-last-N needs depth+2 slots; the camera shares each pool among its --subscribers: give it more --slots, or fewer --subscribers"))
	}
}

// receive takes handles until the connection ends. nil means the camera
// closed it (or ctx ended); an error means the camera sent something
// invalid.
func (s *Subscriber) receive(ctx context.Context, ss *session) error {
	// A blocked recv wakes when data arrives; keep that wake-up on one
	// thread rather than through the netpoller.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	// Run closes ss.fd once this returns; a shutdown begun by then is
	// waited for.
	defer shutdownOnDone(ctx, ss.fd)()
	if ss.ringMem != nil {
		return s.receiveRings(ctx, ss)
	}
	var buf [handles.Size + 1]byte
	spins := 0
	for {
		n, trunc, err := recv(ss.fd, buf[:], s.cfg.Spin)
		if err == unix.EAGAIN {
			if spins++; spins&0xfff == 0 && ctx.Err() != nil {
				return nil
			}
			continue
		}
		if err != nil {
			if errors.Is(err, unix.ECONNRESET) {
				return nil
			}
			return fmt.Errorf("receive: %w", err)
		}
		if n == 0 {
			if hungUp(ss.fd) {
				return nil // the camera went away, or we shut the socket
			}
			s.invalid.Add(1)
			return fmt.Errorf("%w: empty datagram, not a %d-byte handle", ErrProtocol, handles.Size)
		}
		now := monotime.Now()
		if trunc {
			s.invalid.Add(1)
			return fmt.Errorf("%w: datagram longer than a %d-byte handle", ErrProtocol, handles.Size)
		}
		if err := s.take(ss, buf[:n], now); err != nil {
			return err
		}
	}
}

// receiveRings polls the topics' handle rings until the connection ends.
// Every 4096 empty polls it checks ctx and the socket: the camera sends
// nothing on it once rings are in use, so a datagram there is a protocol
// violation and end of file is the camera going away.
func (s *Subscriber) receiveRings(ctx context.Context, ss *session) error {
	var rec [handles.Size]byte
	var buf [handles.Size + 1]byte
	topics := len(s.cfg.Topics)
	spins := 0
	for {
		got := false
		for ti := range topics {
			ok, err := ss.rings[ti].poll(&rec)
			if err != nil {
				s.invalid.Add(1)
				return err
			}
			if !ok {
				continue
			}
			if err := s.take(ss, rec[:], monotime.Now()); err != nil {
				return err
			}
			got = true
		}
		if got {
			continue
		}
		if spins++; spins&0xfff != 0 {
			continue
		}
		if ctx.Err() != nil {
			return nil
		}
		n, _, err := recv(ss.fd, buf[:], true)
		switch {
		case err == unix.EAGAIN:
		case errors.Is(err, unix.ECONNRESET):
			return nil
		case err != nil:
			return fmt.Errorf("receive: %w", err)
		case n == 0 && hungUp(ss.fd):
			return nil
		default:
			s.invalid.Add(1)
			return fmt.Errorf("%w: camera sent a %d-byte datagram on a connection that uses handle rings", ErrProtocol, n)
		}
	}
}

// take validates one received handle, records the hold and delivers the
// lease (inline, or into the topic's keep-last-N queue).
func (s *Subscriber) take(ss *session, b []byte, now int64) error {
	var h handles.Handle
	if err := ss.validator.Decode(&h, b); err != nil {
		s.invalid.Add(1)
		return err
	}
	ti := -1
	for i := range s.cfg.Topics {
		if ss.topicPool[i] == h.PoolID {
			ti = i
			break
		}
	}
	if ti < 0 || !ss.holds.take(ti, h.Slot, h.Generation) {
		s.invalid.Add(1)
		if h.Generation == 0 {
			return fmt.Errorf("%w: handle for pool %d slot %d with generation 0, which no pool issues", ErrProtocol, h.PoolID, h.Slot)
		}
		return fmt.Errorf("%w: handle for pool %d slot %d generation %d, which we already hold", ErrProtocol, h.PoolID, h.Slot, h.Generation)
	}
	ss.refs.Add(1)
	l := Lease{Handle: h, Topic: ti, ReceivedNs: now, data: ss.views[ti].Slot(h.Slot)[:h.Length], owner: ss}
	// Counted as handed over: before an inline callback, which may be
	// what the reader of the count waits on; after queueing, so that
	// whoever sees the count can take the lease.
	if s.cfg.OnLease != nil {
		s.received.Add(1)
		s.cfg.OnLease(l)
	} else {
		s.mail[ti].put(l)
		s.received.Add(1)
	}
	return nil
}
