// Package planner turns model outputs (one score per steering sector) into a
// velocity command (Twist) within speed, acceleration and yaw-rate limits,
// and holds the watchdog that zeroes the command when data goes stale or a
// stage fails.
//
// # Sector convention
//
// Sector k steers at Config.SectorHeadingsDeg[k], in degrees, positive to the
// LEFT (REP-103: +z up, so +yaw is a left turn). Headings are strictly
// increasing, so index 0 is the rightmost sector. The default is the
// reference model's (models/MODEL_CARD.md, sector_scores[1,9]): nine
// sectors from −40° (index 0, right) to +40° (index 8, left) in 10° steps,
// index 4 straight ahead.
//
// # Pipeline of one Plan call
//
//  1. Check the input: S scores, optional S clearances, all finite.
//  2. Pick the best sector: highest score; scores within Config.TieBand of
//     the best count as tied and the one closest to straight ahead wins
//     (then the lower index), so the choice is deterministic.
//  3. Target: speed from the sector's clearance (0 at StopDistance, ramping
//     linearly to MaxSpeed at SlowDistance), yaw rate HeadingGain × heading
//     limited to ±MaxYawRate. Below StopDistance or MinScore the target
//     stops (optionally turning in place, Config.TurnInPlace).
//  4. Smoothing (first-order low-pass, per frame) toward a moving target; a
//     target with zero speed skips it so that stopping is never delayed by
//     the filter, only by MaxDecel.
//  5. Acceleration limits against the previous command over dt from the
//     injected clock, then final clamps.
//
// Plan never returns NaN, Inf or a command outside the limits; on bad input
// it returns the zero Twist and an error that the caller reports to the
// Watchdog as a failed stage.
//
// # Watchdog
//
// The Watchdog decides whether a command may be published at all: no fresh
// frame within Timeout, or any stage failure since the last fresh frame, and
// the output is zero. See Watchdog.Output for the agent's output path.
package planner
