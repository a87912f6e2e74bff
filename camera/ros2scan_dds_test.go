//go:build ros2 && cgo

package camera

import (
	"context"
	"math"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/zerohop/zerohop/handles"
	"github.com/zerohop/zerohop/handles/transport"
)

// A planar LiDAR's driver publishes sensor_msgs/LaserScan; the camera
// node with a scan topic serves each scan over the unix socket as a
// cloud marked planar: one point per valid return (pub.c's rays 1-4 are
// NaN, +Inf, below range_min and above range_max), in the scan's frame.
func TestRunROS2NodeServesALaserScanAsAPlanarCloud(t *testing.T) {
	cfg := ros2Config(t)
	socket := socketPath(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- RunROS2Node(ctx, NodeConfig{Rate: 30, Socket: socket, AllowGID: -1, MetricsAddr: "", Log: zaptest.NewLogger(t)},
			ROS2NodeConfig{DDS: cfg, ScanTopic: "/scan", MaxPoints: 2000})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("RunROS2Node: %v", err)
		}
	}()
	type frame struct {
		h   handles.Handle
		pts [][4]float32
	}
	got := make(chan frame, 1)
	sub, err := transport.NewSubscriber(transport.SubscriberConfig{Path: socket, Name: "test", Topics: []string{PointsTopicName},
		MinBackoff: 5 * time.Millisecond, MaxBackoff: 50 * time.Millisecond, OnLease: func(l transport.Lease) {
			select {
			case got <- frame{l.Handle, scanPoints(l.Bytes())}:
			default:
			}
			l.Release()
		}})
	if err != nil {
		t.Fatal(err)
	}
	subCtx, subCancel := context.WithTimeout(ctx, 20*time.Second)
	defer subCancel()
	go sub.Run(subCtx)
	const n = 720
	startDriver(t, cfg, "scan", "rt/scan", "20", "720")
	var f frame
	select {
	case f = <-got:
	case <-time.After(20 * time.Second):
		t.Fatal("no scan over the socket within 20 s")
	}
	if f.h.Kind != handles.KindPoints || f.h.Points.Flags != handles.PointsPlanar || f.h.Points.Count != n-4 ||
		f.h.FrameID.String() != "laser" || f.h.CaptureNs != 1700000001_987654321 {
		t.Fatalf("handle %+v: want %d planar points in frame laser, stamped as pub.c", f.h, n-4)
	}
	// Ray 0 and ray 5 (the first after the invalid ones), as pub.c sends
	// them: range 1 + (i%100)/4, angle -π + i·2π/N.
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
	for _, planar := range []bool{true, false} {
		cfg := ros2Config(t)
		socket := socketPath(t)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- RunROS2Node(ctx, NodeConfig{Rate: 30, Socket: socket, AllowGID: -1, PlanarLidar: planar, Log: zaptest.NewLogger(t)},
				ROS2NodeConfig{DDS: cfg, PointsTopic: "/lidar/points", MaxPoints: 1000})
		}()
		got := make(chan handles.Handle, 1)
		sub, err := transport.NewSubscriber(transport.SubscriberConfig{Path: socket, Name: "test", Topics: []string{PointsTopicName},
			MinBackoff: 5 * time.Millisecond, MaxBackoff: 50 * time.Millisecond, OnLease: func(l transport.Lease) {
				select {
				case got <- l.Handle:
				default:
				}
				l.Release()
			}})
		if err != nil {
			t.Fatal(err)
		}
		subCtx, subCancel := context.WithTimeout(ctx, 20*time.Second)
		go sub.Run(subCtx)
		startDriver(t, cfg, "cloud", "rt/lidar/points", "20", "100")
		select {
		case h := <-got:
			if want := map[bool]handles.PointFlags{true: handles.PointsPlanar}[planar]; h.Points.Flags != want || h.Points.Count != 100 {
				t.Errorf("PlanarLidar %v: handle %+v, want flags %d on 100 points", planar, h, want)
			}
		case <-time.After(20 * time.Second):
			t.Errorf("PlanarLidar %v: no cloud over the socket within 20 s", planar)
		}
		subCancel()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("RunROS2Node: %v", err)
		}
	}
}
