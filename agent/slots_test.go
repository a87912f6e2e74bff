package agent

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/zerohop/zerohop/camera"
	"github.com/zerohop/zerohop/handles"
	"github.com/zerohop/zerohop/handles/transport"
	"github.com/zerohop/zerohop/infer"
	"github.com/zerohop/zerohop/internal/sockdir"
	"github.com/zerohop/zerohop/models"
	"github.com/zerohop/zerohop/planner"
	"github.com/zerohop/zerohop/sensor"
	"github.com/zerohop/zerohop/telemetry"
	"github.com/zerohop/zerohop/voxel"
)

// TestTwoSlotPoolsKeepPairing: a camera with --slots 2 over the unix
// transport. One image published without its cloud leaves the agent
// holding that image; with a hold limit of 1 (slots - 1) no newer image
// could reach it, so every later cloud failed to pair and cmd_vel stayed
// zero. The hold limit is at least 2.
func TestTwoSlotPoolsKeepPairing(t *testing.T) {
	rt := sharedRuntime(t)
	sess, err := infer.NewSessionFromBytes(rt, "reference.onnx", models.ReferenceONNX(), infer.ReferenceConfig(),
		infer.SessionOptions{Providers: []string{"cpu"}, IntraOpThreads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	pp, _ := infer.ReferenceConfig().PreprocessParams()
	prep, _ := infer.NewPreprocessor(pp, 2)
	defer prep.Close()
	bev, _ := voxel.NewBEV(voxel.BEVConfig{})
	filter, _ := voxel.NewFilter(voxel.Config{Leaf: [3]float32{0.2, 0.2, 0.2}}, 200_000)
	defer filter.Close()
	plan, _ := planner.New(planner.Config{})
	wd, _ := planner.NewWatchdog(planner.WatchdogConfig{})
	rec, _ := telemetry.New(telemetry.Options{NoRuntimeMetrics: true})
	src, _ := sensor.NewSynthetic(sensor.SyntheticConfig{})
	cam, err := camera.New(camera.Config{Source: src, Slots: 2, Shared: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cam.Close()
	sock := filepath.Join(sockdir.Short(t), "c.sock")
	var topics []transport.Topic
	for i := range 2 {
		topics = append(topics, transport.Topic{Name: camera.TopicName(i), Kind: camera.Kind(i), Pool: cam.Pool(i)})
	}
	srv, err := transport.NewServer(transport.ServerConfig{Path: sock, AllowGID: -1, Topics: topics})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go srv.Serve(ctx)
	sub, err := transport.NewSubscriber(transport.SubscriberConfig{Path: sock, Name: "rv", Topics: []string{camera.PointsTopicName, camera.ImageTopicName}})
	if err != nil {
		t.Fatal(err)
	}
	go sub.Run(ctx)
	if err := sub.WaitConnected(ctx); err != nil {
		t.Fatal(err)
	}
	// Welcomed is not yet a recipient of both topics: wait for that too.
	for deadline := time.Now().Add(5 * time.Second); srv.Subscribers(0).Len() != 1 || srv.Subscribers(1).Len() != 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the camera did not add the subscriber to both topics within 5 s")
		}
	}
	pipe, err := New(Config{Source: sub, Filter: filter, BEV: bev, Session: sess, Prep: prep, Planner: plan,
		Watchdog: wd, Recorder: rec, Sink: &recordingSink{}, MaxPoints: 200_000})
	if err != nil {
		t.Fatal(err)
	}
	var h handles.Handle
	// settled waits until the camera has every slot back but held images.
	settled := func(heldImages int64) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for cam.Pool(0).Stats().InUse != 0 || cam.Pool(1).Stats().InUse != heldImages {
			if time.Now().After(deadline) {
				t.Fatalf("slots in use: points %d, images %d; want 0, %d", cam.Pool(0).Stats().InUse, cam.Pool(1).Stats().InUse, heldImages)
			}
			time.Sleep(time.Millisecond)
		}
	}
	frame := func(seq uint64) {
		t.Helper()
		// A frame period: capture stamps further apart than the pairing
		// tolerance (20 ms), so a cloud cannot pair with the last frame's
		// image.
		time.Sleep(30 * time.Millisecond)
		if err := cam.Frame(seq, srv, &h); err != nil {
			t.Fatal(err)
		}
		select {
		case l := <-sub.C(TopicPoints):
			pipe.frame(l)
		case <-time.After(5 * time.Second):
			t.Fatalf("frame %d: no cloud reached the subscriber", seq)
		}
		settled(0)
	}
	frame(0)
	// An image without its cloud (the points pool busy for a moment).
	a, _ := cam.Pool(0).Acquire()
	b, _ := cam.Pool(0).Acquire()
	if err := cam.Frame(1, srv, &h); err != nil {
		t.Fatal(err)
	}
	cam.Pool(0).Abort(a)
	cam.Pool(0).Abort(b)
	pipe.keepImage(<-sub.C(TopicImage)) // what Run's select does
	settled(1)
	before := rec.Snapshot().Counters["frames_processed"]
	for seq := uint64(2); seq < 8; seq++ {
		frame(seq)
	}
	got := rec.Snapshot().Counters["frames_processed"] - before
	t.Logf("processed %v of 6 frames after one lone image; image pool %+v", got, cam.Pool(1).Stats().Subscribers)
	if got < 5 {
		t.Fatalf("processed %v of 6 frames after one lone image", got)
	}
}
