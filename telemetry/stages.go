package telemetry

// StageID names a pipeline stage by its index in the Recorder's stage list.
type StageID int

// IDs of the default stages (DefaultStages). A Recorder made with other
// stage names looks IDs up with Recorder.Stage.
const (
	StageHandoff    StageID = iota // camera published the handle → agent received it (CLOCK_MONOTONIC, both)
	StageVoxel                     // voxel-grid filter
	StageBEV                       // bird's-eye-view raster
	StagePreprocess                // camera image → model input
	StageInfer                     // model inference
	StagePlan                      // planner
	StageE2E                       // capture → cmd_vel published
)

// DefaultStages returns the default stage names, in StageID order. A fresh
// slice each call.
func DefaultStages() []string {
	return []string{"handoff", "voxel", "bev", "preprocess", "infer", "plan", "e2e"}
}

// Counter names one of the built-in frame counters.
type Counter int

const (
	FramesReceived   Counter = iota // clouds and images taken up to be processed (handles: two per frame)
	FramesProcessed                 // frames planned, whose command was published (zero if zeroed)
	FramesDropped                   // frames lost: not deliverable, failed, rejected
	FramesSuperseded                // clouds and images released unprocessed because a newer one arrived
	numCounters
)

// counterNames are the JSON keys and Prometheus names (with the namespace
// and a _total suffix) of the built-in counters.
func counterName(c Counter) string {
	switch c {
	case FramesReceived:
		return "frames_received"
	case FramesProcessed:
		return "frames_processed"
	case FramesDropped:
		return "frames_dropped"
	case FramesSuperseded:
		return "frames_superseded"
	}
	return "unknown"
}
