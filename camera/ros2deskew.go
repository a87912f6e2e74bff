package camera

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/zerohop/zerohop/sensor"

	"github.com/zerohop/zerohop/ros2"
	"github.com/zerohop/zerohop/ros2/tf"
)

// TransformLookup answers where a frame was at a time: source's pose in
// target at at (ns since the epoch, ROS time). ros2.Transforms (what /tf
// and /tf_static carry) and tf.Buffer are ones. It must not wait.
type TransformLookup interface {
	LookupAt(target, source string, at int64) (tf.Transform, error)
}

// lidarDeskew undoes a LiDAR's own motion during a scan or sweep. A scanner
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
// Clouds (a spinning 3D LiDAR's sweep) are deskewed the same way by
// their per-point time field (cloud).
//
// Only the subscription's goroutine calls motion and cloud; the counters
// are read by Stats.
type lidarDeskew struct {
	fixed string
	look  TransformLookup
	log   *zap.Logger
	topic string

	// frameID caches the last scan's frame id as bytes and string, so
	// that a stream of scans from one frame allocates no string.
	frameID  []byte
	frameStr string

	deskewed, skipped atomic.Uint64

	// last is the last scan's motion, returned by pointer without a heap
	// allocation per scan.
	last tf.Transform

	// noTimeField is the reason for a cloud without a time field, made
	// once; poses are a cloud's, reused.
	noTimeField  error
	badTimeName  string
	badTimeField error
	poses        cloudPoses
	times        []float32 // a cloud's point times, reused

	logMu      sync.Mutex
	lastReason string // digits removed
	lastErr    error
	lastAt     time.Time
}

// motion returns the scan frame's pose at v's last ray in its pose at the
// first ray, or ok false when v needs no deskew (one ray, no time between
// rays). An error says why the transforms could not be had; the scan is
// then used as sent, counted and logged (motion does both).
func (d *lidarDeskew) motion(v *ros2.LaserScanView) (m tf.Transform, ok bool) {
	n := len(v.Ranges)
	ti := float64(v.TimeIncrement)
	if n < 2 || ti == 0 || math.IsNaN(ti) || math.IsInf(ti, 0) {
		return tf.Transform{}, false
	}
	d.setFrame(v.FrameID)
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

// setFrame makes frameStr the message's frame id, allocating only when it
// changes.
func (d *lidarDeskew) setFrame(id []byte) {
	if frame := trimNUL(id); !bytes.Equal(frame, d.frameID) {
		d.frameID = append(d.frameID[:0], frame...)
		d.frameStr = string(frame)
	}
}

// skip counts a scan or cloud used as sent and logs why, again when the
// reason (digits aside) changes or a minute has passed.
func (d *lidarDeskew) skip(err error) {
	n := d.skipped.Add(1)
	now := time.Now()
	d.logMu.Lock()
	var log bool
	if err == d.lastErr { // the same error value (noTimeField): no text to build
		log = now.Sub(d.lastAt) >= dropRelogEvery
	} else {
		reason := logReason(err)
		log = reason != d.lastReason || now.Sub(d.lastAt) >= dropRelogEvery
		d.lastReason, d.lastErr = reason, err
	}
	if log {
		d.lastAt = now
	}
	d.logMu.Unlock()
	if log {
		d.log.Warn("camera: ros2 LiDAR data not deskewed, used as the driver sent it (counted; logged again when the reason changes, else once a minute)",
			zap.String("ros_topic", d.topic), zap.String("fixed_frame", d.fixed), zap.String("frame", d.frameStr),
			zap.Uint64("not_deskewed", n), zap.Error(err))
	}
}

// deskewBins is how many poses a cloud's motion is cut into: each point
// takes the pose at the middle of its bin. At 2 rad/s over a 0.1 s sweep
// a bin is 0.4 ms, 0.8 mrad: under 4 mm of error at 10 m.
const deskewBins = 256

// defaultTimeFields are the per-point time fields a cloud is deskewed by
// when ROS2SourceConfig.TimeField names none, first found first:
// velodyne_pointcloud's and Hesai's "time"/"timestamp" (float seconds),
// Ouster's "t" (uint32 ns).
func defaultTimeFields() []string { return []string{"time", "t", "timestamp"} }

// absoluteTime is the magnitude from which a point's time (in seconds) is
// taken as time since the epoch rather than an offset from the header
// stamp: no sweep lasts 11 days, and no ROS clock reads less.
const absoluteTime = 1e6

// maxEpochSeconds bounds times since the epoch (year 2255; and below
// 2⁶³ ns): a larger one is in another unit.
const maxEpochSeconds = 9e9

// maxSweep bounds a point's time from the cloud's first point's, in
// seconds: LiDARs sweep at 5 Hz and faster.
const maxSweep = 1

// cloudPoses are a cloud's motion in deskewBins poses, each a rotation
// matrix (row major) and a translation from the pose at the point's
// time into the cloud frame at the header stamp.
type cloudPoses struct {
	rot [deskewBins][9]float64
	tr  [deskewBins][3]float64
}

// cloud moves the points of dst (packed XYZI float32, converted from v by
// lay) to where they lie in the cloud's frame at its header stamp, by the
// sensor's motion between each point's time (lay.tm, in units of unit
// seconds; 0: seconds for a float field, nanoseconds for an integer one)
// and the stamp. A cloud that cannot be placed (no time field, the
// transforms missing) is left as sent, counted and logged.
func (d *lidarDeskew) cloud(dst []byte, v *ros2.PointCloud2View, lay *cloudLayout, unit float64) {
	if lay.tm.kind == 0 {
		err := d.noTimeField
		if lay.tmName != "" {
			if d.badTimeName != lay.tmName { // made once per field name, not per cloud
				d.badTimeName = lay.tmName
				d.badTimeField = fmt.Errorf("the cloud's time field %q is not one number inside each point (count 1, a numeric datatype, within point_step)", lay.tmName)
			}
			err = d.badTimeField
		}
		d.skip(err)
		return
	}
	if unit == 0 {
		unit = 1e-9
		if lay.tm.kind == pfFloat32 || lay.tm.kind == pfFloat64 {
			unit = 1
		}
	}
	n := int(v.Width) * int(v.Height)
	base, ok := firstTime(v, lay.tm)
	if !ok {
		d.skip(fmt.Errorf("time field %q holds no finite time", lay.tmName))
		return
	}
	if cap(d.times) < n {
		d.times = make([]float32, n) // once per larger cloud than any before
	}
	rel := d.times[:n]
	relTimes(rel, v, lay.tm, base, unit)
	// A sweep lasts under maxSweep: a time further from the first is
	// garbage (NaN and ±Inf too), and its point is not moved.
	lo, hi := float32(0), float32(0)
	for _, t := range rel {
		if t >= -maxSweep && t <= maxSweep {
			lo, hi = min(lo, t), max(hi, t)
		}
	}
	tmin, tmax := base*unit+float64(lo), base*unit+float64(hi)
	d.setFrame(v.FrameID)
	stamp := int64(v.Sec)*1e9 + int64(v.Nanosec)
	// Decided by the first finite time, not by the extremes: one point
	// with a garbage time must not turn a cloud's epoch times into
	// offsets or back.
	abs := math.Abs(base*unit) >= absoluteTime
	if abs && math.Abs(base*unit) >= maxEpochSeconds {
		d.skip(fmt.Errorf("time field %q reads %.6g s: not seconds since the epoch; give its unit with --ros2-time-unit (ns, us, ms or s)", lay.tmName, base*unit))
		return
	}
	ns := func(t float64) int64 {
		if abs {
			return int64(math.Round(t * 1e9))
		}
		return stamp + int64(math.Round(t*1e9))
	}
	at, err := d.look.LookupAt(d.fixed, d.frameStr, stamp)
	var first, last tf.Transform
	if err == nil {
		first, err = d.look.LookupAt(d.fixed, d.frameStr, ns(tmin))
	}
	if err == nil {
		last, err = d.look.LookupAt(d.fixed, d.frameStr, ns(tmax))
	}
	if err != nil {
		d.skip(err)
		return
	}
	back := at.Inverse()
	a, b := back.Mul(first), back.Mul(last)
	p := &d.poses
	for k := range deskewBins {
		m := tf.Interpolate(a, b, (float64(k)+0.5)/deskewBins)
		p.rot[k], p.tr[k] = m.Rotation.Matrix(), m.Translation
	}
	scale := float32(0)
	if hi-lo >= 1e-9 { // one time (to the nanosecond): every point takes the first pose
		scale = deskewBins / (hi - lo)
	}
	le := binary.LittleEndian
	for k, t := range rel {
		if !(t >= -maxSweep && t <= maxSweep) {
			continue // garbage time: not moved
		}
		bin := 0
		if f := (t - lo) * scale; f >= 1 {
			bin = int(min(f, deskewBins-1)) // clamped before converting: a float beyond int's range converts to nonsense
		}
		q := dst[k*sensor.PointStep : k*sensor.PointStep+12]
		x := float64(math.Float32frombits(le.Uint32(q[0:])))
		y := float64(math.Float32frombits(le.Uint32(q[4:])))
		z := float64(math.Float32frombits(le.Uint32(q[8:])))
		m, tr := &p.rot[bin], &p.tr[bin]
		le.PutUint32(q[0:], math.Float32bits(float32(m[0]*x+m[1]*y+m[2]*z+tr[0])))
		le.PutUint32(q[4:], math.Float32bits(float32(m[3]*x+m[4]*y+m[5]*z+tr[1])))
		le.PutUint32(q[8:], math.Float32bits(float32(m[6]*x+m[7]*y+m[8]*z+tr[2])))
	}
	d.deskewed.Add(1)
}

// firstTime returns the first finite value of field f among v's points.
func firstTime(v *ros2.PointCloud2View, f cloudField) (float64, bool) {
	w, step := int(v.Width), int(v.PointStep)
	for r := range int(v.Height) {
		row := v.Data[r*int(v.RowStep):]
		for c := range w {
			if t := f.float(row[c*step:]); !math.IsNaN(t) && !math.IsInf(t, 0) {
				return t, true
			}
		}
	}
	return 0, false
}

// relTimes writes each point's time in seconds after base (in the
// field's units) into rel: float32 is exact enough for offsets within a
// sweep even when the times are since the epoch. The common field types
// have loops of their own, without a type switch per point.
func relTimes(rel []float32, v *ros2.PointCloud2View, f cloudField, base, unit float64) {
	le := binary.LittleEndian
	w, step, off := int(v.Width), int(v.PointStep), int(f.off)
	k := 0
	for r := range int(v.Height) {
		row := v.Data[r*int(v.RowStep):]
		switch f.kind {
		case pfFloat32:
			for c := range w {
				rel[k+c] = float32((float64(math.Float32frombits(le.Uint32(row[c*step+off:]))) - base) * unit)
			}
		case pfUint32:
			for c := range w {
				rel[k+c] = float32((float64(le.Uint32(row[c*step+off:])) - base) * unit)
			}
		case pfFloat64:
			for c := range w {
				rel[k+c] = float32((math.Float64frombits(le.Uint64(row[c*step+off:])) - base) * unit)
			}
		default:
			for c := range w {
				rel[k+c] = float32((f.float(row[c*step:]) - base) * unit)
			}
		}
		k += w
	}
}

// DeskewExtrapolation is how far past the newest /tf transform a scan's
// last ray may lie and still be deskewed, at the velocity of the last two
// transforms: a base publishes odom → base_link at 20 to 100 Hz, and a
// scan's last ray is often newer than the newest transform received.
const DeskewExtrapolation = 100 * time.Millisecond

// rayMotion is a scan's motion (lidarDeskew.motion) as an axis, an angle
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
	if cfg.FixedFrame != "" && cfg.Transforms == nil {
		return fmt.Errorf("camera: ros2 fixed frame %q without transforms to look it up in", cfg.FixedFrame)
	}
	return nil
}
