package agent

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/zerohop/zerohop/telemetry"
)

// StatusSink receives the node's status once a period: cmd/agent wires
// ROS 2's /diagnostics (diagnostic_msgs/DiagnosticArray) to it, which
// diagnostic_aggregator, rqt_robot_monitor and Foxglove show with the rest
// of the robot's health.
type StatusSink interface {
	PublishStatus(stamp time.Time, statuses []Status) error
}

// StatusLevel is a status's severity, diagnostic_msgs/DiagnosticStatus's
// level.
type StatusLevel uint8

// The levels, with diagnostic_msgs' values.
const (
	StatusOK    StatusLevel = 0
	StatusWarn  StatusLevel = 1
	StatusError StatusLevel = 2
	StatusStale StatusLevel = 3
)

// Status is one part of the node's state: Name is "NODE: PART", as
// diagnostic_updater names its tasks, so that aggregators group a node's
// parts.
type Status struct {
	Level   StatusLevel
	Name    string
	Message string
	Values  []KeyValue
}

// KeyValue is one named value of a Status.
type KeyValue struct{ Key, Value string }

// DefaultStatusPeriod is how often the node's status goes out: the 1 Hz
// of diagnostic_updater.
const DefaultStatusPeriod = time.Second

// The parts of the node's status, in the order they are published.
const (
	statusCmdVel  = "cmd_vel"
	statusFrames  = "frames"
	statusLatency = "latency"
	statusLidar   = "lidar"
	statusCompute = "compute"
)

// nodeState is what diagnose reads: the node's health (Pipeline.Health),
// a /latency snapshot, the previous one's counters (nil at the first) and
// the time between them.
type nodeState struct {
	health   error
	snap     telemetry.Snapshot
	prev     map[string]float64
	elapsed  time.Duration
	watchdog time.Duration
}

// diagnose turns the node's state into its statuses:
//
//   - cmd_vel: ERROR while commands do not get through (the watchdog's
//     incident, a stall, the sink failing: /healthz's answer), else OK;
//   - frames: the rate over the last period; WARN when frames were dropped
//     in it or none was processed;
//   - latency: each stage's p50/p99/max over /latency's window; WARN when
//     the end-to-end p99 passes half the watchdog period, where late
//     frames start to be zeroed as stale;
//   - lidar: WARN while the ground check finds the ground away from where
//     --lidar-height and --lidar-rpy put it;
//   - compute: where voxel filter, BEV and inference run; WARN once the
//     GPU voxel filter has failed and the CPU took over.
func diagnose(node string, st nodeState) []Status {
	c, g := st.snap.Counters, st.snap.Gauges
	delta := func(name string) float64 {
		if st.prev == nil {
			return c[name]
		}
		return c[name] - st.prev[name]
	}
	count := func(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) }
	ms := func(us float64) string { return strconv.FormatFloat(us/1000, 'f', 2, 64) }
	name := func(part string) string { return node + ": " + part }

	cmd := Status{Level: StatusOK, Name: name(statusCmdVel), Message: "commands get through", Values: []KeyValue{
		{"watchdog", st.watchdog.String()},
		{"stale incidents", count(c["watchdog_stale_incidents_total"])},
		{"stage failure incidents", count(c["watchdog_stage_failure_incidents_total"])},
		{"non-finite incidents", count(c["watchdog_non_finite_incidents_total"])},
		{"stalls", count(c["pipeline_stalls_total"])},
		{"publish failures", count(c["cmd_vel_publish_failures_total"])},
	}}
	if st.health != nil {
		cmd.Level, cmd.Message = StatusError, st.health.Error()
	}

	processed, dropped := delta("frames_processed"), delta("frames_dropped")
	secs := st.elapsed.Seconds()
	rate := 0.0
	if secs > 0 {
		rate = processed / secs
	}
	frames := Status{Level: StatusOK, Name: name(statusFrames), Message: fmt.Sprintf("%.1f Hz", rate), Values: []KeyValue{
		{"rate Hz", strconv.FormatFloat(rate, 'f', 1, 64)},
		{"processed", count(c["frames_processed"])},
		{"dropped", count(c["frames_dropped"])},
		{"superseded", count(c["frames_superseded"])},
		{"handoff", st.snap.Handoff},
	}}
	switch {
	case processed == 0:
		frames.Level, frames.Message = StatusWarn, fmt.Sprintf("no frame processed in the last %v", st.elapsed.Round(time.Millisecond))
	case dropped > 0:
		frames.Level, frames.Message = StatusWarn, fmt.Sprintf("%s frames dropped in the last %v (%.1f Hz processed)", count(dropped), st.elapsed.Round(time.Millisecond), rate)
	}

	lat := Status{Level: StatusOK, Name: name(statusLatency), Values: []KeyValue{{"window s", strconv.FormatFloat(st.snap.WindowS, 'f', 0, 64)}}}
	var e2e telemetry.Percentiles
	for _, s := range st.snap.Stages {
		lat.Values = append(lat.Values, KeyValue{s.Name + " p50/p99/max ms", ms(s.Window.P50) + " / " + ms(s.Window.P99) + " / " + ms(s.Window.Max)})
		if s.Name == "e2e" {
			e2e = s.Window
		}
	}
	switch {
	case e2e.Count == 0:
		lat.Message = "no frames in the window"
	case time.Duration(e2e.P99*float64(time.Microsecond)) > st.watchdog/2:
		lat.Level, lat.Message = StatusWarn, fmt.Sprintf("end-to-end p99 %s ms is past half the watchdog period (%v): frames that late are near being zeroed as stale", ms(e2e.P99), st.watchdog)
	default:
		lat.Message = fmt.Sprintf("end-to-end p50 %s ms, p99 %s ms", ms(e2e.P50), ms(e2e.P99))
	}

	lidar := Status{Level: StatusOK, Name: name(statusLidar), Message: "the ground is where the LiDAR's mounting puts it"}
	if z, ok := g["ground_found_z_m"]; ok {
		lidar.Values = append(lidar.Values, KeyValue{"ground z m", strconv.FormatFloat(z, 'f', 3, 64)})
	}
	if tilt, ok := g["ground_tilt_deg"]; ok {
		lidar.Values = append(lidar.Values, KeyValue{"ground tilt deg", strconv.FormatFloat(tilt, 'f', 2, 64)})
	}
	switch {
	case g["ground_mismatch"] != 0:
		lidar.Level, lidar.Message = StatusWarn, "the ground is not where --lidar-height and --lidar-rpy put it: see the log's suggested_lidar_height_m and suggested_lidar_rpy"
	case len(lidar.Values) == 0:
		lidar.Message = "no ground check yet"
	}

	compute := Status{Level: StatusOK, Name: name(statusCompute), Message: "voxel filter and BEV on the " + st.snap.VoxelPath + ", inference on " + st.snap.Provider,
		Values: []KeyValue{
			{"voxel path", st.snap.VoxelPath}, {"inference provider", st.snap.Provider}, {"gpu", st.snap.GPU},
			{"gpu kernels", st.snap.GPUKernels}, {"gpu voxel failures", count(c["gpu_voxel_failures_total"])},
		}}
	if c["gpu_voxel_failures_total"] > 0 {
		compute.Level, compute.Message = StatusWarn, "the GPU voxel filter failed; voxel filter and BEV moved to the CPU (see the log)"
	}
	return []Status{cmd, frames, lat, lidar, compute}
}

// stoppedStatuses are what goes out when the node stops: every part STALE,
// so that an aggregator shows the node gone at once rather than after its
// timeout.
func stoppedStatuses(node string) []Status {
	parts := []string{statusCmdVel, statusFrames, statusLatency, statusLidar, statusCompute}
	out := make([]Status, len(parts))
	for i, p := range parts {
		out[i] = Status{Level: StatusStale, Name: node + ": " + p, Message: "the node stopped"}
	}
	return out
}

// statusLoop publishes the node's status to sink every period until ctx
// ends, then once more, every part STALE. A failing sink is logged when it
// starts and stops failing, never ends the loop: the status is advice,
// the commands are what matter.
func statusLoop(ctx context.Context, sink StatusSink, period time.Duration, node string, watchdog time.Duration,
	rec *telemetry.Recorder, health func(time.Time) error, log *zap.Logger) error {
	t := time.NewTicker(period)
	defer t.Stop()
	var prev map[string]float64
	last := time.Now()
	failing := false
	publish := func(now time.Time, statuses []Status) {
		err := sink.PublishStatus(now, statuses)
		switch {
		case err != nil && !failing:
			log.Warn("diagnostics: publish failed; the node's status is not getting out (logged again when it recovers)", zap.Error(err))
		case err == nil && failing:
			log.Info("diagnostics: publishing again")
		}
		failing = err != nil
	}
	for {
		select {
		case <-ctx.Done():
			publish(time.Now(), stoppedStatuses(node))
			return nil
		case now := <-t.C:
			snap := rec.Snapshot()
			publish(now, diagnose(node, nodeState{health: health(now), snap: snap, prev: prev, elapsed: now.Sub(last), watchdog: watchdog}))
			prev, last = snap.Counters, now
		}
	}
}
