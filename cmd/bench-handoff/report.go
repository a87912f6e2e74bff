package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// machine describes where and when the benchmark ran.
type machine struct {
	Uname, CPU, CPUs, Load, Date, GoVersion, Commit string
	NumCPU, GOMAXPROCS                              int
}

func describeMachine() machine {
	m := machine{
		Date:       time.Now().Format("2006-01-02 15:04:05 MST"),
		GoVersion:  runtime.Version(),
		NumCPU:     runtime.NumCPU(),
		GOMAXPROCS: runtime.GOMAXPROCS(0),
		CPU:        "unknown",
		CPUs:       affinity(),
		Commit:     "unknown (not a git checkout)",
	}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		m.Uname = unix.ByteSliceToString(u.Sysname[:]) + " " + unix.ByteSliceToString(u.Release[:]) + " " + unix.ByteSliceToString(u.Machine[:])
	}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) >= 3 {
			m.Load = strings.Join(f[:3], " ")
		}
	}
	if out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output(); err == nil {
		m.Commit = strings.TrimSpace(string(out))
		if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(bytes.TrimSpace(st)) > 0 {
			m.Commit += " (with uncommitted changes)"
		}
	}
	return m
}

// report renders the whole results document.
func report(m machine, cfg benchConfig, args []string, runs [][]caseResult) string {
	results := medianOfRuns(runs)
	var b strings.Builder
	b.WriteString("# Cross-process handoff latency: zero-copy vs copy\n\n")
	fmt.Fprintf(&b, "Written by `bench-handoff %s`; rerun it (or `make bench-handoff`) to refresh.\n\n", strings.Join(args, " "))
	fmt.Fprintf(&b, "- machine: %s; CPU %s; nproc %d (allowed CPUs %s); GOMAXPROCS %d; load average at start %s\n", m.Uname, m.CPU, m.NumCPU, m.CPUs, m.GOMAXPROCS, m.Load)
	fmt.Fprintf(&b, "- date: %s; Go %s; commit %s\n", m.Date, m.GoVersion, m.Commit)
	fmt.Fprintf(&b, "- %d messages per case after %d warm-up messages, in turns of %d; %s gap before each publish; %d slots per zero-copy pool",
		cfg.Count, cfg.Warmup, cfg.Chunk, cfg.Gap, cfg.Slots)
	if len(runs) > 1 {
		fmt.Fprintf(&b, "; every figure is the median over %d runs of that figure", len(runs))
	}
	b.WriteString("\n\n")
	b.WriteString(method)
	b.WriteString("\n## Event-driven subscriber (default: blocked in recv), processes placed by the OS\n\n")
	b.WriteString(formatTable(results, modeEvent, cfg.Sizes, []string{zeroCopy, copyStream, pipeWake}))
	if cfg.Spin {
		b.WriteString("\n## Spinning subscriber (SubscriberConfig.Spin), processes placed by the OS\n\n")
		b.WriteString("`rings`: the subscriber polls the handle rings the camera writes (the default spin mode); `socket`: it polls its socket with non-blocking recv (`SpinSocket`, the baseline). One spinning subscriber at a time, rings then socket, per size.\n\n")
		b.WriteString("No copy ratios here: copy has no spin mode, and its event-driven rows were measured in another pass, in another mode.\n\n")
		b.WriteString(formatTable(results, modeSpin, cfg.Sizes, []string{zeroCopySpin, zeroCopySpinSocket}))
	}
	if cfg.PinCPU >= 0 {
		fmt.Fprintf(&b, "\n## Event-driven subscriber, publisher and subscriber both confined to CPU %d\n\n", cfg.PinCPU)
		b.WriteString(formatTable(results, modeOneCPU, cfg.Sizes, []string{zeroCopy, copyStream, pipeWake}))
	}
	b.WriteString("\n## Targets\n\n")
	b.WriteString(formatTargets(checkTargets(results, cfg.Sizes)))
	if len(runs) > 1 {
		b.WriteString("\n## Each run (p50 / p99 µs)\n\n")
		b.WriteString(formatRuns(runs))
	}
	return b.String()
}

const method = `## Method

Publisher and subscriber are separate processes (the benchmark re-executes
itself as the subscriber). Latency is the subscriber's monotime.Now()
(CLOCK_MONOTONIC) at the moment it holds the message, minus Handle.PublishNs,
stamped by the publisher just before Publish:

- **zero-copy**: handles/transport Server and Subscriber over SOCK_SEQPACKET,
  a shared memfd pool (pinned.New, Shared) with slots of exactly the payload
  size. The payload is written once at setup; per message the publisher
  writes only the sequence number into the first and last payload byte. The
  time is read in the OnLease callback, which runs on the subscriber's
  receive goroutine when recv returns (blocked in the kernel), or, with
  Spin, as soon as its poll of the handle ring (or, with SpinSocket, of the
  socket) finds the handle. The callback then releases the lease.
- **copy**: handles/transport CopyServer and CopySubscriber over SOCK_STREAM.
  The 128-byte handle record and the whole payload go through the socket
  every message (one writev; the subscriber reads with MSG_WAITALL into its
  own preallocated buffer on a thread-locked goroutine blocked in recv, like
  the zero-copy receive goroutine). The time is read once the whole payload
  is in the buffer. This is a lower bound for a serializing middleware: the
  kernel copies the payload twice and there is no serialization on top.
- **wake-up floor (8 B pipe)**: no transport. The publisher writes its
  8-byte publish time into a pipe, and the subscriber, blocked in read(2) on
  a thread-locked goroutine, wakes. No event-driven transport can hand off
  faster than this machine wakes a blocked thread of another process.

Pacing: after each message the subscriber writes one byte on an ack pipe;
the publisher waits for it, then sleeps the gap (nanosleep) before the next
publish, so that every message is an idle-to-wake handoff, not queueing.
Side by side: for each size, the zero-copy, copy and floor subscribers run
at the same time, and the publisher sends their measured messages in turns
of --chunk messages, transport after transport, so that all three sample
the same stretch of machine noise. The spinning subscribers (--spin: on
the handle rings, then on the socket) run alone afterwards, one at a time,
because a busy core would slow the others. With
--pin-cpu the event-driven groups run again with every thread of both
processes confined to one CPU: a wake-up is then a context switch on that
CPU instead of a wake-up of another, idle CPU (on a VM, an inter-processor
interrupt to a halted virtual CPU).

Both payload subscribers check the first and last byte against the
handle's sequence number. Percentiles are nearest-rank over the sorted
samples. CPU is getrusage(RUSAGE_SELF) user+system of each process over its
own turns only, divided by the messages: it includes the pacing (nanosleep,
the ack write and read), the Go runtime's wake-ups and, for the zero-copy
publisher, the server goroutine that applies releases. The floor rows show
what the pacing and wake-ups alone cost; a transport's own cost is its
figure minus the floor's.
`

// formatRuns lists p50 / p99 of every case in every run.
func formatRuns(runs [][]caseResult) string {
	var b strings.Builder
	b.WriteString("| mode | size | transport |")
	for r := range runs {
		fmt.Fprintf(&b, " run %d |", r+1)
	}
	b.WriteString("\n|---|---:|---|")
	for range runs {
		b.WriteString("---:|")
	}
	b.WriteString("\n")
	for i, c := range runs[0] {
		fmt.Fprintf(&b, "| %s | %s | %s |", c.Mode, formatSize(c.Size), c.Transport)
		for _, run := range runs {
			fmt.Fprintf(&b, " %s / %s |", us(run[i].Summary.P50), us(run[i].Summary.P99))
		}
		b.WriteString("\n")
	}
	return b.String()
}
