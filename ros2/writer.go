//go:build ros2 && cgo

package ros2

import (
	"fmt"
	"math"
	"time"

	"go.uber.org/zap"

	"github.com/zerohop/zerohop/handles"
	"github.com/zerohop/zerohop/planner"
)

// TwistSink publishes velocity commands as geometry_msgs/Twist (or
// TwistStamped) for a ROS 2 base controller. It implements the agent's
// CmdSink. PublishTwist may be called from any goroutine; it neither
// allocates nor blocks for long (RELIABLE KEEP_LAST writers do not wait
// for readers).
type TwistSink struct {
	ep        *endpoint
	stamped   bool
	zeroStamp bool             // TwistOptions.ZeroStamp
	clock     func() time.Time // TwistOptions.Clock; nil: the frame's stamp
	frameID   cString          // TwistStamped header.frame_id, C memory; freed when the endpoint closes
	// Under ep.mu: what went out, for the two log lines that tell a user
	// without ROS tools that commands flow (the first moving one) and how
	// it ended (Close).
	sent, moving uint64
	last         planner.Twist
}

// NewTwistSink creates the cmd_vel publisher.
func (p *Participant) NewTwistSink(opts TwistOptions) (*TwistSink, error) {
	if opts.Topic == "" {
		opts.Topic = "cmd_vel"
	}
	if opts.FrameID == "" {
		opts.FrameID = "base_link"
	}
	for i := 0; i < len(opts.FrameID); i++ {
		if c := opts.FrameID[i]; c < 0x20 || c > 0x7e {
			return nil, fmt.Errorf("ros2: frame id %q: byte %#x is not printable ASCII", opts.FrameID, c)
		}
	}
	q, err := opts.QoS.resolve(DefaultQoS())
	if err != nil {
		return nil, err
	}
	t := typeTwist
	if opts.Stamped {
		t = typeTwistStamped
	}
	switch {
	case (opts.ZeroStamp || opts.Clock != nil) && !opts.Stamped:
		return nil, fmt.Errorf("ros2: a zero stamp or a clock is for TwistStamped; Twist has no stamp")
	case opts.ZeroStamp && opts.Clock != nil:
		return nil, fmt.Errorf("ros2: TwistStamped with a zero stamp and a clock: choose one")
	}
	s := &TwistSink{stamped: opts.Stamped, zeroStamp: opts.ZeroStamp, clock: opts.Clock}
	var release func()
	if opts.Stamped {
		s.frameID = newCString(opts.FrameID)
		release = s.frameID.free
	}
	if s.ep, err = p.newEndpoint(t, opts.Topic, true, q, defaultMaxBlocking, release); err != nil {
		return nil, err
	}
	ep := s.ep
	p.log.Info("ros2: publishing cmd_vel", zapTopic(ep), zapQoS(q))
	return s, nil
}

// PublishTwist publishes t. A non-finite component is never published:
// the robot gets the zero command instead, and the error (wrapping
// planner.ErrNonFinite) says so. stamp becomes TwistStamped's
// header.stamp, unless TwistOptions.ZeroStamp or Clock say otherwise; the
// zero time means "no stamp" ({0, 0}).
func (s *TwistSink) PublishTwist(t planner.Twist, stamp time.Time) error {
	var bad error
	if !finite(t.LinearX) || !finite(t.AngularZ) {
		bad = fmt.Errorf("ros2: %s: %w: linear.x=%v angular.z=%v; published zero instead",
			s.ep.rosTopic, planner.ErrNonFinite, t.LinearX, t.AngularZ)
		t = planner.Zero()
	}
	ep := s.ep
	ep.mu.Lock()
	if ep.closed {
		ep.mu.Unlock()
		return ErrClosed
	}
	var rc retcode
	if s.stamped {
		switch {
		case s.zeroStamp:
			stamp = time.Time{}
		case s.clock != nil:
			stamp = s.clock()
		}
		sec, ns := rosTime(stamp)
		rc = writeTwistStamped(ep.e, sec, ns, s.frameID, t.LinearX, t.AngularZ)
	} else {
		rc = writeTwist(ep.e, t.LinearX, t.AngularZ)
	}
	firstMoving := false
	if rc >= 0 {
		s.sent++
		s.last = t
		if !t.IsZero() {
			s.moving++
			firstMoving = s.moving == 1
		}
	}
	ep.mu.Unlock()
	if rc < 0 {
		return &ddsError{op: "write " + ep.ddsTopic, rc: rc}
	}
	if firstMoving {
		// Outside the endpoint's lock, which Close and the other
		// endpoint users take: a log write that blocks (a full stderr
		// pipe) holds up only this call. It happens once per sink.
		ep.p.log.Info("ros2: first moving cmd_vel published", zapTopic(ep),
			zap.Float64("linear_x", t.LinearX), zap.Float64("angular_z", t.AngularZ), zap.Int32("subscribers", ep.matched.Load()))
	}
	return bad
}

// Matched returns how many subscribers are matched now, as last reported
// by DDS to the participant's status goroutine.
func (s *TwistSink) Matched() int { return int(s.ep.matched.Load()) }

// Close deletes the publisher after waiting (up to 1 s) for subscribers
// to acknowledge what it sent. Publish the zero command before.
func (s *TwistSink) Close() error {
	ep := s.ep
	ep.mu.Lock()
	sent, moving, last, closed := s.sent, s.moving, s.last, ep.closed
	ep.mu.Unlock()
	if !closed {
		ep.p.log.Info("ros2: closing the cmd_vel publisher", zapTopic(ep), zap.Uint64("commands_sent", sent),
			zap.Uint64("moving", moving), zap.Bool("last_was_zero", last.IsZero()), zap.Int32("subscribers", ep.matched.Load()))
		// The last command (zero, at shutdown) must reach the base; deleting
		// the writer only lingers for it, silently. Say so when a
		// subscriber did not take it.
		if n := ep.matched.Load(); n > 0 && sent > 0 {
			if rc := waitForAcks(ep.e, lastCommandAckWait); rc == rcTimeout {
				ep.p.log.Warn("ros2: the last cmd_vel was not acknowledged by every subscriber: one stalled or went away, and the base keeps its last command until its own timeout (cmd_vel_timeout)",
					zapTopic(ep), zap.Bool("last_was_zero", last.IsZero()), zap.Int32("subscribers", n), zap.Duration("waited", lastCommandAckWait))
			}
		}
	}
	return ep.close()
}

// lastCommandAckWait bounds TwistSink.Close's wait for the last command's
// acknowledgements (the writer's delete then lingers up to 1 s more).
const lastCommandAckWait = 500 * time.Millisecond

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// HandleWriter publishes slot handles as zerohop_msgs/SlotHandle, so ROS
// tools can watch a camera's frames. Publish neither allocates nor blocks.
type HandleWriter struct {
	ep  *endpoint
	buf slotHandleBuf // C memory reused by every Publish; freed when the endpoint closes
}

// NewHandleWriter creates the handle publisher.
func (p *Participant) NewHandleWriter(opts HandleWriterOptions) (*HandleWriter, error) {
	if opts.Topic == "" {
		opts.Topic = "/zerohop/handles"
	}
	q, err := opts.QoS.resolve(SensorDataQoS())
	if err != nil {
		return nil, err
	}
	w := &HandleWriter{buf: newSlotHandleBuf()}
	if w.ep, err = p.newEndpoint(typeSlotHandle, opts.Topic, true, q, defaultMaxBlocking, w.buf.free); err != nil {
		return nil, err
	}
	p.log.Info("ros2: publishing slot handles", zapTopic(w.ep), zapQoS(q))
	return w, nil
}

// Publish publishes h as it is; the camera is the trusted writer, so h is
// not validated. header.stamp is h.CaptureNs ({0, 0} when it does not fit
// builtin_interfaces/Time), header.frame_id is h.FrameID.
func (w *HandleWriter) Publish(h *handles.Handle) error {
	ep := w.ep
	ep.mu.Lock()
	defer ep.mu.Unlock()
	if ep.closed {
		return ErrClosed
	}
	if rc := writeSlotHandle(ep.e, w.buf, h); rc < 0 {
		return &ddsError{op: "write " + ep.ddsTopic, rc: rc}
	}
	return nil
}

// Matched returns how many subscribers are matched now.
func (w *HandleWriter) Matched() int { return int(w.ep.matched.Load()) }

// Close deletes the publisher.
func (w *HandleWriter) Close() error { return w.ep.close() }
