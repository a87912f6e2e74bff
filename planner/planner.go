package planner

import (
	"fmt"
	"math"
	"time"
)

// Input is one frame's model output.
type Input struct {
	// Scores holds one score per sector (len S), higher is better; index k
	// steers at Config.SectorHeadingsDeg[k]. Typically infer.Session.Scores().
	Scores []float32
	// Clearance optionally holds metres of free space per sector (len S);
	// nil or empty derives it from the score (Config.ScoreClearanceM).
	Clearance []float32
	// Stamp is the frame's capture time. Plan does not judge the age of a
	// frame; the Watchdog does (Watchdog.Fresh takes this stamp).
	Stamp time.Time
}

// Mode says why Plan chose its target.
type Mode uint8

const (
	ModeNone     Mode = iota // no plan since New/Reset, or the last Plan failed
	ModeCruise               // driving toward the best sector
	ModeBlocked              // best sector closer than StopDistance: stop (or turn in place)
	ModeLowScore             // best score below MinScore: stop
)

func (m Mode) String() string {
	switch m {
	case ModeCruise:
		return "cruise"
	case ModeBlocked:
		return "blocked"
	case ModeLowScore:
		return "low_score"
	}
	return "none"
}

// Decision records how the last Plan reached its command, for logs and
// tests. Sector is −1 when the last Plan failed or none ran yet.
type Decision struct {
	Sector     int
	HeadingRad float64
	Score      float64
	ClearanceM float64
	Mode       Mode
	Target     Twist         // before smoothing and acceleration limits
	Dt         time.Duration // the dt the limits used
}

// Planner turns per-sector scores into Twists. It keeps the previous
// command to apply smoothing and acceleration limits, so one Planner
// serves one command stream. Not safe for concurrent use.
type Planner struct {
	cfg        Config
	headingRad []float64 // per sector, radians, + left
	limits     Limits

	prev     Twist     // last command returned; within the limits of its time
	last     time.Time // now of the last Plan
	started  bool      // false after New/Reset: the next dt is cfg.Period
	decision Decision
}

// New returns a Planner for cfg (zero fields take defaults), or an error
// wrapping ErrConfig that lists every bad field.
func New(cfg Config) (*Planner, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	p := &Planner{cfg: cfg, limits: cfg.Limits(), headingRad: make([]float64, len(cfg.SectorHeadingsDeg))}
	for i, h := range cfg.SectorHeadingsDeg {
		p.headingRad[i] = h * math.Pi / 180
	}
	p.Reset()
	return p, nil
}

// Retune replaces the planner's settings from the next Plan on, keeping
// its sectors (c.SectorHeadingsDeg is ignored: the sectors are the
// model's outputs and their number cannot change) and its previous
// command, so the acceleration limits carry on from it. It returns an
// error wrapping ErrConfig, and changes nothing, if c is not valid.
//
// A lowered MaxSpeed or MaxYawRate caps the next command at once, even
// where that slows it faster than MaxDecel or MaxYawAccel allow: Plan's
// commands always lie within the current limits, which is what an
// operator who lowers them relies on. Retune allocates; call it when the
// settings change, not per frame.
func (p *Planner) Retune(c Config) error {
	c.SectorHeadingsDeg = p.cfg.SectorHeadingsDeg
	if err := c.Validate(); err != nil {
		return err
	}
	p.cfg = c.WithDefaults()
	p.limits = p.cfg.Limits()
	return nil
}

// Config returns the effective configuration (defaults filled in).
func (p *Planner) Config() Config { return p.cfg.WithDefaults() }

// Sectors returns S, the number of scores Plan expects.
func (p *Planner) Sectors() int { return len(p.headingRad) }

// Limits returns the bounds every command from Plan satisfies.
func (p *Planner) Limits() Limits { return p.limits }

// Previous returns the last command Plan returned (zero after New/Reset).
func (p *Planner) Previous() Twist { return p.prev }

// Decision returns how the last Plan chose its command.
func (p *Planner) Decision() Decision { return p.decision }

// Reset forgets the previous command: the next Plan starts from rest with
// dt = Config.Period, so acceleration limits ramp the robot up again. The
// Watchdog's output path calls it whenever it zeroes the output.
func (p *Planner) Reset() {
	p.prev = Twist{}
	p.last = time.Time{}
	p.started = false
	p.decision = Decision{Sector: -1}
}

// Resume makes t the previous command: the robot's, when the last ones
// planned never reached it (the agent's sink refused them). The next Plan
// steps from t by the acceleration limits over the time since the last
// Plan, so it neither jumps past t nor brakes from it harder than the
// limits allow.
func (p *Planner) Resume(t Twist) { p.prev = t }

// Plan returns the command for one frame at time now (the injected clock;
// only differences between successive calls matter).
//
// The result is always finite and within Limits, and differs from the
// previous command by at most MaxAccel·dt (speeding up), MaxDecel·dt
// (slowing down) and MaxYawAccel·dt (yaw rate), where dt = now − previous
// now clamped to [0, MaxStep]; dt is Period on the first call. A clock that
// stands still or runs backwards therefore holds the previous command for
// that frame.
//
// On input with the wrong length (ErrInput) or any NaN/Inf (ErrNonFinite)
// it returns the zero Twist and an error, and resets the previous command to
// zero; report the error to the Watchdog (Fail) so the output stays zero.
// Plan does not allocate unless it returns an error.
func (p *Planner) Plan(in Input, now time.Time) (Twist, error) {
	if err := p.checkInput(in); err != nil {
		p.Reset()
		return Twist{}, err
	}
	c := &p.cfg

	best := p.bestSector(in)
	score := float64(in.Scores[best])
	heading := p.headingRad[best]
	clearance := p.clearanceOf(in, best)

	var target Twist
	mode := ModeCruise
	switch {
	case score < c.MinScore:
		mode = ModeLowScore
	case clearance < c.StopDistance:
		mode = ModeBlocked
		if c.TurnInPlace {
			target.AngularZ = p.yawRateFor(heading)
		}
	default:
		ramp := (clearance - c.StopDistance) / (c.SlowDistance - c.StopDistance)
		target.LinearX = c.MaxSpeed * min(ramp, 1)
		target.AngularZ = p.yawRateFor(heading)
	}
	limitedTarget := target

	// Low-pass only toward a moving target, and the speed only while it
	// rises: stopping, and slowing down as the clearance falls, are never
	// delayed by the filter, only by MaxDecel (the braking the tuning
	// checks); smoothed, the robot reached StopDistance still moving.
	if s := c.Smoothing; s > 0 && target.LinearX != 0 {
		target.LinearX = min(target.LinearX, s*p.prev.LinearX+(1-s)*target.LinearX)
		target.AngularZ = s*p.prev.AngularZ + (1-s)*target.AngularZ
	}

	dt := c.Period
	if p.started {
		dt = min(max(now.Sub(p.last), 0), c.MaxStep)
	}
	p.last, p.started = now, true
	secs := dt.Seconds()

	cmd := Twist{
		LinearX:  step(p.prev.LinearX, target.LinearX, c.MaxAccel, c.MaxDecel, secs),
		AngularZ: step(p.prev.AngularZ, target.AngularZ, c.MaxYawAccel, c.MaxYawAccel, secs),
	}
	// Both inputs of step lie within the limits, so these clamps only guard
	// against rounding, except after Retune lowered a limit below the
	// previous command: then they cut it to the new limit.
	cmd.LinearX = min(max(cmd.LinearX, 0), c.MaxSpeed)
	cmd.AngularZ = min(max(cmd.AngularZ, -c.MaxYawRate), c.MaxYawRate)
	if !finite(cmd.LinearX) || !finite(cmd.AngularZ) { // unreachable with a valid Config
		p.Reset()
		return Twist{}, fmt.Errorf("%w: command (%v, %v) for sector %d", ErrNonFinite, cmd.LinearX, cmd.AngularZ, best)
	}

	p.prev = cmd
	p.decision = Decision{Sector: best, HeadingRad: heading, Score: score, ClearanceM: clearance,
		Mode: mode, Target: limitedTarget, Dt: dt}
	return cmd, nil
}

func (p *Planner) checkInput(in Input) error {
	s := len(p.headingRad)
	if len(in.Scores) != s {
		return fmt.Errorf("%w: %d scores, want %d (one per sector)", ErrInput, len(in.Scores), s)
	}
	if len(in.Clearance) != 0 && len(in.Clearance) != s {
		return fmt.Errorf("%w: %d clearances, want %d (one per sector) or none", ErrInput, len(in.Clearance), s)
	}
	for i, v := range in.Scores {
		if !finite(float64(v)) {
			return fmt.Errorf("%w: score[%d] is %v", ErrNonFinite, i, v)
		}
	}
	for i, v := range in.Clearance {
		if !finite(float64(v)) {
			return fmt.Errorf("%w: clearance[%d] is %v", ErrNonFinite, i, v)
		}
	}
	return nil
}

// bestSector returns the sector to head for: scores within TieBand of
// the highest tie, and among the ties the robot may drive into (score at
// least MinScore, clearance at least StopDistance) the smallest |heading|
// wins, then the lower index. A tie that is not passable never wins over
// one that is: with a TieBand the straight-ahead sector, a little lower,
// stopped the robot in front of a passable gap. When no tie is passable,
// the highest score wins (by the same order), and Plan stops. Scores must
// be finite.
func (p *Planner) bestSector(in Input) int {
	top := math.Inf(-1)
	for _, v := range in.Scores {
		top = max(top, float64(v))
	}
	threshold := top - p.cfg.TieBand
	best, bestAbs := -1, math.Inf(1)   // passable ties
	first, firstAbs := -1, math.Inf(1) // the highest scores
	for i, v := range in.Scores {
		a := math.Abs(p.headingRad[i])
		if float64(v) == top && a < firstAbs {
			first, firstAbs = i, a
		}
		if float64(v) < threshold || float64(v) < p.cfg.MinScore || p.clearanceOf(in, i) < p.cfg.StopDistance {
			continue
		}
		if a < bestAbs {
			best, bestAbs = i, a
		}
	}
	if best < 0 {
		return first
	}
	return best
}

// clearanceOf is sector i's clearance in metres, ≥ 0: the model's, or
// derived from its score (ScoreClearanceM).
func (p *Planner) clearanceOf(in Input, i int) float64 {
	if len(in.Clearance) > 0 {
		return max(float64(in.Clearance[i]), 0)
	}
	return max(float64(in.Scores[i]), 0) * p.cfg.ScoreClearanceM
}

func (p *Planner) yawRateFor(headingRad float64) float64 {
	return min(max(p.cfg.HeadingGain*headingRad, -p.cfg.MaxYawRate), p.cfg.MaxYawRate)
}

// step moves from prev toward target by at most up·dt while the magnitude
// grows on the same side of zero, else by at most down·dt (slowing down, or
// crossing zero). It returns target exactly when it is within reach.
func step(prev, target, up, down, dt float64) float64 {
	limit := down * dt
	if (prev >= 0 && target > prev) || (prev <= 0 && target < prev) {
		limit = up * dt
	}
	switch d := target - prev; {
	case d > limit:
		return prev + limit
	case d < -limit:
		return prev - limit
	}
	return target
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
