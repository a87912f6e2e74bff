package main

import (
	"math"
	"strings"
	"testing"
)

// --lidar-xy and --lidar-rpy take comma-separated numbers; angles in
// radians or, ending in "deg", in degrees.
func TestNumbersFlag(t *testing.T) {
	for _, tc := range []struct {
		flag    numbersFlag
		in      string
		want    [3]float64
		wantErr string
	}{
		{numbersFlag{n: 2, unit: "metres"}, "0.45,-0.12", [3]float64{0.45, -0.12}, ""},
		{numbersFlag{n: 2, unit: "metres"}, " 1 , 2 ", [3]float64{1, 2}, ""},
		{numbersFlag{n: 3, unit: "radians", degrees: true}, "0,8deg,-12 deg", [3]float64{0, 8 * math.Pi / 180, -12 * math.Pi / 180}, ""},
		{numbersFlag{n: 3, unit: "radians", degrees: true}, "3.14159,0,0.1", [3]float64{3.14159, 0, 0.1}, ""},
		{numbersFlag{n: 2, unit: "metres"}, "1deg,2", [3]float64{}, `"1deg" is not a finite number (metres)`},
		{numbersFlag{n: 3, unit: "radians", degrees: true}, "0,8", [3]float64{}, "want 3 numbers separated by commas, in radians"},
		{numbersFlag{n: 2, unit: "metres"}, "1,2,3", [3]float64{}, "want 2 numbers"},
		{numbersFlag{n: 3, unit: "radians", degrees: true}, "0,NaN,0", [3]float64{}, `"NaN" is not a finite number`},
		{numbersFlag{n: 3, unit: "radians", degrees: true}, "0,infdeg,0", [3]float64{}, `"infdeg" is not a finite number`},
		{numbersFlag{n: 2, unit: "metres"}, "", [3]float64{}, "want 2 numbers"},
	} {
		f := tc.flag
		err := f.Set(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Set(%q) = %v, want an error with %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("Set(%q): %v", tc.in, err)
			continue
		}
		for i, w := range tc.want {
			if math.Abs(f.v[i]-w) > 1e-12 {
				t.Errorf("Set(%q) = %v, want %v", tc.in, f.v, tc.want)
				break
			}
		}
	}
}

// The defaults print as the flag takes them, as --help shows them.
func TestNumbersFlagDefaultsPrintAsTheyParse(t *testing.T) {
	f := numbersFlag{n: 3, unit: "radians", degrees: true}
	if got := f.String(); got != "0,0,0" {
		t.Fatalf("default %q, want 0,0,0", got)
	}
	if err := f.Set("0.5,-1,2"); err != nil || f.String() != "0.5,-1,2" {
		t.Fatalf("after Set: %q, %v", f.String(), err)
	}
}

// Parameters from --ros-args reach the node's configuration and its
// checks, which run before anything starts; ROS arguments the agent cannot
// honour stop it, naming them.
func TestRunTakesROSParameters(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--ros-args", "-p", "leaf:=500"}, "--leaf 500"},
		{[]string{"--ros-args", "-p", "lidar_rpy:=[0, 3, 0]"}, "pitch"},
		{[]string{"--ros-args", "-p", "watchdog:=7200"}, "--watchdog 2h0m0s"},
		{[]string{"--ros-args", "-p", "lidar_hieght:=1.73"}, "parameter lidar_hieght (-p lidar_hieght:=1.73): /zerohop_agent has no such setting"},
		{[]string{"--ros-args", "--params-file", "testdata/missing.yaml"}, "testdata/missing.yaml"},
		{[]string{"--ros-args", "--enclave"}, "--enclave needs a value"},
		{[]string{"--ros-args", "-x"}, `unknown argument "-x"`},
		// Launch files give every node use_sim_time; a build without ROS 2
		// takes it too (and stops here at the --leaf check).
		{[]string{"--leaf", "500", "--ros-args", "-p", "use_sim_time:=true"}, "--leaf 500"},
	} {
		// Bounded and self-contained should a check ever be lost.
		err := run(append([]string{"--duration", "2s", "--http", "127.0.0.1:0", "--camera", "synthetic", "--log-level", "error"}, tc.args...))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("run(%q) = %v, want an error with %q", tc.args, err, tc.want)
		}
	}
}

// --lidar-frame replaces the mount flags and needs ROS 2; its companions
// mean nothing without it. Each is refused before anything starts.
func TestLidarFrameFlagsRefused(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--lidar-frame", "velodyne", "--lidar-height", "0.5", "--lidar-rpy", "0,8deg,0"}, "--lidar-frame reads the LiDAR's mount from /tf_static; leave out --lidar-height, --lidar-rpy"},
		{[]string{"--ros-args", "-p", "lidar_frame:=velodyne", "-p", "lidar_xy:=[0.1, 0.0]"}, "leave out --lidar-xy"},
		{[]string{"--base-frame", "base_link"}, "--base-frame and --tf-timeout: only with --lidar-frame"},
		{[]string{"--tf-timeout", "30s"}, "--base-frame and --tf-timeout: only with --lidar-frame"},
		// Without --ros2 (or in a build without ROS 2) there is no /tf_static.
		{[]string{"--lidar-frame", "velodyne"}, "--lidar-frame reads the LiDAR's mount from /tf_static: "},
		// The mount flags at their defaults (as compose passes them) are no conflict.
		{[]string{"--lidar-frame", "velodyne", "--lidar-height", "0", "--lidar-xy", "0,0", "--lidar-rpy", "0,0,0"}, "--lidar-frame reads the LiDAR's mount from /tf_static: "},
	} {
		err := run(append([]string{"--duration", "2s", "--http", "127.0.0.1:0", "--camera", "synthetic", "--log-level", "error"}, tc.args...))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("run(%q) = %v, want an error with %q", tc.args, err, tc.want)
		}
	}
}

// --replay-timing and --replay-speed reach the node's checks, which name
// the in-process camera's flag (--camera), before anything starts.
func TestReplayTimingFlagsReachTheNode(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--camera", "synthetic", "--replay-speed", "2"}, `--replay-speed 2: only for a replay (--camera replay:DIR) with recorded timing, not --camera "synthetic"`},
		{[]string{"--replay-timing", "recorded"}, "--replay-timing recorded: only a replay (--camera replay:DIR) has recorded timing, and --camera is not given"},
		{[]string{"--camera", "synthetic", "--replay-timing", "wall"}, `--replay-timing "wall"`},
	} {
		err := run(append([]string{"--duration", "2s", "--http", "127.0.0.1:0", "--log-level", "error"}, tc.args...))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("run(%q) = %v, want an error with %q", tc.args, err, tc.want)
		}
	}
}
