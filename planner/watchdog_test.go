package planner

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// incidentLog collects the watchdog's callbacks, as the agent's logger would.
type incidentLog struct {
	started, ended []Incident
}

// fakeMonotonic is a fake of the watchdog's monotonic clock: it stands
// still unless a test moves it, so that tests which give wall-clock times
// judge by those alone.
type fakeMonotonic struct {
	mu  sync.Mutex
	now time.Duration
}

func (f *fakeMonotonic) read() time.Duration     { f.mu.Lock(); defer f.mu.Unlock(); return f.now }
func (f *fakeMonotonic) advance(d time.Duration) { f.mu.Lock(); f.now += d; f.mu.Unlock() }

// newLoggedWatchdog gives cfg a still fakeMonotonic unless it has a clock.
func newLoggedWatchdog(t *testing.T, cfg WatchdogConfig) (*Watchdog, *incidentLog) {
	t.Helper()
	if cfg.Monotonic == nil {
		cfg.Monotonic = (&fakeMonotonic{}).read
	}
	log := &incidentLog{}
	cfg.OnIncident = func(i Incident) { log.started = append(log.started, i) }
	cfg.OnRecover = func(i Incident) { log.ended = append(log.ended, i) }
	w, err := NewWatchdog(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return w, log
}

func TestWatchdogStaleness(t *testing.T) {
	ms := time.Millisecond
	type frame struct{ stamp, at time.Duration } // capture stamp and arrival, relative to t0
	tests := []struct {
		name    string
		timeout time.Duration
		frames  []frame // nil = no frame at all
		checkAt time.Duration
		wantOK  bool
		wantWhy string
	}{
		{"no frame yet", 0, nil, 0, false, "no frame received yet"},
		{"fresh frame", 0, []frame{{0, 0}}, 50 * ms, true, ""},
		{"exactly at the timeout", 0, []frame{{0, 0}}, 200 * ms, true, ""},
		{"just past the default timeout", 0, []frame{{0, 0}}, 200*ms + 1, false, "is 200.000001ms old (timeout 200ms)"},
		{"custom timeout", 50 * ms, []frame{{0, 0}}, 60 * ms, false, "timeout 50ms"},
		{"newest stamp counts, not the last delivered", 0, []frame{{300 * ms, 300 * ms}, {100 * ms, 300 * ms}}, 450 * ms, true, ""},
		{"old frame delivered late does not refresh", 0, []frame{{0, 0}, {-time.Second, 10 * ms}}, 250 * ms, false, "the last frame was dropped: its stamp is 1.01s old"},
		{"frame taken late counts from its stamp", 0, []frame{{0, 150 * ms}}, 210 * ms, false, "210ms old"},
		{"stamp slightly ahead of the clock is tolerated", 0, []frame{{100 * ms, 0}}, 0, true, ""},
		// A camera clock 190 ms ahead: the frame counts from when it was
		// taken, so the command dies Timeout after that, not 190 ms later.
		{"stamp ahead counts from its arrival", 0, []frame{{190 * ms, 0}}, 250 * ms, false, "250ms old"},
		{"stamp far ahead of the clock is stale", 0, []frame{{time.Hour, 0}}, 0, false, "no fresh frame yet; the last frame was dropped: its stamp is 1h0m0s ahead of the clock"},
		{"stamp 0 (unset) is stale", 0, []frame{{-t0.Sub(time.Unix(0, 0)), 0}}, 0, false, "no fresh frame yet; the last frame was dropped"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, log := newLoggedWatchdog(t, WatchdogConfig{Timeout: tt.timeout})
			for _, f := range tt.frames {
				w.Fresh(t0.Add(f.stamp), t0.Add(f.at))
			}
			ok, why := w.Check(t0.Add(tt.checkAt))
			if ok != tt.wantOK || !strings.Contains(why, tt.wantWhy) {
				t.Fatalf("Check = %v %q, want %v %q", ok, why, tt.wantOK, tt.wantWhy)
			}
			wantStale := uint64(0)
			if !tt.wantOK {
				wantStale = 1
				if !strings.HasPrefix(why, "stale:") {
					t.Errorf("reason %q does not start with its class", why)
				}
			}
			if c := w.Counts(); c != (IncidentCounts{Stale: wantStale}) || len(log.started) != int(wantStale) {
				t.Fatalf("counts %+v, %d incidents logged; want %d stale", c, len(log.started), wantStale)
			}
		})
	}
}

// TestWatchdogZeroesStaleOutputWithinTimeout runs the agent's output path
// at 100 Hz: frames flow at 30 Hz, then stop; the output must be zero from
// the first check more than Timeout after the last frame.
func TestWatchdogZeroesStaleOutputWithinTimeout(t *testing.T) {
	w, log := newLoggedWatchdog(t, WatchdogConfig{})
	moving := Twist{0.5, 0.1}
	lastFrame := t0
	for now := t0; now.Before(t0.Add(2 * time.Second)); now = now.Add(10 * time.Millisecond) {
		if now.Before(t0.Add(time.Second)) && now.Sub(lastFrame) >= 33*time.Millisecond || now == t0 {
			lastFrame = now
			w.Fresh(now, now)
		}
		out := w.Output(now, moving, nil)
		late := now.Sub(lastFrame) > w.Timeout()
		if late && !out.IsZero() {
			t.Fatalf("at %v, %v after the last frame: output %+v, want zero", now.Sub(t0), now.Sub(lastFrame), out)
		}
		if !late && out != moving {
			t.Fatalf("at %v with a fresh frame: output %+v, want %+v", now.Sub(t0), out, moving)
		}
	}
	if len(log.started) != 1 || w.Counts().Stale != 1 {
		t.Fatalf("%d incidents logged, counts %+v; want exactly one stale incident", len(log.started), w.Counts())
	}
}

func TestWatchdogStageFailure(t *testing.T) {
	errInfer := errors.New("session run failed")
	errNaN := fmt.Errorf("infer output: %w", ErrNonFinite)
	tests := []struct {
		name        string
		stage       string
		err         error
		isNonFinite func(error) bool
		want        IncidentCounts
		wantWhy     string
	}{
		{"plain error", "infer", errInfer, nil, IncidentCounts{StageFailure: 1}, `stage_failure: stage "infer" failed: session run failed`},
		{"wrapped planner.ErrNonFinite", "plan", errNaN, nil, IncidentCounts{NonFinite: 1}, `non_finite: stage "plan"`},
		{"custom classifier", "infer", errInfer, func(err error) bool { return errors.Is(err, errInfer) }, IncidentCounts{NonFinite: 1}, "non_finite"},
		{"nil error still fails", "voxel", nil, nil, IncidentCounts{StageFailure: 1}, `stage "voxel" failed`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, log := newLoggedWatchdog(t, WatchdogConfig{IsNonFinite: tt.isNonFinite})
			w.Fresh(t0, t0)
			if ok, _ := w.Check(t0); !ok {
				t.Fatal("setup: fresh frame not ok")
			}
			w.Fail(tt.stage, tt.err)
			ok, why := w.Check(t0.Add(time.Millisecond))
			if ok || why != log.started[0].Detail || !strings.Contains(why, tt.wantWhy) {
				t.Fatalf("Check after Fail = %v %q, want false %q", ok, why, tt.wantWhy)
			}
			if got := w.Counts(); got != tt.want {
				t.Fatalf("counts %+v, want %+v", got, tt.want)
			}
			inc := log.started[0]
			if inc.Stage != tt.stage || inc.Err != tt.err || !inc.Start.Equal(t0.Add(time.Millisecond)) {
				t.Fatalf("incident %+v: want stage %q, err %v, start at the failing check", inc, tt.stage, tt.err)
			}
			if out := w.Output(t0.Add(2*time.Millisecond), Twist{1, 0}, nil); !out.IsZero() {
				t.Fatalf("output during a stage failure %+v, want zero", out)
			}
			// The same frame's stamp again does not clear the failure…
			w.Fresh(t0, t0)
			if ok, _ := w.Check(t0.Add(3 * time.Millisecond)); ok {
				t.Fatal("re-announcing the failed frame cleared the failure")
			}
			// …a newer frame does.
			w.Fresh(t0.Add(30*time.Millisecond), t0.Add(30*time.Millisecond))
			if ok, why := w.Check(t0.Add(31 * time.Millisecond)); !ok {
				t.Fatalf("newer frame did not clear the failure: %q", why)
			}
			if len(log.started) != 1 || len(log.ended) != 1 || !log.ended[0].End.Equal(t0.Add(31*time.Millisecond)) {
				t.Fatalf("started %d, ended %+v; want one incident that ended at the passing check", len(log.started), log.ended)
			}
		})
	}
}

func TestWatchdogOneLogPerIncident(t *testing.T) {
	w, log := newLoggedWatchdog(t, WatchdogConfig{})
	errX := errors.New("x")
	now := t0
	tick := func(d time.Duration) bool { now = now.Add(d); ok, _ := w.Check(now); return ok }

	// Startup: stale until the first frame — incident 1 (stale), checked many times.
	for range 10 {
		if tick(10 * time.Millisecond) {
			t.Fatal("ok before any frame")
		}
	}
	w.Fresh(now, now)
	if !tick(0) {
		t.Fatal("not ok with a fresh frame")
	}
	// A stage fails on several consecutive frames — incident 2 (stage failure).
	for range 5 {
		w.Fail("infer", errX)
		if tick(10 * time.Millisecond) {
			t.Fatal("ok after a failure")
		}
		w.Fresh(now, now)
		w.Fail("infer", errX) // the new frame fails too, before the next check
	}
	w.Fresh(now.Add(time.Millisecond), now.Add(time.Millisecond))
	if !tick(time.Millisecond) {
		t.Fatal("no recovery")
	}
	// Frames stop, then a NaN arrives while stale — still one incident (3, stale).
	for range 30 {
		tick(10 * time.Millisecond)
	}
	w.Fail("plan", ErrNonFinite)
	tick(10 * time.Millisecond)
	w.Fresh(now, now)
	tick(0)
	// Non-finite on a fresh frame — incident 4.
	w.Fresh(now.Add(time.Millisecond), now.Add(time.Millisecond))
	w.Fail("plan", ErrNonFinite)
	tick(time.Millisecond)
	w.Fresh(now.Add(time.Millisecond), now.Add(time.Millisecond))
	tick(time.Millisecond)

	want := IncidentCounts{Stale: 2, StageFailure: 1, NonFinite: 1}
	if got := w.Counts(); got != want {
		t.Fatalf("counts %+v, want %+v", got, want)
	}
	if len(log.started) != 4 || len(log.ended) != 4 {
		t.Fatalf("logged %d starts and %d ends, want 4 each", len(log.started), len(log.ended))
	}
	wantReasons := []Reason{ReasonStale, ReasonStageFailure, ReasonStale, ReasonNonFinite}
	for i, inc := range log.started {
		if inc.Reason != wantReasons[i] || log.ended[i].Reason != wantReasons[i] {
			t.Errorf("incident %d: reason %v (ended %v), want %v", i, inc.Reason, log.ended[i].Reason, wantReasons[i])
		}
	}
	if _, active := w.Active(); active {
		t.Fatal("incident still active at the end")
	}
}

// cruise is a planner and watchdog given a clear way straight ahead, one
// frame per 100 ms period, after 30 frames: cruising at full speed.
type cruise struct {
	p   *Planner
	w   *Watchdog
	log *incidentLog
	in  Input
	now time.Time
}

func newCruise(t *testing.T) *cruise {
	t.Helper()
	w, log := newLoggedWatchdog(t, WatchdogConfig{})
	c := &cruise{p: mustNew(t, Config{}), w: w, log: log, in: Input{Scores: scores(0, 0, 0, 0, 1, 0, 0, 0, 0)}, now: t0}
	var out Twist
	for range 30 {
		out = c.frame()
	}
	if out.LinearX != 1 {
		t.Fatalf("setup: cruising at %v, want 1", out.LinearX)
	}
	return c
}

// frame takes a fresh frame one period on, plans it and returns the output.
func (c *cruise) frame() Twist {
	c.now = c.now.Add(100 * time.Millisecond)
	c.w.Fresh(c.now, c.now)
	cmd, err := c.p.Plan(c.in, c.now)
	if err != nil {
		c.w.Fail("plan", err)
	}
	return c.w.Output(c.now, cmd, c.p)
}

// TestWatchdogResumeRampsFromRest: after an incident the planner starts
// from rest, so the first command after recovery is limited by MaxAccel.
func TestWatchdogResumeRampsFromRest(t *testing.T) {
	c := newCruise(t)
	p, w, in := c.p, c.w, c.in
	frame := c.frame
	var out Twist
	// Frames stop for a second while the planner keeps being asked (e.g. on
	// a timer with the last scores): output zero, planner reset each time.
	lastFrame, zeroed := c.now, 0
	for range 10 {
		c.now = c.now.Add(100 * time.Millisecond)
		now := c.now
		cmd, _ := p.Plan(in, now)
		out := w.Output(now, cmd, p)
		if now.Sub(lastFrame) > w.Timeout() {
			if !out.IsZero() {
				t.Fatalf("output %+v while stale", out)
			}
			zeroed++
		}
	}
	if zeroed != 8 {
		t.Fatalf("%d stale outputs, want 8", zeroed)
	}
	out = frame()
	if want := 0.05; out.LinearX != want { // 0.5 m/s² × one 100 ms period from rest
		t.Fatalf("first command after recovery %+v, want LinearX %v (ramp from rest)", out, want)
	}
	out = frame()
	if want := 0.10; out.LinearX != want {
		t.Fatalf("second command after recovery %+v, want LinearX %v", out, want)
	}
}

// TestWatchdogResumeAfterAGap: frames stop for a while and resume. The
// caller watched the gap with Check alone (a timer), so the planner was
// never reset; or nothing watched it, as no Check ran (the process did not
// run: SIGSTOP, docker pause, a VM stall) and no incident began. Either
// way the first Output after it must not pass a command planned from the
// speed before the gap.
func TestWatchdogResumeAfterAGap(t *testing.T) {
	for _, watched := range []bool{true, false} {
		t.Run(fmt.Sprintf("watched by Check %v", watched), func(t *testing.T) {
			c := newCruise(t)
			for range 10 { // a second without frames, on a 100 ms timer
				c.now = c.now.Add(100 * time.Millisecond)
				if watched {
					c.w.Check(c.now)
				}
			}
			got := []float64{c.frame().LinearX, c.frame().LinearX, c.frame().LinearX}
			if want := []float64{0, 0.05, 0.10}; got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
				t.Fatalf("speeds after the gap %v, want %v (one zero frame, then a ramp from rest)", got, want)
			}
			// One stale incident either way, begun and ended, counted.
			if len(c.log.started) != 1 || len(c.log.ended) != 1 || c.log.started[0].Reason != ReasonStale || c.w.Counts().Stale != 1 {
				t.Fatalf("incidents started %+v, ended %+v, counts %+v: want one stale incident", c.log.started, c.log.ended, c.w.Counts())
			}
			if !watched && !strings.Contains(c.log.started[0].Detail, "no check meanwhile") {
				t.Fatalf("unseen gap's detail %q does not say no check saw it", c.log.started[0].Detail)
			}
			// A gap of exactly the timeout is no incident: the ramp goes
			// on, by 0.5 m/s² over the 200 ms since the last frame.
			c.now = c.now.Add(c.w.Timeout() - 100*time.Millisecond)
			if got := c.frame().LinearX; got != 0.2 {
				t.Fatalf("speed after a gap of the timeout %v, want 0.2 (the ramp goes on)", got)
			}
		})
	}
}

func TestWatchdogOutputRejectsInvalidCommand(t *testing.T) {
	p := mustNew(t, Config{})
	w, log := newLoggedWatchdog(t, WatchdogConfig{})
	w.Fresh(t0, t0)
	if out := w.Output(t0, Twist{5, 0}, p); !out.IsZero() {
		t.Fatalf("over-limit command passed: %+v", out)
	}
	if ok, why := w.Check(t0); ok || !strings.Contains(why, `stage "output"`) {
		t.Fatalf("Check after an invalid command = %v %q, want an output-stage failure", ok, why)
	}
	if len(log.started) != 1 {
		t.Fatalf("%d incidents logged, want 1", len(log.started))
	}
}

func TestWatchdogConfigRejectsNegativeTimeout(t *testing.T) {
	_, err := NewWatchdog(WatchdogConfig{Timeout: -time.Second})
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "Timeout -1s") {
		t.Fatalf("err = %v, want ErrConfig naming Timeout -1s", err)
	}
}

func TestWatchdogCheckDoesNotAllocate(t *testing.T) {
	w, log := newLoggedWatchdog(t, WatchdogConfig{})
	now := t0
	healthy := testing.AllocsPerRun(1000, func() {
		now = now.Add(time.Millisecond)
		w.Fresh(now, now)
		if out := w.Output(now, Twist{0.5, 0}, nil); out.IsZero() {
			t.Fatal("healthy output zeroed")
		}
	})
	now = now.Add(time.Second) // starts an incident at the next check: that one may allocate
	w.Check(now)
	ongoing := testing.AllocsPerRun(1000, func() {
		now = now.Add(time.Millisecond)
		if out := w.Output(now, Twist{0.5, 0}, nil); !out.IsZero() {
			t.Fatal("stale output passed")
		}
	})
	if healthy != 0 || ongoing != 0 || len(log.started) != 1 {
		t.Fatalf("allocations per frame: %v healthy, %v during an incident (%d incidents); want 0, 0 (1)",
			healthy, ongoing, len(log.started))
	}
}

// TestWatchdogConcurrent exercises the documented concurrent use under -race:
// a subscriber goroutine calls Fresh, stages call Fail, an output loop calls
// Output. Counts must match the callbacks.
func TestWatchdogConcurrent(t *testing.T) {
	var mu sync.Mutex
	starts, ends := 0, 0
	w, err := NewWatchdog(WatchdogConfig{
		OnIncident: func(Incident) { mu.Lock(); starts++; mu.Unlock() },
		OnRecover:  func(Incident) { mu.Lock(); ends++; mu.Unlock() },
	})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	const n = 2000
	wg.Go(func() {
		for i := range n {
			w.Fresh(t0.Add(time.Duration(i)*time.Millisecond), t0.Add(time.Duration(i)*time.Millisecond))
		}
	})
	wg.Go(func() {
		for i := range n / 10 {
			w.Fail("infer", fmt.Errorf("frame %d", i))
		}
	})
	wg.Go(func() {
		for i := range n {
			if out := w.Output(t0.Add(time.Duration(i)*time.Millisecond), Twist{1, 0}, nil); !out.IsZero() && out != (Twist{1, 0}) {
				t.Errorf("output %+v", out)
			}
		}
	})
	wg.Wait()
	c := w.Counts()
	total := c.Stale + c.StageFailure + c.NonFinite
	_, active := w.Active()
	mu.Lock()
	defer mu.Unlock()
	if uint64(starts) != total || total == 0 {
		t.Fatalf("%d incidents logged, counts %+v", starts, c)
	}
	if want := starts; active {
		if ends != want-1 {
			t.Fatalf("%d starts, %d ends with one active", starts, ends)
		}
	} else if ends != want {
		t.Fatalf("%d starts, %d ends", starts, ends)
	}
}

// TestWatchdogOutputFrameJudgesTheFramesOwnAge: a command is never
// published from a frame older than Timeout, even while newer frames keep
// the stream fresh (a frame whose stages stalled, answered meanwhile by the
// agent's stall guard), and a camera clock ahead of ours does not stretch
// that: the frame counts from when it was taken.
func TestWatchdogOutputFrameJudgesTheFramesOwnAge(t *testing.T) {
	ms := time.Millisecond
	moving := Twist{0.5, 0.1}
	for _, tc := range []struct {
		name                string
		stamp, taken, outAt time.Duration // relative to t0
		newerAt             time.Duration // a newer fresh frame arrives here (0: none)
		want                Twist
	}{
		{"on time", 0, 0, 50 * ms, 0, moving},
		{"stages took longer than the timeout", 0, 0, 250 * ms, 0, Twist{}},
		{"stalled while newer frames flowed", 0, 0, 250 * ms, 240 * ms, Twist{}},
		{"camera clock 180 ms ahead, stalled", 180 * ms, 0, 250 * ms, 0, Twist{}},
		{"camera clock 180 ms ahead, on time", 180 * ms, 0, 50 * ms, 0, moving},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := mustNew(t, Config{})
			w, _ := newLoggedWatchdog(t, WatchdogConfig{})
			at, v := w.Fresh(t0.Add(tc.stamp), t0.Add(tc.taken))
			if v != FrameNewest || at.After(t0.Add(tc.taken)) {
				t.Fatalf("Fresh = %v, %v; want newest, at most the time it was taken", at, v)
			}
			if tc.newerAt != 0 {
				w.Fresh(t0.Add(tc.newerAt), t0.Add(tc.newerAt))
			}
			if _, err := p.Plan(Input{Scores: scores(0, 0, 0, 0, 1, 0, 0, 0, 0)}, t0); err != nil {
				t.Fatal(err)
			}
			if got := w.OutputFrame(t0.Add(tc.outAt), at, moving, p); got != tc.want {
				t.Fatalf("OutputFrame = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestWatchdogReasonNamesDroppedFramesMidIncident: a stale incident that
// began before any frame ("no frame received yet") went on saying so while
// frames arrived and were dropped for a clock 1 s ahead; Check's reason
// (the agent's /healthz) now names the dropped frames.
func TestWatchdogReasonNamesDroppedFramesMidIncident(t *testing.T) {
	w, log := newLoggedWatchdog(t, WatchdogConfig{})
	w.Check(t0) // the agent's tick before the camera is up
	for i := 1; i <= 30; i++ {
		now := t0.Add(time.Duration(i) * 33 * time.Millisecond)
		if _, v := w.Fresh(now.Add(time.Second), now); v != FrameStale {
			t.Fatal("a frame stamped 1 s ahead was fresh")
		}
		w.Check(now)
	}
	if ok, why := w.Check(t0.Add(time.Second)); ok || !strings.Contains(why, "its stamp is 1s ahead of the clock") {
		t.Fatalf("Check = %v %q; want it to name the dropped frames", ok, why)
	}
	if len(log.started) != 1 {
		t.Fatalf("%d incidents, want 1", len(log.started))
	}
}

// TestWatchdogClockSteppedBack: after the machine's clock steps back by an
// hour (frames and now both follow it), fresh frames keep the robot
// driving. The newest stamp, an hour ahead, used to win over every one of
// them: zero for the whole hour.
func TestWatchdogClockSteppedBack(t *testing.T) {
	ms := time.Millisecond
	moving := Twist{0.5, 0}
	p := mustNew(t, Config{})
	w, _ := newLoggedWatchdog(t, WatchdogConfig{})
	for k := range 30 {
		stamp := t0.Add(time.Duration(k) * 33 * ms)
		w.Fresh(stamp, stamp.Add(5*ms))
	}
	back := t0.Add(-time.Hour)
	for k := range 10 {
		stamp := back.Add(time.Duration(k) * 33 * ms)
		now := stamp.Add(5 * ms)
		at, v := w.Fresh(stamp, now)
		if v != FrameNewest {
			t.Fatalf("frame %d after the step: %v, want newest", k, v)
		}
		if _, err := p.Plan(Input{Scores: scores(0, 0, 0, 0, 1, 0, 0, 0, 0)}, now); err != nil {
			t.Fatal(err)
		}
		got := w.OutputFrame(now.Add(ms), at, moving, p)
		if k > 0 && got == (Twist{}) { // the first may be the incident's zero; the ramp starts after
			ok, reason := w.Check(now.Add(ms))
			t.Fatalf("frame %d after a 1 h backward clock step: zero command (Check %v %q)", k, ok, reason)
		}
	}
	// A frame from before the step is an hour ahead now: still refused.
	if _, v := w.Fresh(t0, back.Add(time.Second)); v != FrameStale {
		t.Fatal("a frame stamped before the step counted as fresh")
	}
}

// A stamp ahead of the clock counts from now, as a wall-clock time: with
// time.Now's monotonic reading kept, comparisons with it would ignore a
// wall-clock step, and the step-back rule could not fire.
func TestWatchdogClampedStampIsWallClock(t *testing.T) {
	w, _ := newLoggedWatchdog(t, WatchdogConfig{})
	now := time.Now()
	at, v := w.Fresh(now.Add(50*time.Millisecond).Round(0), now)
	if v != FrameNewest || !at.Equal(now) {
		t.Fatalf("Fresh = %v, %v; want newest at now", at, v)
	}
	if at != at.Round(0) {
		t.Fatalf("clamped time %v keeps a monotonic reading", at)
	}
}

// TestWatchdogFreshVerdicts: a fresh frame is planned only when it is newer
// than every frame before it, by its stamp as given. A frame older than the
// newest (a driver stamping out of order, two publishers on one topic), the
// same frame twice, and a frame the clamp to now would have moved ahead of
// a newer one are out of order: dropped, and they keep nothing alive.
func TestWatchdogFreshVerdicts(t *testing.T) {
	ms := time.Millisecond
	type frame struct{ stamp, at time.Duration } // relative to t0
	for _, tc := range []struct {
		name   string
		before []frame
		last   frame
		want   Freshness
	}{
		{"first frame", nil, frame{0, 0}, FrameNewest},
		{"next frame", []frame{{0, 0}}, frame{33 * ms, 34 * ms}, FrameNewest},
		{"older than the newest", []frame{{0, 0}, {66 * ms, 67 * ms}}, frame{33 * ms, 70 * ms}, FrameOutOfOrder},
		{"the same stamp again", []frame{{33 * ms, 34 * ms}}, frame{33 * ms, 40 * ms}, FrameOutOfOrder},
		// Both stamps are ahead of the clock, so both count from when they
		// were taken; the second is still the older frame.
		{"older, both ahead of the clock", []frame{{150 * ms, 0}}, frame{100 * ms, 5 * ms}, FrameOutOfOrder},
		{"newer, both ahead of the clock", []frame{{100 * ms, 0}}, frame{150 * ms, 5 * ms}, FrameNewest},
		{"too old", []frame{{0, 0}}, frame{-time.Second, 10 * ms}, FrameStale},
		{"clock stepped back an hour", []frame{{0, 0}}, frame{-time.Hour, -time.Hour + ms}, FrameNewest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, _ := newLoggedWatchdog(t, WatchdogConfig{})
			for _, f := range tc.before {
				w.Fresh(t0.Add(f.stamp), t0.Add(f.at))
			}
			if _, got := w.Fresh(t0.Add(tc.last.stamp), t0.Add(tc.last.at)); got != tc.want {
				t.Fatalf("Fresh = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestWatchdogOutOfOrderFrameKeepsNothingAlive: frames older than the
// newest keep arriving and the newest one ages: the output goes to zero
// after Timeout as if they had not come, and a stage failure stays.
func TestWatchdogOutOfOrderFrameKeepsNothingAlive(t *testing.T) {
	ms := time.Millisecond
	w, _ := newLoggedWatchdog(t, WatchdogConfig{})
	w.Fresh(t0.Add(100*ms), t0.Add(100*ms))
	for i := range 10 {
		now := t0.Add(time.Duration(110+15*i) * ms)
		if _, v := w.Fresh(t0.Add(time.Duration(90-i)*ms), now); v != FrameOutOfOrder {
			t.Fatalf("frame %d: %v, want out_of_order", i, v)
		}
	}
	if ok, why := w.Check(t0.Add(301 * ms)); ok || !strings.Contains(why, "stale") {
		t.Fatalf("Check = %v %q after Timeout on out-of-order frames; want stale", ok, why)
	}
	w2, _ := newLoggedWatchdog(t, WatchdogConfig{})
	w2.Fresh(t0.Add(100*ms), t0.Add(100*ms))
	w2.Fail("infer", errors.New("boom"))
	w2.Fresh(t0.Add(50*ms), t0.Add(110*ms))
	if ok, why := w2.Check(t0.Add(120 * ms)); ok || !strings.Contains(why, "boom") {
		t.Fatalf("Check = %v %q; an out-of-order frame cleared the failure", ok, why)
	}
}

// TestWatchdogWallClockStepBackDoesNotExtendTheCommand: frames stop and the
// wall clock steps back meanwhile (NTP, an RTC corrected after boot). By
// the wall clock alone the newest frame looks younger than it is, and the
// last command would stand for Timeout plus the step. The monotonic clock
// bounds its age from below.
func TestWatchdogWallClockStepBackDoesNotExtendTheCommand(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name      string
		ageAtTake time.Duration // the frame's age when Fresh took it
		elapsed   time.Duration // monotonic time from Fresh to Check
		step      time.Duration // wall-clock step back meanwhile
		wantOK    bool
		wantWhy   string
	}{
		{"no step, within the timeout", 0, 150 * ms, 0, true, ""},
		{"no step, past the timeout", 0, 250 * ms, 0, false, "250ms old"},
		{"step back 100 ms, past the timeout by the monotonic clock", 0, 250 * ms, 100 * ms, false, "250ms old"},
		{"step back, its age when taken counts", 120 * ms, 100 * ms, 100 * ms, false, "220ms old"},
		{"step back, within the timeout either way", 50 * ms, 100 * ms, 100 * ms, true, ""},
		{"step forward stops it early (wall age)", 0, 50 * ms, -200 * ms, false, "250ms old"},
		// Past the frame: the clock stepped back further than the frame's
		// age; Check says so ("ahead of the clock"), and the step-back rule
		// lets the next frame in.
		{"step back past the frame", 0, 50 * ms, 300 * ms, false, "ahead of the clock"},
		// Stepped back past the frame by less than the tolerance: the wall
		// age is negative but above −Timeout, which Check let through
		// until the wall clock caught up with the frame (up to twice the
		// period), and a stale incident "recovered" meanwhile.
		{"step back past the frame, monotonic age over the timeout", 0, 250 * ms, 300 * ms, false, "250ms old"},
		{"step back past the frame, just under twice the period", 0, 399 * ms, 400 * ms, false, "399ms old"},
		{"step back 1 s, long after the frame", 0, 1100 * ms, 1900 * ms, false, "1.1s old"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mono := &fakeMonotonic{now: time.Hour}
			w, log := newLoggedWatchdog(t, WatchdogConfig{Monotonic: mono.read})
			if _, v := w.Fresh(t0.Add(-tt.ageAtTake), t0); v != FrameNewest {
				t.Fatalf("Fresh: %v", v)
			}
			mono.advance(tt.elapsed)
			ok, why := w.Check(t0.Add(tt.elapsed - tt.step))
			if ok != tt.wantOK || !strings.Contains(why, tt.wantWhy) {
				t.Fatalf("Check = %v %q; want %v containing %q", ok, why, tt.wantOK, tt.wantWhy)
			}
			if out := w.Output(t0.Add(tt.elapsed-tt.step), Twist{0.5, 0}, nil); (out != Twist{}) != tt.wantOK {
				t.Fatalf("Output = %+v with Check %v", out, ok)
			}
			if !tt.wantOK && len(log.started) != 1 {
				t.Fatalf("%d incidents started, want 1", len(log.started))
			}
		})
	}
}

// An incident no Check saw (the process was paused) is found by the
// monotonic clock too, when the wall clock stepped back during the pause.
func TestWatchdogUnseenIncidentAcrossAClockStepBack(t *testing.T) {
	ms := time.Millisecond
	mono := &fakeMonotonic{}
	w, log := newLoggedWatchdog(t, WatchdogConfig{Monotonic: mono.read})
	w.Fresh(t0, t0)
	mono.advance(500 * ms) // paused for 500 ms; the wall clock stepped back 400 ms meanwhile
	next := t0.Add(100 * ms)
	if _, v := w.Fresh(next, next); v != FrameNewest {
		t.Fatalf("Fresh after the pause: %v", v)
	}
	if len(log.started) != 1 || len(log.ended) != 1 || !strings.Contains(log.started[0].Detail, "no frame for 500ms") {
		t.Fatalf("incidents started %+v ended %+v; want one unseen stale incident of 500ms", log.started, log.ended)
	}
	if out := w.Output(next, Twist{0.5, 0}, mustNew(t, Config{})); out != (Twist{}) {
		t.Fatalf("first Output after an unseen incident = %+v, want zero", out)
	}
}

// The default clock is the real monotonic one: with the wall clock standing
// still (as if stepped back by as much as time passed), the frame still
// goes stale.
func TestWatchdogDefaultClockIsMonotonic(t *testing.T) {
	w, err := NewWatchdog(WatchdogConfig{Timeout: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	w.Fresh(t0, t0)
	time.Sleep(20 * time.Millisecond)
	if ok, why := w.Check(t0); ok || !strings.Contains(why, "old (timeout 5ms)") {
		t.Fatalf("Check after 20 ms by the monotonic clock, wall clock still = %v %q; want stale", ok, why)
	}
}

// SetStop's function runs once per incident, before OnIncident, from
// whichever call finds the incident: Check (stale, a failed stage),
// Output, and Fresh for a gap no Check saw. So the agent's zero goes out
// before a log line that may block.
func TestWatchdogStopsBeforeTheIncidentIsLogged(t *testing.T) {
	var events []string
	w, err := NewWatchdog(WatchdogConfig{
		Monotonic:  (&fakeMonotonic{}).read,
		OnIncident: func(i Incident) { events = append(events, "incident "+i.Reason.String()) },
		OnRecover:  func(i Incident) { events = append(events, "recover") },
	})
	if err != nil {
		t.Fatal(err)
	}
	w.SetStop(func(now time.Time) { events = append(events, "stop "+now.Sub(t0).String()) })
	now := t0
	w.Check(now) // no frame yet
	w.Check(now.Add(time.Millisecond))
	w.Fresh(now, now)
	w.Check(now) // recovers
	w.Fail("infer", errors.New("x"))
	now = now.Add(10 * time.Millisecond)
	w.Output(now, Twist{LinearX: 0.5}, nil) // the failure's incident, from Output
	w.Fresh(now, now)
	w.Check(now)
	// Frames stop and no Check runs; the next frame finds the gap.
	now = now.Add(time.Second)
	w.Fresh(now, now)
	want := []string{"stop 0s", "incident stale", "recover", "stop 10ms", "incident stage_failure", "recover",
		"stop 1.01s", "incident stale", "recover"}
	if !slices.Equal(events, want) {
		t.Fatalf("events %q, want %q", events, want)
	}
	w.SetStop(nil)
	w.Fail("infer", errors.New("x"))
	w.Check(now)
	if got := events[len(events)-1]; got != "incident stage_failure" {
		t.Fatalf("after SetStop(nil) the last event is %q, want the incident alone", got)
	}
}
