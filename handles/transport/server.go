package transport

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/zerohop/zerohop/handles"
	"github.com/zerohop/zerohop/pinned"
)

// Topic is one stream the camera serves: a name subscribers ask for, the
// kind of data and the pool its slots come from.
type Topic struct {
	Name string
	Kind handles.Kind
	Pool *pinned.Pool
}

// ServerConfig configures the camera's side of the unix transport.
type ServerConfig struct {
	// Path of the SOCK_SEQPACKET socket (see DefaultSocketPath).
	Path string
	// AllowGID, when ≥ 0, also admits peers whose primary gid matches;
	// peers with the camera's own uid are always admitted.
	AllowGID int
	Topics   []Topic
	// Slack is how many slots a subscriber may hold beyond its depth (in
	// transit, being replaced). Default 2.
	Slack int
	// Subscribers is how many subscribers the pools are sized for (the
	// camera's --subscribers; default 2). Each may hold at most its share
	// of a pool, (slots−1)/Subscribers (at least MinShare; 2 on pools of 2
	// or 3 slots), so that up to that many cannot together leave the
	// camera without a slot, however many frames each keeps, when the
	// pools have at least MinShare·Subscribers+1 slots. More may connect,
	// without that guarantee (logged).
	Subscribers int
	// Absent names topics this server does not serve though a subscriber
	// may well ask for them (a camera without images: "image"), each with
	// why and what to do: a subscriber asking for one is refused with
	// that, rather than with a bare "unknown topic". The refusal, with the
	// topic's name and the served ones, must fit in 200 bytes.
	Absent map[string]string
	Log    *zap.Logger
}

// DefaultSocketPath is $XDG_RUNTIME_DIR/zerohop/camera.sock, or
// /run/zerohop/camera.sock without XDG_RUNTIME_DIR.
func DefaultSocketPath() string {
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return d + "/zerohop/camera.sock"
	}
	return "/run/zerohop/camera.sock"
}

// ServerStats counts what the server has seen.
type ServerStats struct {
	Accepted, Refused, Disconnected, Garbage uint64
	// SendDrops are handles that could not be sent (subscriber socket full
	// or dead); the hold was returned at once.
	SendDrops uint64
	Connected int
}

// errNoHello: the peer closed its connection without sending anything.
var errNoHello = errors.New("connection closed before its hello")

// Server serves pools to subscribers over a unix socket. Publish is safe to
// call from one goroutine per topic concurrently with everything else.
type Server struct {
	cfg    ServerConfig
	log    *zap.Logger
	lfd    int
	topics []*serverTopic
	ownUID int // the uid peers must have (os.Getuid(); tests change it)

	mu    sync.Mutex
	conns map[*conn]struct{}
	wg    sync.WaitGroup

	accepted, refused, disconnected, garbage, sendDrops atomic.Uint64
}

type serverTopic struct {
	Topic
	// subs[id] is the connection that holds pool subscriber id; wanted is
	// the set of ids Publish offers slots to. A connection is stored in
	// subs before its bit is set in wanted, and removed after it is cleared.
	subs   [pinned.MaxSubscribers]atomic.Pointer[conn]
	wanted atomic.Uint32
}

type conn struct {
	fd   int
	name string
	pid  int32
	// mu orders sends against close: fd is closed under mu with closed set.
	mu     sync.Mutex
	closed bool
	// subID[i] is this connection's subscriber id in topic i's pool, valid
	// where joined[i].
	subID  [MaxTopics]pinned.SubscriberID
	joined [MaxTopics]bool
	drops  atomic.Uint64
	// With a spinning subscriber (helloRing): rings[i] carries topic i's
	// handles instead of the socket; ringMem holds them all. Written under
	// mu, unmapped by drop after closed is set.
	rings   [MaxTopics]*ringWriter
	ringMem *pinned.SharedMemory
}

// NewServer validates the configuration and binds the socket.
func NewServer(cfg ServerConfig) (*Server, error) {
	if cfg.Path == "" {
		cfg.Path = DefaultSocketPath()
	}
	if cfg.Slack <= 0 {
		cfg.Slack = 2
	}
	if cfg.Subscribers == 0 {
		cfg.Subscribers = 2
	}
	if cfg.Subscribers < 0 || cfg.Subscribers > pinned.MaxSubscribers {
		return nil, fmt.Errorf("transport server: pools sized for %d subscribers, want 1..%d", cfg.Subscribers, pinned.MaxSubscribers)
	}
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	if len(cfg.Topics) == 0 || len(cfg.Topics) > MaxTopics {
		return nil, fmt.Errorf("transport server: %d topics, want 1..%d", len(cfg.Topics), MaxTopics)
	}
	s := &Server{cfg: cfg, log: cfg.Log, conns: map[*conn]struct{}{}, ownUID: os.Getuid()}
	seen := map[string]bool{}
	poolOf := map[uint32]string{} // pool id → topic: a subscriber's validator refuses a welcome with one id twice
	for _, t := range cfg.Topics {
		if err := checkName(t.Name, "topic", TopicNameSize); err != nil {
			return nil, fmt.Errorf("transport server: %w", err)
		}
		if seen[t.Name] {
			return nil, fmt.Errorf("transport server: topic %q twice", t.Name)
		}
		seen[t.Name] = true
		if t.Pool == nil {
			return nil, fmt.Errorf("transport server: topic %q has no pool", t.Name)
		}
		if other, ok := poolOf[t.Pool.ID()]; ok {
			return nil, fmt.Errorf("transport server: topics %q and %q have pools with one id, %d: give each its own pool and id", other, t.Name, t.Pool.ID())
		}
		poolOf[t.Pool.ID()] = t.Name
		s.topics = append(s.topics, &serverTopic{Topic: t})
	}
	for name := range cfg.Absent {
		if seen[name] {
			return nil, fmt.Errorf("transport server: topic %q both served and absent", name)
		}
		if r := s.absentRefusal(name); len(r) > maxRefuseReason {
			return nil, fmt.Errorf("transport server: the refusal for absent topic %q has %d bytes, at most %d fit: %q", name, len(r), maxRefuseReason, r)
		}
	}
	lfd, err := listenSeqpacket(cfg.Path)
	if err != nil {
		return nil, fmt.Errorf("transport server: %w", err)
	}
	s.lfd = lfd
	return s, nil
}

// Path is the socket path.
func (s *Server) Path() string { return s.cfg.Path }

// Serve accepts subscribers until ctx is done, then disconnects them all,
// removes the socket and returns.
func (s *Server) Serve(ctx context.Context) error {
	// Called before closeAll closes the listener.
	stopShutdown := shutdownOnDone(ctx, s.lfd)
	var pause time.Duration // while out of fds: the connection stays queued, so retrying at once would spin
	for {
		fd, err := accept(s.lfd)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			if transientAcceptError(err) {
				if pause == 0 {
					what := "accept failed"
					if errors.Is(err, unix.EMFILE) || errors.Is(err, unix.ENFILE) {
						what = "accept: out of file descriptors"
					}
					s.log.Warn(what+"; retrying with backoff", zap.Error(err))
				}
				pause = min(max(2*pause, 5*time.Millisecond), time.Second)
				select {
				case <-time.After(pause):
				case <-ctx.Done():
				}
				continue
			}
			stopShutdown()
			s.closeAll()
			return fmt.Errorf("accept on %q: %w", s.cfg.Path, err)
		}
		pause = 0
		c := &conn{fd: fd}
		s.mu.Lock()
		s.conns[c] = struct{}{}
		s.mu.Unlock()
		s.wg.Add(1)
		go s.serveConn(ctx, c)
	}
	stopShutdown()
	s.closeAll()
	return nil
}

// transientAcceptError reports whether accept may work when retried: out
// of fds or memory, or refused for this one connection (an LSM's EPERM,
// a protocol error). Anything else (EBADF, EINVAL: the listener itself is
// gone) ends Serve with the error, so the camera exits and is restarted
// instead of running on with no socket.
func transientAcceptError(err error) bool {
	for _, e := range []error{unix.EMFILE, unix.ENFILE, unix.ENOBUFS, unix.ENOMEM, unix.EPERM, unix.EPROTO, unix.ECONNABORTED, unix.EINTR} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

func (s *Server) closeAll() {
	s.mu.Lock()
	for c := range s.conns {
		shutdown(c.fd)
	}
	s.mu.Unlock()
	s.wg.Wait()
	closeFd(s.lfd)
	os.Remove(s.cfg.Path)
}

// serveConn admits one subscriber, then receives its releases until it goes.
func (s *Server) serveConn(ctx context.Context, c *conn) {
	defer s.wg.Done()
	// Under c.mu and only while open: drop sets closed before it closes the
	// fd, whose number a later connection may then reuse.
	stop := context.AfterFunc(ctx, func() {
		c.mu.Lock()
		if !c.closed {
			shutdown(c.fd)
		}
		c.mu.Unlock()
	})
	defer stop()
	log := s.log.With(zap.Int("fd", c.fd))
	if err := s.admit(c); err != nil {
		if errors.Is(err, errNoHello) {
			// A liveness probe (a second camera checking whether this
			// socket is served, before it refuses to start): no
			// subscriber, nothing refused.
			log.Debug("connection closed before its hello (a probe of this socket?)", zap.Int32("pid", c.pid))
			s.drop(c)
			return
		}
		if !isRefusal(err) {
			// The camera's own trouble, which passes (out of fds, every
			// subscriber id taken, a failed setsockopt): no refusal,
			// which would end the subscriber for good; it reconnects
			// with its backoff.
			log.Warn("subscriber not admitted this time; it will retry", zap.String("subscriber", c.name), zap.Int32("pid", c.pid), zap.Error(err))
			s.drop(c)
			return
		}
		s.refused.Add(1)
		log.Warn("subscriber refused", zap.String("subscriber", c.name), zap.Int32("pid", c.pid), zap.Error(err))
		sendBlocking(c.fd, marshalRefuse(err.Error()), nil)
		s.drop(c)
		return
	}
	s.accepted.Add(1)
	log = log.With(zap.String("subscriber", c.name), zap.Int32("pid", c.pid))
	handoff := "socket"
	if c.ringMem != nil {
		handoff = "rings" // a spinning subscriber: handles go into shared rings
	}
	log.Info("subscriber connected", zap.String("handles_via", handoff))
	if n := s.admitted(); n > s.cfg.Subscribers {
		log.Warn("more subscribers than the pools are sized for: one that keeps its frames can now leave the camera without slots, and the others without frames (start the camera with --subscribers for this many)",
			zap.Int("connected", n), zap.Int("sized_for", s.cfg.Subscribers))
	}
	reason := s.receiveReleases(c)
	if reason != nil {
		s.garbage.Add(1) // before drop, so that it is counted once the subscriber is gone
	}
	missed := s.missed(c) // before drop frees the subscriber ids
	s.drop(c)
	if reason != nil {
		log.Warn("subscriber disconnected for a protocol violation; its leases are reclaimed", zap.Error(reason), missed)
	} else {
		log.Info("subscriber disconnected; its leases are reclaimed", missed)
	}
}

// missed is a log field with the frames c missed per topic because it
// held as many as it may (pinned.Pool.SubscriberDrops): the camera's
// subscriber_drops_total sums every subscriber's, this names the slow one.
func (s *Server) missed(c *conn) zap.Field {
	m := make(map[string]uint64, len(s.topics))
	for ti, t := range s.topics {
		if c.joined[ti] {
			m[t.Name] = t.Pool.SubscriberDrops(c.subID[ti])
		}
	}
	return zap.Any("frames_missed_at_hold_limit", m)
}

// permanentRefusal is an admit error that retrying cannot cure: the
// subscriber's credentials, topics or protocol (ErrProtocol is one too).
// The subscriber is told (a refuse message) and stops; other admit errors
// close the connection, and it retries.
type permanentRefusal struct{ error }

func (r permanentRefusal) Unwrap() error { return r.error }

func isRefusal(err error) bool {
	var r permanentRefusal
	return errors.As(err, &r) || errors.Is(err, ErrProtocol)
}

func (s *Server) admit(c *conn) error {
	cred, err := peerCred(c.fd)
	if err != nil {
		return fmt.Errorf("SO_PEERCRED: %w", err)
	}
	c.pid = cred.Pid
	if err := admitPeer(cred.Pid, cred.Uid, cred.Gid, s.ownUID, s.cfg.AllowGID); err != nil {
		return permanentRefusal{err}
	}
	if err := setRecvTimeout(c.fd, 5); err != nil {
		return fmt.Errorf("set hello timeout: %w", err)
	}
	buf := make([]byte, helloSize+1)
	n, trunc, err := recv(c.fd, buf, false)
	if err != nil {
		return fmt.Errorf("waiting for hello: %w", err)
	}
	if n == 0 && !trunc {
		return errNoHello // end of stream (or an empty message, which no subscriber sends)
	}
	if trunc {
		return fmt.Errorf("%w: hello longer than %d bytes", ErrProtocol, helloSize)
	}
	var h hello
	if err := h.unmarshal(buf[:n]); err != nil {
		return err
	}
	c.name = h.name
	if err := setRecvTimeout(c.fd, 0); err != nil {
		return fmt.Errorf("clear hello timeout: %w", err)
	}
	// Join each wanted topic's pool, then announce them with their fds.
	var (
		infos  []poolInfo
		fds    []int
		joined []int // server topic index of each welcome entry
		limit  = h.depth + s.cfg.Slack
	)
	defer func() { closeFds(fds) }()
	for _, name := range h.topics {
		ti := s.topicIndex(name)
		if ti < 0 {
			if _, ok := s.cfg.Absent[name]; ok {
				return permanentRefusal{errors.New(s.absentRefusal(name))}
			}
			return permanentRefusal{fmt.Errorf("unknown topic %q (served: %s)", name, s.topicNames())}
		}
		if c.joined[ti] {
			return permanentRefusal{fmt.Errorf("topic %q asked for twice", name)}
		}
		t := s.topics[ti]
		hold := holdLimit(limit, t.Pool.Geometry().SlotCount, s.cfg.Subscribers)
		id, err := t.Pool.Subscribe(hold)
		if err != nil {
			return err
		}
		c.subID[ti], c.joined[ti] = id, true
		joined = append(joined, ti)
		fd, err := t.Pool.ShareFd()
		if err != nil {
			return err
		}
		fds = append(fds, fd)
		g := t.Pool.Geometry()
		infos = append(infos, poolInfo{topic: name, hold: uint32(hold), geom: handles.Geometry{
			PoolID: t.Pool.ID(), SlotCount: g.SlotCount, SlotCapacity: g.SlotSize, Kind: t.Kind,
		}})
	}
	var ringEntries uint32
	if h.flags&helloRing != 0 {
		var err error
		if ringEntries, err = s.makeRings(c, joined, limit); err != nil {
			return err
		}
		fd, err := c.ringMem.ReadOnlyFd()
		if err != nil {
			return fmt.Errorf("handle rings: %w", err)
		}
		fds = append(fds, fd)
	}
	if err := sendBlocking(c.fd, marshalWelcome(infos, ringEntries), fds); err != nil {
		return fmt.Errorf("send welcome: %w", err)
	}
	for ti, t := range s.topics {
		if c.joined[ti] {
			t.subs[c.subID[ti]].Store(c)
			t.wanted.Or(1 << c.subID[ti])
		}
	}
	return nil
}

// holdLimit is how many slots of a pool of slots one subscriber asking for
// limit (depth + slack) may hold at once, when the pool is sized for
// subscribers: its share, (slots−1)/subscribers, so that that many
// subscribers keeping all they get hold at most slots−1 together, and the
// camera always has one to write and every other subscriber gets frames
// (pinned.SlotsFor gives each at least MinShare). But at least MinShare
// (2 on pools of 2 or 3 slots): what a depth-1 subscriber needs to act on
// the freshest frame: the one it works on, one queued, and a newer one
// arriving to replace the queued one. At 2 the camera skips it while it
// works, and it would take up a stale frame next; at 1 a subscriber
// holding its current frame (the agent keeps an image until a newer one
// arrives) never got the next. Pools smaller than MinShare per subscriber
// plus one lose the guarantee; the camera warns at start.
func holdLimit(limit int, slots uint32, subscribers int) int {
	floor := max(2, min(MinShare, int(slots)-1))
	// Never more than the pool has: a 1-slot pool (the camera refuses one;
	// the API does not) grants its one slot.
	return min(limit, max(floor, (int(slots)-1)/max(subscribers, 1)), int(slots))
}

// MinShare is the fewest slots a subscriber may hold (holdLimit): a pool
// sized for N subscribers needs at least MinShare·N + 1 slots for the
// camera to guarantee that none starves the others.
const MinShare = 3

// makeRings gives c one handle ring per joined topic (in welcome order),
// each longer than the subscriber's hold limit on that topic, and returns
// their entry count. The rings share one length, so it is sized for the
// largest hold limit: sized for the smallest, a topic with a bigger pool
// could have more handles in flight than its ring has entries.
func (s *Server) makeRings(c *conn, joined []int, limit int) (uint32, error) {
	hold := 0
	for _, ti := range joined {
		hold = max(hold, holdLimit(limit, s.topics[ti].Pool.Geometry().SlotCount, s.cfg.Subscribers))
	}
	entries, err := ringEntriesFor(hold)
	if err != nil {
		return 0, err
	}
	size := ringBytes(entries)
	mem, err := pinned.NewSharedMemory("rings:"+c.name, size*uint64(len(joined)))
	if err != nil {
		return 0, fmt.Errorf("handle rings: %w", err)
	}
	c.ringMem = mem
	for i, ti := range joined {
		c.rings[ti] = newRingWriter(mem.Bytes()[uint64(i)*size:][:size], entries)
	}
	return entries, nil
}

// admitPeer admits a peer with the camera's uid, or with the allowed
// primary gid when allowGID ≥ 0; the error says who was refused and why.
func admitPeer(pid int32, uid, gid uint32, myUID, allowGID int) error {
	if int(uid) == myUID || (allowGID >= 0 && int(gid) == allowGID) {
		return nil
	}
	allowed := "no gid is allowed (--allow-gid)"
	if allowGID >= 0 {
		allowed = fmt.Sprintf("not the allowed gid %d", allowGID)
	}
	return fmt.Errorf("peer pid %d uid %d gid %d: not the camera's uid %d, and %s", pid, uid, gid, myUID, allowed)
}

// receiveReleases applies the subscriber's releases until it disconnects
// (nil) or sends something that is not a valid release of a slot it holds.
func (s *Server) receiveReleases(c *conn) error {
	var buf [handles.ReleaseSize + 1]byte
	var r handles.Release
	for {
		n, trunc, err := recv(c.fd, buf[:], false)
		if err != nil {
			if errors.Is(err, unix.ECONNRESET) {
				return nil
			}
			return fmt.Errorf("receive: %w", err)
		}
		if n == 0 {
			if hungUp(c.fd) {
				return nil // orderly close, or our own shutdown
			}
			return fmt.Errorf("%w: empty datagram, not a %d-byte release", ErrProtocol, handles.ReleaseSize)
		}
		if trunc {
			return fmt.Errorf("%w: datagram longer than a %d-byte release", ErrProtocol, handles.ReleaseSize)
		}
		if err := r.Unmarshal(buf[:n]); err != nil {
			return err
		}
		ti := s.poolTopic(r.PoolID)
		if ti < 0 || !c.joined[ti] {
			return fmt.Errorf("%w: release names pool %d, which this subscriber did not join", ErrProtocol, r.PoolID)
		}
		if err := s.topics[ti].Pool.Release(c.subID[ti], r.Slot, r.Generation); err != nil {
			return err
		}
	}
}

// admitted is how many subscribers joined a topic and are still connected
// (connections in their hello, or refused, are not).
func (s *Server) admitted() int {
	n := 0
	for _, t := range s.topics {
		n = max(n, bits.OnesCount32(t.wanted.Load()))
	}
	return n
}

// drop unregisters a connection, returns every slot it held and closes it.
// The socket is shut down first, so that the subscriber can see the end
// before any of its slots is written again (it checks its leases after
// reading them; see Lease.Valid).
func (s *Server) drop(c *conn) {
	shutdown(c.fd)
	for ti, t := range s.topics {
		if !c.joined[ti] {
			continue
		}
		id := c.subID[ti]
		t.wanted.And(^uint32(1 << id))
		t.subs[id].CompareAndSwap(c, nil)
	}
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	// No Publish writes the rings any more (closed is set under mu).
	c.ringMem.Close()
	for ti, t := range s.topics {
		if c.joined[ti] {
			t.Pool.Unsubscribe(c.subID[ti])
		}
	}
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	s.disconnected.Add(1)
	closeFd(c.fd)
}

func (s *Server) topicIndex(name string) int {
	for i, t := range s.topics {
		if t.Name == name {
			return i
		}
	}
	return -1
}

func (s *Server) poolTopic(id uint32) int {
	for i, t := range s.topics {
		if t.Pool.ID() == id {
			return i
		}
	}
	return -1
}

// absentRefusal is the refusal of a subscriber asking for absent topic
// name (ServerConfig.Absent).
func (s *Server) absentRefusal(name string) string {
	return fmt.Sprintf("no topic %q (served: %s): %s", name, s.topicNames(), s.cfg.Absent[name])
}

func (s *Server) topicNames() string {
	var out string
	for i, t := range s.topics {
		if i > 0 {
			out += ", "
		}
		out += t.Name
	}
	return out
}

// Subscribers returns the set of pool subscriber ids connected to topic i.
func (s *Server) Subscribers(topic int) pinned.SubscriberSet {
	return pinned.SubscriberSet(s.topics[topic].wanted.Load())
}

// Publish hands a written slot of topic i to every subscriber of the topic
// and sends each the handle h, whose pool, slot and generation fields it
// fills in. It never blocks: a subscriber at its in-flight limit or with a
// full socket misses this frame (counted). It returns how many subscribers
// got the handle.
func (s *Server) Publish(topic int, slot pinned.Slot, h *handles.Handle) (int, error) {
	t := s.topics[topic]
	h.PoolID = t.Pool.ID()
	h.Slot = slot.Index()
	h.Generation = slot.Generation()
	var rec [handles.Size]byte
	h.MarshalTo(&rec)
	// The connections are looked up before the holds are taken: a
	// subscriber that leaves in between frees its holds, and a newcomer
	// admitted under its id must not get a handle for a slot it does not
	// hold. A connection that changed is treated as not sent.
	wanted := t.wanted.Load()
	var conns [pinned.MaxSubscribers]*conn
	for m := wanted; m != 0; m &= m - 1 {
		id := bits.TrailingZeros32(m)
		conns[id] = t.subs[id].Load()
	}
	held, err := t.Pool.Publish(slot, pinned.SubscriberSet(wanted))
	if err != nil {
		return 0, err
	}
	sent := 0
	for m := uint32(held); m != 0; m &= m - 1 {
		id := pinned.SubscriberID(bits.TrailingZeros32(m))
		if c := conns[id]; c != nil && c == t.subs[id].Load() && c.send(topic, &rec) {
			sent++
			continue
		}
		// Not sent: the subscriber will never release it, so we do.
		s.sendDrops.Add(1)
		t.Pool.Release(id, slot.Index(), slot.Generation())
	}
	return sent, nil
}

// send hands topic's handle to the subscriber: into its ring when it spins
// on one (never fails: see ring.go), else as a datagram.
func (c *conn) send(topic int, rec *[handles.Size]byte) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	if w := c.rings[topic]; w != nil {
		w.put(rec)
		return true
	}
	if err := sendNow(c.fd, rec[:]); err != nil {
		c.drops.Add(1)
		return false
	}
	return true
}

// Stats returns the server's counters.
func (s *Server) Stats() ServerStats {
	s.mu.Lock()
	n := len(s.conns)
	s.mu.Unlock()
	return ServerStats{
		Accepted:     s.accepted.Load(),
		Refused:      s.refused.Load(),
		Disconnected: s.disconnected.Load(),
		Garbage:      s.garbage.Load(),
		SendDrops:    s.sendDrops.Load(),
		Connected:    n,
	}
}
