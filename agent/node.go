package agent

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/zerohop/zerohop/camera"
	"github.com/zerohop/zerohop/handles/transport"
	"github.com/zerohop/zerohop/infer"
	"github.com/zerohop/zerohop/models"
	"github.com/zerohop/zerohop/pinned"
	"github.com/zerohop/zerohop/planner"
	"github.com/zerohop/zerohop/telemetry"
	"github.com/zerohop/zerohop/telemetry/status"
	"github.com/zerohop/zerohop/voxel"
)

// NodeConfig is everything the agent process is configured with.
type NodeConfig struct {
	// Camera "" subscribes to a camera process over Socket; "synthetic" or
	// "replay:DIR" runs the camera source in this process (composed mode).
	Camera string
	Socket string
	// Transport is "unix" (zero-copy, default) or "copy" (the benchmark
	// baseline: payloads through stream sockets SOCKET.points/.image).
	Transport   string
	Name        string
	Spin        bool
	Model       string // ONNX file; "" = the embedded reference model
	ModelConfig string // JSON; "" = the reference model's config
	// LidarOnly runs on LiDAR clouds alone, for robots without a camera:
	// images are neither subscribed to nor waited for. Without Model it
	// picks the embedded LiDAR-only reference model (and its config);
	// a model config with an image input is refused. A model config
	// without an image input runs LiDAR-only without it too.
	LidarOnly bool
	// PlanarLidar: the robot's LiDAR is a planar (2D) laser scanner, its
	// clouds marked so (bin/camera --planar-lidar, --ros2-scan-topic);
	// clouds not marked are dropped (Config.PlanarLidar). Without Model
	// it picks the embedded planar-LiDAR reference model, which takes
	// every point of a scan for an obstacle and no image; the ground
	// check is off.
	PlanarLidar bool
	// PairTolerance is how far apart in capture time a cloud and its
	// image may be, and so how long a cloud waits for its image at most;
	// 0: DefaultPairTolerance, or half the watchdog period when that is
	// less (PairToleranceFor). At most half the watchdog period; not used
	// by a model without an image input.
	PairTolerance time.Duration
	// Pairing, if set, is PairTolerance as it may change while the agent
	// runs (ros2 param set pair_tolerance); made from PairTolerance when
	// nil.
	Pairing   *PairTuning
	ORTLib    string
	Providers string
	TRTCache  string
	Threads   int // ONNX Runtime intra-op threads
	// PrepThreads share the image preprocessing of a frame (row bands);
	// 0: min(GOMAXPROCS, infer.DefaultPreprocessParallelism).
	PrepThreads int
	Leaf        float32
	MinPoints   int
	// LidarHeight is the height of the point cloud frame's origin above
	// the ground, in metres: the LiDAR's mounting height when clouds come
	// in the sensor's own frame, as drivers and KITTI give them (1.73 for
	// KITTI); 0 for clouds in a robot frame with its origin on the ground
	// (the synthetic scene). The BEV measures heights from the ground, so
	// with this wrong an obstacle lower than the sensor reads as flat.
	LidarHeight float32
	// MaxObstacleHeight, if set, is the robot's height: points more than
	// this above the ground (a ceiling, an overhang the robot passes
	// under) are left out before the voxel filter, so they mark no cell.
	// 0: none left out (up to 1000 m), as outdoors.
	MaxObstacleHeight float32
	// LidarXY and LidarRPY place the point cloud frame's origin on the
	// robot: x ahead of and y left of the robot's origin, in metres, and
	// its roll, pitch and yaw in radians: the transform from the robot's
	// frame on the ground (base_footprint, REP-105) to the LiDAR's, as
	// `tf2_echo base_footprint <lidar frame>` prints it, with LidarHeight
	// as its z. The BEV is drawn in the robot frame, so a LiDAR pitched
	// down 8° without LidarRPY sees the road ahead rise into a wall; zero
	// for clouds already in the robot frame.
	LidarXY  [2]float64
	LidarRPY [3]float64
	// LidarFrame, if set, is the frame the mount is the transform to
	// (MountFromTF): clouds in another frame are dropped. LidarMountFrom
	// says where the mount came from, for the log and /diagnostics
	// ("/tf_static base_footprint→base_link→velodyne"); "" is the flags.
	LidarFrame     string
	LidarMountFrom string
	MaxPoints      int
	Watchdog       time.Duration
	// Planner holds the planner's settings (speed and acceleration
	// limits, stop and slow distances, …), which may change while the
	// agent runs; nil: the defaults, fixed.
	Planner *PlannerTuning
	// GPU is GPUAuto (default), GPUOn or GPUOff; GPUInput is
	// GPUInputMapped (default) or GPUInputCopy.
	GPU, GPUInput string
	// GPUSync is how a thread waiting for the GPU waits: "auto" (default,
	// the driver's choice: it spins), "spin", "yield" or "block" (sleeps;
	// no core spent waiting).
	GPUSync string
	// CubinCache holds the compiled voxel kernels; "" is
	// gpu.DefaultCubinCacheDir().
	CubinCache string
	HTTP       string
	// Pprof serves /debug/pprof/ on an HTTP address other machines can
	// reach too; on loopback it is always served.
	Pprof bool
	// Listener, if set, is used instead of listening on HTTP (tests).
	Listener net.Listener
	// Duration stops the agent after this long (0: until ctx is done).
	Duration time.Duration
	// Rate of the in-process camera (composed mode).
	Rate float64
	// ReplayTiming and ReplaySpeed pace an in-process replay (Camera
	// "replay:DIR") as the camera process's --replay-timing and
	// --replay-speed do (camera.NodeConfig): "" is camera.ReplayTimingRate,
	// every frame at Rate; the agent's flag defaults to auto.
	ReplayTiming string
	ReplaySpeed  float64
	// Beams and AzimuthSteps size the in-process synthetic LiDAR (composed
	// mode); 0: the defaults (64 × 1800).
	Beams, AzimuthSteps int
	Sink                CmdSink // default: a LogSink
	// Status, if set, receives the node's status (diagnose): "starting
	// up" at once, then every StatusPeriod (default status.DefaultPeriod),
	// and every part STALE when the node stops. StatusNode is the node's
	// fully qualified ROS name (default "/zerohop_agent"), the statuses'
	// hardware_id and, without its leading '/', their names' start.
	// StatusStamp, if set, gives their header stamp for a time (the zero
	// time under a simulator's clock).
	Status       status.Sink
	StatusPeriod time.Duration
	StatusNode   string
	StatusStamp  func(time.Time) time.Time
	Log          *zap.Logger
}

// Bounds of NodeConfig fields that size memory or threads: a typo must be
// an error at start-up, not 1,500 threads or a 16 GiB pool.
const (
	maxMaxPoints  = 1 << 24 // 16 M points; a 128-beam LiDAR sweep is about 0.3 M
	maxORTThreads = 256
	// No robot's LiDAR sits 100 m up; a bigger value is a unit mix-up
	// (centimetres), and would raise the crop's z window off the scene.
	maxLidarHeightM = 100.0
	// minObstacleCeilingM is the lowest --max-obstacle-height: above the
	// reference model's obstacle height, 0.2 m.
	minObstacleCeilingM = 0.3
	// Nor 100 m from the robot's origin.
	maxLidarOffsetM = 100.0
	// Roll and yaw run from -π to π (π typed as 3.1416 included), pitch
	// from -π/2 to π/2, as tf2's getRPY gives every rotation: a larger
	// one is most likely degrees given for radians (a pitch of 3 meant
	// 3°, not 172°).
	maxLidarAngle = 3.1416
)

// RunNode builds the agent (model, filter, planner, watchdog, latency
// endpoint, frame source) and runs it until ctx is done. Any configuration
// or start-up error is returned before anything is served: no half-started
// service.
func RunNode(ctx context.Context, cfg NodeConfig) (err error) {
	log := cfg.Log
	if log == nil {
		log = zap.NewNop()
	}
	cfg, err = resolveNodeConfig(cfg)
	if err != nil {
		return err
	}
	statusStarted := false
	if cfg.Status != nil {
		// Loading a model, a JIT compile or a TensorRT engine build can take
		// minutes: say so at once, and say it if the start fails.
		label := statusLabel(cfg.StatusNode)
		publishOnce(cfg, log, status.Named(label, cfg.StatusNode, statusParts, status.OK, "starting up"))
		defer func() {
			if !statusStarted && err != nil {
				publishOnce(cfg, log, status.Named(label, cfg.StatusNode, statusParts, status.Error, "failed to start: "+err.Error()))
			}
		}()
	}
	if cfg.Duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.Duration)
		defer cancel()
	}
	// Listen before anything starts, so a taken port fails the start-up
	// before a model load (a TensorRT engine build can take minutes).
	ln := cfg.Listener
	if ln == nil {
		addr := orDefault(cfg.HTTP, telemetry.DefaultAddr)
		if ln, err = telemetry.Listen(ctx, addr); err != nil {
			return fmt.Errorf("--http %q: %w", addr, err)
		}
	}
	defer ln.Close()

	// Inference first: it is what most often fails to start.
	lib, err := infer.FindLibrary(cfg.ORTLib)
	if err != nil {
		return err
	}
	rt, err := infer.OpenRuntime(lib)
	if err != nil {
		return err
	}
	defer rt.Close()
	mcfg, err := modelConfig(cfg)
	if err != nil {
		return err
	}
	_, images := mcfg.Input(infer.TensorImage)
	providers, err := infer.ParseProviders(orDefault(cfg.Providers, infer.DefaultProviders))
	if err != nil {
		return err
	}
	// The GPU path before the session: the model's BEV input is then the
	// pinned buffer the kernels write.
	bevCfg, err := bevConfig(mcfg, lidarPoseOf(cfg))
	if err != nil {
		return err
	}
	if cfg.Model == "" && cfg.ModelConfig != "" {
		if err := describesTheReferenceModel(mcfg, referenceFor(cfg)); err != nil {
			return err
		}
	}
	gv, gpuName, gpuWhy, err := startGPU(cfg, bevCfg, log)
	if err != nil {
		return err
	}
	opts := infer.SessionOptions{Providers: providers, TensorRTCacheDir: cfg.TRTCache, IntraOpThreads: cfg.Threads}
	if gv != nil {
		// Closed last (deferred first): after the session, the camera and
		// the subscriber, which use its memory and registrations.
		defer gv.Close()
		opts.BEV = gv.bevF
	}
	var sess *infer.Session
	if ref := referenceFor(cfg); cfg.Model == "" {
		sess, err = infer.NewSessionFromBytes(rt, ref.file+" (embedded)", ref.onnx(), mcfg, opts)
	} else {
		sess, err = infer.NewSession(rt, cfg.Model, mcfg, opts)
	}
	if err != nil {
		return err
	}
	defer sess.Close()
	for _, s := range sess.Skipped() {
		log.Info("execution provider skipped", zap.String("provider", s.Name), zap.String("reason", s.Reason))
	}
	log.Info("model ready", zap.String("model", sess.Model()), zap.String("provider", sess.Provider()))
	if cfg.PlanarLidar && cfg.MinPoints > 1 {
		// A scan puts one return in most voxels of a thin obstacle.
		log.Warn("--min-points above 1 with --planar-lidar: a scan has one return in most voxels of a thin obstacle (a table leg, a pole), which the voxel filter then drops; 0 keeps them",
			zap.Int("min_points", cfg.MinPoints))
	}

	var prep *infer.Preprocessor
	if images {
		pp, err := mcfg.PreprocessParams()
		if err != nil {
			return err
		}
		if prep, err = infer.NewPreprocessor(pp, cfg.PrepThreads); err != nil {
			return err
		}
		defer prep.Close()
		log.Info("image preprocessing", zap.Int("threads", prep.Parallelism()),
			zap.Int("width", pp.Width), zap.Int("height", pp.Height),
			zap.Duration("pair_tolerance", cfg.Pairing.InForce()))
	} else {
		log.Info("LiDAR only: the model has no image input; images are neither taken nor waited for", zap.String("model", sess.Model()))
		if cfg.Pairing != nil { // given by the caller, for ros2 param set
			cfg.Pairing.notUsed("the model takes no image (--lidar-only, --planar-lidar, or a model config without an image input)")
		}
	}
	bev, err := voxel.NewBEV(bevCfg)
	if err != nil {
		return fmt.Errorf("%s: bev input: %w", mcfg.Source(), err)
	}
	if bev.Len() != len(sess.BEV()) {
		c := bev.Config()
		return fmt.Errorf("model %s: BEV input has %d values, the raster %d (3×%d×%d, from %s)", sess.Model(), len(sess.BEV()), bev.Len(), c.H, c.W, mcfg.Source())
	}
	bc := bev.Config()
	log.Info("BEV raster", zap.Int("rows", bc.H), zap.Int("cols", bc.W), zap.Float32("cell_m", bc.Cell),
		zap.Float32("ahead_m", bc.MinX+float32(bc.H)*bc.Cell), zap.Float32("wide_m", float32(bc.W)*bc.Cell),
		zap.Float32("min_x_m", bc.MinX), zap.Float32("max_height_m", bc.MaxHeight),
		zap.Float32("ground_z_m", bc.GroundZ), zap.String("from", mcfg.Source()))
	if m := bc.Mount; !m.IsIdentity() {
		const toDeg = 180 / math.Pi
		log.Info("LiDAR mount: clouds turned and moved into the robot frame before the BEV raster",
			zap.String("from", orDefault(cfg.LidarMountFrom, "flags")), zap.Float64("x_m", m.X), zap.Float64("y_m", m.Y), zap.Float32("height_m", 0-bc.GroundZ),
			zap.Float64("roll_deg", m.Roll*toDeg), zap.Float64("pitch_deg", m.Pitch*toDeg), zap.Float64("yaw_deg", m.Yaw*toDeg))
	}
	fcfg, err := filterConfig(cfg, bevCfg)
	if err != nil {
		return err
	}
	if cfg.MaxObstacleHeight > 0 {
		log.Info("points higher than the robot are left out (a ceiling, an overhang it passes under)", zap.Float32("max_obstacle_height_m", cfg.MaxObstacleHeight),
			zap.Bool("per_point", fcfg.Ceiling != nil))
	}
	filter, err := voxel.NewFilter(fcfg, cfg.MaxPoints)
	if err != nil {
		return err
	}
	defer filter.Close()
	pc := cfg.Planner.Config()
	pc.SectorHeadingsDeg = mcfg.SectorHeadingsDeg
	plan, err := planner.New(pc)
	if err != nil {
		return err
	}
	logPlannerSettings(log, "planner", pc)
	warnBraking(log, pc)
	if plan.Sectors() != len(sess.Scores()) {
		return fmt.Errorf("model %s: %d sector scores, the planner has %d sectors", sess.Model(), len(sess.Scores()), plan.Sectors())
	}
	wd, err := planner.NewWatchdog(planner.WatchdogConfig{
		Timeout: cfg.Watchdog,
		IsNonFinite: func(err error) bool {
			return errors.Is(err, infer.ErrNonFinite) || errors.Is(err, planner.ErrNonFinite)
		},
		OnIncident: func(i planner.Incident) {
			log.Warn("watchdog: cmd_vel zeroed", zap.String("reason", i.Reason.String()), zap.String("detail", i.Detail))
		},
		OnRecover: func(i planner.Incident) {
			log.Info("watchdog: commands resume", zap.String("after", i.Reason.String()), zap.Duration("zeroed_for", i.End.Sub(i.Start)))
		},
	})
	if err != nil {
		return err
	}
	rec, err := telemetry.New(telemetry.Options{})
	if err != nil {
		return err
	}
	rec.SetProvider(sess.Provider())
	_ = rec.SetLabel(telemetry.LabelInputs, inputsLabel(images, cfg.PlanarLidar))
	for _, sk := range sess.Skipped() {
		// One gauge per skipped provider; its help text carries the reason.
		reason := strings.Join(strings.Fields(sk.Reason), " ")
		if err := rec.AddGaugeFunc("execution_provider_skipped_"+sk.Name, sk.Name+" skipped: "+reason, func() float64 { return 1 }); err != nil {
			log.Warn("metrics: skipped provider", zap.Error(err))
		}
	}
	rec.SetGPU(gpuName)
	if gv != nil {
		_ = rec.SetLabel(telemetry.LabelGPUKernels, gv.filter.Target())
	}
	var pinner pinned.Pinner
	var allocator pinned.HostAllocator
	if gv != nil {
		log.Info("voxel filter and BEV on the GPU", zap.String("gpu", gpuName),
			zap.String("input", orDefault(cfg.GPUInput, GPUInputMapped)), zap.String("sync", orDefault(cfg.GPUSync, "auto")), zap.String("kernels_for", gv.filter.Target()),
			zap.Bool("cubin_cached", gv.filter.Timing().CacheHit))
		pinner = &bestEffortPinner{pinner: gv.ctx, report: func(err error) {
			log.Warn("GPU registration of a camera pool failed; its frames are copied into pinned memory for the GPU (one CPU copy each)", zap.Error(err))
		}}
		allocator = &bestEffortAllocator{gpu: gv.ctx, fallback: pinned.AnonymousMemory(), report: func(err error) {
			log.Warn("pinned GPU memory for the in-process camera failed; its frames are copied into pinned memory for the GPU (one CPU copy each)", zap.Error(err))
		}}
	} else {
		log.Info("voxel filter and BEV on the CPU", zap.String("gpu", gpuName), zap.String("why", gpuWhy))
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var bg []<-chan error
	goRun := func(f func() error) {
		ch := make(chan error, 1)
		bg = append(bg, ch)
		go func() { ch <- f() }()
	}
	// What the background goroutines use (the in-process camera's pools,
	// the transport) is closed only after they have stopped: a deferred
	// Close here would run first and free a pool the camera is filling.
	var closeAfterBG []func()
	defer func() {
		cancel()
		for _, ch := range bg {
			<-ch
		}
		for i := len(closeAfterBG) - 1; i >= 0; i-- {
			closeAfterBG[i]()
		}
	}()

	// Frame source.
	var src FrameSource
	// The frame source's end, if it ends first (the copy transport, the
	// in-process camera): the agent stops with it rather than sit on zero
	// cmd_vel for good.
	sourceErr := make(chan error, 1)
	// The camera's refusal of this agent (its uid, topics it lacks) ends
	// the agent with that error: a supervisor restarting on failure must
	// see one, and retrying would only be refused again.
	refused := make(chan error, 1)
	switch {
	case cfg.Camera == "" && cfg.Transport == "copy":
		var subs []*transport.CopySubscriber
		for i := range streams(images) {
			dialCtx := ctx
			if i == TopicImage {
				// The camera opens both sockets at once: with the points
				// one up, an image one that stays missing is a camera
				// without images, not one still starting.
				var cancelDial context.CancelFunc
				dialCtx, cancelDial = context.WithTimeout(ctx, copyImageDialTimeout)
				defer cancelDial()
			}
			sub, err := transport.DialCopy(dialCtx, cfg.Socket+"."+camera.TopicName(i), 16<<20)
			if err != nil {
				for _, s := range subs {
					s.Close()
				}
				if i == TopicImage && ctx.Err() == nil {
					return fmt.Errorf("--transport copy: %s.%s did not appear within %v of %s.%s: %s (%w)", cfg.Socket, camera.ImageTopicName,
						copyImageDialTimeout, cfg.Socket, camera.PointsTopicName, camera.NoImageWhy, err)
				}
				return err
			}
			subs = append(subs, sub)
		}
		cs := transport.NewCopySource(subs...)
		src = cs
		rec.SetHandoff("copy")
		goRun(func() error {
			// The copy baseline does not reconnect: a camera that goes
			// away ends the agent with the error (restarted by its
			// supervisor) rather than leaving it on zero cmd_vel for good.
			if err := cs.Run(ctx); err != nil {
				sourceErr <- fmt.Errorf("copy transport ended (it does not reconnect; restart the agent): %w", err)
				cancel()
			}
			return nil
		})
	case cfg.Camera == "":
		sub, err := transport.NewSubscriber(transport.SubscriberConfig{
			Path: cfg.Socket, Name: orDefault(cfg.Name, "agent"),
			Topics: []string{camera.PointsTopicName, camera.ImageTopicName}[:streams(images)], Spin: cfg.Spin, Log: log,
			Pinner: pinner,
		})
		if err != nil {
			return err
		}
		src = sub
		if cfg.Spin {
			rec.SetHandoff("rings") // the subscriber asks the camera for handle rings
		} else {
			rec.SetHandoff("socket")
		}
		goRun(func() error {
			err := sub.Run(ctx)
			if errors.Is(err, transport.ErrRefused) {
				refused <- err
				cancel()
			}
			return nil
		})
		rec.AddGaugeFunc("camera_connected", "1 while connected to the camera.", func() float64 {
			if sub.Connected() {
				return 1
			}
			return 0
		})
	default:
		ncfg := camera.NodeConfig{Rate: cfg.Rate, Loop: true, ReplayTiming: cfg.ReplayTiming, ReplaySpeed: cfg.ReplaySpeed,
			Beams: cfg.Beams, AzimuthSteps: cfg.AzimuthSteps, NoImage: !images, PlanarLidar: cfg.PlanarLidar, Log: log}
		source, err := camera.OpenSource(ctx, "--camera", cfg.Camera, ncfg)
		if err != nil {
			return err
		}
		sched, err := camera.ReplaySchedule(source, ncfg, log)
		if err != nil {
			return fmt.Errorf("--camera %s: %w", cfg.Camera, err)
		}
		cam, err := camera.New(camera.Config{Source: source, Schedule: sched, PlanarLidar: cfg.PlanarLidar, Rate: cfg.Rate, Subscribers: 1, Allocator: allocator, Log: log})
		if err != nil {
			return err
		}
		if period := cam.FramePeriod(); period > wd.Timeout() {
			log.Warn("the in-process camera's frames come further apart than the watchdog period: cmd_vel is zeroed between frames and /healthz reads 503 (raise --rate, --replay-speed or --watchdog)",
				zap.Duration("frame_period", period), zap.Duration("watchdog", wd.Timeout()))
		}
		closeAfterBG = append(closeAfterBG, func() { cam.Close() })
		var topics []transport.Topic
		for i := range streams(images) {
			if cam.Pool(i) == nil {
				hint := ""
				if i == TopicImage {
					hint = ": for a robot without a camera run with --lidar-only (its model takes no image)"
				}
				return fmt.Errorf("--camera %s: the source has no %s stream, which the model needs%s", cfg.Camera, camera.TopicName(i), hint)
			}
			topics = append(topics, transport.Topic{Name: camera.TopicName(i), Kind: camera.Kind(i), Pool: cam.Pool(i)})
		}
		inproc, err := transport.NewInproc(transport.InprocConfig{Topics: topics})
		if err != nil {
			return err
		}
		closeAfterBG = append(closeAfterBG, func() { inproc.Close() })
		src = inproc
		rec.SetHandoff("inproc")
		for i, t := range topics {
			pool := t.Pool
			rec.AddGaugeFunc("pool_in_use_"+camera.TopicName(i), "Slots in use in the in-process camera's "+camera.TopicName(i)+" pool.", func() float64 { return float64(pool.InUse()) })
		}
		goRun(func() error {
			if err := cam.Run(ctx, inproc); err != nil {
				sourceErr <- fmt.Errorf("--camera %s: the in-process camera stopped: %w", cfg.Camera, err)
				cancel()
			}
			return nil
		})
	}

	sink := cfg.Sink
	if sink == nil {
		sink = &LogSink{Log: log}
	}
	pcfg := Config{Source: src, Filter: filter, BEV: bev, Session: sess, Prep: prep, Planner: plan,
		Tuning: cfg.Planner, Watchdog: wd, Recorder: rec, Sink: sink, MaxPoints: cfg.MaxPoints, LidarFrame: cfg.LidarFrame, PlanarLidar: cfg.PlanarLidar,
		PairTolerance: cfg.PairTolerance, Pairing: cfg.Pairing, Log: log}
	var staging *stagingCounter
	if gv != nil {
		staging = &stagingCounter{filter: gv.filter}
		pcfg.GPU, pcfg.GPUBEV = staging, gv.bev
	}
	pipe, err := New(pcfg)
	if err != nil {
		return err
	}
	// Always there, as its siblings gpu_voxel_failures_total and
	// gpu_voxel_oversize_total are: 0 on the CPU path.
	if err := rec.AddCounterFunc("gpu_voxel_staged_total", "Clouds the GPU filtered after one CPU copy into pinned memory, as their camera pool could not be registered with the GPU (0 when the GPU reads every slot in place, and on the CPU path).",
		func() float64 {
			if staging == nil {
				return 0
			}
			return float64(staging.staged.Load())
		}); err != nil {
		log.Warn("metrics: gpu staged", zap.Error(err))
	}
	if err := rec.AddCounterFunc("pipeline_stalls_total", "Frames that became older than the watchdog period while their stages ran (each answered by a zero cmd_vel from the stall guard).",
		func() float64 { return float64(pipe.Stalls()) }); err != nil {
		log.Warn("metrics: stalls", zap.Error(err))
	}
	if err := rec.AddCounterFunc("cmd_vel_expired_total", "Moving cmd_vel zeroed between frames at their frame's stale moment while the newest cloud was still fresh: the command ended with its image, which paired up to --pair-tolerance older than its cloud, before the next frame came (/healthz answers 503 for a while after each).",
		func() float64 { return float64(pipe.Expiries()) }); err != nil {
		log.Warn("metrics: expired", zap.Error(err))
	}
	// The limits in force: ros2 param set changes them while it runs.
	if err := rec.AddGaugeFunc("planner_max_speed_mps", "The planner's forward speed limit of cmd_vel, m/s (--max-speed; ros2 param set max_speed changes it while the agent runs).",
		func() float64 { return pipe.PlannerConfig().MaxSpeed }); err != nil {
		log.Warn("metrics: max speed", zap.Error(err))
	}
	if err := rec.AddGaugeFunc("planner_max_yaw_rate_radps", "The planner's limit of |angular.z|, rad/s (--max-yaw-rate; ros2 param set max_yaw_rate).",
		func() float64 { return pipe.PlannerConfig().MaxYawRate }); err != nil {
		log.Warn("metrics: max yaw rate", zap.Error(err))
	}
	if err := rec.AddGaugeFunc("ground_found_z_m", "The ground's z in metres under the LiDAR, levelled, relative to it (minus the LiDAR's height when the mount is right), as the once-a-second ground check last found it (its plane through the raster's tiles, else the 10th percentile of the heights of up to 512 of the raster's voxels; NaN before a check could judge); the BEV measures heights from minus --lidar-height.",
		pipe.GroundFoundZ); err != nil {
		log.Warn("metrics: ground found", zap.Error(err))
	}
	if err := rec.AddGaugeFunc("ground_tilt_deg", "The ground's tilt from level in the robot frame, in degrees, as the once-a-second ground check last found its plane (NaN before one): more than 1.5 on flat ground means --lidar-rpy is off (the log's suggested_lidar_rpy).",
		pipe.GroundTiltDeg); err != nil {
		log.Warn("metrics: ground tilt", zap.Error(err))
	}
	if err := rec.AddGaugeFunc("ground_mismatch", "1 while the ground check warns that the clouds' ground is more than 0.3 m from where the BEV measures heights from, or tilts more than 1.5° (five checks in a row; see the log's suggested_lidar_height_m and suggested_lidar_rpy), else 0.",
		func() float64 {
			if pipe.GroundMismatch() {
				return 1
			}
			return 0
		}); err != nil {
		log.Warn("metrics: ground mismatch", zap.Error(err))
	}
	if err := rec.AddCounterFunc("frames_unpaired_total", "Clouds dropped because no image was captured within --pair-tolerance of them (images and clouds on different clocks, a slow or stopped image stream); three in a row are logged with the offset.",
		func() float64 { return float64(pipe.Unpaired()) }); err != nil {
		log.Warn("metrics: unpaired", zap.Error(err))
	}
	if err := rec.AddCounterFunc("lidar_frame_mismatch_total", "Clouds dropped because their frame id is not the LiDAR frame whose mount came from /tf_static (--lidar-frame); the first is logged.",
		func() float64 { return float64(pipe.FrameMismatches()) }); err != nil {
		log.Warn("metrics: lidar frame mismatch", zap.Error(err))
	}
	if err := rec.AddCounterFunc("lidar_scan_mismatch_total", "Clouds dropped because they are a planar LiDAR's scans and the agent takes 3D clouds, or the other way round (--planar-lidar); the first is logged.",
		func() float64 { return float64(pipe.ScanMismatches()) }); err != nil {
		log.Warn("metrics: lidar scan mismatch", zap.Error(err))
	}
	if err := rec.AddCounterFunc("gpu_voxel_failures_total", "GPU voxel filter failures (the first one moves voxel and BEV to the CPU).",
		func() float64 { return float64(pipe.GPUFailures()) }); err != nil {
		log.Warn("metrics: gpu failures", zap.Error(err))
	}
	if err := rec.AddCounterFunc("cmd_vel_publish_failures_total", "cmd_vel commands the sink (log or ROS 2) failed to send; the first of a run, and each new error, is logged.",
		func() float64 { return float64(pipe.PublishFailures()) }); err != nil {
		log.Warn("metrics: publish failures", zap.Error(err))
	}
	if err := rec.AddGaugeFunc("cmd_vel_zeroed", "1 while commands do not get through, when /healthz answers 503: cmd_vel held at zero by the watchdog (no fresh frame, a failed stage, a blind LiDAR) or because frames take longer than the watchdog period to process, or commands expiring between frames (cmd_vel_expired_total), or the sink failing to send (a zero the planner chose, to stop for an obstacle, is 0).",
		func() float64 {
			if pipe.Health(time.Now()) != nil {
				return 1
			}
			return 0
		}); err != nil {
		log.Warn("metrics: cmd_vel zeroed", zap.Error(err))
	}
	for _, m := range []struct {
		name, help string
		count      func(planner.IncidentCounts) uint64
	}{
		{"watchdog_stale_incidents_total", "Periods cmd_vel was zeroed because no fresh frame arrived within the watchdog period (frames stopped, or came too old or too far ahead of this clock).",
			func(c planner.IncidentCounts) uint64 { return c.Stale }},
		{"watchdog_stage_failure_incidents_total", "Periods cmd_vel was zeroed because a stage failed (until a newer frame).",
			func(c planner.IncidentCounts) uint64 { return c.StageFailure }},
		{"watchdog_non_finite_incidents_total", "Periods cmd_vel was zeroed because a stage produced NaN or Inf (until a newer frame).",
			func(c planner.IncidentCounts) uint64 { return c.NonFinite }},
	} {
		if err := rec.AddCounterFunc(m.name, m.help, func() float64 { return float64(m.count(wd.Counts())) }); err != nil {
			log.Warn("metrics: watchdog incidents", zap.Error(err))
		}
	}
	if err := rec.AddCounterFunc("gpu_voxel_oversize_total", "Clouds too large for the GPU input buffer (a wide point step, copied or staged), filtered on the CPU; the GPU path stays.",
		func() float64 { return float64(pipe.GPUOversize()) }); err != nil {
		log.Warn("metrics: gpu oversize", zap.Error(err))
	}

	noPprof := !cfg.Pprof && !telemetry.Loopback(ln.Addr())
	web, err := telemetry.NewServer(rec, telemetry.ServerOptions{NoPprof: noPprof, LoopbackHostsOnly: telemetry.Loopback(ln.Addr()),
		Health: func() error { return pipe.Health(time.Now()) }})
	if err != nil {
		return err
	}
	if noPprof {
		log.Info("/debug/pprof/ is not served on an address other machines can reach (--pprof serves it)", zap.String("http", ln.Addr().String()))
	}
	log.Info("latency endpoint", zap.String("url", "http://"+ln.Addr().String()+"/"))
	goRun(func() error {
		// The pipeline runs on without it: commands still go out, and
		// the watchdog still stops the robot; say that the endpoint died.
		err := web.ServeListener(ctx, ln)
		if err != nil && ctx.Err() == nil {
			log.Error("latency endpoint stopped: /latency, /metrics and /healthz are no longer served (a health check will call this agent dead)", zap.Error(err))
		}
		return err
	})
	if cfg.Status != nil {
		loop := statusLoop(cfg, wd.Timeout(), rec, pipe.Health, pipe.PlannerConfig)
		loop.Log = log
		statusStarted = true // the loop says the rest, STALE at the end
		goRun(func() error { return loop.Run(ctx) })
	}

	err = pipe.Run(ctx)
	select {
	case cerr := <-sourceErr:
		return errors.Join(cerr, err)
	case rerr := <-refused:
		return errors.Join(rerr, err)
	default:
		return err
	}
}

// CheckNodeConfig reports the first setting of cfg that RunNode would
// refuse before starting anything, naming its flag: for a caller that has
// slow work of its own to do first (a ROS 2 participant).
func CheckNodeConfig(cfg NodeConfig) error {
	_, err := resolveNodeConfig(cfg)
	return err
}

// resolveNodeConfig applies the defaults and checks every setting that
// can be checked without starting anything: a typo in a flag must not wait
// for the model, a JIT compile or a TensorRT engine build to be reported.
func resolveNodeConfig(cfg NodeConfig) (NodeConfig, error) {
	if cfg.MaxPoints == 0 {
		cfg.MaxPoints = 500_000
	}
	if cfg.Leaf == 0 {
		cfg.Leaf = 0.2
	}
	if cfg.StatusNode == "" {
		cfg.StatusNode = "/zerohop_agent"
	}
	if cfg.StatusPeriod == 0 {
		cfg.StatusPeriod = status.DefaultPeriod
	}
	if cfg.Planner == nil {
		cfg.Planner = NewPlannerTuning()
	}
	if err := cfg.Planner.Check(); err != nil {
		return cfg, err
	}
	if _, _, _, err := gpuModes(cfg); err != nil {
		return cfg, err
	}
	if _, err := infer.ParseProviders(orDefault(cfg.Providers, infer.DefaultProviders)); err != nil {
		return cfg, fmt.Errorf("--providers: %w", err)
	}
	switch {
	case cfg.Duration < 0:
		return cfg, fmt.Errorf("--duration %v: want 0 (until SIGINT/SIGTERM) or a positive duration", cfg.Duration)
	case cfg.MaxPoints < 0 || cfg.MaxPoints > maxMaxPoints:
		return cfg, fmt.Errorf("--max-points %d: want 1 to %d (0: the default, 500000)", cfg.MaxPoints, maxMaxPoints)
	case cfg.Threads < 0 || cfg.Threads > maxORTThreads:
		return cfg, fmt.Errorf("--ort-threads %d: want 1 to %d (0: ONNX Runtime's default)", cfg.Threads, maxORTThreads)
	// A leaf below a millimetre overflows the voxel grid of any real cloud:
	// every frame would fail and cmd_vel stay zero. NaN fails the test too.
	case !(cfg.Leaf >= 0.001 && cfg.Leaf <= 100):
		return cfg, fmt.Errorf("--leaf %g: want 0.001 to 100 metres", cfg.Leaf)
	case !(cfg.LidarHeight >= 0 && cfg.LidarHeight <= maxLidarHeightM):
		return cfg, fmt.Errorf("--lidar-height %g: want 0 (clouds in the robot frame, origin on the ground) to %g metres", cfg.LidarHeight, maxLidarHeightM)
	// Under the reference model's obstacle height (0.2 m) it would leave
	// every obstacle out.
	case cfg.MaxObstacleHeight != 0 && !(cfg.MaxObstacleHeight >= minObstacleCeilingM && cfg.MaxObstacleHeight <= maxLidarHeightM):
		return cfg, fmt.Errorf("--max-obstacle-height %g: want 0 (none: nothing left out for its height) or the robot's height, %g to %g metres", cfg.MaxObstacleHeight, minObstacleCeilingM, maxLidarHeightM)
	case !(math.Abs(cfg.LidarXY[0]) <= maxLidarOffsetM && math.Abs(cfg.LidarXY[1]) <= maxLidarOffsetM):
		return cfg, fmt.Errorf("--lidar-xy %g,%g: want -%g to %g metres each (0,0: the clouds' origin above the robot's)", cfg.LidarXY[0], cfg.LidarXY[1], maxLidarOffsetM, maxLidarOffsetM)
	case !(math.Abs(cfg.LidarRPY[0]) <= maxLidarAngle && math.Abs(cfg.LidarRPY[1]) <= maxLidarAngle/2 && math.Abs(cfg.LidarRPY[2]) <= maxLidarAngle):
		r := cfg.LidarRPY
		const toDeg = 180 / math.Pi
		return cfg, fmt.Errorf("--lidar-rpy %g,%g,%g (radians; in degrees %.4g,%.4g,%.4g): want roll and yaw -π to π, pitch -π/2 to π/2, as tf2 gives them (write degrees as 8deg)",
			r[0], r[1], r[2], r[0]*toDeg, r[1]*toDeg, r[2]*toDeg)
	case cfg.MinPoints < 0:
		return cfg, fmt.Errorf("--min-points %d: want 0 or more (0 and 1: every voxel with a point)", cfg.MinPoints)
	case cfg.PrepThreads < 0:
		return cfg, fmt.Errorf("--prep-threads %d: want 0 (one per core, at most %d) or more", cfg.PrepThreads, infer.DefaultPreprocessParallelism)
	case cfg.StatusPeriod < 0 || (cfg.StatusPeriod > 0 && cfg.StatusPeriod < 10*time.Millisecond) || cfg.StatusPeriod > time.Hour:
		return cfg, fmt.Errorf("--diagnostics-period %v: want 10ms to 1h", cfg.StatusPeriod)
	case cfg.Watchdog < 0 || (cfg.Watchdog > 0 && cfg.Watchdog < time.Millisecond) || cfg.Watchdog > time.Hour:
		return cfg, fmt.Errorf("--watchdog %v: want 1ms to 1h (0: the default, %v)", cfg.Watchdog, planner.DefaultWatchdogTimeout)
	case cfg.Transport != "" && cfg.Transport != "unix" && cfg.Transport != "copy":
		return cfg, fmt.Errorf(`--transport %q: want "unix" or "copy"`, cfg.Transport)
	}
	// The model config too (a small file, not the model): a typo in it,
	// or --lidar-only against an image input, must not wait for the
	// /tf_static wait or the model load to be reported.
	mcfg, err := modelConfig(cfg)
	if err != nil {
		return cfg, err
	}
	if cfg.Model == "" && cfg.ModelConfig != "" {
		if err := describesTheReferenceModel(mcfg, referenceFor(cfg)); err != nil {
			return cfg, err
		}
	}
	// A cloud waits up to the tolerance for its image, and its frame must
	// still be fresh when planned: half the watchdog period leaves the
	// stages the other half. A LiDAR-only model pairs nothing.
	_, images := mcfg.Input(infer.TensorImage)
	if cfg.Pairing == nil && images {
		if cfg.Pairing, err = NewPairTuning(cfg.PairTolerance, cfg.Watchdog); err != nil {
			return cfg, err
		}
	}
	if err := camera.CheckReplayTiming("--camera", cfg.Camera, cfg.ReplayTiming, cfg.ReplaySpeed); err != nil {
		return cfg, err
	}
	if cfg.Camera == "" {
		return cfg, nil
	}
	if cfg.Rate != 0 {
		if err := camera.CheckRate(cfg.Rate); err != nil {
			return cfg, fmt.Errorf("--rate: %w (0: the default, 30)", err)
		}
	}
	return cfg, camera.CheckSource("--camera", cfg.Camera)
}

// lidarPose is where --lidar-height, --lidar-xy and --lidar-rpy put the
// clouds' frame on the robot.
type lidarPose struct {
	height float32
	mount  voxel.Mount // x, y and the angles; the height stays in GroundZ
}

func lidarPoseOf(cfg NodeConfig) lidarPose {
	return lidarPose{height: cfg.LidarHeight, mount: voxel.Mount{X: cfg.LidarXY[0], Y: cfg.LidarXY[1],
		Roll: cfg.LidarRPY[0], Pitch: cfg.LidarRPY[1], Yaw: cfg.LidarRPY[2]}}
}

// bevConfig is the BEV raster the model's bev input describes: H × W
// cells (its shape [1, 3, H, W]) of cell_m metres, its bottom edge at
// min_x_m, heights capped at max_height_m; the robot at the bottom
// centre (y = 0 between the middle columns), the clouds turned and moved
// by the LiDAR's mount and the ground its height below their origin
// (GroundZ = −height, so that the ground check's heights stay the
// clouds' own when the LiDAR is level). A config without a bev input is
// refused: the agent feeds every model the cloud.
func bevConfig(m infer.ModelConfig, lidar lidarPose) (voxel.BEVConfig, error) {
	in, ok := m.Input(infer.TensorBEV)
	if !ok {
		return voxel.BEVConfig{}, fmt.Errorf("%s: no input with tensor %q: the agent gives every model the LiDAR's bird's-eye view", m.Source(), infer.TensorBEV)
	}
	cell, capM := in.CellSizeM(), in.HeightCapM()
	c := voxel.BEVConfig{H: int(in.Shape[2]), W: int(in.Shape[3]), Cell: float32(cell),
		MinX: float32(in.MinXM), MaxHeight: float32(capM), GroundZ: 0 - lidar.height, // 0 - 0 is +0, which logs as 0 (-0 as "-0")
		Mount: lidar.mount}
	_, err := voxel.NewBEV(c)
	switch {
	case err != nil:
	case !(cell >= minBEVCellM && cell <= maxBEVCellM):
		err = fmt.Errorf("cell_m %v: want %g to %g m", cell, minBEVCellM, maxBEVCellM)
	// As the cell: float32 rounds a tinier cap to 0, voxel.BEV's default.
	case !(capM >= minBEVCellM):
		err = fmt.Errorf("max_height_m %v: want %g m or more (0 or left out: %g)", capM, minBEVCellM, infer.DefaultBEVMaxHeightM)
	}
	if err != nil {
		return voxel.BEVConfig{}, fmt.Errorf("%s: bev input %q: %w", m.Source(), in.Name, err)
	}
	return c, nil
}

// describesTheReferenceModel refuses a --model-config given for the
// embedded reference model (no --model) that describes another model: a
// raster, image normalisation or sector headings other than those the
// reference model was built with (models/MODEL_CARD.md). ONNX Runtime
// checks the names and shapes, but none of these: the model would run
// and plan from data it misreads (with min_x_m -12.8, say, its rows in
// front of the robot would hold what lies behind it, and it would drive
// into what is ahead). embedded is the embedded model the agent runs.
func describesTheReferenceModel(m infer.ModelConfig, embedded referenceModel) error {
	ref := embedded.config()
	_, refImages := ref.Input(infer.TensorImage)
	if _, images := m.Input(infer.TensorImage); !images && refImages {
		return fmt.Errorf("%s has no image input, and the embedded reference model takes one: --lidar-only runs its LiDAR-only variant, --planar-lidar the planar-LiDAR one (models/MODEL_CARD.md)", m.Source())
	}
	got, err := bevConfig(m, lidarPose{})
	if err != nil {
		return err
	}
	want, err := bevConfig(ref, lidarPose{})
	if err != nil {
		return err
	}
	// Both have an image input, or neither (modelConfig refused one with
	// --lidar-only).
	var gotPP, wantPP infer.PreprocessParams
	if _, images := m.Input(infer.TensorImage); images {
		if gotPP, err = m.PreprocessParams(); err != nil {
			return err
		}
		if wantPP, err = ref.PreprocessParams(); err != nil {
			return err
		}
	}
	var what string
	switch {
	case got != want:
		what = fmt.Sprintf("a bev raster of %d × %d cells of %g m from x = %g m, heights to %g m, where it takes %d × %d cells of %g m from x = %g m, heights to %g m",
			got.H, got.W, got.Cell, got.MinX, got.MaxHeight, want.H, want.W, want.Cell, want.MinX, want.MaxHeight)
	case gotPP != wantPP:
		what = fmt.Sprintf("image preprocessing %+v, where it takes %+v", gotPP, wantPP)
	case !slices.Equal(m.SectorHeadingsDeg, ref.SectorHeadingsDeg):
		what = fmt.Sprintf("sector_headings_deg %v, where its outputs are for %v", m.SectorHeadingsDeg, ref.SectorHeadingsDeg)
	default:
		return nil
	}
	return fmt.Errorf("%s describes %s for the embedded %s (models/MODEL_CARD.md): give the model it describes with --model, or leave --model-config out", m.Source(), what, embedded.name)
}

// referenceModel is one of the embedded reference models.
type referenceModel struct {
	file   string // its name in models/
	name   string // what errors call it
	onnx   func() []byte
	config func() infer.ModelConfig
}

// referenceFor is the embedded model the agent runs without --model: the
// planar-LiDAR one with --planar-lidar (it takes no image), the
// LiDAR-only one with --lidar-only, else the camera+LiDAR one.
func referenceFor(cfg NodeConfig) referenceModel {
	switch {
	case cfg.PlanarLidar:
		return referenceModel{"reference_scan.onnx", "planar-LiDAR reference model", models.ReferenceScanONNX, infer.ReferenceScanConfig}
	case cfg.LidarOnly:
		return referenceModel{"reference_lidar.onnx", "LiDAR-only reference model", models.ReferenceLidarONNX, infer.ReferenceLidarConfig}
	}
	return referenceModel{"reference.onnx", "reference model", models.ReferenceONNX, infer.ReferenceConfig}
}

// The BEV cell sizes the agent takes, as --leaf's range: below a
// millimetre a float32 cell edge loses the raster's far rows to rounding
// (and 0 would mean the default), above 100 m one cell is the whole scene.
const (
	minBEVCellM = 0.001
	maxBEVCellM = 100.0
)

// filterConfig is the voxel filter's configuration, on the CPU and the
// GPU alike: --leaf and --min-points, and cropped to what the BEV raster
// (bevCfg, the model's only view of the cloud) can see
// (voxel.BEV.CropFor), so that points far outside it are not sorted, and
// a garbage point far away (FLT_MAX for "no return") cannot fail every
// frame with a grid too large. Voxel tops are measured in the raster's
// robot frame (its Mount), which BEV.Fill checks.
func filterConfig(cfg NodeConfig, bevCfg voxel.BEVConfig) (voxel.Config, error) {
	bev, err := voxel.NewBEV(bevCfg)
	if err != nil {
		return voxel.Config{}, err
	}
	leaf := [3]float32{cfg.Leaf, cfg.Leaf, cfg.Leaf}
	crop := bev.CropFor(leaf)
	var ceiling *float32
	if cfg.MaxObstacleHeight > 0 {
		var exact bool
		crop, exact = bev.CropUnder(leaf, cfg.MaxObstacleHeight)
		if !exact {
			// A mount that rolls or pitches tilts the ceiling in the
			// clouds' frame, where the box can only bound it: the
			// filter tests each point's robot-frame z instead. A level
			// mount's box top is the ceiling itself, at no cost per point.
			c := bevCfg.GroundZ + cfg.MaxObstacleHeight
			ceiling = &c
		}
	}
	return voxel.Config{Leaf: leaf, MinPoints: cfg.MinPoints, Crop: &crop, Mount: bevCfg.Mount, Ceiling: ceiling}, nil
}

// modelConfig is the model config the agent runs: --model-config's, else
// the embedded reference model's (its LiDAR-only variant's with
// --lidar-only). With --lidar-only it must have no image input.
func modelConfig(cfg NodeConfig) (infer.ModelConfig, error) {
	mcfg := referenceFor(cfg).config()
	if cfg.ModelConfig != "" {
		var err error
		if mcfg, err = infer.LoadConfig(cfg.ModelConfig); err != nil {
			return mcfg, fmt.Errorf("--model-config %s: %w", cfg.ModelConfig, err)
		}
	}
	in, ok := mcfg.Input(infer.TensorImage)
	switch {
	case ok && cfg.LidarOnly:
		return mcfg, fmt.Errorf("--lidar-only: %s has an image input %q, which no camera image would fill: a LiDAR-only model's config lists only its bev input (models/README.md)", mcfg.Source(), in.Name)
	case ok && cfg.PlanarLidar && cfg.Model == "":
		return mcfg, fmt.Errorf("--planar-lidar: %s has an image input %q, and the embedded planar-LiDAR reference model takes none (models/MODEL_CARD.md): give your own model with --model, or leave --model-config out", mcfg.Source(), in.Name)
	}
	return mcfg, nil
}

// copyImageDialTimeout is how long the copy baseline waits for the
// camera's image socket once its points socket answered.
const copyImageDialTimeout = 5 * time.Second

// streams is how many of the camera's streams (points, then image) the
// agent takes: the image only when the model has an image input.
func streams(images bool) int {
	if images {
		return 2
	}
	return 1
}

// inputsLabel is telemetry.LabelInputs's value: "lidar" or, for a planar
// LiDAR's scans, "scan", with "+camera" when images are taken too.
func inputsLabel(images, planar bool) string {
	l := "lidar"
	if planar {
		l = "scan"
	}
	if images {
		l += "+camera"
	}
	return l
}

func orDefaultDuration(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

func orDefault(s, def string) string {
	if strings.TrimSpace(s) == "" {
		return def
	}
	return s
}
