//go:build ros2

package main

import (
	"flag"
	"io"
	"strings"
	"testing"

	"go.uber.org/zap"
)

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
