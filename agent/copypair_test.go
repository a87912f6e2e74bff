package agent

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/zerohop/zerohop/camera"
	"github.com/zerohop/zerohop/handles"
	"github.com/zerohop/zerohop/handles/transport"
	"github.com/zerohop/zerohop/internal/sockdir"
	"github.com/zerohop/zerohop/pinned"
	"github.com/zerohop/zerohop/telemetry"
)

// copyServers publishes a camera's frames through the copy baseline's
// stream sockets, as the camera node's --transport copy does, with the
// capture stamp of frames before staleBefore moved a second into the past,
// and the clouds of frames before imagesOnlyBefore not sent (the points
// stream's subscriber admitted later than the image stream's: each server
// accepts on its own goroutine).
//
// With lateFirstImage, frame 0's image goes out only after frame 1's
// cloud, while the agent waits for that cloud's image: a slow reader of
// the first image (it is 2.7 MB) let the camera's next cloud overtake it.
type copyServers struct {
	cam                           *camera.Camera
	srv                           [2]*transport.CopyServer
	staleBefore, imagesOnlyBefore uint64
	lateFirstImage                bool
	firstImage                    []byte // frame 0's image, held back
	firstImageHandle              handles.Handle
}

func (c *copyServers) Publish(topic int, slot pinned.Slot, h *handles.Handle) (int, error) {
	if h.Seq < c.staleBefore {
		h.CaptureNs -= int64(time.Second)
	}
	var n int
	var err error
	switch {
	case c.lateFirstImage && topic == TopicImage && h.Seq == 0:
		c.firstImage, c.firstImageHandle = append([]byte(nil), slot.Bytes()[:h.Length]...), *h
	case topic != TopicPoints || h.Seq >= c.imagesOnlyBefore:
		n, err = c.srv[topic].Publish(h, slot.Bytes()[:h.Length])
		if c.lateFirstImage && topic == TopicPoints && h.Seq == 1 && err == nil {
			// Within the agent's 20 ms wait for this cloud's image.
			time.Sleep(10 * time.Millisecond)
			_, err = c.srv[TopicImage].Publish(&c.firstImageHandle, c.firstImage)
		}
	}
	if _, perr := c.cam.Pool(topic).Publish(slot, 0); perr != nil && err == nil {
		err = perr
	}
	return n, err
}

// TestCopyBaselineStartsPairing: over the copy baseline the image stream
// reads the next image only once the last is released, so an image the
// agent holds without a use stalls it for good: every later cloud finds no
// image to pair with, and the agent never processes a frame (bench-e2e:
// "agent never became healthy", about one start in six). An image is
// given back once its frame is dropped after pairing (too old to act on),
// once a cloud newer than it arrives (no later cloud can pair with it),
// and as soon as it arrives while a newer cloud waits for its image.
func TestCopyBaselineStartsPairing(t *testing.T) {
	for _, tc := range []struct {
		name        string
		pub         copyServers
		wantDropped bool
	}{
		{"a stale first frame", copyServers{staleBefore: 1}, true},
		{"the image stream a frame ahead", copyServers{imagesOnlyBefore: 1}, false},
		// An image older than the waiting cloud came in the wait and was
		// kept: the camera, blocked on the next image, sent no more clouds.
		{"the first image overtaken by the second cloud", copyServers{lateFirstImage: true}, true},
	} {
		t.Run(tc.name, func(t *testing.T) { testCopyBaselineStartsPairing(t, tc.pub, tc.wantDropped) })
	}
}

func testCopyBaselineStartsPairing(t *testing.T, pub copyServers, wantDropped bool) {
	g := newComposed(t)
	socket := filepath.Join(sockdir.Short(t), "camera.sock")
	pub.cam = g.cam
	serveCtx, stopServing := context.WithCancel(context.Background())
	served := make(chan error, 2)
	defer func() {
		stopServing() // also unblocks a Publish waiting on a stalled stream
		<-served
		<-served
	}()
	dialCtx, dialed := context.WithTimeout(context.Background(), 5*time.Second)
	defer dialed()
	var subs []*transport.CopySubscriber
	for i := range 2 {
		srv, err := transport.NewCopyServer(transport.CopyServerConfig{Path: socket + "." + camera.TopicName(i)})
		if err != nil {
			t.Fatal(err)
		}
		pub.srv[i] = srv
		go func() { served <- srv.Serve(serveCtx) }()
		sub, err := transport.DialCopy(dialCtx, srv.Path(), 16<<20)
		if err != nil {
			t.Fatal(err)
		}
		subs = append(subs, sub)
	}
	for deadline := time.Now().Add(5 * time.Second); pub.srv[0].Subscribers()+pub.srv[1].Subscribers() < 2; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the copy servers did not admit the subscribers")
		}
	}
	src := transport.NewCopySource(subs...)
	cfg := g.pipe.cfg
	cfg.Source = src
	pipe, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 2)
	go func() { done <- src.Run(ctx) }()
	go func() { done <- pipe.Run(ctx) }()
	defer func() { cancel(); <-done; <-done }()
	publishing := make(chan error, 1)
	go func() {
		var h handles.Handle
		for seq := uint64(0); seq < 8; seq++ {
			if err := g.cam.Frame(seq, &pub, &h); err != nil {
				publishing <- err
				return
			}
			time.Sleep(33 * time.Millisecond)
		}
		publishing <- nil
	}()
	for deadline := time.Now().Add(10 * time.Second); g.rec.Count(telemetry.FramesProcessed) == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no frame processed in 10 s: received %d, dropped %d", g.rec.Count(telemetry.FramesReceived), g.rec.Count(telemetry.FramesDropped))
		}
	}
	if wantDropped && g.rec.Count(telemetry.FramesDropped) == 0 {
		t.Fatal("the stale first frame was not dropped")
	}
	stopServing()
	<-publishing
}
