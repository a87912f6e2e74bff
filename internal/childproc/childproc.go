// Package childproc holds what the benchmark commands need to report on
// the child processes they start: the tail of a child's stderr and how it
// exited.
package childproc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
)

// TailWriter keeps the last size bytes written to it. Safe for concurrent
// use.
type TailWriter struct {
	mu   sync.Mutex
	size int
	buf  []byte
}

// NewTailWriter returns a TailWriter that keeps size bytes.
func NewTailWriter(size int) *TailWriter { return &TailWriter{size: size} }

func (t *TailWriter) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.size; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

// Tail is the last n non-empty lines kept, each indented; a Go panic's or
// fatal error's first line, if still kept, comes first, since the lines
// after it are a stack trace.
func (t *TailWriter) Tail(n int) string {
	t.mu.Lock()
	s := string(t.buf)
	t.mu.Unlock()
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimRight(l, "\r \t"); l != "" {
			lines = append(lines, l)
		}
	}
	var head []string
	for i, l := range lines {
		if strings.HasPrefix(l, "panic: ") || strings.HasPrefix(l, "fatal error: ") {
			if i < len(lines)-n {
				head = []string{l, "…"}
			}
			break
		}
	}
	lines = append(head, lines[max(0, len(lines)-n):]...)
	for i, l := range lines {
		lines[i] = "    " + l
	}
	return strings.Join(lines, "\n")
}

// ExitReport describes how a child named name ended, from its Wait error
// (nil: exit status 0) and the last 10 lines of its stderr.
func ExitReport(name string, waitErr error, stderr *TailWriter) string {
	status := "exit status 0"
	if waitErr != nil {
		status = waitErr.Error()
		var ee *exec.ExitError
		if errors.As(waitErr, &ee) {
			status = ee.ProcessState.String() // "exit status 2", "signal: killed"
		}
	}
	s := fmt.Sprintf("%s exited (%s)", name, status)
	if tail := stderr.Tail(10); tail != "" {
		s += "; its stderr ended:\n" + tail
	}
	return s
}

// RunMain runs run(ctx, os.Args[1:]) for a command that starts children,
// with ctx cancelled by the first SIGINT or SIGTERM (run must then stop and
// reap its children and remove what it wrote); a second signal gets the
// default action, exiting at once, and the children die by their
// Pdeathsig. An error is printed as "name: err" with exit status 1.
func RunMain(name string, run func(ctx context.Context, args []string) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() { // owned by this function: ends with ctx, which stop ends
		<-ctx.Done()
		stop()
	}()
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
}
