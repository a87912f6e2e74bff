//go:build ros2 && cgo

package ros2

import (
	"encoding/hex"
	"strings"
	"testing"

	"go.uber.org/zap/zaptest"
)

// graphSample is one ros_discovery_info sample as testdata/graph reads it.
type graphSample struct {
	head      map[string]string   // GRAPH line: gid, padding_zero, known, nodes
	nodes     []map[string]string // NODE lines: ns, name, readers, writers
	endpoints []map[string]string // ENDPOINT lines: side, gid, topic, type, same_participant, padding_zero
}

// next reads the graph peer's next sample (GRAPH … END).
func (g *peer) nextGraph() graphSample {
	g.t.Helper()
	s := graphSample{head: fields(g.expect("GRAPH"))}
	for {
		l := g.expectAny()
		switch {
		case l == "END":
			return s
		case strings.HasPrefix(l, "NODE "):
			s.nodes = append(s.nodes, fields(strings.TrimPrefix(l, "NODE ")))
		case strings.HasPrefix(l, "ENDPOINT "):
			s.endpoints = append(s.endpoints, fields(strings.TrimPrefix(l, "ENDPOINT ")))
		default:
			g.t.Fatalf("graph peer: unexpected line %q", l)
		}
	}
}

// waitGraph reads samples until one has a node with the given reader and
// writer counts (updates may be coalesced: KEEP_LAST 1).
func (g *peer) waitGraph(readers, writers string) graphSample {
	g.t.Helper()
	for {
		s := g.nextGraph()
		if len(s.nodes) == 1 && s.nodes[0]["readers"] == readers && s.nodes[0]["writers"] == writers {
			return s
		}
	}
}

// ROS tools learn which node owns which endpoint from ros_discovery_info:
// the participant's GUID, the node's name and the GUIDs of its readers and
// writers, which must be the ones DDS discovery reports. Both GID widths
// (Jazzy 16 bytes, Humble 24), each read by a peer of that width.
func TestGraphAnnouncesTheNodeAndItsEndpoints(t *testing.T) {
	for _, tc := range []struct {
		distro, gidBytes string
	}{{"jazzy", "16"}, {"", "16"}, {"humble", "24"}} {
		t.Run(tc.distro+"_"+tc.gidBytes, func(t *testing.T) {
			cfg := loopbackConfig(t)
			cfg.NodeName, cfg.Namespace, cfg.Distro = "zh_graph_test", "/robot/perception", tc.distro
			p, err := NewParticipant(cfg, zaptest.NewLogger(t))
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			g := startProgram(t, graphPath, cfg, tc.gidBytes)

			s := g.waitGraph("0", "0") // the node exists before it has endpoints
			if s.head["known"] != "1" || s.head["padding_zero"] != "1" {
				t.Errorf("GRAPH %v: want the participant known to DDS discovery, zero padding", s.head)
			}
			if n := s.nodes[0]; n["ns"] != "/robot/perception" || n["name"] != "zh_graph_test" {
				t.Errorf("NODE %v", n)
			}

			sink, err := p.NewTwistSink(TwistOptions{Topic: "/cmd_vel"})
			if err != nil {
				t.Fatal(err)
			}
			defer sink.Close()
			sub, err := p.SubscribeImage("/camera/image_raw", SubscriptionOptions{}, func(*ImageView) {})
			if err != nil {
				t.Fatal(err)
			}
			s = g.waitGraph("1", "1")
			want := map[string]string{
				"writer": "rt/cmd_vel geometry_msgs::msg::dds_::Twist_",
				"reader": "rt/camera/image_raw sensor_msgs::msg::dds_::Image_",
			}
			for _, e := range s.endpoints {
				if got := e["topic"] + " " + e["type"]; got != want[e["side"]] || e["same_participant"] != "1" || e["padding_zero"] != "1" {
					t.Errorf("ENDPOINT %v: want %q of this participant, zero padding", e, want[e["side"]])
				}
			}
			if len(s.endpoints) != 2 {
				t.Errorf("%d endpoints listed, want 2", len(s.endpoints))
			}
			if gid := s.head["gid"]; gid != hex.EncodeToString(p.gid[:]) {
				t.Errorf("participant gid %s, want %x", gid, p.gid)
			}

			// Closing an endpoint takes it out of the node.
			if err := sub.Close(); err != nil {
				t.Fatal(err)
			}
			s = g.waitGraph("0", "1")
			if len(s.endpoints) != 1 || s.endpoints[0]["topic"] != "rt/cmd_vel" {
				t.Errorf("after closing the subscription: %v", s.endpoints)
			}
		})
	}
}
