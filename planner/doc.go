// Package planner turns model outputs (per-sector scores) into a velocity
// command (Twist) within speed, acceleration and yaw-rate limits, and holds
// the watchdog that zeroes the command when data goes stale or a stage fails.
package planner
