package planner

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

func TestConfigDefaults(t *testing.T) {
	c := Config{}.WithDefaults()
	want := []struct {
		name      string
		got, want float64
	}{
		{"MaxSpeed", c.MaxSpeed, 1.0},
		{"MaxYawRate", c.MaxYawRate, 1.0},
		{"MaxAccel", c.MaxAccel, 0.5},
		{"MaxDecel", c.MaxDecel, 2.0},
		{"MaxYawAccel", c.MaxYawAccel, 2.0},
		{"StopDistance", c.StopDistance, 0.8},
		{"SlowDistance", c.SlowDistance, 3.0},
		{"HeadingGain", c.HeadingGain, 1.5},
		{"ScoreClearanceM", c.ScoreClearanceM, 8},
		{"Smoothing", c.Smoothing, 0},
		{"MinScore", c.MinScore, 0},
		{"Period (s)", c.Period.Seconds(), 0.1},
		{"MaxStep (s)", c.MaxStep.Seconds(), 0.2},
	}
	for _, w := range want {
		if w.got != w.want {
			t.Errorf("default %s = %v, want %v", w.name, w.got, w.want)
		}
	}
	// The reference model's convention: index 0 rightmost (−40°), index 8
	// leftmost (+40°), positive = left.
	h := c.SectorHeadingsDeg
	if len(h) != 9 || h[0] != -40 || h[4] != 0 || h[8] != 40 {
		t.Errorf("default headings %v, want −40…+40 in 10° steps", h)
	}
	if err := (Config{}).Validate(); err != nil {
		t.Errorf("zero Config does not validate: %v", err)
	}
}

func TestWithDefaultsCopiesHeadings(t *testing.T) {
	mine := []float64{-10, 0, 10}
	p, err := New(Config{SectorHeadingsDeg: mine})
	if err != nil {
		t.Fatal(err)
	}
	mine[0] = 170 // must not reach the planner
	if got := p.Config().SectorHeadingsDeg[0]; got != -10 {
		t.Fatalf("planner heading[0] = %v after the caller changed its slice, want -10", got)
	}
}

func TestConfigValidateNamesFieldAndValue(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want []string // substrings of the error
	}{
		{"negative speed", Config{MaxSpeed: -1}, []string{"MaxSpeed -1"}},
		{"NaN yaw rate", Config{MaxYawRate: math.NaN()}, []string{"MaxYawRate NaN"}},
		{"infinite accel", Config{MaxAccel: math.Inf(1)}, []string{"MaxAccel +Inf"}},
		{"negative decel", Config{MaxDecel: -2}, []string{"MaxDecel -2"}},
		{"negative yaw accel", Config{MaxYawAccel: -0.5}, []string{"MaxYawAccel -0.5"}},
		{"slow not beyond stop", Config{StopDistance: 2, SlowDistance: 1.5}, []string{"SlowDistance 1.5", "StopDistance 2"}},
		{"smoothing of one freezes the command", Config{Smoothing: 1}, []string{"Smoothing 1"}},
		{"negative smoothing", Config{Smoothing: -0.1}, []string{"Smoothing -0.1"}},
		{"NaN min score", Config{MinScore: math.NaN()}, []string{"MinScore NaN"}},
		{"negative tie band", Config{TieBand: -1}, []string{"TieBand -1"}},
		{"negative score scale", Config{ScoreClearanceM: -8}, []string{"ScoreClearanceM -8"}},
		{"negative period", Config{Period: -time.Millisecond}, []string{"Period -1ms"}},
		{"max step below period", Config{Period: time.Second, MaxStep: time.Millisecond}, []string{"MaxStep 1ms", "Period 1s"}},
		{"empty headings", Config{SectorHeadingsDeg: []float64{}}, []string{"SectorHeadingsDeg is empty"}},
		{"decreasing headings", Config{SectorHeadingsDeg: []float64{10, 0}}, []string{"SectorHeadingsDeg[1] 0", "rightmost"}},
		{"duplicate headings", Config{SectorHeadingsDeg: []float64{0, 0}}, []string{"SectorHeadingsDeg[1] 0"}},
		{"heading out of range", Config{SectorHeadingsDeg: []float64{-200, 0}}, []string{"SectorHeadingsDeg[0] -200"}},
		{"NaN heading", Config{SectorHeadingsDeg: []float64{math.NaN()}}, []string{"SectorHeadingsDeg[0] NaN"}},
		{"several at once", Config{MaxSpeed: -1, MaxAccel: -3}, []string{"MaxSpeed -1", "MaxAccel -3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if err == nil {
				t.Fatal("Validate accepted the config")
			}
			if !errors.Is(err, ErrConfig) {
				t.Errorf("error %q does not wrap ErrConfig", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			if _, err := New(tt.cfg); err == nil {
				t.Error("New accepted the config")
			}
		})
	}
}
