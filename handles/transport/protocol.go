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
//	                               name [32], topic count u8, pad [3], topics [4][16]
//	welcome (camera → subscriber)  magic "ZHWE", version, pool count u16,
//	                               per pool: topic [16], pool id u32, kind u8, pad [3],
//	                               slot count u32, pad [4], slot size u64;
//	                               the pools' memfds ride along as SCM_RIGHTS, in order
//	refuse  (camera → subscriber)  magic "ZHRF", version, reason length u16, reason
//	handle  (camera → subscriber)  handles.Handle, 128 bytes
//	release (subscriber → camera)  handles.Release, 24 bytes
const (
	ProtocolVersion = 1
	MaxTopics       = 4
	TopicNameSize   = 16
	NameSize        = 32
	MaxDepth        = 16

	helloSize       = 4 + 2 + 2 + 4 + NameSize + 4 + MaxTopics*TopicNameSize
	poolEntrySize   = TopicNameSize + 4 + 1 + 3 + 4 + 4 + 8
	welcomeSize     = 8 + MaxTopics*poolEntrySize
	maxRefuseReason = 200
)

var (
	magicHello   = [4]byte{'Z', 'H', 'H', 'I'}
	magicWelcome = [4]byte{'Z', 'H', 'W', 'E'}
	magicRefuse  = [4]byte{'Z', 'H', 'R', 'F'}
)

// ErrProtocol reports a malformed or unexpected control message.
var ErrProtocol = errors.New("transport protocol violation")

// ErrRefused is returned when the camera refuses a subscriber.
var ErrRefused = errors.New("camera refused the subscriber")

type hello struct {
	depth  int
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
	if f := binary.LittleEndian.Uint32(b[8:]); f != 0 {
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
}

func marshalWelcome(pools []poolInfo) []byte {
	b := make([]byte, 8+len(pools)*poolEntrySize)
	copy(b, magicWelcome[:])
	binary.LittleEndian.PutUint16(b[4:], ProtocolVersion)
	binary.LittleEndian.PutUint16(b[6:], uint16(len(pools)))
	for i, p := range pools {
		e := b[8+i*poolEntrySize:]
		putName(e[:TopicNameSize], p.topic)
		binary.LittleEndian.PutUint32(e[16:], p.geom.PoolID)
		e[20] = byte(p.geom.Kind)
		binary.LittleEndian.PutUint32(e[24:], p.geom.SlotCount)
		binary.LittleEndian.PutUint64(e[32:], p.geom.SlotCapacity)
	}
	return b
}

func unmarshalWelcome(b []byte) ([]poolInfo, error) {
	if len(b) < 8 || [4]byte(b[:4]) != magicWelcome {
		return nil, fmt.Errorf("%w: expected a welcome, got %d bytes", ErrProtocol, len(b))
	}
	if v := binary.LittleEndian.Uint16(b[4:]); v != ProtocolVersion {
		return nil, fmt.Errorf("%w: camera speaks protocol %d, we speak %d", ErrProtocol, v, ProtocolVersion)
	}
	n := int(binary.LittleEndian.Uint16(b[6:]))
	if n < 1 || n > MaxTopics || len(b) != 8+n*poolEntrySize {
		return nil, fmt.Errorf("%w: welcome with %d pools in %d bytes", ErrProtocol, n, len(b))
	}
	pools := make([]poolInfo, n)
	for i := range pools {
		e := b[8+i*poolEntrySize:]
		t, err := getName(e[:TopicNameSize], "topic")
		if err != nil {
			return nil, err
		}
		pools[i] = poolInfo{topic: t, geom: handles.Geometry{
			PoolID:       binary.LittleEndian.Uint32(e[16:]),
			Kind:         handles.Kind(e[20]),
			SlotCount:    binary.LittleEndian.Uint32(e[24:]),
			SlotCapacity: binary.LittleEndian.Uint64(e[32:]),
		}}
	}
	return pools, nil
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
