//go:build ros2 && cgo

package ros2

import (
	"errors"
	"runtime"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/zerohop/zerohop/handles"
	"github.com/zerohop/zerohop/planner"
)

// Close must stop every goroutine the package started, also when nothing
// ever arrived to wake them, and leave endpoints failing with ErrClosed.
func TestCloseStopsGoroutinesAndEndpoints(t *testing.T) {
	cases := []struct {
		name  string
		setup func(t *testing.T, p *Participant) (closeFirst func() error, use func() error)
	}{
		{"a lone participant", func(t *testing.T, p *Participant) (func() error, func() error) {
			return nil, nil
		}},
		{"a subscription closed by the participant", func(t *testing.T, p *Participant) (func() error, func() error) {
			if _, err := p.SubscribePointCloud2("/points", SubscriptionOptions{}, func(*PointCloud2View) {}); err != nil {
				t.Fatal(err)
			}
			return nil, nil
		}},
		{"a subscription closed first", func(t *testing.T, p *Participant) (func() error, func() error) {
			s, err := p.SubscribeImage("/image", SubscriptionOptions{}, func(*ImageView) {})
			if err != nil {
				t.Fatal(err)
			}
			return s.Close, nil
		}},
		{"a twist sink", func(t *testing.T, p *Participant) (func() error, func() error) {
			s, err := p.NewTwistSink(TwistOptions{Stamped: true})
			if err != nil {
				t.Fatal(err)
			}
			return nil, func() error { return s.PublishTwist(planner.Zero(), time.Now()) }
		}},
		{"a handle writer closed first", func(t *testing.T, p *Participant) (func() error, func() error) {
			w, err := p.NewHandleWriter(HandleWriterOptions{})
			if err != nil {
				t.Fatal(err)
			}
			return w.Close, func() error { return w.Publish(&handles.Handle{}) }
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := runtime.NumGoroutine()
			p, err := NewParticipant(loopbackConfig(t), zaptest.NewLogger(t))
			if err != nil {
				t.Fatal(err)
			}
			closeFirst, use := c.setup(t, p)
			if closeFirst != nil {
				if err := closeFirst(); err != nil {
					t.Fatal(err)
				}
				if err := closeFirst(); err != nil {
					t.Errorf("second Close: %v", err)
				}
			}
			done := make(chan error)
			go func() { done <- p.Close() }()
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Participant.Close did not return within 10 s")
			}
			if err := p.Close(); err != nil {
				t.Errorf("second Close: %v", err)
			}
			if use != nil {
				if err := use(); !errors.Is(err, ErrClosed) {
					t.Errorf("use after Close = %v, want ErrClosed", err)
				}
			}
			if _, err := p.NewTwistSink(TwistOptions{}); !errors.Is(err, ErrClosed) {
				t.Errorf("NewTwistSink after Close = %v, want ErrClosed", err)
			}
			waitFor(t, "goroutines to end", func() bool { return runtime.NumGoroutine() <= before })
		})
	}
}

func TestOneParticipantPerDomain(t *testing.T) {
	cfg := loopbackConfig(t)
	p, err := NewParticipant(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if q, err := NewParticipant(cfg, nil); !errors.Is(err, ErrDomainInUse) {
		if q != nil {
			q.Close()
		}
		t.Fatalf("second participant in domain %d: %v, want ErrDomainInUse", cfg.Domain, err)
	}
	// The failed attempt must not have damaged the first one.
	if _, err := p.NewTwistSink(TwistOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestParticipantRejects(t *testing.T) {
	cases := []struct {
		name string
		cfg  Config
	}{
		{"a domain beyond 232", Config{Domain: 233}},
		{"a static peer with XML in it", Config{Domain: testDomain(), StaticPeers: []string{`"/><x`}}},
		{"a Cyclone configuration Cyclone refuses", Config{Domain: testDomain(), XML: "<CycloneDDS><Domain><NoSuchElement/></Domain></CycloneDDS>"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := NewParticipant(c.cfg, nil)
			if err == nil {
				p.Close()
				t.Fatal("NewParticipant succeeded")
			}
			t.Log(err)
		})
	}
}

func TestEndpointOptionsRejected(t *testing.T) {
	p, err := NewParticipant(loopbackConfig(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	cases := []struct {
		name string
		make func() error
	}{
		{"a topic with a space", func() error { _, err := p.NewTwistSink(TwistOptions{Topic: "/cmd vel"}); return err }},
		{"a topic token starting with a digit", func() error { _, err := p.NewHandleWriter(HandleWriterOptions{Topic: "/0cam"}); return err }},
		{"a negative depth", func() error { _, err := p.NewTwistSink(TwistOptions{QoS: QoS{Depth: -1}}); return err }},
		{"an unknown reliability", func() error { _, err := p.NewTwistSink(TwistOptions{QoS: QoS{Reliability: 9}}); return err }},
		{"a frame id with a newline", func() error { _, err := p.NewTwistSink(TwistOptions{Stamped: true, FrameID: "a\nb"}); return err }},
		{"a nil callback", func() error { _, err := p.SubscribeImage("/image", SubscriptionOptions{}, nil); return err }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := c.make(); err == nil {
				t.Error("accepted")
			}
		})
	}
}
