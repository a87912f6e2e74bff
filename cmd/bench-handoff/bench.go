package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// benchConfig is one invocation's settings (see the flags in main.go).
type benchConfig struct {
	Sizes  []int
	Count  int
	Warmup int
	Chunk  int
	Gap    time.Duration
	Slots  int
	Spin   bool
	PinCPU int // ≥ 0: also run the event-driven cases confined to this CPU
	Runs   int
	Dir    string // socket directory
}

// waitUntil polls cond during setup (never while measuring), for at most
// 10 s; it gives up early when ctx is done or check fails (a subscriber
// process exited).
func waitUntil(ctx context.Context, what string, cond func() bool, check func() error) error {
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := check(); err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

// pace sleeps gap in the kernel (nanosleep), finer than a Go timer.
func pace(gap time.Duration) {
	ts := unix.NsecToTimespec(int64(gap))
	for unix.Nanosleep(&ts, &ts) == unix.EINTR {
	}
}

// publishRange sends messages [from, to) of l: for each it sleeps the gap,
// publishes, then waits for the subscriber's ack, so that every message is
// an idle-to-wake handoff rather than queueing.
func publishRange(cfg benchConfig, l *lane, from, to int) error {
	for i := from; i < to; i++ {
		pace(cfg.Gap)
		n, err := l.publish(i)
		if err != nil {
			return fmt.Errorf("publish message %d: %w", i, err)
		}
		if n != 1 {
			return fmt.Errorf("message %d reached %d subscribers, want 1", i, n)
		}
		if err := l.child.waitAck(i); err != nil {
			return err
		}
	}
	return nil
}

// runGroup measures lanes side by side: every lane gets its warm-up, then
// the measured messages go out in chunks of cfg.Chunk, lane after lane, so
// that every lane samples the same stretch of machine noise. Each process
// counts CPU only over its lane's measured chunks. wantCPUs, if not empty,
// is the CPU list every subscriber process must be confined to. When ctx
// is done the subscribers are killed, which ends the wait for their acks.
func runGroup(ctx context.Context, cfg benchConfig, lanes []*lane, wantCPUs string) ([]summary, error) {
	// Like the subscribers' receive goroutines: wake-ups land on one thread.
	// Locked from before the children start until they are reaped (the
	// deferred unlock runs after the deferred abort): the thread that forks
	// them must outlive them for their Pdeathsig (see startChild).
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer func() {
		for _, l := range lanes {
			if l.child != nil {
				l.child.abort()
			}
			l.close()
		}
	}()
	for _, l := range lanes {
		spec := l.spec
		spec.Warmup, spec.Count, spec.Chunk = cfg.Warmup, cfg.Count, cfg.Chunk
		c, err := startChild(ctx, spec, l.extra...)
		l.extra = nil // closed by startChild
		if err != nil {
			return nil, fmt.Errorf("%s: %w", l.name, err)
		}
		l.child = c
	}
	anyExited := func() error {
		for _, l := range lanes {
			if l.child.hasExited() {
				return fmt.Errorf("%s %s", l.name, l.child.exitReport())
			}
		}
		return nil
	}
	for _, l := range lanes {
		if err := waitUntil(ctx, l.name+" subscriber to connect", l.connected, anyExited); err != nil {
			return nil, err
		}
	}
	for _, l := range lanes {
		if err := publishRange(cfg, l, 0, cfg.Warmup); err != nil {
			return nil, fmt.Errorf("%s warm-up: %w", l.name, l.child.explain(err))
		}
		l.next = cfg.Warmup
	}
	total := cfg.Warmup + cfg.Count
	for lanes[0].next < total {
		for _, l := range lanes {
			to := min(l.next+cfg.Chunk, total)
			start := cpuNs()
			if err := publishRange(cfg, l, l.next, to); err != nil {
				return nil, fmt.Errorf("%s: %w", l.name, l.child.explain(err))
			}
			l.cpuNs += cpuNs() - start
			l.next = to
		}
	}
	out := make([]summary, len(lanes))
	for i, l := range lanes {
		res, err := l.child.finish()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", l.name, err)
		}
		if res.Corrupt != 0 {
			return nil, fmt.Errorf("%s: subscriber saw %d payloads whose marker bytes did not match their handle", l.name, res.Corrupt)
		}
		if wantCPUs != "" && res.CPUs != wantCPUs {
			return nil, fmt.Errorf("%s: subscriber ran on CPUs %s, want %s", l.name, res.CPUs, wantCPUs)
		}
		if len(res.LatencyNs) != cfg.Count {
			return nil, fmt.Errorf("%s: subscriber reported %d latencies, want %d", l.name, len(res.LatencyNs), cfg.Count)
		}
		if l.waits > 0 {
			fmt.Fprintf(os.Stderr, "  note: %s: %d publishes waited for a free slot (the server applied releases late)\n", l.name, l.waits)
		}
		out[i] = summarize(res.LatencyNs, l.cpuNs, res.CPUNs)
	}
	return out, nil
}

// runAll measures every case of one run, mode by mode. Event-driven: per
// size, zero-copy, copy and the pipe wake-up floor interleaved in one group.
// Spin (--spin): the spinning zero-copy subscriber alone, since its busy
// core would slow the others; its two variants (rings, socket) in passes
// back to back. One CPU (--pin-cpu): the event-driven groups
// again with every thread of both processes confined to that CPU.
func runAll(ctx context.Context, cfg benchConfig, progress func(string)) ([]caseResult, error) {
	type pass struct {
		mode  string
		lanes func(size int) []func() (*lane, error)
	}
	event := func(size int) []func() (*lane, error) {
		return []func() (*lane, error){
			func() (*lane, error) { return newZeroCopyLane(cfg, size, zeroCopy) },
			func() (*lane, error) { return newCopyLane(cfg, size) },
			newPipeLane,
		}
	}
	passes := []pass{{modeEvent, event}}
	if cfg.Spin {
		// One spinning subscriber at a time: two would take both cores of
		// a small machine from the publisher. Rings, then the socket.
		for _, tr := range []string{zeroCopySpin, zeroCopySpinSocket} {
			passes = append(passes, pass{modeSpin, func(size int) []func() (*lane, error) {
				return []func() (*lane, error){func() (*lane, error) { return newZeroCopyLane(cfg, size, tr) }}
			}})
		}
	}
	if cfg.PinCPU >= 0 {
		passes = append(passes, pass{modeOneCPU, event})
	}
	var out []caseResult
	for _, p := range passes {
		if p.mode == modeOneCPU {
			restore, err := confineToCPU(cfg.PinCPU)
			if err != nil {
				return nil, err
			}
			res, err := runPass(ctx, cfg, p.mode, p.lanes, progress)
			if rerr := restore(); err == nil && rerr != nil {
				err = rerr
			}
			if err != nil {
				return nil, err
			}
			out = append(out, res...)
			continue
		}
		res, err := runPass(ctx, cfg, p.mode, p.lanes, progress)
		if err != nil {
			return nil, err
		}
		out = append(out, res...)
	}
	return out, nil
}

// runPass measures the lane groups of one mode for every size.
func runPass(ctx context.Context, cfg benchConfig, mode string, group func(size int) []func() (*lane, error), progress func(string)) ([]caseResult, error) {
	var out []caseResult
	for _, size := range cfg.Sizes {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		start := time.Now()
		var lanes []*lane
		for _, mk := range group(size) {
			l, err := mk()
			if err != nil {
				for _, l := range lanes {
					l.close()
				}
				return nil, fmt.Errorf("%s, %s: %w", mode, formatSize(size), err)
			}
			lanes = append(lanes, l)
		}
		wantCPUs := ""
		if mode == modeOneCPU {
			wantCPUs = strconv.Itoa(cfg.PinCPU)
		}
		sums, err := runGroup(ctx, cfg, lanes, wantCPUs)
		if err != nil {
			return nil, fmt.Errorf("%s, %s: %w", mode, formatSize(size), err)
		}
		for i, l := range lanes {
			progress(fmt.Sprintf("%-22s %-8s %-26s p50 %8s µs  p99 %8s µs", mode, formatSize(size), l.name, us(sums[i].P50), us(sums[i].P99)))
			out = append(out, caseResult{Mode: mode, Size: size, Transport: l.name, Summary: sums[i]})
		}
		progress(fmt.Sprintf("(%.1fs)", time.Since(start).Seconds()))
	}
	return out, nil
}
