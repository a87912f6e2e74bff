//go:build !ros2

package main

import (
	"flag"

	"go.uber.org/zap"

	"github.com/zerohop/zerohop/agent"
	"github.com/zerohop/zerohop/ros2/rosargs"
)

// ros2Flags registers the ROS 2 output flags. This build has no ROS 2
// support (build with -tags ros2 and libddsc); commands go to the log and
// the HTTP endpoint; the planner's settings (tuning) are the flags'.
func ros2Flags(fs *flag.FlagSet, tuning *agent.PlannerTuning) func(*zap.Logger, zap.AtomicLevel, *rosargs.Args, *agent.PairTuning) (ros2Out, error) {
	// Launch files set use_sim_time for every node; without ROS 2 there is
	// no stamp it could change.
	fs.Bool("use-sim-time", false, "the ROS graph runs on a simulator's /clock; nothing to change in this build (no ROS 2)")
	return func(log *zap.Logger, _ zap.AtomicLevel, ra *rosargs.Args, _ *agent.PairTuning) (ros2Out, error) {
		if rules := ra.TopicRules(); len(rules) > 0 {
			log.Warn("ROS arguments: remapping rules ignored: this build has no ROS 2 (build with -tags ros2 and libddsc)", zap.Stringers("rules", rules))
		}
		return ros2Out{close: func() {}, noTF: "this build has no ROS 2 (build with -tags ros2 and libddsc)"}, nil
	}
}
