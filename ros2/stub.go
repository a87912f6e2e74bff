//go:build !ros2 || !cgo

package ros2

import (
	"context"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/zerohop/zerohop/handles"
	"github.com/zerohop/zerohop/planner"
	"github.com/zerohop/zerohop/ros2/params"
	"github.com/zerohop/zerohop/ros2/tf"
	"github.com/zerohop/zerohop/telemetry/status"
)

// This build has no ROS 2 support: every constructor returns ErrNotBuilt
// and no value of these types can be obtained. Build with -tags ros2 (and
// cgo, and libddsc from Debian cyclonedds-dev) for the real thing.

// Participant is a DDS domain participant (see the ros2-tagged build).
type Participant struct{}

// NewParticipant returns ErrNotBuilt.
func NewParticipant(Config, *zap.Logger) (*Participant, error) { return nil, ErrNotBuilt }

func (*Participant) Domain() uint32 { return 0 }
func (*Participant) Close() error   { return nil }

func (*Participant) NewTwistSink(TwistOptions) (*TwistSink, error) { return nil, ErrNotBuilt }
func (*Participant) NewHandleWriter(HandleWriterOptions) (*HandleWriter, error) {
	return nil, ErrNotBuilt
}
func (*Participant) NewDiagnosticsWriter(DiagnosticsOptions) (*DiagnosticsWriter, error) {
	return nil, ErrNotBuilt
}
func (*Participant) SubscribeImage(string, SubscriptionOptions, func(*ImageView)) (*Subscription, error) {
	return nil, ErrNotBuilt
}
func (*Participant) SubscribePointCloud2(string, SubscriptionOptions, func(*PointCloud2View)) (*Subscription, error) {
	return nil, ErrNotBuilt
}
func (*Participant) SubscribeLaserScan(string, SubscriptionOptions, func(*LaserScanView)) (*Subscription, error) {
	return nil, ErrNotBuilt
}

// TwistSink publishes cmd_vel (see the ros2-tagged build).
type TwistSink struct{}

func (*TwistSink) PublishTwist(planner.Twist, time.Time) error { return ErrNotBuilt }
func (*TwistSink) Matched() int                                { return 0 }
func (*TwistSink) Close() error                                { return nil }

// HandleWriter publishes slot handles (see the ros2-tagged build).
type HandleWriter struct{}

func (*HandleWriter) Publish(*handles.Handle) error { return ErrNotBuilt }
func (*HandleWriter) Matched() int                  { return 0 }
func (*HandleWriter) Close() error                  { return nil }

// DiagnosticsWriter publishes diagnostic_msgs/DiagnosticArray (see the
// ros2-tagged build).
type DiagnosticsWriter struct{}

func (*DiagnosticsWriter) PublishStatus(time.Time, []status.Status) error { return ErrNotBuilt }
func (*DiagnosticsWriter) Matched() int                                   { return 0 }
func (*DiagnosticsWriter) Close() error                                   { return nil }

// Subscription receives a sensor topic (see the ros2-tagged build).
type Subscription struct{}

func (*Subscription) Matched() int     { return 0 }
func (*Subscription) Received() uint64 { return 0 }
func (*Subscription) Skipped() uint64  { return 0 }
func (*Subscription) Close() error     { return nil }

// ParameterServer answers ROS 2 parameter services (see the ros2-tagged
// build).
type ParameterServer struct{}

// ServeParameters returns ErrNotBuilt.
func (*Participant) ServeParameters(*params.Set, ParameterOptions) (*ParameterServer, error) {
	return nil, ErrNotBuilt
}

func (*ParameterServer) Served() uint64  { return 0 }
func (*ParameterServer) Dropped() uint64 { return 0 }
func (*ParameterServer) Close() error    { return nil }

// RosoutWriter publishes log lines on /rosout (see the ros2-tagged build).
type RosoutWriter struct{}

// NewRosoutWriter returns ErrNotBuilt.
func (*Participant) NewRosoutWriter(RosoutOptions) (*RosoutWriter, error) { return nil, ErrNotBuilt }

func (*RosoutWriter) Publish(time.Time, uint8, string, string, string, string, uint32) error {
	return ErrNotBuilt
}
func (*RosoutWriter) Core(zapcore.LevelEnabler) zapcore.Core { return zapcore.NewNopCore() }
func (*RosoutWriter) Written() uint64                        { return 0 }
func (*RosoutWriter) Failed() uint64                         { return 0 }
func (*RosoutWriter) Matched() int                           { return 0 }
func (*RosoutWriter) Close() error                           { return nil }

// StaticTransforms keeps /tf_static (see the ros2-tagged build).
type StaticTransforms struct{}

// ListenStaticTransforms returns ErrNotBuilt.
func (*Participant) ListenStaticTransforms() (*StaticTransforms, error) { return nil, ErrNotBuilt }

func (*StaticTransforms) Lookup(context.Context, string, string) (tf.Transform, []string, error) {
	return tf.Transform{}, nil, ErrNotBuilt
}
func (*StaticTransforms) Matched() int { return 0 }
func (*StaticTransforms) Close() error { return nil }

// Transforms keeps /tf and /tf_static (see the ros2-tagged build).
type Transforms struct{}

// ListenTransforms returns ErrNotBuilt.
func (*Participant) ListenTransforms(tf.BufferConfig) (*Transforms, error) { return nil, ErrNotBuilt }

func (*Transforms) LookupAt(string, string, int64) (tf.Transform, error) {
	return tf.Transform{}, ErrNotBuilt
}
func (*Transforms) Refused() uint64   { return 0 }
func (*Transforms) TimeJumps() uint64 { return 0 }
func (*Transforms) Close() error      { return nil }

// SimClock follows /clock (see the ros2-tagged build).
type SimClock struct{}

// FollowSimClock returns ErrNotBuilt.
func (*Participant) FollowSimClock() (*SimClock, error) { return nil, ErrNotBuilt }

func (*SimClock) Now() time.Time   { return time.Time{} }
func (*SimClock) Received() uint64 { return 0 }
func (*SimClock) Matched() int     { return 0 }
func (*SimClock) Close() error     { return nil }
