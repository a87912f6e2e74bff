package agent

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/zerohop/zerohop/handles"
	"github.com/zerohop/zerohop/ros2/tf"
)

// TransformSource answers lookups of static transforms, waiting for them
// until ctx ends: ros2.StaticTransforms, which reads /tf_static.
type TransformSource interface {
	Lookup(ctx context.Context, target, source string) (tf.Transform, []string, error)
}

// DefaultBaseFrame is REP-105's robot frame on the ground, the frame the
// BEV raster is drawn in.
const DefaultBaseFrame = "base_footprint"

// DefaultTFTimeout is how long the agent waits at start for /tf_static to
// connect the base frame to the LiDAR's: transient-local samples come
// within a second of discovery, a launch file may start
// robot_state_publisher a few seconds after the agent.
const DefaultTFTimeout = 10 * time.Second

// Bounds of --tf-timeout: shorter than discovery takes on a busy network
// is a mistake, longer than a few minutes hides a missing broadcaster.
const (
	minTFTimeout = 100 * time.Millisecond
	maxTFTimeout = 10 * time.Minute
)

// MountFromTF sets cfg's LiDAR mount (LidarXY, LidarHeight, LidarRPY)
// from the transform src holds from the base frame to the LiDAR's frame,
// waiting up to timeout for it, as `tf2_echo BASE LIDAR` would print it:
// its translation is where the LiDAR sits, its rotation the LiDAR's roll,
// pitch and yaw on the robot. cfg.LidarFrame is set too: clouds in
// another frame are then dropped (the mount would be another sensor's).
// Errors name the flags and frames, and say what /tf_static held.
func MountFromTF(ctx context.Context, cfg *NodeConfig, src TransformSource, base, lidar string, timeout time.Duration) error {
	base, lidar = strings.TrimPrefix(base, "/"), strings.TrimPrefix(lidar, "/")
	switch {
	case lidar == "":
		return errors.New("--lidar-frame: empty frame name")
	case base == "":
		return errors.New("--base-frame: empty frame name")
	case base == lidar:
		return fmt.Errorf("--lidar-frame %s is --base-frame: the clouds would already be in the robot frame; leave --lidar-frame out (the mount flags' default, no transform)", lidar)
	case timeout < minTFTimeout || timeout > maxTFTimeout:
		return fmt.Errorf("--tf-timeout %v: want %v to %v", timeout, minTFTimeout, maxTFTimeout)
	}
	if _, err := handles.NewFrameID(lidar[:min(len(lidar), handles.FrameIDSize)]); err != nil {
		return fmt.Errorf("--lidar-frame %q: not a frame id a cloud can carry: %w", lidar, err)
	}
	log := cfg.Log
	if log == nil {
		log = zap.NewNop()
	}
	if len(lidar) > handles.FrameIDSize {
		log.Warn("--lidar-frame is longer than a handle's 16-byte frame id: clouds are checked on its first 16 bytes, so another sensor's frame that starts the same would pass",
			zap.String("lidar_frame", lidar), zap.String("checked", lidar[:handles.FrameIDSize]))
	}
	log.Info("LiDAR mount: waiting for /tf_static", zap.String("base_frame", base), zap.String("lidar_frame", lidar), zap.Duration("timeout", timeout))
	wait, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	t, path, err := src.Lookup(wait, base, lidar)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("LiDAR mount %s→%s from /tf_static: %w", base, lidar, ctx.Err())
		}
		return fmt.Errorf("LiDAR mount %s→%s: not on /tf_static after %v (--tf-timeout): %w", base, lidar, timeout, err)
	}
	x, y, z := t.Translation[0], t.Translation[1], t.Translation[2]
	roll, pitch, yaw := t.Rotation.RPY()
	roll, pitch, yaw = plusZero(roll), plusZero(pitch), plusZero(yaw)
	from := strings.Join(path, "→")
	switch {
	case z < 0:
		return fmt.Errorf("LiDAR mount %s from /tf_static: %s lies %.3f m below %s; the BEV measures heights from the ground, so --base-frame must be the robot's frame on the ground (base_footprint, REP-105), not one above the LiDAR", from, lidar, -z, base)
	case z > maxLidarHeightM:
		return fmt.Errorf("LiDAR mount %s from /tf_static: %s lies %g m above %s, more than %g m (a transform in centimetres?)", from, lidar, z, base, maxLidarHeightM)
	case math.Abs(x) > maxLidarOffsetM || math.Abs(y) > maxLidarOffsetM:
		return fmt.Errorf("LiDAR mount %s from /tf_static: %s lies at x %g, y %g m from %s; want within %g m each (a transform in centimetres?)", from, lidar, x, y, base, maxLidarOffsetM)
	}
	cfg.LidarXY = [2]float64{x, y}
	cfg.LidarHeight = float32(z)
	cfg.LidarRPY = [3]float64{roll, pitch, yaw}
	cfg.LidarFrame = lidar
	cfg.LidarMountFrom = "/tf_static " + from
	// The flags that say the same, for a robot without ROS or a check
	// against tf2_echo.
	log.Info("LiDAR mount from /tf_static", zap.String("chain", from), zap.Duration("waited", time.Since(start).Round(time.Millisecond)),
		zap.String("same_as", "--lidar-xy "+num(x)+","+num(y)+" --lidar-height "+num(z)+" --lidar-rpy "+num(roll)+","+num(pitch)+","+num(yaw)))
	return nil
}

// plusZero turns -0 (atan2 of a level LiDAR) into 0, which logs as 0.
func plusZero(v float64) float64 {
	if v == 0 {
		return 0
	}
	return v
}

// num formats a mount number as the flags take it: enough digits for a
// millimetre and a thousandth of a degree, no more.
func num(v float64) string {
	s := strconv.FormatFloat(v, 'f', 6, 64)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	if s == "-0" || s == "" {
		return "0"
	}
	return s
}

// lidarFrameIDs are the handle frame ids a cloud in the LiDAR's frame
// carries: the name as tf2 has it and with a leading '/', each cut to
// the handle's 16 bytes as the camera cuts them. Zero values: no check.
type lidarFrameIDs struct{ plain, slash handles.FrameID }

func newLidarFrameIDs(frame string) lidarFrameIDs {
	frame = strings.TrimPrefix(frame, "/")
	if frame == "" {
		return lidarFrameIDs{}
	}
	var ids lidarFrameIDs
	copy(ids.plain[:], frame)
	copy(ids.slash[:], "/"+frame)
	return ids
}

// matches reports whether a cloud with frame id f is in the LiDAR's frame
// (always, without a frame to check). It allocates nothing.
func (ids *lidarFrameIDs) matches(f *handles.FrameID) bool {
	return ids.plain == handles.FrameID{} || *f == ids.plain || *f == ids.slash
}
