// Package team runs the chunks of a data-parallel phase on the calling
// goroutine and on helper goroutines it owns, with dynamic claiming, so
// that a phase finishes on time even when a helper wakes late (tens of
// microseconds on a VM) or its core is busy. The voxel filter and the image
// preprocessing share it.
package team

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Team runs the chunks of a phase on the calling goroutine (the lead) and on
// helper goroutines that it owns. Chunks are claimed dynamically, so a phase
// finishes even if no helper shows up: a parked helper can take tens of
// microseconds to wake on a VM, and the other core may be busy with someone
// else's work.
//
// Waiting is short spinning, then blocking. During a job the helpers spin on
// the state word for the next phase, for at most helperSpin, then park on
// their wake channel; when the job ends they park at once, so an idle Filter
// costs no CPU. The lead spins for at most leadSpin for a helper's last
// chunk, then blocks on done. Long spins would take the core from the very
// goroutine being waited for whenever the machine is oversubscribed, and from
// the robot's other work.
//
// The spins do not yield to the Go scheduler on every round: a goroutine
// woken by a channel operation is queued on the waker's P, and two
// goroutines that keep yielding can end up taking turns on one P while the
// other P idles. They yield every spinYieldEvery rounds only, so that they
// still make progress if GOMAXPROCS is lowered below the team's size.
type Team struct {
	// state describes the current phase: seq (24 bits) | idle | chunks |
	// front | back (13 bits each). The lead claims chunks from the front,
	// helpers from the back, each by a compare-and-swap that counts the
	// claim, so each side works through a contiguous run of chunks: a core
	// keeps the data it wrote in the previous phase, and in a radix scatter
	// only one boundary per bucket is written by both cores (interleaved
	// chunks would make every cache line of the output bounce between
	// them). Since seq is part of the word, a helper holding a stale view of
	// an older phase cannot claim a chunk of a newer one (until seq wraps,
	// after 2^24 phases).
	state atomic.Uint64
	// finished counts completed chunks of the current phase.
	finished atomic.Uint32
	// leadWaiting is waitingFor(seq) while the lead is (about to be)
	// blocked on done in phase seq, else 0. Tagging it with the phase keeps
	// a runner that stalls between finishing the last chunk of a phase and
	// looking at the flag from waking the lead in a later phase.
	leadWaiting atomic.Uint32
	done        chan struct{} // capacity 1: the last chunk's runner wakes the lead
	quit        atomic.Bool
	wake        []chan struct{} // capacity 1 each: wakes a parked helper
	exited      sync.WaitGroup
	run         func(chunk int) // the work of one chunk of the current phase
	seq         uint32          // lead only
}

const (
	countBits  = 13
	countMask  = 1<<countBits - 1
	frontShift = countBits
	chunkShift = 2 * countBits
	idleBit    = 1 << (3 * countBits)
	seqShift   = 3*countBits + 1
	// helperSpin is how long a helper waits for the next phase before
	// parking: enough to bridge the lead's serial work between phases
	// (microseconds).
	helperSpin = 100 * time.Microsecond
	// leadSpin is how long the lead waits for a helper's last chunk before
	// blocking.
	leadSpin       = 20 * time.Microsecond
	spinYieldEvery = 256
	spinClockEvery = 32
)

// spinner bounds a spin loop by time, reading the clock only every
// spinClockEvery rounds.
type spinner struct {
	start  time.Time
	limit  time.Duration
	rounds int
}

func newSpinner(limit time.Duration) spinner {
	return spinner{start: time.Now(), limit: limit}
}

// more reports whether to keep spinning.
func (s *spinner) more() bool {
	s.rounds++
	if s.rounds%spinYieldEvery == 0 {
		runtime.Gosched()
	}
	return s.rounds%spinClockEvery != 0 || time.Since(s.start) < s.limit
}

// MaxChunks is the most chunks one phase can have.
const MaxChunks = countMask

// New starts helpers goroutines that run chunks with run. Close stops them.
// A Team is used by one goroutine, the lead: Begin, Phase, ..., End.
func New(helpers int, run func(chunk int)) *Team {
	t := &Team{run: run, wake: make([]chan struct{}, helpers), done: make(chan struct{}, 1)}
	t.state.Store(idleBit)
	for i := range t.wake {
		ch := make(chan struct{}, 1)
		t.wake[i] = ch
		t.exited.Go(func() { t.helperLoop(ch) })
	}
	return t
}

func (t *Team) helperLoop(wake <-chan struct{}) {
	for range wake {
		t.help()
	}
}

// help runs chunks until the job ends, the team quits, or no chunk came for
// helperSpin.
func (t *Team) help() {
	for spin := newSpinner(helperSpin); spin.more(); {
		if t.quit.Load() || t.state.Load()&idleBit != 0 {
			return
		}
		if t.runOne(false) {
			spin = newSpinner(helperSpin)
		}
	}
}

// runOne claims and runs one chunk of the current phase, from the front for
// the lead and from the back for a helper. It reports false when there is
// none left to claim.
func (t *Team) runOne(lead bool) bool {
	for {
		s := t.state.Load()
		chunks, front, back := s>>chunkShift&countMask, s>>frontShift&countMask, s&countMask
		if s&idleBit != 0 || front+back >= chunks {
			return false
		}
		claim, chunk := uint64(1), chunks-1-back
		if lead {
			claim, chunk = 1<<frontShift, front
		}
		if t.state.CompareAndSwap(s, s+claim) {
			t.run(int(chunk))
			if t.finished.Add(1) == uint32(chunks) && t.leadWaiting.CompareAndSwap(waitingFor(s>>seqShift), 0) {
				t.done <- struct{}{}
			}
			return true
		}
	}
}

// Begin wakes the helpers for a job; they spin until its first phase.
func (t *Team) Begin() {
	t.state.Store(uint64(t.seq) << seqShift) // not idle, no chunk to claim yet
	t.wakeAll()
}

func (t *Team) wakeAll() {
	for _, ch := range t.wake {
		select {
		case ch <- struct{}{}: // wake a parked helper; a spinning one sees the state
		default:
		}
	}
}

// Phase runs chunks (at most MaxChunks) 0..chunks-1 and returns when all have finished. Only the
// lead calls it; whatever the lead wrote before the call is visible to the
// chunks (the state store publishes it), and whatever the chunks wrote is
// visible to the lead afterwards (each chunk's finished.Add is observed).
func (t *Team) Phase(chunks int) {
	t.seq++
	t.finished.Store(0)
	t.state.Store(uint64(t.seq)<<seqShift | uint64(chunks)<<chunkShift)
	t.wakeAll() // in case a helper parked since the last phase
	for t.runOne(true) {
	}
	for spin := newSpinner(leadSpin); spin.more(); {
		if t.finished.Load() == uint32(chunks) {
			return
		}
	}
	// Block until the last chunk's runner signals. If it finished before
	// the flag was raised, it may still have seen the flag: then a token
	// is (or will be) in done, and must be taken now, not by a later phase.
	w := waitingFor(uint64(t.seq))
	t.leadWaiting.Store(w)
	if t.finished.Load() == uint32(chunks) && t.leadWaiting.CompareAndSwap(w, 0) {
		return // nobody saw the flag
	}
	<-t.done
}

// waitingFor is leadWaiting's value for the phase with this seq: its 24
// bits as in the state word, and a top bit so that it is never 0.
func waitingFor(seq uint64) uint32 {
	return 1<<31 | uint32(seq&(1<<(64-seqShift)-1))
}

// End tells spinning helpers to park.
func (t *Team) End() {
	t.state.Store(idleBit)
}

// Close stops and waits for the helpers. The team must be ended.
func (t *Team) Close() {
	t.quit.Store(true)
	for _, ch := range t.wake {
		close(ch)
	}
	t.exited.Wait()
}
