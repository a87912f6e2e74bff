//go:build ros2 && cgo

package camera

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/zerohop/zerohop/handles"
	"github.com/zerohop/zerohop/handles/transport"
	"github.com/zerohop/zerohop/ros2"
)

// These tests take messages from testdata/ros2pub/pub.c, a driver
// stand-in built from the raw Cyclone C API and ros2/'s idlc-generated
// types, over UDP on loopback (ros2/cyclonedds.xml), each in its own
// domain and with a Cyclone tag unique to this process.

var ros2Domains atomic.Uint32

// ros2Config is a loopback configuration in a domain no other test of
// this run uses (200..229; the ros2 package's tests use 100..199).
func ros2Config(t *testing.T) ros2.Config {
	abs, err := filepath.Abs("../ros2/cyclonedds.xml")
	if err != nil {
		t.Fatal(err)
	}
	return ros2.Config{
		Domain:     200 + (uint32(os.Getpid())*7+ros2Domains.Add(1))%30,
		CycloneURI: "file://" + abs,
		XML: "<CycloneDDS><Domain><Discovery><Tag>zerohop-camera-test-" + strconv.Itoa(os.Getpid()) +
			"</Tag></Discovery></Domain></CycloneDDS>",
	}
}

// startDriver builds and runs the publisher (or subscriber); it stops when
// the test ends. It returns the program's output after READY.
func startDriver(t *testing.T, cfg ros2.Config, args ...string) *bufio.Reader {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "ros2pub")
	flags, err := exec.Command("pkg-config", "--cflags", "--libs", "CycloneDDS").Output()
	if err != nil {
		t.Fatalf("pkg-config CycloneDDS: %v", err)
	}
	gcc := exec.Command("gcc", append([]string{"-O1", "-Wall", "-I../ros2", "-o", bin, "testdata/ros2pub/pub.c",
		"../ros2/builtin_interfaces.c", "../ros2/std_msgs.c", "../ros2/sensor_msgs.c"}, strings.Fields(string(flags))...)...)
	if out, err := gcc.CombinedOutput(); err != nil {
		t.Fatalf("build ros2pub: %v\n%s", err, out)
	}
	return runProgram(t, cfg, bin, args...)
}

// runProgram runs bin DOMAIN args... as startDriver does, until the test
// ends, and returns its output after its READY line.
func runProgram(t *testing.T, cfg ros2.Config, bin string, args ...string) *bufio.Reader {
	t.Helper()
	cmd := exec.Command(bin, append([]string{strconv.Itoa(int(cfg.Domain))}, args...)...)
	cmd.Env = append(os.Environ(), "CYCLONEDDS_URI="+cfg.CycloneConfig())
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
	t.Cleanup(func() {
		stdin.Close() // ends the publisher
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	out := bufio.NewReaderSize(stdout, 1<<20)
	line, err := out.ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "READY" {
		t.Fatalf("%s: %q, %v", filepath.Base(bin), line, err)
	}
	return out
}

// newDDSRig is a camera whose ROS 2 source listens on both topics,
// delivering in-process.
func newDDSRig(t *testing.T, cfg ros2.Config, mirrors func(*ros2.Participant) [2]MirrorSink) (*ROS2Source, *transport.Inproc, *Camera) {
	t.Helper()
	log := zaptest.NewLogger(t)
	p, err := ros2.NewParticipant(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	cam, err := New(Config{Source: PoolSizes{Points: 4096, ImageBytes: 64 * 64 * 3}, Slots: 4, Checksum: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cam.Close() })
	tr, err := transport.NewInproc(transport.InprocConfig{Topics: []transport.Topic{
		{Name: PointsTopicName, Kind: handles.KindPoints, Pool: cam.Pool(TopicPoints)},
		{Name: ImageTopicName, Kind: handles.KindImage, Pool: cam.Pool(TopicImage)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	scfg := ROS2SourceConfig{PointsTopics: []string{"/lidar/points"}, ImageTopic: "camera/image_raw", Checksum: true, Log: log}
	if mirrors != nil {
		scfg.Mirrors = mirrors(p)
	}
	src, err := NewROS2Source(p, cam, tr, scfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() }) // runs before the transport and camera close
	return src, tr, cam
}

func latest(t *testing.T, tr *transport.Inproc, topic int) transport.Lease {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l, err := tr.Latest(ctx, topic)
	if err != nil {
		t.Fatalf("no %s frame within 20 s: %v", TopicName(topic), err)
	}
	return l
}

func TestROS2SourceTakesDriverCloudBitExact(t *testing.T) {
	cfg := ros2Config(t)
	src, tr, _ := newDDSRig(t, cfg, nil)
	const n = 3000 // 96 KB: several UDP fragments
	startDriver(t, cfg, "cloud", "rt/lidar/points", "20", strconv.Itoa(n))
	l := latest(t, tr, TopicPoints)
	defer l.Release()
	want := make([]byte, 0, n*16)
	for k := range n {
		for _, v := range []float32{float32(float64(k)*0.5 + 1), float32(-float64(k) / 3.0), float32(float64(k)/1024.0 - 2), float32(float64(k) / 7.0)} {
			want = binary.LittleEndian.AppendUint32(want, math.Float32bits(v))
		}
	}
	h := l.Handle
	if got := l.Bytes(); !bytes.Equal(got, want) {
		t.Errorf("slot differs from the expected packed XYZI (%d bytes, want %d)", len(got), len(want))
	}
	if h.Points.Count != n || h.Length != n*16 || h.CaptureNs != 1700000001_987654321 || h.FrameID.String() != "velodyne_top_fro" {
		t.Errorf("handle %+v", h)
	}
	if h.Checksum != handles.PayloadChecksum(want) {
		t.Errorf("checksum %x, want %x", h.Checksum, handles.PayloadChecksum(want))
	}
	// The counters are bumped after the handle is handed on, so a
	// subscriber can hold the frame a moment before Published says so.
	waitStats(t, src, TopicPoints, "published, none unsupported", func(st ROS2Stats) bool {
		return st.Unsupported == 0 && st.Published > 0
	})
}

// waitStats polls the source's counters until ok holds, for at most 5 s.
func waitStats(t *testing.T, src *ROS2Source, topic int, want string, ok func(ROS2Stats) bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for st := src.Stats(topic); !ok(st); st = src.Stats(topic) {
		if time.Now().After(deadline) {
			t.Errorf("%s stats %+v: want %s within 5 s", TopicName(topic), st, want)
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestROS2SourceTakesDriverImageBitExact(t *testing.T) {
	cfg := ros2Config(t)
	_, tr, _ := newDDSRig(t, cfg, nil)
	startDriver(t, cfg, "image", "rt/camera/image_raw", "20", "13")
	l := latest(t, tr, TopicImage)
	defer l.Release()
	_, want := buildImage("bgr8", 13, 7, 3, 5) // same bytes as pub.c
	if got := l.Bytes(); !bytes.Equal(got, want) {
		t.Errorf("slot\n got %x\nwant %x", got, want)
	}
	h := l.Handle
	if h.Image != (handles.ImageFormat{Width: 13, Height: 7, RowStep: 39, Encoding: handles.EncodingBGR8}) ||
		h.CaptureNs != 1700000000_123456789 || h.FrameID.String() != "camera_optical" {
		t.Errorf("handle %+v", h)
	}
}

func TestROS2SourceCountsUnsupportedDriverCloud(t *testing.T) {
	cfg := ros2Config(t)
	src, tr, cam := newDDSRig(t, cfg, nil)
	startDriver(t, cfg, "cloud_int16", "rt/lidar/points", "10", "100")
	deadline := time.Now().Add(20 * time.Second)
	for src.Stats(TopicPoints).Unsupported < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("stats %+v: want 3 unsupported within 20 s", src.Stats(TopicPoints))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, ok := tr.TryLatest(TopicPoints); ok {
		t.Error("an unsupported cloud was published")
	}
	if st := src.Stats(TopicPoints); st.Published != 0 || cam.Pool(TopicPoints).InUse() != 0 {
		t.Errorf("stats %+v, in use %d", st, cam.Pool(TopicPoints).InUse())
	}
}

// TestROS2SourceCountsCloudWithTooManyFields: the subscription skips a
// cloud of 33 fields before the source sees it; the source's counters (and
// so /metrics) still count it, received and unsupported.
func TestROS2SourceCountsCloudWithTooManyFields(t *testing.T) {
	cfg := ros2Config(t)
	src, _, _ := newDDSRig(t, cfg, nil)
	startDriver(t, cfg, "cloud_wide", "rt/lidar/points", "10", "100")
	for deadline := time.Now().Add(20 * time.Second); src.Stats(TopicPoints).Unsupported < 3; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("stats %+v: want 3 unsupported within 20 s", src.Stats(TopicPoints))
		}
	}
	if st := src.Stats(TopicPoints); st.Received < st.Unsupported || st.Published != 0 {
		t.Fatalf("stats %+v: every skipped cloud received, none published", st)
	}
}

// The node serves ROS 2 frames to another subscriber over the unix
// transport, as cmd/camera --source ros2 does.
func TestRunROS2NodeServesDriverFramesOverUnixSocket(t *testing.T) {
	cfg := ros2Config(t)
	socket, metrics := socketPath(t), freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- RunROS2Node(ctx, NodeConfig{Rate: 30, Socket: socket, AllowGID: -1, Checksum: true, MetricsAddr: metrics, Log: zaptest.NewLogger(t)},
			ROS2NodeConfig{DDS: cfg, PointsTopics: []string{"/lidar/points"}, ImageTopic: "/camera/image_raw", MaxPoints: 1000, MaxImageBytes: 4096})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("RunROS2Node: %v", err)
		}
	}()
	type frame struct {
		h    handles.Handle
		data []byte
	}
	got := make(chan frame, 1)
	subscribe(t, socket, func(l transport.Lease) {
		f := frame{l.Handle, bytes.Clone(l.Bytes())}
		l.Release()
		if f.h.Kind == handles.KindImage {
			select {
			case got <- f:
			default:
			}
		}
	})
	startDriver(t, cfg, "image", "rt/camera/image_raw", "20", "13")
	select {
	case f := <-got:
		if _, want := buildImage("bgr8", 13, 7, 3, 5); !bytes.Equal(f.data, want) {
			t.Errorf("image over the socket\n got %x\nwant %x", f.data, want)
		}
		if f.h.Checksum != handles.PayloadChecksum(f.data) || f.h.FrameID.String() != "camera_optical" {
			t.Errorf("handle %+v", f.h)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no image over the socket within 20 s")
	}
	// /metrics counts driver frames like rendered ones, plus the ROS 2
	// outcomes (bumped just after the handle is handed on: poll).
	cam := &cameraProc{metrics: metrics}
	for _, name := range []string{`zerohop_camera_published_total{topic="image"}`, `zerohop_camera_ros2_messages_total{result="published",topic="image"}`} {
		waitMetric(t, cam, name)
	}
}

// waitMetric waits up to 5 s for the camera's counter name to reach 1:
// counters are bumped just after the handle is handed on.
func waitMetric(t *testing.T, cam *cameraProc, name string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		v, err := cam.metric(name)
		if err == nil && v >= 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("/metrics %s = %v, %v; want ≥ 1", name, v, err)
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A robot without a camera: with no image topic (--ros2-image-topic "")
// the node serves driver clouds alone, to a subscriber of points (the
// agent with --lidar-only), and refuses one that asks for images too with
// why and the fix.
func TestRunROS2NodeWithoutAnImageTopicServesCloudsAlone(t *testing.T) {
	cfg := ros2Config(t)
	socket := socketPath(t)
	ctx := startROS2Node(t, NodeConfig{Rate: 30, Socket: socket, AllowGID: -1, MetricsAddr: "", Log: zaptest.NewLogger(t)},
		ROS2NodeConfig{DDS: cfg, PointsTopics: []string{"/lidar/points"}, MaxPoints: 1000})
	refusal := subscribeTo(t, ctx, socket, []string{PointsTopicName, ImageTopicName}, func(l transport.Lease) { l.Release() })
	if err := <-refusal; !errors.Is(err, transport.ErrRefused) || !strings.Contains(err.Error(), NoImageWhy) {
		t.Errorf("a subscriber of points and images: %v; want refused with %q", err, NoImageWhy)
	}
	got := make(chan handles.Handle, 1)
	subscribeTo(t, ctx, socket, []string{PointsTopicName}, func(l transport.Lease) {
		select {
		case got <- l.Handle:
		default:
		}
		l.Release()
	})
	startDriver(t, cfg, "cloud", "rt/lidar/points", "20", "100")
	select {
	case h := <-got:
		if h.Kind != handles.KindPoints || h.Points.Count != 100 {
			t.Errorf("handle %+v, want a cloud of 100 points", h)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no cloud over the socket within 20 s")
	}
}

// startROS2Node runs RunROS2Node(cfg, rc) until the test ends, failing
// it on an error; the context returned ends with the node.
func startROS2Node(t *testing.T, cfg NodeConfig, rc ROS2NodeConfig) context.Context {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- RunROS2Node(ctx, cfg, rc) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("RunROS2Node: %v", err)
		}
	})
	return ctx
}

// subscribeTo subscribes "test" to topics of the camera at socket, for at
// most 20 s within ctx, handing each lease to onLease; the channel gets
// Run's result.
func subscribeTo(t *testing.T, ctx context.Context, socket string, topics []string, onLease func(transport.Lease)) <-chan error {
	t.Helper()
	sub, err := transport.NewSubscriber(transport.SubscriberConfig{Path: socket, Name: "test", Topics: topics,
		MinBackoff: 5 * time.Millisecond, MaxBackoff: 50 * time.Millisecond, OnLease: onLease})
	if err != nil {
		t.Fatal(err)
	}
	subCtx, subCancel := context.WithTimeout(ctx, 20*time.Second)
	t.Cleanup(subCancel)
	runErr := make(chan error, 1)
	go func() { runErr <- sub.Run(subCtx) }()
	return runErr
}

// readLine returns r's next line, failing after 20 s.
func readLine(t *testing.T, r *bufio.Reader) string {
	t.Helper()
	got := make(chan string, 1)
	go func() { l, _ := r.ReadString('\n'); got <- strings.TrimSpace(l) }() // ends when the program exits
	select {
	case l := <-got:
		if strings.HasPrefix(l, "ERROR") || l == "" {
			t.Fatalf("ros2pub: %q", l)
		}
		return l
	case <-time.After(20 * time.Second):
		t.Fatal("ros2pub: no line within 20 s")
	}
	return ""
}

// The mirrors publish nothing until a ROS subscriber matches, then the
// frames exactly as the slots hold them.
func TestROS2MirrorsOnlyWhileASubscriberIsMatched(t *testing.T) {
	cfg := ros2Config(t)
	src, _, _ := newDDSRig(t, cfg, func(p *ros2.Participant) [2]MirrorSink {
		pm, err := p.NewPointCloud2Mirror("/zerohop/points", ros2.QoS{})
		if err != nil {
			t.Fatal(err)
		}
		im, err := p.NewImageMirror("/zerohop/image", ros2.QoS{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { pm.Close(); im.Close() })
		return [2]MirrorSink{pm, im}
	})
	startDriver(t, cfg, "image", "rt/camera/image_raw", "10", "13")
	startDriver(t, cfg, "cloud", "rt/lidar/points", "10", "5")
	deadline := time.Now().Add(20 * time.Second)
	for src.Stats(TopicImage).Published < 3 || src.Stats(TopicPoints).Published < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("frames not flowing: %+v %+v", src.Stats(TopicImage), src.Stats(TopicPoints))
		}
		time.Sleep(5 * time.Millisecond)
	}
	if a, b := src.Stats(TopicImage).Mirrored, src.Stats(TopicPoints).Mirrored; a != 0 || b != 0 {
		t.Fatalf("mirrored %d images and %d clouds with nobody subscribed", a, b)
	}

	img := strings.Fields(readLine(t, startDriver(t, cfg, "sub_image", "rt/zerohop/image")))
	_, wantImg := buildImage("bgr8", 13, 7, 3, 5)
	if want := []string{"SAMPLE", "1700000000", "123456789", "camera_optical", "13", "7", "39", "bgr8", hex.EncodeToString(wantImg)}; !slices.Equal(img, want) {
		t.Errorf("mirrored image\n got %q\nwant %q", img, want)
	}
	cloud := strings.Fields(readLine(t, startDriver(t, cfg, "sub_cloud", "rt/zerohop/points")))
	var wantPts []byte
	for k := range 5 {
		for _, v := range []float32{float32(float64(k)*0.5 + 1), float32(-float64(k) / 3.0), float32(float64(k)/1024.0 - 2), float32(float64(k) / 7.0)} {
			wantPts = binary.LittleEndian.AppendUint32(wantPts, math.Float32bits(v))
		}
	}
	if want := []string{"SAMPLE", "1700000001", "987654321", "velodyne_top_fro", "5", "1", "16",
		"x:0:7:1,y:4:7:1,z:8:7:1,intensity:12:7:1", hex.EncodeToString(wantPts)}; !slices.Equal(cloud, want) {
		t.Errorf("mirrored cloud\n got %q\nwant %q", cloud, want)
	}
	for _, topic := range []int{TopicImage, TopicPoints} {
		waitStats(t, src, topic, "mirrored after subscribers matched", func(st ROS2Stats) bool { return st.Mirrored > 0 })
	}
}

// --ros2-mirror-reliability reliable reaches the mirror writers through
// ROS2NodeConfig: a RELIABLE subscriber (rviz2's default) gets the
// mirrored image, which a BEST_EFFORT mirror would never send it.
func TestRunROS2NodeMirrorsToReliableSubscribers(t *testing.T) {
	cfg := ros2Config(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- RunROS2Node(ctx, NodeConfig{Rate: 30, Socket: socketPath(t), AllowGID: -1, Log: zaptest.NewLogger(t)},
			ROS2NodeConfig{DDS: cfg, ImageTopic: "/camera/image_raw", MaxImageBytes: 4096,
				ImageMirrorTopic: "/zerohop/image", MirrorReliability: ros2.Reliable})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("RunROS2Node: %v", err)
		}
	}()
	startDriver(t, cfg, "image", "rt/camera/image_raw", "20", "13")
	img := strings.Fields(readLine(t, startDriver(t, cfg, "sub_image", "rt/zerohop/image", "reliable")))
	_, wantImg := buildImage("bgr8", 13, 7, 3, 5)
	if want := []string{"SAMPLE", "1700000000", "123456789", "camera_optical", "13", "7", "39", "bgr8", hex.EncodeToString(wantImg)}; !slices.Equal(img, want) {
		t.Errorf("mirrored image to a RELIABLE subscriber\n got %q\nwant %q", img, want)
	}
}

func TestROS2MirrorPublishAllocatesNothing(t *testing.T) {
	p, err := ros2.NewParticipant(ros2Config(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	m, err := p.NewImageMirror("/zerohop/image", ros2.QoS{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	v, data := buildImage("bgr8", 13, 7, 3, 0)
	h := handles.Handle{Kind: handles.KindImage, CaptureNs: 1, Length: uint64(len(data)),
		Image: handles.ImageFormat{Width: v.Width, Height: v.Height, RowStep: v.Step, Encoding: handles.EncodingBGR8}}
	allocs := testing.AllocsPerRun(200, func() {
		if err := m.Publish(&h, data); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("%.1f allocations per mirrored image, want 0", allocs)
	}
}
