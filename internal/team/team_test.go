package team

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// countingWork records how often each chunk of the current phase ran.
type countingWork struct {
	runs  [64]atomic.Int32
	delay time.Duration
}

func (w *countingWork) runChunk(c int) {
	if w.delay > 0 && c%3 == 0 {
		time.Sleep(w.delay) // a straggler: the lead must wait for it, then block
	}
	w.runs[c].Add(1) // last, so a phase that returns early sees a zero
}

// TestTeamRunsEachChunkOnce checks that every chunk of every phase runs
// exactly once, and has finished when phase returns, whichever goroutines
// claim it, including when helpers park between jobs and straggle.
func TestTeamRunsEachChunkOnce(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	for _, helpers := range []int{1, 3} {
		for _, delay := range []time.Duration{0, 50 * time.Microsecond} {
			w := &countingWork{delay: delay}
			tm := New(helpers, w.runChunk)
			jobs, phases := 30, 20
			if delay > 0 {
				jobs, phases = 4, 4 // sleeps take a timer tick or more
			}
			for job := range jobs {
				tm.Begin()
				for phase := range phases {
					chunks := 1 + (job*7+phase*3)%64
					tm.Phase(chunks)
					for c := range 64 {
						want := int32(0)
						if c < chunks {
							want = 1
						}
						if got := w.runs[c].Swap(0); got != want {
							t.Fatalf("%d helpers, job %d, phase %d of %d chunks: chunk %d ran %d times", helpers, job, phase, chunks, c, got)
						}
					}
				}
				tm.End()
				if job%10 == 0 {
					time.Sleep(time.Millisecond) // let the helpers park
				}
			}
			tm.Close()
		}
	}
}
