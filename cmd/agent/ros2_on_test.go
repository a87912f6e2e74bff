//go:build ros2

package main

import (
	"flag"
	"io"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/zerohop/zerohop/ros2"
)

// The default cmd_vel topic is relative, as teleop nodes' is:
// --ros2-namespace moves it, and the root namespace leaves it on /cmd_vel.
func TestDefaultCmdVelTopicFollowsTheNamespace(t *testing.T) {
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	ros2Flags(fs)
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
		start := ros2Flags(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		if _, _, err := start(zap.NewNop()); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want an error with %q", tc.args, err, tc.want)
		}
	}
}
