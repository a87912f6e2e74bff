//go:build ros2

package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/zerohop/zerohop/agent"
	"github.com/zerohop/zerohop/ros2"
	"github.com/zerohop/zerohop/ros2/params"
	"github.com/zerohop/zerohop/ros2/rosargs"
)

// The default cmd_vel topic is relative, as teleop nodes' is:
// --ros2-namespace moves it, and the root namespace leaves it on /cmd_vel.
func TestDefaultCmdVelTopicFollowsTheNamespace(t *testing.T) {
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	ros2Flags(fs, agent.NewPlannerTuning())
	def := fs.Lookup("cmd-vel-topic").DefValue
	for ns, want := range map[string]string{"/": "/cmd_vel", "/robot1": "/robot1/cmd_vel"} {
		if got, err := (ros2.Config{NodeName: "zerohop_agent", Namespace: ns}).ResolveTopic(def); err != nil || got != want {
			t.Errorf("--cmd-vel-topic default %q in namespace %s: %q, %v; want %q", def, ns, got, err, want)
		}
	}
}

// ROS 2 output flags are checked before a participant starts: values out
// of range, and flags that need another, are refused by name.
func TestROS2FlagsRefused(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--ros2", "--twist-stamped", "--twist-stamp", "header"}, `--twist-stamp "header": want "frame" or "zero"`},
		{[]string{"--ros2", "--twist-stamp", "zero"}, "--twist-stamp zero: only with --twist-stamped"},
		{[]string{"--twist-stamped", "--twist-stamp", "zero"}, "--twist-stamp, --twist-stamped: only with --ros2"},
	} {
		fs := flag.NewFlagSet("agent", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		start := ros2Flags(fs, agent.NewPlannerTuning())
		if err := fs.Parse(tc.args); err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		if _, err := start(zap.NewNop(), zap.NewAtomicLevel(), &rosargs.Args{}, testPairing(t)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want an error with %q", tc.args, err, tc.want)
		}
	}
}

// noEnv is an environment without ROS variables.
func noEnv(string) (string, bool) { return "", false }

// A launch file's Node(name=, namespace=, parameters=, remappings=) gives
// the agent --ros-args; they name the node, move cmd_vel and set the
// flags, use_sim_time included.
func TestROSArgsConfigureTheCmdVelPublisher(t *testing.T) {
	for _, tc := range []struct {
		name      string
		args      []string
		node      string // full name
		topic     string // cmd_vel, resolved
		zeroStamp bool
		simTime   bool // the commands are stamped from /clock once the participant is up
	}{
		{
			// Node(executable='agent', name='front_agent', namespace='robot1',
			//   parameters=[{...}], remappings=[('cmd_vel', '/diff_drive_controller/cmd_vel')])
			"launch_ros",
			[]string{"--ros-args", "-r", "__node:=front_agent", "-r", "__ns:=/robot1",
				"--params-file", "testdata/launch_params_front_agent.yaml", "-r", "cmd_vel:=/diff_drive_controller/cmd_vel"},
			"/robot1/front_agent", "/diff_drive_controller/cmd_vel", false, true,
		},
		{
			// SetUseSimTime(True) in a launch file: use_sim_time for every
			// node; plain Twist has no stamp.
			"use_sim_time without TwistStamped",
			[]string{"--ros2", "--ros-args", "-p", "use_sim_time:=True"},
			"/zerohop_agent", "/cmd_vel", false, true,
		},
		{
			"use_sim_time with a zero stamp asked for",
			[]string{"--ros2", "--twist-stamped", "--twist-stamp", "zero", "--use-sim-time"},
			"/zerohop_agent", "/cmd_vel", true, true,
		},
		{
			"a relative remapping under the flag's namespace",
			[]string{"--ros2", "--ros2-namespace", "/r2", "--ros-args", "-r", "cmd_vel:=base/cmd_vel"},
			"/r2/zerohop_agent", "/r2/base/cmd_vel", false, false,
		},
		{
			"no ROS arguments",
			[]string{"--ros2", "--twist-stamped"},
			"/zerohop_agent", "/cmd_vel", false, false,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := flag.NewFlagSet("agent", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			settings := registerROS2Flags(fs)
			fs.Float64("lidar-height", 0, "")
			ra, err := rosargs.ParseFlags(fs, tc.args, rosOptions)
			if err != nil {
				t.Fatal(err)
			}
			set, err := settings(noEnv, ra)
			if err != nil || !set.enabled {
				t.Fatalf("enabled %v, %v", set.enabled, err)
			}
			cfg, opts := set.cfg, set.twist
			if got := rosargs.FullName(rosargs.Node(cfg.Remaps, cfg.Namespace, cfg.NodeName)); got != tc.node {
				t.Errorf("node %s, want %s", got, tc.node)
			}
			if got, err := cfg.ResolveTopic(opts.Topic); err != nil || got != tc.topic {
				t.Errorf("cmd_vel on %q (%v), want %q", got, err, tc.topic)
			}
			if opts.ZeroStamp != tc.zeroStamp || set.simTime != tc.simTime {
				t.Errorf("ZeroStamp %v, sim time %v; want %v, %v", opts.ZeroStamp, set.simTime, tc.zeroStamp, tc.simTime)
			}
		})
	}
}

func TestROSArgsRefused(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--ros2", "--twist-stamped", "--twist-stamp", "frame", "--ros-args", "-p", "use_sim_time:=true"}, "--use-sim-time with --twist-stamp frame"},
		{[]string{"--ros2", "--ros-args", "-r", "cmd_vel:=/cmd-vel"}, `-r "cmd_vel:=/cmd-vel": name "/cmd-vel"`},
		{[]string{"--ros2", "--cmd-vel-topic", "x/", "--ros-args", "-r", "x:=/y"}, `--cmd-vel-topic: ros2: topic "x/"`},
		{[]string{"--ros-args", "-p", "cmd_vel_topic:=/base/cmd_vel"}, "--cmd-vel-topic: only with --ros2"},
	} {
		fs := flag.NewFlagSet("agent", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		settings := registerROS2Flags(fs)
		ra, err := rosargs.ParseFlags(fs, tc.args, rosOptions)
		if err == nil {
			_, err = settings(noEnv, ra)
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want an error with %q", tc.args, err, tc.want)
		}
	}
}

// The command line launch_ros builds from docs/ros2-launch/zerohop.launch.py
// for the agent parses: every parameter in the example file names a flag
// and holds a value it takes. (--leaf 500 then stops the agent at the
// first check after parsing, before anything starts.)
func TestLaunchExampleParses(t *testing.T) {
	args := []string{"--ros-args", "-r", "__node:=zerohop_agent",
		"--params-file", "../../docs/ros2-launch/params.yaml", "-r", "cmd_vel:=/diff_drive_controller/cmd_vel"}
	err := run(append([]string{"--leaf", "500"}, args...))
	if err == nil || !strings.Contains(err.Error(), "--leaf 500") {
		t.Fatalf("run: %v, want the --leaf check's error", err)
	}

	// And the example's settings reach the flags and the publisher.
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	settings := registerROS2Flags(fs)
	lidarFrame := fs.String("lidar-frame", "", "")
	watchdog := fs.Duration("watchdog", 0, "")
	pairTolerance := fs.Duration("pair-tolerance", 0, "")
	lidarOnly := fs.Bool("lidar-only", false, "")
	tuning, err := plannerFlags(fs)
	if err != nil {
		t.Fatal(err)
	}
	ra, err := rosargs.ParseFlags(fs, args, rosOptions)
	if err != nil {
		t.Fatal(err)
	}
	set, err := settings(noEnv, ra)
	if err != nil {
		t.Fatal(err)
	}
	cfg, opts, enabled := set.cfg, set.twist, set.enabled
	topic, err := cfg.ResolveTopic(opts.Topic)
	if !enabled || !opts.Stamped || opts.ZeroStamp || err != nil || topic != "/diff_drive_controller/cmd_vel" {
		t.Errorf("enabled %v, %+v on %q (%v)", enabled, opts, topic, err)
	}
	if *lidarFrame != "velodyne" || *watchdog != 200*time.Millisecond || *pairTolerance != 20*time.Millisecond || *lidarOnly {
		t.Errorf("lidar frame %q, watchdog %v, pair tolerance %v, LiDAR only %v", *lidarFrame, *watchdog, *pairTolerance, *lidarOnly)
	}
	if c := tuning.Config(); c.MaxSpeed != 0.5 || c.MaxYawRate != 0.8 || c.StopDistance != 1 || c.SlowDistance != 3.5 || tuning.Check() != nil {
		t.Errorf("planner settings %+v (%v)", c, tuning.Check())
	}
}

// The agent's status goes to /diagnostics once a second by default, in
// any namespace; 0 turns it off; the flags need --ros2 like the others.
func TestDiagnosticsFlags(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		period time.Duration
		topic  string
		err    string
	}{
		{[]string{"--ros2"}, time.Second, "/diagnostics", ""},
		{[]string{"--ros2", "--ros2-namespace", "/robot1"}, time.Second, "/diagnostics", ""},
		{[]string{"--ros2", "--diagnostics-period", "0"}, 0, "/diagnostics", ""},
		{[]string{"--ros2", "--ros-args", "-p", "diagnostics_period:=0.5", "-r", "/diagnostics:=/robot1/diagnostics"}, 500 * time.Millisecond, "/robot1/diagnostics", ""},
		// diagnostic_updater's own parameter, as bring-up files set it.
		{[]string{"--ros2", "--ros-args", "-p", "diagnostic_updater.period:=2.0"}, 2 * time.Second, "/diagnostics", ""},
		{[]string{"--ros2", "--diagnostics-period", "5ms"}, 0, "", "--diagnostics-period 5ms: want 10ms to 1h"},
		{[]string{"--ros2", "--diagnostics-topic", "diag nostics"}, 0, "", "--diagnostics-topic"},
		{[]string{"--diagnostics-period", "2s"}, 0, "", "--diagnostics-period: only with --ros2"},
	} {
		fs := flag.NewFlagSet("agent", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		settings := registerROS2Flags(fs)
		ra, err := rosargs.ParseFlags(fs, tc.args, rosOptions)
		if err != nil {
			t.Fatal(err)
		}
		set, err := settings(noEnv, ra)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: %v, want an error with %q", tc.args, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.args, err)
			continue
		}
		topic, err := set.cfg.ResolveTopic(set.diag.Topic)
		if set.diagPeriod != tc.period || err != nil || topic != tc.topic {
			t.Errorf("%q: period %v, topic %q (%v); want %v, %q", tc.args, set.diagPeriod, topic, err, tc.period, tc.topic)
		}
	}
}

// With --ros2 the agent answers ros2 param with its flags as it runs with
// them, -p values included. The client is ros2/testdata/paramclient, a
// stand-in for rmw_cyclonedds's service client.
func TestAgentServesItsFlagsAsParameters(t *testing.T) {
	requireORTCache(t)
	client := buildParamClient(t)
	loopback, err := filepath.Abs("../../ros2/testdata/loopback.xml")
	if err != nil {
		t.Fatal(err)
	}
	domain := fmt.Sprint(200 + os.Getpid()%30)
	t.Setenv("CYCLONEDDS_URI", "file://"+loopback)
	t.Setenv("ROS_DOMAIN_ID", domain)
	done := make(chan error, 1)
	go func() {
		done <- run([]string{"--duration", "4s", "--http", "127.0.0.1:0", "--camera", "synthetic", "--log-level", "error", "--ros2",
			"--ros-args", "-r", "__ns:=/t", "-p", "watchdog:=0.3", "-p", "lidar_height:=0.62"})
	}()
	call := func(args ...string) ([]byte, error) {
		return exec.Command(client, append([]string{domain, "/t/zerohop_agent"}, args...)...).Output()
	}
	out, err := call("get", "watchdog", "ros2", "lidar_height")
	if err != nil {
		select {
		case rerr := <-done:
			t.Fatalf("paramclient: %v\n%s\nrun: %v", err, out, rerr)
		case <-time.After(5 * time.Second):
		}
		t.Fatalf("paramclient: %v\n%s", err, out)
	}
	want := "available\n" +
		"value\t3\t0\t0\t0.29999999999999999\t\t0\n" + // seconds
		"value\t1\t1\t0\t0\t\t0\n" +
		"value\t3\t0\t0\t0.62\t\t0\n" +
		"done\n"
	if string(out) != want {
		t.Errorf("ros2 param get:\n%s\nwant\n%s", out, want)
	}
	// The node's name is the node, not a parameter: not declared, so the
	// answer is empty.
	if out, err = call("get", "ros2_node_name"); err != nil || string(out) != "available\ndone\n" {
		t.Errorf("ros2 param get ros2_node_name: %v\n%s", err, out)
	}
	// The log level and the planner's limits change while the agent
	// runs; the watchdog does not.
	out, err = call("set", "log_level=warn", "watchdog=0.5", "max_speed=double:0.5")
	if err != nil || !strings.HasPrefix(string(out), "available\nresult\t1\t\nresult\t0\tparameter 'watchdog' is read-only") ||
		!strings.HasSuffix(string(out), "\nresult\t1\t\ndone\n") {
		t.Errorf("ros2 param set: %v\n%s", err, out)
	}
	if out, err = call("get", "max_speed"); err != nil || string(out) != "available\nvalue\t3\t0\t0\t0.5\t\t0\ndone\n" {
		t.Errorf("ros2 param get max_speed after the set: %v\n%s", err, out)
	}
	if out, err = call("get", "log_level"); err != nil || string(out) != "available\nvalue\t4\t0\t0\t0\twarn\t0\ndone\n" {
		t.Errorf("ros2 param get log_level after the set: %v\n%s", err, out)
	}
	if err := <-done; err != nil {
		t.Fatal("run:", err)
	}
}

// log_level is the one parameter set while the agent runs: it changes the
// logger's level, and a name that is not a level changes nothing.
func TestLogLevelParameterSetsTheLevel(t *testing.T) {
	level := zap.NewAtomicLevelAt(zap.InfoLevel)
	set, _, _, err := paramSet(t, level)
	if err != nil {
		t.Fatal(err)
	}
	str := func(s string) params.Value { return params.Value{Type: params.String, String: s} }
	if ok, reason := set.Set("log_level", str("DEBUG")); !ok || level.Level() != zap.DebugLevel {
		t.Errorf("set log_level DEBUG: %v %q, level %v", ok, reason, level.Level())
	}
	if ok, reason := set.Set("log_level", str("loud")); ok || !strings.Contains(reason, "want debug, info, warn or error") || level.Level() != zap.DebugLevel {
		t.Errorf("set log_level loud: %v %q, level %v", ok, reason, level.Level())
	}
	if ok, _ := set.Set("watchdog", params.Value{Type: params.Double, Double: 1}); ok {
		t.Error("watchdog was set while running")
	}
}

// The planner's settings are parameters of their flags' types, set while
// the agent runs; a value the planner refuses leaves the parameter as it
// was, with the reason.
func TestPlannerParametersSetTheTuning(t *testing.T) {
	level := zap.NewAtomicLevel()
	set, tuning, _, err := paramSet(t, level)
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := set.Get("max_speed"); !ok || p.ReadOnly || p.Value != (params.Value{Type: params.Double, Double: 1}) {
		t.Fatalf("max_speed: %+v, declared %v; want a writable double 1", p, ok)
	}
	if p, ok := set.Get("turn_in_place"); !ok || p.ReadOnly || p.Value != (params.Value{Type: params.Bool}) || p.Range != nil {
		t.Fatalf("turn_in_place: %+v, declared %v; want a writable bool false", p, ok)
	}
	if p, _ := set.Get("max_speed"); p.Range == nil || *p.Range != (params.Range{From: 0.001, To: 20}) {
		t.Errorf("max_speed's range %+v, want 0.001 to 20 (rqt_reconfigure's slider)", p.Range)
	}
	double := func(v float64) params.Value { return params.Value{Type: params.Double, Double: v} }
	for _, tc := range []struct {
		name   string
		v      params.Value
		reason string // "": accepted
	}{
		{"max_speed", double(0.4), ""},
		{"turn_in_place", params.Value{Type: params.Bool, Bool: true}, ""},
		{"max_speed", double(0), "parameter 'max_speed' = 0: want above 0 up to 20 m/s"},
		{"max_speed", params.Value{Type: params.Integer, Integer: 1}, "parameter 'max_speed' is of type double, not integer (write 1.0)"},
		{"stop_distance", double(5), "parameter 'stop_distance' = 5: must be below slow_distance (3 m); raise slow_distance first, or set both in one set_parameters_atomically call"},
	} {
		ok, reason := set.Set(tc.name, tc.v)
		if ok != (tc.reason == "") || reason != tc.reason {
			t.Errorf("set %s %s: %v %q, want %q", tc.name, tc.v.Format(), ok, reason, tc.reason)
		}
	}
	c := tuning.Config()
	if c.MaxSpeed != 0.4 || !c.TurnInPlace || c.StopDistance != 0.8 {
		t.Errorf("planner settings after the sets: %+v", c)
	}
	if p, _ := set.Get("max_speed"); p.Value.Double != 0.4 {
		t.Errorf("max_speed reads %v after the sets, want 0.4", p.Value.Format())
	}

	// An atomic set is all or nothing, judged as a whole.
	str := func(s string) params.Value { return params.Value{Type: params.String, String: s} }
	for _, tc := range []struct {
		names  []string
		values []params.Value
		reason string // "": accepted
	}{
		{[]string{"stop_distance", "slow_distance"}, []params.Value{double(4), double(6)}, ""}, // past each other's old values
		{[]string{"max_speed", "stop_distance"}, []params.Value{double(0.3), double(9)},
			"parameters max_speed, stop_distance: stop_distance 9 m must be below slow_distance 6 m (none was set)"},
		{[]string{"max_speed", "log_level"}, []params.Value{double(0.3), str("loud")},
			`parameters max_speed, log_level: log_level: "loud": want debug, info, warn or error (none was set)`},
		{[]string{"log_level", "max_speed"}, []params.Value{str("debug"), double(0.35)}, ""},
	} {
		ok, reason := set.SetAtomically(tc.names, tc.values)
		if ok != (tc.reason == "") || reason != tc.reason {
			t.Errorf("set atomically %v: %v %q, want %q", tc.names, ok, reason, tc.reason)
		}
	}
	if c := tuning.Config(); c.StopDistance != 4 || c.SlowDistance != 6 || c.MaxSpeed != 0.35 || level.Level() != zap.DebugLevel {
		t.Errorf("after the atomic sets: %+v, log level %v", c, level.Level())
	}
	for name, want := range map[string]float64{"max_speed": 0.35, "stop_distance": 4, "slow_distance": 6} {
		if p, _ := set.Get(name); p.Value.Double != want {
			t.Errorf("%s reads %v after the atomic sets, want %v", name, p.Value.Format(), want)
		}
	}
}

// paramSet is the parameters paramOptions makes of a flag set with the
// agent's log level, diagnostics period, watchdog, pairing tolerance
// and planner flags, as the defaults set them.
func paramSet(t *testing.T, level zap.AtomicLevel) (*params.Set, *agent.PlannerTuning, *agent.PairTuning, error) {
	t.Helper()
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	fs.String("log-level", "info", "")
	fs.String("ros2-node-name", "zerohop_agent", "")
	fs.Duration("diagnostics-period", time.Second, "")
	fs.Duration("watchdog", time.Second, "")
	fs.Duration("pair-tolerance", 0, "")
	tuning, err := plannerFlags(fs)
	if err != nil {
		t.Fatal(err)
	}
	pairing := testPairing(t)
	set, err := params.FromFlags(fs, paramOptions(level, tuning, pairing))
	return set, tuning, pairing, err
}

// testPairing is the pairing tolerance of an agent with the default
// flags (200 ms watchdog).
func testPairing(t *testing.T) *agent.PairTuning {
	t.Helper()
	p, err := agent.NewPairTuning(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// pair_tolerance is set while the agent runs, alone or with the
// planner's settings in one atomic call; a value the pairing refuses
// (past half the 200 ms watchdog) changes nothing, with the reason.
func TestPairToleranceParameterSetsThePairing(t *testing.T) {
	set, tuning, pairing, err := paramSet(t, zap.NewAtomicLevel())
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := set.Get("pair_tolerance"); !ok || p.ReadOnly {
		t.Fatalf("pair_tolerance: %+v, declared %v; want writable", p, ok)
	}
	double := func(v float64) params.Value { return params.Value{Type: params.Double, Double: v} }
	if ok, reason := set.Set("pair_tolerance", double(0.05)); !ok || pairing.InForce() != 50*time.Millisecond {
		t.Errorf("set pair_tolerance 0.05: %v %q, in force %v", ok, reason, pairing.InForce())
	}
	if ok, reason := set.Set("pair_tolerance", double(0.15)); ok || !strings.Contains(reason, "want 1ms up to half the watchdog period, 100ms") || pairing.InForce() != 50*time.Millisecond {
		t.Errorf("set pair_tolerance 0.15: %v %q, in force %v; want refused, 50ms kept", ok, reason, pairing.InForce())
	}
	ok, reason := set.SetAtomically([]string{"max_speed", "pair_tolerance"}, []params.Value{double(0.3), double(0.2)})
	if ok || !strings.Contains(reason, "pair_tolerance 0.2 s") || tuning.Config().MaxSpeed != 1 || pairing.InForce() != 50*time.Millisecond {
		t.Errorf("atomic max_speed 0.3, pair_tolerance 0.2: %v %q; max speed %v, pairing %v: want neither set", ok, reason, tuning.Config().MaxSpeed, pairing.InForce())
	}
	if ok, reason := set.SetAtomically([]string{"max_speed", "pair_tolerance"}, []params.Value{double(0.3), double(0)}); !ok ||
		tuning.Config().MaxSpeed != 0.3 || pairing.InForce() != agent.DefaultPairTolerance {
		t.Errorf("atomic max_speed 0.3, pair_tolerance 0 (the default): %v %q; max speed %v, pairing %v", ok, reason, tuning.Config().MaxSpeed, pairing.InForce())
	}
}
