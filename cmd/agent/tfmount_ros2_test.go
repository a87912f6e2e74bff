//go:build ros2

package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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
	dir := t.TempDir()
	peer := filepath.Join(dir, "peer")
	flags, err := exec.Command("pkg-config", "--cflags", "--libs", "CycloneDDS").Output()
	if err != nil {
		t.Fatal("pkg-config CycloneDDS:", err)
	}
	srcs := []string{"testdata/peer/peer.c", "builtin_interfaces.c", "std_msgs.c", "geometry_msgs.c", "tf2_msgs.c",
		"sensor_msgs.c", "zerohop_msgs.c", "diagnostic_msgs.c", "rcl_interfaces.c"}
	args := []string{"-O1", "-I../../ros2", "-o", peer}
	for _, s := range srcs {
		args = append(args, "../../ros2/"+s)
	}
	if out, err := exec.Command("gcc", append(args, strings.Fields(string(flags))...)...).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	loopback, err := filepath.Abs("../../ros2/testdata/loopback.xml")
	if err != nil {
		t.Fatal(err)
	}
	domain := fmt.Sprint(230 + os.Getpid()%2)
	t.Setenv("CYCLONEDDS_URI", "file://"+loopback)
	t.Setenv("ROS_DOMAIN_ID", domain)

	cmd := exec.Command(peer, domain, "static", "rt/tf_static",
		"base_footprint,base_link,0,0,0.1,0,0,0,1", "base_link,velodyne,0.2,0,0.5,0,0,0,1")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); cmd.Wait() }) // the peer ends when stdin closes
	written := make(chan error, 1)
	go func() { // ends when the peer's stdout closes
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if sc.Text() == "WRITTEN" {
				written <- nil
			}
		}
		written <- io.ErrUnexpectedEOF
		io.Copy(io.Discard, stdout)
	}()
	select {
	case err := <-written:
		if err != nil {
			t.Fatal("peer ended before writing /tf_static")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("peer did not write /tf_static")
	}

	addr := freeLoopbackAddr(t)
	done := make(chan error, 1)
	go func() {
		done <- run([]string{"--duration", "4s", "--http", addr, "--camera", "synthetic", "--log-level", "error", "--ros2",
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

// requireORTCache points the agent at the repository's ONNX Runtime (make
// ort) and skips when it was not fetched, as make test fetches it.
func requireORTCache(t *testing.T) {
	t.Helper()
	cache, err := filepath.Abs("../../.cache")
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv("ZEROHOP_CACHE") == "" {
		t.Setenv("ZEROHOP_CACHE", cache)
	}
	if _, err := os.Stat(filepath.Join(os.Getenv("ZEROHOP_CACHE"), "ort")); err != nil && os.Getenv("ZEROHOP_REQUIRE_ORT") != "1" {
		t.Skip("ONNX Runtime library not fetched; run `make ort` (make test requires it)")
	}
}

// freeLoopbackAddr is a loopback address nothing listens on now.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// metric reads one sample from the agent's /metrics; 0 if it cannot.
func metric(addr, name string) float64 {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}
