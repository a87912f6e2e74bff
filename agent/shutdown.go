package agent

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// DefaultShutdownGrace is how long RunNodeBounded waits for RunNode to
// return once its context ends: well under docker stop's 10 s before
// SIGKILL, well over a normal shutdown (tens of milliseconds).
const DefaultShutdownGrace = 5 * time.Second

// ErrShutdownStuck: RunNode did not return within the grace period after
// its context ended.
var ErrShutdownStuck = errors.New("agent: shutdown stuck")

// RunNodeBounded is RunNode for a process that must stop when told, even
// when a stage is stuck in a call nothing can cancel (a hung CUDA call: a
// stream synchronize that never returns). Once ctx ends it waits grace
// for RunNode; after that it returns ErrShutdownStuck and leaves RunNode's
// goroutine behind, so the caller must exit the process, which releases
// its memory and GPU resources. cmd_vel is zero by then: the stall guard
// zeroes it once a stage outlasts the watchdog period, and a RunNode that
// returned from its pipeline published zero.
func RunNodeBounded(ctx context.Context, cfg NodeConfig, grace time.Duration) error {
	return runBounded(ctx, grace, func(ctx context.Context) error { return RunNode(ctx, cfg) })
}

func runBounded(ctx context.Context, grace time.Duration, run func(context.Context) error) error {
	done := make(chan error, 1) // buffered: a run that ends after the deadline does not block
	go func() { done <- run(ctx) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	deadline := time.NewTimer(grace)
	defer deadline.Stop()
	select {
	case err := <-done:
		return err
	case <-deadline.C:
		return fmt.Errorf("%w: still running %v after the stop signal (a stage in a call that cannot be cancelled, such as a hung GPU call); exiting without cleanup", ErrShutdownStuck, grace)
	}
}
