//go:build ros2 && cgo

package camera

import (
	"fmt"
	"math"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/zerohop/zerohop/handles"
	"github.com/zerohop/zerohop/handles/transport"
	"github.com/zerohop/zerohop/ros2"
)

// pointsFrame is a cloud taken over the socket: its handle and points.
type pointsFrame struct {
	h   handles.Handle
	pts [][4]float32
}

// firstCloud runs a camera node with rc on a fresh socket, subscribes to
// its points and returns the first cloud it serves once the driver
// (startDriver's args) publishes; it fails the test after 20 s. cfg.Log
// nil logs to the test.
func firstCloud(t *testing.T, cfg NodeConfig, rc ROS2NodeConfig, driver ...string) pointsFrame {
	t.Helper()
	return firstCloudOf(t, cfg, rc, func() { startDriver(t, rc.DDS, driver...) })
}

// firstCloudOf is firstCloud with the drivers started by start, once the
// node serves.
func firstCloudOf(t *testing.T, cfg NodeConfig, rc ROS2NodeConfig, start func()) pointsFrame {
	t.Helper()
	cfg.Socket, cfg.Rate, cfg.AllowGID = socketPath(t), 30, -1
	if cfg.Log == nil {
		cfg.Log = zaptest.NewLogger(t)
	}
	ctx := startROS2Node(t, cfg, rc)
	got := make(chan pointsFrame, 1)
	subscribeTo(t, ctx, cfg.Socket, []string{PointsTopicName}, func(l transport.Lease) {
		select {
		case got <- pointsFrame{l.Handle, scanPoints(l.Bytes())}:
		default:
		}
		l.Release()
	})
	start()
	select {
	case f := <-got:
		return f
	case <-time.After(20 * time.Second):
		t.Fatal("no cloud over the socket within 20 s")
	}
	panic("unreachable")
}

// A planar LiDAR's driver publishes sensor_msgs/LaserScan; the camera
// node with a scan topic serves each scan over the unix socket as a
// cloud marked planar: one point per valid return (pub.c's rays 1-4 are
// NaN, +Inf, below range_min and above range_max), in the scan's frame.
func TestRunROS2NodeServesALaserScanAsAPlanarCloud(t *testing.T) {
	const n = 720
	f := firstCloud(t, NodeConfig{}, ROS2NodeConfig{DDS: ros2Config(t), ScanTopics: []string{"/scan"}, MaxPoints: 2000}, "scan", "rt/scan", "20", "720")
	if f.h.Kind != handles.KindPoints || f.h.Points.Flags != handles.PointsPlanar || f.h.Points.Count != n-4 ||
		f.h.FrameID.String() != "laser" || f.h.CaptureNs != 1700000001_987654321 {
		t.Fatalf("handle %+v: want %d planar points in frame laser, stamped as pub.c", f.h, n-4)
	}
	// Rays 0, 5 (the first after the invalid ones) and the last, as
	// pub.c sends them: range 1 + (i%100)/4, angle -π + i·2π/N.
	for k, i := range map[int]int{0: 0, 1: 5, n - 5: n - 1} {
		rng, th := 1+float64(i%100)*0.25, -math.Pi+float64(i)*2*math.Pi/n
		p := f.pts[k]
		if math.Abs(float64(p[0])-rng*math.Cos(th)) > 1e-4 || math.Abs(float64(p[1])-rng*math.Sin(th)) > 1e-4 || p[2] != 0 || p[3] != float32(i) {
			t.Errorf("point %d (ray %d) %v, want (%.4f, %.4f, 0, %d)", k, i, p, rng*math.Cos(th), rng*math.Sin(th), i)
		}
	}
}

// A 2D scanner whose driver publishes PointCloud2 (or laser_geometry's
// projection of its LaserScan): with PlanarLidar the camera marks those
// clouds planar too; without it they are 3D clouds.
func TestRunROS2NodeMarksPointCloud2PlanarWhenTold(t *testing.T) {
	for _, tc := range []struct {
		planar bool
		want   handles.PointFlags
	}{{true, handles.PointsPlanar}, {false, 0}} {
		t.Run(map[bool]string{true: "planar", false: "3D"}[tc.planar], func(t *testing.T) {
			f := firstCloud(t, NodeConfig{PlanarLidar: tc.planar}, ROS2NodeConfig{DDS: ros2Config(t), PointsTopics: []string{"/lidar/points"}, MaxPoints: 1000},
				"cloud", "rt/lidar/points", "20", "100")
			if f.h.Points.Flags != tc.want || f.h.Points.Count != 100 {
				t.Errorf("handle %+v, want flags %d on 100 points", f.h, tc.want)
			}
		})
	}
}

// With --ros2-fixed-frame the node listens to /tf and /tf_static;
// with no transform there (no base driver in this test) each scan is
// served as sent, and the log says why, naming the frames and /tf.
func TestRunROS2NodeServesScansAsSentWithoutTF(t *testing.T) {
	core, logs := observer.New(zapcore.WarnLevel)
	f := firstCloud(t, NodeConfig{Log: zap.New(core)}, ROS2NodeConfig{DDS: ros2Config(t), ScanTopics: []string{"/scan"}, FixedFrame: "odom", MaxPoints: 2000},
		"scan", "rt/scan", "20", "720")
	if f.h.Points.Flags != handles.PointsPlanar || f.h.Points.Count != 716 || f.pts[0][2] != 0 {
		t.Fatalf("handle %+v, first point %v: want the 716 valid rays as sent", f.h, f.pts[0])
	}
	waitForLog(t, logs, "not deskewed")
	w := logs.FilterMessageSnippet("not deskewed").All()[0]
	fields := w.ContextMap()
	if fields["fixed_frame"] != "odom" || fields["frame"] != "laser" || !strings.Contains(fmt.Sprint(fields["error"]), "/tf: 0 publisher(s)") {
		t.Errorf("warning %q %v: want the fixed frame odom, the scan frame laser and what /tf saw", w.Message, fields)
	}
}

// waitForLog waits up to 10 s for a log line containing snippet.
func waitForLog(t *testing.T, logs *observer.ObservedLogs, snippet string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for logs.FilterMessageSnippet(snippet).Len() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no log line with %q within 10 s", snippet)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// startStaticTF builds the ros2 package's test peer and publishes tfs
// (PARENT,CHILD,X,Y,Z,QX,QY,QZ,QW each) on /tf_static as tf2_ros's
// static broadcaster does, until the test ends.
func startStaticTF(t *testing.T, cfg ros2.Config, tfs ...string) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "peer")
	flags, err := exec.Command("pkg-config", "--cflags", "--libs", "CycloneDDS").Output()
	if err != nil {
		t.Fatalf("pkg-config CycloneDDS: %v", err)
	}
	args := []string{"-O1", "-Wall", "-I../ros2", "-o", bin, "../ros2/testdata/peer/peer.c"}
	for _, c := range []string{"builtin_interfaces", "std_msgs", "geometry_msgs", "tf2_msgs", "rosgraph_msgs", "sensor_msgs", "zerohop_msgs", "diagnostic_msgs", "rcl_interfaces"} {
		args = append(args, "../ros2/"+c+".c")
	}
	gcc := exec.Command("gcc", append(append(args, strings.Fields(string(flags))...), "-lm")...)
	if out, err := gcc.CombinedOutput(); err != nil {
		t.Fatalf("build peer: %v\n%s", err, out)
	}
	out := runProgram(t, cfg, bin, append([]string{"static", "rt/tf_static"}, tfs...)...)
	if line, err := out.ReadString('\n'); err != nil || strings.TrimSpace(line) != "WRITTEN" {
		t.Fatalf("peer static: %q, %v", line, err)
	}
}

// Two scanners' drivers, their mounts on /tf_static: the camera node
// serves one planar cloud in base_link holding both scans, each moved by
// its mount (the front one 0.3 m ahead, the rear one 0.3 m behind and
// turned to face backwards); /metrics counts each scanner's scans.
func TestRunROS2NodeMergesTwoScanners(t *testing.T) {
	const n = 720
	dds := ros2Config(t)
	cfg := NodeConfig{MetricsAddr: freeAddr(t)}
	rc := ROS2NodeConfig{DDS: dds, ScanTopics: []string{"/front/scan", "/rear/scan"}, MergeFrame: "base_link", MaxPoints: 1000}
	startStaticTF(t, dds, "base_link,front_laser,0.3,0,0.2,0,0,0,1", "base_link,rear_laser,-0.3,0,0.25,0,0,1,0")
	f := firstCloudOf(t, cfg, rc, func() {
		startDriver(t, dds, "scan", "rt/front/scan", "20", "720", "front_laser")
		startDriver(t, dds, "scan", "rt/rear/scan", "20", "720", "rear_laser")
	})
	if f.h.Points.Flags != handles.PointsPlanar || f.h.Points.Count != 2*(n-4) || f.h.FrameID.String() != "base_link" || f.h.CaptureNs != 1700000001_987654321 {
		t.Fatalf("handle %+v: want %d planar points in base_link, stamped as pub.c", f.h, 2*(n-4))
	}
	// Ray 0 of each: range 1 at -π, (-1, 0) in its scanner's frame.
	for k, want := range map[int][3]float64{0: {-1 + 0.3, 0, 0.2}, n - 4: {1 - 0.3, 0, 0.25}} {
		p := f.pts[k]
		if math.Abs(float64(p[0])-want[0]) > 1e-5 || math.Abs(float64(p[1])-want[1]) > 1e-5 || math.Abs(float64(p[2])-want[2]) > 1e-5 {
			t.Errorf("point %d %v, want %v", k, p, want)
		}
	}
	cam := &cameraProc{metrics: cfg.MetricsAddr}
	for _, name := range []string{`zerohop_camera_ros2_merged_total{result="merged",ros_topic="/front/scan"}`, `zerohop_camera_ros2_merged_total{result="merged",ros_topic="/rear/scan"}`} {
		waitMetric(t, cam, name)
	}
}

// Two 3D LiDARs' drivers (PointCloud2), their mount on /tf_static: the
// camera node serves one cloud in base_footprint holding both, not
// marked planar.
func TestRunROS2NodeMergesTwoLiDARs(t *testing.T) {
	dds := ros2Config(t)
	rc := ROS2NodeConfig{DDS: dds, PointsTopics: []string{"/front/points", "/rear/points"}, MergeFrame: "base_footprint", MaxPoints: 1000}
	startStaticTF(t, dds, "base_footprint,velodyne_top_front_left,0.5,0,1.5,0,0,0,1")
	f := firstCloudOf(t, NodeConfig{}, rc, func() {
		startDriver(t, dds, "cloud", "rt/front/points", "20", "600")
		startDriver(t, dds, "cloud", "rt/rear/points", "20", "400")
	})
	if f.h.Points.Flags&handles.PointsPlanar != 0 || f.h.Points.Count != 1000 || f.h.FrameID.String() != "base_footprint" {
		t.Fatalf("handle %+v: want 1000 points in base_footprint, not planar", f.h)
	}
	// pub.c's point k: x = k*0.5 + 1, y = -k/3, z = k/1024 - 2, moved by
	// the mount; the rear LiDAR's points follow the front's 600.
	for _, k := range []int{0, 599, 600, 999} {
		j := k % 600
		if k >= 600 {
			j = k - 600
		}
		want := [3]float64{float64(j)*0.5 + 1 + 0.5, -float64(j) / 3.0, float64(j)/1024.0 - 2 + 1.5}
		p := f.pts[k]
		if math.Abs(float64(p[0])-want[0]) > 1e-4 || math.Abs(float64(p[1])-want[1]) > 1e-4 || math.Abs(float64(p[2])-want[2]) > 1e-4 {
			t.Errorf("point %d %v, want %v", k, p, want)
		}
	}
}
