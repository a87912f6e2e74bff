//go:build ros2 && cgo

package ros2

import (
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/zerohop/zerohop/telemetry/status"
)

// A stand-in for diagnostic_aggregator reads what the writer publishes on
// rt/diagnostics: the type and hash rmw announces, the stamp, and every
// status and value as given (a NUL, which the wire cannot carry, as '?').
// newDiagnosticsWriter is a participant with cfg, closed at cleanup, and
// its diagnostics writer on topic ("": the default).
func newDiagnosticsWriter(t *testing.T, cfg Config, topic string) *DiagnosticsWriter {
	t.Helper()
	p, err := NewParticipant(cfg, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	w, err := p.NewDiagnosticsWriter(DiagnosticsOptions{Topic: topic})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func TestDiagnosticsReachAROSSubscriber(t *testing.T) {
	cfg := loopbackConfig(t)
	w := newDiagnosticsWriter(t, cfg, "")
	sub := startPeer(t, cfg, "sub", "diagnostics", "rt/diagnostics", "reliable", "2")
	sub.expect("MATCHED")
	waitFor(t, "the diagnostics writer to match", func() bool { return w.Matched() == 1 })
	pub := fields(sub.expect("PUBLICATION"))
	if pub["type"] != "diagnostic_msgs::msg::dds_::DiagnosticArray_" || pub["reliability"] != "RELIABLE" ||
		pub["userdata"] != "typehash="+hashDiagnostics+";" {
		t.Errorf("PUBLICATION %v", pub)
	}
	first := []status.Status{
		{Level: status.Error, Name: "zerohop_agent: cmd_vel", Message: "no fresh frame within 200ms (cmd_vel zeroed for 3.2s)",
			HardwareID: "/robot1/zerohop_agent", Values: []status.KeyValue{{Key: "watchdog", Value: "200ms"}, {Key: "e2e p99", Value: "7.2 ms"}, {Key: "", Value: ""}}},
		{Level: status.OK, Name: "zerohop_agent: latency"},
		{Level: status.Warn, Name: "ünïcode \x00 nul", Message: "", Values: []status.KeyValue{{Key: "k", Value: "v"}}},
	}
	// The second array is shorter, its strings too: what the reused
	// buffers held before must not show.
	second := []status.Status{{Level: status.Stale, Name: "a: b", Message: "stopped", Values: []status.KeyValue{{Key: "x", Value: "1"}}}}
	stamp := time.Unix(1700000000, 123456789)
	for _, st := range [][]status.Status{first, second} {
		if err := w.PublishStatus(stamp, st); err != nil {
			t.Fatal(err)
		}
	}
	hx := func(s string) string { return hex.EncodeToString([]byte(strings.ReplaceAll(s, "\x00", "?"))) }
	for n, statuses := range [][]status.Status{first, second} {
		got := fields(sub.expect("SAMPLE"))
		if got["sec"] != "1700000000" || got["nanosec"] != "123456789" || got["n"] != fmt.Sprint(len(statuses)) {
			t.Fatalf("SAMPLE %d: %v", n, got)
		}
		for i, s := range statuses {
			want := fmt.Sprintf("%d,%s,%s,%s,%d", s.Level, hx(s.Name), hx(s.Message), hx(s.HardwareID), len(s.Values))
			if got[fmt.Sprintf("s%d", i)] != want {
				t.Errorf("sample %d status %d: %s, want %s", n, i, got[fmt.Sprintf("s%d", i)], want)
			}
			for k, kv := range s.Values {
				if g, want := got[fmt.Sprintf("s%dv%d", i, k)], hx(kv.Key)+","+hx(kv.Value); g != want {
					t.Errorf("sample %d status %d value %d: %s, want %s", n, i, k, g, want)
				}
			}
		}
		if _, extra := got[fmt.Sprintf("s%d", len(statuses))]; extra {
			t.Errorf("sample %d: more statuses than published: %v", n, got)
		}
	}
}

func TestDiagnosticsLimits(t *testing.T) {
	w := newDiagnosticsWriter(t, loopbackConfig(t), "diag")
	if err := w.PublishStatus(time.Now(), make([]status.Status, MaxDiagnosticStatuses+1)); err == nil || !strings.Contains(err.Error(), "at most 32") {
		t.Errorf("33 statuses: %v", err)
	}
	if err := w.PublishStatus(time.Now(), []status.Status{{Values: make([]status.KeyValue, MaxDiagnosticValues+1)}}); err == nil || !strings.Contains(err.Error(), "at most 512") {
		t.Errorf("513 values: %v", err)
	}
	full := make([]status.Status, MaxDiagnosticStatuses)
	full[0].Values = make([]status.KeyValue, MaxDiagnosticValues)
	if err := w.PublishStatus(time.Now(), full); err != nil {
		t.Errorf("the limits themselves: %v", err)
	}
	if err := w.PublishStatus(time.Now(), nil); err != nil {
		t.Errorf("no status: %v", err)
	}
	w.Close()
	if err := w.PublishStatus(time.Now(), nil); err != ErrClosed {
		t.Errorf("after Close: %v", err)
	}
}

// Once its buffers have grown, a publish allocates nothing, so a status
// publisher costs the pipeline no garbage.
func TestDiagnosticsPublishAllocatesNothing(t *testing.T) {
	w := newDiagnosticsWriter(t, loopbackConfig(t), "")
	var err error
	statuses := []status.Status{{Level: status.Warn, Name: "a: b", Message: "m", Values: []status.KeyValue{{Key: "k", Value: "v"}, {Key: "k2", Value: "v2"}}}}
	now := time.Now()
	if n := testing.AllocsPerRun(100, func() { err = w.PublishStatus(now, statuses) }); n != 0 {
		t.Errorf("%v allocations per publish, want 0", n)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// BenchmarkDiagnosticsPublish is one DiagnosticArray of the agent's size
// (5 statuses, 31 values) serialised and written with no subscriber.
func BenchmarkDiagnosticsPublish(b *testing.B) {
	p, err := NewParticipant(loopbackConfig(b), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	w, err := p.NewDiagnosticsWriter(DiagnosticsOptions{})
	if err != nil {
		b.Fatal(err)
	}
	statuses := make([]status.Status, 5)
	for i := range statuses {
		statuses[i] = status.Status{Level: status.OK, Name: "robot1/zerohop_agent: part", Message: "end-to-end p50 4.10 ms, p99 7.20 ms",
			HardwareID: "/robot1/zerohop_agent"}
		for range 6 {
			statuses[i].Values = append(statuses[i].Values, status.KeyValue{Key: "voxel p50/p99/max ms", Value: "1.60 / 4.10 / 13.00"})
		}
	}
	statuses[0].Values = append(statuses[0].Values, status.KeyValue{Key: "k", Value: "v"})
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		if err := w.PublishStatus(now, statuses); err != nil {
			b.Fatal(err)
		}
	}
}
