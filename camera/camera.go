// Package camera is the camera node as a library: it owns one pool per data
// class (point clouds, images), has a sensor.Source write each frame
// straight into a slot, and publishes the slot's handle through a
// Publisher (the unix transport, or in-process for composed mode). It
// never blocks on a subscriber: frames that cannot be delivered are dropped
// for that subscriber and counted.
package camera

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/zerohop/zerohop/handles"
	"github.com/zerohop/zerohop/handles/transport"
	"github.com/zerohop/zerohop/monotime"
	"github.com/zerohop/zerohop/pinned"
	"github.com/zerohop/zerohop/sensor"
)

// Topic indices of the two streams every camera serves.
const (
	TopicPoints = 0
	TopicImage  = 1
)

// Topic names subscribers ask for.
const (
	PointsTopicName = "points"
	ImageTopicName  = "image"
)

// MinSlots is the fewest slots a pool may have, and MinSlotsWhy says why:
// the agent keeps its newest image (for pairing) until a newer one
// arrives, so with one slot the camera could never write another.
const (
	MinSlots    = 2
	MinSlotsWhy = "the agent keeps its newest image until a newer one arrives, so with one slot the camera could never write another"
)

// TopicName returns the name of topic index i.
func TopicName(i int) string {
	if i == TopicImage {
		return ImageTopicName
	}
	return PointsTopicName
}

// Publisher delivers a written slot of a topic with its handle.
type Publisher interface {
	Publish(topic int, slot pinned.Slot, h *handles.Handle) (int, error)
}

// Config configures a camera.
type Config struct {
	Source sensor.Source
	Rate   float64 // frames per second; default 30
	// Schedule, if set, paces the frames by a recording's timing instead
	// of Rate (ReplaySchedule makes it): frame seq goes out at the start
	// of Run plus Schedule.At(seq), on the monotonic clock. The slot pools
	// are then sized for its median interval.
	Schedule *sensor.Schedule
	// Slots per pool; 0 applies pinned.SlotsFor(period, ConsumerTime,
	// Subscribers).
	Slots        uint32
	ConsumerTime time.Duration // slowest consumer's per-frame p99; default 50 ms
	Subscribers  int           // expected subscribers; default 2
	Shared       bool          // memfd pools, for other processes
	Lock         bool          // mlock the pools
	Pinner       pinned.Pinner
	// Allocator supplies in-process pools' memory (e.g. cuMemHostAlloc);
	// ignored for Shared pools. Default: anonymous mappings.
	Allocator pinned.HostAllocator
	// Checksum fills each handle's payload checksum (test mode; costs a
	// pass over the payload).
	Checksum bool
	// Frames stops after this many frames; 0 runs until the source ends or
	// ctx is done.
	Frames uint64
	// PlanarLidar: the clouds are a planar (2D) LiDAR's scans, and their
	// handles say so (handles.PointsPlanar); a source that says so
	// itself (sensor.Planar) is marked too. A scan taken for a 3D cloud
	// shows the agent's 3D models no obstacle below their obstacle
	// height: the mark is what lets the agent refuse it.
	PlanarLidar bool
	// PointsFrameID and ImageFrameID go into handles; defaults "lidar",
	// "camera".
	PointsFrameID, ImageFrameID string
	Log                         *zap.Logger
}

// Stats counts the camera's frames.
type Stats struct {
	Frames     uint64 // frame ticks handled
	Published  [2]uint64
	Exhausted  [2]uint64 // no free slot: frame skipped
	Late       uint64    // ticks missed: a frame took longer than the period, or the camera did not run (paused, starved); with a Schedule, frame times passed while a frame was still due
	Delivered  [2]uint64 // handles sent, summed over subscribers
	FillErrors uint64
}

// Camera renders frames into its pools and publishes them.
type Camera struct {
	cfg    Config
	log    *zap.Logger
	pools  [2]*pinned.Pool
	points handles.PointFormat
	ids    [2]handles.FrameID
	// period is how far apart frames come: the Schedule's median
	// interval, else 1/Rate. The pools are sized for it.
	period time.Duration

	frames, late, fillErrors   atomic.Uint64
	published, exhausted, sent [2]atomic.Uint64
}

// CheckRate accepts a frame rate of 0.001 to 10000 Hz: at least 0.001, so
// that the period fits a time.Duration. !(in range) rather than (out of
// range): NaN fails every comparison.
func CheckRate(hz float64) error {
	if !(hz >= 0.001 && hz <= 10000) {
		return fmt.Errorf("rate %g Hz, want 0.001 to 10000", hz)
	}
	return nil
}

// New creates the camera's pools, sized for the source.
func New(cfg Config) (*Camera, error) {
	if cfg.Source == nil {
		return nil, errors.New("camera: no source")
	}
	if cfg.Rate == 0 {
		cfg.Rate = 30
	}
	if err := CheckRate(cfg.Rate); err != nil {
		return nil, fmt.Errorf("camera: %w", err)
	}
	if cfg.ConsumerTime == 0 {
		cfg.ConsumerTime = 50 * time.Millisecond
	}
	if cfg.Subscribers == 0 {
		cfg.Subscribers = 2
	}
	if cfg.PointsFrameID == "" {
		cfg.PointsFrameID = "lidar"
	}
	if cfg.ImageFrameID == "" {
		cfg.ImageFrameID = "camera"
	}
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	c := &Camera{cfg: cfg, log: cfg.Log}
	var err error
	if c.ids[TopicPoints], err = handles.NewFrameID(cfg.PointsFrameID); err != nil {
		return nil, fmt.Errorf("camera: points frame id: %w", err)
	}
	if c.ids[TopicImage], err = handles.NewFrameID(cfg.ImageFrameID); err != nil {
		return nil, fmt.Errorf("camera: image frame id: %w", err)
	}
	slots := cfg.Slots
	period := time.Duration(float64(time.Second) / cfg.Rate)
	if cfg.Schedule != nil && cfg.Schedule.Interval() > 0 {
		period = cfg.Schedule.Interval()
	}
	c.period = period
	if slots == 0 {
		if slots, err = pinned.SlotsFor(period, cfg.ConsumerTime, cfg.Subscribers); err != nil {
			return nil, fmt.Errorf("camera: %w", err)
		}
	}
	if slots < MinSlots {
		return nil, fmt.Errorf("camera: %d slots per pool: at least %d: %s", slots, MinSlots, MinSlotsWhy)
	}
	if need := transport.MinShare*cfg.Subscribers + 1; int(slots) < need {
		c.log.Warn("pools too small for the subscribers they are sized for: a subscriber that keeps its frames can leave the camera, or the others, without slots (raise --slots, or lower --subscribers)",
			zap.Uint32("slots", slots), zap.Int("subscribers", cfg.Subscribers), zap.Int("need", need))
	}
	sizes := [2]uint64{
		uint64(cfg.Source.MaxPoints()) * sensor.PointStep,
		uint64(cfg.Source.MaxImageBytes()),
	}
	epoch := uint32(time.Now().UnixNano()>>10) | 1
	for i, size := range sizes {
		if size == 0 {
			continue // the source has no such stream
		}
		p, err := pinned.New(pinned.Geometry{SlotCount: slots, SlotSize: size}, pinned.Options{
			Name: TopicName(i), ID: uint32(i + 1), Shared: cfg.Shared, Lock: cfg.Lock,
			Pinner: cfg.Pinner, Allocator: cfg.Allocator, Epoch: epoch + uint32(i),
		})
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("camera: %w", err)
		}
		c.pools[i] = p
	}
	if c.pools[TopicPoints] == nil && c.pools[TopicImage] == nil {
		return nil, errors.New("camera: the source provides neither points nor images")
	}
	c.points = handles.PointFormat{
		Step: sensor.PointStep, X: sensor.PointOffsetX, Y: sensor.PointOffsetY,
		Z: sensor.PointOffsetZ, Intensity: sensor.PointOffsetIntensity, Datatype: handles.DatatypeFloat32,
	}
	planar := cfg.PlanarLidar || sensor.Planar(cfg.Source)
	if planar {
		c.points.Flags = handles.PointsPlanar
	}
	c.log.Info("camera pools ready", zap.Uint32("slots", slots),
		zap.Uint64("points_slot_bytes", sizes[0]), zap.Uint64("image_slot_bytes", sizes[1]),
		zap.Bool("shared", cfg.Shared), zap.Duration("frame_period", period), zap.Bool("recorded_timing", cfg.Schedule != nil), zap.Bool("planar_lidar", planar))
	if cfg.Shared {
		for _, p := range c.pools {
			if p != nil && !p.WriteSealed() {
				c.log.Warn("this kernel cannot seal the shared pools against writes (F_SEAL_FUTURE_WRITE needs Linux 5.1): a subscriber could re-open its read-only fd for writing through /proc/self/fd",
					zap.String("pool", p.Name()))
				break
			}
		}
	}
	return c, nil
}

// Pool returns topic's pool (nil when the source lacks that stream).
func (c *Camera) Pool(topic int) *pinned.Pool { return c.pools[topic] }

// Topics returns the camera's streams as transport topics, points first,
// leaving out a stream the source does not provide.
func (c *Camera) Topics() []transport.Topic {
	var topics []transport.Topic
	for i, p := range c.pools {
		if p != nil {
			topics = append(topics, transport.Topic{Name: TopicName(i), Kind: Kind(i), Pool: p})
		}
	}
	return topics
}

// Why a camera lacks a stream, and what to do, for a subscriber that asks
// for it (transport.ServerConfig.Absent): an agent that needs images
// connected to a LiDAR-only camera (--image-size none, a replay folder
// without images, --ros2-image-topic "").
const (
	NoImageWhy  = "this camera has no image stream, only LiDAR points: give the camera images, or run the agent with --lidar-only"
	NoPointsWhy = "this camera has no LiDAR point clouds, only images: give the camera a LiDAR (the agent needs clouds)"
)

// AbsentTopics names the streams the source does not provide, each with
// why and what to do, for transport.ServerConfig.Absent; nil when it
// provides both.
func (c *Camera) AbsentTopics() map[string]string {
	var absent map[string]string
	for i, why := range [2]string{NoPointsWhy, NoImageWhy} {
		if c.pools[i] == nil {
			if absent == nil {
				absent = map[string]string{}
			}
			absent[TopicName(i)] = why
		}
	}
	return absent
}

// Kind returns topic's handle kind.
func Kind(topic int) handles.Kind {
	if topic == TopicImage {
		return handles.KindImage
	}
	return handles.KindPoints
}

// Close releases the pools. Call after Run returned and the publisher is
// closed.
func (c *Camera) Close() error {
	var errs []error
	for i, p := range c.pools {
		if p != nil {
			errs = append(errs, p.Close())
			c.pools[i] = nil
		}
	}
	return errors.Join(errs...)
}

// Run produces frames at the configured rate (or by the Schedule) until
// ctx is done, the source ends or Frames have been produced. It returns
// nil in those cases and an error only for a failing source.
func (c *Camera) Run(ctx context.Context, pub Publisher) error {
	if c.cfg.Schedule != nil {
		return c.runScheduled(ctx, pub)
	}
	period := time.Duration(float64(time.Second) / c.cfg.Rate)
	ticker := time.NewTicker(period)
	defer ticker.Stop()
	var lastTick time.Time // the last tick taken, for countMissed
	var h handles.Handle
	for seq := uint64(0); ; seq++ {
		if done, err := c.step(seq, pub, &h); done || err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case t := <-ticker.C:
			// A frame that overran its period gets the tick it missed at
			// once (the ticker keeps one, with its time) and the rest
			// dropped: the gap in tick times counts them.
			c.countMissed(&lastTick, t, period)
		}
	}
}

// runScheduled is Run paced by the Schedule: frame seq goes out at the
// start plus Schedule.At(seq), each wait measured on the monotonic clock
// to that absolute time (summed sleeps would drift). Behind, it does what
// the ticker does (recordedPacer.next): the overdue frame goes out at once,
// and after a stall the missed frame times are counted (Late) and dropped.
func (c *Camera) runScheduled(ctx context.Context, pub Publisher) error {
	p := recordedPacer{sched: c.cfg.Schedule, base: monotime.Now()}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	var h handles.Handle
	for seq := uint64(0); ; seq++ {
		if done, err := c.step(seq, pub, &h); done || err != nil {
			return err
		}
		wait, missed := p.next(seq, monotime.Now())
		if missed > 0 {
			c.late.Add(missed)
		}
		if wait <= 0 {
			if ctx.Err() != nil {
				return nil
			}
			continue
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		}
	}
}

// step produces frame seq, unless Frames have been produced or the source
// has ended (done, and a nil error); err is a failing source's.
func (c *Camera) step(seq uint64, pub Publisher, h *handles.Handle) (done bool, err error) {
	if c.cfg.Frames > 0 && seq >= c.cfg.Frames {
		return true, nil
	}
	if f := c.cfg.Source.Frames(); f > 0 && seq >= f {
		return true, nil
	}
	err = c.Frame(seq, pub, h)
	if errors.Is(err, sensor.ErrEndOfFrames) {
		return true, nil
	}
	return err != nil, err
}

// countMissed counts the ticks the ticker dropped between the tick at
// *last and the one at t (it keeps one pending tick, and a paused or
// starved camera misses many more: the gap in their times says how many),
// and moves *last to t.
func (c *Camera) countMissed(last *time.Time, t time.Time, period time.Duration) {
	if !last.IsZero() {
		if n := (t.Sub(*last)+period/2)/period - 1; n > 0 {
			c.late.Add(uint64(n))
		}
	}
	*last = t
}

// Frame renders and publishes frame seq on both topics; h is scratch.
func (c *Camera) Frame(seq uint64, pub Publisher, h *handles.Handle) error {
	c.frames.Add(1)
	capture := time.Now().UnixNano()
	for topic, p := range c.pools {
		if p == nil {
			continue
		}
		slot, err := p.Acquire()
		if err != nil {
			c.exhausted[topic].Add(1)
			continue
		}
		*h = handles.Handle{Kind: Kind(topic), Seq: seq, CaptureNs: capture, FrameID: c.ids[topic]}
		buf := slot.Bytes()
		if err := c.fill(topic, seq, buf, h); err != nil {
			p.Abort(slot)
			if errors.Is(err, sensor.ErrEndOfFrames) {
				return err
			}
			c.fillErrors.Add(1)
			return fmt.Errorf("camera frame %d %s: %w", seq, TopicName(topic), err)
		}
		if c.cfg.Checksum {
			h.Checksum = handles.PayloadChecksum(buf[:h.Length])
		}
		h.PublishNs = monotime.Now()
		n, err := pub.Publish(topic, slot, h)
		if err != nil {
			return fmt.Errorf("camera frame %d %s: publish: %w", seq, TopicName(topic), err)
		}
		c.published[topic].Add(1)
		c.sent[topic].Add(uint64(n))
	}
	return nil
}

func (c *Camera) fill(topic int, seq uint64, buf []byte, h *handles.Handle) error {
	if topic == TopicPoints {
		n, err := c.cfg.Source.FillPoints(seq, buf)
		if err != nil {
			return err
		}
		h.Points = c.points
		h.Points.Count = uint32(n)
		h.Length = uint64(n) * sensor.PointStep
		return nil
	}
	info, err := c.cfg.Source.FillImage(seq, buf)
	if err != nil {
		return err
	}
	enc, err := handles.ParseEncoding(info.Encoding.String())
	if err != nil {
		return err
	}
	h.Image = handles.ImageFormat{Width: uint32(info.Width), Height: uint32(info.Height), RowStep: uint32(info.Step), Encoding: enc}
	h.Length = uint64(info.Step) * uint64(info.Height)
	return nil
}

// FramePeriod is how far apart the frames come: the Schedule's median
// interval (at its speed), else 1/Rate; the slot pools are sized for it.
func (c *Camera) FramePeriod() time.Duration { return c.period }

// Stats returns the camera's counters.
func (c *Camera) Stats() Stats {
	st := Stats{Frames: c.frames.Load(), Late: c.late.Load(), FillErrors: c.fillErrors.Load()}
	for i := range c.pools {
		st.Published[i] = c.published[i].Load()
		st.Exhausted[i] = c.exhausted[i].Load()
		st.Delivered[i] = c.sent[i].Load()
	}
	return st
}
