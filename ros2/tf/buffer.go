package tf

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"
)

// ErrExtrapolation: LookupAt's time lies outside what a moving transform
// holds (before its oldest sample, or more than the buffer's
// extrapolation limit after its newest).
var ErrExtrapolation = errors.New("extrapolation")

const (
	// ringCap is the samples a moving edge holds: 2 s at 100 Hz fits, and
	// a faster publisher loses its oldest samples first.
	ringCap = 256
	// maxDepth bounds the frames LookupAt walks up from either frame, so
	// that the walk needs no heap and ends whatever the tree holds.
	maxDepth = 64
	// defaultKeep is what a zero BufferConfig.Keep means. tf2 keeps 10 s;
	// 2 s covers a scan's deskewing with room to spare.
	defaultKeep = 2 * time.Second
	// maxEdges bounds the frames a Buffer holds (a moving edge's history
	// is 16 KiB): a peer broadcasting a frame per tracked object, with
	// ever new names, would otherwise grow it without end. A robot has
	// tens to hundreds of frames.
	maxEdges = 2048
)

// ErrFull: Add refused a transform for a new frame: the Buffer holds
// maxEdges frames, none of whose moving history has gone stale, or the
// Tree holds maxEdges frames.
var ErrFull = errors.New("tf buffer full")

// velocityBase is the shortest time over which LookupAt measures the
// velocity it extrapolates with, when the history holds that much.
const velocityBase = int64(20 * time.Millisecond)

// ErrTimeJumpedBack: Add was given a moving transform older than Keep
// behind its edge's newest; it is stored, and the edge's earlier history
// dropped. Not a refusal: the error says what happened.
var ErrTimeJumpedBack = errors.New("time jumped back")

// BufferConfig sets how much a Buffer remembers and how far it guesses.
type BufferConfig struct {
	Keep        time.Duration // history kept per moving edge, measured back from its newest stamp; 0 = 2 s
	Extrapolate time.Duration // how far past an edge's newest sample LookupAt may extrapolate (constant velocity from the last two samples); 0 = none; negative refused by NewBuffer
}

// Buffer is tf2's BufferCore for both /tf_static and /tf: every frame has
// at most one parent, through a static edge (valid at every time) or a
// moving one (a short history of stamped samples), and no frame is its
// own ancestor (Add and AddStatic refuse a loop). LookupAt composes the
// edges between two frames at one time.
//
// A child frame has one edge at a time: a transform naming another
// parent replaces the child's edge and its history (tf2 allows such a
// reparenting), and a static transform for a child that moves, or a
// moving one for a child that is static, replaces the earlier edge with
// one of the later kind.
//
// It is safe for concurrent use (one mutex: Add runs on a subscription's
// goroutine, LookupAt on the consumer's). The zero Buffer is ready and
// behaves as NewBuffer(BufferConfig{}).
type Buffer struct {
	mu          sync.Mutex
	keep        int64 // ns; 0 = defaultKeep
	extrapolate int64 // ns; ≥ 0
	up          map[string]*bufEdge
	// children counts the edges naming each parent, so that a frame is
	// known exactly while some edge names it.
	children map[string]int
}

// bufEdge is a child's edge to its parent. Static: tf holds it and ring is
// nil. Moving: ring holds n ≥ 1 samples from index start on (mod
// ringCap), sorted by strictly increasing stamp, none more than keep
// older than the newest.
type bufEdge struct {
	parent   string
	static   bool
	tf       Transform // unit rotation; static edges only
	ring     *[ringCap]sample
	start, n int
}

type sample struct {
	stamp int64     // ns since the epoch, > 0
	tf    Transform // unit rotation
}

// NewBuffer returns an empty Buffer; it refuses a negative Keep or
// Extrapolate.
func NewBuffer(cfg BufferConfig) (*Buffer, error) {
	if cfg.Keep < 0 {
		return nil, fmt.Errorf("tf buffer: Keep %v is negative", cfg.Keep)
	}
	if cfg.Extrapolate < 0 {
		return nil, fmt.Errorf("tf buffer: Extrapolate %v is negative (0 is no extrapolation)", cfg.Extrapolate)
	}
	return &Buffer{
		keep:        int64(cfg.Keep),
		extrapolate: int64(cfg.Extrapolate),
		up:          make(map[string]*bufEdge),
		children:    make(map[string]int),
	}, nil
}

// Add stores a moving transform (/tf), valid at s.Stamp, into its edge's
// history. It refuses, storing nothing, what Tree.Add refuses, and a
// stamp that is not after the epoch. The history keeps Keep behind its
// newest sample, and at most 256 samples (the oldest go first). A sample
// older than the newest is put in order while it is inside Keep and
// silently dropped otherwise; one with the stamp of a held sample
// replaces it. Adding to a moving edge already known, under the same
// parent, allocates nothing. A new frame is refused (ErrFull) while the
// Buffer holds 2048, unless some have gone stale (no sample within Keep
// of the newest of all), which are dropped to make room.
func (b *Buffer) Add(s Stamped) error { return b.add(s, false) }

// AddStatic stores a static transform (/tf_static), valid at every time;
// its stamp is ignored. It refuses what Tree.Add refuses.
func (b *Buffer) AddStatic(s Stamped) error { return b.add(s, true) }

func (b *Buffer) add(s Stamped, static bool) error {
	parent, child, tf, err := checkStamped(s)
	if err != nil {
		return err
	}
	if !static && s.Stamp <= 0 {
		return errorf(ErrInvalid, "%s: header.stamp %d ns is not after the epoch; a moving transform (/tf) needs the time it holds at",
			edgeName(parent, child), s.Stamp)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.up[child]
	// Keeping child's parent cannot close a loop (the tree has none); a
	// new parent closes one exactly when child is it or its ancestor.
	if (e == nil || e.parent != parent) && b.closesLoop(parent, child) {
		return b.loopError(parent, child)
	}
	switch {
	case e == nil:
		if b.up == nil {
			b.up = make(map[string]*bufEdge)
			b.children = make(map[string]int)
		}
		if len(b.up) >= maxEdges && b.dropStale() == 0 {
			return errorf(ErrFull, "%s: the buffer holds %d frames, the most it keeps, and none has gone stale: is a node broadcasting a frame per object with ever new names?",
				edgeName(parent, child), len(b.up))
		}
		e = &bufEdge{parent: parent}
		b.up[child] = e
		b.children[parent]++
	case e.parent != parent:
		// The old parent's history says nothing about the new one.
		b.unref(e.parent)
		e.parent = parent
		b.children[parent]++
		e.start, e.n = 0, 0
	}
	if static {
		e.static, e.tf, e.ring, e.start, e.n = true, tf, nil, 0, 0
		return nil
	}
	if e.ring == nil {
		// A new moving edge, or one that was static: its history starts
		// here.
		e.static, e.tf, e.ring, e.start, e.n = false, Transform{}, new([ringCap]sample), 0, 0
	}
	if e.insert(sample{stamp: s.Stamp, tf: tf}, b.keepNS()) {
		return errorf(ErrTimeJumpedBack, "%s: stamp %s s is more than %s s before the newest held; time jumped back (a bag played in a loop, a simulator reset?): its history was cleared and starts at this transform",
			edgeName(parent, child), secs(s.Stamp), secs(b.keepNS()))
	}
	return nil
}

// dropStale removes the moving edges whose newest sample is more than
// Keep older than the newest sample of any edge: frames no longer
// broadcast, which no lookup near the present can use. It returns how
// many it removed. Called only when the Buffer is full: O(frames).
func (b *Buffer) dropStale() int {
	var newest int64
	for _, e := range b.up {
		if e.n > 0 {
			newest = max(newest, e.at(e.n-1).stamp)
		}
	}
	dropped := 0
	for child, e := range b.up {
		if e.ring != nil && e.n > 0 && e.at(e.n-1).stamp < newest-b.keepNS() {
			b.unref(e.parent)
			delete(b.up, child)
			dropped++
		}
	}
	return dropped
}

func (b *Buffer) keepNS() int64 {
	if b.keep == 0 {
		return int64(defaultKeep)
	}
	return b.keep
}

func (b *Buffer) unref(parent string) {
	if b.children[parent]--; b.children[parent] <= 0 {
		delete(b.children, parent)
	}
}

// closesLoop reports whether child is parent or one of its ancestors,
// walking at most once per edge so that it ends whatever the map holds.
// It allocates nothing.
func (b *Buffer) closesLoop(parent, child string) bool {
	f := parent
	for range len(b.up) + 1 {
		if f == child {
			return true
		}
		e, ok := b.up[f]
		if !ok {
			return false
		}
		f = e.parent
	}
	return false
}

// loopError names the loop parent→child would close, as Tree.Add does.
func (b *Buffer) loopError(parent, child string) error {
	path := []string{parent}
	for f := parent; f != child && len(path) <= len(b.up)+1; {
		f = b.up[f].parent
		path = append(path, f)
	}
	slices.Reverse(path)
	path = append(path, child)
	return errorf(ErrLoop, "%s would close the loop %s (a frame has one parent and no frame is its own ancestor); ignored it",
		edgeName(parent, child), strings.Join(path, "→"))
}

// checkStamped is Tree.Add's validation: the frames without their leading
// '/', and the transform with its rotation normalised. It allocates only
// for an error.
func checkStamped(s Stamped) (parent, child string, tf Transform, err error) {
	parent, child = stripSlash(s.Parent), stripSlash(s.Child)
	switch {
	case parent == "":
		return "", "", Transform{}, errorf(ErrInvalid, "%s: header.frame_id (the parent frame) is empty", edgeName(parent, child))
	case child == "":
		return "", "", Transform{}, errorf(ErrInvalid, "%s: child_frame_id is empty", edgeName(parent, child))
	case parent == child:
		return "", "", Transform{}, errorf(ErrInvalid, "%s: a frame cannot be its own parent", edgeName(parent, child))
	}
	tr, q := s.Transform.Translation, s.Transform.Rotation
	if !finite(tr[0], tr[1], tr[2]) {
		return "", "", Transform{}, errorf(ErrInvalid, "%s: translation (%g, %g, %g) is not finite",
			edgeName(parent, child), tr[0], tr[1], tr[2])
	}
	if !finite(q.X, q.Y, q.Z, q.W) {
		return "", "", Transform{}, errorf(ErrInvalid, "%s: rotation (%g, %g, %g, %g) is not finite",
			edgeName(parent, child), q.X, q.Y, q.Z, q.W)
	}
	n2 := q.X*q.X + q.Y*q.Y + q.Z*q.Z + q.W*q.W
	if !(math.Abs(n2-1) < quaternionTolerance) {
		return "", "", Transform{}, errorf(ErrInvalid, "%s: invalid quaternion (x %g, y %g, z %g, w %g): its length² is %.6g, want 1 (tf2 ignores it too)",
			edgeName(parent, child), q.X, q.Y, q.Z, q.W, n2)
	}
	n := math.Sqrt(n2)
	return parent, child, Transform{Translation: tr, Rotation: Quaternion{q.X / n, q.Y / n, q.Z / n, q.W / n}}, nil
}

// at returns the i-th sample held, the oldest being 0.
func (e *bufEdge) at(i int) *sample { return &e.ring[(e.start+i)%ringCap] }

func (e *bufEdge) dropOldest() {
	e.start = (e.start + 1) % ringCap
	e.n--
}

// search returns the index of the first sample held whose stamp is t or
// later (n if none).
func (e *bufEdge) search(t int64) int {
	lo, hi := 0, e.n
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if e.at(m).stamp < t {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// insert puts s into the ring in stamp order, keeping its invariants.
// A sample older than keep behind the newest restarts the history; insert
// then reports true.
func (e *bufEdge) insert(s sample, keep int64) (restarted bool) {
	if e.n == 0 {
		e.start, e.n = 0, 1
		e.ring[0] = s
		return false
	}
	newest := e.at(e.n - 1).stamp
	if s.stamp > newest {
		if e.n == ringCap {
			e.dropOldest()
		}
		*e.at(e.n) = s
		e.n++
		// newest ≥ 1 and keep ≥ 1, so this cannot overflow.
		for limit := s.stamp - keep; e.at(0).stamp < limit; {
			e.dropOldest()
		}
		return false
	}
	if s.stamp < newest-keep {
		// Time jumped back (a bag played in a loop, a simulator reset,
		// a driver restarted on a fresh clock): the history is of
		// another timeline. Start over, as tf2_ros's buffer clears
		// itself, rather than drop every sample of the new one.
		e.start, e.n = 0, 1
		e.ring[0] = s
		return true
	}
	k := e.search(s.stamp)
	if e.at(k).stamp == s.stamp { // k < n: s.stamp ≤ newest
		*e.at(k) = s
		return false
	}
	if e.n == ringCap {
		if k == 0 {
			return false // it would be the oldest, the one dropped to make room
		}
		e.dropOldest()
		k--
	}
	for i := e.n; i > k; i-- {
		*e.at(i) = *e.at(i - 1)
	}
	*e.at(k) = s
	e.n++
	return false
}

// evalStatus says why a moving edge has no value at a time.
type evalStatus uint8

const (
	evalOK       evalStatus = iota
	evalBefore              // before the oldest sample
	evalAfter               // after the newest, by more than the limit
	evalNeedsTwo            // after the only sample, within the limit
)

// value returns the edge's transform at t: exact, interpolated between
// the samples around t, or extrapolated from the last two up to extra
// past the newest.
func (e *bufEdge) value(t, extra int64) (Transform, evalStatus) {
	if e.static {
		return e.tf, evalOK
	}
	oldest, newest := e.at(0), e.at(e.n-1)
	switch {
	case t < oldest.stamp:
		return Transform{}, evalBefore
	case t > newest.stamp:
		// newest.stamp > 0, so t − newest.stamp cannot overflow.
		if t-newest.stamp > extra {
			return Transform{}, evalAfter
		}
		if e.n < 2 {
			return Transform{}, evalNeedsTwo
		}
		// The velocity over at least velocityBase (or all that is
		// held): from two samples a millisecond apart (two publishers of
		// one edge) their noise would be multiplied a hundredfold.
		k := max(0, min(e.n-2, e.search(newest.stamp-velocityBase+1)-1))
		a := e.at(k)
		return Interpolate(a.tf, newest.tf, float64(t-a.stamp)/float64(newest.stamp-a.stamp)), evalOK
	}
	k := e.search(t) // oldest.stamp ≤ t ≤ newest.stamp: k < n
	s := e.at(k)
	if s.stamp == t {
		return s.tf, evalOK
	}
	a := e.at(k - 1) // k > 0: t > oldest.stamp
	return Interpolate(a.tf, s.tf, float64(t-a.stamp)/float64(s.stamp-a.stamp)), evalOK
}

// walk is one frame's way up, held in fixed arrays so that LookupAt needs
// no heap: frames[0] is the frame, frames[n-1] its root, and edges[i]
// links frames[i] to frames[i+1].
type walk struct {
	frames [maxDepth]string
	edges  [maxDepth - 1]*bufEdge
	n      int
}

// walkUp fills w from f up to its root; false if that takes more than
// maxDepth frames.
func (b *Buffer) walkUp(w *walk, f string) bool {
	w.frames[0], w.n = f, 1
	for {
		e, ok := b.up[f]
		if !ok {
			return true
		}
		if w.n == maxDepth {
			return false
		}
		w.edges[w.n-1] = e
		f = e.parent
		w.frames[w.n] = f
		w.n++
	}
}

// fromAncestor composes edges[top-1] … edges[0] at t into
// T_frames[top]_frames[0]. On failure it returns the index of the edge
// that has no value.
func (w *walk) fromAncestor(top int, t, extra int64) (Transform, int, evalStatus) {
	out := Identity()
	for i := top - 1; i >= 0; i-- {
		v, st := w.edges[i].value(t, extra)
		if st != evalOK {
			return Transform{}, i, st
		}
		out = out.Mul(v)
	}
	return out, -1, evalOK
}

// LookupAt is tf2's lookupTransform(target, source, time): source's pose
// in target at time at (ns since the epoch), T_target_source, composing
// the edges between them and their nearest common ancestor at that time;
// the edges above that ancestor are not needed, so two frames on the
// robot are related at any time. Unlike tf2, at = 0 is no "latest": it is
// a time like any other. Frames may start with one '/'. LookupAt(f, f,
// any time) is the identity for a known frame. It allocates nothing
// unless it fails.
func (b *Buffer) LookupAt(target, source string, at int64) (Transform, error) {
	target, source = stripSlash(target), stripSlash(source)
	b.mu.Lock()
	defer b.mu.Unlock()
	tk, sk := b.known(target), b.known(source)
	if !tk || !sk {
		return Transform{}, b.unknownError(target, source, tk, sk)
	}
	if target == source {
		return Identity(), nil
	}
	var tw, sw walk
	if !b.walkUp(&tw, target) {
		return Transform{}, b.tooDeep(target, &tw)
	}
	if !b.walkUp(&sw, source) {
		return Transform{}, b.tooDeep(source, &sw)
	}
	ti, si := tw.n-1, sw.n-1
	if tw.frames[ti] != sw.frames[si] {
		return Transform{}, errorf(ErrNotConnected,
			"%q and %q are not connected: their trees' roots are %q and %q (is a transform between them not published on /tf or /tf_static?)",
			target, source, tw.frames[ti], sw.frames[si])
	}
	// Both ways end at the same root and part at the nearest common
	// ancestor: step down from the root while they agree.
	for ti > 0 && si > 0 && tw.frames[ti-1] == sw.frames[si-1] {
		ti--
		si--
	}
	tgt, bad, st := tw.fromAncestor(ti, at, b.extrapolate)
	if st != evalOK {
		return Transform{}, b.extrapolationError(target, source, at, tw.frames[bad], tw.edges[bad], st)
	}
	src, bad, st := sw.fromAncestor(si, at, b.extrapolate)
	if st != evalOK {
		return Transform{}, b.extrapolationError(target, source, at, sw.frames[bad], sw.edges[bad], st)
	}
	// T_target_source = inverse(T_ancestor_target)·T_ancestor_source.
	return tgt.Inverse().Mul(src), nil
}

func (b *Buffer) known(f string) bool {
	if _, ok := b.up[f]; ok {
		return true
	}
	return b.children[f] > 0
}

func (b *Buffer) unknownError(target, source string, tk, sk bool) error {
	var what string
	switch {
	case !tk && !sk && target != source:
		what = fmt.Sprintf("frames %q and %q are", target, source)
	case !tk:
		what = fmt.Sprintf("frame %q is", target)
	default:
		what = fmt.Sprintf("frame %q is", source)
	}
	return unknownFrameError(what, "/tf or /tf_static", b.frames())
}

func (b *Buffer) frames() []string { return sortedFrames(b.up, b.children) }

// tooDeep reports a walk cut at maxDepth: a real tree that deep, or a
// loop no Add made.
func (b *Buffer) tooDeep(f string, w *walk) error {
	return errorf(nil, "%q is more than %d frames below its root (%s→…); LookupAt walks at most %d",
		f, maxDepth-1, strings.Join(w.frames[:4], "→"), maxDepth)
}

// extrapolationError names the lookup, the edge without a value and the
// times, e.g. `odom→base_link: 0.250 s after its newest transform (at
// 12.345 s), more than the 0.100 s allowed`.
func (b *Buffer) extrapolationError(target, source string, at int64, child string, e *bufEdge, st evalStatus) error {
	oldest, newest := e.at(0).stamp, e.at(e.n-1).stamp
	var why string
	switch st {
	case evalBefore:
		// at may be anything down to MinInt64: the unsigned difference is
		// exact where the signed one would overflow.
		why = fmt.Sprintf("%s s before its oldest transform (at %s s; it holds %s s, up to %s s)",
			secsU(uint64(oldest)-uint64(at)), secs(oldest), secs(newest-oldest), secs(newest))
	case evalAfter:
		why = fmt.Sprintf("%s s after its newest transform (at %s s), ", secs(at-newest), secs(newest))
		if b.extrapolate == 0 {
			why += "and the buffer does not extrapolate"
		} else {
			why += fmt.Sprintf("more than the %s s allowed", secs(b.extrapolate))
		}
	case evalNeedsTwo:
		why = fmt.Sprintf("%s s after its only transform (at %s s); extrapolating needs two", secs(at-newest), secs(newest))
	}
	return errorf(ErrExtrapolation, "looking up %q in %q at %s s: %s: %s",
		source, target, secs(at), edgeName(e.parent, child), why)
}

// secs writes ns as seconds with 3 decimals, exactly (a stamp since the
// epoch has more digits than a float64 keeps to the nanosecond).
func secs(ns int64) string {
	if ns < 0 {
		return "-" + secsU(uint64(-(ns+1))+1)
	}
	return secsU(uint64(ns))
}

func secsU(ns uint64) string {
	ms := ns / 1e6
	if ns%1e6 >= 5e5 {
		ms++
	}
	return fmt.Sprintf("%d.%03d", ms/1000, ms%1000)
}

// Interpolate returns the transform a fraction f of the way from a to b:
// translation a + (b−a)·f, rotation slerp(a, b, f) along the shorter arc
// (q and −q are one rotation), at constant angular velocity. f outside
// [0, 1] extrapolates along the same arc, so a constant twist carries on.
// f = 0 returns a and f = 1 returns b, unchanged. Otherwise the
// rotations need not be exactly unit (not zero); the result's is.
func Interpolate(a, b Transform, f float64) Transform {
	switch f {
	case 0:
		return a
	case 1:
		return b
	}
	qa, qb := unit(a.Rotation), unit(b.Rotation)
	var t [3]float64
	for i := range t {
		t[i] = a.Translation[i] + (b.Translation[i]-a.Translation[i])*f
	}
	// d turns a into b; with w ≥ 0 it is the shorter way, an angle 2h
	// with h in [0, π/2]. Then a·d^f, d^f being the turn by 2hf about
	// the same axis, is the slerp for every f, and stays accurate for
	// small angles where slerp's sin(h) divisor does not.
	d := qa.conj().mul(qb)
	if d.W < 0 {
		d = Quaternion{-d.X, -d.Y, -d.Z, -d.W}
	}
	p := Quaternion{W: 1}
	if s := math.Sqrt(d.X*d.X + d.Y*d.Y + d.Z*d.Z); s > 0 {
		sh, ch := math.Sincos(f * math.Atan2(s, d.W))
		k := sh / s
		p = Quaternion{d.X * k, d.Y * k, d.Z * k, ch}
	}
	return Transform{Translation: t, Rotation: unit(qa.mul(p))}
}

func unit(q Quaternion) Quaternion {
	n := math.Sqrt(q.X*q.X + q.Y*q.Y + q.Z*q.Z + q.W*q.W)
	return Quaternion{q.X / n, q.Y / n, q.Z / n, q.W / n}
}
