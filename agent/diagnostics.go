package agent

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/zerohop/zerohop/planner"
	"github.com/zerohop/zerohop/telemetry"
	"github.com/zerohop/zerohop/telemetry/status"
)

// The parts of the node's status, in the order they are published.
const (
	statusCmdVel  = "cmd_vel"
	statusFrames  = "frames"
	statusLatency = "latency"
	statusLidar   = "lidar"
	statusCompute = "compute"
)

var statusParts = []string{statusCmdVel, statusFrames, statusLatency, statusLidar, statusCompute}

// statusLabel is how a node's fully qualified ROS name starts its
// statuses' names: without the leading '/' ("robot1/zerohop_agent: frames").
func statusLabel(fullName string) string { return strings.TrimPrefix(fullName, "/") }

// lateWarnRatio is how close the oldest a command's frame can get (the
// end-to-end p99 plus the time between frames) may come to the watchdog
// period before the latency status warns: past the period, cmd_vel is
// zeroed as stale.
const lateWarnRatio = 0.8

// nodeState is what diagnose reads: the node's health (Pipeline.Health),
// a /latency snapshot, the previous one's counters (nil at the first) and
// the time between them.
type nodeState struct {
	health   error
	snap     telemetry.Snapshot
	prev     map[string]float64
	elapsed  time.Duration
	watchdog time.Duration
	planner  planner.Config // the settings the planner runs with, which ros2 param set changes
	// lidarFrame and mountFrom are NodeConfig's LidarFrame and
	// LidarMountFrom: the mount's frame and where it came from.
	lidarFrame, mountFrom string
	// pairTolerance is the pairing tolerance in force.
	pairTolerance time.Duration
	// planar is NodeConfig.PlanarLidar: the agent takes a planar LiDAR's
	// scans, and checks no ground.
	planar bool
}

// diagnose turns the node's state into its statuses:
//
//   - cmd_vel: ERROR while commands do not get through (the watchdog's
//     incident, a stall, the sink failing: /healthz's answer); WARN when
//     the planner's limits cannot stop the robot in time
//     (brakingShortfall); else OK;
//   - frames: the rate over the last period; WARN when more than 5 % of
//     its frames were dropped (saying so when most found no image within
//     the pairing tolerance) or none was processed;
//   - latency: each stage's p50/p99/max over /latency's window; WARN when
//     the end-to-end p99 plus the time between frames (how old the newest
//     frame gets before the next) passes 80 % of the watchdog period,
//     beyond which cmd_vel is zeroed as stale;
//   - lidar: ERROR when clouds of the other kind (planar scans, 3D
//     clouds: --planar-lidar) or in another frame than the mount's
//     (--lidar-frame) were dropped in the period; WARN while the ground
//     check finds the ground away from where the mount puts it;
//   - compute: where voxel filter, BEV and inference run; WARN once the
//     GPU voxel filter has failed and the CPU took over.
//
// fullName is the node's fully qualified ROS name, the statuses'
// hardware_id; their names start with it without the leading '/'.
func diagnose(fullName string, st nodeState) []status.Status {
	c, g := st.snap.Counters, st.snap.Gauges
	delta := func(name string) float64 {
		if st.prev == nil {
			return c[name]
		}
		return c[name] - st.prev[name]
	}
	count := func(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) }
	ms := func(us float64) string { return strconv.FormatFloat(us/1000, 'f', 2, 64) }
	label := statusLabel(fullName)
	name := func(part string) string { return label + ": " + part }
	kv := func(k, v string) status.KeyValue { return status.KeyValue{Key: k, Value: v} }

	cmd := status.Status{Level: status.OK, Name: name(statusCmdVel), Message: "commands get through", Values: []status.KeyValue{
		kv("watchdog", st.watchdog.String()),
		kv("max speed m/s", strconv.FormatFloat(st.planner.MaxSpeed, 'g', -1, 64)),
		kv("max yaw rate rad/s", strconv.FormatFloat(st.planner.MaxYawRate, 'g', -1, 64)),
		kv("stale incidents", count(c["watchdog_stale_incidents_total"])),
		kv("stage failure incidents", count(c["watchdog_stage_failure_incidents_total"])),
		kv("non-finite incidents", count(c["watchdog_non_finite_incidents_total"])),
		kv("stalls", count(c["pipeline_stalls_total"])),
		kv("expired between frames", count(c["cmd_vel_expired_total"])),
		kv("publish failures", count(c["cmd_vel_publish_failures_total"])),
	}}
	switch why := brakingShortfall(st.planner); {
	case st.health != nil:
		cmd.Level, cmd.Message = status.Error, st.health.Error()
	case why != "":
		cmd.Level, cmd.Message = status.Warn, "commands get through, but "+why
	}

	processed, dropped := delta("frames_processed"), delta("frames_dropped")
	secs := st.elapsed.Seconds()
	rate := 0.0
	if secs > 0 {
		rate = processed / secs
	}
	frames := status.Status{Level: status.OK, Name: name(statusFrames), Message: fmt.Sprintf("%.1f Hz", rate), Values: []status.KeyValue{
		kv("rate Hz", strconv.FormatFloat(rate, 'f', 1, 64)),
		kv("processed", count(c["frames_processed"])),
		kv("dropped", count(c["frames_dropped"])),
		kv("superseded", count(c["frames_superseded"])),
		kv("handoff", st.snap.Handoff),
		kv("inputs", st.snap.Inputs),
	}}
	if st.snap.Inputs != "lidar" && st.snap.Inputs != "scan" { // the model takes images
		frames.Values = append(frames.Values, kv("unpaired", count(c["frames_unpaired_total"])),
			kv("pair tolerance", st.pairTolerance.String()))
	}
	switch {
	case processed == 0:
		frames.Level, frames.Message = status.Warn, fmt.Sprintf("no frame processed in the last %v", st.elapsed.Round(time.Millisecond))
	case dropped > status.DropWarnRatio*(processed+dropped):
		frames.Level, frames.Message = status.Warn, fmt.Sprintf("%s of %s frames dropped in the last %v (%.1f Hz processed)",
			count(dropped), count(processed+dropped), st.elapsed.Round(time.Millisecond), rate)
	}
	// Most drops for want of an image: say so, whether some frames got
	// through or none (an image stream that stopped, clocks apart).
	if unpaired := delta("frames_unpaired_total"); frames.Level == status.Warn && dropped > 0 && unpaired*2 > dropped {
		frames.Message += fmt.Sprintf(": %s clouds found no image within %v (--pair-tolerance; are images and clouds stamped by one clock, is the image stream up?)",
			count(unpaired), st.pairTolerance)
	}

	lat := status.Status{Level: status.OK, Name: name(statusLatency), Values: []status.KeyValue{kv("window s", strconv.FormatFloat(st.snap.WindowS, 'f', 0, 64))}}
	var e2e telemetry.Percentiles
	for _, s := range st.snap.Stages {
		lat.Values = append(lat.Values, kv(s.Name+" p50/p99/max ms", ms(s.Window.P50)+" / "+ms(s.Window.P99)+" / "+ms(s.Window.Max)))
		if s.Name == "e2e" {
			e2e = s.Window
		}
	}
	var between time.Duration // between frames, from this period's rate
	if rate > 0 {
		between = time.Duration(float64(time.Second) / rate)
	}
	p99 := time.Duration(e2e.P99 * float64(time.Microsecond))
	switch {
	case e2e.Count == 0:
		lat.Message = "no frames in the window"
	case rate > 0 && float64(p99+between) > lateWarnRatio*float64(st.watchdog):
		lat.Level, lat.Message = status.Warn, fmt.Sprintf("end-to-end p99 %s ms plus %s ms between frames is past %.0f%% of the watchdog period (%v): frames that late leave cmd_vel near being zeroed as stale",
			ms(e2e.P99), ms(float64(between.Microseconds())), lateWarnRatio*100, st.watchdog)
	default:
		lat.Message = fmt.Sprintf("end-to-end p50 %s ms, p99 %s ms", ms(e2e.P50), ms(e2e.P99))
	}

	lidar := status.Status{Level: status.OK, Name: name(statusLidar), Message: "the ground is where the LiDAR's mounting puts it"}
	if z, ok := g["ground_found_z_m"]; ok {
		lidar.Values = append(lidar.Values, kv("ground z m", strconv.FormatFloat(z, 'f', 3, 64)))
	}
	if tilt, ok := g["ground_tilt_deg"]; ok {
		lidar.Values = append(lidar.Values, kv("ground tilt deg", strconv.FormatFloat(tilt, 'f', 2, 64)))
	}
	lidar.Values = append(lidar.Values, kv("mount from", orDefault(st.mountFrom, "--lidar-xy, --lidar-height, --lidar-rpy")))
	switch {
	case delta("lidar_scan_mismatch_total") > 0 && st.planar:
		lidar.Level, lidar.Message = status.Error, "clouds dropped: they are 3D clouds, and this agent takes a planar LiDAR's scans (--planar-lidar): run it without the flag, or give the camera the planar LiDAR"
	case delta("lidar_scan_mismatch_total") > 0:
		lidar.Level, lidar.Message = status.Error, "clouds dropped: they are a planar LiDAR's scans (marked so by the camera, or lying in one level plane above the ground), and this agent takes 3D clouds: run it with --planar-lidar, the camera with --planar-lidar or --ros2-scan-topic"
	case delta("lidar_frame_mismatch_total") > 0:
		lidar.Level, lidar.Message = status.Error, fmt.Sprintf("clouds dropped: they are not in frame %s, which the mount from /tf_static is for (--lidar-frame)", st.lidarFrame)
	case g["ground_mismatch"] != 0 && st.mountFrom != "":
		lidar.Level, lidar.Message = status.Warn, "the ground is not where the mount from "+st.mountFrom+" puts it: check the URDF's (or static transform's) joint to the LiDAR against the log's suggested_lidar_height_m and suggested_lidar_rpy"
	case g["ground_mismatch"] != 0:
		lidar.Level, lidar.Message = status.Warn, "the ground is not where --lidar-height and --lidar-rpy put it: see the log's suggested_lidar_height_m and suggested_lidar_rpy"
	case st.planar:
		lidar.Message = "no ground check: a planar LiDAR's scans show no ground (--planar-lidar)"
	case len(lidar.Values) == 1:
		lidar.Message = "no ground check yet"
	}

	compute := status.Status{Level: status.OK, Name: name(statusCompute), Message: "voxel filter and BEV on the " + st.snap.VoxelPath + ", inference on " + st.snap.Provider,
		Values: []status.KeyValue{
			kv("voxel path", st.snap.VoxelPath), kv("inference provider", st.snap.Provider), kv("gpu", st.snap.GPU),
			kv("gpu kernels", st.snap.GPUKernels), kv("gpu voxel failures", count(c["gpu_voxel_failures_total"])),
		}}
	if c["gpu_voxel_failures_total"] > 0 {
		compute.Level, compute.Message = status.Warn, "the GPU voxel filter failed; voxel filter and BEV moved to the CPU (see the log)"
	}
	out := []status.Status{cmd, frames, lat, lidar, compute}
	for i := range out {
		out[i].HardwareID = fullName
	}
	return out
}

// statusLoop is the node's status loop: diagnose every period, every
// part STALE when ctx ends.
func statusLoop(cfg NodeConfig, watchdog time.Duration, rec *telemetry.Recorder, health func(time.Time) error, running func() planner.Config) status.Loop {
	var prev map[string]float64
	return status.Loop{
		Sink: cfg.Status, Period: cfg.StatusPeriod, Stamp: cfg.StatusStamp, Log: cfg.Log,
		Collect: func(now time.Time, elapsed time.Duration) []status.Status {
			snap := rec.Snapshot()
			pairTolerance := PairToleranceFor(cfg.PairTolerance, watchdog)
			if cfg.Pairing != nil { // as ros2 param set left it
				pairTolerance = cfg.Pairing.InForce()
			}
			out := diagnose(cfg.StatusNode, nodeState{health: health(time.Now()), snap: snap, prev: prev, elapsed: elapsed, watchdog: watchdog,
				planner: running(), lidarFrame: cfg.LidarFrame, mountFrom: cfg.LidarMountFrom,
				pairTolerance: pairTolerance, planar: cfg.PlanarLidar})
			prev = snap.Counters
			return out
		},
		Stopped: status.Named(statusLabel(cfg.StatusNode), cfg.StatusNode, statusParts, status.Stale, "the node stopped"),
	}
}

// publishOnce sends statuses outside the loop (starting up, failed to
// start), logging a failure.
func publishOnce(cfg NodeConfig, log *zap.Logger, statuses []status.Status) {
	stamp := time.Now()
	if cfg.StatusStamp != nil {
		stamp = cfg.StatusStamp(stamp)
	}
	if err := cfg.Status.PublishStatus(stamp, statuses); err != nil {
		log.Warn("diagnostics: publish failed", zap.Error(err))
	}
}
