package agent

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zerohop/zerohop/handles"
	"github.com/zerohop/zerohop/monotime"
	"github.com/zerohop/zerohop/planner"
)

// startHung runs g's pipeline on a frame whose capture stamp lies skew
// from now and returns once the frame's GPU stage has hung; release
// unhangs it, wait waits for Run's return. Cleanup stops the pipeline.
func startHung(t *testing.T, g *composed, hang *hangingGPUFilter, skew time.Duration) (cancel context.CancelFunc, release func(), wait func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	finished := make(chan struct{})
	var runErr error
	go func() { runErr = g.pipe.Run(ctx); close(finished) }()
	wait = func() error { <-finished; return runErr }
	var once sync.Once
	release = func() { once.Do(func() { close(hang.release) }) }
	t.Cleanup(func() { release(); cancel(); wait() })
	var h handles.Handle
	if err := g.cam.Frame(0, skewedPublisher{g.inproc, skew}, &h); err != nil {
		t.Fatal(err)
	}
	select {
	case <-hang.entered:
	case <-time.After(5 * time.Second):
		t.Fatal("the pipeline never reached the GPU filter")
	}
	return cancel, release, wait
}

// TestStallGuardCountsFromTheFramesTime: a frame arrives 800 ms old
// (fresh under a 1 s watchdog) and its stage hangs. By the watchdog's rule
// its command may stand at most 200 ms more; the guard zeroed a whole
// period after the stage began.
func TestStallGuardCountsFromTheFramesTime(t *testing.T) {
	g, hang := newHung(t, time.Second)
	timeout := g.pipe.cfg.Watchdog.Timeout()
	startHung(t, g, hang, -800*time.Millisecond)
	for deadline := time.Now().Add(5 * time.Second); g.pipe.Stalls() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the stall guard did not answer the hung stage")
		}
	}
	cmds := g.sink.since(hang.hungAt)
	if len(cmds) == 0 || !cmds[0].cmd.IsZero() {
		t.Fatalf("commands during the hang: %+v, want a zero", cmds)
	}
	// Expected within 200 ms and a tick (250 ms); counted from the
	// stage's start it cannot come before the whole period.
	if d := cmds[0].at.Sub(hang.hungAt); d >= 7*timeout/10 {
		t.Fatalf("zero %v after the hang began, the frame over 800 ms old then (watchdog %v): counted from the stage's start", d, timeout)
	}
}

// refusingSink is a recordingSink whose first zero command fails.
type refusingSink struct {
	recordingSink
	zeros atomic.Int32
}

func (s *refusingSink) PublishTwist(tw planner.Twist, stamp time.Time) error {
	s.recordingSink.PublishTwist(tw, stamp)
	if tw.IsZero() && s.zeros.Add(1) == 1 {
		return errors.New("dds_write: transient failure")
	}
	return nil
}

// TestStallGuardRetriesARefusedZero: the sink refuses the guard's zero;
// while the stage hangs, the guard tries again until one is sent, and
// counts one stall.
func TestStallGuardRetriesARefusedZero(t *testing.T) {
	g, hang := newHung(t, 0)
	sink := &refusingSink{}
	g.pipe.cfg.Sink = sink
	startHung(t, g, hang, 0)
	for deadline := time.Now().Add(5 * time.Second); sink.zeros.Load() < 2; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d zero attempts while the stage hung, the first refused: never retried", sink.zeros.Load())
		}
	}
	if n := g.pipe.Stalls(); n != 1 {
		t.Fatalf("%d stalls counted, want 1", n)
	}
	if n := g.pipe.PublishFailures(); n != 1 {
		t.Fatalf("%d publish failures, want the 1 refused zero", n)
	}
}

// TestFrameTheGuardZeroedPublishesOnlyZero: once the guard has published
// zero for a frame, that frame's own command is zero even when the
// watchdog's check of it passes (it was evaluated just inside the period,
// or the wall clock stepped back while the stage ran); and so is a frame
// that reaches the publish after the context ended but before the guard
// has run (a loaded machine, GOMAXPROCS 1). In order, on one pipeline.
func TestFrameTheGuardZeroedPublishesOnlyZero(t *testing.T) {
	c := newComposed(t)
	moving := planner.Twist{LinearX: 0.05}
	cancelled := make(chan struct{})
	close(cancelled)
	for _, tc := range []struct {
		name               string
		guardZeroed, ended bool
		// monoPast: the frame is past its stale moment by the monotonic
		// clock, though fresh by the wall clock (it stepped back during
		// the stages), and the guard's timer has not fired yet.
		monoPast bool
		want     planner.Twist
	}{
		{"a frame (the check is meant to pass)", false, false, false, moving},
		{"a frame the guard zeroed", true, false, false, planner.Twist{}},
		{"the next frame", false, false, false, moving},
		{"a frame after the context ended", false, true, false, planner.Twist{}},
		{"a frame past its stale moment by the monotonic clock", false, false, true, planner.Twist{}},
		{"the frame after it", false, false, false, moving},
	} {
		now := time.Now()
		at, v := c.pipe.cfg.Watchdog.Fresh(now, now)
		if v != planner.FrameNewest {
			t.Fatalf("a frame stamped now is %v, want newest", v)
		}
		c.pipe.lastUntil = max(monotime.Now()+int64(time.Second), c.pipe.lastUntil+1)
		if tc.monoPast {
			c.pipe.lastUntil = monotime.Now() - 1
		}
		until := c.pipe.lastUntil
		c.pipe.busyUntil.Store(until)
		if tc.guardZeroed {
			if busy, err := c.pipe.publishZeroIfBusyUntil(until, now); !busy || err != nil {
				t.Fatalf("%s: guard's zero: busy %v, err %v", tc.name, busy, err)
			}
		}
		c.pipe.runDone = nil
		if tc.ended {
			c.pipe.runDone = cancelled
		}
		c.pipe.publishFrame(moving, at, at)
		if got := c.pipe.Last(); got != tc.want {
			t.Fatalf("%s published %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// TestCancelPublishesZeroAtOnce: SIGINT/SIGTERM (ctx) while a stage hangs,
// well inside the watchdog period: zero goes out at once, and the frame's
// own command, when its stage returns, is zero too.
func TestCancelPublishesZeroAtOnce(t *testing.T) {
	g, hang := newHung(t, 0)
	cancel, release, wait := startHung(t, g, hang, 0)
	cancelAt := time.Now()
	cancel()
	for deadline := time.Now().Add(2 * time.Second); len(g.sink.since(cancelAt)) == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no command published after cancel while the stage hung")
		}
	}
	if first := g.sink.since(cancelAt)[0]; !first.cmd.IsZero() || first.at.Sub(cancelAt) > g.pipe.cfg.Watchdog.Timeout()/2 {
		t.Fatalf("first command after cancel: %+v %v later, want zero at once", first.cmd, first.at.Sub(cancelAt))
	}
	release()
	if err := wait(); err != nil {
		t.Fatal(err)
	}
	for _, c := range g.sink.since(cancelAt) {
		if !c.cmd.IsZero() {
			t.Fatalf("a command after cancel: %+v", c.cmd)
		}
	}
}

// TestReclaimedFrameZeroesTheCommand: a frame whose slots the camera
// reclaimed passed the watchdog's freshness check before its stages ran;
// dropping it must also stop the last command, or a run of such frames
// keeps it on the robot.
func TestReclaimedFrameZeroesTheCommand(t *testing.T) {
	fake := newFakeGPUFilter(t, 0.2)
	f := &invalidatingGPUFilter{fakeGPUFilter: fake}
	g := newComposedWith(t, composedOptions{gpu: f, gpuBEV: make([]byte, 4*fake.bev.Len()), watchdog: slowStepWatchdog})
	var h handles.Handle
	for seq, reclaim := range []bool{false, true, true} {
		if err := g.cam.Frame(uint64(seq), g.inproc, &h); err != nil {
			t.Fatal(err)
		}
		l := <-g.inproc.C(TopicPoints)
		f.during = nil
		if reclaim {
			f.during = func() { l.Release() } // the lease goes invalid, as after a reclaim
		}
		g.pipe.frame(l)
		ok, why := g.pipe.cfg.Watchdog.Check(time.Now())
		switch {
		case !reclaim && !ok:
			t.Fatalf("frame %d: watchdog %q after a planned frame", seq, why)
		case reclaim && ok:
			t.Fatalf("frame %d was dropped as reclaimed and the watchdog lets the last command stand", seq)
		case reclaim && !strings.Contains(why, "reclaimed"):
			t.Fatalf("frame %d: watchdog reason %q does not say the slots were reclaimed", seq, why)
		}
	}
}

// TestZeroComesAtTheStaleMomentNotATickLater: with a Tick far longer than
// the watchdog period, the zero after frames stop, and the stall guard's
// zero for a hung stage, still come just after the newest frame's stale
// moment: both are timed for it. A crash soak measured them up to a Tick
// (Timeout/4) late, past --watchdog, when only ticks checked.
func TestZeroComesAtTheStaleMomentNotATickLater(t *testing.T) {
	const watchdog, tick = 200 * time.Millisecond, 10 * time.Second
	// Scheduling on a loaded 2-core machine under -race; a tick late is
	// 10 s.
	const slack = 300 * time.Millisecond

	t.Run("frames stop", func(t *testing.T) {
		g := newComposedWith(t, composedOptions{watchdog: watchdog})
		g.pipe.cfg.Tick = tick
		last := runAndFeed(t, g, 20)
		zeroAt := waitForZero(t, g, last, watchdog+slack+time.Second)
		if d := zeroAt.Sub(last); d > watchdog+slack {
			t.Fatalf("zero %v after the last frame's capture; watchdog %v", d, watchdog)
		}
	})
	t.Run("a stage hangs", func(t *testing.T) {
		g, hang := newHung(t, watchdog)
		g.pipe.cfg.Tick = tick
		startHung(t, g, hang, 0)
		zeroAt := waitForZero(t, g, hang.hungAt, watchdog+slack+time.Second)
		if d := zeroAt.Sub(hang.hungAt); d > watchdog+slack {
			t.Fatalf("stall guard's zero %v after the hung frame's capture; watchdog %v", d, watchdog)
		}
	})
}

// runAndFeed runs g's pipeline until the test ends and publishes frames
// 0..n-1 at 30 Hz; it returns the last one's capture time.
func runAndFeed(t *testing.T, g *composed, n uint64) time.Time {
	t.Helper()
	return runAndFeedWith(t, g, n, nil)
}

// runAndFeedWith is runAndFeed calling before, if not nil, before each
// frame is published.
func runAndFeedWith(t *testing.T, g *composed, n uint64, before func(seq uint64)) time.Time {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.pipe.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	var h handles.Handle
	var last time.Time
	for seq := range n {
		if before != nil {
			before(seq)
		}
		last = time.Now()
		if err := g.cam.Frame(seq, g.inproc, &h); err != nil {
			t.Fatal(err)
		}
		time.Sleep(33 * time.Millisecond)
	}
	return last
}

// waitForZero returns when g's sink took its first zero command at or
// after t0, failing the test after limit.
func waitForZero(t *testing.T, g *composed, t0 time.Time, limit time.Duration) time.Time {
	t.Helper()
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		for _, c := range g.sink.since(t0) {
			if c.cmd.IsZero() {
				return c.at
			}
		}
	}
	t.Fatalf("no zero command within %v", limit)
	return time.Time{}
}
