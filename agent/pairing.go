package agent

import (
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/zerohop/zerohop/planner"
)

// PairTuning is the pairing tolerance (--pair-tolerance) as it may change
// while the agent runs (ros2 param set /zerohop_agent pair_tolerance
// 0.05): the pipeline reads it for each cloud, so a change applies from
// the next cloud on. Make it with NewPairTuning once the flags are
// parsed. Safe for concurrent use.
type PairTuning struct {
	watchdog time.Duration
	inForce  atomic.Int64           // ns, PairToleranceFor applied
	unused   atomic.Pointer[string] // why it is not used; nil: used
}

// NewPairTuning starts at tolerance (0: the default) under a watchdog
// period (0: the planner's default), checked as Set checks it.
func NewPairTuning(tolerance, watchdog time.Duration) (*PairTuning, error) {
	t := &PairTuning{watchdog: orDefaultDuration(watchdog, planner.DefaultWatchdogTimeout)}
	if err := t.check(tolerance); err != nil {
		return nil, fmt.Errorf("--pair-tolerance %v: %w", tolerance, err)
	}
	t.inForce.Store(int64(PairToleranceFor(tolerance, t.watchdog)))
	return t, nil
}

// check is the rule for a tolerance: 0 (the default), or 1 ms up to half
// the watchdog period. A cloud waits up to the tolerance for its image,
// and its frame must still be fresh when planned: half the period leaves
// the stages the other half.
func (t *PairTuning) check(d time.Duration) error {
	if d != 0 && (d < time.Millisecond || d > t.watchdog/2) {
		return fmt.Errorf("want 1ms up to half the watchdog period, %v (--watchdog %v): a cloud waits up to this long for its image (0: the default, %v or half the watchdog period)",
			t.watchdog/2, t.watchdog, DefaultPairTolerance)
	}
	return nil
}

// Check reports whether Set would take seconds, and the tolerance in
// force it would give.
func (t *PairTuning) Check(seconds float64) (time.Duration, error) {
	if why := t.unused.Load(); why != nil {
		return 0, fmt.Errorf("pair_tolerance is not used: %s", *why)
	}
	if math.IsNaN(seconds) || seconds < 0 || seconds > 3600 {
		return 0, fmt.Errorf("pair_tolerance %v s: want seconds, 0.001 up to half the watchdog period, %v", seconds, t.watchdog/2)
	}
	d := time.Duration(math.Round(seconds * float64(time.Second)))
	if err := t.check(d); err != nil {
		return 0, fmt.Errorf("pair_tolerance %v s: %w", seconds, err)
	}
	return PairToleranceFor(d, t.watchdog), nil
}

// Set changes the tolerance to seconds (0: the default), from the next
// cloud on; it refuses what NewPairTuning refuses, and any change once
// the model turned out to take no image.
func (t *PairTuning) Set(seconds float64) error {
	d, err := t.Check(seconds)
	if err != nil {
		return err
	}
	t.inForce.Store(int64(d))
	return nil
}

// InForce is the tolerance in force.
func (t *PairTuning) InForce() time.Duration { return time.Duration(t.inForce.Load()) }

// notUsed makes Set refuse, saying why: a model without an image input
// pairs nothing.
func (t *PairTuning) notUsed(why string) { t.unused.Store(&why) }
