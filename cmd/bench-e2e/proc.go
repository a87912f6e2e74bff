package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/zerohop/zerohop/internal/childproc"
)

// proc is a running child process (camera or agent) whose exit is noticed
// as it happens: a goroutine waits for it from the start.
type proc struct {
	name   string
	cmd    *exec.Cmd
	stderr *childproc.TailWriter
	echo   *mutableWriter // our stderr, muted for a goroutine dump
	exited chan struct{}  // closed once Wait returned
	err    error          // Wait's result, set before exited is closed
}

// startProc starts path with args. Its stderr goes to ours, into a tail
// buffer, so that an early exit can be reported with its last words, and
// to log whole (nil: nowhere), for a hang's goroutine dump (dump).
//
// Pdeathsig makes the kernel SIGKILL the child when its parent dies, even
// by SIGKILL, which no handler here can catch. The kernel ties it to the
// thread that forked the child, not to the process: should that thread
// exit, the child is killed early. The Go runtime ends a thread only when
// a goroutine locked to it exits without unlocking, which nothing in this
// program does; besides, measure holds its goroutine locked to its thread
// for as long as its children live, so that thread cannot go away (see
// measure).
func startProc(name, path string, log io.Writer, args ...string) (*proc, error) {
	p := &proc{name: name, stderr: childproc.NewTailWriter(8 << 10), echo: &mutableWriter{w: os.Stderr}, exited: make(chan struct{})}
	p.cmd = exec.Command(path, args...)
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if log == nil {
		log = io.Discard
	}
	p.cmd.Stderr = io.MultiWriter(p.echo, p.stderr, log)
	p.cmd.WaitDelay = 2 * time.Second // don't hang on a stderr pipe a grandchild kept open
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// done reports whether the process has exited (and been reaped).
func (p *proc) done() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// stop asks the process to exit (SIGTERM), kills it after 5 s and waits
// for it either way.
func (p *proc) stop() { p.end(syscall.SIGTERM) }

// dumpAll ends processes that hang with SIGQUIT, on which a Go program
// writes every goroutine's stack to its stderr (to its log, not to ours:
// it is long), all at once: one ending first would change what the others
// show (a camera blocked writing to an agent that died carries on). It
// waits for each, killing it after 5 s.
func dumpAll(procs ...*proc) {
	for _, p := range procs {
		p.echo.mute()
		if !p.done() {
			p.cmd.Process.Signal(syscall.SIGQUIT)
		}
	}
	for _, p := range procs {
		p.wait()
	}
}

// end sends sig to the process unless it has exited, then waits for it.
func (p *proc) end(sig syscall.Signal) {
	if p.done() {
		return
	}
	p.cmd.Process.Signal(sig)
	p.wait()
}

// wait waits for the process to exit, killing it after 5 s.
func (p *proc) wait() {
	select {
	case <-p.exited:
	case <-time.After(5 * time.Second):
		p.cmd.Process.Kill()
		<-p.exited
	}
}

// mutableWriter passes writes to w until muted, then drops them.
type mutableWriter struct {
	mu    sync.Mutex
	w     io.Writer
	muted bool
}

func (m *mutableWriter) Write(b []byte) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.muted {
		return len(b), nil
	}
	return m.w.Write(b)
}

func (m *mutableWriter) mute() {
	m.mu.Lock()
	m.muted = true
	m.mu.Unlock()
}

// exitReport describes how an exited process ended: its exit status and
// the tail of its stderr. Call it only once done reports true.
func (p *proc) exitReport() string { return childproc.ExitReport(p.name, p.err, p.stderr) }

// errExited reports children that exited early: once one has, it gives the
// others a moment to follow (the agent exits when its camera does), then
// describes every one that is gone, in order.
func errExited(when string, procs ...*proc) error {
	deadline := time.Now().Add(500 * time.Millisecond)
	for time.Now().Before(deadline) {
		all := true
		for _, p := range procs {
			all = all && p.done()
		}
		if all {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	var msgs []string
	for _, p := range procs {
		if p.done() {
			msgs = append(msgs, p.exitReport())
		}
	}
	return fmt.Errorf("%s: %s", when, strings.Join(msgs, "\n"))
}

// anyExited returns a channel that receives once any of procs has exited.
func anyExited(procs ...*proc) <-chan struct{} {
	ch := make(chan struct{}, len(procs))
	for _, p := range procs {
		go func() {
			<-p.exited
			ch <- struct{}{}
		}()
	}
	return ch
}

// hold waits d unless ctx is done first (ctx.Err()) or a child exits
// (reported with errExited).
func hold(ctx context.Context, d time.Duration, when string, procs ...*proc) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-anyExited(procs...):
		return errExited(when, procs...)
	}
}
