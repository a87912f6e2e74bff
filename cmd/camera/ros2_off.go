//go:build !ros2

package main

import (
	"context"
	"flag"
	"fmt"

	"go.uber.org/zap"

	"github.com/zerohop/zerohop/camera"
	"github.com/zerohop/zerohop/ros2"
	"github.com/zerohop/zerohop/ros2/rosargs"
)

// ros2Flags registers nothing: this build has no ROS 2 support (build with
// -tags ros2 and libddsc). --source ros2 fails saying so.
func ros2Flags(fs *flag.FlagSet) func(context.Context, camera.NodeConfig, zap.AtomicLevel, *rosargs.Args) (bool, error) {
	// Launch files set use_sim_time for every node; the sources of this
	// build stamp frames with this machine's clock anyway.
	fs.Bool("use-sim-time", false, "the ROS graph runs on a simulator's /clock; nothing to change in this build (no ROS 2 source)")
	return func(_ context.Context, cfg camera.NodeConfig, _ zap.AtomicLevel, ra *rosargs.Args) (bool, error) {
		if cfg.Source == "ros2" {
			return true, fmt.Errorf("--source ros2: %w", ros2.ErrNotBuilt)
		}
		if rules := ra.TopicRules(); len(rules) > 0 {
			cfg.Log.Warn("ROS arguments: remapping rules ignored: this build has no ROS 2 (build with -tags ros2 and libddsc)", zap.Stringers("rules", rules))
		}
		return false, nil
	}
}
