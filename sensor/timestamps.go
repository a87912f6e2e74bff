package sensor

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Timestamps is a recording's timing, read from its timestamps file by
// NewReplay.
type Timestamps struct {
	// File is the timestamps file read.
	File string
	// Offsets holds each frame's recorded time after frame 0's, one per
	// frame: Offsets[0] is 0 and none is less than the one before.
	Offsets []time.Duration
	// Lines is the number of timestamps in File: more than len(Offsets)
	// when File has more lines than the recording has frames.
	Lines int
	// ByName reports that every frame's file is named by its number
	// (KITTI's 0000000042.bin): frame k's time is then on the line of its
	// file's number (line 43), so a recording trimmed or thinned out
	// keeps its times. Otherwise frame k's time is on line k+1.
	ByName bool
}

// TimestampsError is a defect of a recording's timestamps file, found by
// NewReplay: a line that is not a time, a time before the line above, or
// fewer lines than frames. Line is 1-based; 0 means the file as a whole.
type TimestampsError struct {
	File string
	Line int
	Err  error
}

func (e *TimestampsError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("replay: %q: timestamps line %d: %v", e.File, e.Line, e.Err)
	}
	return fmt.Sprintf("replay: %q: timestamps: %v", e.File, e.Err)
}

func (e *TimestampsError) Unwrap() error { return e.Err }

// kittiTimeLayout is a KITTI raw drive's timestamp (timestamps.txt): local
// time without a zone, nanoseconds. Only differences matter, so it is read
// as UTC.
const kittiTimeLayout = "2006-01-02 15:04:05.999999999"

// timestampsCandidates lists, in the order they are looked for, where the
// timestamps file of the frame files in folder may be: timestamps.txt, then
// times.txt, in the folder; then KITTI's, beside it: a raw drive's
// velodyne_points/data (and image_02/data) has velodyne_points/timestamps.txt
// (image_02/timestamps.txt), an odometry sequence's velodyne has times.txt.
func timestampsCandidates(folder string) []string {
	c := []string{filepath.Join(folder, "timestamps.txt"), filepath.Join(folder, "times.txt")}
	switch filepath.Base(filepath.Clean(folder)) {
	case "data":
		c = append(c, filepath.Join(folder, "..", "timestamps.txt"))
	case "velodyne":
		c = append(c, filepath.Join(folder, "..", "times.txt"))
	}
	return c
}

// findTimestamps returns the first of candidates that is a regular file,
// or "".
func findTimestamps(candidates []string) string {
	for _, c := range candidates {
		if st, err := os.Stat(c); err == nil && st.Mode().IsRegular() {
			return c
		}
	}
	return ""
}

// timestampFormat is how a timestamps file writes its times.
type timestampFormat int

const (
	secondsFormat  timestampFormat = iota + 1 // KITTI odometry's times.txt: 1.036000e-01
	dateTimeFormat                            // KITTI raw's timestamps.txt: 2011-09-26 13:02:25.964389445
)

// frameLines returns the 0-based line of each frame's time: the number
// each name is (without its extension) when every name is a number and
// the numbers increase, as KITTI's files are named; else nil (frame k on
// line k).
func frameLines(names []string) []int {
	lines := make([]int, len(names))
	for k, name := range names {
		base := strings.TrimSuffix(name, filepath.Ext(name))
		n, err := strconv.Atoi(base)
		if err != nil || n < 0 || base == "" || base[0] == '+' || base[0] == '-' || (k > 0 && n <= lines[k-1]) {
			return nil
		}
		lines[k] = n
	}
	return lines
}

// readTimestamps reads the frames' timestamps from path, one a line:
// seconds (a float, as KITTI odometry's times.txt) or a date and time (as
// KITTI raw's timestamps.txt), the first line deciding which for all.
// Frame k's time is on line at[k]+1 (at from frameLines), or line k+1
// for at nil. Blank lines at the end are ignored; lines after the last
// frame's are counted, not read. Errors are *TimestampsError.
func readTimestamps(path string, frames int, at []int) (Timestamps, error) {
	ts := Timestamps{File: path, ByName: at != nil}
	if at == nil {
		at = make([]int, frames)
		for k := range at {
			at[k] = k
		}
	}
	needed := at[len(at)-1] + 1 // lines to read
	fail := func(line int, format string, args ...any) (Timestamps, error) {
		return Timestamps{}, &TimestampsError{File: path, Line: line, Err: fmt.Errorf(format, args...)}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return Timestamps{}, &TimestampsError{File: path, Err: err}
	}
	lines := bytes.Split(b, []byte("\n"))
	for len(lines) > 0 && len(bytes.TrimSpace(lines[len(lines)-1])) == 0 {
		lines = lines[:len(lines)-1]
	}
	ts.Lines = len(lines)
	if ts.Lines < needed {
		why := "each frame needs one, a line each"
		if ts.ByName {
			why = fmt.Sprintf("each frame's time is on the line of its file's number, and the last file is number %d (line %d)", needed-1, needed)
		}
		return fail(0, "%d timestamps for %d frames: %s", ts.Lines, frames, why)
	}
	all := make([]int64, needed)
	var format timestampFormat
	for i := range needed {
		s := string(bytes.TrimSpace(lines[i]))
		if s == "" {
			return fail(i+1, "empty line: want one timestamp per frame")
		}
		if i == 0 {
			if _, err := strconv.ParseFloat(s, 64); err == nil {
				format = secondsFormat
			} else if _, err := time.Parse(kittiTimeLayout, s); err == nil {
				format = dateTimeFormat
			} else {
				return fail(1, "%q is neither seconds (as 1.036000e-01) nor a date and time (as 2011-09-26 13:02:25.964389445)", s)
			}
		}
		if all[i], err = parseTimestamp(s, format); err != nil {
			return fail(i+1, "%w", err)
		}
		if i > 0 && all[i] < all[i-1] {
			return fail(i+1, "%q is before line %d's %q: timestamps must not decrease", s, i, string(bytes.TrimSpace(lines[i-1])))
		}
	}
	ns := make([]int64, frames)
	for k, i := range at {
		ns[k] = all[i]
	}
	if frames > 1 && ns[frames-1] == ns[0] {
		return fail(0, "the %d timestamps of the frames are all %q: they do not advance", frames, string(bytes.TrimSpace(lines[at[0]])))
	}
	if frames > 1 {
		// A gap far beyond the recording's frame interval is a clock
		// that was set mid-recording (a first time of 0, then epoch
		// seconds) or a wrong line: played as recorded, the camera would
		// wait that long for the next frame, silently.
		gaps := make([]int64, frames-1)
		for i := range gaps {
			gaps[i] = ns[i+1] - ns[i]
		}
		limit := max(int64(maxTimestampGapFloor), min(maxGapFactor*medianInt64(slices.Clone(gaps)), int64(maxTimestampGap)))
		for i, g := range gaps {
			if g > limit || g < 0 { // < 0: the difference overflowed
				return fail(at[i+1]+1, "%q is %v after line %d's %q, more than %v (%d times the median frame interval, at least %v, at most %v): a clock set mid-recording, or a wrong line; --replay-timing rate plays the frames at --rate",
					string(bytes.TrimSpace(lines[at[i+1]])), time.Duration(g), at[i]+1, string(bytes.TrimSpace(lines[at[i]])), time.Duration(limit), maxGapFactor, maxTimestampGapFloor, maxTimestampGap)
			}
		}
	}
	ts.Offsets = make([]time.Duration, frames)
	for i := range ns {
		d := ns[i] - ns[0]
		if d < 0 { // overflowed: a recording longer than a time.Duration holds
			return fail(at[i]+1, "%q is too long after line %d's %q to play (more than %v)", string(bytes.TrimSpace(lines[at[i]])), at[0]+1, string(bytes.TrimSpace(lines[at[0]])), time.Duration(math.MaxInt64))
		}
		ts.Offsets[i] = time.Duration(d)
	}
	return ts, nil
}

// A gap between two frames' timestamps is refused above maxGapFactor
// times the median gap, but never below maxTimestampGapFloor (a sensor
// that dropped a few frames) nor above maxTimestampGap.
const (
	maxGapFactor         = 100
	maxTimestampGapFloor = time.Minute
	maxTimestampGap      = time.Hour
)

// maxTimestampSeconds bounds a timestamp in seconds, so that it fits int64
// nanoseconds with room for differences (about 146 years).
const maxTimestampSeconds = 1 << 62 / 1e9

// parseTimestamp reads one timestamp as nanoseconds in format.
func parseTimestamp(s string, format timestampFormat) (int64, error) {
	if format == secondsFormat {
		if ns, ok := decimalNanos(s); ok {
			return ns, nil
		}
		v, err := strconv.ParseFloat(s, 64)
		switch {
		case err != nil || strings.ContainsRune(s, '_'):
			return 0, fmt.Errorf("%q is not seconds (as 1.036000e-01), as line 1 is", s)
		case math.IsNaN(v) || math.Abs(v) >= maxTimestampSeconds:
			return 0, fmt.Errorf("%q seconds is out of range (at most ±%.0f)", s, maxTimestampSeconds)
		}
		return int64(math.Round(v * 1e9)), nil
	}
	t, err := time.Parse(kittiTimeLayout, s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a date and time (as 2011-09-26 13:02:25.964389445), as line 1 is", s)
	}
	if y := t.Year(); y < 1700 || y > 2200 {
		return 0, fmt.Errorf("%q: year %d is out of range (1700 to 2200)", s, y)
	}
	return t.UnixNano(), nil
}

// decimalNanos reads s, seconds written as [+-]digits[.digits] (no
// exponent), exactly, as nanoseconds, rounded to the nearest beyond nine
// fraction digits: seconds since the epoch with nanoseconds, as recorders
// write them, need more digits than a float64 holds. ok is false for any
// other form and for maxTimestampSeconds or more.
func decimalNanos(s string) (ns int64, ok bool) {
	neg := false
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg, s = s[0] == '-', s[1:]
	}
	ip, fp, _ := strings.Cut(s, ".")
	if ip == "" && fp == "" || len(ip) > 10 {
		return 0, false
	}
	var sec, frac int64
	for _, c := range []byte(ip) {
		if c < '0' || c > '9' {
			return 0, false
		}
		sec = sec*10 + int64(c-'0')
	}
	for i, c := range []byte(fp) {
		if c < '0' || c > '9' {
			return 0, false
		}
		switch {
		case i < 9:
			frac = frac*10 + int64(c-'0')
		case i == 9 && c >= '5':
			frac++ // round half up on the tenth digit
		}
	}
	for i := len(fp); i < 9; i++ {
		frac *= 10
	}
	if float64(sec) > maxTimestampSeconds {
		return 0, false
	}
	if ns = sec*1e9 + frac; ns >= 1<<62 {
		return 0, false
	}
	if neg {
		ns = -ns
	}
	return ns, true
}

// Schedule is when each frame of a recording is due, after the start of
// playing: its recorded time after the first frame's (Timestamps.Offsets),
// divided by a speed factor. Looping, the recording starts again one
// Interval after its last frame, lap after lap, so that a lap takes the
// recording's span plus one interval. At and Due do not allocate.
type Schedule struct {
	offsets  []int64 // ns, scaled; offsets[0] == 0, non-decreasing
	interval int64   // the median interval, scaled (the mean where that is 0)
	cycle    int64   // a lap, loop only: the last offset + interval
	loop     bool
}

// NewSchedule makes the schedule of frames recorded at offsets (each
// frame's time after the first's, not decreasing), played speed times as
// fast as recorded (1: as recorded; 0.01 to 100). With loop the frames
// repeat endlessly, frame seq being frame seq mod len(offsets); a loop
// needs at least two frames whose times differ.
func NewSchedule(offsets []time.Duration, speed float64, loop bool) (*Schedule, error) {
	if !(speed >= 0.01 && speed <= 100) {
		return nil, fmt.Errorf("schedule: speed %g, want 0.01 to 100", speed)
	}
	if len(offsets) == 0 {
		return nil, errors.New("schedule: no frames")
	}
	s := &Schedule{offsets: make([]int64, len(offsets)), loop: loop}
	for i, o := range offsets {
		d := o - offsets[0]
		if i > 0 && o < offsets[i-1] {
			return nil, fmt.Errorf("schedule: frame %d's time %v is before frame %d's %v", i, d, i-1, offsets[i-1]-offsets[0])
		}
		scaled := math.Round(float64(d) / speed)
		if !(scaled < math.MaxInt64) {
			return nil, fmt.Errorf("schedule: frame %d's time %v at speed %g is longer than a time.Duration holds", i, d, speed)
		}
		s.offsets[i] = int64(scaled)
	}
	n := len(s.offsets)
	span := s.offsets[n-1]
	if n > 1 {
		iv := make([]int64, n-1)
		for i := range iv {
			iv[i] = s.offsets[i+1] - s.offsets[i]
		}
		s.interval = medianInt64(iv)
		if s.interval == 0 {
			s.interval = span / int64(n-1)
		}
	}
	if loop {
		if s.interval <= 0 {
			return nil, fmt.Errorf("schedule: %d frames at the same time cannot loop: a lap would take no time", n)
		}
		if span > math.MaxInt64/4 {
			return nil, fmt.Errorf("schedule: a span of %v is too long to loop", time.Duration(span))
		}
		s.cycle = span + s.interval
	}
	return s, nil
}

// medianInt64 is the median of v (the lower of the middle two for an even
// count); it sorts v.
func medianInt64(v []int64) int64 {
	slices.Sort(v)
	return v[(len(v)-1)/2]
}

// Frames is the number of recorded frames (one lap when looping).
func (s *Schedule) Frames() int { return len(s.offsets) }

// Interval is the recording's median frame interval, scaled by the speed
// (the mean interval where more than half are 0): the gap between the last
// frame of a lap and the first of the next, and the frame period the slot
// pools are sized for. 0 for one frame.
func (s *Schedule) Interval() time.Duration { return time.Duration(s.interval) }

// Span is the scaled time from the first frame to the last.
func (s *Schedule) Span() time.Duration { return time.Duration(s.offsets[len(s.offsets)-1]) }

// At is when frame seq is due after the start. Past the last frame of a
// schedule that does not loop, it is the last frame's time; a time beyond
// what a time.Duration holds (a loop of centuries) is the largest one.
func (s *Schedule) At(seq uint64) time.Duration {
	n := uint64(len(s.offsets))
	if !s.loop {
		return time.Duration(s.offsets[min(seq, n-1)])
	}
	lap, k := seq/n, seq%n
	if lap > uint64((math.MaxInt64-s.offsets[k])/s.cycle) {
		return math.MaxInt64
	}
	return time.Duration(int64(lap)*s.cycle + s.offsets[k])
}

// Due is the number of frames due by elapsed after the start: the first
// seq with At(seq) > elapsed (for a schedule that does not loop, at most
// Frames()).
func (s *Schedule) Due(elapsed time.Duration) uint64 {
	if elapsed < 0 {
		return 0
	}
	e, lap := int64(elapsed), int64(0)
	if s.loop {
		lap = e / s.cycle
		e -= lap * s.cycle
	}
	// The number of offsets ≤ e.
	lo, hi := 0, len(s.offsets)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if s.offsets[m] <= e {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return uint64(lap)*uint64(len(s.offsets)) + uint64(lo)
}
