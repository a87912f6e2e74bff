//go:build ros2 && cgo

package ros2

import (
	"context"
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/zerohop/zerohop/ros2/rosargs"
	"github.com/zerohop/zerohop/ros2/tf"
)

func ftoa(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }

// listenStatic opens a participant in cfg's domain listening to
// /tf_static; both close when the test ends.
func listenStatic(t *testing.T, cfg Config) *StaticTransforms {
	t.Helper()
	p, err := NewParticipant(cfg, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	st, err := p.ListenStaticTransforms()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// A static broadcaster that wrote before the agent started (robot_state_
// publisher at launch) is still read: TRANSIENT_LOCAL on both sides. The
// chain crosses three transforms and is composed as tf2 does.
func TestStaticTransformsLateJoiner(t *testing.T) {
	cfg := loopbackConfig(t)
	s := math.Sin(5 * math.Pi / 180) // pitch 10°: q = (0, sin 5°, 0, cos 5°)
	c := math.Cos(5 * math.Pi / 180)
	pub := startPeer(t, cfg, "static", "rt/tf_static",
		"base_footprint,base_link,0,0,0.1,0,0,0,1",
		"base_link,lidar_mount,0.2,0,0.4,0,0,0,1",
		"lidar_mount,velodyne,0,0,0.12,0,"+ftoa(s)+",0,"+ftoa(c),
		"base_link,imu_link,0,0,0.05,0,0,0,1")
	pub.expect("WRITTEN")

	st := listenStatic(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	tr, path, err := st.Lookup(ctx, "base_footprint", "velodyne")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(path, ">"), "base_footprint>base_link>lidar_mount>velodyne"; got != want {
		t.Errorf("path %s, want %s", got, want)
	}
	want := [3]float64{0.2, 0, 0.62}
	for i := range want {
		if math.Abs(tr.Translation[i]-want[i]) > 1e-12 {
			t.Errorf("translation %v, want %v", tr.Translation, want)
			break
		}
	}
	if r, pitch, y := tr.Rotation.RPY(); math.Abs(r) > 1e-12 || math.Abs(pitch-10*math.Pi/180) > 1e-12 || math.Abs(y) > 1e-12 {
		t.Errorf("rpy %v %v %v, want pitch 10°", r, pitch, y)
	}
	// The match is reported by the participant's status goroutine, which
	// may come after the sample itself.
	waitFor(t, "the broadcaster's match", func() bool { return st.Matched() == 1 })
}

// A frame nobody publishes: the lookup waits until ctx ends and then says
// which frame is missing and what /tf_static held.
func TestStaticTransformsMissingFrame(t *testing.T) {
	cfg := loopbackConfig(t)
	pub := startPeer(t, cfg, "static", "rt/tf_static", "base_footprint,base_link,0,0,0.1,0,0,0,1")
	pub.expect("WRITTEN")
	st := listenStatic(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	// The tree has base_link once the sample is in: then ask for the
	// missing frame with a short wait.
	if _, _, err := st.Lookup(ctx, "base_footprint", "base_link"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the broadcaster's match", func() bool { return st.Matched() == 1 })
	short, cancelShort := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancelShort()
	_, _, err := st.Lookup(short, "base_footprint", "velodyne")
	if !errors.Is(err, tf.ErrUnknownFrame) {
		t.Fatalf("err %v, want ErrUnknownFrame", err)
	}
	for _, want := range []string{`"velodyne"`, "base_link", "/tf_static: 1 publisher(s) matched, 1 message(s), 1 transform(s)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

// With no broadcaster at all the error says so and asks the question a
// user must answer.
func TestStaticTransformsNoPublisher(t *testing.T) {
	cfg := loopbackConfig(t)
	st := listenStatic(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, _, err := st.Lookup(ctx, "base_footprint", "velodyne")
	if err == nil || !strings.Contains(err.Error(), "0 publisher(s) matched") || !strings.Contains(err.Error(), "is robot_state_publisher or a static_transform_publisher running") {
		t.Fatalf("err %v", err)
	}
}

// A namespaced robot remaps /tf_static (-r /tf_static:=tf_static), as its
// robot_state_publisher does.
func TestStaticTransformsRemapped(t *testing.T) {
	cfg := loopbackConfig(t)
	cfg.Namespace = "/robot1"
	args, err := rosargs.Parse([]string{"-r", "/tf_static:=tf_static"})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Remaps = args.Remaps
	pub := startPeer(t, cfg, "static", "rt/robot1/tf_static", "base_footprint,velodyne,0.1,0,0.5,0,0,0,1")
	pub.expect("WRITTEN")
	st := listenStatic(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	tr, _, err := st.Lookup(ctx, "base_footprint", "velodyne")
	if err != nil {
		t.Fatal(err)
	}
	if tr.Translation != [3]float64{0.1, 0, 0.5} {
		t.Errorf("translation %v", tr.Translation)
	}
}

// A TFMessage larger than the take's buffers: zh_take_tf fills what fits,
// skips a transform whose frame ids do not fit (and the rest once the
// records are full), and says how many the message had.
func TestTakeTFBounds(t *testing.T) {
	cfg := loopbackConfig(t)
	p, err := NewParticipant(cfg, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var got []tf.Stamped
	total := 0
	s, err := p.openSubscription(typeTFMessage, TFStaticTopic, TFStaticQoS(), handlers{transforms: func(ts []tf.Stamped, n int) {
		got, total = append(got[:0], ts...), n
	}}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Three records, eight bytes of frame ids: "ab" + "bbcc" + "cd" fit
	// exactly, the long pair between them does not, the fifth finds the
	// records full.
	s.tfs = &tfBuffers{recs: make([]tfRec, 3), strs: make([]byte, 8)}
	pub := startPeer(t, cfg, "static", "rt/tf_static",
		"a,b,1,0,0,0,0,0,1", "bb,cc,2,0,0,0,0,0,1", "a_long_parent,a_long_child,3,0,0,0,0,0,1",
		"c,d,4,0,0,0,0,0,1", "e,f,5,0,0,0,0,0,1")
	pub.expect("WRITTEN")
	waitFor(t, "the TFMessage", func() bool {
		n, rc := s.takeOne()
		if rc < 0 {
			t.Fatal(rc)
		}
		return n == 1
	})
	var names []string
	for _, st := range got {
		names = append(names, st.Parent+">"+st.Child+"@"+ftoa(st.Transform.Translation[0]))
	}
	if strings.Join(names, " ") != "a>b@1 bb>cc@2 c>d@4" || total != 5 {
		t.Errorf("took %v of %d, want a>b@1 bb>cc@2 c>d@4 of 5", names, total)
	}
	if s.Skipped() != 2 {
		t.Errorf("skipped %d, want 2", s.Skipped())
	}
}

// Transforms from several broadcasters (robot_state_publisher, a driver's
// static_transform_publisher) join one tree; a transform tf2 would refuse
// is refused and named when a lookup fails.
func TestStaticTransformsFromTwoBroadcasters(t *testing.T) {
	cfg := loopbackConfig(t)
	startPeer(t, cfg, "static", "rt/tf_static", "base_footprint,base_link,0,0,0.1,0,0,0,1").expect("WRITTEN")
	startPeer(t, cfg, "static", "rt/tf_static", "base_link,velodyne,0.2,0,0.5,0,0,0,1", "base_link,imu,0,0,0.2,0,0,0,2").expect("WRITTEN")
	st := listenStatic(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	tr, _, err := st.Lookup(ctx, "base_footprint", "velodyne")
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(tr.Translation[2]-0.6) > 1e-12 {
		t.Errorf("translation %v, want z 0.6 (0.1 + 0.5 from two broadcasters)", tr.Translation)
	}
	waitFor(t, "both broadcasters' matches", func() bool { return st.Matched() == 2 })
	short, cancelShort := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancelShort()
	_, _, err = st.Lookup(short, "base_footprint", "imu")
	if err == nil || !strings.Contains(err.Error(), "1 refused: base_link→imu: invalid quaternion") || !strings.Contains(err.Error(), "2 publisher(s) matched") {
		t.Errorf("err %v, want the refused transform named", err)
	}
}
