package tf

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
)

// Errors that Add and Lookup wrap, for errors.Is; the messages themselves
// name the transform or frames and say what to fix.
var (
	// ErrInvalid: Add refused a transform that tf2's setTransform ignores
	// too (empty or equal frame names, NaN, a quaternion whose length² is
	// 0.01 or more off 1), or one with an Inf, which tf2 would store and
	// every lookup through it would turn to NaN.
	ErrInvalid = errors.New("invalid transform")
	// ErrLoop: Add refused a transform that would make a frame its own
	// ancestor.
	ErrLoop = errors.New("transform would close a loop")
	// ErrUnknownFrame: Lookup was given a frame no transform names.
	ErrUnknownFrame = errors.New("unknown frame")
	// ErrNotConnected: Lookup's frames are in two separate trees.
	ErrNotConnected = errors.New("frames not connected")
)

// tfError carries a full message and the sentinel it wraps, so that the
// message reads well without the sentinel's words repeated in it.
type tfError struct {
	kind error
	msg  string
}

func (e *tfError) Error() string { return e.msg }
func (e *tfError) Unwrap() error { return e.kind }

func errorf(kind error, format string, args ...any) error {
	return &tfError{kind: kind, msg: fmt.Sprintf(format, args...)}
}

// unknownFrameError says that what ("frame "x" is") is not on where,
// listing the frames held.
func unknownFrameError(what, where string, frames []string) error {
	if len(frames) == 0 {
		return errorf(ErrUnknownFrame, "%s not on %s (no transform received yet)", what, where)
	}
	list := strings.Join(frames[:min(len(frames), maxListed)], ", ")
	if len(frames) > maxListed {
		list += fmt.Sprintf(", and %d more", len(frames)-maxListed)
	}
	return errorf(ErrUnknownFrame, "%s not on %s (it has: %s)", what, where, list)
}

// sortedFrames returns every frame that has a parent (up) or children.
func sortedFrames[E any](up map[string]E, children map[string]int) []string {
	fs := make([]string, 0, len(up)+len(children))
	for f := range up {
		fs = append(fs, f)
	}
	for f := range children {
		if _, ok := up[f]; !ok {
			fs = append(fs, f)
		}
	}
	slices.Sort(fs)
	return fs
}

// quaternionTolerance is tf2's QUATERNION_NORMALIZATION_TOLERANCE: a
// rotation whose length² is this far or further from 1 is refused.
const quaternionTolerance = 10e-3

// maxListed bounds the frames an unknown-frame error lists.
const maxListed = 20

// Stamped is one geometry_msgs/TransformStamped; the stamp does not
// matter for static transforms (Tree ignores it).
type Stamped struct {
	Parent, Child string // header.frame_id, child_frame_id
	Transform     Transform
	Stamp         int64 // header.stamp, nanoseconds since the epoch (ROS time)
}

// Tree is a tf2 static transform tree. Every frame has at most one parent
// and the tree never holds a cycle (Add refuses one), so every walk up
// ends at a root within as many steps as there are transforms. It is safe
// for concurrent use; the zero value is an empty tree.
type Tree struct {
	mu sync.Mutex
	up map[string]edge // child → its parent and T_parent_child
	// children counts the transforms naming each parent, so that a frame
	// is known exactly while some transform names it.
	children map[string]int
}

type edge struct {
	parent string
	tf     Transform // unit rotation
}

// stripSlash drops one leading '/', as tf2 does with frame ids (a ROS 1
// habit: "/base_link").
func stripSlash(f string) string { return strings.TrimPrefix(f, "/") }

func edgeName(parent, child string) string { return frameName(parent) + "→" + frameName(child) }

func frameName(f string) string {
	if f == "" {
		return `""`
	}
	return f
}

// Add stores s, replacing any earlier transform for s.Child (whose parent
// may differ, as in tf2). It refuses, storing nothing, what tf2's
// BufferCore::setTransform ignores, a transform that would close a loop,
// and one for a new frame when the tree holds 2048 (ErrFull): a peer
// inventing frames must not grow it without end. The rotation is stored
// normalised.
func (t *Tree) Add(s Stamped) error {
	parent, child, valid, err := checkStamped(s)
	if err != nil {
		return err
	}
	name := edgeName(parent, child)
	t.mu.Lock()
	defer t.mu.Unlock()
	// The new edge closes a loop exactly when child is parent or one of
	// its ancestors; otherwise parent's way up does not pass through
	// child, so replacing child's edge leaves it as it was.
	if path, ok := t.pathUp(parent, child); ok {
		loop := make([]string, 0, len(path)+1)
		for i := len(path) - 1; i >= 0; i-- {
			loop = append(loop, path[i])
		}
		loop = append(loop, child)
		return errorf(ErrLoop, "%s would close the loop %s (a frame has one parent and no frame is its own ancestor); ignored it",
			name, strings.Join(loop, "→"))
	}
	if t.up == nil {
		t.up = make(map[string]edge)
		t.children = make(map[string]int)
	}
	old, known := t.up[child]
	if !known && len(t.up) >= maxEdges {
		return errorf(ErrFull, "%s: the tree holds %d frames, the most it keeps (is a node broadcasting a static frame per object with ever new names?)", name, len(t.up))
	}
	if known {
		t.unref(old.parent)
	}
	t.up[child] = edge{parent: parent, tf: valid}
	t.children[parent]++
	return nil
}

func (t *Tree) unref(parent string) {
	if t.children[parent]--; t.children[parent] <= 0 {
		delete(t.children, parent)
	}
}

func finite(vs ...float64) bool {
	for _, v := range vs {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return false
		}
	}
	return true
}

// pathUp walks up from f and returns the frames from f to stop if it
// meets stop. The walk is bounded by the number of transforms, so that it
// ends even if the no-cycle invariant were broken.
func (t *Tree) pathUp(f, stop string) ([]string, bool) {
	path := []string{f}
	for range len(t.up) + 1 {
		if f == stop {
			return path, true
		}
		e, ok := t.up[f]
		if !ok {
			return path, false
		}
		f = e.parent
		path = append(path, f)
	}
	return path, false
}

// rootPath returns the frames from f up to its root, f first.
func (t *Tree) rootPath(f string) ([]string, error) {
	path := []string{f}
	for range len(t.up) + 1 {
		e, ok := t.up[f]
		if !ok {
			return path, nil
		}
		f = e.parent
		path = append(path, f)
	}
	// Unreachable while Add keeps the tree free of cycles.
	return nil, errorf(ErrLoop, "the tree holds a loop through %q: %s", path[0], strings.Join(path, "→"))
}

func (t *Tree) known(f string) bool {
	if _, ok := t.up[f]; ok {
		return true
	}
	return t.children[f] > 0
}

// Lookup is tf2's lookupTransform(target, source): the transform that
// takes points in source into target, that is source's pose in target.
// The chain lists the frames walked from target to source, both included
// (e.g. base_footprint, base_link, lidar_mount, velodyne). Frames may
// start with one '/', which is dropped as Add drops it. Lookup(f, f) is
// the identity for a frame the tree knows.
func (t *Tree) Lookup(target, source string) (Transform, []string, error) {
	target, source = stripSlash(target), stripSlash(source)
	t.mu.Lock()
	defer t.mu.Unlock()
	var unknown []string
	for _, f := range []string{target, source} {
		if !t.known(f) && !slices.Contains(unknown, f) {
			unknown = append(unknown, f)
		}
	}
	if len(unknown) > 0 {
		return Transform{}, nil, t.unknownError(unknown)
	}
	if target == source {
		return Identity(), []string{target}, nil
	}
	srcUp, err := t.rootPath(source)
	if err != nil {
		return Transform{}, nil, err
	}
	tgtUp, err := t.rootPath(target)
	if err != nil {
		return Transform{}, nil, err
	}
	// The nearest common ancestor is the first frame of target's way up
	// that is on source's.
	at := make(map[string]int, len(srcUp))
	for i, f := range srcUp {
		at[f] = i
	}
	ti, si := -1, -1
	for i, f := range tgtUp {
		if j, ok := at[f]; ok {
			ti, si = i, j
			break
		}
	}
	if ti < 0 {
		return Transform{}, nil, errorf(ErrNotConnected,
			"%q and %q are not connected: their trees' roots are %q and %q (is a link between them on /tf, a moving joint, or not published?)",
			target, source, tgtUp[len(tgtUp)-1], srcUp[len(srcUp)-1])
	}
	// T_target_source = inverse(T_ancestor_target)·T_ancestor_source.
	result := t.fromAncestor(tgtUp[:ti]).Inverse().Mul(t.fromAncestor(srcUp[:si]))
	chain := slices.Clone(tgtUp[:ti+1])
	for i := si - 1; i >= 0; i-- {
		chain = append(chain, srcUp[i])
	}
	return result, chain, nil
}

// fromAncestor composes the edges of below (a frame and its ancestors,
// the common ancestor excluded, frame first) into T_ancestor_frame.
func (t *Tree) fromAncestor(below []string) Transform {
	out := Identity()
	for i := len(below) - 1; i >= 0; i-- {
		out = out.Mul(t.up[below[i]].tf)
	}
	return out
}

func (t *Tree) unknownError(unknown []string) error {
	what := fmt.Sprintf("frame %q is", unknown[0])
	if len(unknown) == 2 {
		what = fmt.Sprintf("frames %q and %q are", unknown[0], unknown[1])
	}
	return unknownFrameError(what, "/tf_static", t.frames())
}

func (t *Tree) frames() []string { return sortedFrames(t.up, t.children) }

// Len returns the number of transforms held (one per child frame).
func (t *Tree) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.up)
}

// Frames returns every frame some transform names, sorted.
func (t *Tree) Frames() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.frames()
}

// Edges returns "parent→child" for every transform, sorted, for log lines
// and error messages.
func (t *Tree) Edges() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	es := make([]string, 0, len(t.up))
	for c, e := range t.up {
		es = append(es, edgeName(e.parent, c))
	}
	slices.Sort(es)
	return es
}
