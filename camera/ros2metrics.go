package camera

import "github.com/prometheus/client_golang/prometheus"

// ros2Collector exports a ROS2Source's counters. Every received message
// ends in exactly one result, so the results of a topic sum to what it
// received; with a merge frame the points topic's results count merged
// clouds, and each LiDAR's messages are counted apart.
type ros2Collector struct {
	src                         *ROS2Source
	topics                      []int // those with a pool
	messages, frameIDs, mirrors *prometheus.Desc
	mirrorErrors, deskew        *prometheus.Desc
	scans                       *prometheus.Desc // nil without a merge frame
}

// Collector returns the source's counters for a Prometheus registry.
func (s *ROS2Source) Collector() prometheus.Collector {
	c := &ros2Collector{
		src: s,
		messages: prometheus.NewDesc("zerohop_camera_ros2_messages_total",
			"ROS 2 messages taken from a driver topic, by what became of them (published, exhausted: no free slot, unsupported: encoding or point layout, too_large: bigger than a slot, failed: the publisher failed).",
			[]string{"topic", "result"}, nil),
		frameIDs: prometheus.NewDesc("zerohop_camera_ros2_frame_id_rewrites_total",
			"Messages whose header.frame_id was truncated to 16 bytes or replaced because it was not printable.",
			[]string{"topic"}, nil),
		mirrors: prometheus.NewDesc("zerohop_camera_ros2_mirrored_total",
			"Frames republished in full on the mirror topic (only while a ROS subscriber is matched).",
			[]string{"topic"}, nil),
		mirrorErrors: prometheus.NewDesc("zerohop_camera_ros2_mirror_errors_total",
			"Failed publishes on the handle or mirror topics, including frames a mirror dropped rather than wait for a subscriber.",
			[]string{"topic"}, nil),
	}
	if s.cfg.FixedFrame != "" {
		c.deskew = prometheus.NewDesc("zerohop_camera_ros2_deskew_total",
			"LiDAR scans and clouds by deskew result (--ros2-fixed-frame): deskewed, placed point by point by the LiDAR's motion from /tf; not_deskewed, used as the driver sent them because the transforms or the per-point times were missing (the log says why); with --ros2-merge-frame, not_moved: merged clouds made by the scanners' mounts alone, /tf not saying how the robot moved between the scans.",
			[]string{"result"}, nil)
	}
	if s.merge != nil {
		c.scans = prometheus.NewDesc("zerohop_camera_ros2_merged_total",
			"Scans or clouds of each merged LiDAR (--ros2-merge-frame) by what became of them: received; merged, into a merged cloud; superseded, replaced by the LiDAR's next message before every other LiDAR sent one, or arrived more than 0.2 s before the set was complete. The points topic's messages_total counts the merged clouds; its result no_transform, tries to make one (one per message that completes a set) that failed because a LiDAR's frame had no transform to the merge frame.",
			[]string{"ros_topic", "result"}, nil)
	}
	for topic := range s.streams {
		if s.cam.Pool(topic) != nil {
			c.topics = append(c.topics, topic)
		}
	}
	return c
}

func (c *ros2Collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.messages
	ch <- c.frameIDs
	ch <- c.mirrors
	ch <- c.mirrorErrors
	if c.deskew != nil {
		ch <- c.deskew
	}
	if c.scans != nil {
		ch <- c.scans
	}
}

func (c *ros2Collector) Collect(ch chan<- prometheus.Metric) {
	for _, topic := range c.topics {
		name := TopicName(topic)
		st := c.src.Stats(topic)
		for _, r := range []struct {
			result string
			n      uint64
		}{
			{"published", st.Published}, {"exhausted", st.Exhausted}, {"unsupported", st.Unsupported},
			{"too_large", st.TooLarge}, {"failed", st.Failed},
		} {
			ch <- prometheus.MustNewConstMetric(c.messages, prometheus.CounterValue, float64(r.n), name, r.result)
		}
		if c.scans != nil && topic == TopicPoints {
			ch <- prometheus.MustNewConstMetric(c.messages, prometheus.CounterValue, float64(st.NoTransform), name, "no_transform")
			for _, sc := range c.src.LidarInputs() {
				for _, r := range []struct {
					result string
					n      uint64
				}{{"received", sc.Received}, {"merged", sc.Merged}, {"superseded", sc.Superseded}} {
					ch <- prometheus.MustNewConstMetric(c.scans, prometheus.CounterValue, float64(r.n), sc.Topic, r.result)
				}
			}
		}
		ch <- prometheus.MustNewConstMetric(c.frameIDs, prometheus.CounterValue, float64(st.FrameIDs), name)
		ch <- prometheus.MustNewConstMetric(c.mirrors, prometheus.CounterValue, float64(st.Mirrored), name)
		ch <- prometheus.MustNewConstMetric(c.mirrorErrors, prometheus.CounterValue, float64(c.src.streams[topic].mirrorErrors.Load()), name)
		if c.deskew != nil && topic == TopicPoints {
			ch <- prometheus.MustNewConstMetric(c.deskew, prometheus.CounterValue, float64(st.Deskewed), "deskewed")
			ch <- prometheus.MustNewConstMetric(c.deskew, prometheus.CounterValue, float64(st.NotDeskewed), "not_deskewed")
			if c.scans != nil {
				ch <- prometheus.MustNewConstMetric(c.deskew, prometheus.CounterValue, float64(st.NotMoved), "not_moved")
			}
		}
	}
}
