package transport

import (
	"runtime"
	"testing"
	"time"

	"github.com/zerohop/zerohop/handles"
)

// rawClient speaks the protocol by hand, to send what a real subscriber
// never would.
type rawClient struct {
	t  *testing.T
	fd int
}

func dialRaw(t *testing.T, path string) *rawClient {
	t.Helper()
	fd, err := dialSeqpacket(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeFd(fd) })
	h := hello{depth: 4, name: "forger", topics: []string{"points"}}
	if err := sendBlocking(fd, h.marshal(), nil); err != nil {
		t.Fatal(err)
	}
	setRecvTimeout(fd, 5)
	buf := make([]byte, 512)
	n, fds, err := recvWithFds(fd, buf, MaxTopics)
	if err != nil {
		t.Fatal(err)
	}
	closeFds(fds)
	if _, _, err := unmarshalWelcome(buf[:n], false); err != nil {
		t.Fatal(err)
	}
	return &rawClient{t: t, fd: fd}
}

// nextHandle reads one handle.
func (c *rawClient) nextHandle() handles.Handle {
	c.t.Helper()
	var buf [handles.Size]byte
	n, _, err := recv(c.fd, buf[:], false)
	if err != nil || n != handles.Size {
		c.t.Fatalf("read handle: %d bytes, %v", n, err)
	}
	var h handles.Handle
	if err := h.Unmarshal(buf[:]); err != nil {
		c.t.Fatal(err)
	}
	return h
}

func (c *rawClient) sendRelease(pool, slot uint32, gen uint64) {
	r := handles.Release{PoolID: pool, Slot: slot, Generation: gen}
	var rec [handles.ReleaseSize]byte
	r.MarshalTo(&rec)
	sendBlocking(c.fd, rec[:], nil)
}

// disconnected waits for the camera to close the connection.
func (c *rawClient) disconnected() bool {
	var buf [handles.Size]byte
	for {
		n, _, err := recv(c.fd, buf[:], false)
		if err != nil || n == 0 {
			return err == nil // orderly close by the camera
		}
		// A handle published meanwhile; keep reading.
	}
}

func TestForgedReleasesDisconnectTheForgerOnly(t *testing.T) {
	tests := []struct {
		name  string
		forge func(c *rawClient, own handles.Handle, other handles.Handle)
	}{
		{"stale generation", func(c *rawClient, own, _ handles.Handle) { c.sendRelease(own.PoolID, own.Slot, own.Generation-1) }},
		{"another subscriber's slot", func(c *rawClient, _, other handles.Handle) {
			c.sendRelease(other.PoolID, other.Slot, other.Generation)
		}},
		{"out-of-range index", func(c *rawClient, own, _ handles.Handle) { c.sendRelease(own.PoolID, 1000, own.Generation) }},
		{"unknown pool", func(c *rawClient, own, _ handles.Handle) { c.sendRelease(99, own.Slot, own.Generation) }},
		{"double release", func(c *rawClient, own, _ handles.Handle) {
			c.sendRelease(own.PoolID, own.Slot, own.Generation)
			c.sendRelease(own.PoolID, own.Slot, own.Generation)
		}},
		{"truncated datagram", func(c *rawClient, _, _ handles.Handle) { sendBlocking(c.fd, []byte("ZHRL\x01"), nil) }},
		{"oversized datagram", func(c *rawClient, _, _ handles.Handle) { sendBlocking(c.fd, make([]byte, 4000), nil) }},
		// recv reads 0 bytes, as for a hang-up; the peer is still there.
		{"empty datagram", func(c *rawClient, _, _ handles.Handle) { sendBlocking(c.fd, nil, nil) }},
		{"garbage of the right size", func(c *rawClient, _, _ handles.Handle) {
			sendBlocking(c.fd, []byte("0123456789abcdefghijklmn"), nil)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, 8)
			// An honest subscriber that releases everything at once.
			honest, _, _ := startSubscriber(t, SubscriberConfig{Path: f.path, Name: "honest", OnLease: func(l Lease) { l.Release() }})
			forger := dialRaw(t, f.path)
			f.waitSubscribers(2)

			// Frame 1 goes to both; the forger gets its handle.
			f.publish(1)
			own := forger.nextHandle()
			// Frame 2 is held by the honest one only... it releases at once,
			// so use frame 1's slot as "another subscriber's" once freed
			// from the forger's point of view: a slot the forger never got.
			other := own
			other.Slot = (own.Slot + 1) % 8
			tt.forge(forger, own, other)
			if !forger.disconnected() {
				t.Fatal("the forger was not disconnected")
			}
			f.waitSubscribers(1)
			if f.srv.Stats().Garbage != 1 {
				t.Fatalf("garbage disconnects = %d, want 1", f.srv.Stats().Garbage)
			}
			// The honest subscriber is unaffected and the forger's holds are
			// reclaimed.
			before := honest.Stats().Received
			f.publish(2)
			deadline := time.Now().Add(5 * time.Second)
			for honest.Stats().Received == before {
				if time.Now().After(deadline) {
					t.Fatal("honest subscriber stopped receiving")
				}
				time.Sleep(time.Millisecond)
			}
			f.waitInUse(0)
		})
	}
}

func TestPublishAllocatesNothing(t *testing.T) {
	eachWaitMode(t, func(t *testing.T, mode waitMode) {
		f := newFixture(t, 8)
		got := make(chan Lease, 1)
		startSubscriber(t, mode.apply(SubscriberConfig{Path: f.path, OnLease: func(l Lease) { got <- l }}))
		f.waitSubscribers(1)
		h := handles.Handle{Kind: handles.KindPoints, Length: 32,
			Points: handles.PointFormat{Count: 2, Step: 16, X: 0, Y: 4, Z: 8, Intensity: 12, Datatype: handles.DatatypeFloat32}}
		// Publish, receive on the other goroutine, release: the whole round
		// trip through the socket, counted across goroutines.
		allocs := testing.AllocsPerRun(200, func() {
			slot, err := f.pool.Acquire()
			if err != nil {
				panic(err)
			}
			if n, err := f.srv.Publish(0, slot, &h); err != nil || n != 1 {
				panic("publish failed")
			}
			l := <-got
			if err := l.Release(); err != nil {
				panic(err)
			}
			for f.pool.InUse() != 0 { // the camera applies the release
				runtime.Gosched()
			}
		})
		if allocs != 0 {
			t.Fatalf("publish → receive → release allocates %.1f times per frame, want 0", allocs)
		}
	})
}
