//go:build ros2 && cgo

package ros2

import (
	"sync"
	"sync/atomic"
	"unsafe"

	"go.uber.org/zap"

	"github.com/zerohop/zerohop/ros2/tf"
)

// recommendedRmemMax is rmw_cyclonedds's advice for net.core.rmem_max:
// below it, large images over UDP lose fragments.
const recommendedRmemMax = 8 << 20

// Subscription receives one topic on its own goroutine and hands each
// sample to the callback as a view of the sample Cyclone has loaned (no
// copy by this package), then returns the loan. Callbacks for one
// Subscription never run concurrently; a slow callback delays only its
// own topic, and samples beyond the QoS depth are dropped by DDS (KEEP_LAST).
type Subscription struct {
	ep *endpoint
	ws entity // waitset with the reader's read condition
	cv cView  // C view filled by each take; freed after the goroutine stops
	handlers
	imgView  ImageView
	cldView  PointCloud2View
	scanView LaserScanView
	tfs      *tfBuffers // transforms only
	received atomic.Uint64
	skipped  atomic.Uint64

	started   bool // run was started; set under Participant.mu before the goroutine exists
	stopping  atomic.Bool
	done      chan struct{}
	closeOnce sync.Once
	closeErr  error
}

// SubscribeImage subscribes to sensor_msgs/Image on topic, resolved
// against the participant's node (Config.ResolveTopic). fn runs on the
// subscription's goroutine; the view's slices are valid only until fn
// returns.
func (p *Participant) SubscribeImage(topic string, opts SubscriptionOptions, fn func(*ImageView)) (*Subscription, error) {
	return p.subscribe(typeImage, topic, opts, handlers{image: fn})
}

// SubscribePointCloud2 subscribes to sensor_msgs/PointCloud2 on topic,
// like SubscribeImage. Clouds with more than MaxPointFields fields are
// skipped (Skipped counts them, the first one is logged).
func (p *Participant) SubscribePointCloud2(topic string, opts SubscriptionOptions, fn func(*PointCloud2View)) (*Subscription, error) {
	return p.subscribe(typePointCloud2, topic, opts, handlers{cloud: fn})
}

// SubscribeLaserScan subscribes to sensor_msgs/LaserScan (a planar
// LiDAR) on topic, like SubscribeImage: BEST_EFFORT, KEEP_LAST 5 by
// default (SensorDataQoS), which matches any publisher.
func (p *Participant) SubscribeLaserScan(topic string, opts SubscriptionOptions, fn func(*LaserScanView)) (*Subscription, error) {
	return p.subscribe(typeLaserScan, topic, opts, handlers{scan: fn})
}

// handlers are a subscription's callback: exactly one is set, the one
// for its type.
type handlers struct {
	image      func(*ImageView)
	cloud      func(*PointCloud2View)
	scan       func(*LaserScanView)
	transforms func([]tf.Stamped, int) // a TFMessage's transforms, and how many it had
	clock      func(sec int32, nanosec uint32)
}

func (p *Participant) subscribe(t msgType, topic string, opts SubscriptionOptions, h handlers) (*Subscription, error) {
	q, err := opts.QoS.resolve(SensorDataQoS())
	if err != nil {
		return nil, err
	}
	return p.openSubscription(t, topic, q, h, true)
}

// openSubscription creates the reader (QoS q, resolved) and its waitset
// and, if start, the goroutine (tests drive takeOne themselves instead).
func (p *Participant) openSubscription(t msgType, topic string, q QoS, h handlers, start bool) (*Subscription, error) {
	if h.image == nil && h.cloud == nil && h.scan == nil && h.transforms == nil && h.clock == nil {
		return nil, errNilCallback
	}
	ep, err := p.newEndpoint(t, topic, false, q, defaultMaxBlocking, nil)
	if err != nil {
		return nil, err
	}
	ws, rc := createReaderWaitset(p.pp, ep.e)
	if rc < 0 {
		ep.close()
		return nil, &ddsError{op: "create waitset for " + ep.ddsTopic, rc: rc}
	}
	s := &Subscription{ep: ep, ws: ws, handlers: h, done: make(chan struct{})}
	switch {
	case h.transforms != nil:
		s.tfs = newTFBuffers()
	case h.image != nil, h.cloud != nil, h.scan != nil:
		s.cv = newCView(t)
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		deleteEntity(ws)
		ep.close()
		s.cv.free()
		return nil, ErrClosed
	}
	p.subs[s] = struct{}{}
	if start {
		// Under p.mu, so that Participant.Close sees started and waits.
		s.started = true
		go s.run()
	}
	p.mu.Unlock()
	fields := []zap.Field{zapTopic(ep), zap.String("type", t.rosName()), zapQoS(q)}
	// Only images and clouds come in messages large enough to need it (a
	// LaserScan of 2000 rays with intensities is 16 KB).
	if m := rmemMax(); m > 0 && m < recommendedRmemMax && (t == typeImage || t == typePointCloud2) {
		p.log.Warn("ros2: subscribed; net.core.rmem_max is below 8 MiB, large messages may lose fragments (sudo sysctl -w net.core.rmem_max=8388608)",
			append(fields, zap.Int("rmem_max", m))...)
	} else {
		p.log.Info("ros2: subscribed", fields...)
	}
	return s, nil
}

// run is the subscription's goroutine: wait for data, take it all, repeat.
func (s *Subscription) run() {
	defer close(s.done)
	var xs [1]int32
	for {
		_, rc := waitWakeups(s.ws, xs[:])
		if s.stopping.Load() {
			return
		}
		if rc < 0 {
			s.ep.p.log.Error("ros2: subscription waitset failed; no more samples on this topic",
				zapTopic(s.ep), zap.Stringer("dds", rc))
			return
		}
		for !s.stopping.Load() {
			n, rc := s.takeOne()
			if rc < 0 {
				// Not expected while the reader lives; retrying would spin
				// on a read condition that stays triggered.
				s.ep.p.log.Error("ros2: take failed; no more samples on this topic", zapTopic(s.ep), zap.Stringer("dds", rc))
				return
			}
			if n == 0 {
				break
			}
		}
	}
}

// takeOne takes at most one sample, delivers it and returns the loan.
// It allocates nothing.
func (s *Subscription) takeOne() (int32, retcode) {
	rd := s.ep.e
	var (
		loan unsafe.Pointer
		n    int32
		rc   retcode
	)
	if s.transforms != nil {
		return s.takeTransforms()
	}
	if s.clock != nil {
		got, sec, ns, rc := takeClock(rd)
		if got > 0 {
			s.received.Add(1)
			s.clock(sec, ns)
		}
		return got, rc
	}
	switch {
	case s.image != nil:
		loan, n, rc = takeImage(rd, s.cv, &s.imgView)
		if n > 0 {
			s.received.Add(1)
			s.image(&s.imgView)
			s.imgView = ImageView{} // no slice into the loan outlives it
		}
	case s.scan != nil:
		loan, n, rc = takeScan(rd, s.cv, &s.scanView)
		if n > 0 {
			s.received.Add(1)
			s.scan(&s.scanView)
			s.scanView = LaserScanView{}
		}
	default:
		var nfields int
		loan, n, nfields, rc = takeCloud(rd, s.cv, &s.cldView)
		if n > 0 {
			s.received.Add(1)
			if nfields > MaxPointFields {
				if s.skipped.Add(1) == 1 {
					s.ep.p.log.Error("ros2: PointCloud2 with too many fields skipped (counted, logged once)",
						zapTopic(s.ep), zap.Int("fields", nfields), zap.Int("max", MaxPointFields))
				}
			} else {
				s.cloud(&s.cldView)
			}
			s.cldView.clear()
		}
	}
	if n > 0 {
		if r := returnLoan(rd, loan); r < 0 {
			return n, r
		}
	}
	return n, rc
}

// clear drops every slice into a returned loan.
func (v *PointCloud2View) clear() {
	for i := range v.Fields {
		v.fields[i].Name = nil
	}
	v.FrameID, v.Fields, v.Data = nil, nil, nil
}

// Matched returns how many publishers are matched now.
func (s *Subscription) Matched() int { return int(s.ep.matched.Load()) }

// Received counts samples taken; Skipped those not delivered.
func (s *Subscription) Received() uint64 { return s.received.Load() }
func (s *Subscription) Skipped() uint64  { return s.skipped.Load() }

// Close stops the goroutine (waiting for a running callback to return)
// and deletes the reader. Idempotent; must not be called from the callback.
func (s *Subscription) Close() error {
	s.closeOnce.Do(func() {
		s.stopping.Store(true)
		if s.started {
			if rc := wakeup(s.ws); rc < 0 {
				deleteEntity(s.ws) // a deleted waitset fails the goroutine's wait
			}
			<-s.done
		}
		deleteEntity(s.ws)
		s.closeErr = s.ep.close()
		s.cv.free()
		p := s.ep.p
		p.mu.Lock()
		delete(p.subs, s)
		p.mu.Unlock()
	})
	return s.closeErr
}
