package camera

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"go.uber.org/zap"

	"github.com/zerohop/zerohop/handles"
	"github.com/zerohop/zerohop/ros2"
	"github.com/zerohop/zerohop/ros2/tf"
	"github.com/zerohop/zerohop/sensor"
)

// OnLaserScan ingests one planar LiDAR scan as a cloud in the scan's
// frame, packed XYZI float32 (sensor.PointStep), its handle marked
// handles.PointsPlanar; it is the first scan subscription's callback. Ray i
// lies at angle_min + i × angle_increment (counter-clockwise from the
// frame's x axis, ROS REP 103); its point is (r cos θ, r sin θ, 0) with
// intensity intensities[i] × --ros2-intensity-scale, or 0 when the
// driver sends none or it is not finite (the voxel filter would drop the
// point, position and all). Rays without a return are left out: NaN (an
// error), +Inf (no echo) and ranges outside [range_min, range_max]. A
// -Inf ray (REP 117: something closer than the scanner measures) becomes
// a point at range_min: an obstacle at the bumper is not open space.
// Points keep the scan's ray order. With --ros2-fixed-frame each
// ray is placed where the scanner was at its own time (lidarDeskew);
// otherwise the cloud is the scan as sent. With a merge frame the scan
// waits for the other scanners' and goes out in their merged cloud
// (lidarMerger).
func (s *ROS2Source) OnLaserScan(v *ros2.LaserScanView) { s.onScan(0, v) }

// onScan is scan topic k's callback (OnLaserScan).
func (s *ROS2Source) onScan(k int, v *ros2.LaserScanView) {
	in := s.scans[k]
	st := &s.streams[TopicPoints]
	st.received.Add(1)
	in.received.Add(1)
	arrived := time.Now().UnixNano()
	in.lastAt.Store(arrived)
	if err := checkScan(v); err != nil {
		s.countDrop(TopicPoints, &st.unsupported, s.inputError(in, err))
		return
	}
	n := uint64(len(v.Ranges))
	if size := n * sensor.PointStep; size > s.inBytes {
		s.countDrop(TopicPoints, &st.tooLarge, s.inputError(in, fmt.Errorf("scan of %d rays needs %d bytes, a scan may fill %d (raise --ros2-max-points to at least %d)",
			n, size, s.inBytes, n)))
		return
	}
	intensities := v.Intensities
	if len(intensities) != len(v.Ranges) {
		if len(intensities) != 0 && in.noIntensity.Add(1) == 1 {
			s.log.Warn("camera: ros2 LaserScan has a different number of intensities than ranges; intensity is 0 for every point (logged once)",
				zap.String("ros_topic", in.topic), zap.Int("ranges", len(v.Ranges)), zap.Int("intensities", len(intensities)))
		}
		intensities = nil
	}
	if m := s.merge; m != nil {
		p := m.lock(k)
		defer m.mu.Unlock()
		p.n = scanToPoints(p.buf, v, intensities, s.iScale, s.scanMotion(in, v))
		m.set(p, v.Sec, v.Nanosec, v.FrameID, arrived)
		s.mergeOut(st, arrived)
		return
	}
	slot, ok := s.acquire(TopicPoints, st)
	if !ok {
		return
	}
	count := scanToPoints(slot.Bytes(), v, intensities, s.iScale, s.scanMotion(in, v))
	h := &st.h
	s.stamp(st, TopicPoints, v.Sec, v.Nanosec, v.FrameID)
	s.fillPointsHandle(h, count, true)
	s.publish(st, TopicPoints, slot)
}

// scanMotion is the scan's motion to deskew it by, or nil: no fixed
// frame (logged once for a scan whose rays are timed), or no transforms
// for it (counted and logged by the deskew).
func (s *ROS2Source) scanMotion(in *lidarInput, v *ros2.LaserScanView) *tf.Transform {
	if in.deskew != nil {
		if m, ok := in.deskew.motion(v); ok {
			in.deskew.last = m
			return &in.deskew.last
		}
	} else if !in.skewLogged && v.TimeIncrement != 0 && len(v.Ranges) > 1 {
		in.skewLogged = true
		s.log.Info("camera: ros2 scan rays are taken over time and are not deskewed: a scan taken while the robot turns is as skewed as the driver sent it; give --ros2-fixed-frame odom (the frame /tf places the robot in) to place each ray where the scanner was (logged once)",
			zap.String("ros_topic", in.topic), zap.Duration("rays_span", time.Duration(math.Abs(float64(len(v.Ranges)-1)*float64(v.TimeIncrement)*1e9))))
	}
	return nil
}

// fillPointsHandle sets the handle's points part for a cloud of count
// points: marked planar for a scan's, as the camera's for a
// PointCloud2's.
func (s *ROS2Source) fillPointsHandle(h *handles.Handle, count int, scan bool) {
	h.Kind = handles.KindPoints
	h.Image = handles.ImageFormat{}
	h.Points = s.cam.points
	if scan {
		h.Points.Flags = handles.PointsPlanar
	}
	h.Points.Count = uint32(count)
	h.Length = uint64(count) * sensor.PointStep
}

// mergeOut publishes the merged cloud once every LiDAR has sent since
// the last one (lidarMerger); nowNs is this machine's clock. The caller
// holds s.merge.mu.
func (s *ROS2Source) mergeOut(st *ros2Stream, nowNs int64) {
	m := s.merge
	now := time.Unix(0, nowNs)
	if !m.ready(nowNs) {
		m.warnSilent(now)
		return
	}
	at, err := m.place(now)
	if err != nil {
		m.logNoTransform(now, st.noTransform.Add(1), err)
		return // the parts stay: the next scan makes the cloud again
	}
	slot, ok := s.acquire(TopicPoints, st)
	if !ok {
		return
	}
	count := m.write(slot.Bytes())
	s.stamp(st, TopicPoints, int32(at/1e9), uint32(at%1e9), m.frameID)
	if s.cfg.StampOnReceipt {
		st.h.CaptureNs = m.oldestArrival() // not the newest's: the cloud is as old as its oldest scan
	}
	s.fillPointsHandle(&st.h, count, m.scans)
	if s.publish(st, TopicPoints, slot) {
		m.done()
	}
}

// checkScan refuses a scan whose rays cannot be placed: angles or range
// limits that are not finite or below 0, or several rays at one angle.
func checkScan(v *ros2.LaserScanView) error {
	finite := func(f float32) bool { return !math.IsNaN(float64(f)) && !math.IsInf(float64(f), 0) }
	switch {
	case !finite(v.AngleMin) || !finite(v.AngleIncrement):
		return fmt.Errorf("LaserScan angle_min %v, angle_increment %v: want finite angles", v.AngleMin, v.AngleIncrement)
	case v.AngleIncrement == 0 && len(v.Ranges) > 1:
		return fmt.Errorf("LaserScan angle_increment 0 with %d rays: want the angle between rays", len(v.Ranges))
	case !finite(v.RangeMin) || v.RangeMin < 0 || math.IsNaN(float64(v.RangeMax)) || v.RangeMin > v.RangeMax:
		// A negative range would put a return behind the scanner.
		return fmt.Errorf("LaserScan range_min %v, range_max %v: want 0 <= range_min <= range_max", v.RangeMin, v.RangeMax)
	}
	return nil
}

// scanToPoints writes v's valid returns into dst as packed XYZI float32
// and returns how many; dst holds len(v.Ranges) × PointStep bytes, and
// intensities is nil or as long as v.Ranges. With motion (the scan
// frame's pose at the last ray in its pose at the first, lidarDeskew) ray
// i is moved by the pose interpolated at i / (rays − 1) of it. It
// allocates nothing.
func scanToPoints(dst []byte, v *ros2.LaserScanView, intensities []float32, iScale float64, motion *tf.Transform) int {
	le := binary.LittleEndian
	lo, hi := float64(v.RangeMin), float64(v.RangeMax)
	last := float64(len(v.Ranges) - 1)
	var rm rayMotion
	if motion != nil {
		rm = newRayMotion(*motion)
	}
	n := 0
	for i, r32 := range v.Ranges {
		r := float64(r32)
		if math.IsInf(r, -1) {
			r = lo
		}
		// NaN fails both comparisons; +Inf is let through only by an
		// infinite range_max, so it is tested too. A range of 0 is no
		// return, even where range_min is 0.
		if !(r >= lo && r <= hi) || math.IsInf(r, 1) || r <= 0 {
			continue
		}
		sin, cos := math.Sincos(float64(v.AngleMin) + float64(i)*float64(v.AngleIncrement))
		var in float32
		if intensities != nil {
			in = intensities[i]
			if iScale != 1 {
				in = float32(float64(in) * iScale)
			}
			if f := float64(in); math.IsNaN(f) || math.IsInf(f, 0) {
				in = 0
			}
		}
		p := [3]float64{r * cos, r * sin, 0}
		if motion != nil {
			p = rm.at(float64(i)/last, p)
		}
		d := dst[n*sensor.PointStep : (n+1)*sensor.PointStep]
		le.PutUint32(d[sensor.PointOffsetX:], math.Float32bits(float32(p[0])))
		le.PutUint32(d[sensor.PointOffsetY:], math.Float32bits(float32(p[1])))
		le.PutUint32(d[sensor.PointOffsetZ:], math.Float32bits(float32(p[2])))
		le.PutUint32(d[sensor.PointOffsetIntensity:], math.Float32bits(in))
		n++
	}
	return n
}
