// Package status is a node's health as ROS 2 tools read it: statuses with
// diagnostic_msgs/DiagnosticStatus's levels, named "NODE: part" as
// diagnostic_updater names its tasks, published once a period to a Sink
// (ros2.DiagnosticsWriter: /diagnostics, for diagnostic_aggregator,
// rqt_robot_monitor and Foxglove). The agent and the camera say what their
// parts are; Loop sends them.
package status

import (
	"context"
	"time"

	"go.uber.org/zap"
)

// Level is a status's severity, with diagnostic_msgs/DiagnosticStatus's
// values.
type Level uint8

// The levels of diagnostic_msgs/DiagnosticStatus.
const (
	OK    Level = 0
	Warn  Level = 1
	Error Level = 2
	Stale Level = 3
)

// Status is one part of a node's state.
type Status struct {
	Level Level
	// Name is "NODE: part"; aggregators group a node's parts by it.
	Name    string
	Message string
	// HardwareID names what the status is about; the nodes give their
	// fully qualified ROS name, so that robots' statuses stay apart.
	HardwareID string
	Values     []KeyValue
}

// KeyValue is one named value of a Status.
type KeyValue struct{ Key, Value string }

// Sink receives a node's statuses.
type Sink interface {
	PublishStatus(stamp time.Time, statuses []Status) error
}

// DefaultPeriod is how often statuses go out: diagnostic_updater's 1 Hz.
const DefaultPeriod = time.Second

// DropWarnRatio is the share of a period's frames or messages dropped
// that makes a status WARN: a drop now and then (an unpaired cloud, a
// handle a busy socket refused) is normal and must not make monitors flap.
const DropWarnRatio = 0.05

// Named returns "node: part" statuses of level, all with message: what a
// node says of every part before it can say more (starting) and after it
// stopped (Stale).
func Named(node, hardwareID string, parts []string, level Level, message string) []Status {
	out := make([]Status, len(parts))
	for i, p := range parts {
		out[i] = Status{Level: level, Name: node + ": " + p, Message: message, HardwareID: hardwareID}
	}
	return out
}

// Loop publishes a node's statuses to Sink every Period until the
// context ends, then Stopped once, so that an aggregator shows the node
// gone at once rather than after its timeout.
type Loop struct {
	Sink   Sink
	Period time.Duration
	// Collect returns the statuses at now; elapsed is the time since the
	// previous call (since Run started, for the first).
	Collect func(now time.Time, elapsed time.Duration) []Status
	Stopped []Status
	// Stamp, if set, gives the header stamp for now ("no stamp", the
	// zero time, under a simulator's clock).
	Stamp func(now time.Time) time.Time
	Log   *zap.Logger
}

// Run publishes until ctx ends. A failing sink is logged when it starts
// and stops failing and never ends the loop: statuses are advice, the
// node's work is what matters. It returns nil.
func (l Loop) Run(ctx context.Context) error {
	log := l.Log
	if log == nil {
		log = zap.NewNop()
	}
	stamp := l.Stamp
	if stamp == nil {
		stamp = func(now time.Time) time.Time { return now }
	}
	t := time.NewTicker(l.Period)
	defer t.Stop()
	failing := false
	publish := func(now time.Time, statuses []Status) {
		err := l.Sink.PublishStatus(stamp(now), statuses)
		switch {
		case err != nil && !failing:
			log.Warn("diagnostics: publish failed; the node's status is not getting out (logged again when it recovers)", zap.Error(err))
		case err == nil && failing:
			log.Info("diagnostics: publishing again")
		}
		failing = err != nil
	}
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			publish(time.Now(), l.Stopped)
			return nil
		case <-t.C:
			// The clock read after the tick: a tick that waited behind a
			// busy CPU must not shorten the period the rates are over.
			now := time.Now()
			publish(now, l.Collect(now, now.Sub(last)))
			last = now
		}
	}
}
