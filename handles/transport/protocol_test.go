package transport

import (
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/zerohop/zerohop/handles"
)

// FuzzControlMessages feeds arbitrary bytes to the hello and welcome
// decoders (with and without handle rings): they must never panic, and
// whatever they accept must survive re-encoding unchanged.
func FuzzControlMessages(f *testing.F) {
	f.Add((&hello{depth: 1, name: "agent", topics: []string{"points", "image"}}).marshal())
	f.Add((&hello{depth: 16, flags: helloRing, name: "a", topics: []string{"p"}}).marshal())
	pools := []poolInfo{
		{topic: "points", hold: 3, geom: handles.Geometry{PoolID: 1, Kind: handles.KindPoints, SlotCount: 8, SlotCapacity: 4096}},
		{topic: "image", hold: 8, geom: handles.Geometry{PoolID: 2, Kind: handles.KindImage, SlotCount: 8, SlotCapacity: 1 << 20}},
	}
	f.Add(marshalWelcome(pools, 0))
	f.Add(marshalWelcome(pools, 8))
	f.Add(marshalWelcome(pools[:1], 1024))
	f.Add(marshalRefuse("no"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var h hello
		if h.unmarshal(b) == nil {
			var again hello
			if err := again.unmarshal(h.marshal()); err != nil || !reflect.DeepEqual(h, again) {
				t.Fatalf("hello %+v re-encoded decodes to %+v, %v", h, again, err)
			}
		}
		for _, ring := range []bool{false, true} {
			p, entries, err := unmarshalWelcome(b, ring)
			if err != nil {
				continue
			}
			if ring != (entries != 0) {
				t.Fatalf("welcome (rings %t) decoded with %d ring entries", ring, entries)
			}
			p2, entries2, err := unmarshalWelcome(marshalWelcome(p, entries), ring)
			if err != nil || entries2 != entries || !reflect.DeepEqual(p, p2) {
				t.Fatalf("welcome %+v (%d entries) re-encoded decodes to %+v (%d), %v", p, entries, p2, entries2, err)
			}
		}
		refusal(b)
	})
}

// A welcome's hold limit must be one the pool can honour: 0 would let the
// subscriber hold nothing, more than the pool's slots is a broken camera.
func TestWelcomeHoldLimitIsChecked(t *testing.T) {
	for _, tt := range []struct {
		hold uint32
		ok   bool
	}{{0, false}, {1, true}, {8, true}, {9, false}, {^uint32(0), false}} {
		p := []poolInfo{{topic: "points", hold: tt.hold, geom: handles.Geometry{PoolID: 1, Kind: handles.KindPoints, SlotCount: 8, SlotCapacity: 4096}}}
		got, _, err := unmarshalWelcome(marshalWelcome(p, 0), false)
		if tt.ok && (err != nil || got[0].hold != tt.hold) {
			t.Errorf("hold %d on 8 slots: %+v, %v; want it accepted", tt.hold, got, err)
		}
		if !tt.ok && (!errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), "hold limit")) {
			t.Errorf("hold %d on 8 slots: %v; want a protocol error naming the hold limit", tt.hold, err)
		}
	}
}

// A subscriber of another protocol version (an agent from an older build
// beside a newer camera) is refused with a reason naming both versions,
// which the subscriber reports as ErrRefused rather than retrying.
func TestOtherProtocolVersionIsRefusedByName(t *testing.T) {
	f := newFixture(t, 4)
	fd, err := dialSeqpacket(f.path)
	if err != nil {
		t.Fatal(err)
	}
	defer closeFd(fd)
	old := (&hello{depth: 1, name: "old-agent", topics: []string{"points"}}).marshal()
	binary.LittleEndian.PutUint16(old[4:], ProtocolVersion-1)
	if err := sendBlocking(fd, old, nil); err != nil {
		t.Fatal(err)
	}
	setRecvTimeout(fd, 5)
	buf := make([]byte, 512)
	n, fds, err := recvWithFds(fd, buf, MaxTopics+1)
	closeFds(fds)
	if err != nil {
		t.Fatal(err)
	}
	reason, refused := refusal(buf[:n])
	want := fmt.Sprintf("protocol version %d, camera speaks %d", ProtocolVersion-1, ProtocolVersion)
	if !refused || !strings.Contains(reason, want) {
		t.Fatalf("camera answered %q (refused %t), want a refusal naming %q", buf[:n], refused, want)
	}
}
