package camera

import (
	"bytes"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/zerohop/zerohop/ros2"
	"github.com/zerohop/zerohop/ros2/tf"
)

// TransformLookup answers where a frame was at a time: source's pose in
// target at at (ns since the epoch, ROS time). ros2.Transforms (what /tf
// and /tf_static carry) and tf.Buffer are ones. It must not wait.
type TransformLookup interface {
	LookupAt(target, source string, at int64) (tf.Transform, error)
}

// scanDeskew undoes a planar LiDAR's own motion during a scan. A scanner
// measures its rays one after the other (time_increment apart); while the
// robot turns, each ray is taken from another pose, and the scan as sent
// is skewed: at 1 rad/s and 10 scans a second the last ray's bearing is
// off by up to 0.1 rad, 0.4 m at 4 m. As laser_geometry's
// transformLaserScanToPointCloud does, the scan frame's pose in a fixed
// frame (odom) is looked up at the first and the last ray's time, and
// each ray is placed by the pose interpolated at its own time, then
// expressed in the scan frame at the first ray's time: the header stamp,
// which the handle keeps.
//
// Only the subscription's goroutine calls motion; the counters are read
// by Stats.
type scanDeskew struct {
	fixed string
	look  TransformLookup
	log   *zap.Logger
	topic string

	// frameID caches the last scan's frame id as bytes and string, so
	// that a stream of scans from one frame allocates no string.
	frameID  []byte
	frameStr string

	deskewed, skipped atomic.Uint64

	logMu      sync.Mutex
	lastReason string // digits removed
	lastAt     time.Time
}

// motion returns the scan frame's pose at v's last ray in its pose at the
// first ray, or ok false when v needs no deskew (one ray, no time between
// rays). An error says why the transforms could not be had; the scan is
// then used as sent, counted and logged (motion does both).
func (d *scanDeskew) motion(v *ros2.LaserScanView) (m tf.Transform, ok bool) {
	n := len(v.Ranges)
	ti := float64(v.TimeIncrement)
	if n < 2 || ti == 0 || math.IsNaN(ti) || math.IsInf(ti, 0) {
		return tf.Transform{}, false
	}
	frame := trimNUL(v.FrameID)
	if !bytes.Equal(frame, d.frameID) {
		d.frameID = append(d.frameID[:0], frame...)
		d.frameStr = string(frame)
	}
	t0 := int64(v.Sec)*1e9 + int64(v.Nanosec)
	t1 := t0 + int64(math.Round(float64(n-1)*ti*1e9))
	first, err := d.look.LookupAt(d.fixed, d.frameStr, t0)
	if err == nil {
		var last tf.Transform
		if last, err = d.look.LookupAt(d.fixed, d.frameStr, t1); err == nil {
			d.deskewed.Add(1)
			return first.Inverse().Mul(last), true
		}
	}
	d.skip(err)
	return tf.Transform{}, false
}

// skip counts a scan used as sent and logs why, again when the reason
// (digits aside) changes or a minute has passed.
func (d *scanDeskew) skip(err error) {
	n := d.skipped.Add(1)
	reason := logReason(err)
	now := time.Now()
	d.logMu.Lock()
	log := reason != d.lastReason || now.Sub(d.lastAt) >= dropRelogEvery
	if log {
		d.lastReason, d.lastAt = reason, now
	}
	d.logMu.Unlock()
	if log {
		d.log.Warn("camera: ros2 scan not deskewed, used as the driver sent it (counted; logged again when the reason changes, else once a minute)",
			zap.String("ros_topic", d.topic), zap.String("fixed_frame", d.fixed), zap.String("scan_frame", d.frameStr),
			zap.Uint64("not_deskewed", n), zap.Error(err))
	}
}

// DeskewExtrapolation is how far past the newest /tf transform a scan's
// last ray may lie and still be deskewed, at the velocity of the last two
// transforms: a base publishes odom → base_link at 20 to 100 Hz, and a
// scan's last ray is often newer than the newest transform received.
const DeskewExtrapolation = 100 * time.Millisecond

// rayMotion is a scan's motion (scanDeskew.motion) as an axis, an angle
// and a translation, so that a ray's share of it costs one Sincos:
// at(f, p) is tf.Interpolate(tf.Identity(), m, f).Apply(p), the turn by
// f × angle about axis (Rodrigues) plus f × translation.
type rayMotion struct {
	axis  [3]float64 // unit; zero when there is no turn
	angle float64    // radians, in [0, π]: the shorter way, as Interpolate
	t     [3]float64
}

func newRayMotion(m tf.Transform) rayMotion {
	q := m.Rotation
	if q.W < 0 {
		q = tf.Quaternion{X: -q.X, Y: -q.Y, Z: -q.Z, W: -q.W}
	}
	r := rayMotion{t: m.Translation}
	if s := math.Sqrt(q.X*q.X + q.Y*q.Y + q.Z*q.Z); s > 0 {
		r.axis = [3]float64{q.X / s, q.Y / s, q.Z / s}
		r.angle = 2 * math.Atan2(s, q.W)
	}
	return r
}

// at returns p moved by the fraction f of the motion.
func (r *rayMotion) at(f float64, p [3]float64) [3]float64 {
	sin, cos := math.Sincos(f * r.angle)
	u := r.axis
	cross := [3]float64{u[1]*p[2] - u[2]*p[1], u[2]*p[0] - u[0]*p[2], u[0]*p[1] - u[1]*p[0]}
	dot := (u[0]*p[0] + u[1]*p[1] + u[2]*p[2]) * (1 - cos)
	var out [3]float64
	for i := range out {
		out[i] = p[i]*cos + cross[i]*sin + u[i]*dot + f*r.t[i]
	}
	return out
}

// checkDeskew validates the deskew part of cfg (the flags check that a
// fixed frame comes with a scan topic).
func checkDeskew(cfg ROS2SourceConfig) error {
	if cfg.ScanFixedFrame != "" && cfg.Transforms == nil {
		return fmt.Errorf("camera: ros2 scan fixed frame %q without transforms to look it up in", cfg.ScanFixedFrame)
	}
	return nil
}
