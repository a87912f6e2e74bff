package planner

import (
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// checker follows a Planner from outside and checks every command against
// the documented invariants, computing dt itself.
type checker struct {
	t       testing.TB
	p       *Planner
	cfg     Config
	prev    Twist
	last    time.Time
	started bool
}

func newChecker(t testing.TB, cfg Config) *checker {
	return &checker{t: t, p: mustNew(t, cfg), cfg: cfg.WithDefaults()}
}

// plan runs one frame; label names it in failures.
func (c *checker) plan(in Input, now time.Time, label string) {
	c.t.Helper()
	cmd, err := c.p.Plan(in, now)
	wantErr := expectedError(in, len(c.cfg.SectorHeadingsDeg))
	if err != nil || wantErr != nil {
		if !errors.Is(err, wantErr) || wantErr == nil {
			c.t.Fatalf("%s: Plan error %v, want %v (scores %v, clearance %v)", label, err, wantErr, in.Scores, in.Clearance)
		}
		if !cmd.IsZero() || !c.p.Previous().IsZero() {
			c.t.Fatalf("%s: after error cmd %+v previous %+v, want zero", label, cmd, c.p.Previous())
		}
		c.prev, c.started = Twist{}, false
		return
	}
	if err := cmd.Valid(c.cfg.Limits()); err != nil {
		c.t.Fatalf("%s: %v (scores %v, clearance %v)", label, err, in.Scores, in.Clearance)
	}
	if cmd.LinearX < 0 {
		c.t.Fatalf("%s: reversing %v", label, cmd.LinearX)
	}
	dt := c.cfg.Period
	if c.started {
		dt = min(max(now.Sub(c.last), 0), c.cfg.MaxStep)
	}
	s := dt.Seconds()
	const eps = 1e-12
	dv, dw := cmd.LinearX-c.prev.LinearX, cmd.AngularZ-c.prev.AngularZ
	if dv > c.cfg.MaxAccel*s+eps || -dv > c.cfg.MaxDecel*s+eps || math.Abs(dw) > c.cfg.MaxYawAccel*s+eps {
		c.t.Fatalf("%s: dt %v: %+v → %+v breaks the acceleration limits (%v up, %v down, %v yaw)",
			label, dt, c.prev, cmd, c.cfg.MaxAccel, c.cfg.MaxDecel, c.cfg.MaxYawAccel)
	}
	c.prev, c.last, c.started = cmd, now, true
}

// retune gives the planner cfg, as an operator would while it runs. The
// checker caps its previous command to the new limits, as Retune
// documents: the acceleration limits then hold from the capped command.
func (c *checker) retune(cfg Config, label string) {
	c.t.Helper()
	if err := c.p.Retune(cfg); err != nil {
		c.t.Fatalf("%s: Retune: %v", label, err)
	}
	c.cfg = cfg.WithDefaults()
	c.cfg.SectorHeadingsDeg = c.p.Config().SectorHeadingsDeg
	c.prev.LinearX = min(c.prev.LinearX, c.cfg.MaxSpeed)
	c.prev.AngularZ = min(max(c.prev.AngularZ, -c.cfg.MaxYawRate), c.cfg.MaxYawRate)
}

// expectedError is the error class Plan must return for in, by the
// documented rules, computed independently of the planner.
func expectedError(in Input, s int) error {
	if len(in.Scores) != s || len(in.Clearance) != 0 && len(in.Clearance) != s {
		return ErrInput
	}
	for _, v := range append(append([]float32(nil), in.Scores...), in.Clearance...) {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return ErrNonFinite
		}
	}
	return nil
}

// randomValue draws from a distribution heavy in edge cases.
func randomValue(r *rand.Rand) float32 {
	switch r.IntN(20) {
	case 0:
		return float32(math.NaN())
	case 1:
		return float32(math.Inf(1))
	case 2:
		return float32(math.Inf(-1))
	case 3:
		return math.MaxFloat32 * float32(r.Float64()*2-1)
	case 4:
		return math.Float32frombits(r.Uint32N(1 << 23)) // denormal (or +0)
	case 5:
		return -math.Float32frombits(r.Uint32N(1 << 23))
	case 6:
		return float32(r.NormFloat64() * 1e-30)
	case 7:
		return 1 // ties
	}
	return float32(r.Float64()*2.4 - 1.2)
}

func randomInput(r *rand.Rand, s int, special bool) Input {
	n := s
	if special && r.IntN(50) == 0 {
		n = r.IntN(2 * s) // wrong length (or, rarely, right)
	}
	in := Input{Scores: make([]float32, n)}
	for i := range in.Scores {
		if special {
			in.Scores[i] = randomValue(r)
		} else {
			in.Scores[i] = float32(r.Float64()*2 - 1)
		}
	}
	if r.IntN(2) == 0 {
		in.Clearance = make([]float32, s)
		for i := range in.Clearance {
			if special {
				in.Clearance[i] = randomValue(r) * 8
			} else {
				in.Clearance[i] = float32(r.Float64() * 8)
			}
		}
	}
	return in
}

// randomStep draws the next clock reading: mostly frame periods, sometimes
// zero, negative, tiny or huge steps.
func randomStep(r *rand.Rand, now time.Time) time.Time {
	switch r.IntN(12) {
	case 0:
		return now
	case 1:
		return now.Add(-time.Duration(r.Int64N(int64(time.Hour))))
	case 2:
		return now.Add(time.Duration(r.Int64N(1000)))
	case 3:
		return now.Add(time.Duration(r.Int64N(int64(24 * time.Hour))))
	case 4:
		return now.Add(math.MaxInt64) // saturates
	}
	return now.Add(time.Duration(r.Int64N(int64(120 * time.Millisecond))))
}

func randomConfig(r *rand.Rand) Config {
	stop := 0.1 + r.Float64()*2
	c := Config{
		MaxSpeed: 0.1 + r.Float64()*3, MaxYawRate: 0.1 + r.Float64()*3,
		MaxAccel: 0.05 + r.Float64()*5, MaxDecel: 0.05 + r.Float64()*10, MaxYawAccel: 0.05 + r.Float64()*10,
		StopDistance: stop, SlowDistance: stop + 0.01 + r.Float64()*5,
		TurnInPlace: r.IntN(2) == 0, HeadingGain: 0.1 + r.Float64()*5,
		Smoothing: r.Float64() * 0.99, MinScore: r.Float64()*2 - 1, TieBand: r.Float64() * 0.2,
		ScoreClearanceM: 0.5 + r.Float64()*10,
		Period:          time.Duration(1+r.IntN(200)) * time.Millisecond,
	}
	c.MaxStep = c.Period * time.Duration(1+r.IntN(5))
	if r.IntN(4) == 0 {
		c = Config{} // defaults
	}
	return c
}

func TestRandomSequencesStayWithinLimits(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3, 42, 2025} {
		r := rand.New(rand.NewPCG(seed, seed*0x9e3779b97f4a7c15))
		for run := range 20 {
			cfg := randomConfig(r)
			c := newChecker(t, cfg)
			now := t0
			special := run%2 == 1
			for frame := range 500 {
				now = randomStep(r, now)
				label := "seed " + itoa(seed) + " run " + itoa(uint64(run)) + " frame " + itoa(uint64(frame))
				c.plan(randomInput(r, len(cfg.WithDefaults().SectorHeadingsDeg), special), now, label)
				if r.IntN(100) == 0 {
					c.p.Reset()
					c.prev, c.started = Twist{}, false
				}
			}
		}
	}
}

// TestRandomRetunesStayWithinLimits changes the settings while the
// planner runs: every command lies within the limits of its time, and the
// acceleration limits hold from the previous command (capped when a limit
// was lowered under it).
func TestRandomRetunesStayWithinLimits(t *testing.T) {
	for _, seed := range []uint64{5, 6, 77} {
		r := rand.New(rand.NewPCG(seed, seed^0x5bd1e995))
		for run := range 10 {
			cfg := randomConfig(r)
			c := newChecker(t, cfg)
			sectors := len(cfg.WithDefaults().SectorHeadingsDeg)
			now := t0
			retunes := 0
			special := run%2 == 1 // bad inputs and odd clock steps too
			for frame := range 1000 {
				label := "seed " + itoa(seed) + " run " + itoa(uint64(run)) + " frame " + itoa(uint64(frame))
				if r.IntN(20) == 0 {
					next := randomConfig(r)
					next.SectorHeadingsDeg = []float64{0} // ignored: the sectors stay
					c.retune(next, label)
					retunes++
				}
				if special {
					now = randomStep(r, now)
				} else {
					now = now.Add(time.Duration(r.Int64N(int64(150 * time.Millisecond))))
				}
				c.plan(randomInput(r, sectors, special), now, label)
			}
			if retunes == 0 {
				t.Fatalf("seed %d run %d: no retune drawn", seed, run)
			}
		}
	}
}

func itoa(v uint64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + v%10)
		if v /= 10; v == 0 {
			return string(b[i:])
		}
	}
}

// TestRandomPlansReachTheirTarget: without special values and with a steady
// clock, the command converges to the target: the limits slow it down but
// never stall it.
func TestRandomPlansReachTheirTarget(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	for run := range 200 {
		p := mustNew(t, Config{})
		in := randomInput(r, 9, false)
		var cmd Twist
		now := t0
		for range 100 { // 10 s: enough for 1 m/s at 0.5 m/s²
			var err error
			if cmd, err = p.Plan(in, now); err != nil {
				t.Fatal(err)
			}
			now = now.Add(100 * time.Millisecond)
		}
		target := p.Decision().Target
		if math.Abs(cmd.LinearX-target.LinearX) > 1e-9 || math.Abs(cmd.AngularZ-target.AngularZ) > 1e-9 {
			t.Fatalf("run %d: after 10 s cmd %+v, target %+v", run, cmd, target)
		}
	}
}

// FuzzPlan feeds arbitrary bytes as scores, clearances and clock steps.
func FuzzPlan(f *testing.F) {
	f.Add([]byte{0, 0, 0x80, 0x3f}, int64(100e6), false)                  // 1.0
	f.Add([]byte{0, 0, 0xc0, 0x7f, 0, 0, 0x80, 0x7f}, int64(0), true)     // NaN, +Inf
	f.Add([]byte{1, 0, 0, 0, 0xff, 0xff, 0x7f, 0x7f}, int64(-1e9), true)  // denormal, MaxFloat32
	f.Add(make([]byte, 72), int64(math.MaxInt64), false)                  // zeros
	f.Add([]byte{0xff, 0xff, 0x7f, 0xff, 0, 0, 0, 0x80}, int64(1), false) // −MaxFloat32, −0
	f.Fuzz(func(t *testing.T, data []byte, step int64, withClearance bool) {
		c := newChecker(t, Config{Smoothing: 0.5, TurnInPlace: true})
		now := t0
		for frame := 0; len(data) > 0 && frame < 50; frame++ {
			in := Input{Scores: make([]float32, 9)}
			for i := range in.Scores {
				in.Scores[i] = takeFloat(&data)
			}
			if withClearance {
				in.Clearance = make([]float32, 9)
				for i := range in.Clearance {
					in.Clearance[i] = takeFloat(&data)
				}
			}
			now = now.Add(time.Duration(step))
			c.plan(in, now, "frame "+itoa(uint64(frame)))
			step = step*6364136223846793005 + 1442695040888963407 // vary dt
		}
	})
}

func takeFloat(data *[]byte) float32 {
	var b [4]byte
	n := copy(b[:], *data)
	*data = (*data)[n:]
	return math.Float32frombits(binary.LittleEndian.Uint32(b[:]))
}
