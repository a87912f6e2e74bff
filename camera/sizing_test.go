package camera

import (
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// Pools too small for the subscribers they are sized for (fewer than
// 3N+1 slots: the shares cannot keep N subscribers from starving each
// other) are logged at start; the sizing rule's own pools are not.
func TestSmallPoolsAreLogged(t *testing.T) {
	for _, tc := range []struct {
		slots       uint32
		subscribers int
		warn        bool
	}{
		{0, 2, false}, // the sizing rule: 9 slots
		{0, 4, false}, // 17
		{7, 2, false},
		{6, 2, true},
		{9, 3, true},
	} {
		core, logs := observer.New(zapcore.WarnLevel)
		cam, err := New(Config{Source: PoolSizes{Points: 16, ImageBytes: 16}, Slots: tc.slots, Subscribers: tc.subscribers, Log: zap.New(core)})
		if err != nil {
			t.Fatal(err)
		}
		cam.Close()
		got := logs.FilterMessageSnippet("pools too small").Len() > 0
		if got != tc.warn {
			t.Errorf("slots %d, subscribers %d: warned %t, want %t (%v)", tc.slots, tc.subscribers, got, tc.warn, logs.All())
		}
	}
}

// A one-slot pool is refused: the agent's kept image would hold it for
// good. Two is the least that works.
func TestOneSlotPoolsAreRefused(t *testing.T) {
	if _, err := New(Config{Source: PoolSizes{Points: 16, ImageBytes: 16}, Slots: 1, Subscribers: 1}); err == nil || !strings.Contains(err.Error(), "at least 2") {
		t.Fatalf("New with 1 slot = %v, want an error saying at least 2", err)
	}
	cam, err := New(Config{Source: PoolSizes{Points: 16, ImageBytes: 16}, Slots: 2, Subscribers: 1})
	if err != nil {
		t.Fatalf("New with 2 slots: %v", err)
	}
	cam.Close()
}
