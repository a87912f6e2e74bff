package transport

import (
	"context"
	"fmt"
	"math/bits"
	"sync/atomic"

	"github.com/zerohop/zerohop/handles"
	"github.com/zerohop/zerohop/monotime"
	"github.com/zerohop/zerohop/pinned"
)

// Inproc is the composed-mode transport: camera and agent in one process,
// handles through an in-process keep-last-N queue (or inline, on the
// publisher's goroutine), releases as direct pool calls. It has one
// subscriber, with the same Latest/TryLatest/Lease API as the unix one.
type Inproc struct {
	topics   []Topic
	subIDs   [MaxTopics]pinned.SubscriberID
	mail     []*mailbox
	holds    holdTable
	onLease  func(Lease)
	received atomic.Uint64
	// superseded is shared with the mailboxes.
	superseded atomic.Uint64
	closed     atomic.Bool
}

// InprocConfig configures an in-process transport.
type InprocConfig struct {
	Topics []Topic
	Depth  int // keep-last-N per topic; default 1
	Slack  int // extra slots in flight; default 2
	// OnLease, if set, is called on the publisher's goroutine with each
	// lease (inline delivery) instead of queueing it.
	OnLease func(Lease)
}

// NewInproc subscribes to every topic's pool.
func NewInproc(cfg InprocConfig) (*Inproc, error) {
	if cfg.Depth == 0 {
		cfg.Depth = 1
	}
	if cfg.Slack <= 0 {
		cfg.Slack = 2
	}
	if cfg.Depth < 1 || cfg.Depth > MaxDepth {
		return nil, fmt.Errorf("inproc transport: depth %d, want 1..%d", cfg.Depth, MaxDepth)
	}
	if len(cfg.Topics) == 0 || len(cfg.Topics) > MaxTopics {
		return nil, fmt.Errorf("inproc transport: %d topics, want 1..%d", len(cfg.Topics), MaxTopics)
	}
	t := &Inproc{topics: cfg.Topics, onLease: cfg.OnLease}
	for i, tp := range cfg.Topics {
		id, err := tp.Pool.Subscribe(cfg.Depth + cfg.Slack)
		if err != nil {
			t.Close()
			return nil, fmt.Errorf("inproc transport: topic %q: %w", tp.Name, err)
		}
		t.subIDs[i] = id
		t.holds.init(i, tp.Pool.Geometry().SlotCount)
		t.mail = append(t.mail, newMailbox(cfg.Depth, &t.superseded))
	}
	return t, nil
}

// Publish implements the camera's Publisher.
// A topic it was not built with is an error (a camera that has a stream
// its subscriber did not ask for), not a panic.
func (t *Inproc) Publish(topic int, slot pinned.Slot, h *handles.Handle) (int, error) {
	if topic < 0 || topic >= len(t.topics) {
		return 0, fmt.Errorf("inproc transport: publish on topic %d: it has %d topics", topic, len(t.topics))
	}
	tp := t.topics[topic]
	h.PoolID, h.Slot, h.Generation = tp.Pool.ID(), slot.Index(), slot.Generation()
	to := pinned.SubscriberSet(0)
	if !t.closed.Load() {
		to = 1 << t.subIDs[topic]
	}
	held, err := tp.Pool.Publish(slot, to)
	if err != nil || held == 0 {
		return 0, err
	}
	if !t.holds.take(topic, slot.Index(), slot.Generation()) {
		return 0, fmt.Errorf("inproc transport: slot %d generation %d already held", slot.Index(), slot.Generation())
	}
	t.received.Add(1)
	l := Lease{Handle: *h, Topic: topic, ReceivedNs: monotime.Now(), data: slot.Bytes()[:h.Length], owner: t}
	if t.onLease != nil {
		t.onLease(l)
	} else {
		t.mail[topic].put(l)
	}
	return bits.OnesCount32(uint32(held)), nil
}

func (t *Inproc) release(topic int, _ uint32, slot uint32, gen, _ uint64) error {
	if !t.holds.give(topic, slot, gen) {
		return ErrReleased
	}
	return t.topics[topic].Pool.Release(t.subIDs[topic], slot, gen)
}

func (t *Inproc) valid(topic int, slot uint32, gen, _ uint64) bool {
	return !t.closed.Load() && t.holds.holds(topic, slot, gen) && t.topics[topic].Pool.Current(slot, gen)
}

// Latest waits for topic's freshest lease; see Subscriber.Latest.
func (t *Inproc) Latest(ctx context.Context, topic int) (Lease, error) {
	return t.mail[topic].latest(ctx)
}

// TryLatest is Latest without waiting.
func (t *Inproc) TryLatest(topic int) (Lease, bool) { return t.mail[topic].tryLatest() }

// C is topic's queue, for select loops; see Subscriber.C.
func (t *Inproc) C(topic int) <-chan Lease { return t.mail[topic].ch }

// Stats reports received and superseded leases.
func (t *Inproc) Stats() SubscriberStats {
	return SubscriberStats{Received: t.received.Load(), Superseded: t.superseded.Load(), Connected: !t.closed.Load(), Connects: 1}
}

// Close stops delivery, releases queued leases and unsubscribes (holds not
// yet released are reclaimed by the pools).
func (t *Inproc) Close() error {
	if t.closed.Swap(true) {
		return nil
	}
	for _, m := range t.mail {
		m.drain()
	}
	for i, tp := range t.topics {
		if i < len(t.mail) {
			tp.Pool.Unsubscribe(t.subIDs[i])
		}
	}
	return nil
}
