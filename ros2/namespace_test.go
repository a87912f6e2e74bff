//go:build ros2 && cgo

package ros2

import (
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/zerohop/zerohop/planner"
	"github.com/zerohop/zerohop/ros2/rosargs"
)

// TestRelativeTopicsLiveUnderTheNamespace: a participant in namespace
// /robot1 publishes the relative "cmd_vel" on rt/robot1/cmd_vel and
// subscribes "~/image_raw" on rt/robot1/<node>/image_raw, as a ROS node so
// placed would; the peer, a stand-in ROS node, knows only the DDS names.
// Every other endpoint resolves the same way, and the log names the
// resolved topics.
func TestRelativeTopicsLiveUnderTheNamespace(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	cfg := loopbackConfig(t)
	cfg.NodeName, cfg.Namespace = "zh_ns_test", "/robot1"
	p, err := NewParticipant(cfg, zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	sink, err := p.NewTwistSink(TwistOptions{}) // the default, "cmd_vel"
	if err != nil {
		t.Fatal(err)
	}
	cmdVel := startPeer(t, cfg, "sub", "twist", "rt/robot1/cmd_vel", "reliable", "1")
	cmdVel.expect("MATCHED")
	waitFor(t, "the cmd_vel publisher to match the peer on rt/robot1/cmd_vel", func() bool { return sink.Matched() == 1 })
	if err := sink.PublishTwist(planner.Twist{LinearX: 0.5, AngularZ: 0.125}, time.Now()); err != nil {
		t.Fatal(err)
	}
	sample := fields(cmdVel.expect("SAMPLE"))
	if lx, az := parseHexFloat(t, sample["lx"]), parseHexFloat(t, sample["az"]); lx != 0.5 || az != 0.125 {
		t.Errorf("sample on rt/robot1/cmd_vel: linear.x %v, angular.z %v; want 0.5, 0.125", lx, az)
	}

	widths := make(chan uint32, 1)
	sub, err := p.SubscribeImage("~/image_raw", SubscriptionOptions{}, func(v *ImageView) {
		select {
		case widths <- v.Width:
		default:
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	startPeer(t, cfg, "pub", "image", "rt/robot1/zh_ns_test/image_raw", "besteffort", "20", "8")
	select {
	case w := <-widths:
		if w != 8 {
			t.Errorf("image width %d, want 8", w)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("no image on rt/robot1/zh_ns_test/image_raw within 20 s (received %d)", sub.Received())
	}

	hw, err := p.NewHandleWriter(HandleWriterOptions{Topic: "zerohop/handles"})
	if err != nil {
		t.Fatal(err)
	}
	mirror, err := p.NewPointCloud2Mirror("{node}/points", QoS{})
	if err != nil {
		t.Fatal(err)
	}
	absolute, err := p.NewTwistSink(TwistOptions{Topic: "/cmd_vel_all"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		ep       *endpoint
		ros, dds string
	}{
		{sink.ep, "/robot1/cmd_vel", "rt/robot1/cmd_vel"},
		{sub.ep, "/robot1/zh_ns_test/image_raw", "rt/robot1/zh_ns_test/image_raw"},
		{hw.ep, "/robot1/zerohop/handles", "rt/robot1/zerohop/handles"},
		{mirror.ep, "/robot1/zh_ns_test/points", "rt/robot1/zh_ns_test/points"},
		{absolute.ep, "/cmd_vel_all", "rt/cmd_vel_all"},
	} {
		if c.ep.rosTopic != c.ros || c.ep.ddsTopic != c.dds {
			t.Errorf("endpoint on %s (%s), want %s (%s)", c.ep.rosTopic, c.ep.ddsTopic, c.ros, c.dds)
		}
	}
	for msg, topic := range map[string]string{
		"ros2: publishing cmd_vel":      "/robot1/cmd_vel",
		"ros2: subscribed":              "/robot1/zh_ns_test/image_raw",
		"ros2: publishing slot handles": "/robot1/zerohop/handles",
	} {
		if es := logs.FilterMessageSnippet(msg).FilterField(zap.String("topic", topic)).All(); len(es) == 0 {
			t.Errorf("no %q line with topic %s; logged: %v", msg, topic, logs.FilterMessageSnippet(msg).All())
		}
	}
}

// TestRemapsRenameTheNodeAndMoveItsTopics: the rules a launch file gives
// (--ros-args -r) rename the node on the graph and move its topics on the
// wire, where a stand-in ROS node that knows only the DDS names finds
// them.
func TestRemapsRenameTheNodeAndMoveItsTopics(t *testing.T) {
	args, err := rosargs.Parse([]string{"-r", "__node:=front", "-r", "__ns:=/robot1",
		"-r", "cmd_vel:=/base/cmd_vel", "-r", "front:~/image_raw:=camera/image", "-r", "other:points:=/x"})
	if err != nil {
		t.Fatal(err)
	}
	cfg := loopbackConfig(t)
	cfg.NodeName, cfg.Remaps = "zh_remap_test", args.Remaps
	p, err := NewParticipant(cfg, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	g := startProgram(t, graphPath, cfg, "16")
	if n := g.waitGraph("0", "0").nodes[0]; n["ns"] != "/robot1" || n["name"] != "front" {
		t.Errorf("NODE %v, want /robot1 front", n)
	}

	sink, err := p.NewTwistSink(TwistOptions{}) // "cmd_vel"
	if err != nil {
		t.Fatal(err)
	}
	cmdVel := startPeer(t, cfg, "sub", "twist", "rt/base/cmd_vel", "reliable", "1")
	cmdVel.expect("MATCHED")
	waitFor(t, "the cmd_vel publisher to match the peer on rt/base/cmd_vel", func() bool { return sink.Matched() == 1 })
	if err := sink.PublishTwist(planner.Twist{LinearX: 0.25}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if lx := parseHexFloat(t, fields(cmdVel.expect("SAMPLE"))["lx"]); lx != 0.25 {
		t.Errorf("linear.x %v on rt/base/cmd_vel, want 0.25", lx)
	}
	image, err := p.SubscribeImage("~/image_raw", SubscriptionOptions{}, func(*ImageView) {})
	if err != nil {
		t.Fatal(err)
	}
	points, err := p.SubscribePointCloud2("points", SubscriptionOptions{}, func(*PointCloud2View) {})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		ep       *endpoint
		ros, dds string
	}{
		{sink.ep, "/base/cmd_vel", "rt/base/cmd_vel"},
		{image.ep, "/robot1/camera/image", "rt/robot1/camera/image"},
		{points.ep, "/robot1/points", "rt/robot1/points"}, // the rule is for another node
	} {
		if c.ep.rosTopic != c.ros || c.ep.ddsTopic != c.dds {
			t.Errorf("endpoint on %s (%s), want %s (%s)", c.ep.rosTopic, c.ep.ddsTopic, c.ros, c.dds)
		}
	}
}
