package rosargs

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestSplit(t *testing.T) {
	for _, tc := range []struct {
		argv, own []string
		ros       [][]string
	}{
		{[]string{"--ros2"}, []string{"--ros2"}, nil},
		// What launch_ros runs: arguments=, then its --ros-args section.
		{
			[]string{"--ros2", "--ros-args", "-r", "__node:=front", "--params-file", "/tmp/p.yaml"},
			[]string{"--ros2"}, [][]string{{"-r", "__node:=front", "--params-file", "/tmp/p.yaml"}},
		},
		// ros_arguments= gives a section of its own before launch_ros's.
		{
			[]string{"--ros-args", "--log-level", "debug", "--ros-args", "-r", "a:=b"},
			nil, [][]string{{"--log-level", "debug"}, {"-r", "a:=b"}},
		},
		// "--" ends a section; what follows is the program's again.
		{
			[]string{"--ros-args", "-r", "a:=b", "--", "--leaf", "0.3", "--ros-args"},
			[]string{"--leaf", "0.3"}, [][]string{{"-r", "a:=b"}, {}},
		},
		{[]string{"--leaf", "--", "x"}, []string{"--leaf", "--", "x"}, nil},
	} {
		own, ros := Split(tc.argv)
		if !reflect.DeepEqual(own, tc.own) || !reflect.DeepEqual(ros, tc.ros) {
			t.Errorf("Split(%q) = %q, %q; want %q, %q", tc.argv, own, ros, tc.own, tc.ros)
		}
	}
}

// An argument's value must be in its own section: rcl refuses a -r at the
// end of one, whatever follows.
func TestParseValueStaysInItsSection(t *testing.T) {
	for _, argv := range [][]string{
		{"--ros-args", "-r", "--ros-args", "a:=b"},
		{"--ros-args", "-r", "--", "--ros-args", "a:=b"},
		{"--ros-args", "--params-file"},
	} {
		_, sections := Split(argv)
		if _, err := Parse(sections...); err == nil || !strings.Contains(err.Error(), "needs a value") {
			t.Errorf("%q: %v, want a missing value", argv, err)
		}
	}
}

func TestParseRemaps(t *testing.T) {
	a, err := Parse([]string{
		"-r", "cmd_vel:=/base/cmd_vel",
		"--remap", "zerohop_agent:points:=/lidar/points",
		"-r", "rostopic://image_raw:=camera/image",
		"-r", "rosservice://reset:=reset2",
		"-r", "__name:=front",
		"-r", "__ns:=/robot1",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []Remap{
		{From: "cmd_vel", To: "/base/cmd_vel"},
		{Node: "zerohop_agent", From: "points", To: "/lidar/points"},
		{From: "image_raw", To: "camera/image"},
		{From: "reset", To: "reset2", Service: true},
		{From: "__node", To: "front"},
		{From: "__ns", To: "/robot1"},
	}
	if !reflect.DeepEqual(a.Remaps, want) {
		t.Fatalf("remaps %+v, want %+v", a.Remaps, want)
	}
	if got := a.Remaps[1].String(); got != "zerohop_agent:points:=/lidar/points" {
		t.Errorf("String() = %q", got)
	}
}

// Anything rcl would refuse, or zerohop cannot honour, is an error that
// quotes it.
func TestParseRefuses(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-r"}, "-r needs a value"},
		{[]string{"-r", "cmd_vel=/x"}, `"cmd_vel=/x": want FROM:=TO`},
		{[]string{"-r", ":cmd_vel:=/x"}, `node name "" before ':'`},
		{[]string{"-r", "my-node:cmd_vel:=/x"}, `node name "my-node" before ':'`},
		{[]string{"-r", "cmd_vel:="}, `name "": want tokens`},
		{[]string{"-r", ":=/x"}, `name "": want tokens`},
		{[]string{"-r", "{node}/cmd:=/x"}, `name "{node}/cmd"`},
		{[]string{"-r", "cmd_vel:=/cmd-vel"}, `name "/cmd-vel"`},
		{[]string{"-r", "cmd_vel:=~"}, `name "~"`},
		{[]string{"-r", "cmd_vel:=/x/"}, `name "/x/"`},
		{[]string{"-r", "rostopic://node:a:=b"}, `name "node:a"`},
		{[]string{"-r", "rosservice://__node:=x"}, "a node rename has no rosservice://"},
		{[]string{"-p", "my-node:leaf:=1"}, `node name "my-node" before ':'`},
		{[]string{"-r", "/ns/*:=/x"}, "wildcards"},
		{[]string{"-r", "__node:=2fast"}, `node name "2fast"`},
		{[]string{"-r", "__ns:=robot1"}, `namespace "robot1"`},
		{[]string{"-r", "__ns:=/robot1/"}, `namespace "/robot1/"`},
		{[]string{"-p", "lidar_height"}, "want NAME:=VALUE or NODE:NAME:=VALUE"},
		{[]string{"-p", "lidar_height:="}, "no value after :="},
		{[]string{"-p", "lidar height:=1"}, `parameter name "lidar height"`},
		{[]string{"-p", "x:=[1, 2"}, "value:"},
		{[]string{"--params-file", "testdata/missing.yaml"}, "testdata/missing.yaml: no such file"},
		{[]string{"--params-file", "testdata/empty.yaml"}, "testdata/empty.yaml: empty"},
		{[]string{"--params-file", "testdata/list_top.yaml"}, "list_top.yaml:1: want a mapping of node names"},
		{[]string{"--params-file", "testdata/no_ros_parameters.yaml"}, "no_ros_parameters.yaml:2: /**/lidar_height: want ros__parameters under it"},
		{[]string{"--params-file", "testdata/null_value.yaml"}, "null_value.yaml:3: parameter lidar_height: no value"},
		{[]string{"-e", "robot1"}, `-e "robot1": want an absolute name`},
		// rcl_validate_enclave_name: a namespace's rules.
		{[]string{"-e", "/robot1/2nd"}, `-e "/robot1/2nd": want an absolute name`},
		{[]string{"--enclave", "/a//b"}, `--enclave "/a//b"`},
		{[]string{"-e", "/ünï"}, `-e "/ünï"`},
		{[]string{"--use-sim-time"}, `unknown argument "--use-sim-time"`},
		{[]string{"__node:=x"}, `unknown argument "__node:=x"`},
	} {
		if _, err := Parse(tc.args); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) = %v, want an error with %q", tc.args, err, tc.want)
		}
	}
}

// What rcl accepts and zerohop has no use for passes, with a note.
func TestParseNotes(t *testing.T) {
	a, err := Parse([]string{"--enable-rosout-logs", "--disable-rosout-logs", "--log-file-name", "x", "--disable-external-lib-logs", "-e", "/robot1"})
	if err != nil {
		t.Fatal(err)
	}
	// The enclave (SROS2, ros2.Security) and the rosout switches are used,
	// so they have no note.
	if len(a.Notes) != 1 || !strings.Contains(a.Notes[0], "--log-file-name x ignored") {
		t.Errorf("notes %q", a.Notes)
	}
	if a.Enclave != "/robot1" || !a.NoRosout {
		t.Errorf("enclave %q, no rosout %v", a.Enclave, a.NoRosout)
	}
	// The last rosout switch wins; by default the log goes to /rosout.
	for _, tc := range []struct {
		args []string
		no   bool
	}{{nil, false}, {[]string{"--disable-rosout-logs"}, true}, {[]string{"--disable-rosout-logs", "--enable-rosout-logs"}, false}} {
		if a, err := Parse(tc.args); err != nil || a.NoRosout != tc.no {
			t.Errorf("Parse(%q): no rosout %v, %v", tc.args, a.NoRosout, err)
		}
	}
}

// The first __node and __ns rule for the node applies; a rule limited to
// another node does not.
func TestNode(t *testing.T) {
	for _, tc := range []struct {
		rules            []Remap
		wantNS, wantName string
	}{
		{nil, "/", "zerohop_agent"},
		{[]Remap{{From: "__node", To: "front"}, {From: "__node", To: "rear"}}, "/", "front"},
		{[]Remap{{Node: "other", From: "__node", To: "front"}}, "/", "zerohop_agent"},
		{[]Remap{{Node: "zerohop_agent", From: "__ns", To: "/robot1"}, {From: "__ns", To: "/robot2"}}, "/robot1", "zerohop_agent"},
		{[]Remap{{From: "cmd_vel", To: "__node"}}, "/", "zerohop_agent"},
		// rcl renames the node first, then matches __ns rules' NODE: prefix
		// against the new name.
		{[]Remap{{From: "__node", To: "foo"}, {Node: "foo", From: "__ns", To: "/bar"}}, "/bar", "foo"},
		{[]Remap{{From: "__node", To: "foo"}, {Node: "zerohop_agent", From: "__ns", To: "/bar"}}, "/", "foo"},
		{[]Remap{{Node: "zerohop_agent", From: "__node", To: "foo"}, {Node: "foo", From: "__node", To: "baz"}}, "/", "foo"},
	} {
		ns, name := Node(tc.rules, "/", "zerohop_agent")
		if ns != tc.wantNS || name != tc.wantName {
			t.Errorf("Node(%v) = %s, %s; want %s, %s", tc.rules, ns, name, tc.wantNS, tc.wantName)
		}
	}
}

// testFlags is a program's flag set with the kinds of flags zerohop's
// commands have.
func testFlags() *flag.FlagSet {
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Bool("ros2", false, "")
	fs.Float64("lidar-height", 0, "")
	fs.String("lidar-xy", "0,0", "")
	fs.String("lidar-rpy", "0,0,0", "")
	fs.Duration("watchdog", 200*time.Millisecond, "")
	fs.Float64("rate", 30, "")
	fs.Float64("leaf", 0.2, "")
	fs.Int("voxel-min-points", 1, "")
	fs.String("camera", "", "")
	fs.String("ros2-node-name", "zerohop_agent", "")
	fs.String("ros2-namespace", "/", "")
	fs.String("log-level", "info", "")
	return fs
}

var testOptions = Options{NodeName: "zerohop_agent", NodeNameFlag: "ros2-node-name", NamespaceFlag: "ros2-namespace", LogLevelFlag: "log-level"}

func TestParseFlagsSetsFlagsFromParameters(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want map[string]string // flag → value after parsing
	}{
		{
			// launch_ros: Node(executable=..., name='front_agent',
			// parameters=[{...}], arguments=['--leaf', '0.3']).
			"launch dict, name only",
			[]string{"--leaf", "0.3", "--ros-args", "-r", "__node:=front_agent", "--params-file", "testdata/launch_params_dict.yaml"},
			map[string]string{"ros2": "true", "lidar-height": "1.73", "lidar-xy": "0.45,0.0", "lidar-rpy": "0,8deg,0", "watchdog": "100ms", "leaf": "0.3"},
		},
		{
			// name and namespace given: the file's key is the full name;
			// nested mappings give dotted names.
			"launch dict, full name",
			[]string{"--ros-args", "-r", "__node:=front_agent", "-r", "__ns:=/robot1", "--params-file", "testdata/launch_params_named.yaml"},
			map[string]string{"leaf": "0.25", "voxel-min-points": "2"},
		},
		{
			// A section for another node does not apply.
			"launch dict, other node",
			[]string{"--ros-args", "-r", "__ns:=/robot1", "--params-file", "testdata/launch_params_named.yaml"},
			map[string]string{"leaf": "0.2", "voxel-min-points": "1"},
		},
		{
			// -p as launch_ros writes Parameter(): YAML with an end marker;
			// a later value overrides an earlier one.
			"-p rules",
			[]string{"--ros-args", "-p", "lidar_height:=1.73\n...\n", "-p", "camera:=replay:/data/kitti\n...\n", "--param", "lidar_height:=0.5", "-p", "watchdog:=250ms", "-p", "lidar-xy:=[1, 2]"},
			map[string]string{"lidar-height": "0.5", "camera": "replay:/data/kitti", "watchdog": "250ms", "lidar-xy": "1,2"},
		},
		{
			// Sections apply in the order their keys appear, as rclcpp
			// applies them: /robot1/zerohop_agent's rate 20 gives way to
			// /**/zerohop_agent's 5 below it.
			"robot file, /robot1/zerohop_agent",
			[]string{"--ros2-namespace", "/robot1", "--ros-args", "--params-file", "testdata/robot.yaml"},
			map[string]string{"rate": "5", "lidar-height": "0.62", "leaf": "0.3"},
		},
		{
			// A later /** value joins the /** key's place, ahead of the
			// node's own sections: rate stays 5, lidar_height 0.62.
			"robot file, then /** rules",
			[]string{"--ros-args", "-r", "__ns:=/robot1", "--params-file", "testdata/robot.yaml", "-p", "rate:=12", "--params-file", "testdata/launch_params_dict.yaml"},
			map[string]string{"rate": "5", "lidar-height": "0.62", "leaf": "0.3", "watchdog": "100ms", "ros2": "true"},
		},
		{
			// A -p rule after a file wins over the file's section for the
			// node: /** first appears after /robot1/front_agent.
			"named file, then a -p rule",
			[]string{"--ros-args", "-r", "__node:=front_agent", "-r", "__ns:=/robot1", "--params-file", "testdata/launch_params_named.yaml", "-p", "leaf:=0.7"},
			map[string]string{"leaf": "0.7", "voxel-min-points": "2"},
		},
		{
			"-p rules for a node",
			[]string{"--ros-args", "-p", "zerohop_agent:leaf:=0.4", "-p", "other:rate:=1", "-p", "ros2:=on"},
			map[string]string{"leaf": "0.4", "rate": "30", "ros2": "true"},
		},
		{
			"robot file, /robot2/zerohop_agent",
			[]string{"--ros-args", "-r", "__ns:=/robot2", "--params-file", "testdata/robot.yaml"},
			map[string]string{"rate": "5", "lidar-height": "0", "leaf": "0.3"},
		},
		{
			"robot file, /zerohop_camera",
			[]string{"--ros-args", "-r", "__node:=zerohop_camera", "--params-file", "testdata/robot.yaml"},
			map[string]string{"rate": "15", "leaf": "0.2"},
		},
		{
			// The node's logger wins over a plain level wherever it stands.
			"log levels",
			[]string{"--ros-args", "--log-level", "rcl:=debug", "--log-level", "zerohop_agent:=Debug", "--log-level", "WARN"},
			map[string]string{"log-level": "debug"},
		},
		{
			// The logger of /robot1/zerohop_agent is robot1.zerohop_agent.
			"a namespaced logger",
			[]string{"--ros-args", "-r", "__ns:=/robot1", "--log-level", "zerohop_agent:=debug", "--log-level", "robot1.zerohop_agent:=error", "--log-level", "info"},
			map[string]string{"log-level": "error"},
		},
		{
			"FATAL",
			[]string{"--ros-args", "--log-level", "fatal"},
			map[string]string{"log-level": "error"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := testFlags()
			if _, err := ParseFlags(fs, tc.args, testOptions); err != nil {
				t.Fatal(err)
			}
			for name, want := range tc.want {
				if got := fs.Lookup(name).Value.String(); got != want {
					t.Errorf("--%s = %q, want %q", name, got, want)
				}
			}
		})
	}
}

// A parameter the node has no flag for, one that contradicts the command
// line, or a value its flag refuses, stops the node and names where it
// came from.
func TestParseFlagsRefuses(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--ros-args", "-p", "lidar_hieght:=1.7"}, "parameter lidar_hieght (-p lidar_hieght:=1.7): /zerohop_agent has no such setting"},
		{[]string{"--ros-args", "-r", "__ns:=/r1", "-p", "use_sim_time:=true"}, "parameter use_sim_time (-p use_sim_time:=true): /r1/zerohop_agent has no such setting"},
		{[]string{"--lidar-height", "1.2", "--ros-args", "--params-file", "testdata/launch_params_dict.yaml"}, "parameter lidar_height (--params-file testdata/launch_params_dict.yaml (/**)) and --lidar-height on the command line: give it once"},
		{[]string{"--ros-args", "-p", "rate:=fast"}, `parameter rate = "fast" (-p rate:=fast), for --rate: parse error`},
		{[]string{"--ros-args", "-p", "ros2:=maybe"}, `parameter ros2 = "maybe"`},
		{[]string{"--ros-args", "-p", "ros2_namespace:=/robot1"}, "parameter ros2_namespace (-p ros2_namespace:=/robot1): the node's name and namespace cannot be parameters"},
		{[]string{"--ros-args", "--params-file", "testdata/robot.yaml", "-p", "ros2_node_name:=x"}, "the node's name and namespace cannot be parameters"},
		{[]string{"--ros-args", "-p", "log_level:=warn", "--log-level", "debug"}, "--log-level debug and the parameter for --log-level: give it once"},
		{[]string{"--ros-args", "-p", "watchdog:=.inf"}, `parameter watchdog (-p watchdog:=.inf): ".inf": want a duration in seconds`},
		{[]string{"--log-level", "warn", "--ros-args", "--log-level", "debug"}, "--log-level debug and --log-level on the command line: give it once"},
		{[]string{"--ros-args", "--log-level", "verbose"}, `--log-level "verbose": want DEBUG, INFO`},
		{[]string{"--nope", "--ros-args", "-p", "rate:=1"}, "flag provided but not defined: -nope (see --help)"},
		// A duration without its unit (ZEROHOP_PAIR_TOLERANCE=0.05 in a
		// compose file): the flag package says only "parse error".
		{[]string{"--watchdog", "0.05"}, `invalid value "0.05" for flag -watchdog: parse error: want a duration with its unit, e.g. 200ms or 1.5s (see --help)`},
		{[]string{"--rate=fast"}, `for flag -rate: parse error: want a number (see --help)`},
		{[]string{"--voxel-min-points", "1.5"}, `parse error: want a whole number (see --help)`},
		{[]string{"--ros2=maybe"}, `invalid boolean value "maybe" for -ros2: parse error (see --help)`},
		{[]string{"--ros-args", "-p", "watchdog:=soon"}, `for --watchdog: parse error: want a duration with its unit`},
		{[]string{"--ros-args", "-p", "rate:=fast"}, `for --rate: parse error: want a number (see --help)`},
	} {
		if _, err := ParseFlags(testFlags(), tc.args, testOptions); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseFlags(%q) = %v, want an error with %q", tc.args, err, tc.want)
		}
	}
}

// A refused flag's error is returned alone: the flag package's print of
// the whole usage after it buried it. -h prints the usage.
func TestParseFlagsPrintsUsageOnlyForHelp(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		usage bool
	}{{[]string{"--watchdog", "0.05"}, false}, {[]string{"--nope"}, false}, {[]string{"-h"}, true}, {[]string{"--help"}, true}} {
		fs := testFlags()
		var out strings.Builder
		fs.SetOutput(&out)
		fs.Usage = func() { fmt.Fprintln(fs.Output(), "Usage: agent [flags]") }
		_, err := ParseFlags(fs, tc.args, testOptions)
		if err == nil {
			t.Fatalf("ParseFlags(%q) = nil, want an error", tc.args)
		}
		if printed := strings.Contains(out.String(), "Usage:"); printed != tc.usage || strings.Count(out.String(), "Usage:") > 1 {
			t.Errorf("ParseFlags(%q) printed %q; want the usage once: %t", tc.args, out.String(), tc.usage)
		}
		if errors.Is(err, flag.ErrHelp) != tc.usage {
			t.Errorf("ParseFlags(%q) = %v; want flag.ErrHelp: %t", tc.args, err, tc.usage)
		}
	}
}

// Applied and Notes say what happened, for the node's log.
func TestParseFlagsReports(t *testing.T) {
	a, err := ParseFlags(testFlags(), []string{"--ros-args", "-p", "leaf:=0.25", "--log-level", "rcl:=debug"}, testOptions)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"--leaf=0.25 (-p leaf:=0.25)"}; !reflect.DeepEqual(a.Applied, want) {
		t.Errorf("Applied %q, want %q", a.Applied, want)
	}
	if len(a.Notes) != 1 || !strings.Contains(a.Notes[0], "--log-level rcl:=debug ignored") {
		t.Errorf("Notes %q", a.Notes)
	}
}

// Node keys match full names as rclcpp's patterns do.
func TestNodeKeyPattern(t *testing.T) {
	for _, tc := range []struct {
		key, name string
		want      bool
	}{
		{"/**", "/zerohop_agent", true},
		{"/**", "/a/b/zerohop_agent", true},
		{"/**/zerohop_agent", "/zerohop_agent", true},
		{"/**/zerohop_agent", "/r1/zerohop_agent", true},
		{"/**/zerohop_agent", "/r1/zerohop_agent2", false},
		{"/*/zerohop_agent", "/zerohop_agent", false},
		{"/*/zerohop_agent", "/r1/zerohop_agent", true},
		{"/*", "/zerohop_agent", true},
		{"/zerohop_agent", "/r1/zerohop_agent", false},
		{"/r1/zerohop_agent", "/r1/zerohop_agent", true},
	} {
		if got := nodeKeyPattern(tc.key).MatchString(tc.name); got != tc.want {
			t.Errorf("key %s on %s: %v, want %v", tc.key, tc.name, got, tc.want)
		}
	}
}
