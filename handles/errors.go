package handles

import (
	"errors"
	"fmt"
)

// Error classes. Every error returned by Unmarshal, Validate and the Decode
// methods is a *FieldError that wraps exactly one of these sentinels; match
// with errors.Is. Each class has its own counter in Stats.
var (
	// ErrRecordSize: the datagram is not Size (or ReleaseSize) bytes long.
	ErrRecordSize = errors.New("handles: wrong record size")
	// ErrBadMagic: the record does not start with the expected magic; it is
	// not a handle (or not a release), e.g. a release sent where a handle
	// was expected.
	ErrBadMagic = errors.New("handles: bad magic")
	// ErrBadVersion: the record's version is not Version.
	ErrBadVersion = errors.New("handles: unsupported version")
	// ErrReserved: a reserved byte, or a field of the section that the
	// handle's kind does not use, is not zero.
	ErrReserved = errors.New("handles: reserved or unused field not zero")
	// ErrFrameID: the frame id holds a byte outside printable ASCII, or a
	// non-NUL byte after the first NUL.
	ErrFrameID = errors.New("handles: malformed frame id")
	// ErrUnknownPool: the pool id was not announced at connect.
	ErrUnknownPool = errors.New("handles: unknown pool")
	// ErrKind: the kind is unknown or differs from the pool's kind.
	ErrKind = errors.New("handles: unknown kind or kind does not match pool")
	// ErrEncoding: the image encoding or the point datatype is unknown or
	// unsupported.
	ErrEncoding = errors.New("handles: unknown image encoding or point datatype")
	// ErrIndexRange: the slot index is not below the pool's slot count.
	ErrIndexRange = errors.New("handles: slot index out of range")
	// ErrLength: the payload length exceeds the slot capacity (or the
	// payload bytes given to VerifyPayload).
	ErrLength = errors.New("handles: payload length out of range")
	// ErrGeometry: the image or point-cloud geometry does not fit the
	// payload length, or is degenerate (zero width or height).
	ErrGeometry = errors.New("handles: geometry does not fit payload")
	// ErrChecksum: the payload checksum differs from the handle's.
	ErrChecksum = errors.New("handles: payload checksum mismatch")
)

// ErrPoolConfig is returned by NewValidator for a pool geometry that cannot
// describe a real pool (zero slots, duplicate id, ...). It is a
// configuration error, not a received-record error, and is not counted.
var ErrPoolConfig = errors.New("handles: invalid pool geometry")

// errClass indexes the per-class counters; one per sentinel above.
type errClass uint8

const (
	classRecordSize errClass = iota
	classBadMagic
	classBadVersion
	classReserved
	classFrameID
	classUnknownPool
	classKind
	classEncoding
	classIndexRange
	classLength
	classGeometry
	classChecksum
	numClasses
)

func (c errClass) sentinel() error {
	switch c {
	case classRecordSize:
		return ErrRecordSize
	case classBadMagic:
		return ErrBadMagic
	case classBadVersion:
		return ErrBadVersion
	case classReserved:
		return ErrReserved
	case classFrameID:
		return ErrFrameID
	case classUnknownPool:
		return ErrUnknownPool
	case classKind:
		return ErrKind
	case classEncoding:
		return ErrEncoding
	case classIndexRange:
		return ErrIndexRange
	case classLength:
		return ErrLength
	case classGeometry:
		return ErrGeometry
	case classChecksum:
		return ErrChecksum
	}
	panic(fmt.Sprintf("handles: error class %d has no sentinel", c))
}

// FieldError names the record field that failed a check, the value received
// and the bound it broke. Err is one of the class sentinels above.
//
// Only the rejection path builds a FieldError (one small allocation); an
// accepted record allocates nothing.
type FieldError struct {
	Record string // "handle" or "release"
	Field  string // wire field name as in the layout table, or an expression of them ("image.row_step*image.height")
	Value  uint64 // value received, or computed from received fields
	Limit  uint64 // bound that Value broke; meaningful when the message shows it
	Err    error  // class sentinel, for errors.Is

	op    string // relation Value must have to Limit ("<", "<=", "==", ">="); "" when there is no bound
	class errClass
}

func newFieldError(c errClass, record, field string, value uint64, op string, limit uint64) *FieldError {
	return &FieldError{Record: record, Field: field, Value: value, Limit: limit, Err: c.sentinel(), op: op, class: c}
}

func (e *FieldError) Error() string {
	format := "%s %s = %d"
	if e.Field == "magic" {
		format = "%s %s = %#x"
	}
	msg := fmt.Sprintf(format, e.Record, e.Field, e.Value)
	if e.op != "" {
		if e.Field == "magic" {
			msg += fmt.Sprintf(", want %s %#x", e.op, e.Limit)
		} else {
			msg += fmt.Sprintf(", want %s %d", e.op, e.Limit)
		}
	}
	return msg + ": " + e.Err.Error()
}

func (e *FieldError) Unwrap() error { return e.Err }

// asError converts without turning a nil *FieldError into a non-nil error.
func asError(fe *FieldError) error {
	if fe == nil {
		return nil
	}
	return fe
}
