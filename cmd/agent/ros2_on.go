//go:build ros2

package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/zerohop/zerohop/agent"
	"github.com/zerohop/zerohop/logging"
	"github.com/zerohop/zerohop/ros2"
	"github.com/zerohop/zerohop/ros2/params"
	"github.com/zerohop/zerohop/ros2/rosargs"
	"github.com/zerohop/zerohop/telemetry/status"
)

// The sink must keep satisfying the agent's interface.
var _ agent.CmdSink = (*ros2.TwistSink)(nil)

// ros2Flags registers the ROS 2 output flags. With --ros2 the agent
// publishes cmd_vel as geometry_msgs/Twist (or TwistStamped) and its
// status on /diagnostics through Cyclone DDS, in the domain and with the
// discovery settings of the usual ROS environment variables
// (ROS_DOMAIN_ID, ROS_AUTOMATIC_DISCOVERY_RANGE, ROS_LOCALHOST_ONLY,
// ROS_STATIC_PEERS, CYCLONEDDS_URI; ROS_DISTRO picks the graph
// announcement's GID width), as node --ros2-node-name.
func ros2Flags(fs *flag.FlagSet, tuning *agent.PlannerTuning) func(*zap.Logger, zap.AtomicLevel, *rosargs.Args, *agent.PairTuning) (ros2Out, error) {
	settings := registerROS2Flags(fs)
	return func(log *zap.Logger, level zap.AtomicLevel, ra *rosargs.Args, pairing *agent.PairTuning) (ros2Out, error) {
		set, err := settings(os.LookupEnv, ra)
		if err != nil {
			return ros2Out{}, err
		}
		if !set.enabled {
			if rules := ra.TopicRules(); len(rules) > 0 {
				log.Warn("ROS arguments: remapping rules ignored: nothing is published over ROS 2 without --ros2 (the parameter ros2: true)", zap.Stringers("rules", rules))
			}
			return ros2Out{close: func() {}, noTF: "only with --ros2"}, nil
		}
		// What ros2 param shows: every flag as the agent runs with it;
		// the log level, the planner's settings and the pairing tolerance
		// change while it runs.
		paramSet, err := params.FromFlags(fs, paramOptions(level, tuning, pairing))
		if err != nil {
			return ros2Out{}, err
		}
		p, err := ros2.NewParticipant(set.cfg, log)
		if err != nil {
			return ros2Out{}, err
		}
		// Under use_sim_time what the node stamps carries the
		// simulation's time, as an rclcpp node's does (its /clock
		// subscription closes with the participant).
		var clock func() time.Time // nil: this machine's
		if set.simTime {
			sim, err := p.FollowSimClock()
			if err != nil {
				p.Close()
				return ros2Out{}, err
			}
			clock = sim.Now
			if set.twist.Stamped && !set.twist.ZeroStamp {
				set.twist.Clock = clock
			}
		}
		paramSrv, err := p.ServeParameters(paramSet, ros2.ParameterOptions{Clock: clock})
		if err != nil {
			p.Close()
			return ros2Out{}, err
		}
		sink, err := p.NewTwistSink(set.twist)
		if err != nil {
			paramSrv.Close()
			p.Close()
			return ros2Out{}, err
		}
		out := ros2Out{sink: sink, refreshParams: func(flagNames ...string) error {
			var names []string
			for _, name := range flagNames {
				f := fs.Lookup(name)
				if f == nil {
					return fmt.Errorf("no flag --%s", name)
				}
				if err := paramSet.RefreshFromFlag(f); err != nil {
					return err
				}
				names = append(names, strings.ReplaceAll(name, "-", "_"))
			}
			return paramSrv.Announce(names)
		}, listenTF: func() (agent.TransformSource, func(), error) {
			st, err := p.ListenStaticTransforms()
			if err != nil {
				return nil, nil, err
			}
			return st, func() {
				if err := st.Close(); err != nil {
					log.Warn("ros2: close /tf_static subscription", zap.Error(err))
				}
			}, nil
		}}
		// The log on /rosout too, unless --disable-rosout-logs, as rcl.
		var rosout *ros2.RosoutWriter
		if ra == nil || !ra.NoRosout {
			if rosout, err = p.NewRosoutWriter(ros2.RosoutOptions{}); err != nil {
				sink.Close()
				paramSrv.Close()
				p.Close()
				return ros2Out{}, err
			}
			out.log = zap.New(zapcore.NewTee(log.Core(), rosout.Core(level)))
		}
		var diag *ros2.DiagnosticsWriter
		if set.diagPeriod > 0 {
			if diag, err = p.NewDiagnosticsWriter(set.diag); err != nil {
				sink.Close()
				paramSrv.Close()
				if rosout != nil {
					rosout.Close()
				}
				p.Close()
				return ros2Out{}, err
			}
			out.status, out.statusPeriod = diag, set.diagPeriod
			out.statusNode = rosargs.FullName(rosargs.Node(set.cfg.Remaps, set.cfg.Namespace, set.cfg.NodeName))
			if clock != nil {
				out.statusStamp = func(time.Time) time.Time { return clock() }
			}
		}
		// The agent publishes zero (and its last status) before it
		// returns; closing the sink waits (up to 1 s) for subscribers to
		// acknowledge it.
		out.close = func() {
			if err := sink.Close(); err != nil {
				log.Warn("ros2: close cmd_vel publisher", zap.Error(err))
			}
			if diag != nil {
				if err := diag.Close(); err != nil {
					log.Warn("ros2: close diagnostics publisher", zap.Error(err))
				}
			}
			if err := paramSrv.Close(); err != nil {
				log.Warn("ros2: close parameter services", zap.Error(err))
			}
			if rosout != nil {
				rosout.Close() // lines logged after it stay on stderr
			}
			if err := p.Close(); err != nil {
				log.Warn("ros2: close participant", zap.Error(err))
			}
		}
		return out, nil
	}
}

// ros2Settings is what the ROS 2 flags say: the participant, the cmd_vel
// publisher, the diagnostics publisher (diagPeriod 0: none); enabled is
// --ros2.
type ros2Settings struct {
	cfg        ros2.Config
	twist      ros2.TwistOptions
	diag       ros2.DiagnosticsOptions
	diagPeriod time.Duration
	simTime    bool // --use-sim-time
	enabled    bool
}

// registerROS2Flags registers the ROS 2 output flags on fs. The returned
// function, called after the flags are parsed, checks them and makes the
// participant's configuration (the ROS environment variables read through
// lookup; ra's remapping rules and enclave, nil: none) and the cmd_vel
// publisher's options; enabled is --ros2.
func registerROS2Flags(fs *flag.FlagSet) func(lookup func(string) (string, bool), ra *rosargs.Args) (ros2Settings, error) {
	var (
		enable  = fs.Bool("ros2", false, "publish cmd_vel over ROS 2 (Cyclone DDS); domain and discovery from ROS_DOMAIN_ID, ROS_AUTOMATIC_DISCOVERY_RANGE, ROS_LOCALHOST_ONLY, ROS_STATIC_PEERS, CYCLONEDDS_URI")
		topic   = fs.String("cmd-vel-topic", "cmd_vel", "ROS 2 topic for velocity commands (--ros2); a relative name resolves against --ros2-namespace (cmd_vel in /robot1 is /robot1/cmd_vel), an absolute one (/cmd_vel) does not; --ros-args -r cmd_vel:=/other moves it as it moves any ROS node's topic")
		stamped = fs.Bool("twist-stamped", false, "publish geometry_msgs/TwistStamped instead of Twist (--ros2; newer controllers, Jazzy's diff_drive_controller)")
		stampBy = fs.String("twist-stamp", "frame", `header.stamp of TwistStamped (--twist-stamped): "frame" (the default: the capture time of the frame the command comes from, this machine's clock for zero commands; under --use-sim-time leave this flag out and commands carry /clock's time: giving "frame" there is refused) or "zero" ({0,0}: diff_drive_controller stamps it on arrival with its own clock)`)
		frame   = fs.String("cmd-vel-frame", "base_link", "header.frame_id of TwistStamped commands (--twist-stamped)")
		domain  = fs.Int("ros-domain", -1, fmt.Sprintf("DDS domain id 0..%d, overriding ROS_DOMAIN_ID (--ros2; -1, the default: ROS_DOMAIN_ID, or 0 when it is unset)", ros2.MaxDomainID))
		node    = fs.String("ros2-node-name", "zerohop_agent", "ROS node name in ros2 node list / rqt_graph (--ros2; --ros-args -r __node:=NAME wins over it)")
		ns      = fs.String("ros2-namespace", "/", "ROS namespace of the agent's node (--ros2), e.g. /robot1; relative topic names resolve against it (--ros2; --ros-args -r __ns:=/NS wins over it)")
		diagPer = fs.Duration("diagnostics-period", status.DefaultPeriod, "publish the agent's status as diagnostic_msgs/DiagnosticArray this often (--ros2; 0: never), for diagnostic_aggregator, rqt_robot_monitor and Foxglove: cmd_vel (ERROR while commands are zeroed, with why), frames (rate; WARN when over 5% are dropped), latency (each stage's p50/p99/max; WARN when the end-to-end p99 plus the time between frames passes 80% of --watchdog), lidar (where the mount came from; ERROR when clouds in another frame than --lidar-frame were dropped, WARN while the ground check disagrees with the mount), compute (CPU or GPU); starting up at once, every part STALE when the agent stops. The ROS parameter diagnostic_updater.period sets it too")
		diagTop = fs.String("diagnostics-topic", "/diagnostics", "topic of the agent's status (--ros2, --diagnostics-period)")
		simTime = fs.Bool("use-sim-time", false, "the ROS graph runs on a simulator's /clock (use_sim_time, which launch files set as a parameter): with --ros2 the agent follows /clock and stamps TwistStamped commands (--twist-stamped), /diagnostics and /parameter_events with the simulation's time when each goes out, as rclcpp nodes do ({0,0} before the first /clock; --twist-stamp zero keeps commands at {0,0}); /rosout keeps this machine's clock, as rcl's does, and so does the watchdog")
	)
	return func(lookup func(string) (string, bool), ra *rosargs.Args) (ros2Settings, error) {
		fail := func(err error) (ros2Settings, error) { return ros2Settings{}, err }
		if !*enable {
			var stray []string
			fs.Visit(func(f *flag.Flag) {
				switch f.Name {
				case "cmd-vel-topic", "twist-stamped", "twist-stamp", "cmd-vel-frame", "ros-domain", "ros2-node-name", "ros2-namespace", "diagnostics-period", "diagnostics-topic":
					stray = append(stray, "--"+f.Name)
				}
			})
			if len(stray) > 0 {
				return fail(fmt.Errorf("%s: only with --ros2", strings.Join(stray, ", ")))
			}
			return ros2Settings{}, nil
		}
		var zeroStamp bool
		switch *stampBy {
		case "frame":
		case "zero":
			zeroStamp = true
		default:
			return fail(fmt.Errorf(`--twist-stamp %q: want "frame" or "zero"`, *stampBy))
		}
		if *simTime && *stamped && given(fs, "twist-stamp") && !zeroStamp {
			return fail(fmt.Errorf("--use-sim-time with --twist-stamp frame: a controller on the simulator's clock would read this machine's stamps as far in its future; leave --twist-stamp out (use_sim_time stamps commands with /clock) or give --twist-stamp zero"))
		}
		if zeroStamp && !*stamped {
			return fail(fmt.Errorf("--twist-stamp zero: only with --twist-stamped (Twist has no stamp)"))
		}
		cfg, err := ros2.ConfigFromEnv(lookup)
		if err != nil {
			return fail(err)
		}
		if *domain >= 0 {
			if *domain > ros2.MaxDomainID {
				return fail(fmt.Errorf("--ros-domain %d: want 0..%d", *domain, ros2.MaxDomainID))
			}
			cfg.Domain = uint32(*domain)
		}
		cfg.NodeName, cfg.Namespace = *node, *ns
		if ra != nil {
			cfg.Remaps = ra.Remaps
			if ra.Enclave != "" {
				cfg.Enclave = ra.Enclave
			}
		}
		if err := cfg.Validate(); err != nil {
			return fail(err)
		}
		opts := ros2.TwistOptions{Topic: *topic, Stamped: *stamped, FrameID: *frame, ZeroStamp: zeroStamp}
		if _, err := cfg.ResolveTopic(opts.Topic); err != nil {
			return fail(fmt.Errorf("--cmd-vel-topic: %w", err))
		}
		if *diagPer < 0 || (*diagPer > 0 && *diagPer < 10*time.Millisecond) || *diagPer > time.Hour {
			return fail(fmt.Errorf("--diagnostics-period %v: want 10ms to 1h (0: off)", *diagPer))
		}
		diag := ros2.DiagnosticsOptions{Topic: *diagTop}
		if _, err := cfg.ResolveTopic(diag.Topic); err != nil {
			return fail(fmt.Errorf("--diagnostics-topic: %w", err))
		}
		return ros2Settings{cfg: cfg, twist: opts, diag: diag, diagPeriod: *diagPer, simTime: *simTime, enabled: true}, nil
	}
}

// paramOptions make the agent's flags its ROS parameters: log_level, the
// planner's settings (ros2 param set /zerohop_agent max_speed 0.5) and
// pair_tolerance writable, the rest read at start.
func paramOptions(level zap.AtomicLevel, tuning *agent.PlannerTuning, pairing *agent.PairTuning) params.FlagOptions {
	writable := map[string]func(params.Value) error{rosOptions.LogLevelFlag: params.StringApply(logging.Setter(level)),
		pairToleranceFlag: func(v params.Value) error { return pairing.Set(v.Double) }}
	ranges := map[string]params.Range{} // rqt_reconfigure's sliders
	for _, s := range agent.PlannerSettings() {
		name := s.Name
		if s.Bool {
			writable[s.Flag()] = func(v params.Value) error { return tuning.SetBool(name, v.Bool) }
			continue
		}
		writable[s.Flag()] = func(v params.Value) error { return tuning.SetNumber(name, v.Double) }
		from, to, _ := s.Range()
		ranges[s.Flag()] = params.Range{From: from, To: to}
	}
	return params.FlagOptions{Aliases: rosOptions.Aliases, Hide: []string{rosOptions.NodeNameFlag, rosOptions.NamespaceFlag},
		Writable: writable, Ranges: ranges, ApplyAtomically: applyAtomically(level, tuning, pairing)}
}

// pairToleranceFlag is the flag of the pairing tolerance, pair_tolerance
// as a parameter.
const pairToleranceFlag = "pair-tolerance"

// applyAtomically puts a set_parameters_atomically request into effect
// all at once or not at all: the planner's settings judged together (so
// stop_distance and slow_distance can move past each other), the log
// level and the pairing tolerance checked before anything changes.
func applyAtomically(level zap.AtomicLevel, tuning *agent.PlannerTuning, pairing *agent.PairTuning) func([]string, []params.Value) error {
	logLevelParam := strings.ReplaceAll(rosOptions.LogLevelFlag, "-", "_")
	pairParam := strings.ReplaceAll(pairToleranceFlag, "-", "_")
	return func(names []string, values []params.Value) error {
		var newLevel *zapcore.Level
		var newPair *float64
		var planner []agent.PlannerValue
		for i, name := range names {
			switch name {
			case logLevelParam:
				l, err := logging.ParseLevel(values[i].String)
				if err != nil {
					return fmt.Errorf("%s: %w", name, err)
				}
				newLevel = &l
				continue
			case pairParam:
				if _, err := pairing.Check(values[i].Double); err != nil {
					return err
				}
				newPair = &values[i].Double
				continue
			}
			planner = append(planner, agent.PlannerValue{Name: name, Number: values[i].Double, Bool: values[i].Bool})
		}
		if len(planner) > 0 {
			if err := tuning.SetAll(planner...); err != nil {
				return err
			}
		}
		if newPair != nil { // checked above; the window between is this call's
			if err := pairing.Set(*newPair); err != nil {
				return err
			}
		}
		if newLevel != nil {
			level.SetLevel(*newLevel)
		}
		return nil
	}
}
