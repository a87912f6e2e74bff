package camera

import (
	"strings"
	"testing"
	"time"

	"github.com/zerohop/zerohop/handles/transport"
	"github.com/zerohop/zerohop/telemetry/status"
)

func TestTopicStatus(t *testing.T) {
	prev := ROS2Stats{Received: 100, Published: 100}
	for _, tc := range []struct {
		name   string
		change func(*topicState)
		level  status.Level
		msg    string
	}{
		{"flowing", func(*topicState) {}, status.OK, "10.0 Hz from /velodyne_points"},
		{"no publisher", func(s *topicState) { s.publishers = 0 }, status.Warn,
			"no publisher on /velodyne_points: check the topic name, ROS_DOMAIN_ID and that the driver runs"},
		{"silent publisher", func(s *topicState) { s.now = prev }, status.Warn, "no message on /velodyne_points in the last 1s (1 publishers matched)"},
		{"too large", func(s *topicState) { s.now.TooLarge = 3 }, status.Warn,
			"3 of 10 messages on /velodyne_points dropped in the last 1s: 3 larger than a slot (raise --ros2-max-points)"},
		{"two reasons", func(s *topicState) { s.now.Exhausted, s.now.Unsupported = 1, 1 }, status.Warn,
			"2 of 10 messages on /velodyne_points dropped in the last 1s: 1 no free slot (the subscribers hold them all: more --slots, or fewer held), 1 unsupported encoding"},
		// One drop in 40 is under 5 %: no flapping.
		{"a drop now and then", func(s *topicState) { s.now.Received, s.now.Exhausted = 140, 1 }, status.OK, "40.0 Hz"},
		{"drops before the period", func(s *topicState) { s.prev.TooLarge, s.now.TooLarge = 7, 7 }, status.OK, "10.0 Hz"},
		{"deskewed", func(s *topicState) { s.deskew, s.now.Deskewed = true, 10 }, status.OK, "10.0 Hz"},
		{"not deskewed", func(s *topicState) { s.deskew, s.now.Deskewed, s.now.NotDeskewed = true, 7, 3 }, status.Warn,
			"3 of 10 messages on /velodyne_points used as sent, not deskewed, in the last 1s: no /tf"},
		// Without deskew asked for, the counter says nothing.
		{"not deskewed, not asked", func(s *topicState) { s.now.NotDeskewed = 3 }, status.OK, "10.0 Hz"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := topicState{part: "points", topic: "/velodyne_points", maxFlag: "--ros2-max-points", publishers: 1,
				now: ROS2Stats{Received: 110, Published: 110}, prev: prev, elapsed: time.Second}
			tc.change(&st)
			got := topicStatus("/robot1/zerohop_camera", st)
			if got.Name != "robot1/zerohop_camera: points" || got.HardwareID != "/robot1/zerohop_camera" {
				t.Errorf("name %q, hardware_id %q", got.Name, got.HardwareID)
			}
			if got.Level != tc.level || !strings.Contains(got.Message, tc.msg) {
				t.Errorf("level %d %q, want level %d with %q", got.Level, got.Message, tc.level, tc.msg)
			}
			values := map[string]string{}
			for _, kv := range got.Values {
				values[kv.Key] = kv.Value
			}
			if values["topic"] != "/velodyne_points" || values["publishers"] != "1" && tc.name != "no publisher" {
				t.Errorf("values %v", values)
			}
			if _, ok := values["not deskewed"]; ok != st.deskew {
				t.Errorf("values %v: deskew counts shown %v, want %v", values, ok, st.deskew)
			}
		})
	}
}

func TestSubscribersStatus(t *testing.T) {
	prev := transport.ServerStats{Accepted: 1, Connected: 1, SendDrops: 2}
	for _, tc := range []struct {
		name   string
		change func(*subscribersState)
		level  status.Level
		msg    string
	}{
		{"the agent connected", func(*subscribersState) {}, status.OK, "1 connected on /run/zerohop/camera.sock"},
		{"nobody connected", func(s *subscribersState) { s.now.Connected = 0 }, status.Warn,
			"no subscriber connected on /run/zerohop/camera.sock: the frames go nowhere (is the agent running, with --socket /run/zerohop/camera.sock?)"},
		{"an agent refused", func(s *subscribersState) { s.now.Connected, s.now.Refused = 0, 2 }, status.Warn,
			"no subscriber connected on /run/zerohop/camera.sock: 2 refused in the last 1s (see the camera's log"},
		{"handles not sent", func(s *subscribersState) { s.now.SendDrops = 6 }, status.Warn,
			"4 of 24 handles could not be sent in the last 1s"},
		// One in 21 is under 5 %.
		{"a handle not sent now and then", func(s *subscribersState) { s.now.SendDrops = 3 }, status.OK, "1 connected"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := subscribersState{socket: "/run/zerohop/camera.sock", now: prev, prev: prev, delivered: 20, elapsed: time.Second}
			tc.change(&st)
			got := subscribersStatus("/robot1/zerohop_camera", st)
			if got.Name != "robot1/zerohop_camera: subscribers" || got.HardwareID != "/robot1/zerohop_camera" {
				t.Errorf("name %q, hardware_id %q", got.Name, got.HardwareID)
			}
			if got.Level != tc.level || !strings.Contains(got.Message, tc.msg) {
				t.Errorf("level %d %q, want level %d with %q", got.Level, got.Message, tc.level, tc.msg)
			}
		})
	}
}
