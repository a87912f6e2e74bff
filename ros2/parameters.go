//go:build ros2 && cgo

package ros2

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/zerohop/zerohop/ros2/params"
	"github.com/zerohop/zerohop/ros2/rosargs"
)

// ParameterServer answers rcl_interfaces' parameter services for the
// participant's node, as rclcpp's ParameterService does: `ros2 param list,
// get, describe, dump` (and `set`, which it refuses for read-only
// parameters, saying how to change them) work on the node. The six
// services are ~/describe_parameters, ~/get_parameter_types,
// ~/get_parameters, ~/list_parameters, ~/set_parameters and
// ~/set_parameters_atomically, each a request reader on
// "rq/<node>/<service>Request" and a reply writer on
// "rr/<node>/<service>Reply" with rmw_cyclonedds's request header and
// USER_DATA "serviceid=…;". One goroutine serves them all. Declared and
// changed parameters are announced on /parameter_events, as rclcpp's
// nodes announce theirs.
type ParameterServer struct {
	p    *Participant
	set  *params.Set
	opts ParameterOptions
	node string // the node's fully qualified name
	eps  [len(paramServices)]serviceEndpoints
	// events publishes on /parameter_events, as rclcpp's nodes do: every
	// parameter as new at start, then each successful set.
	events *endpoint
	ws     entity
	req    requestBuf
	done   chan struct{}

	stopping  atomic.Bool
	closeOnce sync.Once
	closeErr  error
	served    atomic.Uint64 // replies written
	dropped   atomic.Uint64 // requests not answered (client gone or never matched)
	dropLog   throttle      // goroutine only
	// deaf are the request writers whose reply reader never matched
	// within replyMatchWait, and when; goroutine only.
	deaf map[uint64]time.Time

	// The event being written, under events.mu.
	evStrs []byte
	evRecs []paramRec
	// Touched by the goroutine only.
	names    []byte
	values   []paramValueRec
	strs     []byte
	recs     []paramRec
	prefixes []uint32
}

type serviceEndpoints struct {
	srv        paramService
	name       string // "/robot1/zerohop_agent/get_parameters"
	req, reply *endpoint
}

// ParametersQoS is rmw_qos_profile_parameters: RELIABLE, VOLATILE,
// KEEP_LAST 1000.
func ParametersQoS() QoS { return QoS{Reliability: Reliable, Depth: 1000} }

// ParameterEventsQoS is rmw_qos_profile_parameter_events: the same as
// ParametersQoS.
func ParameterEventsQoS() QoS { return ParametersQoS() }

// ParameterEventsTopic is where nodes announce their parameters' changes.
const ParameterEventsTopic = "/parameter_events"

// replyMatchWait bounds how long a reply waits for the client's reply
// reader to be matched: discovery of a client's reader and writer is not
// simultaneous, and on a loaded machine the reader can come a good part
// of a second after the request (rmw_cyclonedds waits 100 ms and then
// drops the reply). Requests are answered one at a time, so a client
// that never shows its reader (deaf) costs this once: its later requests
// are dropped at once while it stays deaf (deafClients).
const replyMatchWait = time.Second

// maxDeafClients bounds the request writers remembered as deaf.
const maxDeafClients = 64

// ServeParameters starts the parameter services for set. Participant.Close
// closes the server first if it is still open.
func (p *Participant) ServeParameters(set *params.Set, opts ParameterOptions) (*ParameterServer, error) {
	if set == nil {
		return nil, fmt.Errorf("ros2: ServeParameters: nil parameter set")
	}
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	s := &ParameterServer{p: p, set: set, opts: opts, done: make(chan struct{})}
	fail := func(err error) (*ParameterServer, error) {
		for _, e := range s.eps {
			for _, ep := range []*endpoint{e.req, e.reply} {
				if ep != nil {
					ep.close()
				}
			}
		}
		if s.events != nil {
			s.events.close()
		}
		if s.ws != 0 {
			deleteEntity(s.ws)
		}
		return nil, err
	}
	ws, rc := createWaitset(p.pp)
	if rc < 0 {
		return fail(&ddsError{op: "create parameter services waitset", rc: rc})
	}
	s.ws = ws
	q := ParametersQoS()
	for i, srv := range paramServices {
		short, _ := srv.name()
		name, err := p.cfg.ResolveTopic("~/" + short)
		if err != nil {
			return fail(fmt.Errorf("ros2: parameter service %s: %w", short, err))
		}
		// The same id on both endpoints tells a client they belong
		// together (rmw_cyclonedds's check_for_service_reader_writer).
		ud := "serviceid=" + serviceID(p.gid, i) + ";"
		e := serviceEndpoints{srv: srv, name: name}
		if e.req, err = p.openEndpoint(typeRequest+msgType(srv), name, "rq"+name+"Request", ud, false, q, defaultMaxBlocking, nil); err != nil {
			return fail(err)
		}
		s.eps[i] = e
		if e.reply, err = p.openEndpoint(typeReply+msgType(srv), name, "rr"+name+"Reply", ud, true, q, defaultMaxBlocking, nil); err != nil {
			return fail(err)
		}
		s.eps[i] = e
		if rc := attachReader(ws, e.req.e); rc < 0 {
			return fail(&ddsError{op: "attach " + e.req.ddsTopic + " to its waitset", rc: rc})
		}
	}
	s.node = rosargs.FullName(p.cfg.node())
	var err error
	if s.events, err = p.newEndpoint(typeParameterEvent, ParameterEventsTopic, true, ParameterEventsQoS(), defaultMaxBlocking, nil); err != nil {
		return fail(err)
	}
	if s.req = newRequestBuf(); s.req.p == nil {
		return fail(errors.New("ros2: parameter services: out of C memory"))
	}
	// Every parameter is new, as rclcpp announces each it declares.
	all := set.All()
	names := make([]string, len(all))
	for i, prm := range all {
		names[i] = prm.Name
	}
	if err := s.announce(names, true); err != nil {
		p.log.Warn("ros2: parameter event not published", zap.Error(err))
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		s.req.free()
		return fail(ErrClosed)
	}
	p.servers[s] = struct{}{}
	go s.run()
	p.mu.Unlock()
	p.log.Info("ros2: serving parameters (ros2 param list/get/describe/dump/set; most are read at start, and a set of those is refused)",
		zap.String("node", s.node), zap.Int("parameters", set.Len()))
	return s, nil
}

// serviceID is the participant's GUID prefix and a counter, as
// rmw_cyclonedds's get_unique_csid makes one.
func serviceID(pp guid, i int) string {
	var b strings.Builder
	for j := 0; j < 12; j++ {
		if j > 0 {
			b.WriteByte('.')
		}
		b.WriteString(strconv.FormatUint(uint64(pp[j]), 16))
	}
	for _, c := range []byte{0, 0, 0, byte(i + 1)} {
		b.WriteString("." + strconv.FormatUint(uint64(c), 16))
	}
	return b.String()
}

// Served counts the replies written; Dropped the requests left unanswered
// because the client went away or its reply reader never matched.
func (s *ParameterServer) Served() uint64  { return s.served.Load() }
func (s *ParameterServer) Dropped() uint64 { return s.dropped.Load() }

// Close stops the goroutine and deletes the endpoints. Idempotent.
func (s *ParameterServer) Close() error {
	s.closeOnce.Do(func() {
		s.stopping.Store(true)
		if rc := wakeup(s.ws); rc < 0 {
			deleteEntity(s.ws)
		}
		<-s.done
		deleteEntity(s.ws)
		s.req.free()
		errs := []error{s.events.close()}
		for _, e := range s.eps {
			errs = append(errs, e.req.close(), e.reply.close())
		}
		for _, err := range errs {
			if err != nil && s.closeErr == nil {
				s.closeErr = err
			}
		}
		s.p.mu.Lock()
		delete(s.p.servers, s)
		s.p.mu.Unlock()
	})
	return s.closeErr
}

func (s *ParameterServer) run() {
	defer close(s.done)
	log := s.p.log
	var xs [8]int32
	for {
		_, rc := waitWakeups(s.ws, xs[:])
		if s.stopping.Load() {
			return
		}
		if rc < 0 {
			log.Error("ros2: parameter services waitset failed; ros2 param no longer gets answers", zap.Stringer("dds", rc))
			return
		}
		for i := range s.eps {
			for !s.stopping.Load() {
				ok, err := s.serveOne(&s.eps[i])
				if err != nil {
					// A take that fails will fail again (its read condition
					// stays triggered): stop rather than spin.
					log.Error("ros2: parameter service failed; ros2 param no longer gets answers", zap.String("service", s.eps[i].name), zap.Error(err))
					return
				}
				if !ok {
					break
				}
			}
		}
	}
}

// What one parameter request may ask: a node has tens of parameters, and
// a request with a huge names list (any participant in the domain may
// send one) would cost a reply many times its size, in buffers that stay.
const (
	maxRequestNames = 4096
	maxRequestBytes = 1 << 20
)

// serveOne takes and answers one request; false when there was none. Only
// a failed take is an error; a request that cannot be answered is counted
// (Dropped) and logged, and the next one is served.
func (s *ParameterServer) serveOne(e *serviceEndpoints) (bool, error) {
	req, ok, err := s.take(e)
	if err != nil || !ok {
		return false, err
	}
	if req.tooLarge {
		s.dropped.Add(1)
		if s.dropLog.allow(time.Now(), lostLogEvery) {
			s.p.log.Warn("ros2: parameter request too large, not answered (logged at most every 10 s)", zap.String("service", e.name),
				zap.Int("names", req.nnames), zap.Int("bytes", req.bytes), zap.Int("max_names", maxRequestNames), zap.Int("max_bytes", maxRequestBytes),
				zap.Uint64("dropped", s.dropped.Load()))
		}
		return true, nil
	}
	if err := s.reply(e, req); err != nil {
		s.dropped.Add(1)
		if s.dropLog.allow(time.Now(), lostLogEvery) {
			s.p.log.Warn("ros2: parameter request left unanswered (logged at most every 10 s)", zap.String("service", e.name),
				zap.Error(err), zap.Uint64("dropped", s.dropped.Load()))
		}
	}
	return true, nil
}

// take takes one request and copies what it asks into s.names and
// s.values; the request's loan is returned before take does.
func (s *ParameterServer) take(e *serviceEndpoints) (request, bool, error) {
	e.req.mu.Lock()
	defer e.req.mu.Unlock()
	if e.req.closed {
		return request{}, false, nil
	}
	req, n, rc := takeRequest(e.req.e, e.srv, s.req)
	if rc < 0 {
		return request{}, false, &ddsError{op: "take from " + e.req.ddsTopic, rc: rc}
	}
	if n == 0 {
		return request{}, false, nil
	}
	if req.nnames > maxRequestNames || req.bytes > maxRequestBytes {
		req.tooLarge = true
		if rc := returnRequest(e.req.e, s.req); rc < 0 {
			return request{}, false, &ddsError{op: "return a request's loan to " + e.req.ddsTopic, rc: rc}
		}
		return req, true, nil
	}
	s.names = grow(s.names, req.bytes)
	s.values = grow(s.values, req.nnames)
	rc = requestStrings(e.srv, s.req, s.names, s.values)
	if r := returnRequest(e.req.e, s.req); rc >= 0 {
		rc = r
	}
	if rc < 0 {
		return request{}, false, &ddsError{op: "read request from " + e.req.ddsTopic, rc: rc}
	}
	return req, true, nil
}

// reply answers req once the client can hear it (replyMatchWait; at
// once or never for a client already found deaf).
func (s *ParameterServer) reply(e *serviceEndpoints, req request) error {
	s.answer(e.srv, req, splitNUL(s.names[:req.bytes]))
	wait := replyMatchWait
	if _, deaf := s.deaf[req.writer]; deaf {
		wait = 0
	}
	deadline := time.Now().Add(wait)
	for {
		st, rc := clientReplyMatched(e.req.e, e.reply.e, req.writer)
		switch {
		case rc < 0:
			return &ddsError{op: "look for the client's reader of " + e.reply.ddsTopic, rc: rc}
		case st == 1:
			delete(s.deaf, req.writer)
		case st == 2:
			delete(s.deaf, req.writer)
			return errors.New("the client left before its reply")
		case !time.Now().Before(deadline) || s.stopping.Load():
			s.markDeaf(req.writer)
			return fmt.Errorf("the client's reply reader was not matched within %v (discovery one-sided, or a client that does not listen; its next requests are not waited for)", replyMatchWait)
		default:
			time.Sleep(10 * time.Millisecond)
			continue
		}
		break
	}
	e.reply.mu.Lock()
	defer e.reply.mu.Unlock()
	if e.reply.closed {
		return ErrClosed
	}
	if rc := writeReply(e.reply.e, e.srv, req.clientGUID, req.seq, s.strs, s.recs, s.prefixes); rc < 0 {
		return &ddsError{op: "write " + e.reply.ddsTopic, rc: rc}
	}
	s.served.Add(1)
	return nil
}

// markDeaf remembers a request writer whose reply reader did not match,
// forgetting the oldest past maxDeafClients.
func (s *ParameterServer) markDeaf(writer uint64) {
	if s.deaf == nil {
		s.deaf = map[uint64]time.Time{}
	}
	if len(s.deaf) >= maxDeafClients {
		var oldest uint64
		var when time.Time
		for w, t := range s.deaf {
			if when.IsZero() || t.Before(when) {
				oldest, when = w, t
			}
		}
		delete(s.deaf, oldest)
	}
	s.deaf[writer] = time.Now()
}

// answer builds the reply records of one request into s.strs, s.recs and
// s.prefixes. strs are the request's strings (zh_request_strings).
func (s *ParameterServer) answer(srv paramService, req request, strs []string) {
	s.strs, s.recs, s.prefixes = append(s.strs[:0], 0), s.recs[:0], s.prefixes[:0]
	switch srv {
	case srvList:
		names, prefixes := s.set.List(strs, req.depth)
		for _, n := range names {
			s.recs = append(s.recs, paramRec{name: s.str(n)})
		}
		for _, p := range prefixes {
			s.prefixes = append(s.prefixes, s.str(p))
		}
	case srvGet, srvGetTypes, srvDescribe:
		// A name not declared empties the whole answer, as rclcpp and
		// rclpy do (ros2 param get then says "Parameter not set").
		for _, name := range strs {
			p, ok := s.set.Get(name)
			if !ok {
				s.recs = s.recs[:0]
				break
			}
			rec := paramRec{name: s.str(name), typ: uint8(p.Value.Type), boolValue: b2u(p.Value.Bool),
				integerValue: p.Value.Integer, doubleValue: p.Value.Double, stringValue: s.str(p.Value.String),
				description: s.str(p.Description), constraints: s.str(p.Constraints), readOnly: b2u(p.ReadOnly)}
			if r := p.Range; r != nil && srv == srvDescribe {
				rec.hasRange, rec.rangeFrom, rec.rangeTo, rec.rangeStep = 1, r.From, r.To, r.Step
			}
			s.recs = append(s.recs, rec)
		}
	case srvSet, srvSetAtomically:
		// strs holds name, string_value pairs; s.values the rest.
		var names []string
		var values []params.Value
		for i := 0; i+1 < len(strs) && i/2 < len(s.values); i += 2 {
			v := s.values[i/2]
			names = append(names, strs[i])
			values = append(values, params.Value{Type: params.Type(v.typ), Bool: v.boolValue != 0,
				Integer: v.integerValue, Double: v.doubleValue, String: strs[i+1]})
		}
		// One event per successful set, as rclcpp publishes them: the
		// whole request for an atomic set, else each parameter.
		if srv == srvSetAtomically {
			ok, reason := s.set.SetAtomically(names, values)
			s.recs = append(s.recs, paramRec{successful: b2u(ok), reason: s.str(reason)})
			for i := range names {
				s.logSet(ok, names[i], values[i])
			}
			if ok {
				s.announceChanged(names)
			}
			break
		}
		for i, name := range names {
			ok, reason := s.set.Set(name, values[i])
			s.recs = append(s.recs, paramRec{successful: b2u(ok), reason: s.str(reason)})
			s.logSet(ok, name, values[i])
			if ok {
				s.announceChanged(names[i : i+1])
			}
		}
	}
}

// Announce publishes a ParameterEvent with the named parameters' current
// values as changed: for values the node changed itself
// (params.Set.RefreshFromFlag), as rclcpp announces its own set_parameter.
func (s *ParameterServer) Announce(names []string) error { return s.announce(names, false) }

// announceChanged publishes a ParameterEvent with names changed; a
// failure is logged, the set stands.
func (s *ParameterServer) announceChanged(names []string) {
	if err := s.announce(names, false); err != nil {
		s.p.log.Warn("ros2: parameter event not published", zap.Strings("names", names), zap.Error(err))
	}
}

// announce publishes a ParameterEvent with the named parameters' values
// as its new (isNew) or changed parameters. The event writer's lock
// guards the event buffers too.
func (s *ParameterServer) announce(names []string, isNew bool) error {
	ep := s.events
	ep.mu.Lock()
	defer ep.mu.Unlock()
	if ep.closed {
		return ErrClosed
	}
	s.evStrs, s.evRecs = append(s.evStrs[:0], 0), s.evRecs[:0]
	str := func(v string) uint32 { return appendStr(&s.evStrs, v) }
	for _, name := range names {
		p, ok := s.set.Get(name)
		if !ok {
			continue
		}
		s.evRecs = append(s.evRecs, paramRec{name: str(name), typ: uint8(p.Value.Type), boolValue: b2u(p.Value.Bool),
			integerValue: p.Value.Integer, doubleValue: p.Value.Double, stringValue: str(p.Value.String)})
	}
	nnew := 0
	if isNew {
		nnew = len(s.evRecs)
	}
	now := time.Now
	if s.opts.Clock != nil {
		now = s.opts.Clock
	}
	sec, nanosec := rosTime(now())
	if rc := writeParameterEvent(ep.e, sec, nanosec, s.node, s.evStrs, s.evRecs, nnew); rc < 0 {
		return &ddsError{op: "write " + ep.ddsTopic, rc: rc}
	}
	return nil
}

// logSet logs a parameter a set request changed.
func (s *ParameterServer) logSet(ok bool, name string, v params.Value) {
	if ok {
		s.p.log.Info("ros2: parameter set (ros2 param set)", zap.String("name", name), zap.String("value", v.Format()))
	}
}

// str appends v NUL-terminated to s.strs and returns its offset ("" is
// offset 0). A NUL inside v ends it there on the wire.
func (s *ParameterServer) str(v string) uint32 { return appendStr(&s.strs, v) }

// appendStr appends v NUL-terminated to *buf, whose first byte is the
// empty string's NUL, and returns its offset ("" is offset 0).
func appendStr(buf *[]byte, v string) uint32 {
	if v == "" {
		return 0
	}
	off := uint32(len(*buf))
	*buf = append(append(*buf, v...), 0)
	return off
}

func b2u(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

// splitNUL splits NUL-terminated strings.
func splitNUL(b []byte) []string {
	var out []string
	for len(b) > 0 {
		i := bytes.IndexByte(b, 0)
		if i < 0 {
			i = len(b)
		}
		out = append(out, string(b[:i]))
		b = b[min(i+1, len(b)):]
	}
	return out
}

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}
