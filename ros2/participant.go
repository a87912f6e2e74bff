//go:build ros2 && cgo

package ros2

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// Participant is a DDS domain participant that ROS 2 tools see as one
// more process. It owns its endpoints and one goroutine that logs their
// status changes (matches, incompatible QoS, lost samples). Methods are
// safe for concurrent use. Close it last: it closes the endpoints still
// open.
type Participant struct {
	cfg Config
	log *zap.Logger
	pp  entity // participant
	dom entity // domain, created for this participant alone
	ws  entity // status waitset: every endpoint is attached to it

	// The ROS graph announcement (ros_discovery_info): the participant's
	// GUID and the writer; written under mu whenever endpoints change.
	gid       guid
	graph     entity
	graphErrs int // failed announcements, under mu; the first is logged

	// Built-in readers of discovered remote publications and
	// subscriptions, attached to the status waitset (typeMismatches).
	seenPubs, seenSubs entity

	mu        sync.Mutex
	closed    bool
	endpoints map[entity]*endpoint // by DDS handle, for the status goroutine
	subs      map[*Subscription]struct{}
	servers   map[*ParameterServer]struct{}
	// remoteTypes are the (side, topic, type) the graph's other
	// participants use, at most maxRemoteTypes; warnedTypes those already
	// logged as not matching one of ours. Both under mu.
	remoteTypes map[remoteType]struct{}
	warnedTypes map[remoteType]struct{}

	stopping  atomic.Bool   // set before the status waitset is woken for the last time
	watchDone chan struct{} // closed when the status goroutine has returned
}

// NewParticipant creates domain cfg.Domain with cfg's Cyclone
// configuration and a participant in it. Only one Participant per domain
// can exist in a process (ErrDomainInUse): share it. log may be nil.
func NewParticipant(cfg Config, log *zap.Logger) (*Participant, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = zap.NewNop()
	}
	sec, err := cfg.securityPlan()
	if err != nil {
		return nil, err
	}
	config := cfg.CycloneConfig()
	pp, dom, rc := createParticipant(cfg.Domain, config, cfg.userData(), sec.props)
	switch {
	case rc == rcPreconditionNotMet:
		return nil, fmt.Errorf("%w: domain %d", ErrDomainInUse, cfg.Domain)
	case rc < 0 && sec.props != nil:
		// Cyclone says on stderr which file or check failed.
		return nil, fmt.Errorf("%w: %w: enclave %s (%s): Cyclone DDS refused its certificates, permissions or governance (its log line above says which), or this libddsc has no DDS Security",
			errSecurity, &ddsError{op: "create participant in domain " + strconv.Itoa(int(cfg.Domain)), rc: rc}, sec.enclave, sec.dir)
	case rc < 0:
		return nil, fmt.Errorf("%w (Cyclone configuration %q; run with CYCLONEDDS_URI tracing for details)",
			&ddsError{op: "create participant in domain " + strconv.Itoa(int(cfg.Domain)), rc: rc}, config)
	}
	if cfg.Security.Note != "" {
		log.Warn("ros2: " + cfg.Security.Note + " (rcl takes only ROS_SECURITY_ENABLE=true and ROS_SECURITY_STRATEGY=Enforce)")
	}
	switch {
	case sec.props != nil:
		log.Info("ros2: SROS2 security on: peers authenticated by the keystore's CA, access controlled, and protected as the enclave's governance says",
			zap.String("enclave", sec.enclave), zap.String("folder", sec.dir))
	case sec.insecureWhy != "":
		log.Warn("ros2: ROS_SECURITY_ENABLE=true but this node runs WITHOUT security (ROS_SECURITY_STRATEGY is not Enforce)",
			zap.String("why", sec.insecureWhy))
	}
	fail := func(err error) (*Participant, error) {
		deleteEntity(pp) // deletes its children too
		deleteEntity(dom)
		return nil, err
	}
	ws, rc := createWaitset(pp)
	if rc < 0 {
		return fail(&ddsError{op: "create status waitset", rc: rc})
	}
	gid, rc := entityGUID(pp)
	if rc < 0 {
		return fail(&ddsError{op: "get participant GUID", rc: rc})
	}
	gidSize, graphUserData := cfg.gidSize(), typeParticipantEntitiesInfo.userData()
	if gidSize != 16 {
		graphUserData = "" // the type hash is of the 16-byte form
	}
	graph, rc := createDiscoveryWriter(pp, gidSize, graphUserData)
	if rc < 0 {
		return fail(&ddsError{op: "create ros_discovery_info writer", rc: rc})
	}
	var seen [2]entity
	for i, pubs := range []bool{true, false} {
		if seen[i], rc = createBuiltinReader(pp, pubs); rc < 0 {
			return fail(&ddsError{op: "create built-in endpoint reader", rc: rc})
		}
		if rc := attach(ws, seen[i]); rc < 0 {
			return fail(&ddsError{op: "attach built-in endpoint reader to the status waitset", rc: rc})
		}
	}
	p := &Participant{
		cfg: cfg, log: log, pp: pp, dom: dom, ws: ws, gid: gid, graph: graph,
		seenPubs: seen[0], seenSubs: seen[1],
		endpoints:   map[entity]*endpoint{},
		subs:        map[*Subscription]struct{}{},
		servers:     map[*ParameterServer]struct{}{},
		remoteTypes: map[remoteType]struct{}{},
		warnedTypes: map[remoteType]struct{}{},
		watchDone:   make(chan struct{}),
	}
	p.mu.Lock()
	p.announceLocked()
	p.mu.Unlock()
	go p.watch()
	ns, name := cfg.node()
	if ignored := cfg.ignoredSettings(); len(ignored) > 0 {
		hint := "name peers in a Cyclone configuration (CYCLONEDDS_URI) instead"
		if cfg.Range == RangeLocalhost {
			hint = "set ROS_LOCALHOST_ONLY=1 (here and in the ROS nodes) to keep discovery on this host"
		}
		log.Warn("ros2: settings that ROS_DISTRO's rmw does not read are ignored",
			zap.String("ros_distro", cfg.Distro), zap.Strings("ignored", ignored), zap.String("hint", hint))
	}
	log.Info("ros2: participant up", zap.Uint32("domain", cfg.Domain),
		zap.String("discovery", cfg.discovery()), zap.Strings("static_peers", cfg.StaticPeers),
		zap.Bool("cyclonedds_uri", cfg.CycloneURI != ""), zap.String("node", strings.TrimSuffix(ns, "/")+"/"+name),
		zap.Int("gid_bytes", gidSize))
	return p, nil
}

// announceLocked writes the participant's node and the GUIDs of its
// endpoints to ros_discovery_info, so that ROS tools attribute them to
// the node. Called with mu held, after every endpoint change. A failure
// is counted and the first one logged: the endpoints work without it.
func (p *Participant) announceLocked() {
	var readers, writers []guid
	for _, ep := range p.endpoints {
		if ep.writer {
			writers = append(writers, ep.gid)
		} else {
			readers = append(readers, ep.gid)
		}
	}
	for _, gs := range [][]guid{readers, writers} {
		slices.SortFunc(gs, func(a, b guid) int { return bytes.Compare(a[:], b[:]) })
	}
	ns, name := p.cfg.node()
	if rc := writeDiscovery(p.graph, p.cfg.gidSize(), p.gid, ns, name, readers, writers); rc < 0 {
		if p.graphErrs++; p.graphErrs == 1 {
			p.log.Warn("ros2: ros_discovery_info write failed; ros2 node list may not show this node (logged once)",
				zap.Error(&ddsError{op: "write ros_discovery_info", rc: rc}))
		}
	}
}

// Domain returns the DDS domain id.
func (p *Participant) Domain() uint32 { return p.cfg.Domain }

// Close closes every parameter server, endpoint and subscription still open, stops the
// status goroutine and deletes the participant and its domain. RELIABLE
// writers get up to Cyclone's writer linger duration (1 s) to have their
// last samples (the final zero cmd_vel) acknowledged. Close is idempotent.
func (p *Participant) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	servers := make([]*ParameterServer, 0, len(p.servers))
	for s := range p.servers {
		servers = append(servers, s)
	}
	subs := make([]*Subscription, 0, len(p.subs))
	for s := range p.subs {
		subs = append(subs, s)
	}
	eps := make([]*endpoint, 0, len(p.endpoints))
	for _, ep := range p.endpoints {
		eps = append(eps, ep)
	}
	p.mu.Unlock()

	var errs []error
	for _, s := range servers { // before their endpoints
		errs = append(errs, s.Close())
	}
	for _, s := range subs {
		errs = append(errs, s.Close())
	}
	for _, ep := range eps {
		errs = append(errs, ep.close())
	}
	p.stopping.Store(true)
	if rc := wakeup(p.ws); rc < 0 {
		errs = append(errs, &ddsError{op: "wake status waitset", rc: rc})
		deleteEntity(p.ws) // a deleted waitset fails the goroutine's wait
	}
	<-p.watchDone
	if rc := deleteEntity(p.pp); rc < 0 {
		errs = append(errs, &ddsError{op: "delete participant", rc: rc})
	}
	if rc := deleteEntity(p.dom); rc < 0 {
		errs = append(errs, &ddsError{op: "delete domain", rc: rc})
	}
	return errors.Join(errs...)
}

// endpoint is one DDS writer or reader and what its status log needs.
type endpoint struct {
	p        *Participant
	e        entity
	gid      guid // DDS GUID, as ros_discovery_info and the builtin topics name it
	writer   bool
	typ      msgType
	rosTopic string // fully qualified (Config.ResolveTopic): "/robot1/cmd_vel"
	ddsTopic string // "rt" + rosTopic
	qos      QoS    // resolved

	// mu orders writes and takes against close: after close returns no
	// call uses e.
	mu      sync.Mutex
	closed  bool
	release func() // frees the owner's C memory once closed; may be nil

	matched atomic.Int32 // current matched remote endpoints, kept by the status goroutine
	// Touched only by the status goroutine.
	lastMatchedTotal, lastIncompatible, lastLost uint32
	lastLostLogged                               uint32 // lostTotal at the last "samples lost" line
	lostLog                                      throttle
}

// lostLogEvery is the most often one endpoint logs lost samples: on a
// lossy link a BEST_EFFORT reader of large frames can lose one per frame.
const lostLogEvery = 10 * time.Second

// throttle passes at most one event per interval; the zero value passes
// the first.
type throttle struct{ last time.Time }

func (t *throttle) allow(now time.Time, every time.Duration) bool {
	if !t.last.IsZero() && now.Sub(t.last) < every {
		return false
	}
	t.last = now
	return true
}

// defaultMaxBlocking is a RELIABLE writer's max_blocking_time unless it
// says otherwise: the DDS default, 100 ms. Cyclone's KEEP_LAST writers
// never wait for acknowledgements, so it bounds only delivery to a full
// in-process reader (see mirrorMaxBlocking).
const defaultMaxBlocking = 100 * time.Millisecond

// newEndpoint creates a writer or reader on the ROS topic name, resolved
// against the participant's node (Config.ResolveTopic), and hands it to
// the status goroutine. maxBlocking is a RELIABLE writer's
// max_blocking_time (readers ignore it). release (may be nil) frees the
// owner's C memory when the endpoint closes, or now when newEndpoint
// fails; it is set before the endpoint becomes visible to
// Participant.Close, which may close it at once.
func (p *Participant) newEndpoint(t msgType, name string, writer bool, q QoS, maxBlocking time.Duration, release func()) (*endpoint, error) {
	rosTopic, ddsTopic, err := p.cfg.ddsTopicName(name)
	if err != nil {
		if release != nil {
			release()
		}
		return nil, err
	}
	return p.openEndpoint(t, rosTopic, ddsTopic, t.userData(), writer, q, maxBlocking, release)
}

// openEndpoint is newEndpoint once the names are resolved: rosTopic for
// logs, ddsTopic on the wire, userData the endpoint's USER_DATA.
func (p *Participant) openEndpoint(t msgType, rosTopic, ddsTopic, userData string, writer bool, q QoS, maxBlocking time.Duration, release func()) (_ *endpoint, err error) {
	defer func() {
		if err != nil && release != nil {
			release()
		}
	}()
	mask := readerStatusMask()
	if writer {
		mask = writerStatusMask()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrClosed
	}
	e, rc := createEndpoint(p.pp, t, ddsTopic, userData, writer, q, maxBlocking, mask)
	if rc < 0 {
		return nil, &ddsError{op: fmt.Sprintf("create %s %s on %s (%s)", t.rosName(), sideName(writer), ddsTopic, q), rc: rc}
	}
	g, rc := entityGUID(e)
	if rc < 0 {
		deleteEndpoint(e)
		return nil, &ddsError{op: "get GUID of " + sideName(writer) + " on " + ddsTopic, rc: rc}
	}
	ep := &endpoint{p: p, e: e, gid: g, writer: writer, typ: t, rosTopic: rosTopic, ddsTopic: ddsTopic, qos: q, release: release}
	p.endpoints[e] = ep
	if rc := attach(p.ws, e); rc < 0 {
		delete(p.endpoints, e)
		deleteEndpoint(e)
		return nil, &ddsError{op: "attach " + ddsTopic + " to the status waitset", rc: rc}
	}
	p.announceLocked()
	p.typeMismatchesLocked()
	return ep, nil
}

func sideName(writer bool) string {
	if writer {
		return "publisher"
	}
	return "subscription"
}

// close deletes the DDS endpoint; idempotent.
func (ep *endpoint) close() error {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	if ep.closed {
		return nil
	}
	ep.closed = true
	p := ep.p
	p.mu.Lock()
	delete(p.endpoints, ep.e)
	if !p.closed { // a closing participant's graph goes with it
		p.announceLocked()
	}
	p.mu.Unlock()
	detach(p.ws, ep.e) // fails only if already gone; deleting detaches anyway
	rc := deleteEndpoint(ep.e)
	if ep.release != nil {
		ep.release()
	}
	if rc < 0 && rc != rcAlreadyDeleted {
		return &ddsError{op: "delete " + sideName(ep.writer) + " on " + ep.ddsTopic, rc: rc}
	}
	return nil
}

// watch is the status goroutine: it waits on the status waitset and logs
// what changed for each endpoint that woke it. It returns once stopping
// is set and the waitset is woken (Close).
func (p *Participant) watch() {
	defer close(p.watchDone)
	var xs [16]int32
	for {
		n, rc := waitWakeups(p.ws, xs[:])
		if p.stopping.Load() {
			return
		}
		if rc < 0 {
			// The waitset cannot fail while the participant lives; if it
			// does, status logging ends but data keeps flowing.
			p.log.Error("ros2: status waitset failed; QoS and match changes are no longer logged", zap.Stringer("dds", rc))
			return
		}
		for _, e := range xs[:min(n, len(xs))] {
			if e := entity(e); e == p.seenPubs || e == p.seenSubs {
				p.takeDiscovered(e)
				continue
			}
			p.mu.Lock()
			ep := p.endpoints[entity(e)]
			p.mu.Unlock()
			if ep != nil {
				ep.report()
			}
		}
	}
}

// report reads and logs one endpoint's status changes. Called only by the
// status goroutine.
func (ep *endpoint) report() {
	st, rc := takeStatus(ep.e, ep.writer)
	if rc < 0 {
		return // deleted meanwhile
	}
	log := ep.p.log.With(zap.String("topic", ep.rosTopic), zap.String("dds_topic", ep.ddsTopic),
		zap.String("type", ep.typ.rosName()), zap.String("side", sideName(ep.writer)))
	if st.matchedTotal != ep.lastMatchedTotal || st.matchedChange != 0 {
		ep.lastMatchedTotal = st.matchedTotal
		ep.matched.Store(st.matched)
		peer := "subscriber"
		if !ep.writer {
			peer = "publisher"
		}
		msg := "ros2: " + peer + " matched"
		if st.matchedChange < 0 {
			msg = "ros2: " + peer + " left"
		}
		level := zap.InfoLevel
		if ep.typ.isService() {
			level = zap.DebugLevel // every `ros2 param` call comes and goes
		}
		log.Log(level, msg, zap.Int32("matched", st.matched), zap.Int32("change", st.matchedChange))
	}
	if st.incompatibleTotal != ep.lastIncompatible {
		ep.lastIncompatible = st.incompatibleTotal
		policy := policyName(st.incompatiblePolicy)
		log.Error("ros2: incompatible QoS: a remote endpoint will not communicate with this one",
			zap.String("policy", policy), zap.String("qos", ep.qos.String()),
			zap.Uint32("total", st.incompatibleTotal), zap.String("hint", ep.qosHint(policy)))
	}
	if st.lostTotal != ep.lastLost {
		// The total carries what lines held back in between.
		if ep.lostLog.allow(time.Now(), lostLogEvery) {
			log.Warn("ros2: samples lost (logged at most every 10 s per topic)", zap.Uint32("total", st.lostTotal), zap.Uint32("since_last_line", st.lostTotal-ep.lastLostLogged))
			ep.lastLostLogged = st.lostTotal
		}
		ep.lastLost = st.lostTotal
	}
}

// qosHint explains the usual incompatibilities in ROS terms.
func (ep *endpoint) qosHint(policy string) string {
	switch {
	case policy == "RELIABILITY" && ep.writer:
		return "a subscriber requests RELIABLE but this publisher offers BEST_EFFORT; subscribe with BEST_EFFORT (sensor data QoS) or publish RELIABLE"
	case policy == "RELIABILITY":
		return "this subscription requests RELIABLE but a publisher offers only BEST_EFFORT; subscribe with BEST_EFFORT (sensor data QoS)"
	case policy == "DURABILITY" && ep.writer:
		return "a subscriber requests TRANSIENT_LOCAL but this publisher offers VOLATILE; subscribe with VOLATILE"
	}
	return "compare `ros2 topic info -v " + ep.rosTopic + "` with this endpoint's QoS"
}

func zapTopic(ep *endpoint) zap.Field { return zap.String("topic", ep.rosTopic) }
func zapQoS(q QoS) zap.Field          { return zap.String("qos", q.String()) }

// rmemMax reads the kernel's cap on socket receive buffers; 0 if unknown.
func rmemMax() int {
	b, err := os.ReadFile("/proc/sys/net/core/rmem_max")
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}

// remoteType is a type another participant uses on a DDS topic: for a
// publication (writer) or a subscription.
type remoteType struct {
	writer     bool
	topic, typ string // DDS names
}

// maxRemoteTypes bounds remoteTypes: a graph has a few dozen topics, and a
// participant that invents types without end must not grow it forever.
const maxRemoteTypes = 1024

// takeDiscovered records the endpoints discovery reported on rd (one of
// the built-in readers) and checks them against ours. Called only by the
// status goroutine.
func (p *Participant) takeDiscovered(rd entity) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		d, ok, rc := takeDiscovered(rd)
		if rc < 0 || !ok {
			break
		}
		if !d.alive || d.participant == p.gid {
			continue
		}
		if len(p.remoteTypes) >= maxRemoteTypes && p.forgetOtherTopicsLocked() == 0 {
			continue
		}
		p.remoteTypes[remoteType{writer: rd == p.seenPubs, topic: d.topic, typ: d.typ}] = struct{}{}
	}
	p.typeMismatchesLocked()
}

// forgetOtherTopicsLocked drops the remote types of topics none of our
// endpoints is on, when remoteTypes is full: peers coming and going for
// days (each rqt start brings new service topics) filled it, and the
// check then went silent for our own topics. It returns how many it
// dropped. Called with mu held, only when full: O(entries × endpoints).
func (p *Participant) forgetOtherTopicsLocked() int {
	dropped := 0
	for rt := range p.remoteTypes {
		ours := false
		for _, ep := range p.endpoints {
			if ep.ddsTopic == rt.topic {
				ours = true
				break
			}
		}
		if !ours {
			delete(p.remoteTypes, rt)
			delete(p.warnedTypes, rt)
			dropped++
		}
	}
	return dropped
}

// typeMismatchesLocked warns, once per remote type, about a remote endpoint
// on one of our topics whose type differs from ours: DDS never matches
// them and reports nothing, so a TwistStamped controller (Jazzy's
// diff_drive_controller) would get no cmd_vel from a Twist publisher
// without a word. Called with mu held.
func (p *Participant) typeMismatchesLocked() {
	for rt := range p.remoteTypes {
		if _, done := p.warnedTypes[rt]; done {
			continue
		}
		for _, ep := range p.endpoints {
			if ep.writer == rt.writer || ep.ddsTopic != rt.topic || ep.typ.ddsName() == rt.typ {
				continue
			}
			p.warnedTypes[rt] = struct{}{}
			peer := "subscriber"
			if rt.writer {
				peer = "publisher"
			}
			p.log.Warn("ros2: a "+peer+" on this topic uses another message type; DDS will not connect them, so nothing flows between the two",
				zap.String("topic", ep.rosTopic), zap.String("type", ep.typ.rosName()),
				zap.String("remote_type", rosTypeName(rt.typ)), zap.String("hint", ep.typeHint(rt.typ)))
			break
		}
	}
}

// rosTypeName turns a DDS type name ("geometry_msgs::msg::dds_::Twist_")
// back into the ROS one ("geometry_msgs/msg/Twist"); other names stay.
func rosTypeName(dds string) string {
	pkg, name, ok := strings.Cut(dds, "::msg::dds_::")
	if !ok || !strings.HasSuffix(name, "_") {
		return dds
	}
	return pkg + "/msg/" + strings.TrimSuffix(name, "_")
}

// typeHint says how to make the two types agree, where zerohop can.
func (ep *endpoint) typeHint(remote string) string {
	switch {
	case ep.typ == typeTwist && remote == typeTwistStamped.ddsName():
		return "publish geometry_msgs/msg/TwistStamped instead: start the agent with --twist-stamped"
	case ep.typ == typeTwistStamped && remote == typeTwist.ddsName():
		return "publish geometry_msgs/msg/Twist instead: start the agent without --twist-stamped"
	}
	return "use one message type on the topic, or another topic name"
}
