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
// capture stamp of frames before freshFrom moved a second into the past.
type copyServers struct {
	cam       *camera.Camera
	srv       [2]*transport.CopyServer
	freshFrom uint64
}

func (c *copyServers) Publish(topic int, slot pinned.Slot, h *handles.Handle) (int, error) {
	if h.Seq < c.freshFrom {
		h.CaptureNs -= int64(time.Second)
	}
	n, err := c.srv[topic].Publish(h, slot.Bytes()[:h.Length])
	if _, perr := c.cam.Pool(topic).Publish(slot, 0); perr != nil && err == nil {
		err = perr
	}
	return n, err
}

// TestStaleFrameOverTheCopyBaselineDoesNotStallPairing: a frame dropped
// after it was paired (too old to act on) gives its image back, as a
// processed one does. Over the copy baseline the image stream reads the
// next image only once the last is released: holding a used image stalled
// it for good, every later cloud found no image to pair with, and the
// agent never processed a frame (bench-e2e: "agent never became healthy",
// about one start in eight, when warm-up made the first frames late).
func TestStaleFrameOverTheCopyBaselineDoesNotStallPairing(t *testing.T) {
	g := newComposed(t)
	socket := filepath.Join(sockdir.Short(t), "camera.sock")
	pub := &copyServers{cam: g.cam, freshFrom: 1}
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
			if err := g.cam.Frame(seq, pub, &h); err != nil {
				publishing <- err
				return
			}
			time.Sleep(33 * time.Millisecond)
		}
		publishing <- nil
	}()
	for deadline := time.Now().Add(10 * time.Second); g.rec.Count(telemetry.FramesProcessed) == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no frame processed in 10 s after a stale one: received %d, dropped %d", g.rec.Count(telemetry.FramesReceived), g.rec.Count(telemetry.FramesDropped))
		}
	}
	if g.rec.Count(telemetry.FramesDropped) == 0 {
		t.Fatal("the stale frame was not dropped")
	}
	stopServing()
	<-publishing
}
