// Package telemetry measures the pipeline for the people tuning it:
// per-stage latency histograms (HdrHistogram, since start and over a
// sliding window), frame counters, labels such as the execution provider,
// and an HTTP endpoint that serves them as JSON (/latency), in the
// Prometheus text format (/metrics) and as a self-contained live chart (/).
//
// Recording (Recorder.Record, Add, Inc) is safe for concurrent use and does
// not allocate; it is meant for the per-frame hot path. Reads (Snapshot, the
// HTTP handlers, scrapes) may allocate and are serialised among themselves;
// they never hold a lock that Record waits on for longer than a pointer
// swap.
//
// The package has no package-level mutable state: every Recorder owns its
// own Prometheus registry.
package telemetry
