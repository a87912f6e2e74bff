//go:build ros2 && cgo

package ros2

import (
	"testing"
	"time"
)

// TestThrottlePassesOnePerInterval: the "samples lost" line of an endpoint
// on a lossy link comes at most once per interval.
func TestThrottlePassesOnePerInterval(t *testing.T) {
	var th throttle
	t0 := time.Unix(1700000000, 0)
	for _, tc := range []struct {
		at   time.Duration
		want bool
	}{{0, true}, {time.Second, false}, {9 * time.Second, false}, {10 * time.Second, true}, {15 * time.Second, false}, {25 * time.Second, true}} {
		if got := th.allow(t0.Add(tc.at), 10*time.Second); got != tc.want {
			t.Errorf("at %v: allow %v, want %v", tc.at, got, tc.want)
		}
	}
}
