package planner

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

// t0 is an arbitrary start of the injected clock.
var t0 = time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)

// instant returns a config whose acceleration limits never bind, so one
// Plan call reaches the target and the target logic can be tested alone.
func instant(c Config) Config {
	c.MaxAccel, c.MaxDecel, c.MaxYawAccel = 1e9, 1e9, 1e9
	return c
}

func mustNew(t testing.TB, c Config) *Planner {
	t.Helper()
	p, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func scores(v ...float32) []float32 { return v }

func TestBestSector(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		scores  []float32
		want    int
		wantYaw string // "left", "right" or "none"
	}{
		{"highest wins", Config{}, scores(.1, .2, .3, .4, .5, .6, .9, .7, .2), 6, "left"},
		{"rightmost can win", Config{}, scores(.9, .2, .3, .4, .5, .6, .2, .7, .2), 0, "right"},
		{"all equal: straight ahead", Config{}, scores(1, 1, 1, 1, 1, 1, 1, 1, 1), 4, "none"},
		{"tie between mirrors: straight ahead missing, lower index", Config{SectorHeadingsDeg: []float64{-10, 10}}, scores(1, 1), 0, "right"},
		{"tie between 20° left and 30° right: smaller angle", Config{}, scores(0, .9, 0, 0, 0, 0, .9, 0, 0), 6, "left"},
		{"within tie band: straight ahead", Config{TieBand: 0.05}, scores(.5, .5, .5, .5, .96, .5, .5, 1, .5), 4, "none"},
		{"outside tie band: best", Config{TieBand: 0.01}, scores(.5, .5, .5, .5, .96, .5, .5, 1, .5), 7, "left"},
		{"negative scores", Config{MinScore: -10}, scores(-5, -4, -3, -2, -1, -2, -3, -4, -0.5), 8, "left"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustNew(t, instant(tt.cfg))
			far := []float32{8, 8, 8, 8, 8, 8, 8, 8, 8}[:len(tt.scores)]
			cmd, err := p.Plan(Input{Scores: tt.scores, Clearance: far}, t0)
			if err != nil {
				t.Fatal(err)
			}
			if got := p.Decision().Sector; got != tt.want {
				t.Fatalf("chose sector %d, want %d (decision %+v)", got, tt.want, p.Decision())
			}
			got := "none"
			if cmd.AngularZ > 0 {
				got = "left"
			} else if cmd.AngularZ < 0 {
				got = "right"
			}
			if got != tt.wantYaw {
				t.Fatalf("yaw %v turns %s, want %s", cmd.AngularZ, got, tt.wantYaw)
			}
		})
	}
}

func TestTarget(t *testing.T) {
	ahead := func(v float32) []float32 { return scores(0, 0, 0, 0, v, 0, 0, 0, 0) }
	left40 := scores(0, 0, 0, 0, 0, 0, 0, 0, 1)
	clear := func(v float32) []float32 { return []float32{v, v, v, v, v, v, v, v, v} }
	tests := []struct {
		name      string
		cfg       Config
		in        Input
		wantLin   float64
		wantYaw   float64
		wantMode  Mode
		wantClear float64
	}{
		{"far: full speed", Config{}, Input{Scores: ahead(1), Clearance: clear(8)}, 1, 0, ModeCruise, 8},
		{"at SlowDistance: full speed", Config{}, Input{Scores: ahead(1), Clearance: clear(3)}, 1, 0, ModeCruise, 3},
		{"halfway: half speed", Config{}, Input{Scores: ahead(1), Clearance: clear(1.9)}, 0.5, 0, ModeCruise, 1.9},
		{"at StopDistance: zero", Config{}, Input{Scores: ahead(1), Clearance: clear(0.8)}, 0, 0, ModeCruise, 0.8},
		{"below StopDistance: blocked", Config{}, Input{Scores: ahead(1), Clearance: clear(0.5)}, 0, 0, ModeBlocked, 0.5},
		{"negative clearance counts as zero", Config{}, Input{Scores: ahead(1), Clearance: clear(-3)}, 0, 0, ModeBlocked, 0},
		{"below MinScore: stop", Config{MinScore: 0.5}, Input{Scores: ahead(0.4), Clearance: clear(8)}, 0, 0, ModeLowScore, 8},
		{"clearance from score (8 m per unit)", Config{}, Input{Scores: ahead(1)}, 1, 0, ModeCruise, 8},
		{"clearance from score, ramp", Config{}, Input{Scores: ahead(0.2375)}, 0.5, 0, ModeCruise, 1.9},
		{"clearance from score, other scale", Config{ScoreClearanceM: 4}, Input{Scores: ahead(0.475)}, 0.5, 0, ModeCruise, 1.9},
		{"negative score gives zero clearance", Config{MinScore: -1}, Input{Scores: scores(-.5, -.5, -.5, -.5, -.5, -.5, -.5, -.5, -.5)}, 0, 0, ModeBlocked, 0},
		{"left 40°: yaw limited to MaxYawRate", Config{}, Input{Scores: left40, Clearance: clear(8)}, 1, 1, ModeCruise, 8},
		{"left 40°: proportional below the limit", Config{HeadingGain: 1}, Input{Scores: left40, Clearance: clear(8)}, 1, 40 * math.Pi / 180, ModeCruise, 8},
		{"right 10°: negative yaw", Config{}, Input{Scores: scores(0, 0, 0, 1, 0, 0, 0, 0, 0), Clearance: clear(8)}, 1, -1.5 * 10 * math.Pi / 180, ModeCruise, 8},
		{"blocked, no turn in place", Config{}, Input{Scores: left40, Clearance: clear(0.3)}, 0, 0, ModeBlocked, 0.3},
		{"blocked, turn in place toward the best sector", Config{TurnInPlace: true, HeadingGain: 1}, Input{Scores: left40, Clearance: clear(0.3)}, 0, 40 * math.Pi / 180, ModeBlocked, 0.3},
		{"MinScore stops even with TurnInPlace", Config{TurnInPlace: true, MinScore: 2}, Input{Scores: left40, Clearance: clear(0.3)}, 0, 0, ModeLowScore, 0.3},
		{"other MaxSpeed", Config{MaxSpeed: 0.4}, Input{Scores: ahead(1), Clearance: clear(1.9)}, 0.2, 0, ModeCruise, 1.9},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustNew(t, instant(tt.cfg))
			cmd, err := p.Plan(tt.in, t0)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(cmd.LinearX-tt.wantLin) > 1e-6 || math.Abs(cmd.AngularZ-tt.wantYaw) > 1e-6 {
				t.Errorf("cmd %+v, want {%v %v}", cmd, tt.wantLin, tt.wantYaw)
			}
			d := p.Decision()
			if d.Mode != tt.wantMode {
				t.Errorf("mode %v, want %v", d.Mode, tt.wantMode)
			}
			if math.Abs(d.ClearanceM-tt.wantClear) > 1e-6 {
				t.Errorf("clearance %v, want %v", d.ClearanceM, tt.wantClear)
			}
		})
	}
}

// TestAccelerationLimits walks fixed sequences and checks every command
// against hand-computed values.
func TestAccelerationLimits(t *testing.T) {
	go8 := Input{Scores: scores(0, 0, 0, 0, 1, 0, 0, 0, 0), Clearance: []float32{8, 8, 8, 8, 8, 8, 8, 8, 8}}
	stop := Input{Scores: scores(0, 0, 0, 0, 1, 0, 0, 0, 0), Clearance: []float32{.1, .1, .1, .1, .1, .1, .1, .1, .1}}
	left := Input{Scores: scores(0, 0, 0, 0, 0, 0, 0, 0, 1), Clearance: []float32{8, 8, 8, 8, 8, 8, 8, 8, 8}}
	right := Input{Scores: scores(1, 0, 0, 0, 0, 0, 0, 0, 0), Clearance: []float32{8, 8, 8, 8, 8, 8, 8, 8, 8}}
	ms := time.Millisecond
	type stepT struct {
		in      Input
		at      time.Duration // since t0
		wantLin float64
		wantYaw float64
	}
	tests := []struct {
		name  string
		cfg   Config
		steps []stepT
	}{
		{"first call uses one nominal period", Config{}, []stepT{
			{go8, 0, 0.05, 0}, // 0.5 m/s² × 0.1 s
		}},
		{"ramps up at MaxAccel", Config{}, []stepT{
			{go8, 0, 0.05, 0}, {go8, 100 * ms, 0.10, 0}, {go8, 300 * ms, 0.20, 0},
		}},
		{"a gap longer than MaxStep counts as MaxStep", Config{}, []stepT{
			{go8, 0, 0.05, 0}, {go8, time.Hour, 0.15, 0},
		}},
		{"dt = 0 holds the command", Config{}, []stepT{
			{go8, 0, 0.05, 0}, {go8, 0, 0.05, 0}, {stop, 0, 0.05, 0},
		}},
		{"clock running backwards holds, then measures from the new time", Config{}, []stepT{
			{go8, time.Second, 0.05, 0}, {go8, 0, 0.05, 0}, {go8, 100 * ms, 0.10, 0},
		}},
		{"brakes at MaxDecel", Config{MaxAccel: 100}, []stepT{
			{go8, 0, 1, 0}, {stop, 100 * ms, 0.8, 0}, {stop, 200 * ms, 0.6, 0}, {stop, 600 * ms, 0.2, 0}, {stop, 800 * ms, 0, 0},
		}},
		{"yaw rate limited by MaxYawAccel", Config{MaxAccel: 100}, []stepT{
			{left, 0, 1, 0.2}, {left, 100 * ms, 1, 0.4}, {right, 200 * ms, 1, 0.2}, {right, 400 * ms, 1, -0.2},
		}},
		{"smoothing low-passes a moving target", instant(Config{Smoothing: 0.5}), []stepT{
			{go8, 0, 0.5, 0}, {go8, 100 * ms, 0.75, 0}, {go8, 200 * ms, 0.875, 0},
		}},
		{"smoothing does not delay a stop", instant(Config{Smoothing: 0.9}), []stepT{
			{go8, 0, 0.1, 0}, {go8, 100 * ms, 0.19, 0}, {stop, 200 * ms, 0, 0},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustNew(t, tt.cfg)
			for i, s := range tt.steps {
				cmd, err := p.Plan(s.in, t0.Add(s.at))
				if err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
				if math.Abs(cmd.LinearX-s.wantLin) > 1e-9 || math.Abs(cmd.AngularZ-s.wantYaw) > 1e-9 {
					t.Fatalf("step %d at %v: cmd %+v, want {%v %v}", i, s.at, cmd, s.wantLin, s.wantYaw)
				}
			}
		})
	}
}

func TestBadInputGivesZeroAndError(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	ok := scores(1, 1, 1, 1, 1, 1, 1, 1, 1)
	tests := []struct {
		name    string
		in      Input
		wantErr error
		wantMsg string
	}{
		{"no scores", Input{}, ErrInput, "0 scores, want 9"},
		{"too few scores", Input{Scores: scores(1, 2, 3)}, ErrInput, "3 scores, want 9"},
		{"too many scores", Input{Scores: make([]float32, 10)}, ErrInput, "10 scores, want 9"},
		{"wrong clearance length", Input{Scores: ok, Clearance: []float32{1, 2}}, ErrInput, "2 clearances, want 9"},
		{"NaN score", Input{Scores: scores(1, 1, 1, nan, 1, 1, 1, 1, 1)}, ErrNonFinite, "score[3] is NaN"},
		{"+Inf score", Input{Scores: scores(1, 1, 1, 1, 1, 1, 1, 1, inf)}, ErrNonFinite, "score[8] is +Inf"},
		{"-Inf score", Input{Scores: scores(-inf, 1, 1, 1, 1, 1, 1, 1, 1)}, ErrNonFinite, "score[0] is -Inf"},
		{"NaN clearance", Input{Scores: ok, Clearance: []float32{1, 1, 1, 1, 1, nan, 1, 1, 1}}, ErrNonFinite, "clearance[5] is NaN"},
		{"Inf clearance", Input{Scores: ok, Clearance: []float32{1, 1, 1, 1, 1, 1, 1, 1, inf}}, ErrNonFinite, "clearance[8] is +Inf"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustNew(t, Config{MaxAccel: 100})
			if _, err := p.Plan(Input{Scores: ok}, t0); err != nil { // get moving first
				t.Fatal(err)
			}
			if p.Previous().IsZero() {
				t.Fatal("setup: robot not moving")
			}
			cmd, err := p.Plan(tt.in, t0.Add(100*time.Millisecond))
			if !errors.Is(err, tt.wantErr) || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Fatalf("err = %v, want %v mentioning %q", err, tt.wantErr, tt.wantMsg)
			}
			if !cmd.IsZero() || !p.Previous().IsZero() || p.Decision().Sector != -1 {
				t.Fatalf("after error: cmd %+v, previous %+v, decision %+v; want all zero/reset", cmd, p.Previous(), p.Decision())
			}
		})
	}
}

// TestAdversarialFiniteScores: extreme but finite values plan normally and
// stay within limits.
func TestAdversarialFiniteScores(t *testing.T) {
	maxf, denorm := float32(math.MaxFloat32), math.Float32frombits(1) // smallest denormal
	tests := []struct {
		name string
		in   Input
	}{
		{"huge", Input{Scores: scores(maxf, maxf, maxf, maxf, maxf, maxf, maxf, maxf, maxf)}},
		{"huge negative", Input{Scores: scores(-maxf, -maxf, -maxf, -maxf, -maxf, -maxf, -maxf, -maxf, -maxf)}},
		{"huge clearance", Input{Scores: scores(1, 0, 0, 0, 0, 0, 0, 0, 0), Clearance: []float32{maxf, 0, 0, 0, 0, 0, 0, 0, 0}}},
		{"tiny", Input{Scores: scores(1e-30, 1e-30, 1e-30, 1e-30, 1e-30, 1e-30, 1e-30, 1e-30, 1e-30)}},
		{"denormals", Input{Scores: scores(denorm, 0, denorm, 0, -denorm, 0, denorm, 0, denorm), Clearance: []float32{denorm, denorm, denorm, denorm, denorm, denorm, denorm, denorm, denorm}}},
		{"all zero", Input{Scores: make([]float32, 9)}},
		{"negative zero", Input{Scores: scores(float32(math.Copysign(0, -1)), 0, 0, 0, 0, 0, 0, 0, 0)}},
		{"mixed extremes", Input{Scores: scores(maxf, -maxf, denorm, 1e-38, 0, -1e-38, maxf, -denorm, 1)}},
		{"empty clearance slice counts as absent", Input{Scores: scores(1, 1, 1, 1, 1, 1, 1, 1, 1), Clearance: []float32{}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, c := range []Config{{}, instant(Config{}), {TurnInPlace: true, Smoothing: 0.7, MinScore: -1e30}} {
				p := mustNew(t, c)
				for i := range 20 {
					cmd, err := p.Plan(tt.in, t0.Add(time.Duration(i)*50*time.Millisecond))
					if err != nil {
						t.Fatalf("frame %d: %v", i, err)
					}
					if err := cmd.Valid(p.Limits()); err != nil {
						t.Fatalf("frame %d: %v", i, err)
					}
				}
			}
		})
	}
}

func TestPlanDoesNotAllocate(t *testing.T) {
	p := mustNew(t, Config{Smoothing: 0.3})
	in := Input{Scores: scores(.1, .2, .3, .4, .9, .4, .3, .2, .1), Clearance: []float32{1, 2, 3, 4, 5, 4, 3, 2, 1}}
	now := t0
	allocs := testing.AllocsPerRun(1000, func() {
		now = now.Add(33 * time.Millisecond)
		in.Scores[0] = float32(now.UnixMilli()%7) / 7
		if _, err := p.Plan(in, now); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("Plan allocates %v times per call, want 0", allocs)
	}
}

func BenchmarkPlan(b *testing.B) {
	p := mustNew(b, Config{Smoothing: 0.3})
	in := Input{Scores: scores(.1, .2, .3, .4, .9, .4, .3, .2, .1), Clearance: []float32{1, 2, 3, 4, 5, 4, 3, 2, 1}}
	now := t0
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(33 * time.Millisecond)
		if _, err := p.Plan(in, now); err != nil {
			b.Fatal(err)
		}
	}
}

func TestRetune(t *testing.T) {
	clear := Input{Scores: scores(0, 0, 0, 0, 1, 0, 0, 0, 0), Clearance: []float32{9, 9, 9, 9, 9, 9, 9, 9, 9}}
	cruise := func(t *testing.T, p *Planner, now time.Time) Twist {
		t.Helper()
		cmd, err := p.Plan(clear, now)
		if err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	t.Run("a lowered speed limit caps the next command", func(t *testing.T) {
		p := mustNew(t, instant(Config{MaxSpeed: 2}))
		if got := cruise(t, p, t0); got.LinearX != 2 {
			t.Fatalf("before: %v m/s, want 2", got.LinearX)
		}
		if err := p.Retune(Config{MaxSpeed: 0.5}); err != nil {
			t.Fatal(err)
		}
		got := cruise(t, p, t0.Add(100*time.Millisecond))
		if got.LinearX != 0.5 || p.Limits().MaxSpeed != 0.5 {
			t.Fatalf("after: %v m/s, limits %+v; want 0.5", got.LinearX, p.Limits())
		}
	})
	t.Run("a raised limit is reached through the acceleration limit", func(t *testing.T) {
		p := mustNew(t, instant(Config{MaxSpeed: 0.5}))
		cruise(t, p, t0)
		if err := p.Retune(Config{MaxSpeed: 1.5, MaxAccel: 1}); err != nil {
			t.Fatal(err)
		}
		got := cruise(t, p, t0.Add(100*time.Millisecond))
		if math.Abs(got.LinearX-0.6) > 1e-12 { // 0.5 + 1 m/s² × 0.1 s
			t.Fatalf("after: %v m/s, want 0.6", got.LinearX)
		}
	})
	t.Run("the sectors stay the model's", func(t *testing.T) {
		p := mustNew(t, Config{})
		if err := p.Retune(Config{SectorHeadingsDeg: []float64{0}, MaxSpeed: 0.7}); err != nil {
			t.Fatal(err)
		}
		if p.Sectors() != 9 || len(p.Config().SectorHeadingsDeg) != 9 || p.Config().MaxSpeed != 0.7 {
			t.Fatalf("after Retune: %d sectors, config %+v", p.Sectors(), p.Config())
		}
		cruise(t, p, t0) // nine scores still fit
	})
	t.Run("an invalid config changes nothing", func(t *testing.T) {
		p := mustNew(t, Config{MaxSpeed: 0.7})
		err := p.Retune(Config{StopDistance: 5, SlowDistance: 4})
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "SlowDistance 4") {
			t.Fatalf("Retune error %v, want ErrConfig naming SlowDistance 4", err)
		}
		if c := p.Config(); c.MaxSpeed != 0.7 || c.StopDistance != DefaultStopDistance {
			t.Fatalf("config changed by a refused Retune: %+v", c)
		}
	})
}

// Resume steps the next command from the given one, within the limits
// over the time since the last Plan: neither a jump past it nor braking
// from the command the robot never got.
func TestPlannerResumeStepsFromTheGivenCommand(t *testing.T) {
	p, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	open := Input{Scores: make([]float32, p.Sectors()), Clearance: make([]float32, p.Sectors())}
	for i := range open.Scores {
		open.Scores[i], open.Clearance[i] = 1, 8
	}
	now := time.Unix(100, 0)
	for range 40 { // up to speed, 0.1 s apart
		now = now.Add(100 * time.Millisecond)
		if _, err := p.Plan(open, now); err != nil {
			t.Fatal(err)
		}
	}
	if p.Previous().LinearX < 0.9 {
		t.Fatalf("speed %v after 4 s of open space, want near 1", p.Previous().LinearX)
	}
	p.Resume(Twist{LinearX: 0.3})
	now = now.Add(100 * time.Millisecond)
	cmd, err := p.Plan(open, now)
	if err != nil {
		t.Fatal(err)
	}
	if want := 0.3 + p.Config().MaxAccel*0.1; math.Abs(cmd.LinearX-want) > 1e-9 {
		t.Fatalf("after Resume(0.3): linear.x %v, want %v (0.3 plus 0.1 s of MaxAccel)", cmd.LinearX, want)
	}
}

// Smoothing never delays slowing down: a target lower than the previous
// command (the clearance falling along the ramp) is taken as it is, so the
// robot brakes at MaxDecel. Smoothed, it reached StopDistance still moving
// and stopped 3 cm from the wall (found in review). A robot at 10 Hz
// drives at a wall from 6 m; commands take effect the next frame.
func TestSmoothingNeverDelaysSlowingDown(t *testing.T) {
	p, err := New(Config{Smoothing: 0.9})
	if err != nil {
		t.Fatal(err)
	}
	p.Resume(Twist{LinearX: 1})
	sectors := p.Sectors()
	scores, clearance := make([]float32, sectors), make([]float32, sectors)
	for i := range clearance {
		clearance[i] = 10
	}
	mid := sectors / 2
	scores[mid], clearance[mid] = 1, 1.0
	cmd, err := p.Plan(Input{Scores: scores, Clearance: clearance}, time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	if want := 1 - DefaultMaxDecel*DefaultPeriod.Seconds(); cmd.LinearX > want+1e-9 {
		t.Fatalf("from 1 m/s toward a target of 0.09 m/s: linear.x %v, want at most %v (MaxDecel over one period)", cmd.LinearX, want)
	}

	for _, s := range []float64{0, 0.9, 0.99} {
		p, err := New(Config{MaxSpeed: 2, MaxDecel: 1, Smoothing: s})
		if err != nil {
			t.Fatal(err)
		}
		wall, v, closest := 6.0, 0.0, 6.0
		now := time.Unix(0, 0)
		for range 400 {
			for i := range clearance {
				clearance[i] = float32(wall)
			}
			now = now.Add(100 * time.Millisecond)
			cmd, err := p.Plan(Input{Scores: scores, Clearance: clearance}, now)
			if err != nil {
				t.Fatal(err)
			}
			wall -= v * 0.1
			v = cmd.LinearX
			closest = min(closest, wall)
		}
		// The ramp's target reaches 0 at StopDistance: the robot creeps
		// up to it, never more than a few centimetres inside.
		if closest < DefaultStopDistance-0.05 || v > 0.01 {
			t.Fatalf("smoothing %v: came within %.2f m of the wall (StopDistance %v), speed now %v", s, closest, DefaultStopDistance, v)
		}
	}
}

// A tie within TieBand that the robot may not drive into (below MinScore,
// or blocked) never wins over a passable one: the straight-ahead sector a
// little lower stopped the robot in front of a passable gap (found in
// review). With no passable tie the highest score wins, and it stops.
func TestTieBandPrefersAPassableSector(t *testing.T) {
	p, err := New(Config{TieBand: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	n := p.Sectors()
	mid := n / 2
	for _, tc := range []struct {
		name      string
		scores    []float32
		clearance []float32
		sector    int
		mode      Mode
	}{
		{"straight ahead below MinScore", scoresWith(n, map[int]float32{mid: -0.04, mid + 1: 0.05}), scoresWith(n, map[int]float32{mid: 5, mid + 1: 5}), mid + 1, ModeCruise},
		{"straight ahead blocked", scoresWith(n, map[int]float32{mid: 0.95, mid + 1: 1}), scoresWith(n, map[int]float32{mid: 0.3, mid + 1: 5}), mid + 1, ModeCruise},
		{"straight ahead passable", scoresWith(n, map[int]float32{mid: 0.95, mid + 1: 1}), scoresWith(n, map[int]float32{mid: 5, mid + 1: 5}), mid, ModeCruise},
		{"no passable tie", scoresWith(n, map[int]float32{mid: -0.04, mid + 1: -0.01}), nil, mid + 1, ModeLowScore},
	} {
		p.Reset()
		if _, err := p.Plan(Input{Scores: tc.scores, Clearance: tc.clearance}, time.Unix(1, 0)); err != nil {
			t.Fatal(err)
		}
		if d := p.Decision(); d.Sector != tc.sector || d.Mode != tc.mode {
			t.Errorf("%s: sector %d, mode %v; want sector %d, %v", tc.name, d.Sector, d.Mode, tc.sector, tc.mode)
		}
	}
}

// scoresWith is n values of -1 (or 0.1 m of clearance), set where given.
func scoresWith(n int, set map[int]float32) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = -1
	}
	for i, v := range set {
		out[i] = v
	}
	return out
}
