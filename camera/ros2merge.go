package camera

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/zerohop/zerohop/ros2/tf"
	"github.com/zerohop/zerohop/sensor"
)

// lidarInput is one LiDAR topic: a planar scanner's or a PointCloud2
// one. Its deskew (nil without FixedFrame) and skewLogged are touched
// only by its subscription's goroutine, or under the merger's lock.
type lidarInput struct {
	topic      string
	deskew     *lidarDeskew
	skewLogged bool
	// noIntensity counts scans whose intensities do not match their
	// ranges, or clouds without the intensity field (logged once).
	noIntensity atomic.Uint64
	// received counts the topic's scans; merged those that went into a
	// merged cloud, superseded those replaced by the same
	// scanner's next scan (or refused as too old) before the others came.
	received, merged, superseded atomic.Uint64
	lastAt                       atomic.Int64 // arrival of the last scan, UnixNano; 0: none yet
}

// LidarInputStats is one merged LiDAR's topic: its scans or clouds, what
// became of them, and the publishers matched now. Every received message
// is merged, superseded, dropped (the points stream's drop counters), or
// pending: the latest, waiting for the other LiDARs.
type LidarInputStats struct {
	Topic                        string
	Publishers                   int
	Received, Merged, Superseded uint64
	// Silent is how long ago its last scan arrived; -1 when none has.
	Silent time.Duration
}

// MergeMaxAge is how long before a merged cloud is made its scans may
// have arrived: an older one is not used (counted as superseded) and the
// merger waits for that scanner's next scan. A scanner that stalled does
// not bring a stale view of its side into a fresh cloud. It is measured
// by arrival, on this machine's clock, so scanners whose clocks disagree
// still merge. 200 ms: the agent's default watchdog, and longer than a
// 5.5 Hz scanner's period.
const MergeMaxAge = 200 * time.Millisecond

// mergeSilentWarn is how long a scanner may send nothing, while the
// others send, before the camera says that no merged cloud goes out.
const mergeSilentWarn = time.Second

// lidarMerger merges the scans of several planar scanners (a robot's front
// and rear laser, each seeing 270°), or the clouds of several 3D LiDARs,
// into one cloud in a frame on the robot (base_link), as ira_laser_tools'
// laserscan_multi_merger does for Nav2 and pointcloud_concatenate for
// clouds. It keeps each scanner's latest scan, in the scanner's frame at
// its header stamp (deskewed with FixedFrame), and makes a cloud once
// every scanner has sent a scan since the last one: the merged rate is
// the slowest scanner's. A scanner that stops sending stops the merged
// clouds, so the agent's watchdog stops the robot rather than let it
// drive on a view with one side missing; the log and /diagnostics name
// the scanner.
//
// Each scan is moved into the merge frame by its frame's transform at its
// stamp (/tf_static's mount, or /tf for a moving joint). With FixedFrame,
// each is also moved by the robot's motion from its stamp to the newest
// scan's, which stamps the cloud; without it the cloud is stamped with
// the oldest scan's time, so that the agent's staleness check is not
// flattered by the newest. With StampOnReceipt the cloud is stamped with
// the oldest scan's arrival.
//
// Every field is guarded by mu, which the scan callbacks (one goroutine
// per scanner) hold from their scan's conversion to its cloud's publish.
type lidarMerger struct {
	frame   string
	frameID []byte // frame, as a handle's frame id bytes
	scans   bool   // the inputs are planar scanners': the cloud is marked planar
	fixed   string // "" = no motion between the scans' times
	look    TransformLookup
	log     *zap.Logger

	// notMoved counts clouds made by the mounts alone because /tf could
	// not say how the robot moved between the scans (FixedFrame).
	notMoved atomic.Uint64

	mu    sync.Mutex
	parts []mergePart
	// noTransformLog and notMovedLog are the reasons last logged.
	noTransformLog, notMovedLog reasonLog
	silentAt                    time.Time // when a silent scanner was last logged
	started                     time.Time // a scanner that never sent is silent since
}

// reasonLog is the last reason logged for one kind of failure.
type reasonLog struct {
	reason string
	at     time.Time
}

// due says whether err is to be logged now: its reason (digits aside)
// differs from the last one logged, or a minute has passed.
func (r *reasonLog) due(now time.Time, err error) bool {
	reason := logReason(err)
	if reason == r.reason && now.Sub(r.at) < dropRelogEvery {
		return false
	}
	r.reason, r.at = reason, now
	return true
}

// mergePart is one scanner's latest scan: its points (packed XYZI
// float32, in frame at stamp), and whether it came since the last cloud.
type mergePart struct {
	in       *lidarInput
	buf      []byte
	n        int
	stamp    int64 // ns, the header's
	arrived  int64 // ns, this machine's clock
	frameID  []byte
	frame    string
	fresh    bool
	toMerge  tf.Transform
	rotation [9]float64
}

func newLidarMerger(cfg ROS2SourceConfig, inputs []*lidarInput, partBytes uint64, scans bool) *lidarMerger {
	m := &lidarMerger{frame: cfg.MergeFrame, frameID: []byte(cfg.MergeFrame), scans: scans, fixed: cfg.FixedFrame, look: cfg.Transforms, log: cfg.Log,
		started: time.Now()}
	for _, in := range inputs {
		m.parts = append(m.parts, mergePart{in: in, buf: make([]byte, partBytes)})
	}
	return m
}

// lock takes mu for input k's new message and returns its part; a
// message still waiting there, the others not having sent since, is
// superseded. The caller writes the points, calls set and unlocks.
func (m *lidarMerger) lock(k int) *mergePart {
	m.mu.Lock()
	p := &m.parts[k]
	if p.fresh {
		p.in.superseded.Add(1)
	}
	return p
}

// set records the part's new message (its points are written): header
// stamp, frame and arrival; it waits for the others.
func (m *lidarMerger) set(p *mergePart, sec int32, nanosec uint32, frameID []byte, arrived int64) {
	p.stamp = int64(sec)*1e9 + int64(nanosec)
	p.arrived = arrived
	p.setFrame(frameID)
	p.fresh = true
}

// setFrame makes the part's frame string id, allocating only when it
// changes.
func (p *mergePart) setFrame(id []byte) {
	if f := trimNUL(id); string(f) != p.frame {
		p.frameID = append(p.frameID[:0], f...)
		p.frame = string(f)
	}
}

// ready says whether every scanner has a scan since the last cloud. Scans
// that arrived more than MergeMaxAge before now are superseded: the
// merger waits for their scanners' next.
func (m *lidarMerger) ready(now int64) bool {
	ok := true
	for i := range m.parts {
		p := &m.parts[i]
		if p.fresh && now-p.arrived > int64(MergeMaxAge) {
			p.fresh = false
			p.in.superseded.Add(1)
		}
		ok = ok && p.fresh
	}
	return ok
}

// oldestArrival is when the oldest of the parts arrived.
func (m *lidarMerger) oldestArrival() int64 {
	at := m.parts[0].arrived
	for i := range m.parts {
		at = min(at, m.parts[i].arrived)
	}
	return at
}

// place sets each part's transform into the merge frame at the cloud's
// stamp and returns that stamp. With a fixed frame the scans are moved to
// the newest one's time by the robot's motion; when /tf cannot say where
// a scanner was, the cloud is made without it (the oldest stamp, each
// scan by its mount), counted (notMoved) and logged.
func (m *lidarMerger) place(now time.Time) (int64, error) {
	oldest, newest := m.parts[0].stamp, m.parts[0].stamp
	for i := range m.parts {
		oldest, newest = min(oldest, m.parts[i].stamp), max(newest, m.parts[i].stamp)
	}
	if m.fixed != "" {
		err := m.placeMoving(newest)
		if err == nil {
			return newest, nil
		}
		n := m.notMoved.Add(1)
		if m.notMovedLog.due(now, err) {
			m.log.Warn("camera: ros2 merged LiDAR data not moved to one time: /tf does not say how the robot moved between the scans or clouds; merged by the LiDARs' mounts alone, stamped with the oldest (counted; logged again when the reason changes, else once a minute)",
				zap.String("fixed_frame", m.fixed), zap.String("merge_frame", m.frame), zap.Uint64("not_moved", n), zap.Error(err))
		}
	}
	for i := range m.parts {
		p := &m.parts[i]
		t, err := m.look.LookupAt(m.frame, p.frame, p.stamp)
		if err != nil {
			return 0, fmt.Errorf("%s in frame %q: no transform to the merge frame %q (is robot_state_publisher, or a static_transform_publisher, publishing the LiDAR's mount on /tf_static?): %w",
				p.in.topic, p.frame, m.frame, err)
		}
		p.setTransform(t)
	}
	return oldest, nil
}

// placeMoving sets each part's transform to take its points to the merge
// frame at time at: through the fixed frame, where the scanner was at its
// scan's stamp and the merge frame at at.
func (m *lidarMerger) placeMoving(at int64) error {
	out, err := m.look.LookupAt(m.fixed, m.frame, at)
	if err != nil {
		return fmt.Errorf("merge frame %q: %w", m.frame, err)
	}
	inv := out.Inverse()
	for i := range m.parts {
		p := &m.parts[i]
		t, err := m.look.LookupAt(m.fixed, p.frame, p.stamp)
		if err != nil {
			return fmt.Errorf("%s in frame %q: %w", p.in.topic, p.frame, err)
		}
		p.setTransform(inv.Mul(t))
	}
	return nil
}

func (p *mergePart) setTransform(t tf.Transform) {
	p.toMerge = t
	p.rotation = t.Rotation.Matrix()
}

// write copies the parts' points into dst, each moved into the merge
// frame, and returns how many; dst holds them all.
func (m *lidarMerger) write(dst []byte) int {
	le := binary.LittleEndian
	n := 0
	for i := range m.parts {
		p := &m.parts[i]
		// Locals, not p's fields: the stores into dst would make the
		// compiler reload them for every point.
		// float32, as the points are: a rounding of 1e-7 of the
		// distance, 10 µm at 100 m.
		var r [9]float32
		for j, v := range p.rotation {
			r[j] = float32(v)
		}
		t0, t1, t2 := float32(p.toMerge.Translation[0]), float32(p.toMerge.Translation[1]), float32(p.toMerge.Translation[2])
		src, out := p.buf[:p.n*sensor.PointStep], dst[n*sensor.PointStep:(n+p.n)*sensor.PointStep]
		for o := 0; o+sensor.PointStep <= len(src) && o+sensor.PointStep <= len(out); o += sensor.PointStep {
			s, d := src[o:o+sensor.PointStep:o+sensor.PointStep], out[o:o+sensor.PointStep:o+sensor.PointStep]
			x := math.Float32frombits(le.Uint32(s[sensor.PointOffsetX:]))
			y := math.Float32frombits(le.Uint32(s[sensor.PointOffsetY:]))
			z := math.Float32frombits(le.Uint32(s[sensor.PointOffsetZ:]))
			le.PutUint32(d[sensor.PointOffsetX:], math.Float32bits(r[0]*x+r[1]*y+r[2]*z+t0))
			le.PutUint32(d[sensor.PointOffsetY:], math.Float32bits(r[3]*x+r[4]*y+r[5]*z+t1))
			le.PutUint32(d[sensor.PointOffsetZ:], math.Float32bits(r[6]*x+r[7]*y+r[8]*z+t2))
			le.PutUint32(d[sensor.PointOffsetIntensity:], le.Uint32(s[sensor.PointOffsetIntensity:]))
		}
		n += p.n
	}
	return n
}

// done marks the parts merged into a published cloud.
func (m *lidarMerger) done() {
	for i := range m.parts {
		m.parts[i].fresh = false
		m.parts[i].in.merged.Add(1)
	}
}

// warnSilent logs, at most once a minute, the scanners that have sent
// nothing for mergeSilentWarn while another sends: no merged cloud goes
// out without them.
func (m *lidarMerger) warnSilent(now time.Time) {
	if now.Sub(m.silentAt) < dropRelogEvery {
		return
	}
	var silent []string
	for i := range m.parts {
		in := m.parts[i].in
		since := m.started
		if at := in.lastAt.Load(); at != 0 {
			since = time.Unix(0, at)
		}
		if now.Sub(since) >= mergeSilentWarn {
			silent = append(silent, in.topic)
		}
	}
	if len(silent) == 0 {
		return
	}
	m.silentAt = now
	m.log.Warn("camera: ros2 LiDAR merge waits for LiDARs that send nothing: no merged cloud goes out without every LiDAR's scan or cloud, so the agent stops the robot; is their driver running, on this ROS_DOMAIN_ID? (logged again after a minute)",
		zap.String("silent", strings.Join(silent, ", ")), zap.Duration("for_at_least", mergeSilentWarn), zap.String("merge_frame", m.frame))
}

// logNoTransform logs a cloud that could not be made, again when the
// reason (digits aside) changes or a minute has passed.
func (m *lidarMerger) logNoTransform(now time.Time, n uint64, err error) {
	if m.noTransformLog.due(now, err) {
		m.log.Error("camera: ros2 merged cloud not made (counted; logged again when the reason changes, else once a minute)",
			zap.Uint64("not_made", n), zap.Error(err))
	}
}
