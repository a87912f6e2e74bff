//go:build !ros2 || !cgo

package ros2

import (
	"errors"
	"testing"
)

func TestStubConstructorsReturnErrNotBuilt(t *testing.T) {
	p, err := NewParticipant(Config{}, nil)
	if !errors.Is(err, ErrNotBuilt) || p != nil {
		t.Fatalf("NewParticipant = %v, %v; want nil, ErrNotBuilt", p, err)
	}
	var q *Participant
	if _, err := q.NewTwistSink(TwistOptions{}); !errors.Is(err, ErrNotBuilt) {
		t.Errorf("NewTwistSink: %v", err)
	}
	if _, err := q.NewHandleWriter(HandleWriterOptions{}); !errors.Is(err, ErrNotBuilt) {
		t.Errorf("NewHandleWriter: %v", err)
	}
	if _, err := q.SubscribeImage("/i", SubscriptionOptions{}, func(*ImageView) {}); !errors.Is(err, ErrNotBuilt) {
		t.Errorf("SubscribeImage: %v", err)
	}
	if _, err := q.SubscribePointCloud2("/p", SubscriptionOptions{}, func(*PointCloud2View) {}); !errors.Is(err, ErrNotBuilt) {
		t.Errorf("SubscribePointCloud2: %v", err)
	}
	if _, err := q.SubscribeLaserScan("/scan", SubscriptionOptions{}, func(*LaserScanView) {}); !errors.Is(err, ErrNotBuilt) {
		t.Errorf("SubscribeLaserScan: %v", err)
	}
}
