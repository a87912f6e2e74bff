//go:build ros2 && cgo

package ros2

import (
	"strconv"
	"testing"
	"time"

	"github.com/zerohop/zerohop/handles"
	"github.com/zerohop/zerohop/planner"
)

// Publishing a command or a handle and taking a sample are per-frame
// work: no heap allocation (design invariant 6).
func TestPublishAllocatesNothing(t *testing.T) {
	p, err := NewParticipant(loopbackConfig(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	twist, err := p.NewTwistSink(TwistOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stamped, err := p.NewTwistSink(TwistOptions{Topic: "/cmd_vel_stamped", Stamped: true})
	if err != nil {
		t.Fatal(err)
	}
	hw, err := p.NewHandleWriter(HandleWriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	h := &handles.Handle{Kind: handles.KindImage, FrameID: handles.FrameID{'c', 'a', 'm'}, CaptureNs: now.UnixNano()}
	cases := []struct {
		name string
		f    func() error
	}{
		{"Twist", func() error { return twist.PublishTwist(planner.Twist{LinearX: 0.5, AngularZ: 0.1}, now) }},
		{"TwistStamped", func() error { return stamped.PublishTwist(planner.Twist{LinearX: 0.5, AngularZ: 0.1}, now) }},
		{"SlotHandle", func() error { return hw.Publish(h) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var err error
			if n := testing.AllocsPerRun(200, func() { err = c.f() }); n != 0 {
				t.Errorf("%v allocations per publish, want 0", n)
			}
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestTakeAllocatesNothing(t *testing.T) {
	for _, c := range []struct {
		name  string
		typ   msgType
		topic string
		peer  []string // the publishing peer's arguments
	}{
		{"Image", typeImage, "/image", []string{"pub", "image", "rt/image", "besteffort", "2", "16"}},
		{"LaserScan", typeLaserScan, "/scan", []string{"pub", "scan", "rt/scan", "besteffort", "2", "360"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := loopbackConfig(t)
			p, err := NewParticipant(cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			var sum int
			h := handlers{image: func(v *ImageView) { sum += len(v.Data) }}
			if c.typ == typeLaserScan {
				h = handlers{scan: func(v *LaserScanView) { sum += len(v.Ranges) + len(v.Intensities) }}
			}
			s, err := p.openSubscription(c.typ, c.topic, SensorDataQoS(), h, false)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			startPeer(t, cfg, c.peer...)
			takeSample := func() {
				for {
					if n, rc := s.takeOne(); rc < 0 {
						t.Fatal(rc)
					} else if n == 1 {
						return
					}
					time.Sleep(time.Millisecond)
				}
			}
			waitFor(t, "the publisher to match", func() bool { return s.Matched() == 1 })
			takeSample() // the first take sets up Cyclone's loan buffer
			if n := testing.AllocsPerRun(20, takeSample); n != 0 {
				t.Errorf("%v allocations per sample, want 0", n)
			}
			if sum == 0 || s.Received() < 21 {
				t.Errorf("callback saw %d values in %d samples", sum, s.Received())
			}
		})
	}
}

// BenchmarkPublishTwist measures one cmd_vel publish (serialize, send on
// loopback) with the peer subscribed, RELIABLE, KEEP_LAST 10.
func BenchmarkPublishTwist(b *testing.B) {
	for _, c := range []struct {
		name    string
		stamped bool
	}{{"Twist", false}, {"TwistStamped", true}} {
		b.Run(c.name, func(b *testing.B) {
			cfg := loopbackConfig(b)
			p, err := NewParticipant(cfg, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			sink, err := p.NewTwistSink(TwistOptions{Stamped: c.stamped})
			if err != nil {
				b.Fatal(err)
			}
			typ := "twist"
			if c.stamped {
				typ = "twist_stamped"
			}
			peer := startPeer(b, cfg, "sub", typ, "rt/cmd_vel", "reliable", "0")
			peer.expect("MATCHED")
			waitFor(b, "the publisher to match the peer", func() bool { return sink.Matched() == 1 })
			now := time.Now()
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if err := sink.PublishTwist(planner.Twist{LinearX: 0.5, AngularZ: 0.1}, now); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			peer.stop()
			n, _ := strconv.Atoi(peer.expect("RECEIVED"))
			b.ReportMetric(float64(n)/float64(b.N), "delivered/op")
		})
	}
}
