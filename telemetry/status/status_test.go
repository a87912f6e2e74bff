package status

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// fakeSink records what a Sink is given; err, when set, is what
// PublishStatus returns. A fake for the loop's plumbing.
type fakeSink struct {
	mu     sync.Mutex
	stamps []time.Time
	calls  [][]Status
	err    error
}

func (f *fakeSink) PublishStatus(stamp time.Time, st []Status) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stamps, f.calls = append(f.stamps, stamp), append(f.calls, st)
	return f.err
}

func (f *fakeSink) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

func (f *fakeSink) setErr(err error) {
	f.mu.Lock()
	f.err = err
	f.mu.Unlock()
}

// The loop publishes every period what Collect says, with the time since
// the last call, logs a failing sink once and its recovery once, keeps
// going through failures, and ends with Stopped.
func TestLoop(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	sink := &fakeSink{err: errors.New("ros2: write rt/diagnostics: timeout")}
	var elapsed []time.Duration
	var mu sync.Mutex
	loop := Loop{
		Sink: sink, Period: 10 * time.Millisecond, Log: zap.New(core),
		Collect: func(_ time.Time, e time.Duration) []Status {
			mu.Lock()
			elapsed = append(elapsed, e)
			mu.Unlock()
			return []Status{{Level: OK, Name: "n: a"}}
		},
		Stopped: Named("n", "/n", []string{"a", "b"}, Stale, "the node stopped"),
		Stamp:   func(time.Time) time.Time { return time.Time{} },
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- loop.Run(ctx) }()
	waitUntil := func(what string, cond func() bool) {
		deadline := time.Now().Add(10 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitUntil("three failing publishes", func() bool { return sink.count() >= 3 })
	sink.setErr(nil)
	n := sink.count()
	waitUntil("two more publishes", func() bool { return sink.count() >= n+2 })
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	last := sink.calls[len(sink.calls)-1]
	if len(last) != 2 || last[0].Name != "n: a" || last[1].Name != "n: b" || last[1].Level != Stale || last[1].HardwareID != "/n" ||
		last[1].Message != "the node stopped" {
		t.Errorf("last publish %+v, want Stopped", last)
	}
	for _, s := range sink.stamps {
		if !s.IsZero() {
			t.Errorf("stamp %v, want Stamp's zero time", s)
		}
	}
	mu.Lock()
	for _, e := range elapsed {
		if e < 5*time.Millisecond || e > 5*time.Second {
			t.Errorf("elapsed %v for a 10ms period", e)
		}
	}
	mu.Unlock()
	if n := logs.FilterMessageSnippet("diagnostics: publish failed").Len(); n != 1 {
		t.Errorf("%d failure lines, want 1", n)
	}
	if n := logs.FilterMessageSnippet("diagnostics: publishing again").Len(); n != 1 {
		t.Errorf("%d recovery lines, want 1", n)
	}
}
