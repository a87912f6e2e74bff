//go:build !race

package agent

import (
	"runtime"
	"testing"

	"github.com/zerohop/zerohop/handles"
)

// TestPipelineFramesAllocateNothingOverMany counts every heap allocation
// of the process over windows of 100 frames: testing.AllocsPerRun divides
// with integers, so an allocation every second frame or rarer read as 0
// above (a slice that grows now and then, a buffer made every Nth frame).
// Such an allocation shows in every window; the runtime's own (an OS
// thread for a cgo call that blocked, a goroutine's wait record remade
// after a GC cleared its cache) come now and then, so some window shows
// none. Not built with -race, whose runtime allocates (and takes 50 s a
// window): make test runs it in its non-race step.
func TestPipelineFramesAllocateNothingOverMany(t *testing.T) {
	c := newComposed(t)
	c.sink.cmds = make([]timedCmd, 0, 2000) // the test's sink must not grow in a window
	var h handles.Handle
	seq := uint64(0)
	for ; seq < 20; seq++ { // warm up
		c.step(t, seq, &h)
	}
	var counts []uint64
	for range 10 {
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		for range 100 {
			c.step(t, seq, &h)
			seq++
		}
		runtime.ReadMemStats(&m1)
		if n := m1.Mallocs - m0.Mallocs; n == 0 {
			return
		} else {
			counts = append(counts, n)
		}
	}
	t.Fatalf("heap allocations in each of 10 windows of 100 frames: %v; want a window with none", counts)
}
