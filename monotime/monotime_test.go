package monotime

import (
	"testing"

	"golang.org/x/sys/unix"
)

func TestNowIsClockMonotonic(t *testing.T) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		t.Fatal(err)
	}
	got := Now()
	want := ts.Nano()
	if d := got - want; d < 0 || d > 50e6 {
		t.Fatalf("Now() = %d, CLOCK_MONOTONIC read just before = %d (diff %d ns): not the same clock", got, want, d)
	}
}

func TestNowAllocatesNothing(t *testing.T) {
	if a := testing.AllocsPerRun(100, func() { Now() }); a != 0 {
		t.Fatalf("Now allocates %.0f times", a)
	}
}
