//go:build ros2

package main

import (
	"flag"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zerohop/zerohop/camera"
	"github.com/zerohop/zerohop/internal/sockdir"
	"github.com/zerohop/zerohop/ros2"
	"github.com/zerohop/zerohop/ros2/rosargs"
)

// noEnv is an environment without ROS variables.
func noEnv(string) (string, bool) { return "", false }

func TestMirrorReliabilityFlag(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want ros2.Reliability
	}{
		{"the default is best-effort", nil, ros2.BestEffort},
		{"best-effort", []string{"--ros2-mirror-reliability", "best-effort"}, ros2.BestEffort},
		{"reliable", []string{"--ros2-mirror-reliability=reliable"}, ros2.Reliable},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rc := parseROS2Flags(t, c.args)
			if rc.MirrorReliability != c.want {
				t.Errorf("MirrorReliability = %v, want %v", rc.MirrorReliability, c.want)
			}
		})
	}
}

// The default topics are relative, as ROS drivers' are: --ros2-namespace
// moves them, and the root namespace leaves them where they were.
func TestDefaultTopicsFollowTheNamespace(t *testing.T) {
	for _, c := range []struct {
		args          []string
		points, image string
	}{
		{nil, "/points", "/image_raw"},
		{[]string{"--ros2-namespace", "/robot1"}, "/robot1/points", "/robot1/image_raw"},
		{[]string{"--ros2-namespace", "/robot1", "--ros2-points-topic", "/points"}, "/points", "/robot1/image_raw"},
	} {
		rc := parseROS2Flags(t, c.args)
		points, err1 := rc.DDS.ResolveTopic(strings.Join(rc.PointsTopics, ","))
		image, err2 := rc.DDS.ResolveTopic(rc.ImageTopic)
		if err1 != nil || err2 != nil || points != c.points || image != c.image {
			t.Errorf("%q: points %q (%v), image %q (%v); want %q, %q", c.args, points, err1, image, err2, c.points, c.image)
		}
	}
}

// A scan topic takes the LiDAR stream from the points topic's default
// (another points topic is refused: TestRunRefusesBadMirrorReliability).
func TestScanTopicReplacesTheDefaultPointsTopic(t *testing.T) {
	for _, c := range []struct {
		args         []string
		points, scan string
	}{
		{nil, "points", ""},
		{[]string{"--ros2-scan-topic", "scan"}, "", "scan"},
		{[]string{"--ros2-scan-topic", "/robot/scan", "--ros2-points-topic", ""}, "", "/robot/scan"},
		{[]string{"--ros2-scan-topic", "front/scan, rear/scan", "--ros2-merge-frame", "base_link"}, "", "front/scan,rear/scan"},
	} {
		rc := parseROS2Flags(t, c.args)
		if strings.Join(rc.PointsTopics, ",") != c.points || strings.Join(rc.ScanTopics, ",") != c.scan {
			t.Errorf("%q: points %q, scan %q; want %q, %q", c.args, rc.PointsTopics, rc.ScanTopics, c.points, c.scan)
		}
	}
}

func TestMirrorReliabilityFlagRejectsOtherValues(t *testing.T) {
	for name, v := range map[string]string{
		"ROS's own spelling":            "best_effort",
		"another case":                  "Reliable",
		"a history kind":                "keep-last",
		"the empty string, not default": "",
	} {
		t.Run(name, func(t *testing.T) {
			fs := flag.NewFlagSet("camera", flag.ContinueOnError)
			nodeConfig := registerROS2Flags(fs)
			if err := fs.Parse([]string{"--ros2-mirror-reliability", v}); err != nil {
				t.Fatal(err)
			}
			_, err := nodeConfig(noEnv, nil)
			if err == nil {
				t.Fatalf("--ros2-mirror-reliability %q accepted", v)
			}
			for _, want := range []string{"--ros2-mirror-reliability", `"` + v + `"`, "best-effort", "reliable"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not name %s", err, want)
				}
			}
		})
	}
}

// The whole command line: an invalid value stops the camera before it
// starts anything, and the flag needs --source ros2. (--frames 1 and a
// private socket bound the run should a check ever be lost.)
func TestRunRefusesBadMirrorReliability(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"an invalid value", []string{"--source", "ros2", "--ros2-mirror-reliability", "sometimes", "--metrics", ""},
			[]string{"--ros2-mirror-reliability", `"sometimes"`}},
		{"without --source ros2", []string{"--ros2-mirror-reliability", "reliable", "--metrics", ""},
			[]string{"--ros2-mirror-reliability", "only with --source ros2"}},
		// It used to pass the flag check and fail later, as
		// "camera: camera: ros2 points topic "/points": no points pool".
		{"no cloud size for a points topic", []string{"--source", "ros2", "--ros2-max-points", "0", "--metrics", ""},
			[]string{`--ros2-max-points 0 with --ros2-points-topic "points"`, `--ros2-points-topic ""`}},
		{"no image size for an image topic", []string{"--source", "ros2", "--ros2-max-image-bytes", "0", "--metrics", ""},
			[]string{`--ros2-max-image-bytes 0 with --ros2-image-topic "image_raw"`}},
		{"a negative cloud size", []string{"--source", "ros2", "--ros2-max-points", "-1", "--metrics", ""},
			[]string{"--ros2-max-points -1: want ≥ 1"}},
		{"x as the intensity field", []string{"--source", "ros2", "--ros2-intensity-field", "x", "--metrics", ""},
			[]string{`--ros2-intensity-field "x"`}},
		{"a NaN intensity scale", []string{"--source", "ros2", "--ros2-intensity-scale", "NaN", "--metrics", ""},
			[]string{"--ros2-intensity-scale NaN"}},
		{"an intensity field without --source ros2", []string{"--ros2-intensity-field", "reflectivity", "--metrics", ""},
			[]string{"--ros2-intensity-field", "only with --source ros2"}},
		{"parameters from --ros-args", []string{"--metrics", "", "--ros-args", "-p", "source:=ros2", "-p", "ros2_mirror_reliability:=sometimes", "--"},
			[]string{"--ros2-mirror-reliability", `"sometimes"`}},
		{"--planar-lidar without a LiDAR topic", []string{"--source", "ros2", "--planar-lidar", "--ros2-points-topic", "", "--metrics", ""},
			[]string{"--planar-lidar with --source ros2", "--ros2-scan-topic", "--ros2-points-topic"}},
		{"a scan topic and another points topic", []string{"--source", "ros2", "--ros2-scan-topic", "scan", "--ros2-points-topic", "velodyne_points", "--metrics", ""},
			[]string{`--ros2-scan-topic "scan" and --ros2-points-topic "velodyne_points"`, `--ros2-points-topic ""`}},
		{"no ray count for a scan topic", []string{"--source", "ros2", "--ros2-scan-topic", "scan", "--ros2-max-points", "0", "--metrics", ""},
			[]string{`--ros2-max-points 0 with --ros2-scan-topic "scan"`}},
		{"a fixed frame without a LiDAR topic", []string{"--source", "ros2", "--ros2-fixed-frame", "odom", "--ros2-points-topic", "", "--metrics", ""},
			[]string{`--ros2-fixed-frame "odom"`, "neither --ros2-points-topic nor --ros2-scan-topic"}},
		{"a time field without a fixed frame", []string{"--source", "ros2", "--ros2-time-field", "t", "--metrics", ""},
			[]string{"--ros2-time-field", "--ros2-fixed-frame"}},
		{"a time field with a scan topic", []string{"--source", "ros2", "--ros2-scan-topic", "scan", "--ros2-fixed-frame", "odom", "--ros2-time-field", "t", "--metrics", ""},
			[]string{"--ros2-time-field", "time_increment"}},
		{"x as the time field", []string{"--source", "ros2", "--ros2-fixed-frame", "odom", "--ros2-time-field", "x", "--metrics", ""},
			[]string{`--ros2-time-field "x"`, "position or intensity"}},
		{"an unknown time unit", []string{"--source", "ros2", "--ros2-fixed-frame", "odom", "--ros2-time-unit", "fortnights", "--metrics", ""},
			[]string{`--ros2-time-unit "fortnights"`}},
		{"two scan topics without a merge frame", []string{"--source", "ros2", "--ros2-scan-topic", "front/scan,rear/scan", "--metrics", ""},
			[]string{`--ros2-scan-topic "front/scan,rear/scan"`, "--ros2-merge-frame", "base_link"}},
		{"a merge frame without a LiDAR topic", []string{"--source", "ros2", "--ros2-merge-frame", "base_link", "--ros2-points-topic", "", "--metrics", ""},
			[]string{`--ros2-merge-frame "base_link"`, "--ros2-scan-topic", "--ros2-points-topic"}},
		{"two points topics without a merge frame", []string{"--source", "ros2", "--ros2-points-topic", "front/points,rear/points", "--metrics", ""},
			[]string{`--ros2-points-topic "front/points,rear/points"`, "--ros2-merge-frame"}},
		{"one scanner twice", []string{"--source", "ros2", "--ros2-scan-topic", "scan,/scan", "--ros2-merge-frame", "base_link", "--metrics", ""},
			[]string{`"scan" and "/scan" are one topic (/scan)`}},
		{"an empty name in the scan list", []string{"--source", "ros2", "--ros2-scan-topic", "front/scan,", "--ros2-merge-frame", "base_link", "--metrics", ""},
			[]string{"--ros2-scan-topic", "an empty topic name"}},
		{"a remapping rule rcl refuses", []string{"--source", "ros2", "--metrics", "", "--ros-args", "-r", "points:=/lidar points", "--"},
			[]string{`-r "points:=/lidar points": name "/lidar points"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := run(append(c.args, "--log-level", "error", "--frames", "1",
				"--socket", filepath.Join(sockdir.Short(t), "c.sock")))
			if err == nil {
				t.Fatal("accepted")
			}
			for _, want := range c.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %s", err, want)
				}
			}
		})
	}
}

func TestHelpDescribesMirrorReliability(t *testing.T) {
	fs := flag.NewFlagSet("camera", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	registerROS2Flags(fs)
	f := fs.Lookup("ros2-mirror-reliability")
	if f == nil {
		t.Fatal("no --ros2-mirror-reliability flag")
	}
	if f.DefValue != "best-effort" {
		t.Errorf("default %q, want best-effort", f.DefValue)
	}
	for _, want := range []string{`"best-effort"`, `"reliable"`, "rviz2"} {
		if !strings.Contains(f.Usage, want) {
			t.Errorf("usage %q lacks %s", f.Usage, want)
		}
	}
}

// --ros2-intensity-field and --ros2-intensity-scale reach the node's
// configuration; "" is no intensity at all.
func TestIntensityFlags(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
		want camera.ROS2Intensity
	}{
		{"the defaults: intensity, as is", nil, camera.ROS2Intensity{Field: "intensity", Scale: 1}},
		{"Livox: reflectivity, 0-255 to 0-1", []string{"--ros2-intensity-field", "reflectivity", "--ros2-intensity-scale", "0.00392157"},
			camera.ROS2Intensity{Field: "reflectivity", Scale: 0.00392157}},
		{"none", []string{"--ros2-intensity-field="}, camera.ROS2Intensity{None: true, Scale: 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := parseROS2Flags(t, c.args).Intensity; got != c.want {
				t.Errorf("Intensity = %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestIntensityFlagsRejectBadValues(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"--ros2-intensity-field", "z"}, []string{"--ros2-intensity-field", `"z"`}},
		{[]string{"--ros2-intensity-scale", "Inf"}, []string{"--ros2-intensity-scale", "+Inf", "finite"}},
		{[]string{"--ros2-intensity-scale", "-0.5"}, []string{"--ros2-intensity-scale", "-0.5", "> 0"}},
		{[]string{"--ros2-intensity-scale", "0"}, []string{"--ros2-intensity-scale 0", `--ros2-intensity-field ""`}},
	} {
		fs := flag.NewFlagSet("camera", flag.ContinueOnError)
		nodeConfig := registerROS2Flags(fs)
		if err := fs.Parse(c.args); err != nil {
			t.Fatal(err)
		}
		_, err := nodeConfig(noEnv, nil)
		if err == nil {
			t.Errorf("%q accepted", c.args)
			continue
		}
		for _, want := range c.want {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%q: error %q does not say %s", c.args, err, want)
			}
		}
	}
}

// The help says what "" does and what scale the models expect.
func TestHelpDescribesIntensity(t *testing.T) {
	fs := flag.NewFlagSet("camera", flag.ContinueOnError)
	registerROS2Flags(fs)
	for name, want := range map[string][]string{
		"ros2-intensity-field": {`"" = none`, "reflectivity", "not x, y or z"},
		"ros2-intensity-scale": {"0-1", "1/255", "reference model ignores intensity", "finite"},
	} {
		f := fs.Lookup(name)
		if f == nil {
			t.Errorf("no --%s flag", name)
			continue
		}
		for _, w := range want {
			if !strings.Contains(f.Usage, w) {
				t.Errorf("--%s usage %q lacks %s", name, f.Usage, w)
			}
		}
	}
}

// parseROS2Flags is the camera's ROS 2 flags parsed from args, with no
// ROS environment variables set.
func parseROS2Flags(t *testing.T, args []string) camera.ROS2NodeConfig {
	t.Helper()
	rc, err := parseROS2FlagsErr(args)
	if err != nil {
		t.Fatal(err)
	}
	return rc
}

// parseROS2FlagsErr is parseROS2Flags with the error returned; args may
// hold --ros-args.
func parseROS2FlagsErr(args []string) (camera.ROS2NodeConfig, error) {
	fs := flag.NewFlagSet("camera", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	nodeConfig := registerROS2Flags(fs)
	ra, err := rosargs.ParseFlags(fs, args, rosOptions)
	if err != nil {
		return camera.ROS2NodeConfig{}, err
	}
	return nodeConfig(noEnv, ra)
}

// A launch file's Node(namespace=, parameters=, remappings=) gives the
// camera --ros-args: they move its subscriptions as they would a ROS
// driver's, and set its flags.
func TestROSArgsMoveTheSubscriptions(t *testing.T) {
	for _, c := range []struct {
		args          []string
		points, image string
		node          string
	}{
		{[]string{"--ros-args", "-r", "__ns:=/robot1", "-r", "points:=/lidar/points", "-p", "ros2_image_topic:=camera/image_raw"},
			"/lidar/points", "/robot1/camera/image_raw", "/robot1/zerohop_camera"},
		{[]string{"--ros2-namespace", "/r2", "--ros-args", "-r", "__node:=cam", "-r", "cam:image_raw:=~/image", "-r", "other:points:=/x"},
			"/r2/points", "/r2/cam/image", "/r2/cam"},
	} {
		rc, err := parseROS2FlagsErr(c.args)
		if err != nil {
			t.Fatalf("%q: %v", c.args, err)
		}
		points, err1 := rc.DDS.ResolveTopic(strings.Join(rc.PointsTopics, ","))
		image, err2 := rc.DDS.ResolveTopic(rc.ImageTopic)
		if err1 != nil || err2 != nil || points != c.points || image != c.image {
			t.Errorf("%q: points %q (%v), image %q (%v); want %q, %q", c.args, points, err1, image, err2, c.points, c.image)
		}
		if node := rosargs.FullName(rosargs.Node(rc.DDS.Remaps, rc.DDS.Namespace, rc.DDS.NodeName)); node != c.node {
			t.Errorf("%q: node %s, want %s", c.args, node, c.node)
		}
	}
}

// use_sim_time, as launch files set it, takes the arrival time: the
// drivers' stamps are simulation time.
func TestUseSimTimeStampsOnReceipt(t *testing.T) {
	for _, c := range []struct {
		args    []string
		receipt bool
		err     string
	}{
		{nil, false, ""},
		{[]string{"--ros-args", "-p", "use_sim_time:=true"}, true, ""},
		{[]string{"--use-sim-time"}, true, ""},
		{[]string{"--ros2-stamp", "receipt", "--ros-args", "-p", "use_sim_time:=true"}, true, ""},
		{[]string{"--ros-args", "-p", "use_sim_time:=false"}, false, ""},
		{[]string{"--ros2-stamp", "header", "--ros-args", "-p", "use_sim_time:=true"}, false, "--use-sim-time with --ros2-stamp header"},
	} {
		rc, err := parseROS2FlagsErr(c.args)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: %v, want an error with %q", c.args, err, c.err)
			}
			continue
		}
		if err != nil || rc.StampOnReceipt != c.receipt {
			t.Errorf("%q: StampOnReceipt %v (%v), want %v", c.args, rc.StampOnReceipt, err, c.receipt)
		}
	}
}

// The command line launch_ros builds from docs/ros2-launch/zerohop.launch.py
// for the camera parses, and its settings reach the node's ROS 2
// configuration. (--slots 1 then stops run at its first check after
// parsing, before anything starts.)
func TestLaunchExampleParses(t *testing.T) {
	args := []string{"--ros-args", "-r", "__node:=zerohop_camera", "--params-file", "../../docs/ros2-launch/params.yaml"}
	err := run(append([]string{"--slots", "1"}, args...))
	if err == nil || !strings.Contains(err.Error(), "--slots 1") {
		t.Fatalf("run: %v, want the --slots check's error", err)
	}

	fs := flag.NewFlagSet("camera", flag.ContinueOnError)
	nodeConfig := registerROS2Flags(fs)
	source, rate := fs.String("source", "synthetic", ""), fs.Float64("rate", 30, "")
	ra, err := rosargs.ParseFlags(fs, args, rosOptions)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := nodeConfig(noEnv, ra)
	if err != nil {
		t.Fatal(err)
	}
	if *source != "ros2" || *rate != 10 || strings.Join(rc.PointsTopics, ",") != "/velodyne_points" || rc.ImageTopic != "/camera/color/image_raw" ||
		rc.Intensity.Scale != 0.00392157 || rc.StampOnReceipt || rc.FixedFrame != "odom" {
		t.Errorf("source %q, rate %v, %+v", *source, *rate, rc)
	}
}

// Each driver topic's status goes to /diagnostics once a second by
// default; diagnostic_updater's own parameter sets the period too, and
// use_sim_time leaves the stamps {0, 0}.
func TestDiagnosticsFlags(t *testing.T) {
	for _, c := range []struct {
		args   []string
		period time.Duration
		zero   bool
		err    string
	}{
		{nil, time.Second, false, ""},
		{[]string{"--ros2-diagnostics-period", "0"}, 0, false, ""},
		{[]string{"--ros-args", "-p", "diagnostic_updater.period:=2.0", "-p", "use_sim_time:=true"}, 2 * time.Second, true, ""},
		{[]string{"--ros2-diagnostics-period", "5ms"}, 0, false, "--ros2-diagnostics-period 5ms: want 10ms to 1h"},
		{[]string{"--ros2-diagnostics-topic", "/diag/"}, 0, false, "--ros2-diagnostics-topic"},
	} {
		rc, err := parseROS2FlagsErr(c.args)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: %v, want an error with %q", c.args, err, c.err)
			}
			continue
		}
		if err != nil || rc.DiagnosticsPeriod != c.period || rc.DiagnosticsTopic != "/diagnostics" || rc.SimTime != c.zero {
			t.Errorf("%q: period %v, topic %q, sim time %v (%v); want %v, /diagnostics, %v", c.args, rc.DiagnosticsPeriod, rc.DiagnosticsTopic, rc.SimTime, err, c.period, c.zero)
		}
	}
}
