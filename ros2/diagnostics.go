//go:build ros2 && cgo

package ros2

import (
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/zerohop/zerohop/telemetry/status"
)

// The writer is what the nodes' status loops publish to.
var _ status.Sink = (*DiagnosticsWriter)(nil)

// DiagnosticsWriter publishes diagnostic_msgs/DiagnosticArray, by default
// on /diagnostics, where diagnostic_aggregator, rqt_robot_monitor and
// Foxglove look for a robot's health. Publish may be called from any
// goroutine; after the first calls it does not allocate (its buffers are
// reused) and, like every KEEP_LAST writer, it does not wait for readers.
type DiagnosticsWriter struct {
	ep *endpoint
	// Under ep.mu, reused by every Publish.
	strs     []byte
	statuses []diagStatusRec
	values   []uint32
}

// NewDiagnosticsWriter creates the diagnostics publisher.
func (p *Participant) NewDiagnosticsWriter(opts DiagnosticsOptions) (*DiagnosticsWriter, error) {
	if opts.Topic == "" {
		opts.Topic = "/diagnostics"
	}
	q, err := opts.QoS.resolve(DefaultQoS())
	if err != nil {
		return nil, err
	}
	w := &DiagnosticsWriter{}
	if w.ep, err = p.newEndpoint(typeDiagnostics, opts.Topic, true, q, defaultMaxBlocking, nil); err != nil {
		return nil, err
	}
	p.log.Info("ros2: publishing diagnostics", zapTopic(w.ep), zapQoS(q))
	return w, nil
}

// PublishStatus writes one DiagnosticArray with header.stamp stamp ({0, 0}
// for the zero time) and the statuses in order. A NUL byte in a string,
// which the wire format cannot carry, becomes '?'. At most
// MaxDiagnosticStatuses statuses and MaxDiagnosticValues values in all.
func (w *DiagnosticsWriter) PublishStatus(stamp time.Time, statuses []status.Status) error {
	if len(statuses) > MaxDiagnosticStatuses {
		return fmt.Errorf("ros2: %d diagnostic statuses, at most %d", len(statuses), MaxDiagnosticStatuses)
	}
	nvalues := 0
	for i := range statuses {
		nvalues += len(statuses[i].Values)
	}
	if nvalues > MaxDiagnosticValues {
		return fmt.Errorf("ros2: %d diagnostic values, at most %d", nvalues, MaxDiagnosticValues)
	}
	ep := w.ep
	ep.mu.Lock()
	defer ep.mu.Unlock()
	if ep.closed {
		return ErrClosed
	}
	w.strs, w.statuses, w.values = w.strs[:0], w.statuses[:0], w.values[:0]
	w.strs = append(w.strs, 0) // offset 0: the empty string
	for i := range statuses {
		s := &statuses[i]
		rec := diagStatusRec{level: uint8(s.Level), name: w.str(s.Name), message: w.str(s.Message),
			hardwareID: w.str(s.HardwareID), firstValue: uint32(len(w.values) / 2), nvalues: uint32(len(s.Values))}
		for _, kv := range s.Values {
			w.values = append(w.values, w.str(kv.Key), w.str(kv.Value))
		}
		w.statuses = append(w.statuses, rec)
	}
	sec, nanosec := rosTime(stamp)
	if rc := writeDiagnostics(ep.e, sec, nanosec, w.strs, w.statuses, w.values); rc < 0 {
		return &ddsError{op: "write " + ep.ddsTopic, rc: rc}
	}
	return nil
}

// str appends s NUL-terminated to the strings buffer and returns its
// offset; "" is offset 0.
func (w *DiagnosticsWriter) str(s string) uint32 {
	if s == "" {
		return 0
	}
	off := uint32(len(w.strs))
	if strings.IndexByte(s, 0) < 0 {
		w.strs = append(w.strs, s...)
	} else {
		for i := 0; i < len(s); i++ {
			c := s[i]
			if c == 0 {
				c = '?'
			}
			w.strs = append(w.strs, c)
		}
	}
	w.strs = append(w.strs, 0)
	return off
}

// Matched returns how many subscribers are matched now.
func (w *DiagnosticsWriter) Matched() int { return int(w.ep.matched.Load()) }

// Close deletes the publisher, first waiting (up to diagnosticsAckWait)
// for matched subscribers to acknowledge what was sent: a node's last
// array, every part STALE, must not be lost to a lossy link.
func (w *DiagnosticsWriter) Close() error {
	ep := w.ep
	ep.mu.Lock()
	closed := ep.closed
	ep.mu.Unlock()
	if !closed && ep.matched.Load() > 0 {
		if rc := waitForAcks(ep.e, diagnosticsAckWait); rc == rcTimeout {
			ep.p.log.Info("ros2: the last diagnostics were not acknowledged in time", zapTopic(ep), zap.Duration("waited", diagnosticsAckWait))
		}
	}
	return ep.close()
}

// diagnosticsAckWait bounds Close's wait: shutdown must not hang on a
// monitor that went away.
const diagnosticsAckWait = 200 * time.Millisecond
