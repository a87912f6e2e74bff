package planner

import "errors"

// Sentinels for what callers branch on; returned errors wrap one of them
// (test with errors.Is) and name the field, index and value involved.
var (
	// ErrConfig: a Config or WatchdogConfig field is out of range.
	ErrConfig = errors.New("planner: invalid config")
	// ErrInput: Plan's input has the wrong number of scores or clearances.
	ErrInput = errors.New("planner: invalid input")
	// ErrNonFinite: a score, clearance or command is NaN or ±Inf. The
	// Watchdog counts failures wrapping it as "non-finite" incidents.
	ErrNonFinite = errors.New("planner: not finite")
	// ErrLimit: a Twist is outside its Limits.
	ErrLimit = errors.New("planner: command outside limits")
)
