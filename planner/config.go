package planner

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Defaults for Config fields left at their zero value.
const (
	DefaultMaxSpeed        = 1.0 // m/s
	DefaultMaxYawRate      = 1.0 // rad/s
	DefaultMaxAccel        = 0.5 // m/s²
	DefaultMaxDecel        = 2.0 // m/s²; braking may be harder than speeding up
	DefaultMaxYawAccel     = 2.0 // rad/s²
	DefaultStopDistance    = 0.8 // m
	DefaultSlowDistance    = 3.0 // m
	DefaultHeadingGain     = 1.5 // rad/s of yaw rate per rad of heading
	DefaultScoreClearanceM = 8.0 // m per unit score: the reference model's score is clearance/8 m − penalty
	DefaultPeriod          = 100 * time.Millisecond
)

// DefaultSectorHeadingsDeg returns the reference model's nine headings, −40°
// (index 0, rightmost) to +40° (index 8, leftmost) in 10° steps. A fresh
// slice each call.
func DefaultSectorHeadingsDeg() []float64 {
	return []float64{-40, -30, -20, -10, 0, 10, 20, 30, 40}
}

// Config tunes a Planner. A zero field takes the default named next to it;
// WithDefaults fills them in. Negative values are errors, never defaults.
type Config struct {
	// SectorHeadingsDeg[k] is sector k's heading in degrees, positive to the
	// left (REP-103), strictly increasing: index 0 is the rightmost sector.
	// Same convention as infer.ModelConfig.SectorHeadingsDeg. Default
	// DefaultSectorHeadingsDeg (S = 9, −40°…+40°).
	SectorHeadingsDeg []float64

	MaxSpeed    float64 // m/s, forward speed limit; default 1.0
	MaxYawRate  float64 // rad/s, |angular.z| limit; default 1.0
	MaxAccel    float64 // m/s², speed increase limit; default 0.5
	MaxDecel    float64 // m/s², speed decrease limit; default 2.0
	MaxYawAccel float64 // rad/s², yaw-rate change limit; default 2.0

	// StopDistance (m): if the chosen sector's clearance is below it, linear
	// motion stops. Default 0.8. Zero is the default, so to disable stopping
	// by distance set a tiny positive value.
	StopDistance float64
	// SlowDistance (m): speed ramps linearly from 0 at StopDistance to
	// MaxSpeed at SlowDistance and stays there beyond. Must exceed
	// StopDistance. Default 3.0.
	SlowDistance float64
	// TurnInPlace: when the chosen sector is closer than StopDistance, turn
	// toward it in place (yaw only) instead of stopping completely. Default
	// false (stop).
	TurnInPlace bool
	// HeadingGain (1/s): target yaw rate = HeadingGain × heading (rad),
	// limited to ±MaxYawRate. Default 1.5.
	HeadingGain float64

	// Smoothing in [0, 1) is the weight of the previous command in a
	// per-frame first-order low-pass: cmd = s·prev + (1−s)·target. 0 (the
	// default) turns it off; the acceleration limits alone then shape the
	// command. The speed is smoothed only while it rises: stopping and
	// slowing down are shaped by MaxDecel alone.
	Smoothing float64
	// MinScore: if the best score is below it the robot stops. Default 0
	// (for the reference model, a score ≤ 0 means a hazard or no clearance).
	MinScore float64
	// TieBand ≥ 0: scores within TieBand of the best count as equal and,
	// among those the robot may drive into (score ≥ MinScore, clearance ≥
	// StopDistance), the sector closest to straight ahead wins, so model
	// noise does not make the robot weave. Default 0 (exact ties only).
	TieBand float64
	// ScoreClearanceM (m per unit score) derives clearance when Input has
	// none: clearance = max(score, 0) × ScoreClearanceM. The assumption is
	// that the score is clearance in metres, scaled, minus penalties; a
	// penalty then also slows the robot. Default 8 (reference model).
	ScoreClearanceM float64

	// Period is the nominal frame period: the dt of the first Plan after
	// New or Reset. Default 100 ms.
	Period time.Duration
	// MaxStep caps dt between Plan calls so that a long gap cannot license
	// a large jump. Default 2 × Period; must be ≥ Period.
	MaxStep time.Duration
}

// WithDefaults returns c with every zero field set to its default. The
// heading slice is copied, so the result does not alias the caller's.
func (c Config) WithDefaults() Config {
	if c.SectorHeadingsDeg == nil {
		c.SectorHeadingsDeg = DefaultSectorHeadingsDeg()
	} else {
		c.SectorHeadingsDeg = append([]float64(nil), c.SectorHeadingsDeg...)
	}
	def := func(v *float64, d float64) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.MaxSpeed, DefaultMaxSpeed)
	def(&c.MaxYawRate, DefaultMaxYawRate)
	def(&c.MaxAccel, DefaultMaxAccel)
	def(&c.MaxDecel, DefaultMaxDecel)
	def(&c.MaxYawAccel, DefaultMaxYawAccel)
	def(&c.StopDistance, DefaultStopDistance)
	def(&c.SlowDistance, DefaultSlowDistance)
	def(&c.HeadingGain, DefaultHeadingGain)
	def(&c.ScoreClearanceM, DefaultScoreClearanceM)
	if c.Period == 0 {
		c.Period = DefaultPeriod
	}
	if c.MaxStep == 0 {
		c.MaxStep = 2 * c.Period
	}
	return c
}

// Limits returns the command limits that Plan guarantees.
func (c Config) Limits() Limits {
	c = c.WithDefaults()
	return Limits{MaxSpeed: c.MaxSpeed, MaxYawRate: c.MaxYawRate}
}

// Validate checks c with defaults applied and reports every bad field at
// once; each error wraps ErrConfig and names the field and its value.
func (c Config) Validate() error {
	c = c.WithDefaults()
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrConfig}, args...)...))
	}
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	positive := func(name string, v float64) {
		if !finite(v) || v <= 0 {
			bad("%s %v: must be a finite number > 0", name, v)
		}
	}

	if len(c.SectorHeadingsDeg) == 0 {
		bad("SectorHeadingsDeg is empty: need at least one sector")
	}
	for i, h := range c.SectorHeadingsDeg {
		switch {
		case !finite(h) || h <= -180 || h >= 180:
			bad("SectorHeadingsDeg[%d] %v: must be within (−180°, 180°)", i, h)
		case i > 0 && !(h > c.SectorHeadingsDeg[i-1]):
			bad("SectorHeadingsDeg[%d] %v: must be greater than SectorHeadingsDeg[%d] %v (index 0 is the rightmost sector)",
				i, h, i-1, c.SectorHeadingsDeg[i-1])
		}
	}
	positive("MaxSpeed", c.MaxSpeed)
	positive("MaxYawRate", c.MaxYawRate)
	positive("MaxAccel", c.MaxAccel)
	positive("MaxDecel", c.MaxDecel)
	positive("MaxYawAccel", c.MaxYawAccel)
	positive("StopDistance", c.StopDistance)
	positive("SlowDistance", c.SlowDistance)
	if finite(c.StopDistance) && finite(c.SlowDistance) && c.SlowDistance <= c.StopDistance {
		bad("SlowDistance %v m: must exceed StopDistance %v m", c.SlowDistance, c.StopDistance)
	}
	positive("HeadingGain", c.HeadingGain)
	if !finite(c.Smoothing) || c.Smoothing < 0 || c.Smoothing >= 1 {
		bad("Smoothing %v: must be in [0, 1)", c.Smoothing)
	}
	if !finite(c.MinScore) {
		bad("MinScore %v: must be finite", c.MinScore)
	}
	if !finite(c.TieBand) || c.TieBand < 0 {
		bad("TieBand %v: must be a finite number ≥ 0", c.TieBand)
	}
	positive("ScoreClearanceM", c.ScoreClearanceM)
	if c.Period <= 0 {
		bad("Period %v: must be > 0", c.Period)
	}
	if c.MaxStep < c.Period {
		bad("MaxStep %v: must be ≥ Period %v", c.MaxStep, c.Period)
	}
	return errors.Join(errs...)
}
