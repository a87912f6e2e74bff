package transport

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/zerohop/zerohop/handles"
)

// Control messages of the unix transport. Every message is one
// SOCK_SEQPACKET datagram, little-endian, starting with a 4-byte magic and a
// 2-byte protocol version:
//
//	hello   (subscriber → camera)  magic "ZHHI", version, depth u16, flags u32,
//	                               name [32], topic count u8, pad [3], topics [4][16];
//	                               flag 1 (helloRing): send handles through rings
//	welcome (camera → subscriber)  magic "ZHWE", version, pool count u16,
//	                               per pool: topic [16], pool id u32, kind u8, pad [3],
//	                               slot count u32, hold limit u32, slot size u64;
//	                               with helloRing: ring entries u32, ring stride u32;
//	                               the pools' memfds ride along as SCM_RIGHTS, in order,
//	                               then (helloRing) the rings' memfd (see ring.go);
//	                               each pool's memfd ends with its generation table
//	                               (pinned/generations.go), which version 1 lacked, as
//	                               it lacked the hold limit (how many of the pool's slots
//	                               the subscriber may hold at once)
//	refuse  (camera → subscriber)  magic "ZHRF", version, reason length u16, reason
//	handle  (camera → subscriber)  handles.Handle, 128 bytes
//	release (subscriber → camera)  handles.Release, 24 bytes
const (
	ProtocolVersion = 2
	MaxTopics       = 4
	TopicNameSize   = 16
	NameSize        = 32
	MaxDepth        = 16

	helloSize       = 4 + 2 + 2 + 4 + NameSize + 4 + MaxTopics*TopicNameSize
	poolEntrySize   = TopicNameSize + 4 + 1 + 3 + 4 + 4 + 8
	ringInfoSize    = 8
	maxRefuseReason = 200
)

var (
	magicHello   = [4]byte{'Z', 'H', 'H', 'I'}
	magicWelcome = [4]byte{'Z', 'H', 'W', 'E'}
	magicRefuse  = [4]byte{'Z', 'H', 'R', 'F'}
)

// ErrProtocol reports a malformed or unexpected control message.
var ErrProtocol = errors.New("transport protocol violation")

// errCameraClosedBeforeWelcome: the camera closed the connection after
// the hello, for a reason of its own that passes; the subscriber retries.
var errCameraClosedBeforeWelcome = errors.New("the camera closed the connection before its welcome: it could not admit this subscriber for now (out of file descriptors, or every subscriber id taken? the camera's log says why); retrying")

// ErrRefused is returned when the camera refuses a subscriber.
var ErrRefused = errors.New("camera refused the subscriber")

// helloRing asks the camera to write handles into a shared ring per topic
// instead of sending them (spin mode).
const helloRing = 1

type hello struct {
	depth  int
	flags  uint32
	name   string
	topics []string
}

func putName(dst []byte, s string) { copy(dst, s) }

func getName(b []byte, field string) (string, error) {
	n := 0
	for n < len(b) && b[n] != 0 {
		c := b[n]
		if c < 0x20 || c > 0x7e {
			return "", fmt.Errorf("%w: %s byte %d is %#x, not printable ASCII", ErrProtocol, field, n, c)
		}
		n++
	}
	for _, c := range b[n:] {
		if c != 0 {
			return "", fmt.Errorf("%w: %s has bytes after its NUL terminator", ErrProtocol, field)
		}
	}
	return string(b[:n]), nil
}

func checkName(s, field string, size int) error {
	if len(s) == 0 || len(s) >= size {
		return fmt.Errorf("%s %q: want 1..%d bytes", field, s, size-1)
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return fmt.Errorf("%s %q: byte %d is not printable ASCII without spaces", field, s, i)
		}
	}
	return nil
}

func (h *hello) marshal() []byte {
	b := make([]byte, helloSize)
	copy(b, magicHello[:])
	binary.LittleEndian.PutUint16(b[4:], ProtocolVersion)
	binary.LittleEndian.PutUint16(b[6:], uint16(h.depth))
	binary.LittleEndian.PutUint32(b[8:], h.flags)
	putName(b[12:12+NameSize], h.name)
	b[12+NameSize] = byte(len(h.topics))
	for i, t := range h.topics {
		off := 16 + NameSize + i*TopicNameSize
		putName(b[off:off+TopicNameSize], t)
	}
	return b
}

func (h *hello) unmarshal(b []byte) error {
	if len(b) != helloSize {
		return fmt.Errorf("%w: hello is %d bytes, want %d", ErrProtocol, len(b), helloSize)
	}
	if [4]byte(b[:4]) != magicHello {
		return fmt.Errorf("%w: hello magic %q", ErrProtocol, b[:4])
	}
	if v := binary.LittleEndian.Uint16(b[4:]); v != ProtocolVersion {
		return fmt.Errorf("%w: protocol version %d, camera speaks %d", ErrProtocol, v, ProtocolVersion)
	}
	h.depth = int(binary.LittleEndian.Uint16(b[6:]))
	if h.depth < 1 || h.depth > MaxDepth {
		return fmt.Errorf("%w: depth %d, want 1..%d", ErrProtocol, h.depth, MaxDepth)
	}
	h.flags = binary.LittleEndian.Uint32(b[8:])
	if f := h.flags &^ helloRing; f != 0 {
		return fmt.Errorf("%w: unknown hello flags %#x", ErrProtocol, f)
	}
	var err error
	if h.name, err = getName(b[12:12+NameSize], "subscriber name"); err != nil {
		return err
	}
	n := int(b[12+NameSize])
	if n < 1 || n > MaxTopics {
		return fmt.Errorf("%w: %d topics, want 1..%d", ErrProtocol, n, MaxTopics)
	}
	h.topics = h.topics[:0]
	for i := 0; i < n; i++ {
		off := 16 + NameSize + i*TopicNameSize
		t, err := getName(b[off:off+TopicNameSize], "topic")
		if err != nil {
			return err
		}
		h.topics = append(h.topics, t)
	}
	return nil
}

// poolInfo is one pool announced in a welcome.
type poolInfo struct {
	topic string
	geom  handles.Geometry
	hold  uint32 // the subscriber's hold limit on the pool (holdLimit)
}

// marshalWelcome encodes the pools, and the ring geometry when ringEntries
// is not 0.
func marshalWelcome(pools []poolInfo, ringEntries uint32) []byte {
	n := 8 + len(pools)*poolEntrySize
	b := make([]byte, n, n+ringInfoSize)
	copy(b, magicWelcome[:])
	binary.LittleEndian.PutUint16(b[4:], ProtocolVersion)
	binary.LittleEndian.PutUint16(b[6:], uint16(len(pools)))
	for i, p := range pools {
		e := b[8+i*poolEntrySize:]
		putName(e[:TopicNameSize], p.topic)
		binary.LittleEndian.PutUint32(e[16:], p.geom.PoolID)
		e[20] = byte(p.geom.Kind)
		binary.LittleEndian.PutUint32(e[24:], p.geom.SlotCount)
		binary.LittleEndian.PutUint32(e[28:], p.hold)
		binary.LittleEndian.PutUint64(e[32:], p.geom.SlotCapacity)
	}
	if ringEntries != 0 {
		b = binary.LittleEndian.AppendUint32(b, ringEntries)
		b = binary.LittleEndian.AppendUint32(b, ringStride)
	}
	return b
}

// unmarshalWelcome decodes a welcome; with ring set it must carry the ring
// geometry, whose entry count it returns.
func unmarshalWelcome(b []byte, ring bool) ([]poolInfo, uint32, error) {
	if len(b) < 8 || [4]byte(b[:4]) != magicWelcome {
		return nil, 0, fmt.Errorf("%w: expected a welcome, got %d bytes", ErrProtocol, len(b))
	}
	if v := binary.LittleEndian.Uint16(b[4:]); v != ProtocolVersion {
		return nil, 0, fmt.Errorf("%w: camera speaks protocol %d, we speak %d", ErrProtocol, v, ProtocolVersion)
	}
	n := int(binary.LittleEndian.Uint16(b[6:]))
	want := 8 + n*poolEntrySize
	if ring {
		want += ringInfoSize
	}
	if n < 1 || n > MaxTopics || len(b) != want {
		return nil, 0, fmt.Errorf("%w: welcome with %d pools in %d bytes (rings: %t)", ErrProtocol, n, len(b), ring)
	}
	var entries uint32
	if ring {
		r := b[8+n*poolEntrySize:]
		entries = binary.LittleEndian.Uint32(r)
		if stride := binary.LittleEndian.Uint32(r[4:]); stride != ringStride {
			return nil, 0, fmt.Errorf("%w: handle ring stride %d, we read %d", ErrProtocol, stride, ringStride)
		}
		if entries < minRingEntries || entries > maxRingEntries || entries&(entries-1) != 0 {
			return nil, 0, fmt.Errorf("%w: handle ring of %d entries, want a power of two in %d..%d", ErrProtocol, entries, minRingEntries, maxRingEntries)
		}
	}
	pools := make([]poolInfo, n)
	for i := range pools {
		e := b[8+i*poolEntrySize:]
		t, err := getName(e[:TopicNameSize], "topic")
		if err != nil {
			return nil, 0, err
		}
		pools[i] = poolInfo{topic: t, geom: handles.Geometry{
			PoolID:       binary.LittleEndian.Uint32(e[16:]),
			Kind:         handles.Kind(e[20]),
			SlotCount:    binary.LittleEndian.Uint32(e[24:]),
			SlotCapacity: binary.LittleEndian.Uint64(e[32:]),
		}, hold: binary.LittleEndian.Uint32(e[28:])}
		if p := pools[i]; p.hold == 0 || p.hold > p.geom.SlotCount {
			return nil, 0, fmt.Errorf("%w: topic %q: hold limit %d on a pool of %d slots", ErrProtocol, p.topic, p.hold, p.geom.SlotCount)
		}
	}
	return pools, entries, nil
}

func marshalRefuse(reason string) []byte {
	if len(reason) > maxRefuseReason {
		reason = reason[:maxRefuseReason]
	}
	b := make([]byte, 8+len(reason))
	copy(b, magicRefuse[:])
	binary.LittleEndian.PutUint16(b[4:], ProtocolVersion)
	binary.LittleEndian.PutUint16(b[6:], uint16(len(reason)))
	copy(b[8:], reason)
	return b
}

// refusal returns the reason if b is a refuse message.
func refusal(b []byte) (string, bool) {
	if len(b) < 8 || [4]byte(b[:4]) != magicRefuse {
		return "", false
	}
	n := int(binary.LittleEndian.Uint16(b[6:]))
	if 8+n > len(b) {
		n = len(b) - 8
	}
	return string(b[8 : 8+n]), true
}
