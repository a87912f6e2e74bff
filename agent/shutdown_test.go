package agent

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestRunBounded(t *testing.T) {
	errRun := errors.New("run failed")
	release := make(chan struct{})
	defer close(release)
	for _, tc := range []struct {
		name   string
		cancel bool // end the context right away
		run    func(context.Context) error
		want   error
	}{
		{"returns before the context ends", false, func(context.Context) error { return errRun }, errRun},
		{"returns once the context ends", true, func(ctx context.Context) error { <-ctx.Done(); return nil }, nil},
		{"ignores the context", true, func(context.Context) error { <-release; return nil }, ErrShutdownStuck},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.cancel {
				cancel()
			}
			start := time.Now()
			err := runBounded(ctx, 50*time.Millisecond, tc.run)
			if !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
				t.Fatalf("runBounded: %v, want %v", err, tc.want)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Fatalf("runBounded took %v", d)
			}
		})
	}
}
