//go:build ros2 && cgo

package ros2

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// A RELIABLE endpoint facing a BEST_EFFORT one never matches; both
// directions must say so clearly in the log, naming topic and policy.
func TestIncompatibleQoSIsLogged(t *testing.T) {
	cases := []struct {
		name     string
		setup    func(t *testing.T, p *Participant) (matched func() int)
		peerArgs []string
		side     string
		topic    string
	}{
		{
			name: "a RELIABLE subscriber against our BEST_EFFORT cmd_vel publisher",
			setup: func(t *testing.T, p *Participant) func() int {
				s, err := p.NewTwistSink(TwistOptions{QoS: QoS{Reliability: BestEffort}})
				if err != nil {
					t.Fatal(err)
				}
				return s.Matched
			},
			peerArgs: []string{"sub", "twist", "rt/cmd_vel", "reliable", "1"},
			side:     "publisher", topic: "/cmd_vel",
		},
		{
			name: "our RELIABLE image subscription against a BEST_EFFORT camera",
			setup: func(t *testing.T, p *Participant) func() int {
				s, err := p.SubscribeImage("/camera/image_raw", SubscriptionOptions{QoS: QoS{Reliability: Reliable}}, func(*ImageView) {})
				if err != nil {
					t.Fatal(err)
				}
				return s.Matched
			},
			peerArgs: []string{"pub", "image", "rt/camera/image_raw", "besteffort", "50", "8"},
			side:     "subscription", topic: "/camera/image_raw",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			core, logs := observer.New(zapcore.InfoLevel)
			cfg := loopbackConfig(t)
			p, err := NewParticipant(cfg, zap.New(core))
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			matched := c.setup(t, p)
			startPeer(t, cfg, c.peerArgs...)
			waitFor(t, "the incompatible-QoS log line", func() bool {
				return logs.FilterMessageSnippet("incompatible QoS").Len() > 0
			})
			e := logs.FilterMessageSnippet("incompatible QoS").All()[0]
			if e.Level != zapcore.ErrorLevel {
				t.Errorf("logged at %v, want error", e.Level)
			}
			f := e.ContextMap()
			for k, v := range map[string]any{"policy": "RELIABILITY", "side": c.side, "topic": c.topic} {
				if f[k] != v {
					t.Errorf("log field %s = %v, want %v (entry %v)", k, f[k], v, f)
				}
			}
			if f["hint"] == "" || f["hint"] == nil {
				t.Errorf("no hint in %v", f)
			}
			time.Sleep(50 * time.Millisecond) // a match would have been reported by now too
			if n := matched(); n != 0 {
				t.Errorf("Matched() = %d with incompatible QoS", n)
			}
		})
	}
}

// A remote endpoint of another type on our topic never matches, and DDS
// says nothing; the participant does, once. Jazzy's diff_drive_controller
// subscribes TwistStamped on cmd_vel, the agent publishes Twist by default.
func TestTypeMismatchIsLogged(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	cfg := loopbackConfig(t)
	sink := newTwistSink(t, cfg, zap.New(core))
	startPeer(t, cfg, "sub", "twist_stamped", "rt/cmd_vel", "reliable", "1")
	const snippet = "uses another message type"
	waitFor(t, "the type-mismatch log line", func() bool { return logs.FilterMessageSnippet(snippet).Len() > 0 })
	e := logs.FilterMessageSnippet(snippet).All()[0]
	f := e.ContextMap()
	for k, v := range map[string]any{"topic": "/cmd_vel", "type": "geometry_msgs/msg/Twist", "remote_type": "geometry_msgs/msg/TwistStamped"} {
		if f[k] != v {
			t.Errorf("log field %s = %v, want %v (entry %v)", k, f[k], v, f)
		}
	}
	if h, _ := f["hint"].(string); !strings.Contains(h, "--twist-stamped") {
		t.Errorf("hint %q does not name --twist-stamped", h)
	}
	if sink.Matched() != 0 {
		t.Errorf("Matched() = %d across message types", sink.Matched())
	}

	// A subscriber of our own type is no news; the mismatch is not
	// logged again.
	peer := startPeer(t, cfg, "sub", "twist", "rt/cmd_vel", "reliable", "1")
	peer.expect("MATCHED")
	waitFor(t, "the same-type subscriber to match", func() bool { return sink.Matched() == 1 })
	time.Sleep(100 * time.Millisecond) // discovery of the second peer has been taken by now
	if n := logs.FilterMessageSnippet(snippet).Len(); n != 1 {
		t.Errorf("%d type-mismatch lines, want 1: %v", n, logs.FilterMessageSnippet(snippet).All())
	}
}

// Remote types of topics none of our endpoints is on make room when the
// table is full, so the type check goes on for our topics after days of
// peers coming and going (each rqt start brings new service topics); it
// went silent once 1024 such entries had come (found in review). Ours
// stay.
func TestRemoteTypesMakeRoomForOurTopics(t *testing.T) {
	p := &Participant{
		endpoints:   map[entity]*endpoint{1: {ddsTopic: "rt/cmd_vel", writer: true}},
		remoteTypes: map[remoteType]struct{}{},
		warnedTypes: map[remoteType]struct{}{},
	}
	ours := remoteType{topic: "rt/cmd_vel", typ: "geometry_msgs::msg::dds_::TwistStamped_"}
	p.remoteTypes[ours] = struct{}{}
	for i := range maxRemoteTypes - 1 {
		p.remoteTypes[remoteType{topic: fmt.Sprintf("rq/rqt_%d/get_parametersRequest", i), typ: "x"}] = struct{}{}
	}
	if n := p.forgetOtherTopicsLocked(); n != maxRemoteTypes-1 {
		t.Fatalf("dropped %d entries, want the %d of other topics", n, maxRemoteTypes-1)
	}
	if _, ok := p.remoteTypes[ours]; !ok || len(p.remoteTypes) != 1 {
		t.Fatalf("remote types left %v, want ours alone", p.remoteTypes)
	}
}
