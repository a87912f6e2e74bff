package transport

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/zerohop/zerohop/monotime"
)

// CopySource adapts one CopySubscriber per topic to the leasing API
// (C/TryLatest/Lease.Release), for measuring the agent over the copy
// baseline. A lease is a view of the subscriber's own buffer, so the next
// message of a topic is read only after the lease is released: like a
// serializing middleware's callback, a slow consumer backs the stream up.
type CopySource struct {
	subs     []*CopySubscriber
	ch       []chan Lease
	released []chan struct{}
	// lent[topic] is the ticket of the lease lent out now (0: none); the
	// tickets count from 1 per topic.
	lent    []atomic.Uint64
	tickets []uint64 // written by topic's reader only
}

// NewCopySource wraps subs; topic i is subs[i].
func NewCopySource(subs ...*CopySubscriber) *CopySource {
	c := &CopySource{subs: subs, lent: make([]atomic.Uint64, len(subs)), tickets: make([]uint64, len(subs))}
	for range subs {
		c.ch = append(c.ch, make(chan Lease, 1))
		c.released = append(c.released, make(chan struct{}, 1))
	}
	return c
}

// Run reads every topic until ctx is done or a stream ends, then closes
// the subscribers. It returns the first stream error other than the
// shutdown itself.
func (c *CopySource) Run(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() {
		for _, s := range c.subs {
			s.Close()
		}
	})
	defer stop()
	var wg sync.WaitGroup
	errs := make([]error, len(c.subs))
	for topic := range c.subs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[topic] = c.read(ctx, topic)
		}()
	}
	wg.Wait()
	for _, s := range c.subs {
		s.Close()
	}
	if ctx.Err() != nil {
		return nil
	}
	return errors.Join(errs...)
}

func (c *CopySource) read(ctx context.Context, topic int) error {
	for {
		h, data, err := c.subs[topic].Next()
		if err != nil {
			return err
		}
		c.tickets[topic]++
		c.lent[topic].Store(c.tickets[topic])
		l := Lease{Handle: h, Topic: topic, ReceivedNs: monotime.Now(), data: data, owner: c, ticket: c.tickets[topic]}
		select {
		case c.ch[topic] <- l:
		case <-ctx.Done():
			return nil
		}
		select {
		case <-c.released[topic]:
		case <-ctx.Done():
			return nil
		}
	}
}

// C is topic's delivery channel.
func (c *CopySource) C(topic int) <-chan Lease { return c.ch[topic] }

// TryLatest returns a waiting lease, if any.
func (c *CopySource) TryLatest(topic int) (Lease, bool) {
	select {
	case l := <-c.ch[topic]:
		return l, true
	default:
		return Lease{}, false
	}
}

func (c *CopySource) release(topic int, _, _ uint32, _, ticket uint64) error {
	if ticket == 0 || !c.lent[topic].CompareAndSwap(ticket, 0) {
		return ErrReleased
	}
	c.released[topic] <- struct{}{}
	return nil
}

func (c *CopySource) valid(topic int, _ uint32, _, ticket uint64) bool {
	return ticket != 0 && c.lent[topic].Load() == ticket
}
