//go:build ros2

package main

import (
	"strconv"
	"strings"
	"testing"
)

// Under use_sim_time (as a launch file sets it) the agent follows the
// simulator's /clock: its TwistStamped commands carry the simulation's
// time, which a controller on that clock (diff_drive_controller's
// cmd_vel_timeout) compares with its own.
func TestAgentStampsCommandsWithSimClock(t *testing.T) {
	requireORTCache(t)
	domain := loopbackDomain(t, 231)
	// One simulated second every 20 ms, from 5000.5.
	peer := buildTestPeer(t)
	startTestPeer(t, peer, domain, "clock", "rt/clock", "5000", "20")
	sub := startTestPeer(t, peer, domain, "sub", "twist_stamped", "rt/cmd_vel", "reliable", "5")
	done := make(chan error, 1)
	go func() {
		done <- run([]string{"--duration", "3s", "--http", "127.0.0.1:0", "--camera", "synthetic", "--log-level", "error",
			"--ros2", "--twist-stamped", "--ros-args", "-p", "use_sim_time:=true"})
	}()
	sub.expect(t, "MATCHED")
	var simStamped int
	for range 5 {
		fields := map[string]string{}
		for _, kv := range strings.Fields(sub.expect(t, "SAMPLE")) {
			k, v, _ := strings.Cut(kv, "=")
			fields[k] = v
		}
		sec, err := strconv.Atoi(fields["sec"])
		switch {
		case err != nil:
			t.Fatalf("sample %v", fields)
		case sec == 0 && fields["nanosec"] == "0":
			// Before the agent's first /clock: ROS time 0, as rclcpp's.
		case sec < 5000 || sec > 6000 || fields["nanosec"] != "500000000":
			t.Errorf("command stamped %s.%s, want the simulation's time (5000.5 on, a second per 20 ms), not this machine's", fields["sec"], fields["nanosec"])
		default:
			simStamped++
		}
	}
	if simStamped == 0 {
		t.Error("no command stamped with the simulation's time")
	}
	if err := <-done; err != nil {
		t.Fatal("run:", err)
	}
}
