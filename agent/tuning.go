package agent

import (
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/zerohop/zerohop/planner"
)

// PlannerSetting is one planner setting users tune: by flag (--max-speed)
// and ROS parameter (max_speed) at start, and while the agent runs through
// PlannerTuning (ros2 param set).
type PlannerSetting struct {
	// Name is the ROS parameter's name; the flag's is the same with '-'
	// for '_'.
	Name  string
	Usage string
	// Bool settings take true/false; the others a number in [min, max]
	// (above min where minOpen), in unit.
	Bool     bool
	unit     string
	min, max float64
	minOpen  bool
	num      func(*planner.Config) *float64
	flag     func(*planner.Config) *bool
}

// minAbove is the lower end a setting that must be above its minimum
// advertises: a FloatingPointRange is inclusive, and rqt_reconfigure
// offers its ends.
const minAbove = 0.001

// Range is a numeric setting's values as an inclusive range, for
// rqt_reconfigure: its bounds, the lower one raised by 0.001 where it
// is excluded; ok is false for a Bool setting.
func (s PlannerSetting) Range() (from, to float64, ok bool) {
	from = s.min
	if s.minOpen {
		from += minAbove
	}
	return from, s.max, !s.Bool
}

// Flag is the setting's flag name.
func (s PlannerSetting) Flag() string {
	b := []byte(s.Name)
	for i, c := range b {
		if c == '_' {
			b[i] = '-'
		}
	}
	return string(b)
}

// plannerSettings is every setting, in the order --help lists them.
// Upper bounds catch unit mix-ups (cm/s for m/s, degrees for radians);
// zero is refused where planner.Config would read it as "the default".
var plannerSettings = []PlannerSetting{
	{Name: "max_speed", unit: "m/s", min: 0, max: 20, minOpen: true, num: func(c *planner.Config) *float64 { return &c.MaxSpeed },
		Usage: "forward speed limit of cmd_vel's linear.x, in `m/s`, above 0 and up to 20; the agent never reverses"},
	{Name: "max_yaw_rate", unit: "rad/s", min: 0, max: 10, minOpen: true, num: func(c *planner.Config) *float64 { return &c.MaxYawRate },
		Usage: "limit of |angular.z|, in `rad/s`, above 0 and up to 10"},
	{Name: "max_accel", unit: "m/s²", min: 0, max: 20, minOpen: true, num: func(c *planner.Config) *float64 { return &c.MaxAccel },
		Usage: "how fast linear.x may grow, in `m/s²`, above 0 and up to 20"},
	{Name: "max_decel", unit: "m/s²", min: 0, max: 50, minOpen: true, num: func(c *planner.Config) *float64 { return &c.MaxDecel },
		Usage: "how fast linear.x may fall when the planner slows or stops the robot, in `m/s²`, above 0 and up to 50 (the watchdog's zero is not ramped: it stops at once)"},
	{Name: "max_yaw_accel", unit: "rad/s²", min: 0, max: 50, minOpen: true, num: func(c *planner.Config) *float64 { return &c.MaxYawAccel },
		Usage: "how fast angular.z may change, in `rad/s²`, above 0 and up to 50"},
	{Name: "stop_distance", unit: "m", min: 0, max: 100, minOpen: true, num: func(c *planner.Config) *float64 { return &c.StopDistance },
		Usage: "stop (or turn in place, --turn-in-place) when the chosen direction's clearance is below this, in `metres`, above 0 and below --slow-distance"},
	{Name: "slow_distance", unit: "m", min: 0, max: 100, minOpen: true, num: func(c *planner.Config) *float64 { return &c.SlowDistance },
		Usage: "full speed from this clearance on, in `metres`; speed ramps from 0 at --stop-distance up to --max-speed here; above --stop-distance, up to 100"},
	{Name: "turn_in_place", Bool: true, flag: func(c *planner.Config) *bool { return &c.TurnInPlace },
		Usage: "when the best direction is closer than --stop-distance, turn toward it in place instead of standing still"},
	{Name: "heading_gain", unit: "1/s", min: 0, max: 20, minOpen: true, num: func(c *planner.Config) *float64 { return &c.HeadingGain },
		Usage: "yaw rate per radian of the chosen direction's heading, in `rad/s per rad`, above 0 and up to 20 (limited by --max-yaw-rate)"},
	{Name: "smoothing", min: 0, max: 0.99, num: func(c *planner.Config) *float64 { return &c.Smoothing },
		Usage: "`weight` of the previous command in a per-frame low-pass toward a moving target, 0 (off) to 0.99; the speed is smoothed only while it rises: stopping and slowing down are never delayed"},
	{Name: "min_score", min: -100, max: 100, num: func(c *planner.Config) *float64 { return &c.MinScore },
		Usage: "stop when the best direction's model `score` is below this (the reference model: a score at or below 0 is a hazard or no clearance), -100 to 100"},
	{Name: "tie_band", min: 0, max: 100, num: func(c *planner.Config) *float64 { return &c.TieBand },
		Usage: "scores within this `band` of the best count as equal and, of those the robot may drive into (score at least --min-score, clearance at least --stop-distance), the direction closest to straight ahead wins, so model noise does not make the robot weave; 0 to 100"},
}

// PlannerSettings returns the planner's tunable settings. A fresh slice
// each call.
func PlannerSettings() []PlannerSetting { return append([]PlannerSetting(nil), plannerSettings...) }

func plannerSetting(name string) (PlannerSetting, bool) {
	for _, s := range plannerSettings {
		if s.Name == name {
			return s, true
		}
	}
	return PlannerSetting{}, false
}

// check says why v is out of the setting's range. The caller's error
// names the setting and the value (the flag package's, params.Set's).
func (s PlannerSetting) check(v float64) error {
	unit := ""
	if s.unit != "" {
		unit = " " + s.unit
	}
	lower := "from " + strconv.FormatFloat(s.min, 'g', -1, 64)
	if s.minOpen {
		lower = "above " + strconv.FormatFloat(s.min, 'g', -1, 64)
	}
	want := fmt.Sprintf("%s up to %v%s", lower, s.max, unit)
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return fmt.Errorf("want a finite number, %s", want)
	case s.minOpen && v <= s.min, v < s.min, v > s.max:
		return fmt.Errorf("want %s", want)
	}
	return nil
}

// PlannerTuning holds the planner's settings: set from flags before the
// agent starts, and changed while it runs (ros2 param set); the pipeline
// takes a change before its next Plan. Safe for concurrent use; the zero
// value is not: use NewPlannerTuning.
type PlannerTuning struct {
	mu  sync.Mutex
	cfg planner.Config // accepted settings, defaults filled in, no sectors
	// pending is the newest accepted settings the pipeline has not yet
	// taken (nil: none); swapped out, so taking one never allocates.
	pending atomic.Pointer[planner.Config]
}

// NewPlannerTuning returns the planner's default settings.
func NewPlannerTuning() *PlannerTuning {
	c := planner.Config{}.WithDefaults()
	c.SectorHeadingsDeg = nil
	return &PlannerTuning{cfg: c}
}

// Config returns the settings (no sectors: those are the model's).
func (t *PlannerTuning) Config() planner.Config {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.cfg
}

// PlannerValue is a new value for the setting Name: Number, or Bool for
// a Bool setting.
type PlannerValue struct {
	Name   string
	Number float64
	Bool   bool
}

// SetNumber sets a numeric setting by name if it is in range and the
// settings stay consistent (stop_distance below slow_distance); else it
// returns why, naming neither the setting nor the value (the caller
// does), and changes nothing.
func (t *PlannerTuning) SetNumber(name string, v float64) error {
	if s, ok := plannerSetting(name); !ok || s.Bool {
		return fmt.Errorf("no numeric planner setting %q", name)
	}
	return t.set([]PlannerValue{{Name: name, Number: v}}, false)
}

// SetBool sets a true/false setting by name.
func (t *PlannerTuning) SetBool(name string, v bool) error {
	if s, ok := plannerSetting(name); !ok || !s.Bool {
		return fmt.Errorf("no true/false planner setting %q", name)
	}
	return t.set([]PlannerValue{{Name: name, Bool: v}}, false)
}

// SetAll sets every value together or none: each must be in range, and
// the settings they leave consistent, whatever their order (raising
// stop_distance and slow_distance past each other's old values works).
// The pipeline takes them as one change. Errors name the setting.
func (t *PlannerTuning) SetAll(values ...PlannerValue) error {
	return t.set(values, true)
}

func (t *PlannerTuning) set(values []PlannerValue, named bool) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	next := t.cfg
	for _, v := range values {
		s, ok := plannerSetting(v.Name)
		switch {
		case !ok:
			return fmt.Errorf("no planner setting %q", v.Name)
		case s.Bool:
			*s.flag(&next) = v.Bool
			continue
		}
		if err := s.check(v.Number); err != nil {
			if named {
				return fmt.Errorf("%s %v: %w", v.Name, v.Number, err)
			}
			return err
		}
		*s.num(&next) = v.Number
	}
	if err := distancesOrdered(next, values, named); err != nil {
		return err
	}
	if err := next.Validate(); err != nil { // the ranges above keep it valid
		return err
	}
	t.cfg = next
	t.pending.Store(&next)
	return nil
}

// distancesOrdered says why c's stop and slow distances are the wrong
// way round: for one value, from the point of view of the setting it
// changed; else naming both.
func distancesOrdered(c planner.Config, values []PlannerValue, named bool) error {
	if c.StopDistance < c.SlowDistance {
		return nil
	}
	switch {
	case named || len(values) != 1:
		return fmt.Errorf("stop_distance %v m must be below slow_distance %v m", c.StopDistance, c.SlowDistance)
	case values[0].Name == "slow_distance":
		return fmt.Errorf("must exceed stop_distance (%v m); lower stop_distance first, or set both in one set_parameters_atomically call", c.StopDistance)
	}
	return fmt.Errorf("must be below slow_distance (%v m); raise slow_distance first, or set both in one set_parameters_atomically call", c.SlowDistance)
}

// Check says whether the settings as a whole are consistent, naming the
// flags: for after the flags are parsed, in whatever order they came.
func (t *PlannerTuning) Check() error {
	c := t.Config()
	if c.StopDistance >= c.SlowDistance {
		return fmt.Errorf("--stop-distance %v m: must be below --slow-distance (%v m)", c.StopDistance, c.SlowDistance)
	}
	return nil
}

// take returns the settings changed since the last take, if any.
// Pipeline goroutine; does not allocate.
func (t *PlannerTuning) take() (*planner.Config, bool) {
	if t == nil {
		return nil, false
	}
	c := t.pending.Swap(nil)
	return c, c != nil
}

// FlagValue is the setting's flag: a flag.Getter whose value is a float64
// (a bool for Bool settings), so that a ROS parameter made from it has
// the right type. Setting it checks the range only; call Check once the
// flags are parsed.
func (t *PlannerTuning) FlagValue(name string) (*PlannerFlag, error) {
	s, ok := plannerSetting(name)
	if !ok {
		return nil, fmt.Errorf("no planner setting %q", name)
	}
	return &PlannerFlag{t: t, s: s}, nil
}

// PlannerFlag is a flag.Value for one planner setting (FlagValue).
type PlannerFlag struct {
	t *PlannerTuning
	s PlannerSetting
}

// Get returns the setting's value: a float64, or a bool.
func (f *PlannerFlag) Get() any {
	if f == nil || f.t == nil {
		return nil
	}
	c := f.t.Config()
	if f.s.Bool {
		return *f.s.flag(&c)
	}
	return *f.s.num(&c)
}

func (f *PlannerFlag) String() string {
	if f == nil || f.t == nil { // the flag package's zero value
		return ""
	}
	switch v := f.Get().(type) {
	case bool:
		return strconv.FormatBool(v)
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	return ""
}

// Set checks the value's range and stores it; consistency between
// settings waits for PlannerTuning.Check, as flags come in any order.
func (f *PlannerFlag) Set(text string) error {
	var change func(*planner.Config)
	if f.s.Bool {
		v, err := strconv.ParseBool(text)
		if err != nil {
			return fmt.Errorf("%q: want true or false", text)
		}
		change = func(c *planner.Config) { *f.s.flag(c) = v }
	} else {
		v, err := strconv.ParseFloat(text, 64)
		if err != nil {
			return fmt.Errorf("%q: want a number", text)
		}
		if err := f.s.check(v); err != nil {
			return err
		}
		change = func(c *planner.Config) { *f.s.num(c) = v }
	}
	// Before the agent runs: nothing to hand the pipeline (pending).
	f.t.mu.Lock()
	defer f.t.mu.Unlock()
	change(&f.t.cfg)
	return nil
}

// IsBoolFlag lets a Bool setting's flag stand alone (--turn-in-place).
func (f *PlannerFlag) IsBoolFlag() bool { return f.s.Bool }

// logPlannerSettings writes c's tunable settings on one line.
func logPlannerSettings(log *zap.Logger, msg string, c planner.Config) {
	fields := make([]zap.Field, 0, len(plannerSettings))
	for _, s := range plannerSettings {
		if s.Bool {
			fields = append(fields, zap.Bool(s.Name, *s.flag(&c)))
		} else {
			fields = append(fields, zap.Float64(s.Name, *s.num(&c)))
		}
	}
	log.Info(msg, fields...)
}

// brakingShortfall says, when c's limits cannot stop the robot in time,
// by how much; "" when they can. The planner slows the robot from
// MaxSpeed at SlowDistance of clearance to 0 at StopDistance, but never
// faster than MaxDecel: from MaxSpeed that takes MaxSpeed²/(2·MaxDecel)
// metres. Longer than the ramp, the robot passes StopDistance still
// moving; longer than SlowDistance, it can reach the obstacle (before
// counting the frames' latency). The limits stay as set: a robot that
// brakes no harder is better known than hidden, so this warns.
func brakingShortfall(c planner.Config) string {
	// The four fields' defaults, without WithDefaults' copy of the
	// sectors: the status is built every period.
	or := func(v *float64, def float64) {
		if *v == 0 {
			*v = def
		}
	}
	or(&c.MaxSpeed, planner.DefaultMaxSpeed)
	or(&c.MaxDecel, planner.DefaultMaxDecel)
	or(&c.StopDistance, planner.DefaultStopDistance)
	or(&c.SlowDistance, planner.DefaultSlowDistance)
	need := c.MaxSpeed * c.MaxSpeed / (2 * c.MaxDecel)
	ramp := c.SlowDistance - c.StopDistance
	switch {
	case need > c.SlowDistance:
		return fmt.Sprintf("at max_speed %g m/s and max_decel %g m/s² the robot needs %.2f m to stop, more than slow_distance (%g m), where it starts slowing: it can reach the obstacle; raise max_decel or slow_distance, or lower max_speed",
			c.MaxSpeed, c.MaxDecel, need, c.SlowDistance)
	case need > ramp:
		return fmt.Sprintf("at max_speed %g m/s and max_decel %g m/s² the robot needs %.2f m to stop, more than the %.2f m from slow_distance to stop_distance: it passes stop_distance still moving; raise max_decel or slow_distance, or lower max_speed",
			c.MaxSpeed, c.MaxDecel, need, ramp)
	}
	return ""
}

// warnBraking logs brakingShortfall's finding, if any.
func warnBraking(log *zap.Logger, c planner.Config) {
	if why := brakingShortfall(c); why != "" {
		log.Warn("planner: the limits cannot stop the robot in time: "+why, zap.Float64("max_speed", c.MaxSpeed),
			zap.Float64("max_decel", c.MaxDecel), zap.Float64("slow_distance", c.SlowDistance), zap.Float64("stop_distance", c.StopDistance))
	}
}
