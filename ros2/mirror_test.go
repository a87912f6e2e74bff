//go:build ros2 && cgo

package ros2

import (
	"fmt"
	"hash/fnv"
	"strconv"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/zerohop/zerohop/handles"
)

// mirrorImage is an rgb8 image handle of width × height (rows padded by 2
// bytes) and its payload, the peer's test pattern.
func mirrorImage(t *testing.T, width, height uint32) (handles.Handle, []byte) {
	t.Helper()
	fid, err := handles.NewFrameID("camera_optical")
	if err != nil {
		t.Fatal(err)
	}
	step := width*3 + 2
	data := patternBytes(step * height)
	return handles.Handle{Kind: handles.KindImage, CaptureNs: 1_700_000_000_123_456_789, Length: uint64(len(data)), FrameID: fid,
		Image: handles.ImageFormat{Width: width, Height: height, RowStep: step, Encoding: handles.EncodingRGB8}}, data
}

// newReliableImageMirror is a RELIABLE image mirror on /zerohop/image of a
// new participant, both closed when t ends.
func newReliableImageMirror(t *testing.T, cfg Config) *MirrorWriter {
	t.Helper()
	p, err := NewParticipant(cfg, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	m, err := p.NewImageMirror("/zerohop/image", QoS{Reliability: Reliable})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func fnv32a(b []byte) string {
	h := fnv.New32a()
	h.Write(b)
	return fmt.Sprintf("%08x", h.Sum32())
}

// A RELIABLE mirror (--ros2-mirror-reliability reliable) matches a
// RELIABLE subscriber, rviz2's default, and delivers whole frames to it;
// it matches a BEST_EFFORT subscriber too.
func TestReliableMirrorReachesReliableSubscribers(t *testing.T) {
	cfg := loopbackConfig(t)
	m := newReliableImageMirror(t, cfg)
	// 320 × 240: 231 kB, four UDP fragments (testdata/loopback.xml), all
	// of which must arrive for the frame to.
	h, data := mirrorImage(t, 320, 240)
	const n = 3
	rel := startPeer(t, cfg, "sub", "image", "rt/zerohop/image", "reliable", strconv.Itoa(n))
	be := startPeer(t, cfg, "sub", "image", "rt/zerohop/image", "besteffort", "0")
	rel.expect("MATCHED")
	be.expect("MATCHED")
	waitFor(t, "both subscribers matched", func() bool { return m.Matched() == 2 })

	// Publish until the RELIABLE peer has its n samples.
	stop, published := make(chan struct{}), make(chan error, 1)
	go func() {
		var err error
		defer func() { published <- err }()
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			if e := m.Publish(&h, data); e != nil {
				err = e
				return
			}
		}
	}()
	defer func() {
		close(stop)
		if err := <-published; err != nil {
			t.Errorf("Publish: %v", err)
		}
	}()
	f := fields(rel.expect("PUBLICATION"))
	if f["reliability"] != "RELIABLE" || f["history"] != "KEEP_LAST" || f["depth"] != "1" {
		t.Errorf("mirror offers %v, want RELIABLE, KEEP_LAST 1", f)
	}
	want := map[string]string{"sec": "1700000000", "nanosec": "123456789", "frame_id": "camera_optical", "encoding": "rgb8",
		"width": "320", "height": "240", "step": "962", "len": strconv.Itoa(len(data)), "fnv": fnv32a(data)}
	for i := range n {
		got := fields(rel.expect("SAMPLE"))
		for k, v := range want {
			if got[k] != v {
				t.Errorf("sample %d: %s = %q, want %q", i, k, got[k], v)
			}
		}
	}
}

// The default BEST_EFFORT mirror never matches a RELIABLE subscriber: the
// incompatibility is logged and Matched stays 0.
func TestBestEffortMirrorDoesNotMatchReliableSubscribers(t *testing.T) {
	for _, q := range []QoS{{}, {Reliability: BestEffort}} {
		t.Run(q.Reliability.String(), func(t *testing.T) {
			core, logs := observer.New(zapcore.InfoLevel)
			cfg := loopbackConfig(t)
			p, err := NewParticipant(cfg, zap.New(core))
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			m, err := p.NewPointCloud2Mirror("/zerohop/points", q)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			startPeer(t, cfg, "sub", "cloud", "rt/zerohop/points", "reliable", "0")
			// Discovery has happened once Cyclone reports the
			// incompatibility; a match would have come with it.
			waitFor(t, "the incompatible-QoS log line", func() bool {
				return logs.FilterMessageSnippet("incompatible QoS").FilterField(zap.String("topic", "/zerohop/points")).Len() > 0
			})
			deadline := time.Now().Add(300 * time.Millisecond)
			for time.Now().Before(deadline) {
				if n := m.Matched(); n != 0 {
					t.Fatalf("Matched() = %d: a BEST_EFFORT mirror matched a RELIABLE subscriber", n)
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}

// A RELIABLE mirror whose subscriber stops acknowledging (here: the
// subscriber process is stopped with SIGSTOP, so it neither reads nor
// acknowledges) must not hold up Publish, which runs on the camera's
// frame path. A KEEP_ALL writer would block each write up to
// max_blocking_time (the DDS default is 100 ms) once the unacknowledged
// frames pass Cyclone's WHC high-water mark; the mirror's KEEP_LAST 1 and
// max_blocking_time 0 (see mirrorMaxBlocking) must keep every write short.
func TestReliableMirrorNeverWaitsForAStalledSubscriber(t *testing.T) {
	cfg := loopbackConfig(t)
	m := newReliableImageMirror(t, cfg)
	// 640 × 480 rgb8: 923 kB, above the WHC's largest high-water mark
	// (500 kB), so a writer that throttles would do so from the second
	// unacknowledged frame on.
	h, data := mirrorImage(t, 640, 480)
	peer := startPeer(t, cfg, "sub", "image", "rt/zerohop/image", "reliable", "0")
	peer.expect("MATCHED")
	waitFor(t, "the subscriber matched", func() bool { return m.Matched() == 1 })
	// A few frames while the peer runs, so that it has acknowledged data
	// (a reader that has never answered a heartbeat is treated apart).
	for range 3 {
		if err := m.Publish(&h, data); err != nil {
			t.Fatal(err)
		}
		time.Sleep(30 * time.Millisecond)
	}
	peer.pause()

	const frames, bound = 30, 50 * time.Millisecond
	var slowest time.Duration
	for i := range frames {
		start := time.Now()
		err := m.Publish(&h, data)
		d := time.Since(start)
		slowest = max(slowest, d)
		if err != nil {
			t.Errorf("frame %d: Publish: %v", i, err)
		}
		if d > bound {
			t.Errorf("frame %d: Publish took %v, want < %v: the frame path waited for a stalled subscriber", i, d, bound)
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("%d frames to a stalled RELIABLE subscriber, slowest Publish %v", frames, slowest)
	// The stopped peer keeps its lease (10 s): still matched, so the
	// frames above did go to a RELIABLE reader that was not answering.
	if n := m.Matched(); n != 1 {
		t.Errorf("Matched() = %d after the frames, want the stalled subscriber still matched", n)
	}
	// Resume the peer before m.Close: a RELIABLE writer being deleted
	// lingers (up to 1 s) for its acknowledgements.
	peer.cmd.Process.Signal(syscall.SIGCONT)
}
