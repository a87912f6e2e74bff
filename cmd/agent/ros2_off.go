//go:build !ros2

package main

import (
	"flag"

	"go.uber.org/zap"

	"github.com/zerohop/zerohop/agent"
)

// ros2Flags registers the ROS 2 output flags. This build has no ROS 2
// support (build with -tags ros2 and libddsc); commands go to the log and
// the HTTP endpoint.
func ros2Flags(*flag.FlagSet) func(*zap.Logger) (agent.CmdSink, func(), error) {
	return func(*zap.Logger) (agent.CmdSink, func(), error) { return nil, func() {}, nil }
}
