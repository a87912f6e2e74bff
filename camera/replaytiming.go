package camera

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/zerohop/zerohop/sensor"
)

// Replay timings (NodeConfig.ReplayTiming, the camera's --replay-timing):
// how a replay source's frames are paced.
const (
	// ReplayTimingAuto: the recording's timestamps when it has a
	// timestamps file (sensor.Replay), else the fixed Rate. The camera's
	// default.
	ReplayTimingAuto = "auto"
	// ReplayTimingRecorded: the recording's timestamps; a recording
	// without a timestamps file is refused.
	ReplayTimingRecorded = "recorded"
	// ReplayTimingRate: the fixed Rate; no timestamps file is read. ""
	// means this too (library callers keep the pace they had).
	ReplayTimingRate = "rate"
)

// ReplayTimingUsage and ReplaySpeedUsage are the help of the
// --replay-timing and --replay-speed flags, the camera's and the agent's,
// after a prefix naming the replay (the camera's "replay: ").
const (
	ReplayTimingUsage = `how the frames are paced: "recorded" (each frame at its time in the recording's timestamps file, after the first's, on the monotonic clock: KITTI raw's velodyne_points/timestamps.txt or image_02/timestamps.txt, KITTI odometry's times.txt beside velodyne/, or a timestamps.txt or times.txt in DIR, one time a line, in seconds or as 2011-09-26 13:02:25.964389445; a frame that falls behind goes out at once, and after a stall the missed frame times are dropped and counted late, as at --rate), "rate" (every frame at --rate; no timestamps file is read) or "auto" (recorded when the recording has a timestamps file, else rate). A line at start says which is used and why`
	ReplaySpeedUsage  = "with recorded timing: play this many times as fast as recorded, 0.01 to 100 (0.5: half speed; 0: 1)"
)

// CheckReplayTiming checks --replay-timing and --replay-speed for the
// source given with flag (the camera's --source, the agent's --camera),
// without reading anything: a timing other than auto or rate, or a speed
// other than 1, needs a replay source; the speed (0: 1) is 0.01 to 100
// and needs recorded timing.
func CheckReplayTiming(flag, source, timing string, speed float64) error {
	switch timing {
	case "", ReplayTimingAuto, ReplayTimingRecorded, ReplayTimingRate:
	default:
		return fmt.Errorf(`--replay-timing %q: want "auto", "recorded" or "rate"`, timing)
	}
	if speed != 0 && !(speed >= 0.01 && speed <= 100) {
		return fmt.Errorf("--replay-speed %g: want 0.01 to 100 (1: as recorded)", speed)
	}
	isReplay := strings.HasPrefix(source, "replay:")
	notReplay := fmt.Sprintf("not %s %q", flag, source)
	if source == "" {
		notReplay = "and " + flag + " is not given"
	}
	switch {
	case timing == ReplayTimingRecorded && !isReplay:
		return fmt.Errorf("--replay-timing recorded: only a replay (%s replay:DIR) has recorded timing, %s", flag, notReplay)
	case speed != 0 && speed != 1 && !isReplay:
		return fmt.Errorf("--replay-speed %g: only for a replay (%s replay:DIR) with recorded timing, %s", speed, flag, notReplay)
	case speed != 0 && speed != 1 && timing == ReplayTimingRate:
		return fmt.Errorf("--replay-speed %g: only with recorded timing; with --replay-timing rate, --rate sets the pace", speed)
	}
	return nil
}

// replayTimingReadsTimestamps reports whether a replay opened under
// timing looks for its timestamps file.
func replayTimingReadsTimestamps(timing string) bool {
	return timing == ReplayTimingAuto || timing == ReplayTimingRecorded
}

// ReplaySchedule decides how src is paced under cfg's ReplayTiming and
// ReplaySpeed (checked with CheckReplayTiming): the schedule of its
// recorded timing (Config.Schedule), or nil for the fixed Rate. It logs,
// on log, one line saying which and why (a warning when the timestamps
// file has more lines than the recording has frames); nothing for a
// source that is not a replay under auto or rate timing.
func ReplaySchedule(src sensor.Source, cfg NodeConfig, log *zap.Logger) (*sensor.Schedule, error) {
	rate := cfg.Rate
	if rate == 0 {
		rate = 30
	}
	atRate := func(why string) (*sensor.Schedule, error) {
		log.Info("replay timing: fixed rate", zap.String("timing", ReplayTimingRate), zap.String("why", why), zap.Float64("rate_hz", rate))
		return nil, nil
	}
	r, ok := src.(*sensor.Replay)
	if !ok || !replayTimingReadsTimestamps(cfg.ReplayTiming) {
		if ok {
			return atRate(fmt.Sprintf("--replay-timing %s: frames at --rate %g Hz; no timestamps file is read", ReplayTimingRate, rate))
		}
		if cfg.ReplayTiming == ReplayTimingRecorded {
			return nil, errors.New("--replay-timing recorded: only a replay (replay:DIR) has recorded timing")
		}
		return nil, nil
	}
	speed := cfg.ReplaySpeed
	if speed == 0 {
		speed = 1
	}
	ts, found := r.Timestamps()
	if !found {
		why := fmt.Sprintf("no timestamps file (looked for %s)", strings.Join(r.TimestampsSearched(), ", "))
		if cfg.ReplayTiming == ReplayTimingRecorded {
			return nil, fmt.Errorf("--replay-timing recorded: %s; --replay-timing rate plays the frames at --rate", why)
		}
		if speed != 1 {
			return nil, fmt.Errorf("--replay-speed %g: only with recorded timing, and the replay has %s; --rate sets the pace", speed, why)
		}
		return atRate(why + fmt.Sprintf(": frames at --rate %g Hz", rate))
	}
	if len(ts.Offsets) < 2 {
		why := fmt.Sprintf("%s times one frame: there is no interval to play", ts.File)
		if cfg.ReplayTiming == ReplayTimingRecorded {
			return nil, fmt.Errorf("--replay-timing recorded: %s", why)
		}
		if speed != 1 {
			return nil, fmt.Errorf("--replay-speed %g: %s", speed, why)
		}
		return atRate(why + fmt.Sprintf("; frames at --rate %g Hz", rate))
	}
	sched, err := sensor.NewSchedule(ts.Offsets, speed, cfg.Loop)
	if err != nil {
		return nil, fmt.Errorf("replay timing from %q: %w (--replay-timing rate plays the frames at --rate without reading it)", ts.File, err)
	}
	why := "--replay-timing recorded: the recording's timestamps"
	if cfg.ReplayTiming == ReplayTimingAuto {
		why = "--replay-timing auto: the recording has a timestamps file"
	}
	level := zapcore.InfoLevel
	if ts.Lines > len(ts.Offsets) && !ts.ByName {
		level = zapcore.WarnLevel
		why += fmt.Sprintf("; the file has %d timestamps for %d frames: the first %d are used (frames missing from the recording's end?)",
			ts.Lines, len(ts.Offsets), len(ts.Offsets))
	}
	fields := []zap.Field{
		zap.String("timing", ReplayTimingRecorded), zap.String("why", why), zap.String("file", ts.File),
		zap.Int("frames", sched.Frames()), zap.Duration("span", sched.Span()),
		zap.Duration("median_interval", sched.Interval()), zap.Float64("speed", speed),
	}
	if ce := log.Check(level, "replay timing: recorded"); ce != nil {
		ce.Write(fields...)
	}
	return sched, nil
}

// recordedPacer paces frames by a recording's schedule: frame seq is due
// at base + sched.At(seq), on the monotonic clock. It is pure: the caller
// reads the clock and waits.
type recordedPacer struct {
	sched *sensor.Schedule
	base  int64 // monotonic ns at which frame 0 is due; moved by stalls
}

// next is called once frame seq has gone out, at monotonic time now; it
// returns how long to wait before frame seq+1 (0: send it at once) and
// how many frame times were missed.
//
// Behind, it does what the fixed-rate ticker does: frame seq+1, overdue,
// goes out at once; no frame is skipped. Overdue by less than the time to
// the frame after it, nothing else changes and the frames that follow keep
// their times (a frame that overran catches up; no drift). Overdue further
// (a stall: the frames after it are due too), their times are dropped,
// counted as missed (Stats.Late) as the ticker drops ticks, and the
// timeline moves so that frame seq+1 is due now and the next ones keep
// their recorded intervals after it, rather than go out in a burst to catch
// up.
func (p *recordedPacer) next(seq uint64, now int64) (wait time.Duration, missed uint64) {
	due := p.base + int64(p.sched.At(seq+1))
	if now < due {
		return time.Duration(due - now), 0
	}
	// Frames due by now, less those due with frame seq+1 (frames at the
	// same recorded time as it are not late).
	if passed, with := p.sched.Due(time.Duration(now-p.base)), p.sched.Due(time.Duration(due-p.base)); passed > with {
		missed = passed - with
		p.base += now - due
	}
	return 0, missed
}
