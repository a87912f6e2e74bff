// Package agent is the agent node's pipeline as a library: per frame pair
// it takes the freshest point cloud and camera image leases, filters the
// cloud into a BEV raster, preprocesses the image, runs the model, plans a
// Twist and publishes it, then releases the leases. A watchdog zeroes the
// command when frames stop or any stage fails (design invariant 7).
package agent

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/zerohop/zerohop/gpu"
	"github.com/zerohop/zerohop/handles"
	"github.com/zerohop/zerohop/handles/transport"
	"github.com/zerohop/zerohop/infer"
	"github.com/zerohop/zerohop/monotime"
	"github.com/zerohop/zerohop/planner"
	"github.com/zerohop/zerohop/telemetry"
	"github.com/zerohop/zerohop/voxel"
)

// Topic indices the agent subscribes to, in this order.
const (
	TopicPoints = 0
	TopicImage  = 1
)

// FrameSource hands out leases: the unix transport's Subscriber or the
// in-process transport.
type FrameSource interface {
	C(topic int) <-chan transport.Lease
	TryLatest(topic int) (transport.Lease, bool)
}

// CmdSink receives every command the agent decides, zero commands
// included. Calls never overlap: they come from the pipeline goroutine, or
// from its stall guard when a stage hangs (Pipeline.Run).
type CmdSink interface {
	PublishTwist(t planner.Twist, stamp time.Time) error
}

// Config wires a pipeline together. Every component is owned by the
// caller, who closes it after Run returns.
type Config struct {
	Source  FrameSource
	Filter  *voxel.Filter
	BEV     *voxel.BEV
	Session *infer.Session
	// Prep fills the model's image input; nil when it has none (a
	// LiDAR-only model): the pipeline then runs on clouds alone, and
	// neither takes nor waits for images.
	Prep    *infer.Preprocessor
	Planner *planner.Planner
	// Tuning, if set, carries changes to the planner's settings made
	// while the pipeline runs; each takes effect at the next Plan.
	Tuning    *PlannerTuning
	Watchdog  *planner.Watchdog
	Recorder  *telemetry.Recorder
	Sink      CmdSink
	MaxPoints int
	// GPU, if set, filters the cloud and fills the BEV raster on the GPU,
	// writing GPUBEV: the bytes of Session.BEV() (the same memory, pinned
	// and device-mapped). Filter and BEV stay the fallback: the first GPU
	// failure is logged and every frame from then on, that one included,
	// runs on the CPU.
	GPU    GPUFilter
	GPUBEV []byte
	// LidarFrame, if set, is the frame the BEV's mount is for (from
	// /tf_static): a cloud whose handle names another frame is dropped,
	// counted and logged once, since its points would land where another
	// sensor's belong. Frame ids are compared as the handle carries them,
	// cut to 16 bytes.
	LidarFrame string
	// PlanarLidar: the clouds are a planar (2D) LiDAR's scans, their
	// handles marked handles.PointsPlanar. The ground check is off (a scan
	// shows no ground). A cloud marked otherwise than this says is
	// dropped, counted and logged once: a 3D model reading a scan finds
	// no obstacle below its obstacle height, and a scan model reading a 3D
	// cloud takes the ground for an obstacle.
	PlanarLidar bool
	// PairTolerance is how far apart in capture time a cloud and an image
	// may be to be processed together, and so how long a cloud waits for
	// its image at most; 0: PairToleranceFor's default.
	PairTolerance time.Duration
	// Pairing, if set, overrides PairTolerance with the tolerance in
	// force as it changes while the pipeline runs (ros2 param set).
	Pairing *PairTuning
	// Tick is how often the watchdog is checked while no frame arrives,
	// and the stall guard retries a zero the sink refused; default a
	// quarter of its timeout. The zero for a frame that goes stale (frames
	// stop, or its stages stall) does not wait for a tick: both are timed
	// for the frame's stale moment.
	Tick time.Duration
	Log  *zap.Logger
}

// DefaultPairTolerance is Config.PairTolerance's default: within a
// 30 Hz camera's half period, so that a cloud pairs with the nearest image
// of a camera and LiDAR stamped by one clock.
const DefaultPairTolerance = 20 * time.Millisecond

// PairToleranceFor is the pairing tolerance in force for tolerance
// (0: the default) under a watchdog period: DefaultPairTolerance, or half
// the period when that is less (a cloud's wait for its image must leave
// its stages time before the frame goes stale).
func PairToleranceFor(tolerance, watchdog time.Duration) time.Duration {
	if tolerance > 0 {
		return tolerance
	}
	return max(min(DefaultPairTolerance, watchdog/2), time.Microsecond)
}

// outOfOrderEvery is how often out-of-order frames are logged at most.
const outOfOrderEvery = 10 * time.Second

// errImageTooOld is the watchdog's cause for a frame dropped because its
// image, though paired, is older than the watchdog period.
var errImageTooOld = errors.New("the frame's image is older than the watchdog period (it paired within --pair-tolerance of a fresh cloud)")

// errReclaimed is the watchdog's cause for a frame dropped because the
// camera reclaimed its slots while the stages read them.
var errReclaimed = errors.New("the camera connection ended while the stages read the frame's slots (the camera stopped, restarted or reclaimed them)")

// queueStats is a FrameSource whose queues release leases themselves when
// newer ones arrive (the transport's mailboxes: Subscriber, Inproc): those
// are superseded frames too, which the pipeline never sees.
type queueStats interface {
	Stats() transport.SubscriberStats
}

// Pipeline runs the agent's per-frame work on one goroutine.
type Pipeline struct {
	cfg Config
	log *zap.Logger
	// ground checks that the clouds' ground is where the BEV takes it,
	// on the voxels of the frame planned last (planned: p.pts holds them).
	ground *groundWatch
	// images: the model has an image input, so each cloud is paired with
	// an image; false for a LiDAR-only model.
	images bool
	// lidarIDs are Config.LidarFrame as handles carry it; frameMismatches
	// counts the clouds dropped for another frame.
	lidarIDs        lidarFrameIDs
	frameMismatches atomic.Uint64
	// scanMismatches counts the clouds dropped for being planar scans to
	// a 3D pipeline, or 3D clouds to a planar one (Config.PlanarLidar).
	scanMismatches atomic.Uint64
	// unpairedTotal counts the clouds dropped for finding no image within
	// the pairing tolerance.
	unpairedTotal atomic.Uint64
	planned       bool
	// queue is cfg.Source's queue counters, nil when it has none;
	// queueSuperseded is how many of its supersedes frames_superseded
	// holds. Pipeline goroutine only.
	queue           queueStats
	queueSuperseded uint64
	pts             *voxel.Points
	image           transport.Lease
	hasImg          bool
	last            planner.Twist
	// pairWait bounds the wait for a cloud's image (Go ≥ 1.23 timers:
	// Reset after Stop needs no draining).
	pairWait *time.Timer
	// staleWait wakes a cloud's wait for its image at the stale moment of
	// the newest planned frame: the watchdog's zero must not wait for the
	// image (the Run loop, which times it, is blocked meanwhile).
	staleWait *time.Timer
	// plannerConfig is the planner's settings as it runs them, for
	// /metrics and the status (the planner is the goroutine's alone).
	plannerConfig atomic.Pointer[planner.Config]
	// gpu is cfg.GPU until it first fails, then nil (the CPU path).
	gpu         GPUFilter
	gpuFailures atomic.Uint64
	// staleLogged: a frame was dropped as stale and logged; no more lines
	// until a fresh one arrives.
	staleLogged bool
	// oldImageLogged: a frame was dropped for its image's age (logged
	// once per run).
	oldImageLogged bool
	// imageNoted: the first image was looked at for what the model may
	// not get from it (checkImage). Pipeline goroutine only.
	imageNoted bool
	// outOfOrderAt is when the last out-of-order line was written (zero:
	// never), outOfOrder how many such frames were dropped since: two
	// publishers that alternate on one topic make every other frame one,
	// so a line at most every outOfOrderEvery, with the count.
	outOfOrderAt time.Time
	outOfOrder   uint64
	// newestSeq is the sequence number of the newest fresh frame, for the
	// out-of-order line.
	newestSeq uint64
	// reclaimedLogged: a frame whose slots the camera reclaimed mid-stages
	// was dropped and logged; no more lines until a frame is planned.
	reclaimedLogged bool
	// unpaired counts clouds in a row that found no image; lastImageNs is
	// the capture time of the last image taken up (0: none yet).
	unpaired    int
	lastImageNs int64
	// pairingCloudNs is the capture time of the newest cloud that looked
	// for its image (0: none yet): an image older than it by more than the
	// tolerance pairs with no later cloud and is given back as it comes.
	pairingCloudNs int64
	// gpuOversize counts clouds the GPU path could not take in
	// (gpu.ErrInputTooLarge) and the CPU filtered instead.
	gpuOversize atomic.Uint64
	// publishFailures counts cmd_vel sends the sink refused. Only the
	// first of a run of failures, a change of error and the recovery are
	// logged (pubErr, under pubMu): a sink that keeps failing would
	// otherwise write a line per frame, and push the first one out of the
	// logs.
	publishFailures atomic.Uint64
	pubErr          string
	// pubFailing is the last send's error while sends fail (nil once one
	// works), for Health, which must not wait for pubMu.
	pubFailing atomic.Pointer[string]

	// The stall guard (guardStalls) reads these while the pipeline
	// goroutine runs a frame. busyUntil is the CLOCK_MONOTONIC time
	// (monotime.Now) at which the current frame becomes older than the
	// watchdog period, 0 between frames: a wall-clock step must neither
	// fake a stall nor hide one. Each frame's is larger than the last
	// (lastUntil), so it also names the frame. busySince is when its
	// stages started (for the log); stage is the telemetry.StageID running.
	busyUntil atomic.Int64
	lastUntil int64
	// cmdUntil is the stale moment (monotonic, as busyUntil) of the frame
	// whose moving command is in force, 0 once a zero went out: between
	// frames the stall guard zeroes at that moment too, should the
	// pipeline goroutine be held up (a log line written to a full pipe)
	// before its own check. Written under pubMu.
	cmdUntil atomic.Int64
	// guardWake tells the stall guard a frame's stages started (capacity
	// 1: a pending wake-up stands for any number), so that it zeroes at
	// that frame's stale moment, not up to a Tick after it.
	guardWake chan struct{}
	busySince atomic.Int64
	stage     atomic.Int32
	stalls    atomic.Uint64
	pubMu     sync.Mutex // serialises Sink calls and what follows
	// Under pubMu: zeroedUntil is the busyUntil of the frame the stall
	// guard has published zero for (that frame may publish only zero).
	zeroedUntil int64
	// Under pubMu: the stall guard zeroed the moving command in force
	// (expireCommand). The planner still ramps from that command, so the
	// next frame publishes zero and resets it, as after any zero.
	expired bool
	// Under pubMu: taken is the last command the sink took (what the
	// robot runs), framePubAt when the last frame's command was sent.
	taken      planner.Twist
	framePubAt time.Time
	// frameUntil is the running frame's stale moment by its data's time,
	// not clamped to follow the last (lastUntil is, to name the frame):
	// cmdUntil once it publishes. Pipeline goroutine only.
	frameUntil int64
	// frameCloudUntil is the running frame's stale moment by its cloud's
	// time alone, the watchdog's (monotonic); cmdCloudUntil that of the
	// frame whose moving command is in force (written with cmdUntil, under
	// pubMu). An expiry before it is the image's, which the watchdog does
	// not see (expiredAt).
	frameCloudUntil int64
	cmdCloudUntil   atomic.Int64
	// lateSince is when the commands began to be zeroed for frames whose
	// stages outlast the watchdog period (the stall guard's zero, or a
	// late frame's), wall clock in ns; 0 once a frame publishes in time.
	// The watchdog does not see it: fresh frames keep arriving. Written
	// under pubMu, read by Health.
	lateSince atomic.Int64
	// expiredAt is when the stall guard last zeroed a moving command at
	// its frame's stale moment while the watchdog still called the newest
	// cloud fresh (wall clock, ns; 0: never): the command ended with its
	// image, which paired up to --pair-tolerance older than its cloud,
	// before the next frame came. The watchdog does not see it, and each
	// frame moves the robot again for a while, so Health holds it for
	// expiryHealthHold. expiries counts them. Written by the guard.
	expiredAt atomic.Int64
	expiries  atomic.Uint64
	// runDone is Run's ctx.Done(), set before anything publishes: once it
	// is closed every frame command is zero (publishFrame checks it under
	// pubMu), also for a frame that gets there before the guard has sent
	// its zero for the cancel.
	runDone <-chan struct{}

	// While the GPU filters a cloud, the CPU preprocesses the frame's
	// image on the goroutine startPrepOverlap runs; nil channels: in line.
	prepJobs    chan infer.ImageView
	prepResults chan prepResult
	prepDone    func() // test hook: called by that goroutine after each job; nil
}

// prepResult is one overlapped preprocessing: how long it took, and its error.
type prepResult struct {
	took time.Duration
	err  error
}

// New checks the configuration.
func New(cfg Config) (*Pipeline, error) {
	switch {
	case cfg.Source == nil, cfg.Filter == nil, cfg.BEV == nil, cfg.Session == nil,
		cfg.Planner == nil, cfg.Watchdog == nil, cfg.Recorder == nil, cfg.Sink == nil:
		return nil, errors.New("agent: every pipeline component must be set")
	case cfg.Prep == nil && cfg.Session.Image() != nil:
		return nil, fmt.Errorf("agent: model %s has an image input but the pipeline no image preprocessor", cfg.Session.Model())
	case cfg.MaxPoints <= 0:
		return nil, fmt.Errorf("agent: max points %d", cfg.MaxPoints)
	case cfg.GPU != nil && len(cfg.GPUBEV) != 4*len(cfg.Session.BEV()):
		return nil, fmt.Errorf("agent: GPU BEV buffer of %d bytes for a BEV input of %d float32", len(cfg.GPUBEV), len(cfg.Session.BEV()))
	}
	cfg.PairTolerance = PairToleranceFor(cfg.PairTolerance, cfg.Watchdog.Timeout())
	if cfg.Tick <= 0 {
		cfg.Tick = max(cfg.Watchdog.Timeout()/4, time.Microsecond) // time.NewTicker refuses 0
	}
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	p := &Pipeline{cfg: cfg, log: cfg.Log, pts: voxel.NewPoints(cfg.MaxPoints), gpu: cfg.GPU, guardWake: make(chan struct{}, 1),
		images: cfg.Session.Image() != nil}
	p.ground = newGroundWatch(cfg.BEV, cfg.Log)
	p.lidarIDs = newLidarFrameIDs(cfg.LidarFrame)
	p.queue, _ = cfg.Source.(queueStats)
	running := cfg.Planner.Config()
	p.plannerConfig.Store(&running)
	if p.gpu != nil {
		cfg.Recorder.SetVoxelPath("gpu")
	} else {
		cfg.Recorder.SetVoxelPath("cpu")
	}
	return p, nil
}

// VoxelPath is where the voxel filter and BEV run now: "gpu" or "cpu".
// Safe for concurrent use.
func (p *Pipeline) VoxelPath() string {
	if p.gpuFailures.Load() == 0 && p.cfg.GPU != nil {
		return "gpu"
	}
	return "cpu"
}

// GPUFailures counts GPU filter failures (0 or 1: the first one ends the
// GPU path). Safe for concurrent use.
func (p *Pipeline) GPUFailures() uint64 { return p.gpuFailures.Load() }

// GPUOversize counts clouds too large for the GPU input buffer, filtered
// on the CPU while the GPU path stayed. Safe for concurrent use.
func (p *Pipeline) GPUOversize() uint64 { return p.gpuOversize.Load() }

// GroundFoundZ is the ground's z under the LiDAR, levelled, relative to
// it, and GroundTiltDeg the ground's tilt, as the last ground check found
// them (NaN before one could judge); GroundMismatch is true while it warns
// that the ground is not where the BEV measures heights from, or not
// level. Safe for concurrent use.
func (p *Pipeline) GroundFoundZ() float64  { return p.ground.FoundZ() }
func (p *Pipeline) GroundTiltDeg() float64 { return p.ground.TiltDeg() }
func (p *Pipeline) GroundMismatch() bool   { return p.ground.Mismatch() }

// FrameMismatches counts the clouds dropped for coming in another frame
// than Config.LidarFrame. Safe for concurrent use.
func (p *Pipeline) FrameMismatches() uint64 { return p.frameMismatches.Load() }

// ScanMismatches counts the clouds dropped for being a planar LiDAR's
// scans when Config.PlanarLidar is false, or 3D clouds when it is true.
// Safe for concurrent use.
func (p *Pipeline) ScanMismatches() uint64 { return p.scanMismatches.Load() }

// Unpaired counts the clouds dropped for finding no image within the
// pairing tolerance. Safe for concurrent use.
func (p *Pipeline) Unpaired() uint64 { return p.unpairedTotal.Load() }

// PublishFailures counts commands the sink failed to send. Safe for
// concurrent use.
func (p *Pipeline) PublishFailures() uint64 { return p.publishFailures.Load() }

// Run processes frames until ctx is done. On return it has published a
// zero command and released every lease it held. While a frame's stages
// run longer than the watchdog timeout (a hung GPU, say), a guard
// goroutine owned by Run publishes zero, so a stuck stage cannot leave the
// robot moving on its last command.
func (p *Pipeline) Run(ctx context.Context) error {
	p.runDone = ctx.Done()
	// The zero goes out as an incident starts, before it is logged.
	p.cfg.Watchdog.SetStop(p.stopNow)
	defer p.cfg.Watchdog.SetStop(nil)
	tick := time.NewTimer(p.cfg.Tick)
	defer tick.Stop()
	defer p.stop()
	stopGuard, guardDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(guardDone)
		p.guardStalls(ctx, stopGuard)
	}()
	defer func() {
		close(stopGuard)
		<-guardDone
	}()
	if p.gpu != nil && p.images {
		defer p.startPrepOverlap()()
	}
	// A LiDAR-only pipeline has no image stream: a nil channel, never ready.
	var imageC <-chan transport.Lease
	if p.images {
		imageC = p.cfg.Source.C(TopicImage)
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case l := <-p.cfg.Source.C(TopicPoints):
			if ctx.Err() != nil { // select picks at random among ready cases
				l.Release()
				return nil
			}
			p.frame(l)
		case l := <-imageC:
			p.keepImage(l)
			continue
		case <-tick.C:
		}
		p.countQueueSuperseded()
		// Between frames (and after each), the watchdog decides whether
		// the robot may keep its command.
		now := time.Now()
		if ok, _ := p.cfg.Watchdog.Check(now); !ok {
			p.cfg.Planner.Reset() // ramp up from rest when frames return
			p.publish(planner.Zero(), now)
		}
		if p.planned {
			// Here, not in frame: its slots are back with the camera and
			// the stall guard disarmed while it looks (tens of µs to a
			// millisecond, once a second). p.pts is this goroutine's copy.
			p.planned = false
			if !p.cfg.PlanarLidar { // a scan shows no ground to check
				p.ground.observe(now, p.pts)
			}
		}
		tick.Reset(p.nextCheck(monotime.Now()))
	}
}

// logScanMismatch says, once, why clouds of the other kind are dropped
// and what fixes it.
func (p *Pipeline) logScanMismatch(planar bool) {
	if planar {
		p.log.Error("clouds dropped: they are a planar (2D) LiDAR's scans, and this agent takes 3D clouds, finding obstacles by their height above the ground, which a scan does not show: run the agent with --planar-lidar (counted in lidar_scan_mismatch_total, logged once)")
		return
	}
	p.log.Error("clouds dropped: they are 3D clouds, and this agent runs with --planar-lidar, which takes every point for an obstacle, the ground too: run it without --planar-lidar, or give the camera a planar LiDAR (bin/camera --planar-lidar, or --ros2-scan-topic with --source ros2) (counted in lidar_scan_mismatch_total, logged once)")
}

// staleMargin is how long after the newest frame's stale moment the
// check runs: the watchdog counts a frame stale once its age is over the
// timeout, not at it.
const staleMargin = time.Millisecond

// nextCheck is how long Run waits, at mono (CLOCK_MONOTONIC ns), before it
// checks the watchdog again if no frame comes: until just after the newest
// frame goes stale, so that the zero goes out then and not up to a Tick
// later, or a Tick when that moment is further or past.
func (p *Pipeline) nextCheck(mono int64) time.Duration {
	wait := p.cfg.Tick
	if d := time.Duration(p.lastUntil-mono) + staleMargin; p.lastUntil != 0 && d > 0 && d < wait {
		wait = d
	}
	return wait
}

// stop publishes zero and releases what is held: SIGINT/SIGTERM path.
// stopNow is the watchdog's stop (SetStop): zero, at once, on the
// goroutine that found the incident at now, unless a frame's command
// went out after now; the planner is reset by the next frame.
func (p *Pipeline) stopNow(now time.Time) {
	p.pubMu.Lock()
	defer p.pubMu.Unlock()
	// Found on another goroutine (/healthz, a scrape) that was then held
	// up: frames resumed meanwhile, and the incident it found is over.
	if p.framePubAt.After(now) {
		return
	}
	// The next frame publishes zero and resets the planner, also should
	// the watchdog's own reset have come before this zero.
	if p.publishLocked(planner.Zero(), now) == nil {
		p.expired = true
	}
}

func (p *Pipeline) stop() {
	p.publish(planner.Zero(), time.Now())
	p.dropImage()
	p.countQueueSuperseded()
}

// countQueueSuperseded adds the leases the source's queues superseded
// since the last call to frames_superseded (a frame or a tick late).
func (p *Pipeline) countQueueSuperseded() {
	if p.queue == nil {
		return
	}
	if n := p.queue.Stats().Superseded; n > p.queueSuperseded {
		p.cfg.Recorder.Add(telemetry.FramesSuperseded, n-p.queueSuperseded)
		p.queueSuperseded = n
	}
}

// keepImage holds the freshest image for pairing, releasing the older one.
// An image too old for the newest cloud that looked for one (so for every
// later cloud) is given back at once: over the copy baseline the image
// stream reads the next image only once this one is released, and the
// camera, blocked on that next image, sends no more clouds, so a held
// image of no use stalled the stream for good (a slow read of the first
// image let the second cloud overtake it: the cloud found no image and
// dropped; the image, come after, was held).
func (p *Pipeline) keepImage(l transport.Lease) {
	if newer, ok := p.cfg.Source.TryLatest(TopicImage); ok {
		l.Release()
		p.cfg.Recorder.Inc(telemetry.FramesSuperseded)
		l = newer
	}
	p.cfg.Recorder.Inc(telemetry.FramesReceived)
	if p.hasImg {
		p.image.Release()
		p.cfg.Recorder.Inc(telemetry.FramesSuperseded)
	}
	p.image, p.hasImg = l, true
	p.lastImageNs = l.Handle.CaptureNs
	if p.pairingCloudNs != 0 && l.Handle.CaptureNs < p.pairingCloudNs-int64(p.pairTolerance()) {
		p.dropImage()
		p.cfg.Recorder.Inc(telemetry.FramesSuperseded)
	}
}

// unpairedWarnAfter is how many clouds in a row must find no image before
// the agent warns: a single one is a lost image, a run of them (100 ms at
// 30 Hz) something to fix, most often two drivers stamping by different
// clocks, or no image topic at all.
const unpairedWarnAfter = 3

// noteUnpaired counts a cloud that found no image, and warns once per run
// of them, saying how far the last image's stamp lay from the cloud's.
func (p *Pipeline) noteUnpaired(cloud *handles.Handle) {
	if p.unpaired++; p.unpaired != unpairedWarnAfter {
		return
	}
	fields := []zap.Field{zap.Uint64("seq", cloud.Seq), zap.Duration("pair_tolerance", p.pairTolerance()), zap.Int("clouds_in_a_row", p.unpaired)}
	if p.lastImageNs == 0 {
		p.log.Warn("frames dropped: no image has arrived to pair the clouds with (is the camera's image stream publishing? a robot without a camera runs the agent with --lidar-only)", fields...)
		return
	}
	p.log.Warn("frames dropped: the clouds find no image within the pairing tolerance (are the images and clouds stamped by one clock? a steady offset below half the watchdog period, such as a driver stamping the scan's start, or a camera slower than 25 Hz, is taken with a larger --pair-tolerance)",
		append(fields, zap.Duration("last_image_minus_cloud", time.Duration(p.lastImageNs-cloud.CaptureNs)))...)
}

// pairTolerance is the pairing tolerance in force: Config.Pairing's,
// which ros2 param set changes, else Config.PairTolerance.
func (p *Pipeline) pairTolerance() time.Duration {
	if p.cfg.Pairing != nil {
		return p.cfg.Pairing.InForce()
	}
	return p.cfg.PairTolerance
}

// notePaired ends a run of unpaired clouds, saying so if it was warned of.
func (p *Pipeline) notePaired() {
	if p.unpaired >= unpairedWarnAfter {
		p.log.Info("pairing resumed", zap.Int("clouds_dropped_unpaired", p.unpaired))
	}
	p.unpaired = 0
}

// pairImage returns the held image if its capture time is within tolerance
// of the cloud's, waiting up to the tolerance for a newer one if the held
// image is older.
func (p *Pipeline) pairImage(cloud *handles.Handle) bool {
	tolerance := p.pairTolerance()
	tol := int64(tolerance)
	p.pairingCloudNs = cloud.CaptureNs
	if l, ok := p.cfg.Source.TryLatest(TopicImage); ok {
		p.keepImage(l)
	}
	if p.hasImg && p.image.Handle.CaptureNs >= cloud.CaptureNs-tol {
		return p.image.Handle.CaptureNs <= cloud.CaptureNs+tol
	}
	// The held image, if any, is older than this cloud, and so than every
	// later one: of no more use. Give it back before waiting: over the
	// copy baseline the next image is read only once it is.
	if p.hasImg {
		p.dropImage()
		p.cfg.Recorder.Inc(telemetry.FramesSuperseded)
	}
	// One timer each for the pipeline's life: new ones per frame would
	// allocate.
	if p.pairWait == nil {
		p.pairWait, p.staleWait = time.NewTimer(tolerance), time.NewTimer(time.Hour)
	} else {
		p.pairWait.Reset(tolerance)
	}
	p.staleWait.Stop()
	var staleC <-chan time.Time
	if p.lastUntil != 0 {
		if d := time.Duration(p.lastUntil-monotime.Now()) + staleMargin; d < tolerance {
			p.staleWait.Reset(max(d, 0))
			staleC = p.staleWait.C
		}
	}
	for waiting := true; waiting; {
		select {
		case l := <-p.cfg.Source.C(TopicImage):
			// One older than this cloud is given back (keepImage): wait on.
			p.keepImage(l)
			waiting = !p.hasImg
		case <-staleC:
			// The newest planned frame went stale while this cloud waits:
			// zero now, as Run would, then wait on for the image.
			staleC = nil
			if now := time.Now(); !watchdogOK(p.cfg.Watchdog, now) {
				p.cfg.Planner.Reset()
				p.publish(planner.Zero(), now)
			}
		case <-p.pairWait.C:
			p.staleWait.Stop()
			return false
		}
	}
	p.pairWait.Stop()
	p.staleWait.Stop()
	d := p.image.Handle.CaptureNs - cloud.CaptureNs
	return d >= -tol && d <= tol
}

// watchdogOK is Watchdog.Check's verdict alone.
func watchdogOK(w *planner.Watchdog, now time.Time) bool {
	ok, _ := w.Check(now)
	return ok
}

// frame runs every stage on the freshest cloud and its paired image.
func (p *Pipeline) frame(cloud transport.Lease) {
	rec := p.cfg.Recorder
	if newer, ok := p.cfg.Source.TryLatest(TopicPoints); ok {
		cloud.Release()
		rec.Inc(telemetry.FramesSuperseded)
		cloud = newer
	}
	defer cloud.Release()
	rec.Inc(telemetry.FramesReceived)
	rec.Record(telemetry.StageHandoff, time.Duration(cloud.ReceivedNs-cloud.Handle.PublishNs))
	if !p.lidarIDs.matches(&cloud.Handle.FrameID) {
		rec.Inc(telemetry.FramesDropped)
		if p.frameMismatches.Add(1) == 1 {
			p.log.Error("clouds dropped: they are not in the LiDAR frame whose mount came from /tf_static (--lidar-frame; counted, logged once)",
				zap.String("cloud_frame", cloud.Handle.FrameID.String()), zap.String("lidar_frame", p.cfg.LidarFrame))
		}
		return
	}
	if planar := cloud.Handle.Points.Flags&handles.PointsPlanar != 0; planar != p.cfg.PlanarLidar {
		rec.Inc(telemetry.FramesDropped)
		if p.scanMismatches.Add(1) == 1 {
			p.logScanMismatch(planar)
		}
		return
	}
	stamp := time.Unix(0, cloud.Handle.CaptureNs)
	if p.images && !p.pairImage(&cloud.Handle) {
		rec.Inc(telemetry.FramesDropped)
		p.unpairedTotal.Add(1)
		p.noteUnpaired(&cloud.Handle)
		// Check first: building the fields would allocate on every drop.
		if ce := p.log.Check(zap.DebugLevel, "no image within the pairing tolerance"); ce != nil {
			ce.Write(zap.Uint64("seq", cloud.Handle.Seq))
		}
		return
	}
	p.notePaired()
	// From here the paired image is used up, whatever becomes of the
	// frame: the next cloud, a period later, pairs with a newer one.
	// Holding it after a drop would stall the copy baseline for good, whose
	// image stream reads the next image only once this one is released.
	defer p.dropImage()
	// A frame too old to act on (delivered late, stamp 0, a camera clock
	// off by more than the watchdog period) is not planned at all; the
	// watchdog's incident line names its age.
	now := time.Now()
	at, verdict := p.cfg.Watchdog.Fresh(stamp, now)
	switch verdict {
	case planner.FrameStale:
		rec.Inc(telemetry.FramesDropped)
		if !p.staleLogged { // once per run of such frames: it is usually every frame
			p.staleLogged = true
			p.log.Warn("frames dropped: capture stamp too far from this machine's clock (are the camera's and this machine's clocks synchronised? with a ROS 2 camera under a simulator's /clock, or a driver clock not synchronised, run it with --ros2-stamp receipt; was this process paused, or the frames held up?)",
				zap.Duration("age", now.Sub(stamp)), zap.Duration("watchdog", p.cfg.Watchdog.Timeout()), zap.Uint64("seq", cloud.Handle.Seq))
		}
		return
	case planner.FrameOutOfOrder:
		// Planning it would replace the command from a newer frame with
		// one from older data; it keeps nothing alive either.
		rec.Inc(telemetry.FramesDropped)
		if p.outOfOrder++; p.outOfOrderAt.IsZero() || now.Sub(p.outOfOrderAt) >= outOfOrderEvery {
			p.log.Warn("frames dropped: capture stamp not newer than the newest frame's (does the driver stamp out of order, or do two publishers share the topic?)",
				zap.Uint64("seq", cloud.Handle.Seq), zap.Uint64("newest_seq", p.newestSeq), zap.Uint64("dropped_since_last_line", p.outOfOrder))
			p.outOfOrderAt, p.outOfOrder = now, 0
		}
		return
	}
	p.staleLogged = false
	p.newestSeq = cloud.Handle.Seq
	// The frame's data is as old as the older of its cloud and its image,
	// which pairs up to the pairing tolerance older: its command must not
	// outlive the image either. (The watchdog orders frames by their
	// clouds: an image may be older than the last frame's cloud.) One
	// already too old is a failed frame: the command from before it must
	// not stand either.
	dataAt := at
	if p.images && p.image.Handle.CaptureNs < at.UnixNano() {
		dataAt = time.Unix(0, p.image.Handle.CaptureNs)
	}
	if p.cfg.Watchdog.Late(now, dataAt) {
		rec.Inc(telemetry.FramesDropped)
		p.cfg.Watchdog.Fail("pair", errImageTooOld)
		if !p.oldImageLogged {
			p.oldImageLogged = true
			p.log.Warn("frame dropped: its image is older than the watchdog period, though within the pairing tolerance of its cloud: lower --pair-tolerance, or look at why the camera's images arrive late (logged once)",
				zap.Duration("image_age", now.Sub(dataAt)), zap.Duration("cloud_age", now.Sub(stamp)), zap.Duration("watchdog", p.cfg.Watchdog.Timeout()), zap.Uint64("seq", cloud.Handle.Seq))
		}
		return
	}
	// The stall guard zeroes once this frame is older than the period by
	// the watchdog's rule (from its data's time, not from when its stages
	// start, which may be most of a period later).
	start := monotime.Now()
	p.frameUntil = start + int64(p.cfg.Watchdog.Timeout()-now.Sub(dataAt))
	p.frameCloudUntil = start + int64(p.cfg.Watchdog.Timeout()-now.Sub(at))
	p.lastUntil = max(p.frameUntil, p.lastUntil+1)
	p.busySince.Store(start)
	p.busyUntil.Store(p.lastUntil)
	select { // the guard arms its timer for this frame's stale moment
	case p.guardWake <- struct{}{}:
	default:
	}
	defer p.busyUntil.Store(0)
	if err := p.stages(&cloud); err != nil {
		rec.Inc(telemetry.FramesDropped)
		return
	}
	// The camera reclaims every slot of a subscriber whose connection
	// dropped (a release it could not be sent) and writes them again: what
	// the stages read may then be a later frame's, half written. Do not
	// plan from it (invariant 1 seen from this side). Valid reads the
	// pool's generation table, which the camera updates before it writes a
	// reused slot, so this holds even before our side has seen the
	// connection end. The stages' reads are done by now: their helper
	// goroutines and GPU streams have been waited for.
	if !cloud.Valid() || (p.images && !p.image.Valid()) {
		rec.Inc(telemetry.FramesDropped)
		if closed(p.runDone) {
			// Stopping: the subscriber's connection closes with Run's
			// context, and the camera reclaims what it lent. Expected,
			// not an incident; nothing but zero goes out from here on.
			return
		}
		// Fresh counted this frame as the newest: without a failure the
		// watchdog would let the last command stand while such frames
		// keep coming.
		p.cfg.Watchdog.Fail("handoff", errReclaimed)
		if !p.reclaimedLogged {
			p.reclaimedLogged = true
			p.log.Warn("frame dropped: the camera connection ended while the stages read its slots (the camera stopped, restarted or reclaimed them); not planned",
				zap.Uint64("seq", cloud.Handle.Seq))
		}
		return
	}
	p.reclaimedLogged = false
	p.stage.Store(int32(telemetry.StagePlan))
	if c, changed := p.cfg.Tuning.take(); changed {
		p.retune(*c)
	}
	now = time.Now()
	cmd, err := p.cfg.Planner.Plan(planner.Input{Scores: p.cfg.Session.Scores(), Clearance: p.cfg.Session.Clearance(), Stamp: stamp}, now)
	rec.RecordSince(telemetry.StagePlan, now)
	if err != nil {
		p.cfg.Watchdog.Fail("plan", err)
	}
	p.publishFrame(cmd, at, dataAt)
	rec.Record(telemetry.StageE2E, time.Duration(time.Now().UnixNano()-cloud.Handle.CaptureNs))
	rec.Inc(telemetry.FramesProcessed)
	p.planned = true
}

// retune gives the planner settings changed while the agent runs.
func (p *Pipeline) retune(c planner.Config) {
	if err := p.cfg.Planner.Retune(c); err != nil {
		// PlannerTuning checked them: a bug, not the operator's mistake.
		p.log.Error("planner settings not taken; the planner keeps its settings", zap.Error(err))
		return
	}
	running := p.cfg.Planner.Config()
	p.plannerConfig.Store(&running)
	logPlannerSettings(p.log, "planner settings changed; from this frame on", running)
	warnBraking(p.log, running)
}

// PlannerConfig returns the settings the planner runs with (a change
// made through Config.Tuning shows from the frame that takes it).
func (p *Pipeline) PlannerConfig() planner.Config { return *p.plannerConfig.Load() }

// dropImage releases the held image, if any.
func (p *Pipeline) dropImage() {
	if p.hasImg {
		p.image.Release()
		p.hasImg = false
	}
}

// stages runs voxel → BEV → preprocess (models with an image input) →
// infer; a failure is reported to
// the watchdog, which zeroes the output.
func (p *Pipeline) stages(cloud *transport.Lease) error {
	rec := p.cfg.Recorder
	h := &cloud.Handle
	in := voxel.Cloud{Data: cloud.Bytes(), Count: int(h.Points.Count), Step: int(h.Points.Step),
		OffX: int(h.Points.X), OffY: int(h.Points.Y), OffZ: int(h.Points.Z), OffI: int(h.Points.Intensity)}
	if !p.images {
		if _, err := p.cloudStages(in); err != nil {
			return err
		}
		return p.infer()
	}
	ih := &p.image.Handle
	view := infer.ImageView{Pix: p.image.Bytes(), Width: int(ih.Image.Width), Height: int(ih.Image.Height),
		Step: int(ih.Image.RowStep), Format: pixelFormat(ih.Image.Encoding)}
	if !p.imageNoted {
		p.imageNoted = true
		p.noteImage(view)
	}
	if p.gpu != nil && p.prepJobs != nil {
		// The GPU filters while the CPU preprocesses: the two write
		// different inputs of the model (BEV, image).
		p.prepJobs <- view
		_, err := p.cloudStages(in)
		p.stage.Store(int32(telemetry.StagePreprocess))
		r := <-p.prepResults // always: the image input is being written until then
		if err != nil {
			return err
		}
		if r.err != nil {
			p.cfg.Watchdog.Fail("preprocess", r.err)
			return r.err
		}
		rec.Record(telemetry.StagePreprocess, r.took)
	} else {
		t, err := p.cloudStages(in)
		if err != nil {
			return err
		}
		p.stage.Store(int32(telemetry.StagePreprocess))
		if err := p.cfg.Prep.Run(p.cfg.Session.Image(), view); err != nil {
			p.cfg.Watchdog.Fail("preprocess", err)
			return err
		}
		p.lap(telemetry.StagePreprocess, t)
	}
	return p.infer()
}

// infer runs the model on the inputs the stages filled.
func (p *Pipeline) infer() error {
	p.stage.Store(int32(telemetry.StageInfer))
	d, err := p.cfg.Session.Run()
	if err != nil {
		p.cfg.Watchdog.Fail("infer", err)
		return err
	}
	p.cfg.Recorder.Record(telemetry.StageInfer, d) // not a failed run's 0
	return nil
}

// startPrepOverlap starts the goroutine that preprocesses each frame's
// image while the GPU filters its cloud, and returns the function that
// stops it (after the job in hand, if any: stages always collects its
// result first). Run starts it when the GPU path is on; a frame after the
// GPU's first failure runs in line again.
func (p *Pipeline) startPrepOverlap() (stop func()) {
	jobs, results := make(chan infer.ImageView), make(chan prepResult)
	quit, done := make(chan struct{}), make(chan struct{})
	p.prepJobs, p.prepResults = jobs, results
	go func() {
		defer close(done)
		for {
			select {
			case <-quit:
				return
			case view := <-jobs:
				t := time.Now()
				err := p.cfg.Prep.Run(p.cfg.Session.Image(), view)
				if p.prepDone != nil {
					p.prepDone()
				}
				results <- prepResult{took: time.Since(t), err: err}
			}
		}
	}()
	return func() {
		close(quit)
		<-done
		p.prepJobs, p.prepResults = nil, nil
	}
}

// cloudStages filters the cloud and fills the model's BEV input, on the GPU
// while it works, else on the CPU. It returns the time it finished.
func (p *Pipeline) cloudStages(in voxel.Cloud) (time.Time, error) {
	t := time.Now()
	p.stage.Store(int32(telemetry.StageVoxel))
	var gpuErr error
	if p.gpu != nil {
		// One kernel chain does both: "voxel" holds voxel + BEV on this
		// path and "bev" records nothing.
		if gpuErr = p.gpu.Run(in, p.pts, p.cfg.GPUBEV); gpuErr == nil {
			t = p.lap(telemetry.StageVoxel, t)
			return t, p.checkCloud()
		}
		t = time.Now()
	}
	if err := p.cfg.Filter.Run(in, p.pts); err != nil {
		// A cloud the CPU refuses too (bad geometry, too large a grid) is
		// the data's fault, not the GPU's: the GPU path stays.
		p.cfg.Watchdog.Fail("voxel", err)
		return t, err
	}
	switch {
	case errors.Is(gpuErr, gpu.ErrInputTooLarge):
		// That cloud's size, not the GPU: this frame on the CPU, the
		// GPU path stays for the next.
		if p.gpuOversize.Add(1) == 1 {
			p.log.Warn("a cloud too large for the GPU input buffer was filtered on the CPU (counted in gpu_voxel_oversize_total; raise --max-points to grow the buffer)", zap.Error(gpuErr))
		}
	case gpuErr != nil:
		p.gpuFailed(gpuErr)
	}
	t = p.lap(telemetry.StageVoxel, t)
	if err := p.checkCloud(); err != nil {
		return t, err
	}
	p.stage.Store(int32(telemetry.StageBEV))
	if err := p.cfg.BEV.Fill(p.pts, p.cfg.Session.BEV()); err != nil {
		p.cfg.Watchdog.Fail("bev", err)
		return t, err
	}
	return p.lap(telemetry.StageBEV, t), nil
}

// errSawNothing fails a frame whose filtered cloud is empty.
var errSawNothing = errors.New("the filtered cloud has no point inside the BEV raster (every point NaN/Inf or beyond it: the \"BEV raster\" log line gives its window; or --min-points kept no voxel): a blind or covered LiDAR is not an empty world")

// sawSomething fails the frame (stage "voxel") when no filtered point
// lands in the BEV raster: the model would see an empty raster, which
// reads as open space, and drive. A LiDAR on a robot always sees the
// ground near it. It stops at the first point inside, which in a real
// scan comes within the first few.
func (p *Pipeline) sawSomething() error {
	for _, pt := range p.pts.P {
		if p.cfg.BEV.Holds(pt) { // placed by the LiDAR's mount, as Fill draws it
			return nil
		}
	}
	p.cfg.Watchdog.Fail("voxel", errSawNothing)
	return errSawNothing
}

// An unmarked planar scan: a cloud of at least scanMinPoints drawn
// points, all within scanSlabM of one height at least scanAboveM above
// the ground. A 3D LiDAR sees the ground near it; a level 2D scanner
// sees only its plane, at its height.
const (
	scanAboveM    = 0.05
	scanSlabM     = 0.1
	scanMinPoints = 16
)

// errLooksPlanar fails a 3D pipeline's frame whose cloud looks like a
// planar scan that its camera did not mark.
var errLooksPlanar = errors.New("the filtered cloud lies in one level plane above the ground, as a planar (2D) LiDAR's scan, which a 3D model reads as no obstacle below its obstacle height")

// checkCloud fails the frame (stage "voxel") when the filtered cloud
// cannot be planned from: it shows nothing inside the raster
// (sawSomething), or, to a 3D pipeline, it looks like a planar scan
// whose camera did not say so (a 2D scanner's PointCloud2, or
// laser_geometry's projection of a LaserScan, without the camera's
// --planar-lidar): a 3D model counts only cells taller than its obstacle
// height, and a scanner mounted lower would show it none. Counted with
// the marked scans (ScanMismatches), logged once.
func (p *Pipeline) checkCloud() error {
	if err := p.sawSomething(); err != nil || p.cfg.PlanarLidar {
		return err
	}
	z, planar := p.cfg.BEV.LevelAbove(p.pts, scanAboveM, scanSlabM, scanMinPoints)
	if !planar {
		return nil
	}
	if p.scanMismatches.Add(1) == 1 {
		p.log.Error("clouds dropped: every point lies in one level plane above the ground, as a planar (2D) LiDAR's scan, which this agent's 3D model cannot read (it sees no obstacle lower than its obstacle height): mark the camera's clouds planar (bin/camera --planar-lidar, with --ros2-points-topic or --ros2-scan-topic) and run the agent with --planar-lidar; a 3D LiDAR's cloud looks so only when its ground reads that high: check --lidar-height (counted in lidar_scan_mismatch_total, logged once)",
			zap.Float32("plane_height_m", z), zap.Int("points", len(p.pts.P)))
	}
	p.cfg.Watchdog.Fail("voxel", errLooksPlanar)
	return errLooksPlanar
}

// noteImage says, once, what the model does not get from the camera's
// images as they come: colour from a grey camera (the reference model's
// hazard term reads red over green and blue: a grey image has none), or
// the scene's proportions from images of another aspect ratio than the
// model's input, which are stretched to it (a hazard then lands in
// another sector than where it is).
func (p *Pipeline) noteImage(v infer.ImageView) {
	pp := p.cfg.Prep.Params()
	if v.Format == infer.PixelMono8 {
		p.log.Warn("the camera's images are grey (mono8): the model's colour input gets the same value in every channel, so what only colour shows (the reference model's hazard marking) is not seen",
			zap.Int("width", v.Width), zap.Int("height", v.Height))
	}
	src, dst := float64(v.Width)/float64(v.Height), float64(pp.Width)/float64(pp.Height)
	if r := src / dst; r > 1.1 || r < 1/1.1 {
		p.log.Warn("the camera's images have another aspect ratio than the model's image input and are stretched to it: what the model sees at a heading is not what is there (use a camera, or a crop, of the model's proportions)",
			zap.Int("width", v.Width), zap.Int("height", v.Height), zap.Int("model_width", pp.Width), zap.Int("model_height", pp.Height))
	}
}

// gpuFailed ends the GPU path after it failed on a frame the CPU could
// filter: one log line with the reason; /latency and /metrics say "cpu"
// from now on. That frame was filtered on the CPU, so the failure costs no
// command.
func (p *Pipeline) gpuFailed(err error) {
	p.gpu = nil
	p.gpuFailures.Add(1)
	p.cfg.Recorder.SetVoxelPath("cpu")
	p.log.Warn("GPU voxel filter failed; voxel filter and BEV run on the CPU from now on", zap.Error(err))
}

func (p *Pipeline) lap(stage telemetry.StageID, since time.Time) time.Time {
	now := time.Now()
	p.cfg.Recorder.Record(stage, now.Sub(since))
	return now
}

func (p *Pipeline) publish(t planner.Twist, stamp time.Time) {
	p.pubMu.Lock()
	defer p.pubMu.Unlock()
	p.publishLocked(t, stamp)
}

// publishLocked sends t to the sink; the caller holds pubMu.
func (p *Pipeline) publishLocked(t planner.Twist, stamp time.Time) error {
	err := p.cfg.Sink.PublishTwist(t, stamp)
	switch {
	case err != nil:
		n := p.publishFailures.Add(1)
		if msg := err.Error(); msg != p.pubErr {
			p.pubErr = msg
			p.pubFailing.Store(&msg)
			p.log.Warn("publish cmd_vel failed (further failures with this error are only counted: cmd_vel_publish_failures_total)",
				zap.Error(err), zap.Uint64("failures", n))
		}
	case p.pubErr != "":
		p.pubErr = ""
		p.pubFailing.Store(nil)
		p.log.Info("publish cmd_vel works again", zap.Uint64("failures", p.publishFailures.Load()))
	}
	p.last = t
	if err == nil {
		p.taken = t
		if t.IsZero() {
			p.cmdUntil.Store(0)
		}
	}
	return err
}

// Last returns the last command published. Safe for concurrent use.
func (p *Pipeline) Last() planner.Twist {
	p.pubMu.Lock()
	defer p.pubMu.Unlock()
	return p.last
}

// publishFrame publishes the command planned from the frame whose time
// Fresh returned as at. The command is zero when the watchdog says so,
// when the frame is older than the period by now (its stages stalled):
// never a command from a stale frame, whatever newer frames arrived; and
// when the stall guard has zeroed for this frame or Run's context is done,
// which is checked, the command sent and the busy period ended in one
// step under pubMu: the guard cannot zero between the check and the send,
// nor right after it. (The watchdog is asked before, without
// pubMu, which is held no longer than the send needs: its incident
// callbacks log.) The stamp is at: the cloud's capture time, or when the
// frame arrived if its stamp lay ahead of our clock; the age that decides
// is dataAt's, the older of the cloud's and its image's. A command the
// sink refused is not planned from (Planner.Resume from the last one
// taken); one it took stays in force until the frame's stale moment
// (cmdUntil).
func (p *Pipeline) publishFrame(cmd planner.Twist, at, dataAt time.Time) {
	now := time.Now()
	out := p.cfg.Watchdog.OutputFrame(now, dataAt, cmd, p.cfg.Planner)
	late := p.cfg.Watchdog.Late(now, dataAt)
	p.pubMu.Lock()
	defer p.pubMu.Unlock()
	until := p.busyUntil.Load()
	// Past its stale moment by the monotonic clock, which a wall-clock
	// step back during the stages does not hide from (Late, by the wall
	// clock, would pass it), though the guard's timer has not fired yet.
	stalled := p.zeroedUntil == until || until != 0 && monotime.Now() > until
	if stalled || p.expired || closed(p.runDone) {
		p.expired = false
		p.cfg.Planner.Reset() // ramp up from rest, as after any zero
		out = planner.Zero()
	}
	switch err := p.publishLocked(out, at); {
	case err != nil && !out.IsZero():
		// The robot did not get it: the next command steps from what
		// it runs, not from this one, or the first to get through
		// could jump past the acceleration limit (or brake from it).
		p.cfg.Planner.Resume(p.taken)
	case err == nil && !out.IsZero():
		p.cmdCloudUntil.Store(p.frameCloudUntil)
		p.cmdUntil.Store(p.frameUntil)
	}
	p.framePubAt = time.Now()
	p.busyUntil.Store(0)
	select { // the guard arms its timer for the command's stale moment
	case p.guardWake <- struct{}{}:
	default:
	}
	if late || stalled {
		p.markLate(now)
	} else {
		p.lateSince.Store(0)
	}
}

// markLate records that commands are zeroed for a frame that outlasted
// the watchdog period; the caller holds pubMu.
func (p *Pipeline) markLate(now time.Time) {
	if p.lateSince.Load() == 0 {
		p.lateSince.Store(now.UnixNano())
	}
}

// Health reports whether commands get through at now: nil, or why not,
// with for how long. The watchdog's incident (no fresh frame, a failed
// stage); the sink refusing the commands; or frames whose stages outlast
// the watchdog period, whose commands are zeroed though fresh frames keep
// coming (the watchdog alone would say healthy). Safe for concurrent use;
// /healthz.
func (p *Pipeline) Health(now time.Time) error {
	wd := p.cfg.Watchdog
	if ok, reason := wd.Check(now); !ok {
		if inc, active := wd.Active(); active {
			return fmt.Errorf("%s (cmd_vel zeroed for %v)", reason, now.Sub(inc.Start).Round(time.Millisecond))
		}
		return errors.New(reason)
	}
	if msg := p.pubFailing.Load(); msg != nil {
		return fmt.Errorf("publish cmd_vel fails: %s (cmd_vel_publish_failures_total)", *msg)
	}
	if since := p.lateSince.Load(); since != 0 {
		return fmt.Errorf("stall: frames take longer than the watchdog period (%v) to process, so each command is zeroed (cmd_vel zeroed for %v; pipeline_stalls_total, /latency's stages)",
			wd.Timeout(), now.Sub(time.Unix(0, since)).Round(time.Millisecond))
	}
	if at := p.expiredAt.Load(); at != 0 {
		if ago := now.Sub(time.Unix(0, at)); ago < expiryHealthHold(wd.Timeout()) {
			return fmt.Errorf("commands expire between frames: cmd_vel was last zeroed %v ago, as its frame's image grew older than the watchdog period (%v) before the next frame came (images pair up to --pair-tolerance, %v, older than their clouds: lower it, or look at why images arrive late; cmd_vel_expired_total)",
				max(ago, 0).Round(time.Millisecond), wd.Timeout(), p.pairTolerance())
		}
	}
	return nil
}

// expiryHealthHold is how long Health reports a command the stall guard
// let expire between frames (expiredAt): longer than the frames are apart
// while it recurs, a second or two watchdog periods.
func expiryHealthHold(watchdog time.Duration) time.Duration {
	return max(time.Second, 2*watchdog)
}

// Expiries counts moving commands the stall guard zeroed between frames
// at their frame's stale moment while the newest cloud was still fresh:
// each ended with its image, older than its cloud. Safe for concurrent
// use.
func (p *Pipeline) Expiries() uint64 { return p.expiries.Load() }

// publishZeroIfBusyUntil publishes zero if the frame named by until is
// still running, checked under pubMu so that a frame that has just
// published its own command is not followed by a zero. busy is false when
// that frame has finished; err is the sink's.
func (p *Pipeline) publishZeroIfBusyUntil(until int64, now time.Time) (busy bool, err error) {
	p.pubMu.Lock()
	defer p.pubMu.Unlock()
	if p.busyUntil.Load() != until {
		return false, nil
	}
	p.zeroedUntil = until
	p.markLate(now)
	return true, p.publishLocked(planner.Zero(), now)
}

// Stalls counts frames whose stages outlasted the watchdog timeout, each
// answered by a zero command from the stall guard. Safe for concurrent
// use.
func (p *Pipeline) Stalls() uint64 { return p.stalls.Load() }

// guardStalls publishes zero for each frame whose stages run past the
// point where it is older than the watchdog timeout (a timer armed for
// that moment when the stages start), retrying on each tick until the
// sink takes it, and logs the first stall of a run of them;
// when ctx ends it publishes zero at once, a hung stage or not. It stops when stop is closed. It touches only the sink (under
// pubMu) and atomics: the planner and watchdog belong to the pipeline
// goroutine, which resets the planner when its late frame publishes
// (zero: publishFrame).
func (p *Pipeline) guardStalls(ctx context.Context, stop <-chan struct{}) {
	t := time.NewTicker(p.cfg.Tick)
	defer t.Stop()
	// atStale fires just after the running frame's stale moment; the
	// ticker stays for retries of a zero the sink refused.
	atStale := time.NewTimer(time.Hour)
	atStale.Stop()
	defer atStale.Stop()
	timeout := p.cfg.Watchdog.Timeout()
	done := ctx.Done()
	var w stallWatch
	for {
		select {
		case <-stop:
			return
		case <-done:
			// Zero at once, a hung stage or not; publishFrame sends
			// nothing else from now on.
			done = nil
			p.publish(planner.Zero(), time.Now())
		case <-p.guardWake:
			until := p.busyUntil.Load()
			if until == 0 {
				until = p.cmdUntil.Load()
			}
			if until != 0 {
				atStale.Reset(max(time.Duration(until-monotime.Now()), 0) + staleMargin)
			}
		case <-atStale.C:
			p.checkStall(&w, timeout)
			p.expireCommand()
		case <-t.C:
			p.checkStall(&w, timeout)
			p.expireCommand()
		}
	}
}

// expireCommand publishes zero once the moving command in force outlives
// its frame's stale moment while no frame runs. Run's check does the same
// when its goroutine gets there; this one does not wait for it, should it
// be held up between frames. The next frame publishes zero and resets
// the planner (expired), which ramps from the command in force.
func (p *Pipeline) expireCommand() {
	until := p.cmdUntil.Load()
	if until == 0 || p.busyUntil.Load() != 0 || monotime.Now() <= until {
		return
	}
	p.pubMu.Lock()
	if p.cmdUntil.Load() != until || p.busyUntil.Load() != 0 {
		p.pubMu.Unlock()
		return // a frame published or started meanwhile
	}
	// Not the timer's own time: one that waited in the channel (this
	// process paused) would stamp the zero in the past.
	now := time.Now()
	cloudUntil := p.cmdCloudUntil.Load()
	err := p.publishLocked(planner.Zero(), now)
	if err == nil {
		p.expired = true
	}
	p.pubMu.Unlock()
	// The watchdog's own incident (no fresh cloud: the camera stopped, the
	// pipeline held up) explains a zero at the command's cloud's stale
	// moment. One before it came from the image. (Not asked of the
	// watchdog: its Check would start that incident here, on the guard,
	// with its log line.)
	if err != nil || monotime.Now() >= cloudUntil {
		return
	}
	// Logged once per run of them: as /healthz, a run ends when none came
	// for expiryHealthHold.
	hold := expiryHealthHold(p.cfg.Watchdog.Timeout())
	if prev := p.expiredAt.Swap(now.UnixNano()); prev == 0 || now.Sub(time.Unix(0, prev)) >= hold {
		p.log.Warn("cmd_vel zeroed between frames: the command ended with its frame's image, older than its cloud, before the next frame came (lower --pair-tolerance, or look at why images arrive late or frames far apart; counted in cmd_vel_expired_total, logged once per run of them)",
			zap.Duration("watchdog", p.cfg.Watchdog.Timeout()), zap.Duration("pair_tolerance", p.pairTolerance()))
	}
	p.expiries.Add(1)
}

// stallWatch is guardStalls' state between looks.
type stallWatch struct {
	zeroedFor  int64 // busyUntil of the frame whose zero the sink took
	countedFor int64 // busyUntil of the frame last counted as a stall
	logged     bool  // a stall was logged; no more lines until a look sees no stall
}

// checkStall is one look of guardStalls at the running frame: it
// publishes zero once the frame is past its stale moment.
func (p *Pipeline) checkStall(w *stallWatch, timeout time.Duration) {
	// Not the timer's own time: one that waited in the channel (this
	// process paused) would stamp the zero in the past.
	now := time.Now()
	until := p.busyUntil.Load()
	if until == 0 || monotime.Now() <= until {
		w.logged = false
		return
	}
	if until == w.zeroedFor {
		return
	}
	busy, err := p.publishZeroIfBusyUntil(until, now)
	if !busy {
		return // the frame finished meanwhile; it published (zero if late) itself
	}
	if err == nil {
		w.zeroedFor = until
	}
	if w.countedFor == until {
		return // a retry of a zero the sink refused
	}
	w.countedFor = until
	if !w.logged {
		w.logged = true // a run of slow frames: each counted, the first logged
		stage := "?"
		if names := p.cfg.Recorder.Stages(); int(p.stage.Load()) < len(names) {
			stage = names[p.stage.Load()]
		}
		p.log.Warn("pipeline stalled; cmd_vel zeroed until it recovers", zap.String("stage", stage),
			zap.Duration("running_for", time.Duration(monotime.Now()-p.busySince.Load())), zap.Duration("watchdog", timeout))
	}
	// Counted last: Stalls() > 0 means a zero was sent (or, if the
	// sink refused it, is being retried) and logged.
	p.stalls.Add(1)
}

// closed reports whether done (nil: never) is closed, without blocking.
func closed(done <-chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
		return false
	}
}

func pixelFormat(e handles.Encoding) infer.PixelFormat {
	switch e {
	case handles.EncodingRGB8:
		return infer.PixelRGB8
	case handles.EncodingBGR8:
		return infer.PixelBGR8
	case handles.EncodingMono8:
		return infer.PixelMono8
	case handles.EncodingRGBA8:
		return infer.PixelRGBA8
	case handles.EncodingBGRA8:
		return infer.PixelBGRA8
	}
	return 0
}
