package camera

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/zerohop/zerohop/handles/transport"
	"github.com/zerohop/zerohop/ros2"
	"github.com/zerohop/zerohop/ros2/params"
	"github.com/zerohop/zerohop/ros2/tf"
	"github.com/zerohop/zerohop/telemetry/status"
)

// ROS2NodeConfig is what a camera process fed by ROS 2 drivers adds to
// NodeConfig (whose Source is "ros2").
type ROS2NodeConfig struct {
	DDS        ros2.Config // domain and discovery (ros2.ConfigFromEnv)
	ImageTopic string      // "" = not subscribed
	// PointsTopics are the LiDARs' PointCloud2 topics (none = nil);
	// several are merged into one cloud in MergeFrame, which they need.
	PointsTopics []string
	// ScanTopics are planar LiDARs' sensor_msgs/LaserScan topics, read
	// into the points stream instead of PointsTopics (which must then be
	// nil), their clouds marked planar; none = nil. Several are merged
	// into one cloud in MergeFrame (ROS2SourceConfig.MergeFrame), which
	// they need.
	ScanTopics []string
	MergeFrame string
	// FixedFrame, if not "", deskews each scan, and each cloud with a
	// per-point time field, by the sensor's motion in this frame (odom),
	// from /tf and /tf_static: see ROS2SourceConfig.FixedFrame
	// (--ros2-fixed-frame), TimeField and TimeUnit (--ros2-time-field,
	// --ros2-time-unit).
	FixedFrame string
	TimeField  string
	TimeUnit   float64
	// MaxPoints and MaxImageBytes size the slots; larger messages are
	// dropped and counted (TooLarge).
	MaxPoints, MaxImageBytes int
	// HandlesTopic, if set, also publishes every handle there as
	// zerohop_msgs/SlotHandle while a ROS subscriber is matched.
	HandlesTopic string
	// ImageMirrorTopic and PointsMirrorTopic, if set, republish every
	// frame as a full Image / PointCloud2 (packed XYZI float32) there, but
	// only while a ROS subscriber is matched, e.g. for rviz.
	ImageMirrorTopic, PointsMirrorTopic string
	// MirrorReliability is the mirrors' reliability
	// (--ros2-mirror-reliability); zero = BEST_EFFORT (sensor data QoS,
	// KEEP_LAST 5), which RELIABLE subscribers (rviz2's default) do not
	// match. ros2.Reliable (KEEP_LAST 1) matches both kinds and still never
	// makes the frame path wait: a subscriber that falls behind misses
	// frames (ros2.MirrorWriter).
	MirrorReliability ros2.Reliability
	QoS               ros2.QoS // of the sensor subscriptions; zero = sensor data QoS
	// StampOnReceipt: see ROS2SourceConfig.StampOnReceipt (--ros2-stamp receipt).
	StampOnReceipt bool
	// Intensity: see ROS2SourceConfig.Intensity (--ros2-intensity-field,
	// --ros2-intensity-scale); the zero value reads "intensity" as is.
	Intensity ROS2Intensity
	// DiagnosticsPeriod, if not 0, publishes each driver topic's status
	// (topicStatus) as diagnostic_msgs/DiagnosticArray on
	// DiagnosticsTopic (default /diagnostics) this often, and every part
	// STALE when the node stops.
	DiagnosticsPeriod time.Duration
	DiagnosticsTopic  string
	// SimTime follows a simulator's /clock (use_sim_time): the
	// diagnostics and /parameter_events are stamped with its time, as an
	// rclcpp node's are ({0, 0} before the first /clock).
	SimTime bool
	// Parameters, if not nil, are served to `ros2 param` (read-only: the
	// node reads them at start).
	Parameters *params.Set
	// Rosout also publishes the node's log on /rosout (rcl_interfaces/Log)
	// at LogLevel (nil: the logger's level), for rqt_console.
	Rosout   bool
	LogLevel zapcore.LevelEnabler
}

// CheckLidarTopics checks the list of flag (--ros2-points-topic or
// --ros2-scan-topic): no empty name, each topic once as resolved against
// the node (scan and /scan are one topic in the root namespace).
func CheckLidarTopics(dds ros2.Config, flag string, topics []string) error {
	seen := make(map[string]string, len(topics))
	for _, t := range topics {
		if t == "" {
			return fmt.Errorf("%s %q: an empty topic name in the list", flag, strings.Join(topics, ","))
		}
		name, err := dds.ResolveTopic(t)
		if err != nil {
			return fmt.Errorf("%s: %w", flag, err)
		}
		if first, ok := seen[name]; ok {
			return fmt.Errorf("%s: %q and %q are one topic (%s): give each LiDAR once", flag, first, t, name)
		}
		seen[name] = t
	}
	return nil
}

// RunROS2Node runs a camera process whose frames come from ROS 2 topics:
// shared pools sized by rc, the unix socket server and metrics as in
// RunNode, until ctx is done. cfg.Rate only sizes the slot count (the
// drivers set the pace); cfg.Frames and cfg.Transport "copy" are not
// supported.
func RunROS2Node(ctx context.Context, cfg NodeConfig, rc ROS2NodeConfig) error {
	log := cfg.Log
	if log == nil {
		log = zap.NewNop()
	}
	if cfg.Transport != "" && cfg.Transport != "unix" {
		return fmt.Errorf("--transport %q: the ros2 source serves only the unix transport", cfg.Transport)
	}
	if cfg.Frames != 0 {
		return errors.New("--frames: not supported with the ros2 source (the drivers set the pace)")
	}
	type topicFlag struct{ flag, topic, resolved string }
	if len(rc.PointsTopics) == 0 && rc.ImageTopic == "" && len(rc.ScanTopics) == 0 {
		return errors.New("ros2 source: neither a points, a scan nor an image topic")
	}
	// One LiDAR stream: the points topics or the scan topics feed it.
	if len(rc.ScanTopics) > 0 && len(rc.PointsTopics) > 0 {
		return fmt.Errorf(`--ros2-scan-topic %q and --ros2-points-topic %q: the camera has one LiDAR stream, fed by one kind: give --ros2-points-topic "" (or leave it at its default) with a scan topic`,
			strings.Join(rc.ScanTopics, ","), strings.Join(rc.PointsTopics, ","))
	}
	lidarFlag, lidarTopics := "--ros2-points-topic", rc.PointsTopics
	if len(rc.ScanTopics) > 0 {
		lidarFlag, lidarTopics = "--ros2-scan-topic", rc.ScanTopics
	}
	lidars := []topicFlag{{lidarFlag, "", ""}}
	if len(lidarTopics) > 0 {
		lidars = lidars[:0]
		for _, t := range lidarTopics {
			lidars = append(lidars, topicFlag{lidarFlag, t, ""})
		}
	}
	lidar := lidars[0]
	if len(lidarTopics) > 1 && rc.MergeFrame == "" {
		return fmt.Errorf("%s %q: %d LiDARs are merged into one cloud in a frame on the robot: give --ros2-merge-frame (e.g. base_link)", lidarFlag, strings.Join(lidarTopics, ","), len(lidarTopics))
	}
	if rc.MergeFrame != "" && len(lidarTopics) == 0 {
		return fmt.Errorf("--ros2-merge-frame %q: merges LiDARs' scans or clouds, and neither --ros2-scan-topic nor --ros2-points-topic is given", rc.MergeFrame)
	}
	if rc.FixedFrame != "" && lidar.topic == "" {
		return fmt.Errorf("--ros2-fixed-frame %q: deskews the LiDAR's clouds or scans, and neither --ros2-points-topic nor --ros2-scan-topic is given", rc.FixedFrame)
	}
	if cfg.PlanarLidar && lidar.topic == "" {
		return errors.New(`--planar-lidar with --source ros2: give the planar LiDAR's topic, --ros2-scan-topic (sensor_msgs/LaserScan) or --ros2-points-topic (sensor_msgs/PointCloud2 of its scans)`)
	}
	if err := rc.Intensity.check(); err != nil {
		return err
	}
	// Topics resolve against the node ("points" in /robot1 is
	// /robot1/points), so compare and log the resolved names. A bad node
	// name or namespace is the node's error, not a topic flag's.
	if err := rc.DDS.Validate(); err != nil {
		return err
	}
	if err := CheckLidarTopics(rc.DDS, lidarFlag, lidarTopics); err != nil {
		return err
	}
	inputs := append(lidars, topicFlag{"--ros2-image-topic", rc.ImageTopic, ""})
	mirrors := []topicFlag{{"--ros2-points-mirror-topic", rc.PointsMirrorTopic, ""}, {"--ros2-image-mirror-topic", rc.ImageMirrorTopic, ""}}
	for _, fs := range [][]topicFlag{inputs, mirrors} {
		for i := range fs {
			f := &fs[i]
			if f.topic == "" {
				continue
			}
			var err error
			if f.resolved, err = rc.DDS.ResolveTopic(f.topic); err != nil {
				return fmt.Errorf("%s: %w", f.flag, err)
			}
		}
	}
	lidars = inputs[:len(lidars)] // resolved
	lidarNames := make([]string, len(lidars))
	for i, l := range lidars {
		lidarNames[i] = l.resolved
	}
	// A mirror on a topic the camera reads would feed it its own frames
	// (its reader counts as the mirror's subscriber), without end.
	for _, m := range mirrors {
		for _, in := range inputs {
			if m.resolved != "" && m.resolved == in.resolved {
				return fmt.Errorf("%s %q is also %s %q (both %s): the camera would read its own mirror; give the mirror a topic of its own",
					m.flag, m.topic, in.flag, in.topic, m.resolved)
			}
		}
	}
	sizes := PoolSizes{}
	if lidar.topic != "" {
		// --ros2-max-points is per scan: merged scans share a slot.
		sizes.Points = rc.MaxPoints * len(lidars)
	}
	if rc.ImageTopic != "" {
		sizes.ImageBytes = rc.MaxImageBytes
	}
	// A scan topic's clouds are planar; so are a PointCloud2 topic's with
	// --planar-lidar (a 2D scanner whose driver publishes PointCloud2, or
	// laser_geometry's projection of a LaserScan).
	planar := cfg.PlanarLidar || len(rc.ScanTopics) > 0
	cam, err := New(Config{Source: sizes, PlanarLidar: planar, Rate: cfg.Rate, Slots: cfg.Slots, Subscribers: cfg.Subscribers, Shared: true, Lock: cfg.Lock,
		Checksum: cfg.Checksum, Log: log})
	if err != nil {
		return err
	}
	defer cam.Close()
	topics := cam.Topics()
	srv, err := transport.NewServer(transport.ServerConfig{Path: cfg.Socket, AllowGID: cfg.AllowGID, Topics: topics,
		Absent: cam.AbsentTopics(), Subscribers: cfg.Subscribers, Log: log})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	served := make(chan error, 1)
	go func() { // a server that fails ends the node: the process exits and is restarted, rather than run on unreachable
		err := srv.Serve(ctx)
		if err != nil {
			cancel()
		}
		served <- err
	}()
	stopServing := func() error { cancel(); return <-served }

	reg := prometheus.NewRegistry()
	metricsLn, err := listenMetrics(cfg.MetricsAddr)
	if err != nil {
		return errors.Join(err, stopServing())
	}
	defer closeListener(metricsLn)
	defer serveMetrics(ctx, metricsLn, reg, cam, srv, log)()
	p, err := ros2.NewParticipant(rc.DDS, log)
	if err != nil {
		return errors.Join(err, stopServing())
	}
	defer p.Close()
	if rc.Rosout { // what is logged from here on goes to /rosout too
		rw, err := p.NewRosoutWriter(ros2.RosoutOptions{})
		if err != nil {
			return errors.Join(fmt.Errorf("camera: /rosout: %w", err), stopServing())
		}
		defer rw.Close() // before the participant
		level := rc.LogLevel
		if level == nil {
			level = log.Core() // the logger's own level
		}
		log = zap.New(zapcore.NewTee(log.Core(), rw.Core(level)))
	}
	var clock func() time.Time // nil: this machine's
	if rc.SimTime {
		sim, err := p.FollowSimClock()
		if err != nil {
			return errors.Join(fmt.Errorf("camera: /clock: %w", err), stopServing())
		}
		defer sim.Close()
		clock = sim.Now
	}
	if rc.Parameters != nil {
		ps, err := p.ServeParameters(rc.Parameters, ros2.ParameterOptions{Clock: clock})
		if err != nil {
			return errors.Join(fmt.Errorf("camera: parameter services: %w", err), stopServing())
		}
		defer ps.Close()
	}
	scfg := ROS2SourceConfig{ImageTopic: rc.ImageTopic, QoS: rc.QoS,
		StampOnReceipt: rc.StampOnReceipt, Intensity: rc.Intensity, Checksum: cfg.Checksum, Log: log}
	// Absolute names for the logs (a subscription resolves the same way).
	if len(rc.ScanTopics) > 0 {
		scfg.ScanTopics = lidarNames
	} else if len(rc.PointsTopics) > 0 {
		scfg.PointsTopics = lidarNames
	}
	var trs *ros2.Transforms
	if rc.FixedFrame != "" || rc.MergeFrame != "" {
		if rc.FixedFrame != "" && rc.StampOnReceipt && !rc.SimTime {
			log.Warn("camera: --ros2-fixed-frame with --ros2-stamp receipt: deskewing looks /tf up at the LiDAR's own stamps (header and per-point times), so the LiDAR's clock and the base's must agree; with a LiDAR clock off by more than 0.1 s its scans and clouds are used as sent (counted, logged)")
		}
		var err error
		trs, err = p.ListenTransforms(tf.BufferConfig{Extrapolate: DeskewExtrapolation})
		if err != nil {
			return errors.Join(fmt.Errorf("camera: /tf: %w", err), stopServing())
		}
		defer trs.Close() // after the source: its callback looks up in it
		scfg.FixedFrame, scfg.Transforms, scfg.TimeField, scfg.TimeUnit = rc.FixedFrame, trs, rc.TimeField, rc.TimeUnit
		scfg.MergeFrame = rc.MergeFrame
	}
	// Absolute names for the logs (a subscription resolves the same way).
	for _, t := range []*string{&scfg.ImageTopic} {
		if name, err := rc.DDS.ResolveTopic(*t); *t != "" && err == nil {
			*t = name
		}
	}
	if rc.HandlesTopic != "" {
		hw, err := p.NewHandleWriter(ros2.HandleWriterOptions{Topic: rc.HandlesTopic})
		if err != nil {
			return errors.Join(err, stopServing())
		}
		defer hw.Close()
		scfg.Handles = hw
	}
	for topic, name := range [2]string{rc.PointsMirrorTopic, rc.ImageMirrorTopic} {
		if name == "" {
			continue
		}
		newMirror := p.NewPointCloud2Mirror
		if topic == TopicImage {
			newMirror = p.NewImageMirror
		}
		m, err := newMirror(name, ros2.QoS{Reliability: rc.MirrorReliability})
		if err != nil {
			return errors.Join(fmt.Errorf("camera: %s mirror: %w", TopicName(topic), err), stopServing())
		}
		defer m.Close()
		scfg.Mirrors[topic] = m
	}
	src, err := NewROS2Source(p, cam, indexPublisher{srv, topics, cam}, scfg)
	if err != nil {
		return errors.Join(err, stopServing())
	}
	if err := reg.Register(src.Collector()); err != nil {
		return errors.Join(fmt.Errorf("camera: ros2 metrics: %w", err), src.Close(), stopServing())
	}
	if rc.DiagnosticsPeriod > 0 {
		diag, err := p.NewDiagnosticsWriter(ros2.DiagnosticsOptions{Topic: rc.DiagnosticsTopic})
		if err != nil {
			return errors.Join(fmt.Errorf("camera: diagnostics: %w", err), src.Close(), stopServing())
		}
		defer diag.Close() // after the loop's last publish, before the participant
		loop := topicStatusLoop(rc, clock, src, cam, srv, strings.Join(lidarNames, ", "), inputs[len(inputs)-1].resolved)
		loop.Sink, loop.Log = diag, log
		loopDone := make(chan struct{})
		go func() {
			defer close(loopDone)
			loop.Run(ctx)
		}()
		defer func() { cancel(); <-loopDone }()
	}
	log.Info("camera serving ROS 2 topics", zap.String("socket", srv.Path()),
		zap.String("points_topic", strings.Join(lidarNames, ", ")), zap.Bool("planar_lidar", planar), zap.String("fixed_frame", rc.FixedFrame),
		zap.String("merge_frame", rc.MergeFrame), zap.String("image_topic", inputs[len(inputs)-1].resolved))
	<-ctx.Done()
	// Callbacks first: no publish after the server stops.
	srcErr := src.Close()
	serveErr := stopServing()
	for i := range 2 {
		if cam.Pool(i) != nil {
			st := src.Stats(i)
			fields := []zap.Field{zap.String("topic", TopicName(i)), zap.Uint64("received", st.Received),
				zap.Uint64("published", st.Published), zap.Uint64("exhausted", st.Exhausted), zap.Uint64("unsupported", st.Unsupported),
				zap.Uint64("too_large", st.TooLarge), zap.Uint64("failed", st.Failed)}
			if i == TopicPoints && trs != nil {
				if rc.FixedFrame != "" {
					fields = append(fields, zap.Uint64("deskewed", st.Deskewed), zap.Uint64("not_deskewed", st.NotDeskewed))
				}
				if rc.MergeFrame != "" {
					fields = append(fields, zap.Uint64("no_transform", st.NoTransform), zap.Uint64("not_moved", st.NotMoved))
				}
				fields = append(fields, zap.Uint64("tf_refused", trs.Refused()), zap.Uint64("tf_time_jumps", trs.TimeJumps()))
			}
			log.Info("camera ros2 topic stopped", fields...)
		}
	}
	return errors.Join(srcErr, serveErr)
}

// topicStatusLoop is the camera's status loop: a status per driver topic
// it subscribes (points, image) and one of its subscribers every
// rc.DiagnosticsPeriod, STALE when it stops, stamped by clock (nil: this
// machine's). Sink and Log are the caller's to set.
func topicStatusLoop(rc ROS2NodeConfig, clock func() time.Time, src *ROS2Source, cam *Camera, srv *transport.Server, pointsTopic, imageTopic string) status.Loop {
	fullName := rc.DDS.FullNodeName()
	var states []topicState
	var topics []int
	for _, t := range []struct {
		topic int
		st    topicState
	}{
		{TopicPoints, topicState{part: "points", topic: pointsTopic, maxFlag: "--ros2-max-points", deskew: rc.FixedFrame != ""}},
		{TopicImage, topicState{part: "image", topic: imageTopic, maxFlag: "--ros2-max-image-bytes"}},
	} {
		if cam.Pool(t.topic) != nil {
			states, topics = append(states, t.st), append(topics, t.topic)
		}
	}
	parts := make([]string, len(states), len(states)+1)
	for i, st := range states {
		parts[i] = st.part
	}
	parts = append(parts, "subscribers")
	subs := subscribersState{socket: srv.Path()}
	loop := status.Loop{
		Period: rc.DiagnosticsPeriod,
		Collect: func(_ time.Time, elapsed time.Duration) []status.Status {
			out := make([]status.Status, len(states), len(states)+1)
			subs.delivered = 0
			for i := range states {
				st := &states[i]
				st.now, st.publishers, st.elapsed = src.Stats(topics[i]), src.Publishers(topics[i]), elapsed
				if topics[i] == TopicPoints && rc.MergeFrame != "" {
					st.scans = src.LidarInputs()
				}
				out[i] = topicStatus(fullName, *st)
				subs.delivered += st.now.Delivered - st.prev.Delivered
				st.prev, st.scansPrev = st.now, st.scans
			}
			subs.now, subs.elapsed = srv.Stats(), elapsed
			out = append(out, subscribersStatus(fullName, subs))
			subs.prev = subs.now
			return out
		},
		Stopped: status.Named(strings.TrimPrefix(fullName, "/"), fullName, parts, status.Stale, "the node stopped"),
	}
	if clock != nil {
		loop.Stamp = func(time.Time) time.Time { return clock() }
	}
	return loop
}
