//go:build ros2 && cgo

package ros2

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"go.uber.org/zap"

	"github.com/zerohop/zerohop/ros2/tf"
)

// TFStaticTopic is where tf2 broadcasts the frames that never move
// (robot_state_publisher's fixed joints, static_transform_publisher). It
// is absolute, as tf2_ros has it; a namespaced robot remaps it
// (--ros-args -r /tf_static:=tf_static).
const TFStaticTopic = "/tf_static"

// TFStaticQoS is tf2_ros's StaticListenerQoS: RELIABLE, TRANSIENT_LOCAL,
// KEEP_LAST 100, so that a listener started late still gets each static
// broadcaster's last message.
func TFStaticQoS() QoS { return QoS{Reliability: Reliable, Depth: 100, transientLocal: true} }

// Bounds of one TFMessage as read (a robot's static tree has tens of
// frames); transforms beyond them are counted as skipped and logged.
const (
	maxTFTransforms = 4096
	maxTFFrameBytes = 1 << 20 // every frame id of one message together
)

// tfBuffers are what a transforms subscription's takes fill, reused.
type tfBuffers struct {
	recs []tfRec
	strs []byte
	out  []tf.Stamped
	// names interns frame ids, so that /tf, a stream of the same few
	// frames at up to 100 Hz, allocates no strings once they are known.
	// Bounded: past maxInternedFrames new names are copied as they come.
	names map[string]string
}

// maxInternedFrames bounds tfBuffers.names (a robot has tens of frames).
const maxInternedFrames = 1024

func newTFBuffers() *tfBuffers {
	return &tfBuffers{recs: make([]tfRec, maxTFTransforms), strs: make([]byte, maxTFFrameBytes), names: make(map[string]string)}
}

// name returns b as a string, interned.
func (b *tfBuffers) name(bs []byte) string {
	if s, ok := b.names[string(bs)]; ok { // no allocation: the compiler reads bs in place
		return s
	}
	s := string(bs)
	if b.names == nil {
		b.names = make(map[string]string)
	}
	if len(b.names) < maxInternedFrames {
		b.names[s] = s
	}
	return s
}

// takeTransforms takes one TFMessage and hands its transforms, with their
// stamps, to the callback.
func (s *Subscription) takeTransforms() (int32, retcode) {
	b := s.tfs
	got, n, total, rc := takeTF(s.ep.e, b.recs, b.strs)
	if got == 0 {
		return 0, rc
	}
	s.received.Add(1)
	b.out = b.out[:0]
	for _, r := range b.recs[:n] {
		b.out = append(b.out, tf.Stamped{
			Parent: b.name(b.strs[r.parentOff : r.parentOff+r.parentLen]),
			Child:  b.name(b.strs[r.childOff : r.childOff+r.childLen]),
			Transform: tf.Transform{Translation: r.translation,
				Rotation: tf.Quaternion{X: r.rotation[0], Y: r.rotation[1], Z: r.rotation[2], W: r.rotation[3]}},
			Stamp: int64(r.sec)*1e9 + int64(r.nanosec),
		})
	}
	if n < total {
		s.skipped.Add(uint64(total - n))
	}
	s.transforms(b.out, total)
	return 1, 0
}

// StaticTransforms keeps what /tf_static carries, as tf2_ros's
// StaticTransformListener does, and answers lookups in it.
type StaticTransforms struct {
	sub   *Subscription
	tree  tf.Tree
	log   *zap.Logger
	topic string

	mu sync.Mutex
	// changed is closed (and replaced) after each message: every waiting
	// Lookup looks again.
	changed   chan struct{}
	rejected  []string // the first few transforms tf refused, for Lookup's error
	nrejected int
	truncated bool
}

// maxRejectedShown bounds the refused transforms a lookup error lists.
const maxRejectedShown = 4

// ListenStaticTransforms subscribes to /tf_static (TFStaticTopic, after
// the participant's remapping rules) with TFStaticQoS.
func (p *Participant) ListenStaticTransforms() (*StaticTransforms, error) {
	// The topic before the goroutine starts: add logs it.
	topic, _, err := p.cfg.ddsTopicName(TFStaticTopic)
	if err != nil {
		return nil, err
	}
	st := &StaticTransforms{log: p.log, topic: topic, changed: make(chan struct{})}
	if st.sub, err = p.openSubscription(typeTFMessage, TFStaticTopic, TFStaticQoS(), handlers{transforms: st.add}, true); err != nil {
		return nil, err
	}
	return st, nil
}

// add runs on the subscription's goroutine for each TFMessage.
func (st *StaticTransforms) add(ts []tf.Stamped, total int) {
	for _, t := range ts {
		if err := st.tree.Add(t); err != nil {
			st.mu.Lock()
			st.nrejected++
			first := st.nrejected == 1
			if len(st.rejected) < maxRejectedShown {
				st.rejected = append(st.rejected, err.Error())
			}
			st.mu.Unlock()
			if first {
				st.log.Warn("ros2: transform on "+st.topic+" refused (later ones are counted, not logged)", zap.Error(err))
			}
		}
	}
	if total > len(ts) {
		st.mu.Lock()
		first := !st.truncated
		st.truncated = true
		st.mu.Unlock()
		if first {
			st.log.Warn("ros2: TFMessage too large; only part of it was read (logged once)",
				zap.String("topic", st.topic), zap.Int("transforms", total), zap.Int("read", len(ts)))
		}
	}
	st.mu.Lock()
	close(st.changed)
	st.changed = make(chan struct{})
	st.mu.Unlock()
}

// Lookup waits until the transforms on /tf_static connect source to
// target and returns the transform that takes points in source into
// target (tf2's lookupTransform(target, source)) and the frames it
// crosses, from target to source. When ctx ends first, the error says
// what is missing and what /tf_static held.
func (st *StaticTransforms) Lookup(ctx context.Context, target, source string) (tf.Transform, []string, error) {
	for {
		// The channel before the lookup: a message that comes between
		// the two closes it, and the lookup runs again.
		st.mu.Lock()
		changed := st.changed
		st.mu.Unlock()
		t, path, err := st.tree.Lookup(target, source)
		if err == nil {
			return t, path, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return tf.Transform{}, nil, st.explain(err)
		}
	}
}

// explain adds to a failed lookup what the subscription saw.
func (st *StaticTransforms) explain(err error) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d publisher(s) matched, %d message(s), %d transform(s) held", st.topic, st.sub.Matched(), st.sub.Received(), st.tree.Len())
	if st.sub.Matched() == 0 {
		b.WriteString("; is robot_state_publisher or a static_transform_publisher running, in this ROS_DOMAIN_ID and namespace?")
	}
	st.mu.Lock()
	if st.nrejected > 0 {
		fmt.Fprintf(&b, "; %d refused: %s", st.nrejected, strings.Join(st.rejected, "; "))
	}
	st.mu.Unlock()
	return fmt.Errorf("%w (%s)", err, b.String())
}

// Matched returns how many /tf_static publishers are matched now.
func (st *StaticTransforms) Matched() int { return st.sub.Matched() }

// Close stops the subscription. Idempotent.
func (st *StaticTransforms) Close() error { return st.sub.Close() }
