package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"time"

	"golang.org/x/sys/unix"

	"github.com/zerohop/zerohop/handles/transport"
	"github.com/zerohop/zerohop/monotime"
)

// childEnv carries the JSON childSpec to the re-executed benchmark binary;
// its presence makes main run the subscriber instead of the benchmark.
const childEnv = "ZEROHOP_BENCH_HANDOFF_CHILD"

// ackFd is the child's end of the ack pipe (exec.Cmd.ExtraFiles[0]);
// pipeFd is the read end of the data pipe of the pipeWake floor.
const (
	ackFd  = 3
	pipeFd = 4
)

// topicName is the one topic the zero-copy server serves.
const topicName = "bench"

// childSpec tells the subscriber process what to receive.
type childSpec struct {
	Transport string // zeroCopy, zeroCopySpin, zeroCopySpinSocket, copyStream or pipeWake
	Socket    string
	Size      int
	Warmup    int // first messages received but not reported
	Count     int // messages reported after the warm-up
	// Chunk: the measured messages come in runs of Chunk, interleaved with
	// other transports' runs; CPU is counted only within this lane's runs.
	Chunk int
}

// childResult is what the subscriber writes to its stdout, as JSON.
type childResult struct {
	LatencyNs []int64 // per measured message: receive time − Handle.PublishNs
	CPUNs     int64   // user+sys of the process over its measured chunks
	Corrupt   int     // payloads whose marker bytes did not match the handle's seq
	CPUs      string  // the CPUs the process may run on, e.g. "0,1"
}

// subscriberState records latencies into memory allocated before the first
// message; begin, verify and end allocate nothing.
type subscriberState struct {
	spec    childSpec
	lat     []int64
	n       int // messages received so far
	corrupt int
	cpuMark int64        // CPU time at the start of the current chunk
	cpuSum  int64        // CPU time over the finished chunks
	cpu     func() int64 // the process's CPU time; cpuNs but in tests
	ack     [1]byte
}

func newSubscriberState(spec childSpec) *subscriberState {
	spec.Chunk = max(spec.Chunk, 1)
	return &subscriberState{spec: spec, lat: make([]int64, spec.Warmup+spec.Count), cpu: cpuNs}
}

// verify checks message seq's payload: the publisher writes the seq into
// its first and last byte, so a stale or short view of the slot shows here.
func (st *subscriberState) verify(seq uint64, p []byte) {
	if len(p) != st.spec.Size || p[0] != byte(seq) || p[len(p)-1] != byte(seq) {
		st.corrupt++
	}
}

// begin records that the subscriber holds the next message since nowNs.
// Then the caller verifies it, gives it back (zero-copy), acknowledges it
// and calls end.
//
// CPU is counted from here for the first message of each measured chunk
// (missing only that message's wake-up, 1 in Chunk) to the end of the
// chunk's last one, so that the idle time while other lanes run, and
// whatever the runtime does in it, is left out.
func (st *subscriberState) begin(nowNs, publishNs int64) {
	i := st.n
	if i >= len(st.lat) {
		return
	}
	st.lat[i] = nowNs - publishNs
	if i >= st.spec.Warmup && (i-st.spec.Warmup)%st.spec.Chunk == 0 {
		st.cpuMark = st.cpu()
	}
}

// end closes the message begun last and reports whether all have arrived.
func (st *subscriberState) end() bool {
	i := st.n
	if i >= st.spec.Warmup && i < len(st.lat) && ((i-st.spec.Warmup)%st.spec.Chunk == st.spec.Chunk-1 || i == len(st.lat)-1) {
		st.cpuSum += st.cpu() - st.cpuMark
	}
	st.n++
	return st.n >= len(st.lat)
}

// acknowledge tells the publisher it may send the next message.
func (st *subscriberState) acknowledge() error {
	for {
		_, err := unix.Write(ackFd, st.ack[:])
		if err != unix.EINTR {
			return err
		}
	}
}

func (st *subscriberState) result() childResult {
	return childResult{LatencyNs: st.lat[st.spec.Warmup:], CPUNs: st.cpuSum, Corrupt: st.corrupt, CPUs: affinity()}
}

// runChild is the subscriber process: it receives every message of one
// case, then writes a childResult to stdout.
func runChild(specJSON string) error {
	var spec childSpec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		return fmt.Errorf("%s: %w", childEnv, err)
	}
	// The parent checks its flags; this guards the allocation below anyway.
	if spec.Warmup < 0 || spec.Count < 1 || spec.Warmup > maxMessages || spec.Count > maxMessages || spec.Size < 1 {
		return fmt.Errorf("%s: warm-up %d, count %d, size %d: out of range", childEnv, spec.Warmup, spec.Count, spec.Size)
	}
	st := newSubscriberState(spec)
	var err error
	switch spec.Transport {
	case zeroCopy, zeroCopySpin, zeroCopySpinSocket:
		err = receiveZeroCopy(st)
	case copyStream:
		err = receiveCopy(st)
	case pipeWake:
		err = receivePipe(st)
	default:
		err = fmt.Errorf("unknown transport %q", spec.Transport)
	}
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(st.result())
}

// receiveZeroCopy takes each message in the OnLease callback, which runs on
// the subscriber's receive goroutine as soon as recv returns the handle
// (blocked in the kernel by default, polling with Spin).
func receiveZeroCopy(st *subscriberState) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	sub, err := transport.NewSubscriber(transport.SubscriberConfig{
		Path:       st.spec.Socket,
		Name:       "bench-handoff",
		Topics:     []string{topicName},
		Spin:       st.spec.Transport == zeroCopySpin || st.spec.Transport == zeroCopySpinSocket,
		SpinSocket: st.spec.Transport == zeroCopySpinSocket,
		OnLease: func(l transport.Lease) {
			st.begin(monotime.Now(), l.Handle.PublishNs)
			st.verify(l.Handle.Seq, l.Bytes())
			if err := l.Release(); err != nil {
				failOnce(done, fmt.Errorf("release message %d: %w", l.Handle.Seq, err))
			}
			if err := st.acknowledge(); err != nil {
				failOnce(done, fmt.Errorf("ack message %d: %w", l.Handle.Seq, err))
			}
			if st.end() {
				failOnce(done, nil)
			}
		},
	})
	if err != nil {
		return err
	}
	runErr := make(chan error, 1)
	go func() { runErr <- sub.Run(ctx) }()
	select {
	case err = <-done:
	case err = <-runErr:
		return fmt.Errorf("subscriber stopped after %d messages: %v", st.n, err)
	}
	cancel()
	<-runErr
	if err == nil && sub.Stats().Invalid != 0 {
		err = fmt.Errorf("%d invalid handles", sub.Stats().Invalid)
	}
	return err
}

func failOnce(done chan<- error, err error) {
	select {
	case done <- err:
	default:
	}
}

// receiveCopy reads each whole message into the subscriber's buffer on a
// goroutine locked to its thread, blocked in recv like the zero-copy
// receive goroutine, so that only the copying differs.
func receiveCopy(st *subscriberState) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sub, err := transport.DialCopy(ctx, st.spec.Socket, st.spec.Size)
	if err != nil {
		return err
	}
	defer sub.Close()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for {
		h, p, err := sub.Next()
		now := monotime.Now()
		if err != nil {
			return fmt.Errorf("after %d messages: %w", st.n, err)
		}
		st.begin(now, h.PublishNs)
		st.verify(h.Seq, p)
		if err := st.acknowledge(); err != nil {
			return fmt.Errorf("ack message %d: %w", h.Seq, err)
		}
		if st.end() {
			return nil
		}
	}
}

// receivePipe wakes from read(2) on the data pipe for each 8-byte publish
// time; there is no payload to verify.
func receivePipe(st *subscriberState) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var msg [8]byte
	for {
		n, err := unix.Read(pipeFd, msg[:])
		now := monotime.Now()
		if err == unix.EINTR {
			continue
		}
		if err != nil || n != len(msg) {
			return fmt.Errorf("data pipe after %d messages: read %d bytes: %v", st.n, n, err)
		}
		st.begin(now, int64(binary.LittleEndian.Uint64(msg[:])))
		if err := st.acknowledge(); err != nil {
			return fmt.Errorf("ack message %d: %w", st.n, err)
		}
		if st.end() {
			return nil
		}
	}
}

// cpuNs is the process's user+system CPU time so far.
func cpuNs() int64 {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
