package transport

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/zerohop/zerohop/handles"
	"github.com/zerohop/zerohop/internal/sockdir"
	"github.com/zerohop/zerohop/pinned"
)

// twoTopicServer serves a "points" and an "image" pool, or "points" alone
// with absent (ServerConfig.Absent) when image is false.
func twoTopicServer(t *testing.T, image bool, absent map[string]string) (srv *Server, path string, points, images *pinned.Pool) {
	t.Helper()
	path = sockdir.Short(t) + "/camera.sock"
	newPool := func(name string, id uint32) *pinned.Pool {
		p, err := pinned.New(pinned.Geometry{SlotCount: 8, SlotSize: 4096}, pinned.Options{Name: name, ID: id, Shared: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		return p
	}
	points = newPool("points", 1)
	topics := []Topic{{Name: "points", Kind: handles.KindPoints, Pool: points}}
	if image {
		images = newPool("image", 2)
		topics = append(topics, Topic{Name: "image", Kind: handles.KindImage, Pool: images})
	}
	srv, err := NewServer(ServerConfig{Path: path, AllowGID: -1, Topics: topics, Absent: absent})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return srv, path, points, images
}

// publishTo writes and publishes one valid frame of kind on srv's topic.
func publishTo(t *testing.T, srv *Server, topic int, pool *pinned.Pool, kind handles.Kind, seq uint64) int {
	t.Helper()
	slot, err := pool.Acquire()
	if err != nil {
		t.Fatalf("acquire frame %d of topic %d: %v", seq, topic, err)
	}
	h := handles.Handle{Kind: kind, Seq: seq, Length: 32}
	if kind == handles.KindImage {
		h.Image = handles.ImageFormat{Width: 4, Height: 2, RowStep: 16, Encoding: handles.EncodingRGBA8}
	} else {
		h.Points = handles.PointFormat{Count: 2, Step: 16, X: 0, Y: 4, Z: 8, Intensity: 12, Datatype: handles.DatatypeFloat32}
	}
	h.Checksum = handles.PayloadChecksum(slot.Bytes()[:32])
	n, err := srv.Publish(topic, slot, &h)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A subscriber that asks a camera serving points and images for points
// alone (a LiDAR-only agent) gets the clouds and nothing of the images:
// it joins no image pool, holds no image slot, and the images reach no
// one.
func TestSubscriberOfOneTopicOfTwo(t *testing.T) {
	eachWaitMode(t, func(t *testing.T, mode waitMode) {
		srv, path, points, images := twoTopicServer(t, true, nil)
		sub, _, _ := startSubscriber(t, mode.apply(SubscriberConfig{Path: path, Topics: []string{"points"}}))
		waitFor(t, 5*time.Second, "the subscriber joins points", func() bool { return srv.Subscribers(0).Len() == 1 })
		if n := srv.Subscribers(1).Len(); n != 0 {
			t.Fatalf("%d subscribers of image, want 0", n)
		}
		for seq := uint64(1); seq <= 3; seq++ {
			if n := publishTo(t, srv, 1, images, handles.KindImage, seq); n != 0 {
				t.Fatalf("image frame %d reached %d subscribers, want 0", seq, n)
			}
			if n := publishTo(t, srv, 0, points, handles.KindPoints, seq); n != 1 {
				t.Fatalf("points frame %d reached %d subscribers, want 1", seq, n)
			}
			l, err := sub.Latest(ctxT(t), 0)
			if err != nil {
				t.Fatal(err)
			}
			if l.Topic != 0 || l.Handle.Kind != handles.KindPoints || l.Handle.Seq != seq {
				t.Fatalf("lease topic %d kind %v seq %d, want points frame %d", l.Topic, l.Handle.Kind, l.Handle.Seq, seq)
			}
			l.Release()
		}
		waitFor(t, 5*time.Second, "every points slot free", func() bool { return points.Stats().InUse == 0 })
		if n := images.Stats().InUse; n != 0 {
			t.Fatalf("%d image slots in use, want 0", n)
		}
		// Received counts a lease after it is queued (so that whoever
		// sees the count can take it): the third may be taken before it
		// is counted.
		waitFor(t, 5*time.Second, "3 leases counted", func() bool { return sub.Stats().Received >= 3 })
		if st := sub.Stats(); st.Received != 3 || st.Invalid != 0 {
			t.Fatalf("subscriber %+v: want 3 received, none invalid", st)
		}
	})
}

// A subscriber asking for an absent topic is refused with why and what to
// do; one asking for a topic nobody named still hears "unknown topic".
func TestAbsentTopicRefusal(t *testing.T) {
	const why = "this camera has no image stream, only LiDAR points: run the agent with --lidar-only"
	srv, path, _, _ := twoTopicServer(t, false, map[string]string{"image": why})
	for _, tc := range []struct {
		topics  []string
		want    []string
		unknown bool // the refusal says "unknown topic"
	}{
		{[]string{"points", "image"}, []string{`no topic "image" (served: points): ` + why}, false},
		{[]string{"image"}, []string{`no topic "image"`, why}, false},
		{[]string{"points", "lasers"}, []string{`unknown topic "lasers" (served: points)`}, true},
	} {
		s, err := NewSubscriber(SubscriberConfig{Path: path, Name: "agent", Topics: tc.topics})
		if err != nil {
			t.Fatal(err)
		}
		err = s.Run(ctxT(t))
		if !errors.Is(err, ErrRefused) {
			t.Fatalf("%q: Run = %v, want ErrRefused", tc.topics, err)
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%q: refusal %q does not say %q", tc.topics, err, w)
			}
		}
		if got := strings.Contains(err.Error(), "unknown topic"); got != tc.unknown {
			t.Errorf("%q: refusal %q says \"unknown topic\": %t, want %t", tc.topics, err, got, tc.unknown)
		}
	}
	if n := srv.Stats().Refused; n != 3 {
		t.Fatalf("refused = %d, want 3", n)
	}
}

// Absent names no served topic, and its refusal fits in a refuse message.
func TestAbsentTopicsAreChecked(t *testing.T) {
	pool, err := pinned.New(pinned.Geometry{SlotCount: 4, SlotSize: 4096}, pinned.Options{Name: "points", ID: 1, Shared: true})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	for _, tc := range []struct {
		absent map[string]string
		want   string
	}{
		{map[string]string{"points": "gone"}, `topic "points" both served and absent`},
		{map[string]string{"image": strings.Repeat("x", maxRefuseReason)}, `absent topic "image" has`},
	} {
		_, err := NewServer(ServerConfig{Path: sockdir.Short(t) + "/camera.sock", Topics: []Topic{{Name: "points", Kind: handles.KindPoints, Pool: pool}}, Absent: tc.absent})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Absent %.40q: NewServer = %.120v, want an error with %q", tc.absent, err, tc.want)
		}
	}
}

// Two topics whose pools share an id would be refused by every
// subscriber's validator (one id twice in the welcome), which then
// reconnects without end: NewServer says so instead.
func TestTopicsNeedPoolsOfTheirOwn(t *testing.T) {
	var pools []*pinned.Pool
	for _, name := range []string{"points", "image"} {
		pool, err := pinned.New(pinned.Geometry{SlotCount: 4, SlotSize: 4096}, pinned.Options{Name: name, ID: 1, Shared: true})
		if err != nil {
			t.Fatal(err)
		}
		defer pool.Close()
		pools = append(pools, pool)
	}
	for _, tc := range []struct {
		name  string
		image *pinned.Pool
	}{{"one pool twice", pools[0]}, {"two pools, one id", pools[1]}} {
		_, err := NewServer(ServerConfig{Path: sockdir.Short(t) + "/camera.sock", Topics: []Topic{
			{Name: "points", Kind: handles.KindPoints, Pool: pools[0]}, {Name: "image", Kind: handles.KindImage, Pool: tc.image}}})
		if err == nil || !strings.Contains(err.Error(), `topics "points" and "image" have pools with one id, 1`) {
			t.Errorf("%s: NewServer = %v, want an error naming both topics and the id", tc.name, err)
		}
	}
}
