package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"time"

	"golang.org/x/sys/unix"
)

// groupTimeout bounds one group of cases; a stuck subscriber is killed,
// which ends the publisher's wait for its ack.
const groupTimeout = 5 * time.Minute

// child is a running subscriber process and the publisher's end of its ack
// pipe.
type child struct {
	cmd    *exec.Cmd
	stdout bytes.Buffer
	// ack is the read end of the ack pipe; ackR is its fd, in blocking
	// mode, read with read(2) on the publishing thread.
	ack    *os.File
	ackR   int
	cancel context.CancelFunc
	done   bool
}

// startChild re-executes this binary as the subscriber of spec. The extra
// files follow the ack pipe (fd 4 onwards in the child) and are closed here
// once the child has its copies.
func startChild(spec childSpec, extra ...*os.File) (*child, error) {
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
	ctx, cancel := context.WithTimeout(context.Background(), groupTimeout)
	c := &child{cancel: cancel, ack: ackR}
	c.cmd = exec.CommandContext(ctx, exe)
	c.cmd.Env = append(os.Environ(), childEnv+"="+string(js))
	c.cmd.ExtraFiles = append([]*os.File{ackW}, extra...) // fd 3 in the child is ackFd
	c.cmd.Stdout = &c.stdout
	c.cmd.Stderr = os.Stderr
	if err := c.cmd.Start(); err != nil {
		cancel()
		ackR.Close()
		return nil, fmt.Errorf("start subscriber process: %w", err)
	}
	// Fd puts the pipe in blocking mode: waitAck sleeps in read(2) on the
	// publishing thread instead of going through the netpoller.
	c.ackR = int(ackR.Fd())
	return c, nil
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
	if err := c.cmd.Wait(); err != nil {
		return res, fmt.Errorf("subscriber process: %w", err)
	}
	if err := json.Unmarshal(c.stdout.Bytes(), &res); err != nil {
		return res, fmt.Errorf("subscriber process result: %w", err)
	}
	return res, nil
}

// abort kills the subscriber unless finish already reaped it.
func (c *child) abort() {
	if c.done {
		return
	}
	c.done = true
	c.cancel()
	c.cmd.Wait()
	c.ack.Close()
}
