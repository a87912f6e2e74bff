//go:build race

package agent

// raceEnabled: see gpu/race_on_test.go.
const raceEnabled = true
