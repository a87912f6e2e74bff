package sensor

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// writeFile writes content to dir/name, making dir/name's folder.
func writeFile(t *testing.T, dir, name, content string) {
	t.Helper()
	path := filepath.Join(dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// threeFrames puts three KITTI .bin clouds in dir/points (and three PNG
// images in dir/images, unless images is "").
func threeFrames(t *testing.T, dir, points, images string) {
	t.Helper()
	for _, sub := range []string{points, images} {
		if sub != "" {
			if err := os.MkdirAll(filepath.Join(dir, filepath.FromSlash(sub)), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, name := range []string{"000000", "000001", "000002"} {
		copyTestFile(t, filepath.Join(mixedDir, "000000.bin"), filepath.Join(dir, filepath.FromSlash(points)), name+".bin")
		if images != "" {
			copyTestFile(t, filepath.Join(mixedDir, "000000.png"), filepath.Join(dir, filepath.FromSlash(images)), name+".png")
		}
	}
}

// Timestamps in KITTI's three places and the flat folder's two names, in
// both formats, are read once at NewReplay, one per frame.
func TestReplayTimestamps(t *testing.T) {
	const (
		raw  = "2011-09-26 13:02:25.964389445\n2011-09-26 13:02:26.064389445\n2011-09-26 13:02:26.264389446\n"
		odom = "0.000000e+00\n1.036000e-01\n2.073000e-01\n"
		imgs = "2011-09-26 13:02:25.000000000\n2011-09-26 13:02:25.500000000\n2011-09-26 13:02:26.000000000\n"
	)
	rawOffsets := []time.Duration{0, 100 * time.Millisecond, 300*time.Millisecond + 1}
	odomOffsets := []time.Duration{0, 103600 * time.Microsecond, 207300 * time.Microsecond}
	for _, tc := range []struct {
		name          string
		points        string            // the point folder under DIR ("." for DIR)
		images        string            // the image folder under DIR ("" for none)
		open          string            // what NewReplay is given, under DIR
		files         map[string]string // timestamps files under DIR
		cfg           ReplayConfig
		wantFile      string // under DIR; "" for none found
		wantOffsets   []time.Duration
		wantLines     int
		wantSearchedN int // where it looked
	}{
		{"KITTI raw drive: velodyne_points/timestamps.txt, not image_02's", "velodyne_points/data", "image_02/data", ".",
			map[string]string{"velodyne_points/timestamps.txt": raw, "image_02/timestamps.txt": imgs}, ReplayConfig{},
			"velodyne_points/timestamps.txt", rawOffsets, 3, 6},
		{"KITTI raw drive without velodyne timestamps: image_02's", "velodyne_points/data", "image_02/data", ".",
			map[string]string{"image_02/timestamps.txt": imgs}, ReplayConfig{},
			"image_02/timestamps.txt", []time.Duration{0, 500 * time.Millisecond, time.Second}, 3, 6},
		{"KITTI raw data folder given itself", "velodyne_points/data", "", "velodyne_points/data",
			map[string]string{"velodyne_points/timestamps.txt": raw}, ReplayConfig{},
			"velodyne_points/timestamps.txt", rawOffsets, 3, 3},
		{"KITTI odometry sequence: times.txt", "velodyne", "image_2", ".",
			map[string]string{"times.txt": odom}, ReplayConfig{},
			"times.txt", odomOffsets, 3, 5},
		{"KITTI odometry velodyne folder given itself", "velodyne", "", "velodyne",
			map[string]string{"times.txt": odom}, ReplayConfig{},
			"times.txt", odomOffsets, 3, 3},
		{"flat folder: timestamps.txt in seconds, CRLF, blank lines at the end", ".", ".", ".",
			map[string]string{"timestamps.txt": "  1317046945.5\r\n1317046945.6 \r\n1317046945.8\r\n\r\n\n"}, ReplayConfig{},
			"timestamps.txt", []time.Duration{0, 100 * time.Millisecond, 300 * time.Millisecond}, 3, 2},
		{"flat folder: times.txt", ".", "", ".",
			map[string]string{"times.txt": odom}, ReplayConfig{},
			"times.txt", odomOffsets, 3, 2},
		{"flat folder: timestamps.txt before times.txt", ".", "", ".",
			map[string]string{"timestamps.txt": raw, "times.txt": "garbage\n"}, ReplayConfig{},
			"timestamps.txt", rawOffsets, 3, 2},
		{"more lines than frames: the first are used", "velodyne", "", ".",
			map[string]string{"times.txt": odom + "3.1e-01\n4.2e-01\n"}, ReplayConfig{},
			"times.txt", odomOffsets, 5, 3},
		{"equal times are allowed", ".", "", ".",
			map[string]string{"times.txt": "1\n1\n2\n"}, ReplayConfig{},
			"times.txt", []time.Duration{0, 0, time.Second}, 3, 2},
		{"no timestamps file", "velodyne_points/data", "image_02/data", ".",
			nil, ReplayConfig{}, "", nil, 0, 6},
		{"NoTimestamps reads no file, not even a broken one", "velodyne", "", ".",
			map[string]string{"times.txt": "broken\n"}, ReplayConfig{NoTimestamps: true}, "", nil, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			threeFrames(t, dir, tc.points, tc.images)
			for name, content := range tc.files {
				writeFile(t, dir, name, content)
			}
			r, err := NewReplay(filepath.Join(dir, filepath.FromSlash(tc.open)), tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if r.Frames() != 3 {
				t.Fatalf("%d frames, want 3: fix the test", r.Frames())
			}
			ts, ok := r.Timestamps()
			if searched := r.TimestampsSearched(); len(searched) != tc.wantSearchedN {
				t.Errorf("looked in %q, want %d places", searched, tc.wantSearchedN)
			}
			if tc.wantFile == "" {
				if ok || ts.File != "" || ts.Offsets != nil {
					t.Fatalf("Timestamps() = %+v, %t; want none", ts, ok)
				}
				return
			}
			want := filepath.Join(dir, filepath.FromSlash(tc.wantFile))
			if !ok || filepath.Clean(ts.File) != want {
				t.Fatalf("Timestamps() from %q (%t), want %q", ts.File, ok, want)
			}
			if !slices.Equal(ts.Offsets, tc.wantOffsets) || ts.Lines != tc.wantLines {
				t.Errorf("offsets %v, %d lines; want %v, %d", ts.Offsets, ts.Lines, tc.wantOffsets, tc.wantLines)
			}
		})
	}
}

// The committed mixed folder's timestamps.txt (KITTI raw's format) times
// its four frames.
func TestReplayTimestampsOfTheMixedTestdata(t *testing.T) {
	r, err := NewReplay(mixedDir, ReplayConfig{})
	if err != nil {
		t.Fatal(err)
	}
	ts, ok := r.Timestamps()
	if !ok || ts.File != filepath.Join(mixedDir, "timestamps.txt") || !slices.Equal(ts.Offsets, mixedOffsets()) {
		t.Fatalf("Timestamps() = %+v, %t; want %v from timestamps.txt", ts, ok, mixedOffsets())
	}
}

// A defective timestamps file fails NewReplay with an error naming the
// file, the line and the value.
func TestReplayTimestampsErrors(t *testing.T) {
	for _, tc := range []struct {
		name     string
		content  string
		wantLine int
		want     []string
	}{
		{"not a time", "abc\n0.1\n0.2\n", 1, []string{`"abc" is neither seconds`}},
		{"bad seconds on a later line", "0.0\n0.1\n0.2x\n", 3, []string{`"0.2x" is not seconds`}},
		{"a date among seconds", "0.0\n2011-09-26 13:02:25.964389445\n0.2\n", 2, []string{`"2011-09-26 13:02:25.964389445" is not seconds`}},
		{"seconds among dates", "2011-09-26 13:02:25.964389445\n2011-09-26 13:02:26.064389445\n0.2\n", 3, []string{`"0.2" is not a date and time`}},
		{"a bad date", "2011-09-26 13:02:25.9\n2011-13-26 13:02:26.0\n2011-09-26 13:02:26.1\n", 2, []string{`"2011-13-26 13:02:26.0" is not a date`}},
		{"decreasing seconds", "0.0\n0.2\n0.1\n", 3, []string{`"0.1" is before line 2's "0.2"`, "must not decrease"}},
		{"decreasing dates", "2011-09-26 13:02:26.0\n2011-09-26 13:02:25.9\n2011-09-26 13:02:26.1\n", 2,
			[]string{`"2011-09-26 13:02:25.9" is before line 1's "2011-09-26 13:02:26.0"`}},
		{"NaN seconds", "0\nNaN\n2\n", 2, []string{`"NaN" seconds is out of range`}},
		{"infinite seconds", "0\n1\n+Inf\n", 3, []string{`"+Inf" seconds is out of range`}},
		{"a blank line", "0\n\n2\n3\n", 2, []string{"empty line"}},
		{"fewer lines than frames", "0\n1\n", 0, []string{"2 timestamps for 3 frames"}},
		{"an empty file", "", 0, []string{"0 timestamps for 3 frames"}},
		{"all the same time", "5\n5\n5\n", 0, []string{`all "5"`, "do not advance"}},
		// A clock set mid-recording: the camera would wait 41 years.
		{"a first time before the clock was set", "0.0\n1317000000.1\n1317000000.2\n", 2,
			[]string{`"1317000000.1" is 365833h20m0.1s after line 1's "0.0"`, "more than 1m0s", "--replay-timing rate"}},
		{"a gap of 100 median intervals and more", "0.0\n0.1\n90.1\n", 3, []string{`"90.1" is 1m30s after line 2's "0.1", more than 1m0s`}},
		{"centuries between dates", "1700-01-01 00:00:00.0\n2200-01-01 00:00:00.0\n2200-01-01 00:00:00.1\n", 2, []string{`"2200-01-01 00:00:00.0" is`, "more than"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			threeFrames(t, dir, "velodyne", "")
			writeFile(t, dir, "times.txt", tc.content)
			path := filepath.Join(dir, "times.txt")
			for _, preload := range []bool{false, true} {
				_, err := NewReplay(dir, ReplayConfig{Preload: preload})
				var te *TimestampsError
				if !errors.As(err, &te) {
					t.Fatalf("NewReplay: %v, want a *TimestampsError", err)
				}
				if filepath.Clean(te.File) != path || te.Line != tc.wantLine {
					t.Errorf("error in %q line %d, want %q line %d", te.File, te.Line, path, tc.wantLine)
				}
				msg := err.Error()
				wantPrefix := `replay: "` + te.File + `": timestamps`
				if tc.wantLine > 0 {
					wantPrefix += " line " + strconv.Itoa(tc.wantLine) + ": "
				}
				if !strings.HasPrefix(msg, wantPrefix) {
					t.Errorf("error %q, want it to begin %q", msg, wantPrefix)
				}
				for _, w := range tc.want {
					if !strings.Contains(msg, w) {
						t.Errorf("error %q, want it to say %q", msg, w)
					}
				}
			}
		})
	}
}

func ms(v ...int64) []time.Duration {
	out := make([]time.Duration, len(v))
	for i, x := range v {
		out[i] = time.Duration(x) * time.Millisecond
	}
	return out
}

// The schedule is pure arithmetic: each frame's time after the start, the
// loop's laps, the speed, and the number of frames due by a time.
func TestSchedule(t *testing.T) {
	for _, tc := range []struct {
		name         string
		offsets      []time.Duration
		speed        float64
		loop         bool
		wantInterval time.Duration
		at           map[uint64]time.Duration // seq → due
		due          map[time.Duration]uint64 // elapsed → frames due
	}{
		{"as recorded", ms(0, 100, 250, 300), 1, false, 100 * time.Millisecond,
			map[uint64]time.Duration{0: 0, 1: 100 * time.Millisecond, 2: 250 * time.Millisecond, 3: 300 * time.Millisecond, 4: 300 * time.Millisecond, math.MaxUint64: 300 * time.Millisecond},
			map[time.Duration]uint64{-1: 0, 0: 1, 99 * time.Millisecond: 1, 100 * time.Millisecond: 2, 299 * time.Millisecond: 3, 300 * time.Millisecond: 4, time.Hour: 4}},
		{"offsets not from 0 are taken from the first", ms(1000, 1100, 1250, 1300), 1, false, 100 * time.Millisecond,
			map[uint64]time.Duration{0: 0, 3: 300 * time.Millisecond}, nil},
		{"twice as fast", ms(0, 100, 250, 300), 2, false, 50 * time.Millisecond,
			map[uint64]time.Duration{1: 50 * time.Millisecond, 2: 125 * time.Millisecond, 3: 150 * time.Millisecond}, nil},
		{"half speed", ms(0, 100, 250, 300), 0.5, false, 200 * time.Millisecond,
			map[uint64]time.Duration{1: 200 * time.Millisecond, 3: 600 * time.Millisecond}, nil},
		// Intervals 100, 150, 50: median 100; a lap is 300 + 100.
		{"looping: the next lap starts one median interval after the last frame", ms(0, 100, 250, 300), 1, true, 100 * time.Millisecond,
			map[uint64]time.Duration{3: 300 * time.Millisecond, 4: 400 * time.Millisecond, 5: 500 * time.Millisecond, 6: 650 * time.Millisecond, 7: 700 * time.Millisecond, 8: 800 * time.Millisecond, 4001: 400100 * time.Millisecond},
			map[time.Duration]uint64{300 * time.Millisecond: 4, 399 * time.Millisecond: 4, 400 * time.Millisecond: 5, 800 * time.Millisecond: 9}},
		// Intervals 100, 200, 100: the median 100, not the mean 133.
		{"the loop gap is the median interval", ms(0, 100, 300, 400), 1, true, 100 * time.Millisecond,
			map[uint64]time.Duration{4: 500 * time.Millisecond, 5: 600 * time.Millisecond}, nil},
		{"looping twice as fast", ms(0, 100, 250, 300), 2, true, 50 * time.Millisecond,
			map[uint64]time.Duration{4: 200 * time.Millisecond, 5: 250 * time.Millisecond}, nil},
		// Intervals 0, 0, 90: the median is 0, so the mean, 30.
		{"mostly equal times: the mean interval", ms(0, 0, 0, 90), 1, true, 30 * time.Millisecond,
			map[uint64]time.Duration{1: 0, 3: 90 * time.Millisecond, 4: 120 * time.Millisecond, 6: 120 * time.Millisecond},
			map[time.Duration]uint64{0: 3, 89 * time.Millisecond: 3, 90 * time.Millisecond: 4, 120 * time.Millisecond: 7}},
		{"one frame, not looping", ms(0), 1, false, 0, map[uint64]time.Duration{0: 0, 1: 0}, map[time.Duration]uint64{0: 1, time.Hour: 1}},
		{"a loop of centuries saturates", ms(0, 1000), 1, true, time.Second,
			map[uint64]time.Duration{math.MaxUint64: math.MaxInt64, 2: 2 * time.Second}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := NewSchedule(tc.offsets, tc.speed, tc.loop)
			if err != nil {
				t.Fatal(err)
			}
			if s.Interval() != tc.wantInterval || s.Frames() != len(tc.offsets) {
				t.Errorf("interval %v, %d frames; want %v, %d", s.Interval(), s.Frames(), tc.wantInterval, len(tc.offsets))
			}
			for seq, want := range tc.at {
				if got := s.At(seq); got != want {
					t.Errorf("At(%d) = %v, want %v", seq, got, want)
				}
			}
			for elapsed, want := range tc.due {
				if got := s.Due(elapsed); got != want {
					t.Errorf("Due(%v) = %d, want %d", elapsed, got, want)
				}
			}
			// Due and At agree: frame seq is due at At(seq), not before.
			for seq := uint64(0); seq < 3*uint64(len(tc.offsets)); seq++ {
				at := s.At(seq)
				if !tc.loop && seq >= uint64(len(tc.offsets)) || at == math.MaxInt64 {
					break
				}
				if s.Due(at) <= seq || s.Due(at-1) > seq {
					t.Errorf("frame %d at %v: Due(at) = %d, Due(at-1ns) = %d", seq, at, s.Due(at), s.Due(at-1))
				}
			}
		})
	}
}

func TestScheduleRefuses(t *testing.T) {
	for _, tc := range []struct {
		name    string
		offsets []time.Duration
		speed   float64
		loop    bool
		want    string
	}{
		{"no frames", nil, 1, false, "no frames"},
		{"speed 0", ms(0, 1), 0, false, "speed 0, want 0.01 to 100"},
		{"speed NaN", ms(0, 1), math.NaN(), false, "speed NaN"},
		{"speed over 100", ms(0, 1), 101, false, "speed 101"},
		{"decreasing", ms(0, 5, 3), 1, false, "frame 2's time 3ms is before frame 1's 5ms"},
		{"a loop of one frame", ms(0), 1, true, "cannot loop"},
		{"a loop of equal times", ms(7, 7, 7), 1, true, "3 frames at the same time cannot loop"},
		{"a century at a hundredth of the speed", []time.Duration{0, 100 * 365 * 24 * time.Hour}, 0.01, false, "frame 1's time 876000h0m0s at speed 0.01 is longer than a time.Duration holds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewSchedule(tc.offsets, tc.speed, tc.loop); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("NewSchedule: %v, want an error saying %q", err, tc.want)
			}
		})
	}
}

// The camera calls At and Due once a frame: they must not allocate.
func TestScheduleDoesNotAllocate(t *testing.T) {
	s, err := NewSchedule(ms(0, 100, 250, 300), 1, true)
	if err != nil {
		t.Fatal(err)
	}
	seq := uint64(0)
	if a := testing.AllocsPerRun(100, func() {
		if s.Due(s.At(seq)) <= seq {
			t.Fatal("Due(At(seq)) <= seq")
		}
		seq += 7
	}); a != 0 {
		t.Errorf("At+Due: %v allocations, want 0", a)
	}
}

// Seconds are read exactly where they are written as plain decimals
// (since the epoch, with nanoseconds, is more digits than a float64
// holds), and as floats otherwise.
func TestParseTimestampSeconds(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
	}{
		{"0", 0},
		{"0.000000e+00", 0},
		{"1.036000e-01", 103_600_000},
		{"1317046945.964389445", 1_317_046_945_964_389_445},
		{"1317046945.9643894456", 1_317_046_945_964_389_446}, // rounded on the tenth digit
		{"1317046945.9643894454", 1_317_046_945_964_389_445},
		{"+12.5", 12_500_000_000},
		{"-0.25", -250_000_000},
		{".5", 500_000_000},
		{"7.", 7_000_000_000},
		{"4611686018", 4_611_686_018_000_000_000},
	} {
		got, err := parseTimestamp(tc.in, secondsFormat)
		if err != nil || got != tc.want {
			t.Errorf("parseTimestamp(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{"4611686019", "1e10", "-1e10", "NaN", "Inf", "1.2.3", "0x10", "1_000", "", "."} {
		if got, err := parseTimestamp(in, secondsFormat); err == nil {
			t.Errorf("parseTimestamp(%q) = %d, want an error", in, got)
		}
	}
}

// TestTimestampsFollowTheFileNumbers: a KITTI drive trimmed or thinned out
// keeps its frames' times: frame files named by number take the line of
// their number, not the next line in order.
func TestTimestampsFollowTheFileNumbers(t *testing.T) {
	lines := "0.0\n0.1\n0.2\n0.3\n0.4\n0.5\n0.6\n"
	for _, tc := range []struct {
		name  string
		files []string
		want  []time.Duration // nil: the error wantErr
		byNum bool
		err   string
	}{
		{"every other frame from the third", []string{"0000000002.bin", "0000000004.bin", "0000000006.bin"}, []time.Duration{0, 200 * time.Millisecond, 400 * time.Millisecond}, true, ""},
		{"the whole drive", []string{"000000.bin", "000001.bin", "000002.bin"}, []time.Duration{0, 100 * time.Millisecond, 200 * time.Millisecond}, true, ""},
		{"names that are not numbers: in order", []string{"a.bin", "b.bin", "c.bin"}, []time.Duration{0, 100 * time.Millisecond, 200 * time.Millisecond}, false, ""},
		{"a number past the file's lines", []string{"000001.bin", "000009.bin"}, nil, true, "7 timestamps for 2 frames: each frame's time is on the line of its file's number, and the last file is number 9 (line 10)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, f := range tc.files {
				copyTestFile(t, filepath.Join(mixedDir, "000000.bin"), dir, f)
			}
			writeFile(t, dir, "times.txt", lines)
			r, err := NewReplay(dir, ReplayConfig{})
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("NewReplay: %v, want an error saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			ts, ok := r.Timestamps()
			if !ok || ts.ByName != tc.byNum || !slices.Equal(ts.Offsets, tc.want) {
				t.Fatalf("timestamps %+v (found %t), want offsets %v, by name %t", ts, ok, tc.want, tc.byNum)
			}
		})
	}
}
