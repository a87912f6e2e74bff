//go:build race

package gpu

// raceEnabled: under -race, sync.Pool (which purego.SyscallN uses) drops
// items at random, so per-call allocation counts are not meaningful; make
// test runs the allocation checks again without -race.
const raceEnabled = true
