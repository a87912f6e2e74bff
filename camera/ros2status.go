package camera

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/zerohop/zerohop/handles/transport"
	"github.com/zerohop/zerohop/telemetry/status"
)

// topicState is what topicStatus reads of one driver topic: its resolved
// name, the publishers matched now, and the source's counters now and a
// period ago (zero at the first).
type topicState struct {
	part, topic, maxFlag string // "points", "/velodyne_points", "--ros2-max-points"
	deskew               bool   // --ros2-fixed-frame: the points are deskewed
	publishers           int
	now, prev            ROS2Stats
	// scans, scansPrev: with --ros2-merge-frame, each merged scanner's
	// counters now and a period ago (nil at the first).
	scans, scansPrev []LidarInputStats
	elapsed          time.Duration
}

// topicStatus is one driver topic's status, named "NODE: part" after the
// camera's fully qualified ROS name:
//
//   - WARN while no publisher is matched (the topic name, the domain or
//     the QoS is off, or the driver is down);
//   - WARN when no message came in the period;
//   - WARN when more than 5 % of the period's messages were dropped,
//     saying why and what to change;
//   - with deskew, WARN when more than 5 % of them were used as sent, not
//     deskewed (no /tf, no time field);
//   - else OK with the rate.
func topicStatus(fullName string, st topicState) status.Status {
	kv := func(k string, v uint64) status.KeyValue {
		return status.KeyValue{Key: k, Value: strconv.FormatUint(v, 10)}
	}
	received := st.now.Received - st.prev.Received
	rate := 0.0
	if secs := st.elapsed.Seconds(); secs > 0 {
		rate = float64(received) / secs
	}
	out := status.Status{Level: status.OK, Name: strings.TrimPrefix(fullName, "/") + ": " + st.part, HardwareID: fullName,
		Message: fmt.Sprintf("%.1f Hz from %s", rate, st.topic),
		Values: []status.KeyValue{
			{Key: "topic", Value: st.topic},
			{Key: "publishers", Value: strconv.Itoa(st.publishers)},
			{Key: "rate Hz", Value: strconv.FormatFloat(rate, 'f', 1, 64)},
			kv("received", st.now.Received), kv("published", st.now.Published), kv("delivered", st.now.Delivered),
			kv("exhausted", st.now.Exhausted), kv("unsupported", st.now.Unsupported), kv("too large", st.now.TooLarge),
			kv("failed", st.now.Failed), kv("mirrored", st.now.Mirrored),
		}}
	if st.deskew {
		out.Values = append(out.Values, kv("deskewed", st.now.Deskewed), kv("not deskewed", st.now.NotDeskewed))
	}
	period := st.elapsed.Round(time.Millisecond)
	type reason struct {
		n    uint64
		what string
	}
	reasons := []reason{
		{st.now.TooLarge - st.prev.TooLarge, "larger than a slot (raise " + st.maxFlag + ")"},
		{st.now.Exhausted - st.prev.Exhausted, "no free slot (the subscribers hold them all: more --slots, or fewer held)"},
		{st.now.Unsupported - st.prev.Unsupported, "unsupported encoding or point layout (see the log)"},
		{st.now.Failed - st.prev.Failed, "publishing failed (see the log)"},
	}
	var dropped uint64
	var why []string
	for _, r := range reasons {
		if r.n > 0 {
			dropped += r.n
			why = append(why, fmt.Sprintf("%d %s", r.n, r.what))
		}
	}
	if len(st.scans) > 0 {
		out.Values = append(out.Values, kv("no transform", st.now.NoTransform))
		for _, sc := range st.scans {
			out.Values = append(out.Values, status.KeyValue{Key: "LiDAR " + sc.Topic,
				Value: fmt.Sprintf("%d publishers, %d received, %d merged, %d superseded", sc.Publishers, sc.Received, sc.Merged, sc.Superseded)})
		}
		if msg := mergeWarning(st, period); msg != "" {
			out.Level, out.Message = status.Warn, msg
			return out
		}
	}
	switch {
	case st.publishers == 0:
		out.Level, out.Message = status.Warn, fmt.Sprintf("no publisher on %s: check the topic name, ROS_DOMAIN_ID and that the driver runs", st.topic)
	case received == 0:
		out.Level, out.Message = status.Warn, fmt.Sprintf("no message on %s in the last %v (%d publishers matched)", st.topic, period, st.publishers)
	case float64(dropped) > status.DropWarnRatio*float64(received):
		out.Level, out.Message = status.Warn, fmt.Sprintf("%d of %d messages on %s dropped in the last %v: %s", dropped, received, st.topic, period, strings.Join(why, ", "))
	case st.deskew && float64(st.now.NotDeskewed-st.prev.NotDeskewed) > status.DropWarnRatio*float64(received):
		out.Level, out.Message = status.Warn, fmt.Sprintf("%d of %d messages on %s used as sent, not deskewed, in the last %v: no /tf for their times or no per-point time field (see the log)",
			st.now.NotDeskewed-st.prev.NotDeskewed, received, st.topic, period)
	}
	return out
}

// mergeWarning is why merged scans are held back or not made, "" when
// they are not: a scanner without a publisher or silent for the period
// (no merged cloud goes out without it), or a frame without a transform
// to the merge frame.
func mergeWarning(st topicState, period time.Duration) string {
	for i, sc := range st.scans {
		var prev uint64
		if i < len(st.scansPrev) {
			prev = st.scansPrev[i].Received
		}
		switch {
		case sc.Publishers == 0:
			return fmt.Sprintf("no publisher on %s: no merged cloud goes out without it (the agent stops the robot); check the topic name, ROS_DOMAIN_ID and that its driver runs", sc.Topic)
		case sc.Received == prev:
			return fmt.Sprintf("nothing on %s in the last %v (%d publishers matched): no merged cloud goes out without it (the agent stops the robot)", sc.Topic, period, sc.Publishers)
		}
	}
	if n := st.now.NoTransform - st.prev.NoTransform; n > 0 {
		return fmt.Sprintf("%d merged clouds not made in the last %v: a LiDAR's frame has no transform to the merge frame (see the log: is its mount on /tf_static?)", n, period)
	}
	if received := st.now.Received - st.prev.Received; received > 0 && st.now.Published == st.prev.Published {
		return fmt.Sprintf("%d messages in the last %v and no merged cloud: each LiDAR's came more than %v after another's (see the LiDARs' superseded counts), or no free slot (see the log)",
			received, period, MergeMaxAge)
	}
	return ""
}

// subscribersState is what subscribersStatus reads: the socket, the
// server's counters now and a period ago, and the handles delivered to
// subscribers in the period (summed over topics).
type subscribersState struct {
	socket    string
	now, prev transport.ServerStats
	delivered uint64
	elapsed   time.Duration
}

// subscribersStatus is the status of the camera's zerohop subscribers
// (the agent), "NODE: subscribers": WARN while none is connected (the
// frames go nowhere), or when more than 5 % of the period's handles could
// not be sent (a subscriber too slow to drain its socket); else OK.
func subscribersStatus(fullName string, st subscribersState) status.Status {
	kv := func(k string, v uint64) status.KeyValue {
		return status.KeyValue{Key: k, Value: strconv.FormatUint(v, 10)}
	}
	out := status.Status{Level: status.OK, Name: strings.TrimPrefix(fullName, "/") + ": subscribers", HardwareID: fullName,
		Message: fmt.Sprintf("%d connected on %s", st.now.Connected, st.socket),
		Values: []status.KeyValue{
			{Key: "socket", Value: st.socket}, {Key: "connected", Value: strconv.Itoa(st.now.Connected)},
			kv("accepted", st.now.Accepted), kv("refused", st.now.Refused), kv("disconnected", st.now.Disconnected),
			kv("send drops", st.now.SendDrops),
		}}
	drops, refused := st.now.SendDrops-st.prev.SendDrops, st.now.Refused-st.prev.Refused
	switch {
	case st.now.Connected == 0 && refused > 0:
		out.Level, out.Message = status.Warn, fmt.Sprintf("no subscriber connected on %s: %d refused in the last %v (see the camera's log: a uid, gid or topic the camera does not serve)",
			st.socket, refused, st.elapsed.Round(time.Millisecond))
	case st.now.Connected == 0:
		out.Level, out.Message = status.Warn, fmt.Sprintf("no subscriber connected on %s: the frames go nowhere (is the agent running, with --socket %s?)", st.socket, st.socket)
	case float64(drops) > status.DropWarnRatio*float64(st.delivered+drops):
		out.Level, out.Message = status.Warn, fmt.Sprintf("%d of %d handles could not be sent in the last %v: a subscriber does not drain its socket (see the log)",
			drops, st.delivered+drops, st.elapsed.Round(time.Millisecond))
	}
	return out
}
