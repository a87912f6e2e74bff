//go:build ros2 && cgo

package ros2

import (
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/zerohop/zerohop/planner"
)

// rmw_cyclonedds_cpp's discovery fragments (rmw_node.cpp,
// check_create_domain), copied literally: what a ROS node started with the
// same environment as zerohop puts in front of its CYCLONEDDS_URI.
const (
	// Jazzy, ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST: the default
	// interface, no multicast, unicast discovery to localhost (so nothing
	// leaves the machine).
	rmwJazzyLocalhostXML = `<CycloneDDS><Domain><General><AllowMulticast>false</AllowMulticast></General>` +
		`<Discovery><ParticipantIndex>auto</ParticipantIndex><MaxAutoParticipantIndex>32</MaxAutoParticipantIndex>` +
		`<Peers><Peer address="localhost"/></Peers></Discovery></Domain></CycloneDDS>`
	// Humble, ROS_LOCALHOST_ONLY=1: bound to loopback.
	rmwHumbleLocalhostXML = `<CycloneDDS><Domain><General><Interfaces><NetworkInterface address="127.0.0.1"/></Interfaces></General></Domain></CycloneDDS>`
)

// zerohop, configured as a user would (docker compose: the environment plus
// the shipped cyclonedds.xml), matches a ROS node configured by rmw from
// the same environment and gets cmd_vel to it. The shipped file once
// pinned 127.0.0.1, and ROS_LOCALHOST_ONLY=1 produced Jazzy's fragment
// for Humble too: the node advertised only its other interface, or only
// loopback, and the two never matched.
func TestShippedConfigMeetsROSNodes(t *testing.T) {
	shipped, err := filepath.Abs("cyclonedds.xml")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		env     map[string]string
		rmwFrag string
	}{
		{"jazzy, ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST",
			map[string]string{"ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST", "ROS_DISTRO": "jazzy"}, rmwJazzyLocalhostXML},
		{"jazzy, ROS_LOCALHOST_ONLY=1",
			map[string]string{"ROS_LOCALHOST_ONLY": "1", "ROS_DISTRO": "jazzy"}, rmwJazzyLocalhostXML},
		// As compose passes it: the range too, which Humble ignores.
		{"humble, ROS_LOCALHOST_ONLY=1",
			map[string]string{"ROS_LOCALHOST_ONLY": "1", "ROS_DISTRO": "humble", "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST"}, rmwHumbleLocalhostXML},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{"CYCLONEDDS_URI": "file://" + shipped}
			for k, v := range tc.env {
				env[k] = v
			}
			cfg, err := ConfigFromEnv(envOf(env))
			if err != nil {
				t.Fatal(err)
			}
			cfg.Domain, cfg.XML = testDomain(), runTag()
			sink := newTwistSink(t, cfg, zaptest.NewLogger(t))
			node := Config{Domain: cfg.Domain, Range: RangeSystemDefault, CycloneURI: tc.rmwFrag, XML: runTag()}
			peer := startPeer(t, node, "sub", "twist", "rt/cmd_vel", "reliable", "1")
			peer.expect("MATCHED")
			waitFor(t, "the publisher to match the ROS node", func() bool { return sink.Matched() == 1 })
			if err := sink.PublishTwist(planner.Twist{LinearX: 0.5}, time.Now()); err != nil {
				t.Fatal(err)
			}
			peer.expect("SAMPLE")
		})
	}
}
