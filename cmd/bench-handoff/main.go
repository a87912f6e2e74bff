// Command bench-handoff measures cross-process handoff latency, publish →
// "the subscriber holds the message", of the zero-copy unix transport
// against a copy transport that sends the whole payload through a socket,
// for several payload sizes in one run. It writes markdown tables to stdout
// and to --out.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/zerohop/zerohop/internal/childproc"
)

func main() {
	if spec, ok := os.LookupEnv(childEnv); ok {
		if err := runChild(spec); err != nil {
			fmt.Fprintln(os.Stderr, "bench-handoff subscriber:", err)
			os.Exit(1)
		}
		return
	}
	// SIGINT/SIGTERM cancel the run: the subscriber processes are killed and reaped and the socket directory removed before run returns.
	childproc.RunMain("bench-handoff", run)
}

// Limits on the flags that size allocations: every subscriber holds
// --warmup + --count latencies (and sends them back as JSON), and every
// zero-copy pool is --slots × the size, written through before measuring.
const (
	maxMessages  = 10_000_000
	maxPoolBytes = 4 << 30
	maxGap       = time.Second
)

// parseConfig parses and checks the flags; usage and flag errors go to
// output. For -h it returns flag.ErrHelp.
func parseConfig(args []string, output io.Writer) (cfg benchConfig, out string, err error) {
	fs := flag.NewFlagSet("bench-handoff", flag.ContinueOnError)
	fs.SetOutput(output)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `Usage: bench-handoff [flags]

Measures cross-process handoff latency, publish → "the subscriber holds the
message", of zero-copy (handle over SOCK_SEQPACKET, payload in a shared
memfd pool) against copy (handle + whole payload through a SOCK_STREAM
socket), for each payload size, side by side in one run. The subscriber is
this binary re-executed as a child process.

A third subscriber measures the machine's wake-up floor: 8 bytes through a
pipe, no transport. Per size the three run at the same time and take turns
of --chunk messages, so that they see the same noise. --spin adds the
zero-copy subscriber's spin modes (polling the handle rings, then polling the
socket), each measured alone afterwards; --pin-cpu N
repeats the event-driven cases with both processes on CPU N, which shows
what waking a thread on another (idle) CPU costs on this machine.

Each message is paced: the publisher waits for the subscriber's ack and then
--gap before the next, so every sample is an idle-to-wake handoff. Reported
per case: latency p50/p90/p99/p99.9/max in µs, CPU µs per message of the
publisher and of the subscriber process, and copy ÷ zero-copy ratios. The
issue's targets are checked at the end.

The machine should be otherwise idle; quote medians over several runs
(--runs 3). One run takes about 45 s (with --spin), most of it copying
16 MiB payloads.

Flags:
`)
		fs.PrintDefaults()
	}
	var sizes string
	fs.StringVar(&sizes, "sizes", "1KiB,64KiB,1MiB,3MiB,16MiB", "payload sizes, comma-separated (units B, KiB, MiB; K and M are binary too)")
	fs.IntVar(&cfg.Count, "count", 5000, "measured messages per case")
	fs.IntVar(&cfg.Warmup, "warmup", 200, "messages sent before measuring, per case")
	fs.IntVar(&cfg.Chunk, "chunk", 250, "measured messages per turn: the transports of one size take turns in runs of this many")
	fs.DurationVar(&cfg.Gap, "gap", 200*time.Microsecond, "pause after each ack before the next publish")
	fs.BoolVar(&cfg.Spin, "spin", false, "also measure the zero-copy subscriber's opt-in spin modes, handle rings and socket (SubscriberConfig.Spin, SpinSocket; burns a core)")
	fs.IntVar(&cfg.PinCPU, "pin-cpu", -1, "also run the event-driven cases with both processes confined to this CPU (-1: don't)")
	fs.IntVar(&cfg.Slots, "slots", 8, "slots in each zero-copy pool")
	fs.IntVar(&cfg.Runs, "runs", 1, "repeat every case this many times and report the median of each figure")
	fs.StringVar(&out, "out", "", `also write the report to this file ("", the default: stdout only; make bench-handoff writes the committed docs/bench-handoff.md)`)
	if err := fs.Parse(args); err != nil {
		return cfg, out, err
	}
	if fs.NArg() > 0 {
		return cfg, out, fmt.Errorf("unexpected arguments %q (see --help)", fs.Args())
	}
	if cfg.Sizes, err = parseSizes(sizes); err != nil {
		return cfg, out, err
	}
	largest := 0
	for _, size := range cfg.Sizes {
		largest = max(largest, size)
	}
	switch {
	case cfg.Count < 1 || cfg.Count > maxMessages:
		return cfg, out, fmt.Errorf("--count %d: want 1 to %d", cfg.Count, maxMessages)
	case cfg.Warmup < 0 || cfg.Warmup > maxMessages:
		return cfg, out, fmt.Errorf("--warmup %d: want 0 to %d", cfg.Warmup, maxMessages)
	case cfg.Gap < 0 || cfg.Gap > maxGap:
		return cfg, out, fmt.Errorf("--gap %v: want 0 to %v", cfg.Gap, maxGap)
	case cfg.Chunk < 1:
		return cfg, out, fmt.Errorf("--chunk %d: want ≥ 1", cfg.Chunk)
	case cfg.Slots < 2 || cfg.Slots > 1024:
		return cfg, out, fmt.Errorf("--slots %d: want 2..1024", cfg.Slots)
	case int64(cfg.Slots)*int64(largest) > maxPoolBytes:
		return cfg, out, fmt.Errorf("--slots %d × --sizes %s: a zero-copy pool of %s, want at most %s", cfg.Slots, formatSize(largest), formatSize(cfg.Slots*largest), formatSize(maxPoolBytes))
	case cfg.PinCPU < -1:
		return cfg, out, fmt.Errorf("--pin-cpu %d: want a CPU number, or -1 for none", cfg.PinCPU)
	case cfg.PinCPU >= runtime.NumCPU():
		return cfg, out, fmt.Errorf("--pin-cpu %d: this machine has CPUs 0..%d", cfg.PinCPU, runtime.NumCPU()-1)
	case cfg.Runs < 1:
		return cfg, out, fmt.Errorf("--runs %d: want ≥ 1", cfg.Runs)
	}
	return cfg, out, nil
}

func run(ctx context.Context, args []string) error {
	cfg, out, err := parseConfig(args, os.Stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if err := runBench(ctx, cfg, args, out); err != nil {
		if ctx.Err() != nil {
			// By now the subscribers are reaped and the directory is gone.
			return fmt.Errorf("interrupted (%v): subscriber processes stopped, temp dir removed", context.Cause(ctx))
		}
		return err
	}
	return nil
}

// socketBase is where the sockets' folder goes: os.TempDir(), unless that
// is too long for socket paths under it (107 bytes in all), then /tmp.
func socketBase() string {
	if d := os.TempDir(); len(d) <= 48 {
		return d
	}
	return "/tmp"
}

// runBench measures cfg.Runs runs and writes the report.
func runBench(ctx context.Context, cfg benchConfig, args []string, out string) error {
	var err error
	if cfg.Dir, err = os.MkdirTemp(socketBase(), "bench-handoff-"); err != nil {
		return err
	}
	defer os.RemoveAll(cfg.Dir)

	m := describeMachine()
	var runs [][]caseResult
	for r := range cfg.Runs {
		fmt.Fprintf(os.Stderr, "run %d of %d\n", r+1, cfg.Runs)
		res, err := runAll(ctx, cfg, func(line string) { fmt.Fprintln(os.Stderr, "  "+line) })
		if err != nil {
			return err
		}
		runs = append(runs, res)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	doc := report(m, cfg, args, runs)
	fmt.Print(doc)
	if out == "" {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return fmt.Errorf("--out %q: %w", out, err)
	}
	if err := os.WriteFile(out, []byte(doc), 0o644); err != nil {
		return fmt.Errorf("--out %q: %w", out, err)
	}
	fmt.Fprintf(os.Stderr, "wrote %s\n", out)
	return nil
}
