package planner

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zerohop/zerohop/monotime"
)

// DefaultWatchdogTimeout is the default WatchdogConfig.Timeout.
const DefaultWatchdogTimeout = 200 * time.Millisecond

// Reason classifies an incident.
type Reason uint8

const (
	ReasonNone         Reason = iota
	ReasonStale               // no frame yet, or the newest frame is older than Timeout
	ReasonStageFailure        // a stage reported an error
	ReasonNonFinite           // a stage reported NaN/Inf (WatchdogConfig.IsNonFinite)
	numReasons
)

func (r Reason) String() string {
	switch r {
	case ReasonStale:
		return "stale"
	case ReasonStageFailure:
		return "stage_failure"
	case ReasonNonFinite:
		return "non_finite"
	}
	return "none"
}

// Incident is one continuous period during which the output was zeroed.
type Incident struct {
	Reason Reason
	Detail string    // human-readable cause, e.g. `stale: newest frame is 350ms old (timeout 200ms)`
	Stage  string    // the failing stage (stage failure, non-finite)
	Err    error     // the stage's error (stage failure, non-finite)
	Start  time.Time // the Check that saw it first
	End    time.Time // the Check that saw it over; zero while it lasts
}

// IncidentCounts counts incidents (not failing frames) by the reason that
// started them.
type IncidentCounts struct {
	Stale        uint64
	StageFailure uint64
	NonFinite    uint64
}

// WatchdogConfig tunes a Watchdog; the zero value is the default.
type WatchdogConfig struct {
	// Timeout: the output is zeroed when the newest fresh frame is older
	// than this, and a frame whose stamp is further than this from the
	// clock (either way) is not fresh. Default 200 ms.
	Timeout time.Duration
	// IsNonFinite classifies a Fail error as a non-finite incident. Default:
	// errors.Is(err, ErrNonFinite). The agent also matches infer.ErrNonFinite.
	IsNonFinite func(error) bool
	// OnIncident is called once when an incident starts, from the Check that
	// detects it, with no lock held: log it here. Optional.
	OnIncident func(Incident)
	// OnRecover is called once when an incident ends (End set), from the
	// Check that sees it over, with no lock held. Optional.
	OnRecover func(Incident)
	// Monotonic reads a clock that never steps, for the time elapsed
	// since the newest frame arrived: a wall-clock step back (NTP, an RTC
	// corrected after boot) while frames stop must not make the last
	// command outlive Timeout. Default: CLOCK_MONOTONIC (monotime.Now).
	// Tests inject a fake.
	Monotonic func() time.Duration
}

// Watchdog decides whether commands may reach the robot (design invariant
// 7): not before the first frame, not when the newest frame is older than
// Timeout, and not after a stage failure until a newer frame arrives. Its
// clocks are injected: wall-clock times, which are compared with frame
// stamps, come from the caller; the monotonic clock, which bounds a
// frame's age against wall-clock steps, from WatchdogConfig.Monotonic.
// Safe for concurrent
// use; Check, Fresh and Fail do not allocate except when an incident starts.
//
// Call order per frame: at, v := Fresh(stamp, now) when the frame is
// taken (drop it unless v is FrameNewest), Fail(stage, err) when any stage fails, and
// OutputFrame(now, at, …) just before publishing, after the frame's
// stages; Check between frames. A failure is cleared by the next fresh
// frame with a newer stamp; if that frame fails too, Fail must come before
// the next Check, or the incident ends and a new one starts.
//
// Frame stamps come from another process's clock (the camera's, or a ROS
// driver's header.stamp), which must agree with ours within Timeout.
// A stamp ahead of our clock counts as the time the frame was taken, so a
// camera clock ahead of ours cannot make a command outlive Timeout.
type Watchdog struct {
	timeout     time.Duration
	isNonFinite func(error) bool
	onIncident  func(Incident)
	onRecover   func(Incident)
	monotonic   func() time.Duration
	// stop (SetStop) stops the robot at an incident's start, before
	// onIncident, which may block (a log write to a full pipe).
	stop atomic.Pointer[func(now time.Time)]

	mu        sync.Mutex
	haveFrame bool
	newest    time.Time // newest fresh frame's time (Fresh's at); valid if haveFrame
	newestRaw time.Time // its stamp as given, which orders frames even when at was clamped
	// When the newest frame arrived, on the monotonic clock, and its age
	// then (now - at, >= 0): its age later is at least newestAge plus the
	// monotonic time since, whatever the wall clock did meanwhile.
	newestMono time.Duration
	newestAge  time.Duration
	refused    bool // a frame was not fresh since the newest fresh one
	refusedAge time.Duration
	refusedNew bool // refused since the incident's Detail was written
	failed     bool // a stage failed since the newest frame
	failReason Reason
	failStage  string
	failErr    error
	active     bool     // an incident is in progress
	incident   Incident // valid while active
	needReset  bool     // an incident started and no Output has reset a planner since
	counts     [numReasons]uint64
}

// NewWatchdog returns a Watchdog; cfg.Timeout < 0 is an error wrapping
// ErrConfig.
func NewWatchdog(cfg WatchdogConfig) (*Watchdog, error) {
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("%w: watchdog Timeout %v: must be > 0 (0 means the default %v)",
			ErrConfig, cfg.Timeout, DefaultWatchdogTimeout)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultWatchdogTimeout
	}
	if cfg.IsNonFinite == nil {
		cfg.IsNonFinite = func(err error) bool { return errors.Is(err, ErrNonFinite) }
	}
	if cfg.Monotonic == nil {
		cfg.Monotonic = func() time.Duration { return time.Duration(monotime.Now()) }
	}
	return &Watchdog{timeout: cfg.Timeout, isNonFinite: cfg.IsNonFinite,
		onIncident: cfg.OnIncident, onRecover: cfg.OnRecover, monotonic: cfg.Monotonic}, nil
}

// newestAgeAt is the newest frame's age at now (wall) and mono: the larger
// of its wall-clock age and its age by the monotonic clock, so that a
// wall-clock step back cannot make it younger. A step forward makes it
// older (the command stops early: the safe side). A wall age below zero
// (the clock stepped back past the frame) is returned as is, for Check's
// "ahead of the clock" verdict, unless the monotonic age is past Timeout:
// then that, or a step back by more than the frame's age would keep the
// command until the wall clock caught up with the frame. Called with w.mu
// held, haveFrame true.
func (w *Watchdog) newestAgeAt(now time.Time, mono time.Duration) time.Duration {
	wall := now.Sub(w.newest)
	byMono := w.newestAge + mono - w.newestMono
	if wall < 0 && byMono <= w.timeout {
		return wall
	}
	return max(wall, byMono)
}

// Timeout returns the effective timeout.
func (w *Watchdog) Timeout() time.Duration { return w.timeout }

// Freshness is Fresh's verdict on a frame.
type Freshness uint8

const (
	// FrameStale: the stamp is more than Timeout from now, either way.
	// Drop the frame.
	FrameStale Freshness = iota
	// FrameNewest: fresh, and newer than every frame seen. Plan it.
	FrameNewest
	// FrameOutOfOrder: fresh, but its stamp is not newer than the newest
	// frame's (a driver that stamps out of order, two publishers on one
	// topic, a frame delivered twice). Drop it: planning it would act on
	// older data than the command already sent, and it must not keep the
	// command alive, so it changes nothing in the watchdog.
	FrameOutOfOrder
)

func (f Freshness) String() string {
	switch f {
	case FrameStale:
		return "stale"
	case FrameNewest:
		return "newest"
	case FrameOutOfOrder:
		return "out_of_order"
	}
	return "Freshness(" + strconv.Itoa(int(f)) + ")"
}

// Fresh reports a frame with capture time frameStamp, taken at now. It
// returns at, the frame's time as the watchdog counts it (frameStamp, or
// now when frameStamp is ahead of now), for OutputFrame; and its verdict.
// A frame is fresh when frameStamp lies within Timeout of now, either way.
// A frame that is not fresh changes nothing but Check's reason (it names
// the frame's age). A fresh frame whose stamp is newer than the newest
// one's becomes the newest (FrameNewest) and clears a pending stage
// failure; so does any fresh frame once the newest lies more than Timeout
// ahead of now, which only a clock stepped back (NTP, an RTC corrected
// after boot) can make: else every command would be zero until the clock
// caught up. Any other fresh frame is FrameOutOfOrder and changes nothing.
// Frames are ordered by their stamps as given, so that clamping two
// frames ahead of the clock to now cannot reorder them. A fresh frame
// after the newest had gone stale, seen by no Check meanwhile, ends an
// incident that began unseen: it is counted, OnIncident and OnRecover are
// called, and the next Output is zero and resets the planner.
func (w *Watchdog) Fresh(frameStamp, now time.Time) (at time.Time, verdict Freshness) {
	at = frameStamp
	if at.After(now) {
		// Wall clock only, as the stamps are: a monotonic reading kept
		// from time.Now would make later comparisons with newest ignore
		// a wall-clock step (the step-back rule below).
		at = now.Round(0)
	}
	age := now.Sub(frameStamp)
	verdict = FrameOutOfOrder
	var unseen Incident // a stale period no Check saw, over now
	w.mu.Lock()
	mono := w.monotonic()
	switch {
	case age > w.timeout || age < -w.timeout:
		verdict = FrameStale
		w.refused, w.refusedAge, w.refusedNew = true, age, true
	case !w.haveFrame || frameStamp.After(w.newestRaw) || w.newest.After(now.Add(w.timeout)):
		verdict = FrameNewest
		if w.haveFrame && !w.active && w.newestAgeAt(now, mono) > w.timeout {
			// The newest frame went stale and no Check saw it (this
			// process did not run: paused, frozen, starved; or the caller
			// was busy past the period): an incident that began and ended
			// unseen. The command from before it must not carry on.
			unseen = Incident{Reason: ReasonStale, Start: w.newest.Add(w.timeout), End: now,
				Detail: fmt.Sprintf("stale: no frame for %v, and no check meanwhile (was this process paused or starved?)", w.newestAgeAt(now, mono))}
			w.counts[ReasonStale]++
			w.needReset = true
		}
		w.haveFrame, w.newest, w.newestRaw = true, at, frameStamp
		w.newestMono, w.newestAge = mono, now.Sub(at)
		w.refused = false
		w.failed = false
		w.failErr = nil
	}
	w.mu.Unlock()
	if unseen.Reason != ReasonNone {
		w.stopRobot(now)
		if w.onIncident != nil {
			w.onIncident(unseen)
		}
		if w.onRecover != nil {
			w.onRecover(unseen)
		}
	}
	return at, verdict
}

// Fail reports that a stage failed. The output stays zero until a frame
// newer than the newest seen so far arrives. The first failure since the
// newest frame is kept as the cause. A nil err still counts as a failure.
func (w *Watchdog) Fail(stage string, err error) {
	reason := ReasonStageFailure
	if err != nil && w.isNonFinite(err) {
		reason = ReasonNonFinite
	}
	w.mu.Lock()
	if !w.failed {
		w.failed, w.failReason, w.failStage, w.failErr = true, reason, stage, err
	}
	w.mu.Unlock()
}

// Check reports whether commands may be published at now. When not, reason
// describes the incident in progress (the same string for its whole
// duration, so callers may log it when it changes). An incident starts at
// the first failing Check (OnIncident, count +1) and ends at the first
// passing one (OnRecover).
func (w *Watchdog) Check(now time.Time) (ok bool, reason string) {
	w.mu.Lock()
	cause := ReasonNone
	var age time.Duration
	switch {
	case w.failed:
		cause = w.failReason
	case !w.haveFrame:
		cause = ReasonStale
	default:
		age = w.newestAgeAt(now, w.monotonic())
		if age > w.timeout || age < -w.timeout {
			cause = ReasonStale
		}
	}

	if cause == ReasonNone {
		ended, wasActive := w.incident, w.active
		w.active, w.incident = false, Incident{}
		w.mu.Unlock()
		if wasActive && w.onRecover != nil {
			ended.End = now
			w.onRecover(ended)
		}
		return true, ""
	}

	started := !w.active
	if !started && cause == ReasonStale && w.refusedNew {
		// Frames arrive but are dropped: say so from now on (/healthz),
		// although the incident began before ("no frame received yet").
		w.incident.Detail = w.describe(cause, age)
	}
	w.refusedNew = false
	if started {
		w.active = true
		w.incident = Incident{Reason: cause, Start: now, Detail: w.describe(cause, age)}
		if cause != ReasonStale {
			w.incident.Stage, w.incident.Err = w.failStage, w.failErr
		}
		w.counts[cause]++
		w.needReset = true
	}
	inc := w.incident
	w.mu.Unlock()
	if started {
		w.stopRobot(now)
		if w.onIncident != nil {
			w.onIncident(inc)
		}
	}
	return false, inc.Detail
}

// SetStop makes stop the first thing done when an incident starts (or one
// that began unseen is found by Fresh), before OnIncident, by whichever
// call finds it: Check, Output, OutputFrame, Fresh, on whatever goroutine
// calls them. The agent publishes its zero command there, so that an
// OnIncident that blocks (a log line written to a full pipe, a stalled
// terminal) cannot keep the last moving command on the robot. stop must
// not call the Watchdog. Safe for concurrent use; nil removes it.
func (w *Watchdog) SetStop(stop func(now time.Time)) {
	if stop == nil {
		w.stop.Store(nil)
		return
	}
	w.stop.Store(&stop)
}

func (w *Watchdog) stopRobot(now time.Time) {
	if stop := w.stop.Load(); stop != nil {
		(*stop)(now)
	}
}

// describe builds an incident's Detail; called with w.mu held.
func (w *Watchdog) describe(cause Reason, age time.Duration) string {
	var why string
	switch {
	case cause == ReasonStageFailure:
		return fmt.Sprintf("stage_failure: stage %q failed: %v", w.failStage, w.failErr)
	case cause == ReasonNonFinite:
		return fmt.Sprintf("non_finite: stage %q produced NaN/Inf: %v", w.failStage, w.failErr)
	case !w.haveFrame && !w.refused:
		return "stale: no frame received yet"
	case !w.haveFrame:
		why = "stale: no fresh frame yet"
	case age < 0:
		why = fmt.Sprintf("stale: newest frame stamp is %v ahead of the clock (tolerance %v)", -age, w.timeout)
	default:
		why = fmt.Sprintf("stale: newest frame is %v old (timeout %v)", age, w.timeout)
	}
	switch {
	case !w.refused:
		return why
	case w.refusedAge < 0:
		return fmt.Sprintf("%s; the last frame was dropped: its stamp is %v ahead of the clock (tolerance %v; are the camera's and this machine's clocks synchronised?)", why, -w.refusedAge, w.timeout)
	}
	return fmt.Sprintf("%s; the last frame was dropped: its stamp is %v old (timeout %v; a clock behind ours, or a frame delivered late)", why, w.refusedAge, w.timeout)
}

// Output is the agent's output path: it returns cmd when Check(now) passes
// and cmd is finite and within p's limits, else the zero Twist. Whenever it
// zeroes the output it resets p (if not nil), so that once frames flow
// again the acceleration limits ramp the robot up from rest. An invalid cmd
// is also reported as a failure of stage "output".
//
// If an incident started and ended without any Output call seeing it (the
// caller only used Check meanwhile), cmd was planned from the command before
// the incident: the first passing Output then returns zero and resets p, and
// the next frame ramps up from rest.
func (w *Watchdog) Output(now time.Time, cmd Twist, p *Planner) Twist {
	ok, _ := w.Check(now)
	w.mu.Lock()
	missed := ok && w.needReset && p != nil
	if !ok || p != nil {
		w.needReset = false
	}
	w.mu.Unlock()
	if !ok || missed {
		if p != nil {
			p.Reset()
		}
		return Twist{}
	}
	limits := Limits{MaxSpeed: math.MaxFloat64, MaxReverse: math.MaxFloat64, MaxYawRate: math.MaxFloat64} // finiteness only
	if p != nil {
		limits = p.limits
	}
	if err := cmd.Valid(limits); err != nil {
		w.Fail("output", err)
		if p != nil {
			p.Reset()
		}
		return Twist{}
	}
	return cmd
}

// OutputFrame is Output for the command planned from one frame, whose time
// at Fresh returned: it is zero also when that frame is older than
// Timeout at now, whatever newer frames arrived meanwhile. So a frame
// whose stages ran longer than Timeout (a stall, answered meanwhile by a
// zero command) never publishes its late result, and p is reset.
func (w *Watchdog) OutputFrame(now, at time.Time, cmd Twist, p *Planner) Twist {
	if w.Late(now, at) {
		w.Output(now, Twist{}, p) // keeps Check's incident bookkeeping
		if p != nil {
			p.Reset()
		}
		return Twist{}
	}
	return w.Output(now, cmd, p)
}

// Late reports whether the frame whose time Fresh returned as at is older
// than Timeout at now: OutputFrame's rule, by which its command is zero.
func (w *Watchdog) Late(now, at time.Time) bool { return now.Sub(at) > w.timeout }

// Counts returns how many incidents started, by reason.
func (w *Watchdog) Counts() IncidentCounts {
	w.mu.Lock()
	defer w.mu.Unlock()
	return IncidentCounts{Stale: w.counts[ReasonStale], StageFailure: w.counts[ReasonStageFailure],
		NonFinite: w.counts[ReasonNonFinite]}
}

// Active returns the incident in progress, if any.
func (w *Watchdog) Active() (Incident, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.incident, w.active
}
