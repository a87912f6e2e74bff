package agent

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/zerohop/zerohop/handles"
	"github.com/zerohop/zerohop/monotime"
	"github.com/zerohop/zerohop/pinned"
	"github.com/zerohop/zerohop/planner"
	"github.com/zerohop/zerohop/sensor"
)

// What must not hold back the zero, or let a command outlive its data:
// the pipeline goroutine held up in a log write, a sink that refuses
// commands, an image older than its cloud.

// blockingCore is a zap core that writes nothing and blocks, for block,
// in each write of a line whose message contains match: a log written to
// a full pipe or a stalled terminal. blockedAt is when the first began.
type blockingCore struct {
	match     string
	block     time.Duration
	blockedAt *atomic.Int64
}

func (c blockingCore) Enabled(zapcore.Level) bool        { return true }
func (c blockingCore) With([]zapcore.Field) zapcore.Core { return c }
func (c blockingCore) Sync() error                       { return nil }
func (c blockingCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	return ce.AddCore(e, c)
}

func (c blockingCore) Write(e zapcore.Entry, _ []zapcore.Field) error {
	if strings.Contains(e.Message, c.match) {
		c.blockedAt.CompareAndSwap(0, time.Now().UnixNano())
		time.Sleep(c.block)
	}
	return nil
}

// firstZeroAfter returns when g's sink took its first zero command after
// t0, having taken a moving one before t0; it fails the test after limit.
func firstZeroAfter(t *testing.T, g *composed, t0 time.Time, limit time.Duration) time.Time {
	t.Helper()
	moving := false
	for _, c := range g.sink.since(time.Time{}) {
		if c.at.Before(t0) && !c.cmd.IsZero() {
			moving = true
		}
	}
	if !moving {
		t.Fatalf("no moving command before %v: %+v", t0, g.sink.since(time.Time{}))
	}
	return waitForZero(t, g, t0, limit)
}

// Scheduling on a loaded 2-core machine under -race.
const holdupSlack = 300 * time.Millisecond

// An incident's log line that blocks (stderr a full pipe) must not hold
// back its zero: the watchdog stops the robot (SetStop) before it calls
// OnIncident. A LiDAR goes blind (a failed stage) while frames keep
// coming; its incident's line blocks for 2 s. The zero came a watchdog
// period (1 s) after the last good frame, from the stall guard, and
// before that guard, with the line; found in review.
func TestSlowIncidentLogDoesNotDelayTheZero(t *testing.T) {
	const watchdog = time.Second
	var blind atomic.Bool
	g := newComposedWith(t, composedOptions{watchdog: watchdog,
		wrap: func(s sensor.Source) sensor.Source { return blindSource{s, &blind} },
		onIncident: func(i planner.Incident) {
			if i.Reason == planner.ReasonStageFailure {
				time.Sleep(2 * time.Second)
			}
		}})
	var blindAt time.Time
	runAndFeedWith(t, g, 30, func(seq uint64) {
		if seq == 15 {
			blind.Store(true)
			blindAt = time.Now()
		}
	})
	zeroAt := firstZeroAfter(t, g, blindAt, 3*time.Second)
	if d := zeroAt.Sub(blindAt); d > watchdog/2 {
		t.Fatalf("zero %v after the LiDAR went blind (watchdog %v; the incident's log line blocks for 2 s)", d, watchdog)
	}
}

// The same for an incident of frames that stopped: the zero comes at the
// newest frame's stale moment, the log line blocking for a second.
func TestSlowStaleLogDoesNotDelayTheZero(t *testing.T) {
	const watchdog = 200 * time.Millisecond
	var blocked atomic.Int64
	g := newComposedWith(t, composedOptions{watchdog: watchdog, onIncident: func(i planner.Incident) {
		if strings.Contains(i.Detail, "no frame received yet") {
			return // the start, before any frame
		}
		blocked.CompareAndSwap(0, time.Now().UnixNano())
		time.Sleep(time.Second)
	}})
	last := runAndFeed(t, g, 20)
	zeroAt := firstZeroAfter(t, g, last, watchdog+holdupSlack+2*time.Second)
	// The zero goes out before the incident's line: wait for the line.
	for deadline := time.Now().Add(2 * time.Second); blocked.Load() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no incident after the frames stopped")
		}
	}
	if d := zeroAt.Sub(last); d > watchdog+holdupSlack {
		t.Fatalf("zero %v after the last frame's capture; watchdog %v, the incident's log blocks for 1 s", d, watchdog)
	}
}

// The pipeline goroutine held up between frames (here the ground check's
// log line, blocking for a second) must not keep the last command on the
// robot past its frame's stale moment: the stall guard zeroes then, as
// Run's check would.
func TestHeldUpPipelineStillZeroesOnTime(t *testing.T) {
	const watchdog = 200 * time.Millisecond
	var blocked atomic.Int64
	log := zap.New(blockingCore{match: "ground check", block: time.Second, blockedAt: &blocked})
	g := newComposedWith(t, composedOptions{watchdog: watchdog, log: log})
	// The ground check, and its line, after some moving commands.
	g.pipe.ground.next = time.Now().Add(500 * time.Millisecond)
	runAndFeed(t, g, 45) // 1.5 s
	at := blocked.Load()
	if at == 0 {
		t.Fatal("the ground check logged nothing")
	}
	blockedAt := time.Unix(0, at)
	zeroAt := firstZeroAfter(t, g, blockedAt, 2*time.Second)
	if d := zeroAt.Sub(blockedAt); d > watchdog+holdupSlack {
		t.Fatalf("zero %v after the pipeline goroutine was held up; watchdog %v, held up for 1 s", d, watchdog)
	}
}

// movingRefusingSink refuses every moving command while refuse is set: a
// DDS write that keeps failing. The robot keeps what it last got; the
// recordingSink holds what got through.
type movingRefusingSink struct {
	recordingSink
	refuse atomic.Bool
}

func (s *movingRefusingSink) PublishTwist(t planner.Twist, at time.Time) error {
	if s.refuse.Load() && !t.IsZero() {
		return errors.New("dds_write: failure (a fake's)")
	}
	return s.recordingSink.PublishTwist(t, at)
}

// Commands the sink refused did not reach the robot: the planner steps
// from what the robot runs, so the first that gets through keeps to the
// acceleration limit, and one refused while moving does not brake it
// either. Refused from the start, the first taken jumped from 0 to
// 0.6 m/s; planned from rest after one refusal while moving, it braked
// by 0.54 m/s in a frame (16 m/s²); found in review.
func TestRefusedCommandsKeepTheRobotsLimits(t *testing.T) {
	g := newComposed(t)
	sink := &movingRefusingSink{}
	g.pipe.cfg.Sink = sink
	var h handles.Handle
	for seq := range uint64(56) {
		// Refused: the first 20, then one while moving fast.
		sink.refuse.Store(seq < 20 || seq == 50)
		g.step(t, seq, &h)
		time.Sleep(33 * time.Millisecond)
	}
	got := sink.since(time.Time{})
	if len(got) < 10 || movingCommands(&sink.recordingSink) == 0 {
		t.Fatalf("commands taken %+v: want moving ones once the sink takes them", got)
	}
	cfg := g.pipe.cfg.Planner.Config()
	// A frame's dt is at most its period and scheduling: 0.2 s allows
	// for a loaded machine.
	const dt = 0.2
	var prev float64
	for i, c := range got {
		switch d := c.cmd.LinearX - prev; {
		case d > cfg.MaxAccel*dt+1e-9:
			t.Fatalf("command %d taken: linear.x %.3f after %.3f, more than %v m/s² allows", i, c.cmd.LinearX, prev, cfg.MaxAccel)
		case -d > cfg.MaxDecel*dt+1e-9 && !c.cmd.IsZero():
			t.Fatalf("command %d taken: linear.x %.3f after %.3f, braking harder than %v m/s²", i, c.cmd.LinearX, prev, cfg.MaxDecel)
		}
		prev = c.cmd.LinearX
	}
}

// The watchdog's stop found on another goroutine (/healthz) that was
// then held up while frames resumed: its late zero is not sent, since a
// newer frame's command went out after the incident it found. One in
// time is sent, and the next frame publishes zero and ramps from rest.
func TestLateStopDoesNotOverrideANewerCommand(t *testing.T) {
	g := newComposed(t)
	var h handles.Handle
	for seq := range uint64(12) {
		g.step(t, seq, &h)
		time.Sleep(33 * time.Millisecond)
	}
	n := len(g.sink.since(time.Time{}))
	g.pipe.stopNow(time.Now().Add(-100 * time.Millisecond))
	if cmds := g.sink.since(time.Time{}); len(cmds) != n {
		t.Fatalf("a stop found before the last frame's command went out sent %+v", cmds[n:])
	}
	g.pipe.stopNow(time.Now())
	g.step(t, 12, &h)
	cmds := g.sink.since(time.Time{})
	if len(cmds) != n+2 || !cmds[n].cmd.IsZero() || !cmds[n+1].cmd.IsZero() {
		t.Fatalf("after a stop in time: %+v, want its zero and the next frame's", cmds[n:])
	}
}

// imageAger publishes images with their capture stamps moved older by
// age: a camera that lags the LiDAR. captured is the last image's stamp.
type imageAger struct {
	next interface {
		Publish(int, pinned.Slot, *handles.Handle) (int, error)
	}
	age      time.Duration
	captured *int64
}

func (a imageAger) Publish(topic int, slot pinned.Slot, h *handles.Handle) (int, error) {
	if topic == TopicImage {
		h.CaptureNs -= int64(a.age)
		*a.captured = h.CaptureNs
	}
	return a.next.Publish(topic, slot, h)
}

// A frame is as old as the older of its cloud and its image: a cloud
// 600 ms old whose image pairs 450 ms older (within the 500 ms tolerance)
// is 1.05 s old, past the 1 s watchdog: it is not planned, and the
// command from before it ends, as after a failed stage; with an image
// 100 ms older it is planned (its stages may take 300 ms under -race).
// The image of 450 ms is older than the frame before's cloud: the frames
// are ordered by their clouds.
func TestFrameIsAsOldAsItsImage(t *testing.T) {
	for _, tc := range []struct {
		imageOlder time.Duration
		planned    bool
	}{{100 * time.Millisecond, true}, {450 * time.Millisecond, false}} {
		t.Run(tc.imageOlder.String(), func(t *testing.T) {
			g := newComposedWith(t, composedOptions{watchdog: time.Second})
			g.pipe.cfg.PairTolerance = 500 * time.Millisecond
			var h handles.Handle
			for seq := range uint64(5) { // moving by now
				g.step(t, seq, &h)
				time.Sleep(33 * time.Millisecond)
			}
			before := len(g.sink.since(time.Time{}))
			var imageAt int64
			if err := g.cam.Frame(5, imageAger{g.inproc, tc.imageOlder, &imageAt}, &h); err != nil {
				t.Fatal(err)
			}
			time.Sleep(600 * time.Millisecond)
			g.pipe.frame(<-g.inproc.C(TopicPoints))
			// Planned, its command stands until the image is a watchdog
			// period old, not the cloud (nor the frame before, 633 ms old).
			if left, want := time.Duration(g.pipe.cmdUntil.Load()-monotime.Now()), time.Second-time.Since(time.Unix(0, imageAt)); tc.planned && left > want+20*time.Millisecond {
				t.Fatalf("the command stands %v more, want %v: until its image is a watchdog period old", left, want)
			}
			cmds := g.sink.since(time.Time{})
			planned := len(cmds) > before && !cmds[len(cmds)-1].cmd.IsZero()
			if planned != tc.planned {
				t.Fatalf("image %v older than its 600 ms old cloud: planned %v (commands after it %+v), want %v", tc.imageOlder, planned, cmds[before:], tc.planned)
			}
			// Dropped, it ends the command from before it: a failed frame.
			ok, why := g.pipe.cfg.Watchdog.Check(time.Now())
			if !tc.planned && (ok || !strings.Contains(why, "image is older than the watchdog period")) {
				t.Fatalf("after a frame whose image is too old: watchdog ok %v, %q; want an incident naming the image", ok, why)
			}
		})
	}
}

// After the stall guard zeroed an expired command, the next frame
// publishes zero too and the one after ramps from rest: the planner
// still held the expired command, and ramping from it would jump the
// robot from standstill back to its old speed.
func TestExpiredCommandRampsFromRest(t *testing.T) {
	g := newComposed(t)
	var h handles.Handle
	for seq := range uint64(12) { // moving by now
		g.step(t, seq, &h)
		time.Sleep(33 * time.Millisecond)
	}
	cmds := g.sink.since(time.Time{})
	speed := cmds[len(cmds)-1].cmd.LinearX
	if speed <= 0.1 {
		t.Fatalf("speed %v after 12 frames, want moving faster than 0.1 m/s", speed)
	}
	g.pipe.cmdUntil.Store(1) // its stale moment long past
	g.pipe.expireCommand()
	g.step(t, 12, &h)
	time.Sleep(33 * time.Millisecond)
	g.step(t, 13, &h)
	cmds = g.sink.since(time.Time{})
	got := []planner.Twist{cmds[len(cmds)-3].cmd, cmds[len(cmds)-2].cmd, cmds[len(cmds)-1].cmd}
	if !got[0].IsZero() || !got[1].IsZero() || got[2].LinearX > 0.1 {
		t.Fatalf("commands after the expiry %+v: want the guard's zero, the next frame's zero, then a ramp from rest (≤ 0.1 m/s), not back to %v", got, speed)
	}
}
