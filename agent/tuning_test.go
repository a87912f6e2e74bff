package agent

import (
	"context"
	"flag"
	"io"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/zerohop/zerohop/planner"
)

func TestPlannerSettingRanges(t *testing.T) {
	for _, tc := range []struct {
		name string
		v    float64
		err  string // "" accepted
	}{
		{"max_speed", 0.5, ""},
		{"max_speed", 0, "want above 0 up to 20 m/s"}, // 0 is not "the default" here
		{"max_speed", 120, "want above 0 up to 20 m/s"},
		{"max_yaw_rate", -1, "want above 0 up to 10 rad/s"},
		{"smoothing", 0, ""},
		{"smoothing", 1, "want from 0 up to 0.99"},
		{"min_score", -0.5, ""},
		{"tie_band", -0.1, "want from 0 up to 100"},
		{"heading_gain", nanValue(), "want a finite number, above 0 up to 20 1/s"},
		{"stop_distance", 3.5, "must be below slow_distance (3 m); raise slow_distance first"},
		{"slow_distance", 0.5, "must exceed stop_distance (0.8 m); lower stop_distance first"},
		{"turn_in_place", 1, `no numeric planner setting "turn_in_place"`},
		{"speed", 1, `no numeric planner setting "speed"`},
	} {
		tuning := NewPlannerTuning()
		before := tuning.Config()
		err := tuning.SetNumber(tc.name, tc.v)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s %v: %v", tc.name, tc.v, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s %v: %v, want an error with %q", tc.name, tc.v, err, tc.err)
		case tc.err != "" && !configEqual(tuning.Config(), before):
			t.Errorf("%s %v: refused, yet the settings changed: %+v", tc.name, tc.v, tuning.Config())
		}
		if _, pending := tuning.take(); pending != (tc.err == "") {
			t.Errorf("%s %v: a change pending for the pipeline: %v", tc.name, tc.v, pending)
		}
	}
}

func nanValue() float64 { z := 0.0; return z / z }

func configEqual(a, b planner.Config) bool {
	return reflect.DeepEqual(a, b)
}

// Flags come in any order: --stop-distance above the default slow
// distance is fine when --slow-distance follows; Check then judges the
// whole, naming the flags.
func TestPlannerFlags(t *testing.T) {
	parse := func(args ...string) (*PlannerTuning, error) {
		tuning := NewPlannerTuning()
		fs := flag.NewFlagSet("agent", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		for _, s := range PlannerSettings() {
			v, err := tuning.FlagValue(s.Name)
			if err != nil {
				t.Fatal(err)
			}
			fs.Var(v, s.Flag(), s.Usage)
		}
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		return tuning, tuning.Check()
	}
	tuning, err := parse("--stop-distance", "4", "--turn-in-place", "--slow-distance", "6", "--max-speed", "0.4")
	if err != nil {
		t.Fatal(err)
	}
	c := tuning.Config()
	if c.StopDistance != 4 || c.SlowDistance != 6 || !c.TurnInPlace || c.MaxSpeed != 0.4 || c.MaxAccel != planner.DefaultMaxAccel {
		t.Errorf("settings %+v", c)
	}
	if _, pending := tuning.take(); pending {
		t.Error("flags left a change pending: the pipeline would log a retune at its first frame")
	}
	for _, tc := range []struct{ args, err string }{
		{"--stop-distance 4", "--stop-distance 4 m: must be below --slow-distance (3 m)"},
		{"--max-speed 0", `invalid value "0" for flag -max-speed: want above 0 up to 20 m/s`},
		{"--max-decel fast", `invalid value "fast" for flag -max-decel: "fast": want a number`},
		{"--turn-in-place=maybe", `invalid boolean value "maybe" for -turn-in-place`},
	} {
		if _, err := parse(strings.Fields(tc.args)...); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: %v, want an error with %q", tc.args, err, tc.err)
		}
	}
}

// SetAll judges the values together: both distances raised past each
// other's old values, in either order, is one consistent change; one bad
// value refuses them all, naming it.
func TestPlannerSetAll(t *testing.T) {
	for _, order := range [][]PlannerValue{
		{{Name: "stop_distance", Number: 4}, {Name: "slow_distance", Number: 6}},
		{{Name: "slow_distance", Number: 6}, {Name: "stop_distance", Number: 4}},
	} {
		tuning := NewPlannerTuning()
		if err := tuning.SetAll(order...); err != nil {
			t.Fatalf("%+v: %v", order, err)
		}
		if c := tuning.Config(); c.StopDistance != 4 || c.SlowDistance != 6 {
			t.Errorf("%+v: settings %+v", order, c)
		}
	}
	for _, tc := range []struct {
		values []PlannerValue
		err    string
	}{
		{[]PlannerValue{{Name: "max_speed", Number: 0.5}, {Name: "stop_distance", Number: 5}}, "stop_distance 5 m must be below slow_distance 3 m"},
		{[]PlannerValue{{Name: "max_speed", Number: 0.5}, {Name: "max_accel", Number: -1}}, "max_accel -1: want above 0 up to 20 m/s²"},
		{[]PlannerValue{{Name: "turn_in_place", Bool: true}, {Name: "speed", Number: 1}}, `no planner setting "speed"`},
	} {
		tuning := NewPlannerTuning()
		before := tuning.Config()
		if err := tuning.SetAll(tc.values...); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%+v: %v, want an error with %q", tc.values, err, tc.err)
		}
		if !configEqual(tuning.Config(), before) {
			t.Errorf("%+v: refused, yet the settings changed: %+v", tc.values, tuning.Config())
		}
		if _, pending := tuning.take(); pending {
			t.Errorf("%+v: refused, yet a change is pending", tc.values)
		}
	}
}

// The ranges rqt_reconfigure gets are inclusive: a setting that must be
// above 0 starts a little above it, and both ends are accepted.
func TestPlannerSettingRangesAreAccepted(t *testing.T) {
	for _, s := range PlannerSettings() {
		from, to, ok := s.Range()
		if ok == s.Bool {
			t.Errorf("%s: Range ok %v for a Bool %v setting", s.Name, ok, s.Bool)
		}
		if s.Bool {
			continue
		}
		for _, v := range []float64{from, to} {
			if err := s.check(v); err != nil {
				t.Errorf("%s: the range's end %v is refused: %v", s.Name, v, err)
			}
		}
	}
}

// Limits whose braking distance from max_speed outruns the slow-down
// ramp, or all of slow_distance, are named with the numbers.
func TestBrakingShortfall(t *testing.T) {
	for _, tc := range []struct {
		cfg  planner.Config
		want string // "": none
	}{
		{planner.Config{}, ""}, // 1 m/s at 2 m/s²: 0.25 m within 2.2 m
		{planner.Config{MaxSpeed: 2, MaxDecel: 1, StopDistance: 0.8, SlowDistance: 3}, ""},                                             // 2 m, within 2.2 m
		{planner.Config{MaxSpeed: 2, MaxDecel: 0.8}, "needs 2.50 m to stop, more than the 2.20 m from slow_distance to stop_distance"}, // past stop_distance
		{planner.Config{MaxSpeed: 3, MaxDecel: 0.5}, "needs 9.00 m to stop, more than slow_distance (3 m)"},                            // into the obstacle
	} {
		if got := brakingShortfall(tc.cfg); (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%+v: %q, want %q", tc.cfg, got, tc.want)
		}
	}
}

func TestTakingAChangeDoesNotAllocate(t *testing.T) {
	tuning := NewPlannerTuning()
	if err := tuning.SetNumber("max_speed", 0.5); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(100, func() { tuning.take() })
	if allocs != 0 {
		t.Fatalf("take allocates %v times per frame", allocs)
	}
	var none *PlannerTuning // a pipeline without tuning
	if _, ok := none.take(); ok {
		t.Fatal("a nil tuning has a change")
	}
}

// A speed limit lowered while the agent drives caps its commands from the
// next planned frame on.
func TestPlannerRetunedWhileRunning(t *testing.T) {
	requireORT(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	tuning := NewPlannerTuning()
	for name, v := range map[string]float64{"max_accel": 20, "max_speed": 1} {
		if err := tuning.SetNumber(name, v); err != nil {
			t.Fatal(err)
		}
	}
	sink := &recordingSink{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- RunNode(ctx, NodeConfig{Camera: "synthetic", Rate: 30, Beams: 16, AzimuthSteps: 300,
			Listener: ln, Sink: sink, Threads: 1, Providers: "cpu", Planner: tuning, Watchdog: time.Second})
	}()
	fastest := func(cmds []timedCmd) float64 {
		v := 0.0
		for _, c := range cmds {
			v = max(v, c.cmd.LinearX)
		}
		return v
	}
	deadline := time.Now().Add(20 * time.Second)
	for fastest(sink.since(time.Time{})) <= 0.5 {
		select {
		case err := <-done:
			t.Fatalf("agent ended before driving over 0.5 m/s: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no command over 0.5 m/s in 20 s: the scene should let the robot cruise")
		}
	}
	const limit = 0.2
	if err := tuning.SetNumber("max_speed", limit); err != nil {
		t.Fatal(err)
	}
	// After the set: frames planned with the old limit that were
	// published before it do not count; one in flight may.
	set := time.Now()
	var after []timedCmd
	for deadline = time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if after = sink.since(set); len(after) >= 15 {
			break
		}
	}
	if v := metricValue(t, getBody(t, base+"/metrics"), "zerohop_planner_max_speed_mps"); v != limit {
		t.Errorf("/metrics: zerohop_planner_max_speed_mps %v, want %v", v, limit)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	over, moving := 0, 0
	for _, c := range after {
		switch {
		case c.cmd.LinearX > limit:
			over++
		case c.cmd.LinearX > 0:
			moving++
		}
	}
	// One frame may have passed its plan stage when the limit came.
	if over > 1 || moving < 5 {
		t.Fatalf("after max_speed %v: %d commands over it, %d moving under it (of %d); want at most 1 over, 5 or more under",
			limit, over, moving, len(after))
	}
}
