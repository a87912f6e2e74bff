package pinned

import (
	"fmt"
	"time"
)

// SlotsFor returns how many slots a pool needs so that the writer never
// finds it exhausted in steady state:
//
//	subscribers × (ceil(processing / period) + 2) + 1
//
// Each subscriber holds ceil(processing/period) frames while it works
// through a backlog at its pace, plus one it has just been handed and one
// in transit (the latest, kept while an older one is released); the writer
// needs one more to fill while all of those are out. processing is the
// slowest consumer's per-frame time (its p99, not its mean).
func SlotsFor(period, processing time.Duration, subscribers int) (uint32, error) {
	switch {
	case period <= 0:
		return 0, fmt.Errorf("slot sizing: frame period %v must be positive", period)
	case processing < 0:
		return 0, fmt.Errorf("slot sizing: processing time %v must not be negative", processing)
	case subscribers < 1 || subscribers > MaxSubscribers:
		return 0, fmt.Errorf("slot sizing: %d subscribers, want 1..%d", subscribers, MaxSubscribers)
	}
	perSub := (int64(processing)+int64(period)-1)/int64(period) + 2
	n := int64(subscribers)*perSub + 1
	if n > MaxSlots {
		return 0, fmt.Errorf("slot sizing: %d slots needed (period %v, processing %v, %d subscribers) exceeds %d", n, period, processing, subscribers, MaxSlots)
	}
	return uint32(n), nil
}
