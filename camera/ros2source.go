package camera

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/zerohop/zerohop/handles"
	"github.com/zerohop/zerohop/monotime"
	"github.com/zerohop/zerohop/pinned"
	"github.com/zerohop/zerohop/ros2"
	"github.com/zerohop/zerohop/sensor"
)

// A ROS 2 source is push-based: a driver publishes sensor_msgs/Image and
// PointCloud2, Cyclone hands each sample to a subscription callback as a
// loaned view, and ROS2Source copies it (the only copy) into a slot of the
// camera's pool and publishes the slot's handle. The camera's Run loop is
// not used; the pools come from New with a PoolSizes source.
//
// This file compiles in every build: without the ros2 build tag the ros2
// package is a stub whose Subscribe* return ros2.ErrNotBuilt, and the
// conversion code below stays testable without libddsc.

// ErrPushSource is returned by PoolSizes' Fill methods: a push source's
// frames arrive through ROS2Source, never through Camera.Run.
var ErrPushSource = errors.New("camera: push source: frames arrive by subscription, not through Camera.Run")

// PoolSizes is a sensor.Source that only sizes the camera's pools for a
// push source (ROS 2): MaxPoints points of sensor.PointStep bytes, and
// images of up to MaxImageBytes. Zero disables that stream.
type PoolSizes struct {
	Points     int
	ImageBytes int
}

func (s PoolSizes) MaxPoints() int     { return s.Points }
func (s PoolSizes) MaxImageBytes() int { return s.ImageBytes }
func (s PoolSizes) Frames() uint64     { return 0 }
func (PoolSizes) FillPoints(uint64, []byte) (int, error) {
	return 0, ErrPushSource
}
func (PoolSizes) FillImage(uint64, []byte) (sensor.ImageInfo, error) {
	return sensor.ImageInfo{}, ErrPushSource
}

// ROS2SourceConfig configures a ROS2Source.
type ROS2SourceConfig struct {
	// ImageTopic is the ROS image topic to subscribe to ("" = none), and
	// PointsTopics the PointCloud2 ones (none = nil). Each needs the
	// camera's pool of that kind. Several points topics need MergeFrame.
	ImageTopic   string
	PointsTopics []string
	// ScanTopics are planar LiDARs' sensor_msgs/LaserScan topics, read
	// into the points stream instead of PointsTopics (which must then be
	// nil), their clouds marked planar (OnLaserScan); none = nil. Several
	// need MergeFrame.
	ScanTopics []string
	// MergeFrame, if not "", puts every scan or cloud into this frame on
	// the robot (base_link), through Transforms, and merges one of each
	// of ScanTopics or PointsTopics into one cloud (lidarMerger).
	MergeFrame string
	// FixedFrame, if not "", deskews each scan, and each cloud with a
	// per-point time field (lidarDeskew): a frame that does not move with
	// the robot (odom), looked up in Transforms. Data whose transforms or
	// times cannot be had is used as sent, counted
	// (ROS2Stats.NotDeskewed) and logged.
	FixedFrame string
	Transforms TransformLookup
	// TimeField names the per-point time field a PointCloud2 is
	// deskewed by ("" = the first of time, t, timestamp it has), and
	// TimeUnit its unit in seconds (0 = seconds for a float field,
	// nanoseconds for an integer one). Times of 10^6 s and more are
	// since the epoch; smaller ones are offsets from the header stamp.
	TimeField string
	TimeUnit  float64
	// QoS of both subscriptions; the zero value is sensor data QoS
	// (BEST_EFFORT, KEEP_LAST 5), which matches any publisher.
	QoS ros2.QoS
	// Handles, if set, also gets every published handle while it has a
	// matched subscriber (ros2.HandleWriter), so ROS tools can watch.
	Handles HandleSink
	// Mirrors[topic], if set, republishes each frame of that topic as a
	// full ROS message while it has a matched subscriber
	// (ros2.MirrorWriter); nobody pays for serialization otherwise.
	Mirrors [2]MirrorSink
	// StampOnReceipt stamps each frame with this machine's wall clock
	// when its message arrives, instead of the message's header.stamp:
	// for drivers whose stamps come from another clock (a simulator's
	// use_sim_time /clock, an unsynchronised device), which the agent's
	// watchdog would drop as stale. Time spent before arrival then goes
	// uncounted, and the agent pairs images with clouds by arrival.
	StampOnReceipt bool
	// Intensity says which PointCloud2 field becomes each point's
	// intensity, and its scale; the zero value reads "intensity" as is.
	Intensity ROS2Intensity
	// Checksum fills each handle's payload checksum (test mode).
	Checksum bool
	Log      *zap.Logger
}

// HandleSink publishes handles on a side channel; ros2.HandleWriter is one.
type HandleSink interface {
	Publish(*handles.Handle) error
	Matched() int
}

// MirrorSink republishes a published frame in full; ros2.MirrorWriter is
// one.
type MirrorSink interface {
	Publish(h *handles.Handle, payload []byte) error
	Matched() int
}

// DefaultIntensityField is the PointCloud2 field read as each point's
// intensity when ROS2Intensity names none.
const DefaultIntensityField = "intensity"

// ROS2Intensity says where a ROS 2 cloud's point intensity comes from
// (--ros2-intensity-field, --ros2-intensity-scale). The zero value reads the
// field "intensity" as is.
type ROS2Intensity struct {
	// Field is the PointCloud2 field (any numeric datatype, count 1)
	// whose value, converted to float32 and times Scale, becomes each
	// point's intensity; "" = DefaultIntensityField. Never x, y or z. A
	// cloud without it gets intensity 0 for every point and one warning.
	Field string
	// None reads no field: intensity is 0 for every point, without a
	// warning (a depth camera's x, y, z, rgb cloud has none). Field and
	// Scale are then not used.
	None bool
	// Scale multiplies each intensity (in float64, then rounded to
	// float32; a product beyond float32's range is +Inf, and the voxel
	// filter skips such points); 0 = 1. Finite and > 0. Any value but 1
	// turns off the single memmove for clouds already packed XYZI float32.
	Scale float64
}

// ParseROS2Intensity makes a ROS2Intensity from the values of
// --ros2-intensity-field and --ros2-intensity-scale as given on the
// command line: field "" means None, and scale must be finite and > 0 (0
// is refused there rather than read as the default). Errors name the flag.
func ParseROS2Intensity(field string, scale float64) (ROS2Intensity, error) {
	in := ROS2Intensity{Field: field, None: field == "", Scale: scale}
	if scale == 0 {
		return ROS2Intensity{}, errors.New(`--ros2-intensity-scale 0: want a finite number > 0 (1: as the driver sends it; for no intensity at all, --ros2-intensity-field "")`)
	}
	return in, in.check()
}

// check refuses a Field of x, y or z and a Scale that is not finite or
// below 0, naming the flags.
func (in ROS2Intensity) check() error {
	switch in.Field {
	case "x", "y", "z":
		return fmt.Errorf(`--ros2-intensity-field %q: that is the point's position; name the field that holds its intensity (e.g. reflectivity), or "" for none`, in.Field)
	}
	if math.IsNaN(in.Scale) || math.IsInf(in.Scale, 0) || in.Scale < 0 {
		return fmt.Errorf("--ros2-intensity-scale %v: want a finite number > 0 (1: as the driver sends it)", in.Scale)
	}
	return nil
}

// field is the field name to read, "" for none.
func (in ROS2Intensity) field() string {
	switch {
	case in.None:
		return ""
	case in.Field == "":
		return DefaultIntensityField
	}
	return in.Field
}

// scale is Scale with 0 read as 1.
func (in ROS2Intensity) scale() float64 {
	if in.Scale == 0 {
		return 1
	}
	return in.Scale
}

// ROS2Stats counts one topic's messages. Every received message ends in
// exactly one of Published, Exhausted, Unsupported, TooLarge, Failed.
// With a merge frame, Received, Unsupported and TooLarge count the
// LiDARs' messages, and Published, Exhausted, Failed and NoTransform
// merged clouds (LidarInputStats says what became of each LiDAR's).
type ROS2Stats struct {
	Received    uint64
	Published   uint64 // written into a slot and published
	Delivered   uint64 // handles sent, summed over subscribers
	Exhausted   uint64 // no free slot: dropped (the callback never waits)
	Unsupported uint64 // encoding or point layout the pipeline cannot take
	TooLarge    uint64 // larger than a slot (raise --ros2-max-points / --ros2-max-image-bytes)
	Failed      uint64 // the publisher failed
	FrameIDs    uint64 // header.frame_id truncated to 16 bytes or replaced (not printable)
	Mirrored    uint64 // frames republished in full on the mirror topic
	// Scans and clouds placed point by point by the LiDAR's motion
	// (FixedFrame), and those that needed it but were used as sent.
	Deskewed, NotDeskewed uint64
	// NoTransform counts tries to make a merged cloud (one per message
	// that completes a set) that failed because a LiDAR's frame had no
	// transform to the merge frame (MergeFrame). NotMoved counts merged
	// clouds made by the mounts alone, /tf not saying how the robot moved
	// between the LiDARs' messages (FixedFrame).
	NoTransform, NotMoved uint64
}

// ROS2Source feeds the camera's pools from ROS 2 subscriptions. The image
// and points callbacks run on their subscriptions' goroutines, one at a
// time per topic; nothing in them blocks or allocates.
type ROS2Source struct {
	cam       *Camera
	pub       Publisher
	cfg       ROS2SourceConfig
	log       *zap.Logger
	subs      []*ros2.Subscription
	lidarSubs []*ros2.Subscription // also in subs: the points or scan topics', in order; none in tests without a participant
	image     *ros2.Subscription   // also in subs; nil if not subscribed
	streams   [2]ros2Stream
	mirrors   [2]*mirrorWorker // nil where cfg.Mirrors has none
	// closeMirrors stops the workers once.
	closeMirrors sync.Once
	// iField and iScale are cfg.Intensity resolved: the field read as
	// intensity ("" = none) and its scale (1 = as is). iMissing is the
	// warning for a cloud without iField, made once by NewROS2Source so
	// that the callback builds no string.
	iField, iMissing string
	iScale           float64
	tFields          []string // the time fields looked for; nil without FixedFrame
	// clouds and scans are PointsTopics' and ScanTopics', in order, or
	// one unnamed input where none is configured (for tests, which call
	// OnPointCloud2 and OnLaserScan themselves); each has its own deskew.
	// merge is nil without MergeFrame. inBytes is the most one message
	// may fill: a slot, or its share of one when merged.
	clouds, scans []*lidarInput
	merge         *lidarMerger
	inBytes       uint64
}

// mirrorWorker publishes one topic's mirror on a goroutine of its own: a
// DDS write sends every fragment from the writing thread, so on a link
// slower than the frames (a robot's Wi-Fi) it takes longer than a frame
// period, and on the subscription's goroutine it would hold up the
// camera's ingest. The callback copies a frame into buf only while the
// worker is idle (busy false) and hands it over; while it is busy the
// frame is not mirrored, and counted: the newest frame a link can carry,
// never a queue.
type mirrorWorker struct {
	sink MirrorSink
	st   *ros2Stream
	log  *zap.Logger
	busy atomic.Bool // set by the callback with buf filled, cleared by the worker when sent
	wake chan struct{}
	stop chan struct{}
	done chan struct{}
	h    handles.Handle // written by the callback before wake, read by the worker after
	buf  []byte         // the pool's slot size; Go memory passed to C only for the write's duration
}

func (w *mirrorWorker) run() {
	defer close(w.done)
	for {
		select {
		case <-w.stop:
			return
		case <-w.wake:
		}
		if err := w.sink.Publish(&w.h, w.buf[:w.h.Length]); err != nil {
			if w.st.mirrorErrors.Add(1) == 1 {
				w.log.Warn("camera: ros2 mirror publish failed (logged once)", zap.Error(err))
			}
		} else {
			w.st.mirrored.Add(1)
		}
		w.busy.Store(false)
	}
}

// offer hands the frame in payload to the worker unless it is still
// sending the last one; it never waits and allocates nothing.
func (w *mirrorWorker) offer(h *handles.Handle, payload []byte) {
	if !w.busy.CompareAndSwap(false, true) {
		w.st.mirrorErrors.Add(1) // a frame the mirror dropped rather than wait
		return
	}
	w.h = *h
	copy(w.buf, payload)
	w.wake <- struct{}{} // cap 1, and empty: the worker took the last one before clearing busy
}

// ros2Stream is one topic's state. h and seq are touched only by the
// topic's callback goroutine.
type ros2Stream struct {
	h   handles.Handle
	seq uint64

	received, published, delivered, exhausted atomic.Uint64
	unsupported, tooLarge, failed, frameIDs   atomic.Uint64
	noTransform                               atomic.Uint64 // merged clouds not made: a scanner's frame has no transform
	mirrored, mirrorErrors                    atomic.Uint64
	zeroStamps                                atomic.Uint64 // header.stamp {0, 0}, without StampOnReceipt
	farStamps                                 atomic.Uint64 // header.stamp over farStamp from this clock, without StampOnReceipt

	// dropLog is, per drop counter, the reason last logged (digits
	// removed, so that sizes do not count as a new reason) and when.
	dropMu  sync.Mutex
	dropLog map[*atomic.Uint64]loggedDrop
}

// loggedDrop is the last drop line of one class.
type loggedDrop struct {
	reason string
	at     time.Time
}

// farStamp is how far from this machine's clock a header.stamp may lie
// before the camera says so once: the agent drops frames further off than
// its --watchdog (200 ms by default), and a second means another clock.
const farStamp = time.Second

// dropRelogEvery is how often a drop class is logged again while its
// reason stays the same.
const dropRelogEvery = time.Minute

// NewROS2Source subscribes to the configured topics on p and publishes
// what arrives through pub (a transport.Server or Inproc whose topic i is
// camera topic i). With p nil it subscribes to nothing: tests drive
// OnImage, OnPointCloud2 and OnLaserScan directly. Close it before the
// publisher and the camera.
func NewROS2Source(p *ros2.Participant, cam *Camera, pub Publisher, cfg ROS2SourceConfig) (*ROS2Source, error) {
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	if err := cfg.Intensity.check(); err != nil {
		return nil, fmt.Errorf("camera: %w", err)
	}
	s := &ROS2Source{cam: cam, pub: pub, cfg: cfg, log: cfg.Log, iField: cfg.Intensity.field(), iScale: cfg.Intensity.scale()}
	// The model's BEV has a mean-intensity channel; all zeros there is
	// not what it was trained on.
	s.iMissing = fmt.Sprintf(`camera: ros2 PointCloud2 has no field named %q (--ros2-intensity-field); intensity is 0 for every point: name the cloud's intensity field with --ros2-intensity-field (e.g. reflectivity), or "" for none (logged once)`, s.iField)
	for i := range s.streams {
		s.streams[i].h.FrameID = cam.ids[i]
	}
	lidars, kind := cfg.PointsTopics, "points"
	if len(cfg.ScanTopics) > 0 {
		lidars, kind = cfg.ScanTopics, "scan"
	}
	switch {
	case len(cfg.ScanTopics) > 0 && len(cfg.PointsTopics) > 0:
		return nil, fmt.Errorf("camera: ros2 scan topics %q and points topics %q: one LiDAR stream takes one kind", cfg.ScanTopics, cfg.PointsTopics)
	case len(lidars) > 0 && cam.Pool(TopicPoints) == nil:
		return nil, fmt.Errorf("camera: ros2 %s topics %q: no points pool (max points is 0)", kind, lidars)
	case len(lidars) > 1 && cfg.MergeFrame == "":
		return nil, fmt.Errorf("camera: ros2 %s topics %q: several LiDARs need a merge frame (base_link) to put their data in", kind, lidars)
	case cfg.MergeFrame != "" && (len(lidars) == 0 || cfg.Transforms == nil):
		return nil, fmt.Errorf("camera: ros2 merge frame %q: needs LiDAR topics and transforms to look their frames up in", cfg.MergeFrame)
	}
	if err := checkDeskew(cfg); err != nil {
		return nil, err
	}
	var noTimeField error
	if cfg.FixedFrame != "" {
		s.tFields = defaultTimeFields()
		if cfg.TimeField != "" {
			s.tFields = []string{cfg.TimeField}
		}
		noTimeField = fmt.Errorf("the cloud has no per-point time field (looked for %s; name it with --ros2-time-field)", strings.Join(s.tFields, ", "))
	}
	inputs := func(topics []string) []*lidarInput {
		if len(topics) == 0 {
			topics = []string{""}
		}
		var out []*lidarInput
		for _, topic := range topics {
			in := &lidarInput{topic: topic}
			if cfg.FixedFrame != "" {
				in.deskew = &lidarDeskew{fixed: cfg.FixedFrame, look: cfg.Transforms, log: cfg.Log, topic: topic, noTimeField: noTimeField}
			}
			out = append(out, in)
		}
		return out
	}
	s.clouds, s.scans = inputs(cfg.PointsTopics), inputs(cfg.ScanTopics)
	if pool := cam.Pool(TopicPoints); pool != nil {
		s.inBytes = pool.Geometry().SlotSize
		if cfg.MergeFrame != "" {
			// Whole points: each LiDAR's share of a slot.
			s.inBytes = s.inBytes / uint64(len(lidars)) / sensor.PointStep * sensor.PointStep
			merged := s.clouds
			if kind == "scan" {
				merged = s.scans
			}
			s.merge = newLidarMerger(cfg, merged, s.inBytes, kind == "scan")
		}
	}
	if cfg.ImageTopic != "" && cam.Pool(TopicImage) == nil {
		return nil, fmt.Errorf("camera: ros2 image topic %q: no image pool (max image bytes is 0)", cfg.ImageTopic)
	}
	for topic, m := range cfg.Mirrors {
		if m == nil || cam.Pool(topic) == nil {
			continue
		}
		w := &mirrorWorker{sink: m, st: &s.streams[topic], log: cfg.Log,
			wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
			buf: make([]byte, cam.Pool(topic).Geometry().SlotSize)}
		s.mirrors[topic] = w
		go w.run()
	}
	if p == nil {
		return s, nil // tests: they call the callbacks
	}
	opts := ros2.SubscriptionOptions{QoS: cfg.QoS}
	for k, topic := range cfg.PointsTopics {
		sub, err := p.SubscribePointCloud2(topic, opts, func(v *ros2.PointCloud2View) { s.onCloud(k, v) })
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("camera: ros2 points topic %q: %w", topic, err)
		}
		s.subs, s.lidarSubs = append(s.subs, sub), append(s.lidarSubs, sub)
	}
	for k, topic := range cfg.ScanTopics {
		sub, err := p.SubscribeLaserScan(topic, opts, func(v *ros2.LaserScanView) { s.onScan(k, v) })
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("camera: ros2 scan topic %q: %w", topic, err)
		}
		s.subs, s.lidarSubs = append(s.subs, sub), append(s.lidarSubs, sub)
	}
	if cfg.ImageTopic != "" {
		sub, err := p.SubscribeImage(cfg.ImageTopic, opts, s.OnImage)
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("camera: ros2 image topic %q: %w", cfg.ImageTopic, err)
		}
		s.subs, s.image = append(s.subs, sub), sub
	}
	return s, nil
}

// Close stops the subscriptions, waiting for running callbacks, then the
// mirror workers, waiting for a write in progress. Idempotent.
func (s *ROS2Source) Close() error {
	var errs []error
	for _, sub := range s.subs {
		errs = append(errs, sub.Close())
	}
	s.closeMirrors.Do(func() {
		for _, w := range s.mirrors {
			if w != nil {
				close(w.stop)
				<-w.done
			}
		}
	})
	return errors.Join(errs...)
}

// Stats returns topic's counters. Clouds the subscription skipped before
// they reached OnPointCloud2 (more fields than it takes) count as received
// and unsupported, so that the results still sum to what arrived.
func (s *ROS2Source) Stats(topic int) ROS2Stats {
	st := &s.streams[topic]
	var skipped uint64
	if topic == TopicPoints {
		for _, sub := range s.lidarSubs {
			skipped += sub.Skipped()
		}
	}
	stats := ROS2Stats{
		Received: st.received.Load() + skipped, Published: st.published.Load(), Delivered: st.delivered.Load(),
		Exhausted: st.exhausted.Load(), Unsupported: st.unsupported.Load() + skipped, TooLarge: st.tooLarge.Load(),
		Failed: st.failed.Load(), FrameIDs: st.frameIDs.Load(), Mirrored: st.mirrored.Load(),
	}
	if topic == TopicPoints {
		stats.NoTransform = st.noTransform.Load()
		if s.merge != nil {
			stats.NotMoved = s.merge.notMoved.Load()
		}
		for _, d := range s.deskews() {
			stats.Deskewed += d.deskewed.Load()
			stats.NotDeskewed += d.skipped.Load()
		}
	}
	return stats
}

// deskews are the points stream's deskews, one per LiDAR input; none
// without FixedFrame.
func (s *ROS2Source) deskews() []*lidarDeskew {
	var out []*lidarDeskew
	for _, in := range append(s.clouds[:len(s.clouds):len(s.clouds)], s.scans...) {
		if in.deskew != nil {
			out = append(out, in.deskew)
		}
	}
	return out
}

// LidarInputs returns each merged LiDAR topic's counters, in
// PointsTopics' or ScanTopics' order; nil without MergeFrame.
func (s *ROS2Source) LidarInputs() []LidarInputStats {
	if s.merge == nil {
		return nil
	}
	out := make([]LidarInputStats, len(s.merge.parts))
	now := time.Now()
	for i := range s.merge.parts {
		in := s.merge.parts[i].in
		out[i] = LidarInputStats{Topic: in.topic, Received: in.received.Load(), Merged: in.merged.Load(), Superseded: in.superseded.Load(), Silent: -1}
		if i < len(s.lidarSubs) {
			// Messages the subscription skipped (more fields than it
			// takes) arrived too: the driver is not silent.
			out[i].Publishers = s.lidarSubs[i].Matched()
			out[i].Received += s.lidarSubs[i].Skipped()
		}
		if at := in.lastAt.Load(); at != 0 {
			out[i].Silent = now.Sub(time.Unix(0, at))
		}
	}
	return out
}

// Publishers returns how many ROS publishers (drivers) the topic's
// subscription is matched with now; 0 when it has none.
func (s *ROS2Source) Publishers(topic int) int {
	if topic == TopicImage {
		if s.image == nil {
			return 0
		}
		return s.image.Matched()
	}
	if len(s.lidarSubs) == 0 {
		return 0
	}
	// Every LiDAR is needed: as many as the least matched has.
	n := s.lidarSubs[0].Matched()
	for _, sub := range s.lidarSubs[1:] {
		n = min(n, sub.Matched())
	}
	return n
}

// OnImage ingests one image; it is the image subscription's callback.
func (s *ROS2Source) OnImage(v *ros2.ImageView) {
	st := &s.streams[TopicImage]
	st.received.Add(1)
	enc, ok := rosEncoding(v.Encoding)
	if !ok {
		s.countDrop(TopicImage, &st.unsupported, fmt.Errorf("image encoding %q not supported (want rgb8, bgr8, mono8, rgba8 or bgra8)%s", v.Encoding, encodingHint(string(v.Encoding))))
		return
	}
	rowBytes := uint64(v.Width) * enc.BytesPerPixel()
	if err := checkImage(v, rowBytes); err != nil {
		s.countDrop(TopicImage, &st.unsupported, err)
		return
	}
	pool := s.cam.Pool(TopicImage)
	size := rowBytes * uint64(v.Height)
	if size > pool.Geometry().SlotSize {
		s.countDrop(TopicImage, &st.tooLarge, fmt.Errorf("image %dx%d %s is %d bytes, slot holds %d (raise --ros2-max-image-bytes)",
			v.Width, v.Height, v.Encoding, size, pool.Geometry().SlotSize))
		return
	}
	slot, ok := s.acquire(TopicImage, st)
	if !ok {
		return
	}
	copyRows(slot.Bytes(), v.Data, int(rowBytes), int(v.Step), int(v.Height))
	h := &st.h
	s.stamp(st, TopicImage, v.Sec, v.Nanosec, v.FrameID)
	h.Kind = handles.KindImage
	h.Image = handles.ImageFormat{Width: v.Width, Height: v.Height, RowStep: uint32(rowBytes), Encoding: enc}
	h.Points = handles.PointFormat{}
	h.Length = size
	s.publish(st, TopicImage, slot)
}

// OnPointCloud2 ingests one cloud into the packed XYZI float32 layout
// (sensor.PointStep); it is the first points subscription's callback.
// With a merge frame the cloud waits for the other LiDARs' and goes out in
// their merged cloud (lidarMerger).
func (s *ROS2Source) OnPointCloud2(v *ros2.PointCloud2View) { s.onCloud(0, v) }

// onCloud is points topic k's callback (OnPointCloud2).
func (s *ROS2Source) onCloud(k int, v *ros2.PointCloud2View) {
	in := s.clouds[k]
	st := &s.streams[TopicPoints]
	st.received.Add(1)
	in.received.Add(1)
	arrived := time.Now().UnixNano()
	in.lastAt.Store(arrived)
	lay, err := parseCloudLayout(v, s.iField, s.iScale, s.tFields...)
	if err != nil {
		s.countDrop(TopicPoints, &st.unsupported, s.inputError(in, err))
		return
	}
	if lay.i.kind == 0 && s.iField != "" && in.noIntensity.Add(1) == 1 {
		s.log.Warn(s.iMissing, zap.String("topic", TopicName(TopicPoints)), zap.String("ros_topic", in.topic),
			zap.String("intensity_field", s.iField), zap.String("fields", fieldNames(v)))
	}
	n := uint64(v.Width) * uint64(v.Height)
	if size := n * sensor.PointStep; size > s.inBytes {
		s.countDrop(TopicPoints, &st.tooLarge, s.inputError(in, fmt.Errorf("cloud of %d points needs %d bytes, a cloud may fill %d (raise --ros2-max-points to at least %d)",
			n, size, s.inBytes, n)))
		return
	}
	if m := s.merge; m != nil {
		p := m.lock(k)
		defer m.mu.Unlock()
		lay.convert(p.buf, v)
		if in.deskew != nil && n > 0 {
			in.deskew.cloud(p.buf[:n*sensor.PointStep], v, &lay, s.cfg.TimeUnit)
		}
		p.n = int(n)
		m.set(p, v.Sec, v.Nanosec, v.FrameID, arrived)
		s.mergeOut(st, arrived)
		return
	}
	slot, ok := s.acquire(TopicPoints, st)
	if !ok {
		return
	}
	lay.convert(slot.Bytes(), v)
	if in.deskew != nil && n > 0 {
		in.deskew.cloud(slot.Bytes()[:n*sensor.PointStep], v, &lay, s.cfg.TimeUnit)
	}
	h := &st.h
	s.stamp(st, TopicPoints, v.Sec, v.Nanosec, v.FrameID)
	s.fillPointsHandle(h, int(n), false)
	s.publish(st, TopicPoints, slot)
}

// inputError names in's topic in err when the points stream has several
// inputs, so that the log says which LiDAR sent it.
func (s *ROS2Source) inputError(in *lidarInput, err error) error {
	if s.merge == nil || len(s.merge.parts) < 2 {
		return err
	}
	return fmt.Errorf("%s: %w", in.topic, err)
}

// stamp fills the handle's header part from the message header.
func (s *ROS2Source) stamp(st *ros2Stream, topic int, sec int32, nanosec uint32, frameID []byte) {
	h := &st.h
	h.Seq = st.seq
	st.seq++
	h.CaptureNs = int64(sec)*1e9 + int64(nanosec)
	if s.cfg.StampOnReceipt {
		h.CaptureNs = time.Now().UnixNano()
	} else if h.CaptureNs == 0 {
		if st.zeroStamps.Add(1) == 1 {
			// The agent would drop every such frame as 55 years old, and
			// say only that its stamp is too far from its clock.
			s.log.Warn("camera: ros2 header.stamp is 0 (the driver does not set it); the agent drops such frames as stale: start the camera with --ros2-stamp receipt (logged once)",
				zap.String("topic", TopicName(topic)), zap.String("ros_topic", s.rosTopic(topic)))
		}
	} else if off := time.Duration(time.Now().UnixNano() - h.CaptureNs); (off > farStamp || off < -farStamp) && st.farStamps.Add(1) == 1 {
		s.log.Warn("camera: ros2 header.stamp is far from this machine's clock; the agent drops frames further off than its --watchdog: a simulator's stamps (use_sim_time, /clock) or a driver clock not synchronised; start the camera with --ros2-stamp receipt, or synchronise the clocks (NTP/PTP) (logged once)",
			zap.String("topic", TopicName(topic)), zap.String("ros_topic", s.rosTopic(topic)), zap.Duration("stamp_behind_clock_by", off))
	}
	h.Checksum = 0
	if len(frameID) == 0 {
		h.FrameID = s.cam.ids[topic] // ROS: empty frame_id means "not set"
	} else if !setFrameID(&h.FrameID, frameID) {
		h.FrameID = s.cam.ids[topic]
		if st.frameIDs.Add(1) == 1 {
			s.log.Warn("camera: ros2 header.frame_id has bytes outside printable ASCII; using the configured frame id (counted, logged once)",
				zap.String("topic", TopicName(topic)), zap.ByteString("frame_id", frameID), zap.String("using", string(trimNUL(h.FrameID[:]))))
		}
	} else if len(frameID) > handles.FrameIDSize && st.frameIDs.Add(1) == 1 {
		s.log.Warn("camera: ros2 header.frame_id longer than a handle holds; truncated (counted, logged once)",
			zap.String("topic", TopicName(topic)), zap.ByteString("frame_id", frameID), zap.Int("max", handles.FrameIDSize))
	}
}

// acquire takes a free slot of topic's pool, or counts and logs that
// there is none (the subscribers hold them all): the callback never
// waits.
func (s *ROS2Source) acquire(topic int, st *ros2Stream) (pinned.Slot, bool) {
	slot, err := s.cam.Pool(topic).Acquire()
	if err != nil {
		s.cam.exhausted[topic].Add(1)
		s.countDrop(topic, &st.exhausted, err)
		return pinned.Slot{}, false
	}
	return slot, true
}

// publish hands the written slot to the camera's publisher and says
// whether it was published. The slot is published or, when the publisher
// fails, given back by it or aborted.
func (s *ROS2Source) publish(st *ros2Stream, topic int, slot pinned.Slot) bool {
	h := &st.h
	if s.cfg.Checksum {
		h.Checksum = handles.PayloadChecksum(slot.Bytes()[:h.Length])
	}
	h.PublishNs = monotime.Now()
	n, err := s.pub.Publish(topic, slot, h)
	if err != nil {
		// Publishers fail before handing the slot on (pool.Publish is their
		// first step that can fail); an Abort of a slot already handed on
		// is refused by the pool, so this cannot free a held slot.
		s.cam.Pool(topic).Abort(slot)
		s.countDrop(topic, &st.failed, fmt.Errorf("publish: %w", err))
		return false
	}
	st.published.Add(1)
	st.delivered.Add(uint64(n))
	// The camera's own counters too, so that its metrics and Stats show
	// push frames like pulled ones.
	s.cam.published[topic].Add(1)
	s.cam.sent[topic].Add(uint64(n))
	if hs := s.cfg.Handles; hs != nil && hs.Matched() > 0 {
		if err := hs.Publish(h); err != nil && st.mirrorErrors.Add(1) == 1 {
			s.log.Warn("camera: ros2 handle topic publish failed (logged once)", zap.Error(err))
		}
	}
	// The slot's bytes are still this frame's after Publish: subscribers
	// only read it, and if none holds it, it is free but only this
	// goroutine (the topic's sole writer) would acquire it again.
	if w := s.mirrors[topic]; w != nil && w.sink.Matched() > 0 {
		w.offer(h, slot.Bytes()[:h.Length])
	}
	return true
}

// countDrop counts a dropped message and logs it when its reason (digits
// aside) differs from the last one logged for its class and topic, or a
// minute has passed: a second problem is not hidden behind the first, and
// a driver that keeps sending a bad message is not a line per message.
func (s *ROS2Source) countDrop(topic int, c *atomic.Uint64, err error) {
	n := c.Add(1)
	st := &s.streams[topic]
	reason := logReason(err)
	now := time.Now()
	st.dropMu.Lock()
	last, seen := st.dropLog[c]
	log := !seen || last.reason != reason || now.Sub(last.at) >= dropRelogEvery
	if log {
		if st.dropLog == nil {
			st.dropLog = map[*atomic.Uint64]loggedDrop{}
		}
		st.dropLog[c] = loggedDrop{reason, now}
	}
	st.dropMu.Unlock()
	if log {
		s.log.Error("camera: ros2 message dropped (counted; logged again when the reason changes, else once a minute)",
			zap.String("topic", TopicName(topic)), zap.String("ros_topic", s.rosTopic(topic)), zap.Uint64("dropped", n), zap.Error(err))
	}
}

// logReason is err's text without its digits: a reason that only sizes,
// counts or times change is not logged as a new one.
func logReason(err error) string {
	return strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' {
			return -1
		}
		return r
	}, err.Error())
}

// rosTopic is the ROS topic feeding camera topic topic.
func (s *ROS2Source) rosTopic(topic int) string {
	if topic == TopicPoints && len(s.cfg.ScanTopics) > 0 {
		return strings.Join(s.cfg.ScanTopics, ", ")
	}
	if topic == TopicPoints {
		return strings.Join(s.cfg.PointsTopics, ", ")
	}
	return s.cfg.ImageTopic
}

// encodingHint says what to do about an image encoding the camera does
// not take, for the kinds drivers send.
func encodingHint(enc string) string {
	switch {
	case strings.HasPrefix(enc, "bayer_"):
		return ": debayer it first (image_proc's debayer node) or subscribe to the driver's color topic (image_color)"
	case strings.HasPrefix(enc, "yuv422") || enc == "yuyv" || enc == "uyvy" || enc == "nv21" || enc == "nv24":
		return ": set the driver's pixel format to rgb8/bgr8 (usb_cam: pixel_format) or convert it (image_proc)"
	case strings.HasPrefix(enc, "16U") || strings.HasPrefix(enc, "32F") || enc == "mono16":
		return ": depth and 16-bit images are not supported; use the color stream"
	}
	return ""
}

// setFrameID packs up to FrameIDSize bytes of b into id and reports
// whether they are all printable ASCII (what handles.NewFrameID accepts).
func setFrameID(id *handles.FrameID, b []byte) bool {
	*id = handles.FrameID{}
	for i, c := range b[:min(len(b), handles.FrameIDSize)] {
		if c < 0x20 || c > 0x7e {
			return false
		}
		id[i] = c
	}
	return true
}

func trimNUL(b []byte) []byte {
	for i, c := range b {
		if c == 0 {
			return b[:i]
		}
	}
	return b
}

// rosEncoding maps a sensor_msgs/image_encodings name to the pipeline's
// encodings; the comparison of string(b) with constants does not allocate.
func rosEncoding(b []byte) (handles.Encoding, bool) {
	switch string(b) {
	case "rgb8":
		return handles.EncodingRGB8, true
	case "bgr8":
		return handles.EncodingBGR8, true
	case "mono8":
		return handles.EncodingMono8, true
	case "rgba8":
		return handles.EncodingRGBA8, true
	case "bgra8":
		return handles.EncodingBGRA8, true
	// cv_bridge publishes an OpenCV Mat without a color encoding as 8UCn,
	// in OpenCV's channel order.
	case "8UC1":
		return handles.EncodingMono8, true
	case "8UC3":
		return handles.EncodingBGR8, true
	case "8UC4":
		return handles.EncodingBGRA8, true
	}
	return 0, false
}

// checkImage checks that every row of v lies inside v.Data.
func checkImage(v *ros2.ImageView, rowBytes uint64) error {
	switch {
	case v.Width == 0 || v.Height == 0:
		return fmt.Errorf("image %dx%d is empty", v.Width, v.Height)
	case uint64(v.Step) < rowBytes:
		return fmt.Errorf("image %dx%d %s: step %d < %d bytes per row", v.Width, v.Height, v.Encoding, v.Step, rowBytes)
	case uint64(v.Step)*uint64(v.Height-1)+rowBytes > uint64(len(v.Data)):
		return fmt.Errorf("image %dx%d %s step %d: data holds %d bytes, rows need %d",
			v.Width, v.Height, v.Encoding, v.Step, len(v.Data), uint64(v.Step)*uint64(v.Height-1)+rowBytes)
	}
	return nil
}

// copyRows copies rows of rowBytes from src (rows srcStep apart) to dst,
// packed; one copy when src has no row padding.
func copyRows(dst, src []byte, rowBytes, srcStep, rows int) {
	if srcStep == rowBytes {
		copy(dst[:rowBytes*rows], src)
		return
	}
	for r := 0; r < rows; r++ {
		copy(dst[r*rowBytes:(r+1)*rowBytes], src[r*srcStep:])
	}
}

// sensor_msgs/PointField datatypes the pipeline converts.
const (
	pfInt8    = 1
	pfUint8   = 2
	pfInt16   = 3
	pfUint16  = 4
	pfInt32   = 5
	pfUint32  = 6
	pfFloat32 = 7
	pfFloat64 = 8
)

// cloudField is where one value lies in a source point.
type cloudField struct {
	off  uint32
	kind uint8 // PointField datatype; 0 = absent (intensity only: written as 0)
}

// cloudLayout is a validated source layout.
type cloudLayout struct {
	x, y, z, i cloudField
	// tm is the per-point time field (deskewing clouds), the first of
	// the names looked for that the cloud has; absent when none.
	tm     cloudField
	tmName string
	iScale float64 // intensity multiplier; 1 = as is
	fast   bool    // already packed XYZI float32, step 16, rows contiguous, intensity not scaled: one memmove
}

// parseCloudLayout finds x, y, z (FLOAT32 or FLOAT64) and the field
// named intensity (optional, "" = none; any numeric type, converted to
// float32 and multiplied by iScale), refuses a name given twice, and checks
// that every point of v lies inside v.Data. intensity is never x, y or z
// (ROS2Intensity.check). With timeFields it also finds the first of them
// the cloud has as the per-point time (tm), for deskewing.
func parseCloudLayout(v *ros2.PointCloud2View, intensity string, iScale float64, timeFields ...string) (cloudLayout, error) {
	l := cloudLayout{iScale: iScale}
	if v.IsBigEndian {
		return l, errors.New("big-endian PointCloud2 not supported")
	}
	timeRank := len(timeFields)
	for _, f := range v.Fields {
		var dst *cloudField
		switch string(f.Name) {
		case "x":
			dst = &l.x
		case "y":
			dst = &l.y
		case "z":
			dst = &l.z
		default:
			if intensity != "" && string(f.Name) == intensity {
				dst = &l.i
				break
			}
			// The time field is taken as found, not checked for
			// duplicates: deskewing is best effort (a cloud it cannot
			// place is used as sent).
			for k, name := range timeFields[:timeRank] {
				if string(f.Name) != name {
					continue
				}
				if f.Count == 1 && f.Datatype >= pfInt8 && f.Datatype <= pfFloat64 && uint64(f.Offset)+fieldSize(f.Datatype) <= uint64(v.PointStep) {
					l.tm, l.tmName, timeRank = cloudField{off: f.Offset, kind: f.Datatype}, name, k
				} else if l.tm.kind == 0 {
					l.tmName = name // found, but not one number inside the point: said so, not "no time field"
				}
				break
			}
			continue
		}
		want := "FLOAT32 (7) or FLOAT64 (8)"
		ok := f.Datatype == pfFloat32 || f.Datatype == pfFloat64
		if dst == &l.i {
			want = "a number: INT8 to FLOAT64 (1 to 8)"
			ok = f.Datatype >= pfInt8 && f.Datatype <= pfFloat64
		}
		if !ok || f.Count != 1 {
			return l, fmt.Errorf("PointCloud2 field %q: datatype %d count %d not supported (want %s, count 1)",
				f.Name, f.Datatype, f.Count, want)
		}
		if dst.kind != 0 {
			return l, fmt.Errorf("PointCloud2 has two fields named %q (fields: %s)", f.Name, fieldNames(v))
		}
		if uint64(f.Offset)+fieldSize(f.Datatype) > uint64(v.PointStep) {
			return l, fmt.Errorf("PointCloud2 field %q at offset %d (datatype %d) does not fit point_step %d",
				f.Name, f.Offset, f.Datatype, v.PointStep)
		}
		*dst = cloudField{off: f.Offset, kind: f.Datatype}
	}
	for _, c := range []struct {
		name string
		f    cloudField
	}{{"x", l.x}, {"y", l.y}, {"z", l.z}} {
		if c.f.kind == 0 {
			return l, fmt.Errorf("PointCloud2 has no %q field (fields: %s)", c.name, fieldNames(v))
		}
	}
	if v.Width > 0 && v.Height > 0 {
		row := uint64(v.Width) * uint64(v.PointStep)
		if uint64(v.RowStep) < row && v.Height > 1 {
			return l, fmt.Errorf("PointCloud2 row_step %d < width %d × point_step %d", v.RowStep, v.Width, v.PointStep)
		}
		if need := uint64(v.RowStep)*uint64(v.Height-1) + row; need > uint64(len(v.Data)) {
			return l, fmt.Errorf("PointCloud2 %dx%d point_step %d row_step %d: data holds %d bytes, points need %d",
				v.Width, v.Height, v.PointStep, v.RowStep, len(v.Data), need)
		}
	}
	l.fast = v.PointStep == sensor.PointStep && (v.Height <= 1 || uint64(v.RowStep) == uint64(v.Width)*sensor.PointStep) &&
		l.x == cloudField{sensor.PointOffsetX, pfFloat32} && l.y == cloudField{sensor.PointOffsetY, pfFloat32} &&
		l.z == cloudField{sensor.PointOffsetZ, pfFloat32} && l.i == cloudField{sensor.PointOffsetIntensity, pfFloat32} &&
		iScale == 1
	return l, nil
}

func fieldSize(datatype uint8) uint64 {
	switch datatype {
	case pfInt8, pfUint8:
		return 1
	case pfInt16, pfUint16:
		return 2
	case pfFloat64:
		return 8
	}
	return 4
}

func fieldNames(v *ros2.PointCloud2View) string {
	var b []byte
	for i, f := range v.Fields {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = append(b, f.Name...)
	}
	return string(b)
}

// convert writes v's points into dst, packed XYZI float32 (the layout of
// sensor.PointStep); parseCloudLayout has checked the bounds and dst
// holds Width × Height × PointStep bytes.
func (l *cloudLayout) convert(dst []byte, v *ros2.PointCloud2View) {
	w, step := int(v.Width), int(v.PointStep)
	if w == 0 || v.Height == 0 {
		// No points. parseCloudLayout checks no bounds then, so neither
		// row_step nor data may be used: a zero-width cloud of height 2
		// and row_step 100 with no data would slice past it, and one of
		// height 2^31 would loop for seconds.
		return
	}
	if l.fast {
		copyPoints(dst[:w*int(v.Height)*sensor.PointStep], v.Data)
		return
	}
	le := binary.LittleEndian
	o := 0
	for r := 0; r < int(v.Height); r++ {
		row := v.Data[r*int(v.RowStep):]
		for c := 0; c < w; c++ {
			p := row[c*step : c*step+step]
			d := dst[o : o+sensor.PointStep]
			le.PutUint32(d[sensor.PointOffsetX:], l.x.bits(p))
			le.PutUint32(d[sensor.PointOffsetY:], l.y.bits(p))
			le.PutUint32(d[sensor.PointOffsetZ:], l.z.bits(p))
			i := l.i.bits(p)
			if l.iScale != 1 {
				i = math.Float32bits(float32(float64(math.Float32frombits(i)) * l.iScale))
			}
			le.PutUint32(d[sensor.PointOffsetIntensity:], finiteIntensity(i))
			o += sensor.PointStep
		}
	}
}

// copyChunk is how many bytes copyPoints copies before it checks their
// intensities: a multiple of sensor.PointStep small enough to be read back
// from L1.
const copyChunk = 256 * sensor.PointStep

// copyPoints copies packed XYZI float32 points from src into dst (as long
// as src's points) and makes every intensity that is not finite 0, chunk
// by chunk while the chunk is in cache. The voxel filter drops a point
// whose intensity is NaN or ±Inf, position and all: a driver's NaN
// intensity on a valid return would hide an obstacle.
func copyPoints(dst, src []byte) {
	le := binary.LittleEndian
	for lo := 0; lo < len(dst); lo += copyChunk {
		d := dst[lo:min(lo+copyChunk, len(dst))]
		copy(d, src[lo:])
		if !mayHoldNonFinite(d) {
			continue
		}
		for o := sensor.PointOffsetIntensity; o < len(d); o += sensor.PointStep {
			le.PutUint32(d[o:], finiteIntensity(le.Uint32(d[o:])))
		}
	}
}

// mayHoldNonFinite reports whether an intensity among the packed points d
// has the top 7 bits of its exponent set (|v| >= 2^127, or NaN or ±Inf):
// its last byte (little-endian) is 0x7f or 0xff. A fast, branch-free
// first look: real intensities never have it.
func mayHoldNonFinite(d []byte) bool {
	const top, step = sensor.PointOffsetIntensity + 3, sensor.PointStep
	var any uint
	for ; len(d) >= 4*step; d = d[4*step:] {
		p := (*[4 * step]byte)(d) // one bounds check for 4 points
		// b|0x80 is 0xff exactly when b's low 7 bits are set; +1 then
		// carries into bit 8.
		any |= (uint(p[top]|0x80) + 1) | (uint(p[step+top]|0x80) + 1) |
			(uint(p[2*step+top]|0x80) + 1) | (uint(p[3*step+top]|0x80) + 1)
	}
	for ; len(d) >= step; d = d[step:] {
		any |= uint(d[top]|0x80) + 1
	}
	return any>>8 != 0
}

// finiteIntensity returns the float32 bits b, or 0 when they are NaN or
// ±Inf (see copyPoints).
func finiteIntensity(b uint32) uint32 {
	if b&^(1<<31) >= 0x7f800000 {
		return 0
	}
	return b
}

// float returns the field of point p as a float64, exactly for every
// type (a float64 time in seconds since the epoch keeps its
// microseconds); 0 when absent.
func (f cloudField) float(p []byte) float64 {
	le := binary.LittleEndian
	switch f.kind {
	case pfFloat64:
		return math.Float64frombits(le.Uint64(p[f.off:]))
	case pfUint32:
		return float64(le.Uint32(p[f.off:]))
	case pfInt32:
		return float64(int32(le.Uint32(p[f.off:])))
	}
	return float64(math.Float32frombits(f.bits(p)))
}

// bits returns the field of point p as float32 bits (0 when absent).
func (f cloudField) bits(p []byte) uint32 {
	le := binary.LittleEndian
	switch f.kind {
	case pfFloat32:
		return le.Uint32(p[f.off:])
	case pfFloat64:
		return math.Float32bits(float32(math.Float64frombits(le.Uint64(p[f.off:]))))
	case pfUint8:
		return math.Float32bits(float32(p[f.off]))
	case pfUint16:
		return math.Float32bits(float32(le.Uint16(p[f.off:])))
	case pfInt8:
		return math.Float32bits(float32(int8(p[f.off])))
	case pfInt16:
		return math.Float32bits(float32(int16(le.Uint16(p[f.off:]))))
	case pfInt32:
		return math.Float32bits(float32(int32(le.Uint32(p[f.off:]))))
	case pfUint32:
		return math.Float32bits(float32(le.Uint32(p[f.off:])))
	}
	return 0
}
