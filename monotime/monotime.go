// Package monotime reads CLOCK_MONOTONIC in nanoseconds: one clock that
// every process on the host shares, so that a publish time stamped by the
// camera can be subtracted from a receive time read by the agent.
package monotime

import _ "unsafe" // for go:linkname

// Now returns CLOCK_MONOTONIC in nanoseconds without allocating.
//
// It is the Go runtime's own nanotime, which on Linux is clock_gettime(
// CLOCK_MONOTONIC) through the vDSO (tens of ns, no system call). The
// runtime keeps this linkname available because many packages use it; if a
// Go release removed it the build would fail here, loudly, not drift.
func Now() int64 { return nanotime() }

//go:linkname nanotime runtime.nanotime
func nanotime() int64
