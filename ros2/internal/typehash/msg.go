package typehash

import (
	"bufio"
	"bytes"
	"fmt"
	"strings"
)

// primitive field types of the .msg format.
var primitiveIDs = map[string]int{
	"bool": Bool, "byte": Byte, "char": Uint8, "int8": Int8, "uint8": Uint8,
	"int16": Int16, "uint16": Uint16, "int32": Int32, "uint32": Uint32,
	"int64": Int64, "uint64": Uint64, "float32": Float32, "float64": Float64,
	"string": String,
}

// ParseMsg reads a .msg file of type fullName ("pkg/msg/Name"). It
// understands primitive fields, nested types ("std_msgs/Header" or, in
// the same package, "Name") and unbounded sequences ("T[]"); it skips
// comments, constants ("uint8 X=1") and default values. Fixed arrays,
// bounded sequences and bounded strings are reported as errors: zerohop's
// messages do not use them.
func ParseMsg(fullName string, src []byte) (Type, error) {
	pkg, _, ok := strings.Cut(fullName, "/msg/")
	if !ok {
		return Type{}, fmt.Errorf("typehash: type name %q: want pkg/msg/Name", fullName)
	}
	t := Type{Name: fullName}
	sc := bufio.NewScanner(bytes.NewReader(src))
	for line := 1; sc.Scan(); line++ {
		text, _, _ := strings.Cut(sc.Text(), "#")
		f := strings.Fields(text)
		if len(f) == 0 {
			continue
		}
		if len(f) < 2 {
			return Type{}, fmt.Errorf("typehash: %s line %d: %q: want \"type name\"", fullName, line, text)
		}
		if strings.Contains(f[1], "=") || (len(f) > 2 && strings.HasPrefix(f[2], "=")) {
			continue // constant
		}
		typ, name := f[0], f[1]
		fld := Field{Name: name}
		if base, ok := strings.CutSuffix(typ, "[]"); ok {
			fld.Sequence, typ = true, base
		}
		if strings.ContainsAny(typ, "[]<=") {
			return Type{}, fmt.Errorf("typehash: %s line %d: type %q (arrays and bounds) not supported", fullName, line, typ)
		}
		if id, ok := primitiveIDs[typ]; ok {
			fld.ID = id
		} else {
			fld.ID = Nested
			p, n, ok := strings.Cut(typ, "/")
			if !ok {
				p, n = pkg, typ
			}
			fld.Nested = p + "/msg/" + n
		}
		t.Fields = append(t.Fields, fld)
	}
	return t, sc.Err()
}
