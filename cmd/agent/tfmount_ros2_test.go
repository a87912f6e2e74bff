//go:build ros2

package main

import (
	"os/exec"
	"strings"
	"testing"
	"time"
)

// The agent reads its LiDAR's mount from /tf_static published by a
// broadcaster that started first (robot_state_publisher at launch), then
// drops the clouds that are not in that frame: the synthetic camera's are
// in "lidar", the mount is for "velodyne". A frame nobody publishes stops
// the start with an error that says what /tf_static held.
func TestLidarMountFromTFStatic(t *testing.T) {
	requireORTCache(t)
	domain := loopbackDomain(t, 230)
	peer := startTestPeer(t, buildTestPeer(t), domain, "static", "rt/tf_static",
		"base_footprint,base_link,0,0,0.1,0,0,0,1", "base_link,velodyne,0.2,0,0.5,0,0,0,1")
	peer.expect(t, "WRITTEN")
	client := buildParamClient(t)

	addr := freeLoopbackAddr(t)
	done := make(chan error, 1)
	go func() {
		done <- run([]string{"--duration", "8s", "--http", addr, "--camera", "synthetic", "--log-level", "error", "--ros2",
			"--ros-args", "-p", "lidar_frame:=velodyne", "-p", "tf_timeout:=10.0"})
	}()
	deadline := time.Now().Add(15 * time.Second)
	var mismatches float64
	for mismatches == 0 && time.Now().Before(deadline) {
		select {
		case err := <-done:
			t.Fatalf("agent ended early: %v", err)
		case <-time.After(100 * time.Millisecond):
		}
		mismatches = metric(addr, "zerohop_lidar_frame_mismatch_total")
	}
	if mismatches == 0 {
		t.Fatal("no cloud dropped for its frame: the clouds are in lidar, the mount from /tf_static is for velodyne")
	}
	// ros2 param get shows the mount in force, not the flags' zeros:
	// base_footprint→base_link (z 0.1) → velodyne (0.2, 0, 0.5).
	out, err := exec.Command(client, domain, "/zerohop_agent", "get", "lidar_height", "lidar_xy", "lidar_rpy").Output()
	want := "available\n" +
		"value\t3\t0\t0\t0.59999999999999998\t\t0\n" + // 0.6, as paramclient prints a double
		"value\t4\t0\t0\t0\t0.2,0\t0\n" +
		"value\t4\t0\t0\t0\t0,0,0\t0\n" +
		"done\n"
	if err != nil || string(out) != want {
		t.Errorf("ros2 param get lidar_height lidar_xy lidar_rpy: %v\n%s\nwant\n%s", err, out, want)
	}
	if err := <-done; err != nil {
		t.Fatal("run:", err)
	}

	err = run([]string{"--duration", "2s", "--http", "127.0.0.1:0", "--camera", "synthetic", "--log-level", "error", "--ros2",
		"--lidar-frame", "os_sensor", "--tf-timeout", "300ms"})
	for _, want := range []string{`LiDAR mount base_footprint→os_sensor: not on /tf_static after 300ms (--tf-timeout)`,
		`frame "os_sensor" is not on /tf_static`, "base_link", "1 publisher(s) matched"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want it to say %q", err, want)
		}
	}
}
