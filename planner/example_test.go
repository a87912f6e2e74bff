package planner_test

import (
	"fmt"
	"math"
	"time"

	"github.com/zerohop/zerohop/planner"
)

// The agent's per-frame loop: Fresh when a frame is taken (planned only
// when it is the newest), Fail when a stage fails, Output just before
// publishing.
func Example() {
	p, err := planner.New(planner.Config{}) // defaults: 9 sectors, −40° (right) … +40° (left)
	if err != nil {
		panic(err)
	}
	w, err := planner.NewWatchdog(planner.WatchdogConfig{
		OnIncident: func(i planner.Incident) { fmt.Println("incident:", i.Detail) },
		OnRecover:  func(i planner.Incident) { fmt.Println("recovered after", i.End.Sub(i.Start)) },
	})
	if err != nil {
		panic(err)
	}
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	scores := []float32{0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95} // open to the left

	frame := func(i int, scores []float32) {
		now := start.Add(time.Duration(i) * 100 * time.Millisecond)
		// Capture stamp and the time the frame is taken; here the same.
		if _, v := w.Fresh(now, now); v != planner.FrameNewest {
			return // stale or out of order: not planned
		}
		cmd, err := p.Plan(planner.Input{Scores: scores, Stamp: now}, now)
		if err != nil {
			w.Fail("plan", err)
		}
		out := w.Output(now, cmd, p)
		fmt.Printf("t=%.1fs linear.x=%.2f angular.z=%.2f\n", now.Sub(start).Seconds(), out.LinearX, out.AngularZ)
	}
	frame(0, scores)
	frame(1, scores)
	frame(2, []float32{0, 0, 0, 0, float32(math.NaN()), 0, 0, 0, 0}) // NaN from the model
	frame(3, scores)
	// Output:
	// t=0.0s linear.x=0.05 angular.z=0.20
	// t=0.1s linear.x=0.10 angular.z=0.40
	// incident: non_finite: stage "plan" produced NaN/Inf: planner: not finite: score[4] is NaN
	// t=0.2s linear.x=0.00 angular.z=0.00
	// recovered after 100ms
	// t=0.3s linear.x=0.05 angular.z=0.20
}
