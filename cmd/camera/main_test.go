package main

import (
	"strings"
	"testing"
)

// Flag values out of range are refused before anything starts, naming the
// flag and the value.
func TestRunRefusesBadSizingFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--subscribers", "0"}, "--subscribers 0: want 1..31"},
		{[]string{"--subscribers", "32"}, "--subscribers 32: want 1..31"},
		{[]string{"--slots", "2000000"}, "--slots 2000000: at most 1048576"},
		{[]string{"--slots", "1"}, "--slots 1: at least 2"},
		// camera.CheckSource's list lacked ros2, which --help offers.
		{[]string{"--source", "bogus"}, `--source "bogus": want "synthetic", "replay:DIR" or "ros2"`},
	} {
		err := run(append(tc.args, "--socket", t.TempDir()+"/c.sock", "--metrics", "", "--frames", "1"))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("run(%q) = %v, want an error with %q", tc.args, err, tc.want)
		}
	}
}
