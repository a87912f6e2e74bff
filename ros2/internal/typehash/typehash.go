// Package typehash computes ROS 2 type hashes (REP-2011, "RIHS01") from
// type descriptions, the way rosidl_generator_type_description does: the
// SHA-256 of a JSON rendering of the type and of every type it references,
// default values left out. The ros2 package puts these hashes into each
// endpoint's USER_DATA ("typehash=RIHS01_<hex>;"); this package lets its
// tests prove the committed constants.
package typehash

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// FieldType ids from type_description_interfaces/msg/FieldType.
const (
	Nested  = 1
	Int8    = 2
	Uint8   = 3
	Int16   = 4
	Uint16  = 5
	Int32   = 6
	Uint32  = 7
	Int64   = 8
	Uint64  = 9
	Float32 = 10
	Float64 = 11
	Bool    = 15
	Byte    = 16
	String  = 17
	// BoundedString is string<=N; N goes in Field.StringCapacity.
	BoundedString = 21

	// Offsets added to an element id for arrays and sequences.
	arrayOffset             = 48
	boundedSequenceOffset   = 96
	unboundedSequenceOffset = 144
)

// Field is one member of a message. Nested names the message type
// ("std_msgs/msg/Header") when ID is Nested.
type Field struct {
	Name           string
	ID             int
	Capacity       int    // fixed array length or sequence bound; 0 otherwise
	StringCapacity int    // N of string<=N (ID BoundedString); 0 otherwise
	Nested         string // full type name of a nested message, else ""
	Sequence       bool   // unbounded sequence (T[])
	Array          bool   // fixed-size array (T[Capacity])
}

// Type is one message type: its full name ("geometry_msgs/msg/Twist") and
// its fields in declaration order. Constants are not part of a type hash.
type Type struct {
	Name   string
	Fields []Field
}

// Registry holds types by full name so that references can be resolved.
type Registry map[string]Type

// Hash returns "RIHS01_<64 hex digits>" for the named type.
func (r Registry) Hash(name string) (string, error) {
	js, err := r.JSON(name)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(js))
	return "RIHS01_" + hex.EncodeToString(sum[:]), nil
}

// JSON renders the hashed form of the named type's description: Python's
// json.dumps with separators (", ", ": ") over {type_description,
// referenced_type_descriptions}, referenced types sorted by name.
func (r Registry) JSON(name string) (string, error) {
	top, ok := r[name]
	if !ok {
		return "", fmt.Errorf("typehash: unknown type %q", name)
	}
	refs := map[string]Type{}
	if err := r.collect(top, refs); err != nil {
		return "", err
	}
	names := make([]string, 0, len(refs))
	for n := range refs {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString(`{"type_description": `)
	writeType(&b, top)
	b.WriteString(`, "referenced_type_descriptions": [`)
	for i, n := range names {
		if i > 0 {
			b.WriteString(", ")
		}
		writeType(&b, refs[n])
	}
	b.WriteString("]}")
	return b.String(), nil
}

func (r Registry) collect(t Type, refs map[string]Type) error {
	for _, f := range t.Fields {
		if f.Nested == "" {
			continue
		}
		if _, seen := refs[f.Nested]; seen {
			continue
		}
		nt, ok := r[f.Nested]
		if !ok {
			return fmt.Errorf("typehash: %s.%s refers to unknown type %q", t.Name, f.Name, f.Nested)
		}
		refs[f.Nested] = nt
		if err := r.collect(nt, refs); err != nil {
			return err
		}
	}
	return nil
}

func writeType(b *strings.Builder, t Type) {
	b.WriteString(`{"type_name": `)
	b.WriteString(strconv.Quote(t.Name))
	b.WriteString(`, "fields": [`)
	for i, f := range t.Fields {
		if i > 0 {
			b.WriteString(", ")
		}
		id := f.ID
		switch {
		case f.Sequence:
			id += unboundedSequenceOffset
		case f.Array:
			id += arrayOffset
		}
		fmt.Fprintf(b, `{"name": %s, "type": {"type_id": %d, "capacity": %d, "string_capacity": %d, "nested_type_name": %s}}`,
			strconv.Quote(f.Name), id, f.Capacity, f.StringCapacity, strconv.Quote(f.Nested))
	}
	b.WriteString("]}")
}
