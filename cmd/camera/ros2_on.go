//go:build ros2

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/zerohop/zerohop/camera"
	"github.com/zerohop/zerohop/logging"
	"github.com/zerohop/zerohop/ros2"
	"github.com/zerohop/zerohop/ros2/params"
	"github.com/zerohop/zerohop/ros2/rosargs"
	"github.com/zerohop/zerohop/telemetry/status"
)

// ros2Flags registers the ROS 2 source flags. The returned function runs
// the camera when --source is "ros2" (handled = true) and otherwise only
// checks that no ROS 2 flag was given. With --source ros2 the camera
// subscribes to sensor_msgs/PointCloud2 and Image from the robot's drivers
// (BEST_EFFORT, which matches any publisher) through Cyclone DDS, in the
// domain and with the discovery settings of the usual ROS environment
// variables (ROS_DOMAIN_ID, ROS_AUTOMATIC_DISCOVERY_RANGE,
// ROS_LOCALHOST_ONLY, ROS_STATIC_PEERS, CYCLONEDDS_URI).
func ros2Flags(fs *flag.FlagSet) func(context.Context, camera.NodeConfig, zap.AtomicLevel, *rosargs.Args) (handled bool, err error) {
	nodeConfig := registerROS2Flags(fs)
	return func(ctx context.Context, cfg camera.NodeConfig, level zap.AtomicLevel, ra *rosargs.Args) (bool, error) {
		if cfg.Source != "ros2" {
			if rules := ra.TopicRules(); len(rules) > 0 {
				cfg.Log.Warn("ROS arguments: remapping rules ignored: the camera joins ROS 2 only with --source ros2 (the parameter source: ros2)", zap.Stringers("rules", rules))
			}
			var stray []string
			fs.Visit(func(f *flag.Flag) {
				if strings.HasPrefix(f.Name, "ros2-") || f.Name == "ros-domain" {
					stray = append(stray, "--"+f.Name)
				}
			})
			if len(stray) > 0 {
				return true, fmt.Errorf("%s: only with --source ros2", strings.Join(stray, ", "))
			}
			return false, nil
		}
		rc, err := nodeConfig(os.LookupEnv, ra)
		if err != nil {
			return true, err
		}
		if cfg.PlanarLidar && len(rc.ScanTopics) == 0 && len(rc.PointsTopics) == 0 {
			return true, errors.New(`--planar-lidar with --source ros2: give the planar LiDAR's topic, --ros2-scan-topic (sensor_msgs/LaserScan) or --ros2-points-topic (sensor_msgs/PointCloud2 of its scans)`)
		}
		// What ros2 param shows: every flag as the camera runs with it;
		// only the log level changes while it runs.
		if rc.Parameters, err = params.FromFlags(fs, paramOptions(level)); err != nil {
			return true, err
		}
		rc.Rosout, rc.LogLevel = ra == nil || !ra.NoRosout, level
		return true, camera.RunROS2Node(ctx, cfg, rc)
	}
}

// registerROS2Flags registers the ROS 2 flags on fs. The returned function,
// called after fs.Parse, checks them and makes the node's configuration,
// reading the ROS environment variables through lookup and taking the
// remapping rules and enclave of ra (nil: none).
func registerROS2Flags(fs *flag.FlagSet) func(lookup func(string) (string, bool), ra *rosargs.Args) (camera.ROS2NodeConfig, error) {
	var (
		points     = fs.String("ros2-points-topic", "points", `--source ros2: sensor_msgs/PointCloud2 topic ("" = none); a relative name resolves against --ros2-namespace (points in /robot1 is /robot1/points), an absolute one (/points) does not; x, y, z (FLOAT32/FLOAT64) and optional intensity (the field --ros2-intensity-field names, any numeric type; without it intensity is 0, with one warning) at any offsets. Several LiDARs, comma-separated (front/points,rear/points), are merged into one cloud: give --ros2-merge-frame`)
		scan       = fs.String("ros2-scan-topic", "", `--source ros2: sensor_msgs/LaserScan topic of a planar (2D) LiDAR, e.g. scan ("" = none), read instead of --ros2-points-topic (left at its default, or ""): each scan becomes a cloud in its frame (rays without a valid return left out), marked planar for bin/agent --planar-lidar; --ros2-max-points bounds its rays, --ros2-intensity-scale scales its intensities. Several scanners, comma-separated (front_scan,rear_scan), are merged into one cloud: give --ros2-merge-frame`)
		merge      = fs.String("ros2-merge-frame", "", `--source ros2 with --ros2-scan-topic or --ros2-points-topic: put every scan or cloud into this frame on the robot, e.g. base_link ("" = each in its own frame), by its frame's transform from /tf_static (robot_state_publisher's mounts) or /tf, and merge one of each topic into one cloud (with one topic: that LiDAR's data moved into this frame), as ira_laser_tools' laserscan_multi_merger does: a cloud goes out once every LiDAR has sent since the last, stamped with the oldest one's time (with --ros2-fixed-frame: each moved by the robot's motion to the newest one's time, which stamps it). A scan that arrived more than 0.2 s before the others completed the set is not used (by arrival: scanners whose clocks disagree still merge); with --ros2-stamp receipt the cloud carries its oldest scan's arrival. A LiDAR that sends nothing holds back the merged clouds, so the agent stops the robot rather than drive with one side unseen; the log and /diagnostics name it. bin/agent then takes the clouds in the robot's frame: leave its --lidar-xy and --lidar-rpy at their defaults, and give --lidar-height as this frame's height above the ground (0 for base_footprint). --ros2-max-points is per scan or cloud`)
		fixed      = fs.String("ros2-fixed-frame", "", `--source ros2: deskew the LiDAR's data, as laser_geometry's high-fidelity projection and LiDAR odometry do: a frame that does not move with the robot, e.g. odom ("" = off). A LiDAR takes its points one after the other over a sweep (a scan's time_increment, a cloud's per-point time field, --ros2-time-field); while the robot turns each comes from another pose, and the data as sent is skewed (at 1 rad/s and 10 sweeps a second, up to 0.1 rad: 0.4 m at 4 m). The LiDAR frame's pose in this frame is read from /tf and /tf_static (odom → base_link from the base's driver, base_link → the sensor from robot_state_publisher) at the header stamp and at the first and last point's time, and each point placed by the pose at its own time, in the LiDAR frame at the header stamp. Data whose transforms or times are missing is used as sent, counted (zerohop_camera_ros2_deskew_total{result="not_deskewed"}) and logged with the reason: no /tf, another clock than the LiDAR's, no time field, or a scan driver that stamps the last ray (sensor_msgs/LaserScan stamps the first) so that the scan seems to end after the newest /tf. A namespaced robot remaps /tf (--ros-args -r /tf:=tf -r /tf_static:=tf_static)`)
		timeField  = fs.String("ros2-time-field", "", `--source ros2 with --ros2-fixed-frame: the PointCloud2 field holding each point's time, any numeric type ("" = the first of time, t, timestamp the cloud has: velodyne_pointcloud's and Hesai's float seconds, Ouster's uint32 ns). Times of 10^6 s and more are since the epoch, smaller ones offsets from the header stamp`)
		timeUnit   = fs.String("ros2-time-unit", "auto", `--source ros2 with --ros2-fixed-frame: unit of --ros2-time-field: s, ms, us, ns, or auto (s for a float field, ns for an integer one; Livox's float64 "timestamp" is ns: give ns)`)
		image      = fs.String("ros2-image-topic", "image_raw", `--source ros2: sensor_msgs/Image topic ("" = none); a relative name resolves against --ros2-namespace, as for --ros2-points-topic; rgb8, bgr8, mono8, rgba8 or bgra8 (cv_bridge's 8UC1, 8UC3 and 8UC4 too)`)
		maxPoints  = fs.Int("ros2-max-points", 131072, "--source ros2: most points per cloud or scan (slot size = 16 bytes × this, × the number of LiDAR topics with --ros2-merge-frame: bin/agent's --max-points must hold that); larger ones are dropped and counted")
		maxImage   = fs.Int("ros2-max-image-bytes", 1920*1080*3, "--source ros2: largest image in bytes (width × height × bytes per pixel); larger images are dropped and counted")
		handlesTop = fs.String("ros2-handles-topic", "", `--source ros2: also publish each handle as zerohop_msgs/SlotHandle on this topic while a ROS subscriber is matched ("" = off), e.g. /zerohop/handles`)
		imgMirror  = fs.String("ros2-image-mirror-topic", "", `--source ros2: republish each image as a full sensor_msgs/Image here, only while a ROS subscriber (rviz) is matched ("" = off)`)
		ptsMirror  = fs.String("ros2-points-mirror-topic", "", `--source ros2: republish each cloud as a packed XYZI PointCloud2 here, only while a ROS subscriber is matched ("" = off)`)
		mirrorRel  = fs.String("ros2-mirror-reliability", "best-effort", `--source ros2: QoS of the mirror topics: "best-effort" (KEEP_LAST 5; RELIABLE subscribers such as rviz2's default displays do not match it) or "reliable" (KEEP_LAST 1; both kinds match). Neither makes the camera wait: a subscriber or link that falls behind misses frames`)
		node       = fs.String("ros2-node-name", "zerohop_camera", "--source ros2: ROS node name in ros2 node list / rqt_graph")
		ns         = fs.String("ros2-namespace", "/", "--source ros2: ROS namespace of that node, e.g. /robot1; relative topic names (the defaults points and image_raw, the mirror and handles topics) resolve against it (--ros-args -r __ns:=/NS wins over it)")
		simTime    = fs.Bool("use-sim-time", false, `the ROS graph runs on a simulator's /clock (use_sim_time, which launch files set as a parameter): with --source ros2 the camera follows /clock and stamps its /diagnostics and /parameter_events with the simulation's time ({0,0} before the first /clock), and a frame's capture time is its arrival, as with --ros2-stamp receipt, since the drivers' stamps are simulation time; other sources stamp with this machine's clock anyway`)
		stamp      = fs.String("ros2-stamp", "header", `--source ros2: a frame's capture time: "header" (the message's header.stamp; the driver's clock must be this machine's, within the agent's --watchdog) or "receipt" (this machine's clock when the message arrives: for a simulator's use_sim_time stamps or a driver clock that is not synchronised; time before arrival goes uncounted)`)
		iField     = fs.String("ros2-intensity-field", camera.DefaultIntensityField, `--source ros2: the PointCloud2 field whose value (any numeric type, converted to float32) becomes each point's intensity, e.g. reflectivity for Livox or an Ouster's native profile; not x, y or z. "" = none: intensity 0 for every point, without the warning a cloud lacking the field gets`)
		iScale     = fs.Float64("ros2-intensity-scale", 1, `--source ros2: multiply each intensity by this, a finite number > 0, to bring the driver's scale to the one the model was trained on (Velodyne sends 0-255, Ouster up to thousands, KITTI 0-1). The synthetic scene's intensities lie in 0-1 (ground 0.2 to obstacles 0.85), as KITTI's do: for a 0-255 driver give 0.00392157 (1/255). The shipped reference model ignores intensity (its BEV's intensity channel is unused). A scale other than 1 turns off the single-copy path for clouds already packed XYZI float32`)
		diagPer    = fs.Duration("ros2-diagnostics-period", status.DefaultPeriod, "--source ros2: publish each driver topic's status as diagnostic_msgs/DiagnosticArray this often (0: never), for diagnostic_aggregator, rqt_robot_monitor and Foxglove: WARN while no publisher is matched (topic name, ROS_DOMAIN_ID, QoS), when no message came in the period, or when over 5% were dropped (saying why: too large, no free slot, unsupported); every part STALE when the camera stops. The ROS parameter diagnostic_updater.period sets it too")
		diagTop    = fs.String("ros2-diagnostics-topic", "/diagnostics", "--source ros2: topic of the camera's status (--ros2-diagnostics-period)")
		domain     = fs.Int("ros-domain", -1, fmt.Sprintf("--source ros2: DDS domain id 0..%d, overriding ROS_DOMAIN_ID (-1, the default: ROS_DOMAIN_ID, or 0 when it is unset)", ros2.MaxDomainID))
	)
	return func(lookup func(string) (string, bool), ra *rosargs.Args) (camera.ROS2NodeConfig, error) {
		dds, err := ros2.ConfigFromEnv(lookup)
		if err != nil {
			return camera.ROS2NodeConfig{}, err
		}
		if *domain >= 0 {
			if *domain > ros2.MaxDomainID {
				return camera.ROS2NodeConfig{}, fmt.Errorf("--ros-domain %d: want 0..%d", *domain, ros2.MaxDomainID)
			}
			dds.Domain = uint32(*domain)
		}
		dds.NodeName, dds.Namespace = *node, *ns
		if ra != nil {
			dds.Remaps = ra.Remaps
			if ra.Enclave != "" {
				dds.Enclave = ra.Enclave
			}
		}
		if err := dds.Validate(); err != nil {
			return camera.ROS2NodeConfig{}, err
		}
		// A scan topic feeds the LiDAR stream in place of the points
		// topic's default; another points topic too is refused.
		lidarFlag, lidarTopic, pointsTopic := "--ros2-points-topic", *points, *points
		var scans, clouds []string
		if *scan != "" {
			scans = splitTopics(*scan)
			// By value, not by whether it was given: compose and launch
			// files pass the default explicitly.
			switch pointsTopic {
			case "points":
				pointsTopic = ""
			case "":
			default:
				return camera.ROS2NodeConfig{}, fmt.Errorf(`--ros2-scan-topic %q and --ros2-points-topic %q: the camera has one LiDAR stream, fed by one of them: give --ros2-points-topic "" (or leave it at its default) with a scan topic`, *scan, pointsTopic)
			}
			lidarFlag, lidarTopic = "--ros2-scan-topic", *scan
		}
		if pointsTopic != "" {
			clouds = splitTopics(pointsTopic)
		}
		lidars := clouds
		if scans != nil {
			lidars = scans
		}
		for _, f := range []struct {
			flag, topicFlag string
			max             int
			topic           string
		}{{"--ros2-max-points", lidarFlag, *maxPoints, lidarTopic}, {"--ros2-max-image-bytes", "--ros2-image-topic", *maxImage, *image}} {
			switch {
			case f.max < 0:
				return camera.ROS2NodeConfig{}, fmt.Errorf("%s %d: want ≥ 1 (0 only with %s \"\")", f.flag, f.max, f.topicFlag)
			case f.max == 0 && f.topic != "":
				// Its slots would hold nothing: every message dropped.
				return camera.ROS2NodeConfig{}, fmt.Errorf("%s 0 with %s %q: give a size, or %s \"\" to subscribe to none", f.flag, f.topicFlag, f.topic, f.topicFlag)
			}
		}
		if *stamp != "header" && *stamp != "receipt" {
			return camera.ROS2NodeConfig{}, fmt.Errorf(`--ros2-stamp %q: want "header" or "receipt"`, *stamp)
		}
		if *diagPer < 0 || (*diagPer > 0 && *diagPer < 10*time.Millisecond) || *diagPer > time.Hour {
			return camera.ROS2NodeConfig{}, fmt.Errorf("--ros2-diagnostics-period %v: want 10ms to 1h (0: off)", *diagPer)
		}
		if _, err := dds.ResolveTopic(*diagTop); err != nil {
			return camera.ROS2NodeConfig{}, fmt.Errorf("--ros2-diagnostics-topic: %w", err)
		}
		if *fixed != "" && lidarTopic == "" {
			return camera.ROS2NodeConfig{}, fmt.Errorf("--ros2-fixed-frame %q: deskews the LiDAR's clouds or scans, and neither --ros2-points-topic nor --ros2-scan-topic is given", *fixed)
		}
		unit, ok := map[string]float64{"auto": 0, "s": 1, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}[*timeUnit]
		if !ok {
			return camera.ROS2NodeConfig{}, fmt.Errorf("--ros2-time-unit %q: want s, ms, us, ns or auto", *timeUnit)
		}
		if *merge != "" && lidarTopic == "" {
			return camera.ROS2NodeConfig{}, fmt.Errorf("--ros2-merge-frame %q: merges LiDARs' scans or clouds; give their topics with --ros2-scan-topic or --ros2-points-topic (e.g. front/scan,rear/scan)", *merge)
		}
		if err := camera.CheckLidarTopics(dds, lidarFlag, lidars); err != nil {
			return camera.ROS2NodeConfig{}, err
		}
		if len(lidars) > 1 && *merge == "" {
			return camera.ROS2NodeConfig{}, fmt.Errorf("%s %q: %d LiDARs are merged into one cloud in a frame on the robot: give --ros2-merge-frame (e.g. base_link)", lidarFlag, lidarTopic, len(lidars))
		}
		if (*timeField != "" || *timeUnit != "auto") && (*fixed == "" || *scan != "") {
			return camera.ROS2NodeConfig{}, errors.New("--ros2-time-field and --ros2-time-unit say how to deskew PointCloud2 clouds: give --ros2-fixed-frame (e.g. odom) with --ros2-points-topic (a scan's rays are timed by its time_increment)")
		}
		switch *timeField {
		case "x", "y", "z", *iField:
			if *timeField != "" {
				return camera.ROS2NodeConfig{}, fmt.Errorf("--ros2-time-field %q: that field is the point's position or intensity; name the field that holds its time", *timeField)
			}
		}
		receipt := *stamp == "receipt"
		if *simTime {
			stampGiven := false
			fs.Visit(func(f *flag.Flag) { stampGiven = stampGiven || f.Name == "ros2-stamp" })
			if stampGiven && !receipt {
				return camera.ROS2NodeConfig{}, fmt.Errorf("--use-sim-time with --ros2-stamp header: the drivers' stamps are simulation time, which the agent would drop as stale; leave --ros2-stamp out (use_sim_time takes arrival time)")
			}
			receipt = true
		}
		rel, err := parseMirrorReliability(*mirrorRel)
		if err != nil {
			return camera.ROS2NodeConfig{}, err
		}
		intensity, err := camera.ParseROS2Intensity(*iField, *iScale)
		if err != nil {
			return camera.ROS2NodeConfig{}, err
		}
		return camera.ROS2NodeConfig{
			DDS: dds, PointsTopics: clouds, ScanTopics: scans, MergeFrame: *merge, FixedFrame: *fixed, TimeField: *timeField, TimeUnit: unit, ImageTopic: *image,
			MaxPoints: *maxPoints, MaxImageBytes: *maxImage, HandlesTopic: *handlesTop,
			ImageMirrorTopic: *imgMirror, PointsMirrorTopic: *ptsMirror, MirrorReliability: rel,
			StampOnReceipt: receipt, Intensity: intensity,
			DiagnosticsPeriod: *diagPer, DiagnosticsTopic: *diagTop, SimTime: *simTime,
		}, nil
	}
}

// splitTopics reads a comma-separated list of topics (ROS names hold no
// commas), each trimmed.
func splitTopics(list string) []string {
	topics := strings.Split(list, ",")
	for i := range topics {
		topics[i] = strings.TrimSpace(topics[i])
	}
	return topics
}

// parseMirrorReliability reads --ros2-mirror-reliability.
func parseMirrorReliability(s string) (ros2.Reliability, error) {
	switch s {
	case "best-effort":
		return ros2.BestEffort, nil
	case "reliable":
		return ros2.Reliable, nil
	}
	return 0, fmt.Errorf(`--ros2-mirror-reliability %q: want "best-effort" or "reliable"`, s)
}

// paramOptions make the camera's flags its ROS parameters: log_level
// writable (ros2 param set /zerohop_camera log_level debug), the rest
// read at start.
func paramOptions(level zap.AtomicLevel) params.FlagOptions {
	return params.FlagOptions{Aliases: rosOptions.Aliases, Hide: []string{rosOptions.NodeNameFlag, rosOptions.NamespaceFlag},
		Writable: map[string]func(params.Value) error{rosOptions.LogLevelFlag: params.StringApply(logging.Setter(level))}}
}
