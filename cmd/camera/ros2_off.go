//go:build !ros2

package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/zerohop/zerohop/camera"
	"github.com/zerohop/zerohop/ros2"
)

// ros2Flags registers nothing: this build has no ROS 2 support (build with
// -tags ros2 and libddsc). --source ros2 fails saying so.
func ros2Flags(*flag.FlagSet) func(context.Context, camera.NodeConfig) (bool, error) {
	return func(_ context.Context, cfg camera.NodeConfig) (bool, error) {
		if cfg.Source == "ros2" {
			return true, fmt.Errorf("--source ros2: %w", ros2.ErrNotBuilt)
		}
		return false, nil
	}
}
