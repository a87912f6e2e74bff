package camera

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/zerohop/zerohop/handles"
	"github.com/zerohop/zerohop/monotime"
	"github.com/zerohop/zerohop/pinned"
	"github.com/zerohop/zerohop/sensor"
)

func msDurations(v ...int64) []time.Duration {
	out := make([]time.Duration, len(v))
	for i, x := range v {
		out[i] = time.Duration(x) * time.Millisecond
	}
	return out
}

// The recorded-timing pacer, with the clock as an argument: on time it
// waits for the next frame's absolute time; a frame that overran catches
// up without moving the timeline; after a stall the missed frame times are
// counted and the timeline moves, so the frames that follow keep their
// intervals rather than go out in a burst.
func TestRecordedPacer(t *testing.T) {
	const base = int64(1_000_000_000) // the start, monotonic ns
	ms := int64(time.Millisecond)
	type step struct {
		seq        uint64 // the frame that just went out
		now        int64  // after base
		wantWait   time.Duration
		wantMissed uint64
		wantShift  int64 // the timeline's move, in total, after base
	}
	for _, tc := range []struct {
		name    string
		offsets []time.Duration
		loop    bool
		steps   []step
	}{
		{"on time: each wait is to the next frame's absolute time", msDurations(0, 100, 250, 300), false, []step{
			{0, 3 * ms, 97 * time.Millisecond, 0, 0},
			{1, 101 * ms, 149 * time.Millisecond, 0, 0},
			{2, 250 * ms, 50 * time.Millisecond, 0, 0},
		}},
		// Frame 2 (due at 250) is 10 ms late, before frame 3's 300:
		// it goes out at once, and frame 3 keeps its time (no drift).
		{"a frame that overran catches up", msDurations(0, 100, 250, 300), false, []step{
			{1, 260 * ms, 0, 0, 0},
			{2, 262 * ms, 38 * time.Millisecond, 0, 0},
		}},
		// Frames 1, 2 and 3 are all due at 320: frame 1 goes out at
		// once, the times of 2 and 3 are missed, and the timeline moves
		// by 220 ms so that frame 2 follows frame 1 150 ms later.
		{"a stall: missed times counted, the timeline moves", msDurations(0, 100, 250, 300), false, []step{
			{0, 320 * ms, 0, 2, 220 * ms},
			{1, 321 * ms, 149 * time.Millisecond, 0, 220 * ms},
			{2, 470 * ms, 50 * time.Millisecond, 0, 220 * ms},
		}},
		// Frames recorded at the same time are not late for each other.
		{"equal times are not late", msDurations(0, 0, 0, 90), false, []step{
			{0, 1 * ms, 0, 0, 0},
			{1, 2 * ms, 0, 0, 0},
			{2, 3 * ms, 87 * time.Millisecond, 0, 0},
		}},
		// Looping, a lap is 300 + the median interval 100: frame 4 (lap 2's
		// first) is due at 400.
		{"looping: the next lap after the median interval", msDurations(0, 100, 250, 300), true, []step{
			{3, 301 * ms, 99 * time.Millisecond, 0, 0},
			{4, 401 * ms, 99 * time.Millisecond, 0, 0},
		}},
		// A 10 s stall at frame 0: frames due by then are 25 laps of 4
		// and frame 100; all but frame 1 are missed.
		{"a long stall across laps", msDurations(0, 100, 250, 300), true, []step{
			{0, 10_000 * ms, 0, 99, 9_900 * ms},
			{1, 10_001 * ms, 149 * time.Millisecond, 0, 9_900 * ms},
		}},
		{"the last frame of a recording that does not loop waits for nothing", msDurations(0, 100), false, []step{
			{1, 150 * ms, 0, 0, 0},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := sensor.NewSchedule(tc.offsets, 1, tc.loop)
			if err != nil {
				t.Fatal(err)
			}
			p := recordedPacer{sched: s, base: base}
			for _, st := range tc.steps {
				wait, missed := p.next(st.seq, base+st.now)
				if wait != st.wantWait || missed != st.wantMissed || p.base-base != st.wantShift {
					t.Errorf("after frame %d at %v: wait %v, missed %d, timeline moved %v; want %v, %d, %v",
						st.seq, time.Duration(st.now), wait, missed, time.Duration(p.base-base), st.wantWait, st.wantMissed, time.Duration(st.wantShift))
				}
			}
		})
	}
}

func TestRecordedPacerDoesNotAllocate(t *testing.T) {
	s, err := sensor.NewSchedule(msDurations(0, 100, 250, 300), 1, true)
	if err != nil {
		t.Fatal(err)
	}
	p := recordedPacer{sched: s}
	seq, now := uint64(0), int64(0)
	if a := testing.AllocsPerRun(100, func() {
		p.next(seq, now)
		seq++
		now += int64(120 * time.Millisecond)
	}); a != 0 {
		t.Errorf("recordedPacer.next: %v allocations per frame, want 0", a)
	}
}

// countingSource is a one-point, image-less source of n frames (0:
// endless) whose frame stallAt (if not 0) takes stall to fill, ending at
// stallEnd (monotonic ns).
type countingSource struct {
	n        uint64
	stallAt  uint64
	stall    time.Duration
	stallEnd int64
}

func (s *countingSource) MaxPoints() int     { return 1 }
func (s *countingSource) MaxImageBytes() int { return 0 }
func (s *countingSource) Frames() uint64     { return s.n }
func (s *countingSource) FillImage(uint64, []byte) (sensor.ImageInfo, error) {
	return sensor.ImageInfo{}, nil
}
func (s *countingSource) FillPoints(seq uint64, dst []byte) (int, error) {
	if s.stallAt != 0 && seq == s.stallAt {
		time.Sleep(s.stall) // a stalled camera, not a timing assertion
		s.stallEnd = monotime.Now()
	}
	clear(dst[:sensor.PointStep])
	return 1, nil
}

// publishTimes records when each frame was published (monotonic ns) and
// releases its slot.
type publishTimes struct {
	cam *Camera
	at  []int64
}

func (p *publishTimes) Publish(topic int, slot pinned.Slot, h *handles.Handle) (int, error) {
	p.at = append(p.at, monotime.Now())
	_, err := p.cam.Pool(topic).Publish(slot, 0)
	return 0, err
}

// Run with a Schedule publishes frame k no earlier than its time after
// the start (timers never fire early, so this lower bound cannot flake),
// though --rate would be far faster; after a stall, the frames that follow
// keep their intervals (no burst) and the missed times count as late.
func TestRunPacesByTheSchedule(t *testing.T) {
	t.Run("each frame at its recorded time", func(t *testing.T) {
		offsets := msDurations(0, 20, 50, 60)
		s, err := sensor.NewSchedule(offsets, 1, false)
		if err != nil {
			t.Fatal(err)
		}
		c, err := New(Config{Source: &countingSource{n: 4}, Rate: 10000, Schedule: s, Slots: 4})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		pub := &publishTimes{cam: c}
		start := monotime.Now()
		if err := c.Run(context.Background(), pub); err != nil {
			t.Fatal(err)
		}
		if len(pub.at) != len(offsets) {
			t.Fatalf("%d frames published, want %d", len(pub.at), len(offsets))
		}
		for k, at := range pub.at {
			if got := time.Duration(at - start); got < offsets[k] {
				t.Errorf("frame %d published %v after the start, before its time %v", k, got, offsets[k])
			}
		}
	})
	t.Run("a stall", func(t *testing.T) {
		const interval = 10 * time.Millisecond
		s, err := sensor.NewSchedule(msDurations(0, 10, 20, 30), 1, true)
		if err != nil {
			t.Fatal(err)
		}
		src := &countingSource{stallAt: 3, stall: 25 * interval}
		c, err := New(Config{Source: src, Rate: 10000, Schedule: s, Slots: 4, Frames: 10})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		pub := &publishTimes{cam: c}
		if err := c.Run(context.Background(), pub); err != nil {
			t.Fatal(err)
		}
		if late := c.Stats().Late; late < 20 {
			t.Errorf("late %d after a frame that took 25 intervals; want about 24", late)
		}
		if len(pub.at) != 10 {
			t.Fatalf("%d frames published, want 10", len(pub.at))
		}
		// Frame 4 is due when the stall has ended, frames 5 to 9 each an
		// interval later: frame 9 no sooner than 50 ms after the stall.
		if d := time.Duration(pub.at[9] - src.stallEnd); d < 5*interval {
			t.Errorf("frames 4 to 9 went out within %v after the stall: a burst, want them %v apart", d, interval)
		}
	})
}

// ReplaySchedule decides the pacing, with one line saying which and why.
func TestReplaySchedule(t *testing.T) {
	points := func(t *testing.T, dir string, n int) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(dir, "velodyne"), 0o755); err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if err := os.WriteFile(filepath.Join(dir, "velodyne", strings.Repeat("0", 5)+string(rune('0'+i))+".bin"), make([]byte, sensor.PointStep), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, tc := range []struct {
		name      string
		frames    int
		times     string // DIR/times.txt; "" for none
		timing    string
		speed     float64
		loop      bool
		wantSched bool
		wantLevel zapcore.Level
		wantLog   []string // in the line's message and fields
		wantErr   []string // "" for none
	}{
		{"auto with timestamps: recorded", 3, "0\n0.1\n0.3\n", ReplayTimingAuto, 0, false, true, zapcore.InfoLevel,
			[]string{"replay timing: recorded", "--replay-timing auto: the recording has a timestamps file", "times.txt", "median_interval=100ms"}, nil},
		{"recorded, twice as fast, looping", 3, "0\n0.1\n0.3\n", ReplayTimingRecorded, 2, true, true, zapcore.InfoLevel,
			[]string{"replay timing: recorded", "median_interval=50ms", "speed=2"}, nil},
		{"auto without timestamps: the rate", 3, "", ReplayTimingAuto, 0, false, false, zapcore.InfoLevel,
			[]string{"replay timing: fixed rate", "no timestamps file (looked for", "times.txt", "frames at --rate 30 Hz"}, nil},
		{"recorded without timestamps is refused", 3, "", ReplayTimingRecorded, 0, false, false, 0, nil,
			[]string{"--replay-timing recorded: no timestamps file (looked for", "--replay-timing rate"}},
		{"a speed without timestamps is refused", 3, "", ReplayTimingAuto, 2, false, false, 0, nil,
			[]string{"--replay-speed 2: only with recorded timing", "no timestamps file"}},
		{"rate reads no timestamps, not even broken ones", 3, "broken\n", ReplayTimingRate, 0, false, false, zapcore.InfoLevel,
			[]string{"replay timing: fixed rate", "--replay-timing rate"}, nil},
		{"broken timestamps are refused, naming file, line and value, and the way out", 3, "0\n0.1\nx\n", ReplayTimingAuto, 0, false, false, 0, nil,
			[]string{"times.txt", "timestamps line 3", `"x"`, "--replay-timing rate plays the frames at --rate"}},
		{"more timestamps than frames named by number: their lines, no warning", 2, "0\n0.1\n0.3\n", ReplayTimingAuto, 0, false, true, zapcore.InfoLevel,
			[]string{"replay timing: recorded", "span=100ms"}, nil},
		{"one frame under auto: the rate", 1, "0\n", ReplayTimingAuto, 0, false, false, zapcore.InfoLevel,
			[]string{"replay timing: fixed rate", "times one frame"}, nil},
		{"one frame under recorded is refused", 1, "0\n", ReplayTimingRecorded, 0, true, false, 0, nil,
			[]string{"--replay-timing recorded", "times one frame"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			points(t, dir, tc.frames)
			if tc.times != "" {
				if err := os.WriteFile(filepath.Join(dir, "times.txt"), []byte(tc.times), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			core, logs := observer.New(zapcore.DebugLevel)
			cfg := NodeConfig{Source: "replay:" + dir, ReplayTiming: tc.timing, ReplaySpeed: tc.speed, Loop: tc.loop}
			err := CheckReplayTiming("--source", cfg.Source, cfg.ReplayTiming, cfg.ReplaySpeed)
			var src sensor.Source
			if err == nil {
				src, err = OpenSource(context.Background(), "--source", cfg.Source, cfg)
			}
			var sched *sensor.Schedule
			if err == nil {
				sched, err = ReplaySchedule(src, cfg, zap.New(core))
			}
			if tc.wantErr != nil {
				for _, w := range tc.wantErr {
					if err == nil || !strings.Contains(err.Error(), w) {
						t.Errorf("err %v, want it to say %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (sched != nil) != tc.wantSched {
				t.Errorf("schedule %v, want one: %t", sched, tc.wantSched)
			}
			all := logs.All()
			if len(all) != 1 {
				t.Fatalf("%d log lines, want 1: %v", len(all), all)
			}
			line := all[0].Message
			for k, v := range all[0].ContextMap() {
				line += " " + k + "=" + fmt.Sprint(v)
			}
			if all[0].Level != tc.wantLevel {
				t.Errorf("log level %v, want %v: %s", all[0].Level, tc.wantLevel, line)
			}
			for _, w := range tc.wantLog {
				if !strings.Contains(line, w) {
					t.Errorf("log line %q, want it to say %q", line, w)
				}
			}
		})
	}
}

// --replay-timing and --replay-speed are checked before anything is
// read, each refusal naming its flag and value.
func TestCheckReplayTiming(t *testing.T) {
	for _, tc := range []struct {
		flag, source, timing string // flag "": --source
		speed                float64
		want                 string // "" for none
	}{
		{"", "replay:/d", ReplayTimingAuto, 1, ""},
		{"", "replay:/d", ReplayTimingRecorded, 0.5, ""},
		{"", "replay:/d", ReplayTimingRate, 0, ""},
		{"", "replay:/d", "", 0, ""},
		{"", "synthetic", ReplayTimingAuto, 1, ""},
		{"", "ros2", ReplayTimingRate, 0, ""},
		{"", "replay:/d", "recorded ", 1, `--replay-timing "recorded ": want "auto", "recorded" or "rate"`},
		{"", "replay:/d", "Recorded", 1, `--replay-timing "Recorded"`},
		{"", "replay:/d", ReplayTimingAuto, 0.001, "--replay-speed 0.001: want 0.01 to 100"},
		{"", "replay:/d", ReplayTimingAuto, -1, "--replay-speed -1: want 0.01 to 100"},
		{"", "replay:/d", ReplayTimingAuto, 1e9, "--replay-speed 1e+09: want 0.01 to 100"},
		{"", "replay:/d", ReplayTimingRate, 2, "--replay-speed 2: only with recorded timing"},
		{"", "synthetic", ReplayTimingRecorded, 1, `--replay-timing recorded: only a replay (--source replay:DIR) has recorded timing, not --source "synthetic"`},
		{"", "ros2", ReplayTimingRecorded, 1, `not --source "ros2"`},
		{"", "synthetic", ReplayTimingAuto, 2, `--replay-speed 2: only for a replay`},
		// The agent's in-process camera: "" subscribes to a camera process.
		{"--camera", "", ReplayTimingAuto, 1, ""},
		{"--camera", "replay:/d", ReplayTimingRecorded, 2, ""},
		{"--camera", "", ReplayTimingRecorded, 1, `--replay-timing recorded: only a replay (--camera replay:DIR) has recorded timing, and --camera is not given`},
		{"--camera", "synthetic", ReplayTimingAuto, 0.5, `--replay-speed 0.5: only for a replay (--camera replay:DIR) with recorded timing, not --camera "synthetic"`},
	} {
		flag := cmp.Or(tc.flag, "--source")
		err := CheckReplayTiming(flag, tc.source, tc.timing, tc.speed)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("CheckReplayTiming(%q, %q, %q, %g) = %v, want %q", flag, tc.source, tc.timing, tc.speed, err, tc.want)
		}
	}
}

// TestReplayScheduleWarnsOfExtraLines: frames not named by number take
// the first lines, one each, and more lines than frames is said in a
// warning (frames missing from the end, or files that do not go with
// the lines).
func TestReplayScheduleWarnsOfExtraLines(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "velodyne"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"scan_a.bin", "scan_b.bin"} {
		if err := os.WriteFile(filepath.Join(dir, "velodyne", name), make([]byte, sensor.PointStep), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "times.txt"), []byte("0\n0.1\n0.3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zapcore.DebugLevel)
	cfg := NodeConfig{Source: "replay:" + dir, ReplayTiming: ReplayTimingAuto}
	src, err := OpenSource(context.Background(), "--source", cfg.Source, cfg)
	if err != nil {
		t.Fatal(err)
	}
	sched, err := ReplaySchedule(src, cfg, zap.New(core))
	if err != nil || sched == nil {
		t.Fatalf("schedule %v, %v", sched, err)
	}
	if sched.Span() != 100*time.Millisecond {
		t.Errorf("span %v, want the first two lines' 100ms", sched.Span())
	}
	all := logs.FilterLevelExact(zapcore.WarnLevel).All()
	if len(all) != 1 || !strings.Contains(fmt.Sprint(all[0].ContextMap()), "3 timestamps for 2 frames: the first 2 are used") {
		t.Errorf("warnings %v, want one saying the first 2 of 3 timestamps are used", all)
	}
}
