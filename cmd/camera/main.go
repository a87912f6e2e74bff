// Command camera is the zerohop camera node: a source (synthetic scene or
// replayed files) writes every frame straight into shared slot memory and
// the frame's handle goes to subscribers over a unix socket.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/zerohop/zerohop/camera"
	"github.com/zerohop/zerohop/handles/transport"
	"github.com/zerohop/zerohop/logging"
	"github.com/zerohop/zerohop/pinned"
	"github.com/zerohop/zerohop/ros2/rosargs"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		// The camera package's errors already begin "camera: ".
		fmt.Fprintln(os.Stderr, "camera:", strings.TrimPrefix(err.Error(), "camera: "))
		os.Exit(1)
	}
}

// rosOptions says which flags hold what --ros-args changes.
var rosOptions = rosargs.Options{NodeName: "zerohop_camera", NodeNameFlag: "ros2-node-name", NamespaceFlag: "ros2-namespace", LogLevelFlag: "log-level",
	Aliases: map[string]string{"diagnostic_updater.period": "ros2-diagnostics-period"}}

func run(args []string) error {
	fs := flag.NewFlagSet("camera", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `Usage: camera [flags] [--ros-args ROS_ARGS [--]]

Renders (synthetic) or replays camera images and LiDAR point clouds straight
into shared, page-aligned slot memory and announces each frame to subscribers
(the zerohop agent) over a unix socket. It never waits for a slow subscriber:
frames it cannot deliver are dropped for that subscriber and counted.

ROS arguments, as ros2 run and ros2 launch give them: -r FROM:=TO (topics),
-r __node:=NAME, -r __ns:=/NS, -p NAME:=VALUE and --params-file FILE (a
parameter sets the flag of its name: ros2_points_topic sets
--ros2-points-topic), -e /ENCLAVE, --log-level LEVEL.

Flags:
`)
		fs.PrintDefaults()
	}
	var (
		cfg       camera.NodeConfig
		imageSize string
		logLevel  string
		slots     uint
	)
	fs.StringVar(&cfg.Source, "source", "synthetic", `frame source: "synthetic" (moving obstacle, hazard marking), "replay:DIR" (DIR holds .bin/.pcd point files and .png/.jpg/.jpeg images, paired in name order, or is a KITTI sequence with velodyne/ and image_2/ or a KITTI raw drive with velodyne_points/data/ and image_02/data/; --loop repeats it, --replay-timing paces it) or "ros2" (sensor_msgs/PointCloud2 and Image from ROS 2 drivers; needs a -tags ros2 build)`)
	fs.BoolVar(&cfg.Loop, "loop", false, "replay: loop over the files (with recorded timing the first frame follows the last after the recording's median frame interval)")
	fs.Float64Var(&cfg.Rate, "rate", 30, "frames per second, 0.001 to 10000 (0: 30); with --source ros2 the drivers set the pace and this only sizes the slot pools; a replay with recorded timing (--replay-timing) is paced by its timestamps, which also size the pools: --rate is then not used")
	fs.StringVar(&cfg.ReplayTiming, "replay-timing", camera.ReplayTimingAuto, "replay: "+camera.ReplayTimingUsage)
	fs.Float64Var(&cfg.ReplaySpeed, "replay-speed", 1, "replay "+camera.ReplaySpeedUsage)
	fs.IntVar(&cfg.Beams, "beams", 64, "synthetic LiDAR beams")
	fs.BoolVar(&cfg.PlanarLidar, "planar-lidar", false, `a planar (2D) LiDAR, as a robot's laser scanner, for bin/agent --planar-lidar: the synthetic scene's LiDAR becomes one level beam 0.3 m above the ground (--beams is not used), and a replay folder's clouds are taken as recorded scans; their handles say so. With --source ros2: the --ros2-points-topic clouds are a 2D scanner's (a driver publishing PointCloud2, or laser_geometry's projection of a LaserScan); --ros2-scan-topic's clouds are marked without it`)
	fs.IntVar(&cfg.AzimuthSteps, "azimuth-steps", 1800, "synthetic LiDAR azimuth steps per revolution")
	fs.StringVar(&imageSize, "image-size", "1280x720", `synthetic image size WIDTHxHEIGHT, or "none": no camera images, only LiDAR clouds, from the synthetic scene or a replay folder that has images (for a LiDAR-only agent: bin/agent --lidar-only; with --source ros2, --ros2-image-topic "" does this)`)
	fs.StringVar(&cfg.Socket, "socket", transport.DefaultSocketPath(), "unix socket to serve subscribers on, mode 0660; its folder is created 0750 if missing, an existing one is left as it is (if not given: $XDG_RUNTIME_DIR/zerohop/camera.sock, else /run/zerohop/camera.sock)")
	fs.IntVar(&cfg.AllowGID, "allow-gid", -1, "also admit subscribers with this primary gid (-1: only the camera's own uid)")
	fs.UintVar(&slots, "slots", 0, "slots per pool, at least 2 (0: sizing rule for --subscribers subscribers taking up to 50 ms: 9 for 2 at 30 fps)")
	fs.IntVar(&cfg.Subscribers, "subscribers", 2, fmt.Sprintf("subscribers the pools are sized for (1..%d): each may hold at most (slots-1)/N slots of a pool (at least 3, what a subscriber needs to act on the freshest frame; 2 on pools of 2 or 3 slots), so that up to N cannot leave the camera or each other without frames, however many each keeps, when the pools have at least 3N+1 slots (the sizing rule gives them that; smaller --slots are logged); more subscribers may connect, without that guarantee (logged)", pinned.MaxSubscribers))
	fs.BoolVar(&cfg.Lock, "mlock", false, "lock the pools in memory (needs RLIMIT_MEMLOCK)")
	fs.BoolVar(&cfg.Checksum, "checksum", false, "test mode: put a CRC-64 of each payload in its handle")
	fs.Uint64Var(&cfg.Frames, "frames", 0, "stop after this many frames (0: run until stopped)")
	fs.StringVar(&cfg.MetricsAddr, "metrics", "127.0.0.1:9091", `Prometheus /metrics and /healthz address ("" disables)`)
	fs.StringVar(&cfg.Transport, "transport", "unix", `"unix" (zero-copy) or "copy" (benchmark baseline: every payload through a stream socket at SOCKET.points / SOCKET.image)`)
	fs.StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn, error")
	runROS2 := ros2Flags(fs)
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
	// camera.CheckSource knows the sources camera.RunNode opens; this
	// binary also has ros2 (or says, when it runs, how to get it).
	if cfg.Source != "ros2" && cfg.Source != "" && cfg.Source != "synthetic" && !strings.HasPrefix(cfg.Source, "replay:") {
		return fmt.Errorf(`--source %q: want "synthetic", "replay:DIR" or "ros2"`, cfg.Source)
	}
	if err := camera.CheckReplayTiming("--source", cfg.Source, cfg.ReplayTiming, cfg.ReplaySpeed); err != nil {
		return err
	}
	if err := setImageSize(&cfg, imageSize); err != nil {
		return err
	}
	// The ROS 2 source's images are the driver's topic, not a size.
	if cfg.NoImage && cfg.Source == "ros2" {
		return errors.New(`--image-size none: with --source ros2 give --ros2-image-topic "" (the parameter ros2_image_topic: "") for no images`)
	}
	if slots > pinned.MaxSlots {
		return fmt.Errorf("--slots %d: at most %d", slots, pinned.MaxSlots)
	}
	if slots == 1 {
		return fmt.Errorf("--slots 1: at least %d (0: the sizing rule): %s", camera.MinSlots, camera.MinSlotsWhy)
	}
	if cfg.Subscribers < 1 || cfg.Subscribers > pinned.MaxSubscribers {
		return fmt.Errorf("--subscribers %d: want 1..%d", cfg.Subscribers, pinned.MaxSubscribers)
	}
	cfg.Slots = uint32(slots)
	log, level, err := logging.New(logLevel)
	if err != nil {
		return err
	}
	defer log.Sync()
	cfg.Log = log
	rosArgs.Log(log)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if handled, err := runROS2(ctx, cfg, level, rosArgs); handled {
		return err
	}
	return camera.RunNode(ctx, cfg)
}

// setImageSize sets cfg's synthetic image size from --image-size s:
// WIDTHxHEIGHT, or "none" for no images at all (NoImage).
func setImageSize(cfg *camera.NodeConfig, s string) error {
	if s == "none" {
		cfg.ImageWidth, cfg.ImageHeight, cfg.NoImage = 0, 0, true
		return nil
	}
	ws, hs, ok := strings.Cut(s, "x")
	w, err1 := strconv.Atoi(ws)
	h, err2 := strconv.Atoi(hs)
	if !ok || err1 != nil || err2 != nil || w <= 0 || h <= 0 {
		return fmt.Errorf(`--image-size %q: want WIDTHxHEIGHT, e.g. 1280x720, or "none" (no images, only LiDAR clouds)`, s)
	}
	cfg.ImageWidth, cfg.ImageHeight, cfg.NoImage = w, h, false
	return nil
}
