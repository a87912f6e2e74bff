//go:build ros2 && cgo

package ros2

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/zerohop/zerohop/ros2/tf"
)

// TFTopic is where tf2 broadcasts the transforms that move (a base's
// odom → base_link, moving joints). Absolute, as tf2_ros has it; a
// namespaced robot remaps it (--ros-args -r /tf:=tf).
const TFTopic = "/tf"

// TFQoS is tf2_ros's DynamicListenerQoS: RELIABLE, VOLATILE, KEEP_LAST 100.
func TFQoS() QoS { return QoS{Reliability: Reliable, Depth: 100} }

// Transforms keeps what /tf and /tf_static carry in one tf.Buffer, as
// tf2_ros's TransformListener does, and answers lookups at a time in it.
type Transforms struct {
	buf          *tf.Buffer
	moving, stat *Subscription
	log          *zap.Logger
	topics       [2]string // /tf, /tf_static after remapping

	refused atomic.Uint64 // transforms the buffer refused; the first is logged
	jumps   atomic.Uint64 // histories restarted because time jumped back
	// lastJumpLog (ns, this machine's clock) rate-limits the jump lines:
	// two publishers of one edge on different clocks would jump at their
	// rate.
	lastJumpLog atomic.Int64
}

// jumpRelogEvery is how often a time jump is logged at most.
const jumpRelogEvery = 10 * time.Second

// ListenTransforms subscribes to /tf (TFQoS) and /tf_static
// (TFStaticQoS), after the participant's remapping rules, into a buffer
// made with cfg.
func (p *Participant) ListenTransforms(cfg tf.BufferConfig) (*Transforms, error) {
	buf, err := tf.NewBuffer(cfg)
	if err != nil {
		return nil, err
	}
	t := &Transforms{buf: buf, log: p.log}
	for i, name := range []string{TFTopic, TFStaticTopic} {
		if t.topics[i], _, err = p.cfg.ddsTopicName(name); err != nil {
			return nil, err
		}
	}
	if t.moving, err = p.openSubscription(typeTFMessage, TFTopic, TFQoS(), handlers{transforms: t.addMoving}, true); err != nil {
		return nil, fmt.Errorf("listen to %s: %w", TFTopic, err)
	}
	if t.stat, err = p.openSubscription(typeTFMessage, TFStaticTopic, TFStaticQoS(), handlers{transforms: t.addStatic}, true); err != nil {
		t.moving.Close()
		return nil, fmt.Errorf("listen to %s: %w", TFStaticTopic, err)
	}
	return t, nil
}

// addMoving and addStatic run on their subscriptions' goroutines.
func (t *Transforms) addMoving(ts []tf.Stamped, total int) { t.add(ts, total, false) }
func (t *Transforms) addStatic(ts []tf.Stamped, total int) { t.add(ts, total, true) }

func (t *Transforms) add(ts []tf.Stamped, total int, static bool) {
	topic := t.topics[0]
	if static {
		topic = t.topics[1]
	}
	for _, s := range ts {
		var err error
		if static {
			err = t.buf.AddStatic(s)
		} else {
			err = t.buf.Add(s)
		}
		switch {
		case err == nil:
		case errors.Is(err, tf.ErrTimeJumpedBack):
			n := t.jumps.Add(1)
			now, last := time.Now().UnixNano(), t.lastJumpLog.Load()
			if (last == 0 || now-last >= int64(jumpRelogEvery)) && t.lastJumpLog.CompareAndSwap(last, now) {
				t.log.Warn("ros2: time jumped back on "+topic+"; that transform's history starts over (logged at most every 10 s)",
					zap.Uint64("jumps", n), zap.Error(err))
			}
		case t.refused.Add(1) == 1:
			t.log.Warn("ros2: transform on "+topic+" refused (later ones are counted in the node's stop line, not logged)", zap.Error(err))
		}
	}
	if cut := uint64(total - len(ts)); cut > 0 && t.refused.Add(cut) == cut {
		t.log.Warn("ros2: TFMessage too large; only part of it was read (logged once)",
			zap.String("topic", topic), zap.Int("transforms", total), zap.Int("read", len(ts)))
	}
}

// LookupAt returns source's pose in target at time at (ns since the
// epoch, ROS time): tf.Buffer.LookupAt, its error completed with what the
// two subscriptions saw. It does not wait; it allocates nothing when it
// succeeds.
func (t *Transforms) LookupAt(target, source string, at int64) (tf.Transform, error) {
	tr, err := t.buf.LookupAt(target, source, at)
	if err == nil {
		return tr, nil
	}
	hint := ""
	if t.moving.Matched() == 0 && (errors.Is(err, tf.ErrUnknownFrame) || errors.Is(err, tf.ErrNotConnected)) {
		hint = "; is the robot base's driver (or robot_localization) publishing odometry on tf, in this ROS_DOMAIN_ID and namespace?"
	}
	return tr, fmt.Errorf("%w (%s: %d publisher(s), %d message(s); %s: %d publisher(s), %d message(s)%s)", err,
		t.topics[0], t.moving.Matched(), t.moving.Received(), t.topics[1], t.stat.Matched(), t.stat.Received(), hint)
}

// Refused returns how many transforms were refused or cut off.
func (t *Transforms) Refused() uint64 { return t.refused.Load() }

// TimeJumps returns how many times a moving transform's history started
// over because its time jumped back (tf.ErrTimeJumpedBack).
func (t *Transforms) TimeJumps() uint64 { return t.jumps.Load() }

// Close stops both subscriptions. Idempotent.
func (t *Transforms) Close() error {
	return errors.Join(t.moving.Close(), t.stat.Close())
}
