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
func ros2Flags(*flag.FlagSet) func(context.Context, camera.NodeConfig, *rosargs.Args) (bool, error) {
	return func(_ context.Context, cfg camera.NodeConfig, ra *rosargs.Args) (bool, error) {
		if cfg.Source == "ros2" {
			return true, fmt.Errorf("--source ros2: %w", ros2.ErrNotBuilt)
		}
		if len(ra.Remaps) > 0 {
			cfg.Log.Warn("ROS arguments: remapping rules ignored: this build has no ROS 2 (build with -tags ros2 and libddsc)", zap.Stringers("rules", ra.Remaps))
		}
		return false, nil
	}
}
