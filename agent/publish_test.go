package agent

import (
	"errors"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/zerohop/zerohop/planner"
)

// failingSink fails while err is set (a fake, for the logging plumbing).
type failingSink struct{ err error }

func (s *failingSink) PublishTwist(planner.Twist, time.Time) error { return s.err }

// A sink that keeps failing is logged at its first failure, at each new
// error and at recovery; the rest is counted. It used to log every command:
// 31 lines a second, which pushed the first failure out of rotated logs.
func TestPublishFailuresLoggedOncePerError(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	sink := &failingSink{err: errors.New("dds_write: timeout")}
	p := &Pipeline{cfg: Config{Sink: sink}, log: zap.New(core)}
	now := time.Now()
	for range 90 {
		p.publish(planner.Twist{LinearX: 0.3}, now)
	}
	sink.err = errors.New("dds_write: bad parameter")
	for range 10 {
		p.publish(planner.Twist{}, now)
	}
	sink.err = nil
	for range 5 {
		p.publish(planner.Twist{}, now)
	}
	if got := p.PublishFailures(); got != 100 {
		t.Errorf("PublishFailures = %d, want 100", got)
	}
	failed := logs.FilterMessageSnippet("publish cmd_vel failed").All()
	if len(failed) != 2 {
		t.Fatalf("%d failure lines, want 2 (one per distinct error): %v", len(failed), failed)
	}
	if f := failed[1].ContextMap(); f["error"] != "dds_write: bad parameter" || f["failures"] != uint64(91) {
		t.Errorf("second failure line %v", f)
	}
	if n := logs.FilterMessageSnippet("works again").Len(); n != 1 {
		t.Errorf("%d recovery lines, want 1", n)
	}
}
