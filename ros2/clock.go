//go:build ros2 && cgo

package ros2

import (
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// ClockTopic is where a simulator publishes its time (Gazebo through
// ros_gz_bridge, Isaac Sim, Webots, ros2 bag play --clock). Absolute, as
// rclcpp's TimeSource has it.
const ClockTopic = "/clock"

// ClockQoS is rclcpp's ClockQoS: BEST_EFFORT, VOLATILE, KEEP_LAST 1. It
// matches RELIABLE and BEST_EFFORT publishers, and only the newest time
// matters.
func ClockQoS() QoS { return QoS{Reliability: BestEffort, Depth: 1} }

// SimClock is ROS time under use_sim_time, as rclcpp's TimeSource keeps
// it: the time of the last /clock message, not extrapolated between
// messages; before the first one, time 0, which stamps {0, 0}.
type SimClock struct {
	sub   *Subscription
	log   *zap.Logger
	topic string
	ns    atomic.Int64 // the last /clock as Unix nanoseconds; 0 before the first
	// Written on the subscription's goroutine only.
	started, wentBack bool
}

// FollowSimClock subscribes to /clock (ClockTopic, after the
// participant's remapping rules) with ClockQoS.
func (p *Participant) FollowSimClock() (*SimClock, error) {
	// The topic before the goroutine starts: set logs it.
	topic, _, err := p.cfg.ddsTopicName(ClockTopic)
	if err != nil {
		return nil, err
	}
	c := &SimClock{log: p.log, topic: topic}
	if c.sub, err = p.openSubscription(typeClock, ClockTopic, ClockQoS(), handlers{clock: c.set}, true); err != nil {
		return nil, err
	}
	return c, nil
}

// set runs on the subscription's goroutine for each /clock message.
func (c *SimClock) set(sec int32, nanosec uint32) {
	v := int64(sec)*int64(time.Second) + int64(nanosec)
	old := c.ns.Swap(v)
	switch {
	case !c.started && v != 0:
		c.started = true
		c.log.Info("ros2: following the simulation's clock", zap.String("topic", c.topic), zap.Float64("sim_time_s", float64(v)/1e9))
	case v < old && !c.wentBack:
		// A reset simulation, or a bag played again: stamps go back with it.
		c.wentBack = true
		c.log.Info("ros2: the simulation's clock went back (reset, or a bag replayed?); logged once",
			zap.String("topic", c.topic), zap.Duration("by", time.Duration(old-v)))
	}
}

// Now is ROS time: the last /clock, or the zero time before the first
// (ROS time 0, which every writer here stamps {0, 0}). It allocates
// nothing and is safe for concurrent use.
func (c *SimClock) Now() time.Time {
	v := c.ns.Load()
	if v == 0 {
		return time.Time{}
	}
	return time.Unix(0, v)
}

// Received counts the /clock messages taken; Matched the publishers now.
func (c *SimClock) Received() uint64 { return c.sub.Received() }
func (c *SimClock) Matched() int     { return c.sub.Matched() }

// Close stops following /clock; Now keeps its last value. Idempotent.
func (c *SimClock) Close() error { return c.sub.Close() }
