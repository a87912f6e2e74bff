// Command agent is the zerohop agent node: it takes slot handles from a
// camera, leases the slots, runs voxel filtering, inference and planning on
// the slot memory, and publishes cmd_vel. It only parses flags and wires
// packages together.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/zerohop/zerohop/agent"
	"github.com/zerohop/zerohop/camera"
	"github.com/zerohop/zerohop/handles/transport"
	"github.com/zerohop/zerohop/infer"
	"github.com/zerohop/zerohop/logging"
	"github.com/zerohop/zerohop/ros2/rosargs"
	"github.com/zerohop/zerohop/telemetry"
	"github.com/zerohop/zerohop/telemetry/status"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "agent:", err)
		os.Exit(1)
	}
}

// rosOptions says which flags hold what --ros-args changes.
var rosOptions = rosargs.Options{NodeName: "zerohop_agent", NodeNameFlag: "ros2-node-name", NamespaceFlag: "ros2-namespace", LogLevelFlag: "log-level",
	Aliases: map[string]string{"diagnostic_updater.period": "diagnostics-period"}}

func run(args []string) error {
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `Usage: agent [flags] [--ros-args ROS_ARGS [--]]

Leases camera images and LiDAR clouds from a zerohop camera (zero-copy, over
a unix socket) or runs a camera source in this process (--camera), and per
frame pair runs voxel filter → BEV raster → image preprocessing → ONNX model
→ planner, publishing cmd_vel. A watchdog zeroes cmd_vel when frames stop or
a stage fails. With --lidar-only (a robot without a camera) it takes the
clouds alone; with --planar-lidar (a 2D laser scanner) its scans.
Per-stage latency: http://<--http>/ (page), /latency (JSON), /metrics
(Prometheus), /healthz. With an NVIDIA GPU (its driver found at run
time) voxel filter and BEV run on it, reading the slot in place: kernels
compiled for the device by NVRTC when found ($ZEROHOP_NVRTC names one; "none":
never), else the embedded PTX, which the driver JIT-compiles. /latency's
voxel_path and gpu_kernels say where they run and what was loaded, and the
log says why when it is the CPU.

ROS arguments, as ros2 run and ros2 launch give them: -r FROM:=TO (topics),
-r __node:=NAME, -r __ns:=/NS, -p NAME:=VALUE and --params-file FILE (a
parameter sets the flag of its name: lidar_height sets --lidar-height; a
number for a duration is seconds), -e /ENCLAVE, --log-level LEVEL.

With --ros2, ros2 param set changes the planner's settings while the agent
drives (max_speed, max_yaw_rate, max_accel, max_decel, max_yaw_accel,
stop_distance, slow_distance, turn_in_place, heading_gain, smoothing,
min_score, tie_band; from the next frame on; a lowered limit caps the next
command at once) and log_level; the other flags are read at start.

Flags:
`)
		fs.PrintDefaults()
	}
	var (
		cfg           agent.NodeConfig
		leaf          float64
		lidarHeight   float64
		lidarXY       = numbersFlag{n: 2, unit: "metres"}
		lidarRPY      = numbersFlag{n: 3, unit: "radians", degrees: true}
		logLevel      string
		shutdownGrace time.Duration
	)
	fs.StringVar(&cfg.Camera, "camera", "", `run a camera source in this process instead of subscribing: "synthetic" or "replay:DIR" (DIR holds .bin/.pcd point files and .png/.jpg/.jpeg images, paired in name order, or is a KITTI sequence with velodyne/ and image_2/ or a KITTI raw drive with velodyne_points/data/ and image_02/data/; the replay always loops, the first frame following the last after the recording's median frame interval under recorded timing; --replay-timing paces it)`)
	fs.Float64Var(&cfg.Rate, "rate", 30, "frame rate in Hz of the in-process camera, 0.001 to 10000 (0: 30; --camera); a replay with recorded timing (--replay-timing) is paced by its timestamps instead")
	fs.StringVar(&cfg.ReplayTiming, "replay-timing", camera.ReplayTimingAuto, "with --camera replay:DIR, "+camera.ReplayTimingUsage)
	fs.Float64Var(&cfg.ReplaySpeed, "replay-speed", 1, "with --camera replay:DIR and "+camera.ReplaySpeedUsage)
	fs.IntVar(&cfg.Beams, "beams", 64, "synthetic LiDAR beams of the in-process camera (--camera synthetic)")
	fs.IntVar(&cfg.AzimuthSteps, "azimuth-steps", 1800, "synthetic LiDAR azimuth steps per revolution (--camera synthetic)")
	fs.StringVar(&cfg.Socket, "socket", transport.DefaultSocketPath(), "camera socket to subscribe to (if not given: $XDG_RUNTIME_DIR/zerohop/camera.sock, else /run/zerohop/camera.sock)")
	fs.StringVar(&cfg.Transport, "transport", "unix", `"unix" (zero-copy) or "copy" (benchmark baseline; the camera must use the same)`)
	fs.StringVar(&cfg.Name, "name", "agent", "subscriber name shown in the camera's log")
	fs.BoolVar(&cfg.Spin, "spin", false, "spin on the handle rings the camera writes instead of sleeping in recv (sub-microsecond handoff; one busy core)")
	fs.StringVar(&cfg.Model, "model", "", "ONNX model file (default: the embedded reference model, see models/MODEL_CARD.md)")
	fs.StringVar(&cfg.ModelConfig, "model-config", "", "JSON that maps the model's inputs and outputs (see models/README.md); one without an image input runs the agent on the LiDAR alone, as --lidar-only")
	fs.BoolVar(&cfg.LidarOnly, "lidar-only", false, "for a robot with a LiDAR and no camera: take the clouds alone, neither subscribing to images nor waiting for them (the camera may serve none: bin/camera --image-size none, or --source ros2 --ros2-image-topic \"\"); without --model, the embedded LiDAR-only reference model (models/MODEL_CARD.md); a --model-config with an image input is refused. /latency's inputs says \"lidar\"")
	fs.BoolVar(&cfg.PlanarLidar, "planar-lidar", false, "for a robot whose LiDAR is a planar (2D) laser scanner (sensor_msgs/LaserScan): the camera must mark its clouds as scans (bin/camera --planar-lidar, or --source ros2 --ros2-scan-topic); without --model, the embedded planar-LiDAR reference model, which takes every point of a scan for an obstacle and no images (models/MODEL_CARD.md); the ground check is off. Clouds of the other kind are dropped and counted (lidar_scan_mismatch_total). /latency's inputs says \"scan\"")
	fs.DurationVar(&cfg.PairTolerance, "pair-tolerance", 0, fmt.Sprintf("how far apart the capture stamps of a cloud and the image it is processed with may be, and so how long a cloud waits for its image at most; 1ms up to half --watchdog (0: %v, or half --watchdog when that is less; not used with --lidar-only). Raise it for a camera slower than 25 Hz or drivers that stamp the scan's start (the log's last_image_minus_cloud shows the offset when clouds find no image); with --ros2, ros2 param set pair_tolerance SECONDS changes it from the next cloud", agent.DefaultPairTolerance))
	fs.StringVar(&cfg.ORTLib, "ort-lib", "", fmt.Sprintf("path of libonnxruntime.so (if not given: $ZEROHOP_ORT_LIB; else ort/%s/libonnxruntime.so.1 under $ZEROHOP_CACHE, ./.cache, .cache beside the executable, .cache above it; else libonnxruntime.so.1 or .so in each $LD_LIBRARY_PATH folder, then the system library folders)", infer.ORTVersion))
	fs.StringVar(&cfg.Providers, "providers", infer.DefaultProviders, "ONNX Runtime execution providers in order of preference, comma-separated: tensorrt, cuda, cpu (case-insensitive; one that cannot start is skipped with a log line saying why)")
	fs.StringVar(&cfg.TRTCache, "trt-cache", ".cache/trt", "TensorRT engine cache folder; a relative path is relative to the working directory")
	fs.IntVar(&cfg.Threads, "ort-threads", 1, "ONNX Runtime intra-op threads, 0 to 256 (0: ONNX Runtime's default; 1 keeps jitter and CPU use low for small models)")
	fs.IntVar(&cfg.PrepThreads, "prep-threads", 0, "goroutines sharing each frame's image preprocessing (0: one per core, at most 4; on the GPU path it runs beside the GPU voxel filter and often sets e2e)")
	fs.Float64Var(&leaf, "leaf", 0.2, "voxel leaf size in metres, 0.001 to 100 (0: 0.2)")
	maxObstacleHeight := fs.Float64("max-obstacle-height", 0, "the robot's height, metres above the ground (0.3 to 100; 0, the default: none): points higher than this (a ceiling, a table top or branch the robot passes under) are left out before the voxel filter, so they block no sector; indoors, with a LiDAR that sees the ceiling, without it the ceiling is an obstacle everywhere")
	fs.Float64Var(&lidarHeight, "lidar-height", 0, "height of the point clouds' frame origin above the ground, in metres, 0 to 100: the LiDAR's mounting height when clouds come in the sensor's frame, as ROS 2 drivers publish them (KITTI: 1.73); the default, 0, is for clouds in a robot frame with its origin on the ground (the synthetic scene). The BEV measures heights from the ground: with this too low, obstacles shorter than the sensor read as flat. A ground check logs once a second's finding if it disagrees (suggested_lidar_height_m)")
	fs.Var(&lidarXY, "lidar-xy", "X,Y: where the point clouds' frame origin (the LiDAR) sits on the robot, in metres ahead of (x) and left of (y) the robot's origin, -100 to 100 each; the BEV raster is drawn around the robot's origin. With --lidar-height and --lidar-rpy: the transform from the robot's frame on the ground (base_footprint) to the LiDAR's frame, as ros2 run tf2_ros tf2_echo base_footprint <lidar frame> prints it (its translation is x, y and --lidar-height)")
	fs.Var(&lidarRPY, "lidar-rpy", "ROLL,PITCH,YAW: the point clouds' frame's rotation on the robot, in radians (or degrees written as 8deg): roll and yaw -π to π, pitch -π/2 to π/2, as tf2_echo prints the rotation in RPY (roll about x, then pitch about y, then yaw about z, all the robot's axes). A LiDAR tilted down to see the ground near the robot has a positive pitch (0,10deg,0); one mounted upside down has roll π. Without it, a tilted LiDAR's ground reads as a slope: rising ahead into a wall of obstacles, or sinking until obstacles vanish; the ground check warns and logs suggested_lidar_rpy")
	lidarFrame := fs.String("lidar-frame", "", "with --ros2: read the LiDAR's mount at start from /tf_static instead of --lidar-xy, --lidar-height and --lidar-rpy: the transform from --base-frame to this frame, the clouds' header.frame_id (velodyne, os_sensor, livox_frame …), as robot_state_publisher publishes a URDF's fixed joints and static_transform_publisher a single one. The log prints the mount as those three flags (same_as). Clouds whose frame id is another are then dropped (their points would land where this sensor's belong). Waits up to --tf-timeout; a namespaced robot remaps /tf_static (--ros-args -r /tf_static:=tf_static). A LiDAR on a moving joint: leave this out and give bin/camera --ros2-merge-frame base_link, which moves each cloud by the mount at its stamp from /tf")
	baseFrame := fs.String("base-frame", agent.DefaultBaseFrame, "the robot's frame on the ground where --lidar-frame's transform starts (REP-105's base_footprint): the BEV is drawn in it and measures heights from it")
	tfTimeout := fs.Duration("tf-timeout", agent.DefaultTFTimeout, "how long --lidar-frame waits at start for /tf_static to connect --base-frame to the LiDAR's frame, 100ms to 10m; then the agent stops with an error saying what /tf_static held")
	fs.IntVar(&cfg.MinPoints, "min-points", 1, "minimum points per voxel, 0 or more (0 and 1: every voxel with a point)")
	fs.IntVar(&cfg.MaxPoints, "max-points", 500000, "largest point cloud accepted, 1 to 16777216 points (0: 500000)")
	fs.StringVar(&cfg.GPU, "gpu", agent.GPUAuto, `voxel filter and BEV on the GPU: "auto" (the GPU when one works, else the CPU with a log line saying why), "on" (fail at start-up without it) or "off"`)
	fs.StringVar(&cfg.GPUSync, "gpu-sync", "auto", `how a thread waiting for the GPU waits (the device's primary context, ONNX Runtime's CUDA provider's too): "auto" (the driver's choice, which spins: a core busy while the GPU works), "spin", "yield" or "block" (sleeps until the GPU is done: no core spent waiting, a wake-up each time)`)
	fs.StringVar(&cfg.GPUInput, "gpu-input", agent.GPUInputMapped, `how the GPU kernels read a cloud: "mapped" (in place from the pinned slot, zero-copy) or "copy" (one async copy to device memory first)`)
	fs.StringVar(&cfg.CubinCache, "cubin-cache", "", "folder for the compiled GPU kernels (default $XDG_CACHE_HOME/zerohop/cubin or ~/.cache/zerohop/cubin)")
	fs.DurationVar(&cfg.Watchdog, "watchdog", 200*time.Millisecond, "zero cmd_vel when no fresh frame arrives within this period, and drop frames whose capture stamp is further than this from this machine's clock; 1ms to 1h (0: 200ms)")
	fs.DurationVar(&shutdownGrace, "shutdown-grace", agent.DefaultShutdownGrace, "after SIGINT/SIGTERM, exit with an error if shutdown has not finished within this long (a stage stuck in a call nothing can cancel, such as a hung GPU)")
	fs.StringVar(&cfg.HTTP, "http", telemetry.DefaultAddr, "latency endpoint address (localhost by default; 0.0.0.0:PORT for all interfaces)")
	fs.BoolVar(&cfg.Pprof, "pprof", false, "also serve /debug/pprof/ when --http is an address other machines can reach (without it, pprof is served only on a loopback --http)")
	fs.DurationVar(&cfg.Duration, "duration", 0, "stop after this long (0: until SIGINT/SIGTERM)")
	fs.StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn, error")
	// The planner's limits: flags at start, ROS parameters while it runs.
	tuning, err := plannerFlags(fs)
	if err != nil {
		return err
	}
	cfg.Planner = tuning
	openROS2 := ros2Flags(fs, tuning)
	rosArgs, err := rosargs.ParseFlags(fs, args, rosOptions)
	if err != nil {
		if err == flag.ErrHelp {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q (see --help)", fs.Args())
	}
	// The flag's default is the full list: empty can only be a mistake
	// (an unset variable in a compose file, say), not "the default".
	if strings.TrimSpace(cfg.Providers) == "" {
		return fmt.Errorf(`--providers %q: want one or more of tensorrt, cuda, cpu (the default: %q)`, cfg.Providers, infer.DefaultProviders)
	}
	if shutdownGrace <= 0 {
		return fmt.Errorf("--shutdown-grace %v: want a positive duration", shutdownGrace)
	}
	cfg.Leaf = float32(leaf)
	cfg.LidarHeight = float32(lidarHeight)
	cfg.MaxObstacleHeight = float32(*maxObstacleHeight)
	cfg.LidarXY = [2]float64(lidarXY.v[:2])
	cfg.LidarRPY = [3]float64(lidarRPY.v[:3])
	// Every flag before the ROS 2 participant opens.
	if err := agent.CheckNodeConfig(cfg); err != nil {
		return err
	}
	// The pairing tolerance, which ros2 param set changes while it runs.
	if cfg.Pairing, err = agent.NewPairTuning(cfg.PairTolerance, cfg.Watchdog); err != nil {
		return err
	}
	if *lidarFrame != "" {
		// Zero, the flags' default, says no more than leaving them out (a
		// compose file passes them always).
		var mountFlags []string
		for _, name := range []string{"lidar-height", "lidar-xy", "lidar-rpy"} {
			if f := fs.Lookup(name); given(fs, name) && f.Value.String() != f.DefValue {
				mountFlags = append(mountFlags, "--"+name)
			}
		}
		if len(mountFlags) > 0 {
			return fmt.Errorf("--lidar-frame reads the LiDAR's mount from /tf_static; leave out %s (or --lidar-frame)", strings.Join(mountFlags, ", "))
		}
	} else if given(fs, "base-frame") || given(fs, "tf-timeout") {
		return errors.New("--base-frame and --tf-timeout: only with --lidar-frame")
	}
	log, level, err := logging.New(logLevel)
	if err != nil {
		return err
	}
	defer log.Sync()
	cfg.Log = log
	rosArgs.Log(log)
	out, err := openROS2(log, level, rosArgs, cfg.Pairing)
	if err != nil {
		return err
	}
	defer out.close()
	if out.log != nil { // the same log, on /rosout too
		log = out.log
		cfg.Log = log
	}
	cfg.Sink = out.sink // nil: the log sink
	cfg.Status, cfg.StatusPeriod, cfg.StatusNode, cfg.StatusStamp = out.status, out.statusPeriod, out.statusNode, out.statusStamp
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *lidarFrame != "" {
		if err := mountFromTF(ctx, &cfg, out, *baseFrame, *lidarFrame, *tfTimeout); err != nil {
			if ctx.Err() != nil { // SIGINT/SIGTERM while waiting: a normal stop
				log.Info("stopped while waiting for /tf_static")
				return nil
			}
			return err
		}
		// ros2 param get lidar_height (and xy, rpy) shows the mount in
		// force, not the flags' zeros.
		if err := showMount(fs, cfg, out.refreshParams); err != nil {
			log.Warn("ROS parameters: the mount from /tf_static not shown in lidar_height, lidar_xy, lidar_rpy", zap.Error(err))
		}
	}
	return agent.RunNodeBounded(ctx, cfg, shutdownGrace)
}

// plannerFlags registers a flag for each of the planner's settings,
// which set the returned tuning.
func plannerFlags(fs *flag.FlagSet) (*agent.PlannerTuning, error) {
	tuning := agent.NewPlannerTuning()
	for _, s := range agent.PlannerSettings() {
		v, err := tuning.FlagValue(s.Name)
		if err != nil {
			return nil, err
		}
		fs.Var(v, s.Flag(), s.Usage)
	}
	return tuning, nil
}

// mountFromTF reads the LiDAR's mount from /tf_static (--lidar-frame)
// into cfg; the subscription is closed once it is read.
func mountFromTF(ctx context.Context, cfg *agent.NodeConfig, out ros2Out, base, lidar string, timeout time.Duration) error {
	if out.listenTF == nil {
		return fmt.Errorf("--lidar-frame reads the LiDAR's mount from /tf_static: %s", out.noTF)
	}
	src, closeTF, err := out.listenTF()
	if err != nil {
		return fmt.Errorf("--lidar-frame: %w", err)
	}
	defer closeTF()
	return agent.MountFromTF(ctx, cfg, src, base, lidar, timeout)
}

// showMount sets --lidar-height, --lidar-xy and --lidar-rpy to the mount
// read from /tf_static and refreshes their ROS parameters (refresh nil:
// no parameters served).
func showMount(fs *flag.FlagSet, cfg agent.NodeConfig, refresh func(flagNames ...string) error) error {
	num := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	values := map[string]string{
		"lidar-height": strconv.FormatFloat(float64(cfg.LidarHeight), 'g', -1, 32),
		"lidar-xy":     num(cfg.LidarXY[0]) + "," + num(cfg.LidarXY[1]),
		"lidar-rpy":    num(cfg.LidarRPY[0]) + "," + num(cfg.LidarRPY[1]) + "," + num(cfg.LidarRPY[2]),
	}
	names := []string{"lidar-height", "lidar-xy", "lidar-rpy"}
	for _, name := range names {
		if err := fs.Set(name, values[name]); err != nil {
			return fmt.Errorf("--%s %s: %w", name, values[name], err)
		}
	}
	if refresh == nil {
		return nil
	}
	return refresh(names...)
}

// given reports whether the flag was set on the command line or by a ROS
// parameter.
func given(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// ros2Out is what the ROS 2 flags open: the cmd_vel sink and the status
// sink (nil: the log sink, no status) with the agent's status settings,
// and how to close them.
type ros2Out struct {
	sink         agent.CmdSink
	status       status.Sink
	statusPeriod time.Duration
	statusNode   string
	statusStamp  func(time.Time) time.Time
	log          *zap.Logger // nil: the log as it was
	// listenTF subscribes to /tf_static (--lidar-frame); nil when there
	// is no ROS 2, and noTF says why.
	listenTF func() (agent.TransformSource, func(), error)
	noTF     string
	// refreshParams shows the named flags' current values as their ROS
	// parameters' and announces them on /parameter_events; nil without
	// ROS 2.
	refreshParams func(flagNames ...string) error
	close         func()
}

// numbersFlag is a flag of n comma-separated numbers ("0.4,-0.1"); with
// degrees, a number may end in "deg" and is turned into radians.
type numbersFlag struct {
	n       int
	unit    string
	degrees bool
	v       [3]float64
}

func (f *numbersFlag) String() string {
	if f == nil || f.n == 0 { // the flag package's zero value, for the default
		return ""
	}
	parts := make([]string, f.n)
	for i := range parts {
		parts[i] = strconv.FormatFloat(f.v[i], 'g', -1, 64)
	}
	return strings.Join(parts, ",")
}

func (f *numbersFlag) Set(s string) error {
	parts := strings.Split(s, ",")
	if len(parts) != f.n {
		return fmt.Errorf("%q: want %d numbers separated by commas, in %s", s, f.n, f.unit)
	}
	var v [3]float64
	for i, p := range parts {
		p = strings.TrimSpace(p)
		scale := 1.0
		if num, ok := strings.CutSuffix(p, "deg"); ok && f.degrees {
			p, scale = strings.TrimSpace(num), math.Pi/180
		}
		x, err := strconv.ParseFloat(p, 64)
		if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
			return fmt.Errorf("%q: %q is not a finite number (%s)", s, parts[i], f.unit)
		}
		v[i] = x * scale
	}
	f.v = v
	return nil
}
