package camera

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/zerohop/zerohop/handles"
	"github.com/zerohop/zerohop/ros2"
	"github.com/zerohop/zerohop/ros2/tf"
)

// mergeRobot is a robot with a front scanner (0.3 m ahead, 0.2 m up) and
// a rear one (0.3 m behind, 0.25 m up, facing backwards and mounted
// upside down), moving as deskewWorld's robot does.
type mergeRobot struct{ front, rear deskewWorld }

func newMergeRobot(omega, v float64, start int64) mergeRobot {
	w := deskewWorld{omega: omega, v: v, start: start}
	r := mergeRobot{front: w, rear: w}
	r.front.mount = tf.Transform{Translation: [3]float64{0.3, 0.02, 0.2}, Rotation: tf.FromRPY(0, 0, 0.05)}
	r.rear.mount = tf.Transform{Translation: [3]float64{-0.3, 0, 0.25}, Rotation: tf.FromRPY(math.Pi, 0, math.Pi)}
	return r
}

// transforms holds odom → base_link every 20 ms up to until after start,
// and both scanners' mounts on /tf_static.
func (r mergeRobot) transforms(t testing.TB, until int64) *tf.Buffer {
	t.Helper()
	b := r.front.transforms(t, until) // its mount as "laser", unused
	for frame, w := range map[string]deskewWorld{"front_laser": r.front, "rear_laser": r.rear} {
		if err := b.AddStatic(tf.Stamped{Parent: "base_link", Child: frame, Transform: w.mount}); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

// scans returns the front scan taken lead after start and the rear one
// lag later, and where their returns lie in base_link at time at (want
// as laid out in the merged cloud: front, then rear).
func (r mergeRobot) scans(n int, lead, lag int64, at func(front, rear int64) int64) (front, rear *ros2.LaserScanView, want [][3]float64) {
	front, wantFront := r.front.scan(n, lead)
	rear, wantRear := r.rear.scan(n, lead+lag)
	front.FrameID, rear.FrameID = []byte("front_laser"), []byte("rear_laser")
	t0, t1 := r.front.start+lead, r.rear.start+lead+lag
	toBase := r.front.base(at(t0, t1)).Inverse()
	for _, p := range wantFront {
		want = append(want, toBase.Apply(r.front.laser(t0).Apply(p)))
	}
	for _, p := range wantRear {
		want = append(want, toBase.Apply(r.rear.laser(t1).Apply(p)))
	}
	return front, rear, want
}

func newest(a, b int64) int64 { return max(a, b) }
func oldest(a, b int64) int64 { return min(a, b) }

func newMergeRig(t testing.TB, trs TransformLookup, fixed string) *ros2Rig {
	t.Helper()
	return newROS2RigWith(t, PoolSizes{Points: 2 * 1100, ImageBytes: 64}, 4,
		ROS2SourceConfig{ScanTopics: []string{"/front/scan", "/rear/scan"}, MergeFrame: "base_link", FixedFrame: fixed, Transforms: trs})
}

// Two scanners' scans become one planar cloud in base_link: each by its
// mount, and with a fixed frame each deskewed and moved by the robot's
// motion to the newer scan's time, which stamps the cloud; without one
// the cloud has the older scan's stamp. Every point lands within 5 mm of
// its return; the robot turning at 2 rad/s, a cloud that ignored the
// 40 ms between the scans (or the mounts) would be off by decimetres.
func TestMergedScansLandInTheMergeFrame(t *testing.T) {
	const start = 1_700_000_000_000_000_000
	for _, tc := range []struct {
		name     string
		omega, v float64
		fixed    string
		stamp    func(front, rear int64) int64
	}{
		{"standing robot, no fixed frame", 1e-12, 0, "", oldest},
		{"turning robot, fixed frame odom", 2, 0.5, "odom", newest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			robot := newMergeRobot(tc.omega, tc.v, start)
			front, rear, want := robot.scans(360, 300e6, 40e6, tc.stamp)
			r := newMergeRig(t, robot.transforms(t, 500e6), tc.fixed)
			r.src.onScan(0, front)
			if st := r.src.Stats(TopicPoints); st.Published != 0 {
				t.Fatalf("published %d clouds with only the front scan, want 0", st.Published)
			}
			r.src.onScan(1, rear)
			h, b := r.take(t, TopicPoints)
			wantStamp := tc.stamp(start+300e6, start+340e6)
			if h.Points.Flags != handles.PointsPlanar || h.FrameID.String() != "base_link" || h.CaptureNs != wantStamp {
				t.Errorf("handle %+v: want planar, frame base_link, stamp %d", h, wantStamp)
			}
			pts := scanPoints(b)
			if len(pts) != 720 || h.Points.Count != 720 {
				t.Fatalf("%d points (count %d), want 720: both scans", len(pts), h.Points.Count)
			}
			e := worstError(pts, want)
			t.Logf("worst %.5f m", e)
			if e > 0.005 {
				t.Errorf("merged cloud off by up to %.4f m, want ≤ 5 mm", e)
			}
			for _, in := range r.src.LidarInputs() {
				if in.Received != 1 || in.Merged != 1 || in.Superseded != 0 {
					t.Errorf("scanner %+v: want 1 received, 1 merged", in)
				}
			}
			if st := r.src.Stats(TopicPoints); st.Published != 1 || st.Received != 2 || st.NoTransform != 0 {
				t.Errorf("stats %+v: want 2 scans received, 1 cloud published", st)
			}
		})
	}
	// The scene can tell: the scans merged as sent in their own frames are
	// far off.
	robot := newMergeRobot(2, 0.5, start)
	front, rear, want := robot.scans(360, 300e6, 40e6, newest)
	var asSent [][4]float32
	for _, v := range []*ros2.LaserScanView{front, rear} {
		plain := newROS2RigWith(t, PoolSizes{Points: 1000, ImageBytes: 64}, 4, ROS2SourceConfig{})
		plain.src.OnLaserScan(v)
		_, b := plain.take(t, TopicPoints)
		asSent = append(asSent, scanPoints(b)...)
	}
	if e := worstError(asSent, want); e < 0.5 {
		t.Errorf("the scans as sent are off by only %.3f m: the scene does not test the merge", e)
	}
}

// A cloud goes out once every scanner has sent a scan since the last:
// a scanner's scans that the other's did not follow are superseded, a
// scan that arrived more than MergeMaxAge before the set was complete is not used, and
// a scanner that stays silent holds the clouds back and is named in the
// log.
func TestMergeWaitsForEveryScanner(t *testing.T) {
	const start = 1_700_000_000_000_000_000
	robot := newMergeRobot(1e-12, 0, start)
	r := newMergeRig(t, robot.transforms(t, 5e9), "")
	scan := func(k int, lead int64) {
		w := robot.front
		frame := "front_laser"
		if k == 1 {
			w, frame = robot.rear, "rear_laser"
		}
		v, _ := w.scan(90, lead)
		v.FrameID = []byte(frame)
		r.src.onScan(k, v)
	}
	published := func() uint64 { return r.src.Stats(TopicPoints).Published }

	scan(0, 100e6)
	scan(0, 200e6)
	scan(0, 300e6)
	if published() != 0 {
		t.Fatal("a cloud without the rear scanner")
	}
	scan(1, 310e6)
	if h, _ := r.take(t, TopicPoints); published() != 1 || h.CaptureNs != start+300e6 {
		t.Fatalf("published %d, stamp %d: want one cloud of the front's last scan and the rear's", published(), h.CaptureNs)
	}
	in := r.src.LidarInputs()
	if in[0].Received != 3 || in[0].Merged != 1 || in[0].Superseded != 2 || in[1].Merged != 1 {
		t.Errorf("scanners %+v: want the front's first two scans superseded", in)
	}

	// The rear's scan arrives 0.3 s after the front's: the front's is too
	// old (by arrival: the stamps may come from clocks that disagree).
	scan(0, 400e6)
	r.src.merge.parts[0].arrived -= 300e6
	scan(1, 1000e6)
	if published() != 1 {
		t.Fatal("a cloud with a front scan that arrived 0.3 s before the rear's")
	}
	scan(0, 1010e6)
	if published() != 2 {
		t.Fatalf("published %d, want 2: the front's next scan completes the cloud", published())
	}
	if in := r.src.LidarInputs(); in[0].Superseded != 3 {
		t.Errorf("front scanner %+v: want its stale scan superseded", in[0])
	}

	// The front goes silent: the rear's scans make no cloud, and the log
	// names the front.
	r.src.scans[0].lastAt.Store(time.Now().Add(-2 * time.Second).UnixNano())
	for k := range 3 {
		scan(1, 1100e6+int64(k)*100e6)
	}
	if published() != 2 {
		t.Errorf("published %d, want 2: no cloud without the front scanner", published())
	}
	logged := r.logs.FilterMessageSnippet("waits for LiDARs that send nothing").All()
	if len(logged) != 1 || logged[0].ContextMap()["silent"] != "/front/scan" {
		t.Errorf("%d silent-scanner lines, want 1 naming /front/scan; logs:\n%s", len(logged), allLogText(r))
	}
}

// A scanner whose frame has no transform to the merge frame: no cloud,
// counted and logged once with the frame and /tf_static; once the mount
// is known the next scan makes the cloud.
func TestMergeWithoutAMountMakesNoCloud(t *testing.T) {
	const start = 1_700_000_000_000_000_000
	robot := newMergeRobot(1e-12, 0, start)
	buf := robot.front.transforms(t, 5e9) // no front_laser, rear_laser mounts
	r := newMergeRig(t, buf, "")
	front, rear, _ := robot.scans(90, 300e6, 10e6, oldest)
	for range 3 {
		r.src.onScan(0, front)
		r.src.onScan(1, rear)
	}
	// Every scan after the first completes a cloud, and the scans stay
	// until one can be made: 5 tries.
	st := r.src.Stats(TopicPoints)
	if st.Published != 0 || st.NoTransform != 5 {
		t.Fatalf("stats %+v: want 5 clouds not made, none published", st)
	}
	logged := r.logs.FilterMessageSnippet("merged cloud not made").All()
	if len(logged) != 1 {
		t.Fatalf("%d lines for 5 clouds, want 1; logs:\n%s", len(logged), allLogText(r))
	}
	if msg := logged[0].ContextMap()["error"]; !strings.Contains(msg.(string), `"front_laser"`) || !strings.Contains(msg.(string), "/tf_static") {
		t.Errorf("error %q: want the frame and /tf_static named", msg)
	}
	for frame, w := range map[string]deskewWorld{"front_laser": robot.front, "rear_laser": robot.rear} {
		if err := buf.AddStatic(tf.Stamped{Parent: "base_link", Child: frame, Transform: w.mount}); err != nil {
			t.Fatal(err)
		}
	}
	r.src.onScan(0, front)
	if st := r.src.Stats(TopicPoints); st.Published != 1 {
		t.Errorf("published %d after the mounts came, want 1", st.Published)
	}
}

// With a fixed frame but no /tf for it, the scans are merged by their
// mounts at the older stamp, counted as not deskewed.
func TestMergeWithoutOdometryUsesTheMounts(t *testing.T) {
	const start = 1_700_000_000_000_000_000
	robot := newMergeRobot(1e-12, 0, start)
	front, rear, want := robot.scans(90, 300e6, 10e6, oldest)
	r := newMergeRig(t, robot.transforms(t, 5e9), "map") // no map frame
	r.src.onScan(0, front)
	r.src.onScan(1, rear)
	h, b := r.take(t, TopicPoints)
	if h.CaptureNs != start+300e6 {
		t.Errorf("stamp %d, want the older scan's", h.CaptureNs)
	}
	if e := worstError(scanPoints(b), want); e > 0.005 {
		t.Errorf("merged cloud off by up to %.4f m, want ≤ 5 mm", e)
	}
	// Each scan not deskewed, the cloud not moved: counted once each.
	if st := r.src.Stats(TopicPoints); st.NotDeskewed != 2 || st.NotMoved != 1 {
		t.Errorf("stats %+v: want 2 scans not deskewed, 1 cloud not moved", st)
	}
	if n := r.logs.FilterMessageSnippet("merged LiDAR data not moved to one time").Len(); n != 1 {
		t.Errorf("%d not-moved lines, want 1; logs:\n%s", n, allLogText(r))
	}
}

// With --ros2-stamp receipt the cloud is stamped with its oldest scan's
// arrival, not the newest's: the agent must not take it for fresher than
// it is. Scans stamped 0 (a driver that does not set them) still merge.
func TestMergeOnReceiptStampsTheOldestArrival(t *testing.T) {
	const start = 1_700_000_000_000_000_000
	robot := newMergeRobot(1e-12, 0, start)
	front, rear, _ := robot.scans(90, 300e6, 10e6, oldest)
	front.Sec, front.Nanosec, rear.Sec, rear.Nanosec = 0, 0, 0, 0
	r := newROS2RigWith(t, PoolSizes{Points: 2 * 1100, ImageBytes: 64}, 4,
		ROS2SourceConfig{ScanTopics: []string{"/front/scan", "/rear/scan"}, MergeFrame: "base_link", Transforms: robot.transforms(t, 5e9), StampOnReceipt: true})
	before := time.Now().UnixNano()
	r.src.onScan(0, front)
	after := time.Now().UnixNano()
	time.Sleep(20 * time.Millisecond)
	r.src.onScan(1, rear)
	h, _ := r.take(t, TopicPoints)
	if h.CaptureNs < before || h.CaptureNs > after {
		t.Errorf("stamp %d, want the front scan's arrival, in [%d, %d]", h.CaptureNs, before, after)
	}
}

// The scanners' callbacks run on goroutines of their own: scans merged
// from both at once are each counted once, merged or superseded, and
// every cloud holds one scan of each.
func TestMergeTakesScansFromBothScannersAtOnce(t *testing.T) {
	const start = 1_700_000_000_000_000_000
	robot := newMergeRobot(2, 0.5, start)
	front, rear, _ := robot.scans(360, 300e6, 20e6, newest)
	r := newMergeRig(t, robot.transforms(t, 500e6), "odom")
	const each = 200
	done := make(chan struct{})
	for k, v := range []*ros2.LaserScanView{front, rear} {
		go func() {
			defer func() { done <- struct{}{} }()
			for range each {
				r.src.onScan(k, v)
				if l, ok := r.tr.TryLatest(TopicPoints); ok {
					if l.Handle.Points.Count != 720 {
						t.Errorf("a cloud of %d points, want 720: one scan of each", l.Handle.Points.Count)
					}
					l.Release()
				}
			}
		}()
	}
	<-done
	<-done
	st := r.src.Stats(TopicPoints)
	in := r.src.LidarInputs()
	for _, sc := range in {
		if pending := sc.Received - sc.Merged - sc.Superseded; sc.Received != each || pending > 1 || sc.Merged != st.Published {
			t.Errorf("scanner %+v, %d clouds: want %d received, each merged or superseded but the last", sc, st.Published, each)
		}
	}
	if st.Published == 0 {
		t.Errorf("stats %+v: want clouds", st)
	}
}

// Merging allocates nothing per scan, deskewed and moved or not.
func TestMergeAllocatesNothing(t *testing.T) {
	const start = 1_700_000_000_000_000_000
	for _, fixed := range []string{"", "odom"} {
		robot := newMergeRobot(2, 0.5, start)
		front, rear, _ := robot.scans(1081, 300e6, 20e6, newest)
		r := newMergeRig(t, robot.transforms(t, 500e6), fixed)
		r.src.cfg.Checksum = false
		allocs := testing.AllocsPerRun(50, func() {
			r.src.onScan(0, front)
			r.src.onScan(1, rear)
		})
		if allocs != 0 {
			t.Errorf("fixed frame %q: %v allocations per merged cloud, want 0", fixed, allocs)
		}
		if st := r.src.Stats(TopicPoints); st.Published < 50 {
			t.Errorf("fixed frame %q: %d clouds published, want every run's", fixed, st.Published)
		}
	}
}

// The points part of /diagnostics names the scanner that holds the
// merged clouds back, or says why none could be made.
func TestMergeWarning(t *testing.T) {
	scans := func(pubs [2]int, received [2]uint64) []LidarInputStats {
		return []LidarInputStats{{Topic: "/front/scan", Publishers: pubs[0], Received: received[0]},
			{Topic: "/rear/scan", Publishers: pubs[1], Received: received[1]}}
	}
	prev := scans([2]int{1, 1}, [2]uint64{10, 10})
	for _, tc := range []struct {
		name string
		st   topicState
		want string // "" = none
	}{
		{"both sending", topicState{scans: scans([2]int{1, 1}, [2]uint64{20, 20}), scansPrev: prev}, ""},
		{"rear without a publisher", topicState{scans: scans([2]int{1, 0}, [2]uint64{20, 10}), scansPrev: prev}, "no publisher on /rear/scan"},
		{"front silent", topicState{scans: scans([2]int{1, 1}, [2]uint64{10, 20}), scansPrev: prev}, "nothing on /front/scan"},
		{"first period, front silent", topicState{scans: scans([2]int{1, 1}, [2]uint64{0, 20})}, "nothing on /front/scan"},
		{"no transform", topicState{scans: scans([2]int{1, 1}, [2]uint64{20, 20}), scansPrev: prev, now: ROS2Stats{NoTransform: 3}}, "3 merged clouds not made"},
		{"scans but no cloud", topicState{scans: scans([2]int{1, 1}, [2]uint64{20, 20}), scansPrev: prev, now: ROS2Stats{Received: 40, Published: 5}, prev: ROS2Stats{Received: 20, Published: 5}}, "20 messages in the last 1s and no merged cloud"},
		{"scans and clouds", topicState{scans: scans([2]int{1, 1}, [2]uint64{20, 20}), scansPrev: prev, now: ROS2Stats{Received: 40, Published: 15}, prev: ROS2Stats{Received: 20, Published: 5}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.st.elapsed = time.Second
			got := mergeWarning(tc.st, time.Second)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("warning %q, want %q", got, tc.want)
			}
			s := topicStatus("/zerohop_camera", tc.st)
			if (tc.want == "") == (s.Message == got && got != "") {
				t.Errorf("status %q, warning %q", s.Message, got)
			}
		})
	}
}

// BenchmarkROS2ScanMerge: two Hokuyo UST-10LX scans (1081 rays each) as
// two clouds in their own frames, side by side with the same two merged
// into one cloud in base_link, without and with the motion between them
// (a fixed frame). One op is both scans.
func BenchmarkROS2ScanMerge(b *testing.B) {
	const start = 1_700_000_000_000_000_000
	robot := newMergeRobot(2, 0.5, start)
	front, rear, _ := robot.scans(1081, 300e6, 20e6, newest)
	buf := robot.transforms(b, 500e6)
	for _, tc := range []struct {
		name string
		cfg  ROS2SourceConfig
	}{
		{"two-clouds", ROS2SourceConfig{ScanTopics: []string{"/scan"}}}, // one scanner's topic: each scan its own cloud
		{"merged", ROS2SourceConfig{ScanTopics: []string{"/front/scan", "/rear/scan"}, MergeFrame: "base_link", Transforms: buf}},
		{"merged-moving", ROS2SourceConfig{ScanTopics: []string{"/front/scan", "/rear/scan"}, MergeFrame: "base_link", FixedFrame: "odom", Transforms: buf}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			src := benchSource(b, 2*1100, tc.cfg)
			second := 1
			if len(tc.cfg.ScanTopics) == 1 {
				second = 0
			}
			for b.Loop() {
				src.onScan(0, front)
				src.onScan(second, rear)
			}
			if st := src.Stats(TopicPoints); st.Published == 0 {
				b.Fatalf("stats %+v: nothing published", st)
			}
		})
	}
}

// Two 3D LiDARs' clouds (a front one tilted down, a rear one upside down
// and turned to face backwards) become one cloud in base_footprint, each
// point moved by its LiDAR's mount; the cloud is not marked planar, and a
// cloud of one LiDAR alone makes none. Packed XYZI (the single-copy path)
// and an XYZ cloud with its intensity elsewhere both merge.
func TestMergedCloudsLandInTheMergeFrame(t *testing.T) {
	mounts := map[string]tf.Transform{
		"front_lidar": {Translation: [3]float64{0.4, 0.1, 1.2}, Rotation: tf.FromRPY(0, 0.15, 0)},
		"rear_lidar":  {Translation: [3]float64{-0.5, 0, 0.9}, Rotation: tf.FromRPY(math.Pi, 0, math.Pi)},
	}
	buf, err := tf.NewBuffer(tf.BufferConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for frame, m := range mounts {
		if err := buf.AddStatic(tf.Stamped{Parent: "base_footprint", Child: frame, Transform: m}); err != nil {
			t.Fatal(err)
		}
	}
	packed := cloudSpec{fields: []ros2.PointField{pf("x", 0, 7), pf("y", 4, 7), pf("z", 8, 7), pf("intensity", 12, 7)}, width: 100, height: 1, pointStep: 16}
	other := cloudSpec{fields: []ros2.PointField{pf("y", 0, 7), pf("x", 4, 7), pf("z", 8, 7), pf("intensity", 16, 8)}, width: 50, height: 2, pointStep: 24}
	front, rear := packed.build(testPoints(100)), other.build(testPoints(100))
	front.FrameID, rear.FrameID = []byte("front_lidar"), []byte("rear_lidar")
	rear.Nanosec += 30e6

	r := newROS2RigWith(t, PoolSizes{Points: 2 * 100, ImageBytes: 64}, 4,
		ROS2SourceConfig{PointsTopics: []string{"/front/points", "/rear/points"}, MergeFrame: "base_footprint", Transforms: buf})
	r.src.onCloud(0, front)
	if st := r.src.Stats(TopicPoints); st.Published != 0 {
		t.Fatalf("published %d clouds with only the front LiDAR's, want 0", st.Published)
	}
	r.src.onCloud(1, rear)
	h, b := r.take(t, TopicPoints)
	if h.Points.Flags&handles.PointsPlanar != 0 || h.FrameID.String() != "base_footprint" || h.CaptureNs != 1700000001_987654321 || h.Points.Count != 200 {
		t.Fatalf("handle %+v: want 200 points in base_footprint, not planar, the older cloud's stamp", h)
	}
	pts := scanPoints(b)
	for k, p := range pts {
		mount := mounts["front_lidar"]
		if k >= 100 {
			mount = mounts["rear_lidar"]
		}
		src := testPoint(k % 100)
		want := mount.Apply([3]float64{src.x, src.y, src.z})
		if math.Abs(float64(p[0])-want[0]) > 1e-4 || math.Abs(float64(p[1])-want[1]) > 1e-4 || math.Abs(float64(p[2])-want[2]) > 1e-4 ||
			math.Abs(float64(p[3])-src.i) > 1e-4 {
			t.Fatalf("point %d %v, want %v with intensity %v", k, p, want, src.i)
		}
	}
	// Merging allocates nothing per cloud.
	r.src.cfg.Checksum = false
	if allocs := testing.AllocsPerRun(50, func() { r.src.onCloud(0, front); r.src.onCloud(1, rear) }); allocs != 0 {
		t.Errorf("%v allocations per merged cloud, want 0", allocs)
	}
}

// BenchmarkROS2CloudMerge: two 57,600-point clouds (half a 64-beam
// sweep each, packed XYZI) as two clouds in their own frames, side by
// side with the same two merged into one cloud in base_footprint. One
// op is both clouds.
func BenchmarkROS2CloudMerge(b *testing.B) {
	buf, err := tf.NewBuffer(tf.BufferConfig{})
	if err != nil {
		b.Fatal(err)
	}
	for frame, m := range map[string]tf.Transform{
		"front_lidar": {Translation: [3]float64{0.4, 0.1, 1.2}, Rotation: tf.FromRPY(0, 0.15, 0)},
		"rear_lidar":  {Translation: [3]float64{-0.5, 0, 0.9}, Rotation: tf.FromRPY(math.Pi, 0, math.Pi)},
	} {
		if err := buf.AddStatic(tf.Stamped{Parent: "base_footprint", Child: frame, Transform: m}); err != nil {
			b.Fatal(err)
		}
	}
	const n = 57600
	spec := cloudSpec{fields: []ros2.PointField{pf("x", 0, 7), pf("y", 4, 7), pf("z", 8, 7), pf("intensity", 12, 7)}, width: n, height: 1, pointStep: 16}
	front, rear := spec.build(testPoints(n)), spec.build(testPoints(n))
	front.FrameID, rear.FrameID = []byte("front_lidar"), []byte("rear_lidar")
	for _, tc := range []struct {
		name string
		cfg  ROS2SourceConfig
	}{
		{"two-clouds", ROS2SourceConfig{PointsTopics: []string{"/points"}}},
		{"merged", ROS2SourceConfig{PointsTopics: []string{"/front/points", "/rear/points"}, MergeFrame: "base_footprint", Transforms: buf}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			src := benchSource(b, 2*n, tc.cfg)
			second := len(tc.cfg.PointsTopics) - 1
			for b.Loop() {
				src.onCloud(0, front)
				src.onCloud(second, rear)
			}
			if st := src.Stats(TopicPoints); st.Published == 0 {
				b.Fatalf("stats %+v: nothing published", st)
			}
		})
	}
}

// A LiDAR on a moving joint (a nodding mount, whose pitch
// robot_state_publisher puts on /tf from joint_states): with its one topic
// and a merge frame the camera moves each cloud into base_link by the
// mount at the cloud's own stamp, interpolated between /tf's samples, so
// the agent needs no mount of its own. The mount nods at 0.5 rad/s: a
// cloud moved by the newest sample's mount instead would be off by
// decimetres, by the static one of the URDF's zero position as well.
func TestMergeFrameFollowsAMovingJoint(t *testing.T) {
	const stamp0 = 1700000001_987654321
	mount := func(ns int64) tf.Transform {
		return tf.Transform{Translation: [3]float64{0.2, 0, 0.8}, Rotation: tf.FromRPY(0, 0.5*float64(ns-stamp0)/1e9, 0)}
	}
	buf, err := tf.NewBuffer(tf.BufferConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for ts := int64(stamp0 - 100e6); ts <= stamp0+300e6; ts += 20e6 {
		if err := buf.Add(tf.Stamped{Parent: "base_link", Child: "nodding_lidar", Transform: mount(ts), Stamp: ts}); err != nil {
			t.Fatal(err)
		}
	}
	spec := cloudSpec{fields: []ros2.PointField{pf("x", 0, 7), pf("y", 4, 7), pf("z", 8, 7), pf("intensity", 12, 7)}, width: 100, height: 1, pointStep: 16}
	r := newROS2RigWith(t, PoolSizes{Points: 100, ImageBytes: 64}, 4,
		ROS2SourceConfig{PointsTopics: []string{"/points"}, MergeFrame: "base_link", Transforms: buf})
	for _, dt := range []int64{0, 110e6, 250e6} { // 110 ms: between two samples
		cloud := spec.build(testPoints(100))
		at := int64(stamp0 + dt)
		cloud.FrameID, cloud.Sec, cloud.Nanosec = []byte("nodding_lidar"), int32(at/1e9), uint32(at%1e9)
		r.src.onCloud(0, cloud)
		h, b := r.take(t, TopicPoints)
		if h.FrameID.String() != "base_link" || h.CaptureNs != at || h.Points.Count != 100 {
			t.Fatalf("cloud %v ms on: handle %+v, want 100 points in base_link stamped %d", dt/1e6, h, at)
		}
		m := mount(at)
		for k, p := range scanPoints(b) {
			src := testPoint(k)
			want := m.Apply([3]float64{src.x, src.y, src.z})
			if math.Abs(float64(p[0])-want[0]) > 1e-4 || math.Abs(float64(p[1])-want[1]) > 1e-4 || math.Abs(float64(p[2])-want[2]) > 1e-4 {
				t.Fatalf("cloud %v ms on: point %d %v, want %v (the mount at the cloud's stamp)", dt/1e6, k, p, want)
			}
		}
	}
}
