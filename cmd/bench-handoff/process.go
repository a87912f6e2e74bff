package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/zerohop/zerohop/internal/childproc"
)

// groupTimeout bounds one group of cases; a stuck subscriber is killed,
// which ends the publisher's wait for its ack.
const groupTimeout = 5 * time.Minute

// child is a running subscriber process and the publisher's end of its ack
// pipe.
type child struct {
	cmd    *exec.Cmd
	stdout bytes.Buffer
	stderr *childproc.TailWriter // the last of what it wrote to stderr (also ours)
	// ack is the read end of the ack pipe; ackR is its fd, in blocking
	// mode, read with read(2) on the publishing thread.
	ack    *os.File
	ackR   int
	cancel context.CancelFunc
	exited chan struct{} // closed once Wait returned
	err    error         // Wait's result, set before exited is closed
	done   bool
}

// startChild re-executes this binary as the subscriber of spec. The extra
// files follow the ack pipe (fd 4 onwards in the child) and are closed here
// once the child has its copies. The child is killed when ctx is done, or
// after groupTimeout.
//
// Pdeathsig has the kernel SIGKILL the child should this process die, even
// by SIGKILL. The kernel ties it to the thread that forks the child, not to
// the process, so that thread must outlive the child: runGroup, the only
// caller, keeps its goroutine locked to its thread from before starting the
// children until they are reaped (the Go runtime ends a thread only when a
// goroutine locked to it exits without unlocking).
func startChild(ctx context.Context, spec childSpec, extra ...*os.File) (*child, error) {
	defer func() {
		for _, f := range extra {
			f.Close()
		}
	}()
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find own executable to run the subscriber: %w", err)
	}
	js, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	ackR, ackW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("ack pipe: %w", err)
	}
	defer ackW.Close() // the child holds its own copy; EOF on ackR then means it died
	ctx, cancel := context.WithTimeout(ctx, groupTimeout)
	c := &child{cancel: cancel, ack: ackR, stderr: childproc.NewTailWriter(8 << 10), exited: make(chan struct{})}
	c.cmd = exec.CommandContext(ctx, exe)
	c.cmd.Env = append(os.Environ(), childEnv+"="+string(js))
	c.cmd.ExtraFiles = append([]*os.File{ackW}, extra...) // fd 3 in the child is ackFd
	c.cmd.Stdout = &c.stdout
	c.cmd.Stderr = io.MultiWriter(os.Stderr, c.stderr)
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	c.cmd.WaitDelay = 2 * time.Second // don't hang on an output pipe a grandchild kept open
	if err := c.cmd.Start(); err != nil {
		cancel()
		ackR.Close()
		return nil, fmt.Errorf("start subscriber process: %w", err)
	}
	go func() {
		c.err = c.cmd.Wait()
		close(c.exited)
	}()
	// Fd puts the pipe in blocking mode: waitAck sleeps in read(2) on the
	// publishing thread instead of going through the netpoller.
	c.ackR = int(ackR.Fd())
	return c, nil
}

// hasExited reports whether the subscriber process has exited (and been
// reaped).
func (c *child) hasExited() bool {
	select {
	case <-c.exited:
		return true
	default:
		return false
	}
}

// exitReport describes how an exited subscriber ended: its exit status and
// the tail of its stderr. Call it only once hasExited reports true.
func (c *child) exitReport() string {
	return childproc.ExitReport("subscriber process", c.err, c.stderr)
}

// explain adds the subscriber's exit status and stderr to err, a failure
// to publish to it or to get its ack, if the subscriber exited (within a
// second; it may still be on its way out).
func (c *child) explain(err error) error {
	select {
	case <-c.exited:
	case <-time.After(time.Second):
		return err
	}
	return fmt.Errorf("%w: %s", err, c.exitReport())
}

// waitAck blocks until the subscriber acknowledged one message.
func (c *child) waitAck(seq int) error {
	var b [1]byte
	for {
		n, err := unix.Read(c.ackR, b[:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("wait for the ack of message %d: %w", seq, err)
		}
		if n == 0 {
			return fmt.Errorf("subscriber process exited before acknowledging message %d", seq)
		}
		return nil
	}
}

// finish waits for the subscriber to exit and decodes its result.
func (c *child) finish() (childResult, error) {
	c.done = true
	defer c.cancel()
	defer c.ack.Close()
	var res childResult
	<-c.exited
	if c.err != nil {
		return res, errors.New(c.exitReport())
	}
	if err := json.Unmarshal(c.stdout.Bytes(), &res); err != nil {
		return res, fmt.Errorf("subscriber process result: %w", err)
	}
	return res, nil
}

// abort kills the subscriber unless finish already reaped it, and waits
// for it.
func (c *child) abort() {
	if c.done {
		return
	}
	c.done = true
	c.cancel()
	<-c.exited
	c.ack.Close()
}
