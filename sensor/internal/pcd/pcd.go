// Package pcd reads Point Cloud Library PCD files (format v0.7, DATA ascii
// and binary) into zerohop's point layout: little-endian float32 x, y, z,
// intensity, 16 bytes per point.
//
// Format reference: https://pointclouds.org/documentation/tutorials/pcd_file_format.html
//
// Errors do not name the file; callers add it.
package pcd

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Point layout written by ReadPoints.
const pointStep = 16

// Limits that keep a hostile header from asking for absurd allocations.
const (
	MaxFields    = 256     // fields per point
	MaxCount     = 1 << 16 // elements per field
	MaxPoints    = 1 << 30 // points per file
	maxHeaderLen = 64 << 10
)

// ErrCompressed is returned for DATA binary_compressed, which is not supported.
var ErrCompressed = errors.New("DATA binary_compressed is not supported (re-save as binary or ascii, e.g. pcl_convert_pcd_ascii_binary in.pcd out.pcd 1)")

// DataFormat is the encoding of the data section.
type DataFormat uint8

// Data formats.
const (
	DataASCII DataFormat = iota + 1
	DataBinary
	DataBinaryCompressed
)

func (d DataFormat) String() string {
	switch d {
	case DataASCII:
		return "ascii"
	case DataBinary:
		return "binary"
	case DataBinaryCompressed:
		return "binary_compressed"
	}
	return fmt.Sprintf("DataFormat(%d)", uint8(d))
}

// Field is one FIELDS entry with its SIZE, TYPE and COUNT.
type Field struct {
	Name   string
	Size   int  // bytes per element: 1, 2, 4 or 8
	Type   byte // 'I' signed, 'U' unsigned, 'F' float (size 4 or 8)
	Count  int  // elements per point, >= 1
	Offset int  // byte offset of the first element in a binary record
	Column int  // token index of the first element on an ascii line
}

// Header is a parsed and validated PCD header.
type Header struct {
	Version    string
	Fields     []Field
	Width      int
	Height     int
	Points     int // == Width × Height
	Data       DataFormat
	RecordSize int // bytes per point in binary data
	Columns    int // tokens per point in ascii data
	Len        int // header length in bytes, DATA line included
}

// ParseHeader reads the header up to and including the DATA line. The
// reader's buffer size bounds the length of one header line. A header that
// declares DATA binary_compressed yields an error wrapping ErrCompressed.
func ParseHeader(r *bufio.Reader) (Header, error) {
	var h Header
	seen := map[string]int{} // keyword → line number
	var sizes, counts []int
	var types []byte
	haveWidth, haveHeight, havePoints := false, false, false
	for line := 1; ; line++ {
		raw, err := r.ReadSlice('\n')
		h.Len += len(raw)
		if h.Len > maxHeaderLen {
			return Header{}, fmt.Errorf("header longer than %d bytes without a DATA line", maxHeaderLen)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			return Header{}, fmt.Errorf("header line %d longer than %d bytes", line, r.Size())
		}
		if err != nil && (err != io.EOF || len(raw) == 0) {
			if err == io.EOF {
				return Header{}, fmt.Errorf("header ends at line %d without a DATA line", line)
			}
			return Header{}, fmt.Errorf("read header line %d: %w", line, err)
		}
		tok := bytes.Fields(raw)
		if len(tok) == 0 || tok[0][0] == '#' {
			if err == io.EOF {
				return Header{}, fmt.Errorf("header ends at line %d without a DATA line", line)
			}
			continue
		}
		key, args := string(tok[0]), tok[1:]
		if prev, dup := seen[key]; dup {
			return Header{}, fmt.Errorf("line %d: %s repeated (first on line %d)", line, key, prev)
		}
		seen[key] = line
		needFields := func() error {
			if h.Fields == nil {
				return fmt.Errorf("line %d: %s before FIELDS", line, key)
			}
			if len(args) != len(h.Fields) {
				return fmt.Errorf("line %d: %s has %d values for %d fields", line, key, len(args), len(h.Fields))
			}
			return nil
		}
		switch key {
		case "VERSION":
			if len(args) != 1 {
				return Header{}, fmt.Errorf("line %d: VERSION wants one value, got %d", line, len(args))
			}
			h.Version = string(args[0])
		case "FIELDS":
			if len(args) == 0 || len(args) > MaxFields {
				return Header{}, fmt.Errorf("line %d: FIELDS lists %d fields, want 1..%d", line, len(args), MaxFields)
			}
			h.Fields = make([]Field, len(args))
			names := map[string]bool{}
			for i, a := range args {
				name := string(a)
				// "_" marks padding in PCL and may repeat.
				if name != "_" && names[name] {
					return Header{}, fmt.Errorf("line %d: field %q listed twice", line, name)
				}
				names[name] = true
				h.Fields[i].Name = name
			}
		case "SIZE":
			if err := needFields(); err != nil {
				return Header{}, err
			}
			sizes = make([]int, len(args))
			for i, a := range args {
				n, err := strconv.Atoi(string(a))
				if err != nil || (n != 1 && n != 2 && n != 4 && n != 8) {
					return Header{}, fmt.Errorf("line %d: SIZE %q of field %q: want 1, 2, 4 or 8", line, a, h.Fields[i].Name)
				}
				sizes[i] = n
			}
		case "TYPE":
			if err := needFields(); err != nil {
				return Header{}, err
			}
			types = make([]byte, len(args))
			for i, a := range args {
				if len(a) != 1 || (a[0] != 'I' && a[0] != 'U' && a[0] != 'F') {
					return Header{}, fmt.Errorf("line %d: TYPE %q of field %q: want I, U or F", line, a, h.Fields[i].Name)
				}
				types[i] = a[0]
			}
		case "COUNT":
			if err := needFields(); err != nil {
				return Header{}, err
			}
			counts = make([]int, len(args))
			for i, a := range args {
				n, err := strconv.Atoi(string(a))
				if err != nil || n < 1 || n > MaxCount {
					return Header{}, fmt.Errorf("line %d: COUNT %q of field %q: want 1..%d", line, a, h.Fields[i].Name, MaxCount)
				}
				counts[i] = n
			}
		case "WIDTH", "HEIGHT", "POINTS":
			if len(args) != 1 {
				return Header{}, fmt.Errorf("line %d: %s wants one value, got %d", line, key, len(args))
			}
			n, err := strconv.Atoi(string(args[0]))
			if err != nil || n < 0 || n > MaxPoints {
				return Header{}, fmt.Errorf("line %d: %s %q: want an integer 0..%d", line, key, args[0], MaxPoints)
			}
			switch key {
			case "WIDTH":
				h.Width, haveWidth = n, true
			case "HEIGHT":
				h.Height, haveHeight = n, true
			default:
				h.Points, havePoints = n, true
			}
		case "VIEWPOINT":
			// The sensor pose; points are used as stored, so it is only checked.
			if len(args) != 7 {
				return Header{}, fmt.Errorf("line %d: VIEWPOINT wants 7 values, got %d", line, len(args))
			}
			for _, a := range args {
				if _, err := strconv.ParseFloat(string(a), 64); err != nil {
					return Header{}, fmt.Errorf("line %d: VIEWPOINT value %q is not a number", line, a)
				}
			}
		case "DATA":
			if len(args) != 1 {
				return Header{}, fmt.Errorf("line %d: DATA wants one value, got %d", line, len(args))
			}
			switch string(args[0]) {
			case "ascii":
				h.Data = DataASCII
			case "binary":
				h.Data = DataBinary
			case "binary_compressed":
				return Header{}, fmt.Errorf("line %d: %w", line, ErrCompressed)
			default:
				return Header{}, fmt.Errorf("line %d: DATA %q: want ascii or binary", line, args[0])
			}
			if err := h.finish(sizes, types, counts, haveWidth, haveHeight, havePoints); err != nil {
				return Header{}, err
			}
			return h, nil
		default:
			return Header{}, fmt.Errorf("line %d: unknown header keyword %q", line, key)
		}
		if err == io.EOF {
			return Header{}, fmt.Errorf("header ends at line %d without a DATA line", line)
		}
	}
}

// finish checks the header as a whole and fills the derived fields.
func (h *Header) finish(sizes []int, types []byte, counts []int, haveWidth, haveHeight, havePoints bool) error {
	switch {
	case h.Fields == nil:
		return errors.New("header has no FIELDS line")
	case sizes == nil:
		return errors.New("header has no SIZE line")
	case types == nil:
		return errors.New("header has no TYPE line")
	}
	for i := range h.Fields {
		f := &h.Fields[i]
		f.Size, f.Type, f.Count = sizes[i], types[i], 1
		if counts != nil {
			f.Count = counts[i]
		}
		if f.Type == 'F' && f.Size != 4 && f.Size != 8 {
			return fmt.Errorf("field %q: TYPE F with SIZE %d: want 4 or 8", f.Name, f.Size)
		}
		f.Offset, f.Column = h.RecordSize, h.Columns
		h.RecordSize += f.Size * f.Count
		h.Columns += f.Count
	}
	if !haveHeight {
		h.Height = 1
	}
	switch {
	case haveWidth:
		if h.Height != 0 && h.Width > MaxPoints/h.Height {
			return fmt.Errorf("WIDTH %d × HEIGHT %d exceeds %d points", h.Width, h.Height, MaxPoints)
		}
		if havePoints && h.Points != h.Width*h.Height {
			return fmt.Errorf("POINTS %d does not equal WIDTH %d × HEIGHT %d", h.Points, h.Width, h.Height)
		}
		h.Points = h.Width * h.Height
	case havePoints && !haveHeight:
		h.Width = h.Points // lenient: an unorganized cloud given by POINTS alone
	default:
		return errors.New("header has no WIDTH line")
	}
	return nil
}

// DataSize is the exact size in bytes of binary data; -1 for ascii.
func (h *Header) DataSize() int64 {
	if h.Data != DataBinary {
		return -1
	}
	return int64(h.Points) * int64(h.RecordSize)
}

// XYZI says which fields hold x, y, z and intensity (indices into
// Header.Fields; I is -1 when the file has no intensity).
type XYZI struct{ X, Y, Z, I int }

// FindXYZI locates the x, y, z and intensity fields. x, y and z are required;
// intensity is the field named "intensity" or "i", else "reflectivity" (what
// Livox and Ouster tools save), and optional. Each must have COUNT 1.
func (h *Header) FindXYZI() (XYZI, error) {
	l := XYZI{-1, -1, -1, -1}
	reflectivity := -1
	for i, f := range h.Fields {
		var slot *int
		switch f.Name {
		case "x":
			slot = &l.X
		case "y":
			slot = &l.Y
		case "z":
			slot = &l.Z
		case "intensity", "i":
			if l.I >= 0 {
				return l, fmt.Errorf("fields %q and %q both look like intensity", h.Fields[l.I].Name, f.Name)
			}
			slot = &l.I
		case "reflectivity":
			if f.Count != 1 { // not needed unless nothing else is intensity
				continue
			}
			slot = &reflectivity
		default:
			continue
		}
		if f.Count != 1 {
			return l, fmt.Errorf("field %q has COUNT %d, want 1", f.Name, f.Count)
		}
		*slot = i
	}
	if l.I < 0 {
		l.I = reflectivity
	}
	var missing []string
	for _, m := range []struct {
		idx  int
		name string
	}{{l.X, "x"}, {l.Y, "y"}, {l.Z, "z"}} {
		if m.idx < 0 {
			missing = append(missing, m.name)
		}
	}
	if missing != nil {
		return l, fmt.Errorf("missing field %s (FIELDS are %s)", strings.Join(missing, ", "), h.fieldNames())
	}
	return l, nil
}

func (h *Header) fieldNames() string {
	var b bytes.Buffer
	for i, f := range h.Fields {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(f.Name)
	}
	return b.String()
}

// ReadPoints reads the data section that follows the header from r and writes
// the points as 16-byte x, y, z, intensity records (little-endian float32)
// into dst, which must hold h.Points*16 bytes. Points whose x, y or z is not
// finite (organized clouds mark missing returns with NaN) are dropped; a
// missing intensity field reads as 0. It returns the number of points written.
func ReadPoints(r *bufio.Reader, h *Header, l XYZI, dst []byte) (int, error) {
	if need := int64(h.Points) * pointStep; int64(len(dst)) < need {
		return 0, fmt.Errorf("%d points need %d bytes, buffer has %d", h.Points, need, len(dst))
	}
	switch h.Data {
	case DataASCII:
		return readASCII(r, h, l, dst)
	case DataBinary:
		return readBinary(r, h, l, dst)
	}
	return 0, fmt.Errorf("DATA %s is not supported", h.Data)
}

func readBinary(r *bufio.Reader, h *Header, l XYZI, dst []byte) (int, error) {
	f := h.Fields
	native := h.RecordSize == pointStep && l.I >= 0 &&
		f[l.X].Offset == 0 && f[l.Y].Offset == 4 && f[l.Z].Offset == 8 && f[l.I].Offset == 12 &&
		f[l.X].Type == 'F' && f[l.Y].Type == 'F' && f[l.Z].Type == 'F' && f[l.I].Type == 'F' &&
		f[l.X].Size == 4 && f[l.Y].Size == 4 && f[l.Z].Size == 4 && f[l.I].Size == 4
	if native {
		// The file's records are already our layout: read them in place.
		n, err := io.ReadFull(r, dst[:h.Points*pointStep])
		if err != nil {
			return 0, fmt.Errorf("binary data ends after %d of %d points (%d-byte records)", n/pointStep, h.Points, pointStep)
		}
		return compactFinite(dst[:n]), nil
	}
	// Visit the wanted fields in record order, skipping the bytes between
	// them: no copy of the record, whatever its size.
	want := []int{l.X, l.Y, l.Z, l.I}
	if l.I < 0 {
		want = want[:3]
	}
	slices.SortFunc(want, func(a, b int) int { return f[a].Offset - f[b].Offset })
	var v [4]float32 // x, y, z, intensity
	slot := func(fi int) *float32 {
		switch fi {
		case l.X:
			return &v[0]
		case l.Y:
			return &v[1]
		case l.Z:
			return &v[2]
		}
		return &v[3]
	}
	w := 0
	for p := 0; p < h.Points; p++ {
		pos := 0
		for _, fi := range want {
			fl := &f[fi]
			if _, err := r.Discard(fl.Offset - pos); err != nil {
				return 0, shortBinary(p, h)
			}
			b, err := r.Peek(fl.Size)
			if err != nil {
				return 0, shortBinary(p, h)
			}
			*slot(fi) = binaryValue(b, fl)
			_, _ = r.Discard(fl.Size) // cannot fail: Peek returned that many bytes
			pos = fl.Offset + fl.Size
		}
		if _, err := r.Discard(h.RecordSize - pos); err != nil {
			return 0, shortBinary(p, h)
		}
		w = putFinite(dst, w, v[0], v[1], v[2], v[3])
	}
	return w / pointStep, nil
}

func shortBinary(p int, h *Header) error {
	return fmt.Errorf("binary data ends after %d of %d points (%d-byte records)", p, h.Points, h.RecordSize)
}

// binaryValue decodes a little-endian element of field f stored in b.
func binaryValue(b []byte, f *Field) float32 {
	b = b[:f.Size]
	le := binary.LittleEndian
	switch f.Type {
	case 'F':
		if f.Size == 4 {
			return math.Float32frombits(le.Uint32(b))
		}
		return float32(math.Float64frombits(le.Uint64(b)))
	case 'U':
		switch f.Size {
		case 1:
			return float32(b[0])
		case 2:
			return float32(le.Uint16(b))
		case 4:
			return float32(le.Uint32(b))
		}
		return float32(le.Uint64(b))
	}
	switch f.Size {
	case 1:
		return float32(int8(b[0]))
	case 2:
		return float32(int16(le.Uint16(b)))
	case 4:
		return float32(int32(le.Uint32(b)))
	}
	return float32(int64(le.Uint64(b)))
}

func readASCII(r *bufio.Reader, h *Header, l XYZI, dst []byte) (int, error) {
	// cols[k] is the token index of x, y, z, intensity (-1: absent).
	cols := [4]int{h.Fields[l.X].Column, h.Fields[l.Y].Column, h.Fields[l.Z].Column, -1}
	if l.I >= 0 {
		cols[3] = h.Fields[l.I].Column
	}
	w := 0
	line := 0
	for p := 0; p < h.Points; {
		line++
		raw, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			return 0, fmt.Errorf("data line %d (point %d) longer than %d bytes", line, p, r.Size())
		}
		if err != nil && (err != io.EOF || len(raw) == 0) {
			if err == io.EOF {
				return 0, fmt.Errorf("ascii data ends after %d of %d points", p, h.Points)
			}
			return 0, fmt.Errorf("read data line %d: %w", line, err)
		}
		var v [4]float32
		tokens := 0
		for rest := raw; ; {
			tok, next := nextToken(rest)
			if tok == nil {
				break
			}
			rest = next
			for k, c := range cols {
				if c == tokens {
					f, perr := strconv.ParseFloat(string(tok), 64)
					if perr != nil {
						return 0, fmt.Errorf("data line %d (point %d): value %d %q is not a number", line, p, tokens+1, tok)
					}
					v[k] = float32(f)
				}
			}
			tokens++
		}
		if tokens == 0 {
			if err == io.EOF {
				return 0, fmt.Errorf("ascii data ends after %d of %d points", p, h.Points)
			}
			continue // blank line
		}
		if tokens != h.Columns {
			return 0, fmt.Errorf("data line %d (point %d) has %d values, the header declares %d", line, p, tokens, h.Columns)
		}
		w = putFinite(dst, w, v[0], v[1], v[2], v[3])
		p++
	}
	return w / pointStep, nil
}

// nextToken splits off the first whitespace-separated token of b.
func nextToken(b []byte) (tok, rest []byte) {
	i := 0
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	j := i
	for j < len(b) && !isSpace(b[j]) {
		j++
	}
	if i == j {
		return nil, nil
	}
	return b[i:j], b[j:]
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

func finite(f float32) bool { return !math.IsNaN(float64(f)) && !math.IsInf(float64(f), 0) }

// putFinite writes one point at dst[w:] unless a coordinate is not finite,
// and returns the new write offset.
func putFinite(dst []byte, w int, x, y, z, in float32) int {
	if !finite(x) || !finite(y) || !finite(z) {
		return w
	}
	p := dst[w : w+pointStep : w+pointStep]
	le := binary.LittleEndian
	le.PutUint32(p[0:], math.Float32bits(x))
	le.PutUint32(p[4:], math.Float32bits(y))
	le.PutUint32(p[8:], math.Float32bits(z))
	le.PutUint32(p[12:], math.Float32bits(in))
	return w + pointStep
}

// CompactFinite drops, in place, the 16-byte x, y, z, intensity records of buf
// whose x, y or z is not finite, and returns the number of records kept.
func CompactFinite(buf []byte) int { return compactFinite(buf) }

func compactFinite(buf []byte) int {
	le := binary.LittleEndian
	w := 0
	for r := 0; r+pointStep <= len(buf); r += pointStep {
		x := math.Float32frombits(le.Uint32(buf[r:]))
		y := math.Float32frombits(le.Uint32(buf[r+4:]))
		z := math.Float32frombits(le.Uint32(buf[r+8:]))
		if !finite(x) || !finite(y) || !finite(z) {
			continue
		}
		if w != r {
			copy(buf[w:w+pointStep], buf[r:r+pointStep])
		}
		w += pointStep
	}
	return w / pointStep
}
