package agent

import (
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/zerohop/zerohop/planner"
)

// LogSink is the cmd_vel output until a ROS 2 publisher is configured: it
// logs commands (every change of direction or stop at once, otherwise at
// most once per Every) and keeps the latest for the HTTP endpoint.
type LogSink struct {
	Log   *zap.Logger
	Every time.Duration // default 500 ms

	mu      sync.Mutex
	last    planner.Twist
	stamp   time.Time
	count   uint64
	logged  time.Time
	lastLog planner.Twist
}

// PublishTwist implements CmdSink.
func (s *LogSink) PublishTwist(t planner.Twist, stamp time.Time) error {
	s.mu.Lock()
	s.last, s.stamp = t, stamp
	s.count++
	every := s.Every
	if every == 0 {
		every = 500 * time.Millisecond
	}
	now := time.Now()
	changed := t.IsZero() != s.lastLog.IsZero() || (t.AngularZ > 0.05) != (s.lastLog.AngularZ > 0.05) || (t.AngularZ < -0.05) != (s.lastLog.AngularZ < -0.05)
	doLog := s.count == 1 || changed || now.Sub(s.logged) >= every
	if doLog {
		s.logged, s.lastLog = now, t
	}
	s.mu.Unlock()
	if doLog && s.Log != nil {
		s.Log.Info("cmd_vel", zap.Float64("linear_x", round3(t.LinearX)), zap.Float64("angular_z", round3(t.AngularZ)))
	}
	return nil
}

// Last returns the latest command, its frame stamp and how many were sent.
func (s *LogSink) Last() (planner.Twist, time.Time, uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last, s.stamp, s.count
}

func round3(v float64) float64 { return float64(int64(v*1000)) / 1000 }
