//go:build ros2 && cgo

package ros2

import (
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
)

// A stand-in for diagnostic_aggregator reads what the writer publishes on
// rt/diagnostics: the type and hash rmw announces, the stamp, and every
// status and value as given (a NUL, which the wire cannot carry, as '?').
func TestDiagnosticsReachAROSSubscriber(t *testing.T) {
	cfg := loopbackConfig(t)
	p, err := NewParticipant(cfg, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	w, err := p.NewDiagnosticsWriter(DiagnosticsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sub := startPeer(t, cfg, "sub", "diagnostics", "rt/diagnostics", "reliable", "1")
	sub.expect("MATCHED")
	waitFor(t, "the diagnostics writer to match", func() bool { return w.Matched() == 1 })
	pub := fields(sub.expect("PUBLICATION"))
	if pub["type"] != "diagnostic_msgs::msg::dds_::DiagnosticArray_" || pub["reliability"] != "RELIABLE" ||
		pub["userdata"] != "typehash="+hashDiagnostics+";" {
		t.Errorf("PUBLICATION %v", pub)
	}
	statuses := []DiagnosticStatus{
		{Level: DiagnosticError, Name: "zerohop_agent: cmd_vel", Message: "no fresh frame within 200ms (cmd_vel zeroed for 3.2s)",
			HardwareID: "robot1", Values: []KeyValue{{"watchdog", "200ms"}, {"e2e p99", "7.2 ms"}, {"", ""}}},
		{Level: DiagnosticOK, Name: "zerohop_agent: latency"},
		{Level: DiagnosticWarn, Name: "ünïcode \x00 nul", Message: "", Values: []KeyValue{{"k", "v"}}},
	}
	stamp := time.Unix(1700000000, 123456789)
	for i := 0; i < 2; i++ { // the second write reuses the buffers
		if err := w.Publish(stamp, statuses); err != nil {
			t.Fatal(err)
		}
	}
	got := fields(sub.expect("SAMPLE"))
	if got["sec"] != "1700000000" || got["nanosec"] != "123456789" || got["n"] != "3" {
		t.Fatalf("SAMPLE %v", got)
	}
	hx := func(s string) string { return hex.EncodeToString([]byte(strings.ReplaceAll(s, "\x00", "?"))) }
	for i, s := range statuses {
		want := fmt.Sprintf("%d,%s,%s,%s,%d", s.Level, hx(s.Name), hx(s.Message), hx(s.HardwareID), len(s.Values))
		if got[fmt.Sprintf("s%d", i)] != want {
			t.Errorf("status %d: %s, want %s", i, got[fmt.Sprintf("s%d", i)], want)
		}
		for k, kv := range s.Values {
			if g, want := got[fmt.Sprintf("s%dv%d", i, k)], hx(kv.Key)+","+hx(kv.Value); g != want {
				t.Errorf("status %d value %d: %s, want %s", i, k, g, want)
			}
		}
	}
}

func TestDiagnosticsLimits(t *testing.T) {
	p, err := NewParticipant(loopbackConfig(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	w, err := p.NewDiagnosticsWriter(DiagnosticsOptions{Topic: "diag"})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Publish(time.Now(), make([]DiagnosticStatus, MaxDiagnosticStatuses+1)); err == nil || !strings.Contains(err.Error(), "at most 32") {
		t.Errorf("33 statuses: %v", err)
	}
	if err := w.Publish(time.Now(), []DiagnosticStatus{{Values: make([]KeyValue, MaxDiagnosticValues+1)}}); err == nil || !strings.Contains(err.Error(), "at most 512") {
		t.Errorf("513 values: %v", err)
	}
	full := make([]DiagnosticStatus, MaxDiagnosticStatuses)
	full[0].Values = make([]KeyValue, MaxDiagnosticValues)
	if err := w.Publish(time.Now(), full); err != nil {
		t.Errorf("the limits themselves: %v", err)
	}
	if err := w.Publish(time.Now(), nil); err != nil {
		t.Errorf("no status: %v", err)
	}
	w.Close()
	if err := w.Publish(time.Now(), nil); err != ErrClosed {
		t.Errorf("after Close: %v", err)
	}
}

// Once its buffers have grown, a publish allocates nothing, so a status
// publisher costs the pipeline no garbage.
func TestDiagnosticsPublishAllocatesNothing(t *testing.T) {
	p, err := NewParticipant(loopbackConfig(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	w, err := p.NewDiagnosticsWriter(DiagnosticsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	statuses := []DiagnosticStatus{{Level: DiagnosticWarn, Name: "a: b", Message: "m", Values: []KeyValue{{"k", "v"}, {"k2", "v2"}}}}
	now := time.Now()
	if n := testing.AllocsPerRun(100, func() { err = w.Publish(now, statuses) }); n != 0 {
		t.Errorf("%v allocations per publish, want 0", n)
	}
	if err != nil {
		t.Fatal(err)
	}
}
