//go:build ros2 && cgo

package ros2

import (
	"slices"
	"sync/atomic"
	"time"

	"go.uber.org/zap/zapcore"
)

// RosoutWriter publishes the node's log lines as rcl_interfaces/Log on
// /rosout, where rqt_console, `ros2 topic echo /rosout` and rosbag find
// every node's logs. Core turns it into a zap core to tee a logger into.
type RosoutWriter struct {
	ep      *endpoint
	name    string // the node's logger name, "robot1.zerohop_agent"
	failed  atomic.Uint64
	written atomic.Uint64
}

// NewRosoutWriter creates the /rosout publisher (RosoutQoS).
func (p *Participant) NewRosoutWriter(opts RosoutOptions) (*RosoutWriter, error) {
	if opts.Topic == "" {
		opts.Topic = "/rosout"
	}
	ep, err := p.newEndpoint(typeLog, opts.Topic, true, RosoutQoS(), defaultMaxBlocking, nil)
	if err != nil {
		return nil, err
	}
	return &RosoutWriter{ep: ep, name: loggerName(p.cfg.node())}, nil
}

// Publish writes one Log; name "" is the node's logger. The zero stamp is
// now.
func (w *RosoutWriter) Publish(stamp time.Time, level uint8, name, msg, file, function string, line uint32) error {
	if name == "" {
		name = w.name
	}
	if stamp.IsZero() {
		stamp = time.Now()
	}
	sec, nanosec := rosTime(stamp)
	ep := w.ep
	ep.mu.Lock()
	defer ep.mu.Unlock()
	if ep.closed {
		return ErrClosed
	}
	if rc := writeLog(ep.e, sec, nanosec, level, name, msg, file, function, line); rc < 0 {
		w.failed.Add(1)
		return &ddsError{op: "write " + ep.ddsTopic, rc: rc}
	}
	w.written.Add(1)
	return nil
}

// Written and Failed count the lines published and those that could not
// be (a logger cannot report its own failures).
func (w *RosoutWriter) Written() uint64 { return w.written.Load() }
func (w *RosoutWriter) Failed() uint64  { return w.failed.Load() }

// Matched returns how many subscribers are matched now.
func (w *RosoutWriter) Matched() int { return int(w.ep.matched.Load()) }

// Close deletes the publisher; lines logged later are dropped.
func (w *RosoutWriter) Close() error { return w.ep.close() }

// Core is a zap core that publishes every entry enabled by level on
// /rosout: the message with its fields as key=value, the logger's name
// under the node's ("robot1.zerohop_agent.camera"), the caller when zap
// records it. Tee it with the node's own core (zapcore.NewTee).
func (w *RosoutWriter) Core(level zapcore.LevelEnabler) zapcore.Core {
	return &rosoutCore{w: w, LevelEnabler: level}
}

type rosoutCore struct {
	zapcore.LevelEnabler
	w      *RosoutWriter
	fields []zapcore.Field
}

func (c *rosoutCore) With(fields []zapcore.Field) zapcore.Core {
	return &rosoutCore{LevelEnabler: c.LevelEnabler, w: c.w, fields: append(slices.Clip(c.fields), fields...)}
}

func (c *rosoutCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

// Write publishes e; a failure is counted (Failed), not returned, so
// that zap does not report it on stderr for every line.
func (c *rosoutCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	name := c.w.name
	if e.LoggerName != "" {
		name += "." + e.LoggerName
	}
	var file, function string
	var line uint32
	if e.Caller.Defined {
		file, function, line = e.Caller.File, e.Caller.Function, uint32(e.Caller.Line)
	}
	_ = c.w.Publish(e.Time, rosoutLevel(e.Level), name, rosoutText(e.Message, append(slices.Clip(c.fields), fields...)), file, function, line)
	return nil
}

func (c *rosoutCore) Sync() error { return nil }
