package pcd

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
)

// headerCases feed TestParseHeader and seed FuzzParseHeader.
var headerCases = []struct {
	name    string
	in      string
	wantErr string // substring; "" means the header is valid
	check   func(*testing.T, Header)
}{
	{
		name: "PCL's own example header is accepted",
		in: "# .PCD v.7 - Point Cloud Data file format\nVERSION .7\nFIELDS x y z rgb\nSIZE 4 4 4 4\nTYPE F F F F\nCOUNT 1 1 1 1\n" +
			"WIDTH 213\nHEIGHT 1\nVIEWPOINT 0 0 0 1 0 0 0\nPOINTS 213\nDATA ascii\n",
		check: func(t *testing.T, h Header) {
			if h.Points != 213 || h.Width != 213 || h.Height != 1 || h.Data != DataASCII || h.RecordSize != 16 || h.Columns != 4 || h.Version != ".7" {
				t.Errorf("header %+v", h)
			}
		},
	},
	{
		name: "offsets and columns follow SIZE and COUNT",
		in:   "FIELDS a x _ y\nSIZE 2 8 1 4\nTYPE U F U I\nCOUNT 3 1 5 1\nWIDTH 4\nHEIGHT 2\nDATA binary\n",
		check: func(t *testing.T, h Header) {
			wantOff, wantCol := []int{0, 6, 14, 19}, []int{0, 3, 4, 9}
			for i, f := range h.Fields {
				if f.Offset != wantOff[i] || f.Column != wantCol[i] {
					t.Errorf("field %q offset %d column %d, want %d %d", f.Name, f.Offset, f.Column, wantOff[i], wantCol[i])
				}
			}
			if h.RecordSize != 23 || h.Columns != 10 || h.Points != 8 {
				t.Errorf("record %d columns %d points %d, want 23 10 8", h.RecordSize, h.Columns, h.Points)
			}
		},
	},
	{
		name: "COUNT defaults to 1 and POINTS alone sets the width",
		in:   "FIELDS x y z\nSIZE 4 4 4\nTYPE F F F\nPOINTS 7\nDATA ascii\n",
		check: func(t *testing.T, h Header) {
			if h.Points != 7 || h.Width != 7 || h.Height != 1 || h.Fields[2].Count != 1 {
				t.Errorf("header %+v", h)
			}
		},
	},
	{
		name: "CRLF line ends and blank lines are accepted",
		in:   "FIELDS x y z\r\n\r\nSIZE 4 4 4\r\nTYPE F F F\r\nWIDTH 1\r\nDATA binary\r\n",
		check: func(t *testing.T, h Header) {
			if h.Data != DataBinary || h.Points != 1 {
				t.Errorf("header %+v", h)
			}
		},
	},
	{name: "binary_compressed is refused", in: "FIELDS x\nSIZE 4\nTYPE F\nWIDTH 1\nDATA binary_compressed\n", wantErr: "binary_compressed is not supported"},
	{name: "unknown DATA", in: "FIELDS x\nSIZE 4\nTYPE F\nWIDTH 1\nDATA hex\n", wantErr: `DATA "hex"`},
	{name: "no DATA line", in: "FIELDS x\nSIZE 4\nTYPE F\nWIDTH 1\n", wantErr: "without a DATA line"},
	{name: "empty input", in: "", wantErr: "without a DATA line"},
	{name: "SIZE before FIELDS", in: "SIZE 4\nFIELDS x\n", wantErr: "SIZE before FIELDS"},
	{name: "SIZE count mismatch", in: "FIELDS x y\nSIZE 4\n", wantErr: "SIZE has 1 values for 2 fields"},
	{name: "bad SIZE", in: "FIELDS x\nSIZE 3\n", wantErr: `SIZE "3" of field "x"`},
	{name: "bad TYPE", in: "FIELDS x\nSIZE 4\nTYPE D\n", wantErr: `TYPE "D"`},
	{name: "float of size 2", in: "FIELDS x\nSIZE 2\nTYPE F\nWIDTH 1\nDATA ascii\n", wantErr: "TYPE F with SIZE 2"},
	{name: "COUNT zero", in: "FIELDS x\nSIZE 4\nTYPE F\nCOUNT 0\n", wantErr: `COUNT "0"`},
	{name: "negative WIDTH", in: "FIELDS x\nWIDTH -1\n", wantErr: `WIDTH "-1"`},
	{name: "huge WIDTH", in: "FIELDS x\nWIDTH 99999999999999999999\n", wantErr: "WIDTH"},
	{name: "WIDTH × HEIGHT overflow", in: "FIELDS x\nSIZE 4\nTYPE F\nWIDTH 1073741824\nHEIGHT 1073741824\nDATA ascii\n", wantErr: "exceeds"},
	{name: "POINTS disagrees", in: "FIELDS x\nSIZE 4\nTYPE F\nWIDTH 2\nHEIGHT 2\nPOINTS 5\nDATA ascii\n", wantErr: "POINTS 5 does not equal WIDTH 2 × HEIGHT 2"},
	{name: "no WIDTH or POINTS", in: "FIELDS x\nSIZE 4\nTYPE F\nDATA ascii\n", wantErr: "no WIDTH"},
	{name: "no SIZE", in: "FIELDS x\nTYPE F\nWIDTH 1\nDATA ascii\n", wantErr: "no SIZE"},
	{name: "no TYPE", in: "FIELDS x\nSIZE 4\nWIDTH 1\nDATA ascii\n", wantErr: "no TYPE"},
	{name: "no FIELDS", in: "WIDTH 1\nDATA ascii\n", wantErr: "no FIELDS"},
	{name: "repeated keyword", in: "FIELDS x\nFIELDS y\n", wantErr: "FIELDS repeated (first on line 1)"},
	{name: "duplicate field", in: "FIELDS x x\n", wantErr: `field "x" listed twice`},
	{name: "unknown keyword", in: "FIELDS x\nCOLOR red\n", wantErr: `unknown header keyword "COLOR"`},
	{name: "short VIEWPOINT", in: "VIEWPOINT 0 0 0\n", wantErr: "VIEWPOINT wants 7 values"},
	{name: "line longer than the buffer", in: "# " + strings.Repeat("a", testBufSize) + "\n", wantErr: "longer than 256 bytes"},
}

// testBufSize is the reader size in tests: small, so that short inputs reach
// the line-length limit (long seeds make fuzz minimization crawl).
const testBufSize = 256

func TestParseHeader(t *testing.T) {
	for _, tc := range headerCases {
		t.Run(tc.name, func(t *testing.T) {
			h, err := ParseHeader(bufio.NewReaderSize(strings.NewReader(tc.in), testBufSize))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if h.Len != len(tc.in) {
				t.Errorf("Len = %d, want %d (the whole input is header)", h.Len, len(tc.in))
			}
			tc.check(t, h)
		})
	}
}

func TestCompressedErrorIsSentinel(t *testing.T) {
	_, err := ParseHeader(bufio.NewReader(strings.NewReader("FIELDS x\nSIZE 4\nTYPE F\nWIDTH 1\nDATA binary_compressed\n")))
	if !errors.Is(err, ErrCompressed) {
		t.Fatalf("err = %v, want ErrCompressed", err)
	}
}

func TestFindXYZI(t *testing.T) {
	tests := []struct {
		fields, count string
		want          XYZI
		wantErr       string
	}{
		{"x y z intensity", "1 1 1 1", XYZI{0, 1, 2, 3}, ""},
		{"intensity z rgb y x", "1 1 1 1 1", XYZI{4, 3, 1, 0}, ""},
		{"x y z i", "1 1 1 1", XYZI{0, 1, 2, 3}, ""},
		{"x y z", "1 1 1", XYZI{0, 1, 2, -1}, ""},
		{"x z", "1 1", XYZI{}, "missing field y"},
		{"normal_x rgb", "1 1", XYZI{}, "missing field x, y, z (FIELDS are normal_x rgb)"},
		{"x y z", "1 2 1", XYZI{}, `field "y" has COUNT 2`},
		{"x y z i intensity", "1 1 1 1 1", XYZI{}, "both look like intensity"},
		// Livox and Ouster tools save reflectivity; intensity wins where both are.
		{"x y z reflectivity tag line", "1 1 1 1 1 1", XYZI{0, 1, 2, 3}, ""},
		{"x y z reflectivity intensity", "1 1 1 1 1", XYZI{0, 1, 2, 4}, ""},
		{"x y z intensity reflectivity", "1 1 1 1 2", XYZI{0, 1, 2, 3}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.fields, func(t *testing.T) {
			n := len(strings.Fields(tc.fields))
			in := "FIELDS " + tc.fields + "\nSIZE" + strings.Repeat(" 4", n) + "\nTYPE" + strings.Repeat(" F", n) +
				"\nCOUNT " + tc.count + "\nWIDTH 1\nDATA ascii\n"
			h, err := ParseHeader(bufio.NewReader(strings.NewReader(in)))
			if err != nil {
				t.Fatal(err)
			}
			got, err := h.FindXYZI()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

type pt struct{ x, y, z, i float32 }

func decode(b []byte, n int) []pt {
	le := binary.LittleEndian
	out := make([]pt, n)
	for k := range out {
		r := b[16*k:]
		out[k] = pt{math.Float32frombits(le.Uint32(r)), math.Float32frombits(le.Uint32(r[4:])),
			math.Float32frombits(le.Uint32(r[8:])), math.Float32frombits(le.Uint32(r[12:]))}
	}
	return out
}

// TestReadBinaryConvertsEveryType stores x, y, z and intensity with each
// SIZE/TYPE pair in turn.
func TestReadBinaryConvertsEveryType(t *testing.T) {
	le := binary.LittleEndian
	enc := map[string]func(v float64) []byte{
		"1 I": func(v float64) []byte { return []byte{byte(int8(v))} },
		"1 U": func(v float64) []byte { return []byte{byte(v)} },
		"2 I": func(v float64) []byte { return le.AppendUint16(nil, uint16(int16(v))) },
		"2 U": func(v float64) []byte { return le.AppendUint16(nil, uint16(v)) },
		"4 I": func(v float64) []byte { return le.AppendUint32(nil, uint32(int32(v))) },
		"4 U": func(v float64) []byte { return le.AppendUint32(nil, uint32(v)) },
		"8 I": func(v float64) []byte { return le.AppendUint64(nil, uint64(int64(v))) },
		"8 U": func(v float64) []byte { return le.AppendUint64(nil, uint64(v)) },
		"4 F": func(v float64) []byte { return le.AppendUint32(nil, math.Float32bits(float32(v))) },
		"8 F": func(v float64) []byte { return le.AppendUint64(nil, math.Float64bits(v)) },
	}
	for st, f := range enc {
		t.Run(st, func(t *testing.T) {
			size, typ, _ := strings.Cut(st, " ")
			signed := typ != "U"
			vals := []pt{{1, 2, 3, 4}, {100, 0, 7, 127}}
			if signed {
				vals = append(vals, pt{-5, -128, 9, -1})
			}
			var data []byte
			for _, p := range vals {
				for _, v := range []float32{p.z, p.i, p.x, p.y} { // stored order: z intensity x y
					data = append(data, f(float64(v))...)
				}
			}
			in := "FIELDS z intensity x y\nSIZE " + strings.Repeat(size+" ", 4) + "\nTYPE " + strings.Repeat(typ+" ", 4) +
				"\nWIDTH " + strconv.Itoa(len(vals)) + "\nDATA binary\n" + string(data)
			got := readAll(t, in)
			if !equal(got, vals) {
				t.Errorf("got %v, want %v", got, vals)
			}
		})
	}
}

func equal(a, b []pt) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func readAll(t *testing.T, in string) []pt {
	t.Helper()
	br := bufio.NewReaderSize(strings.NewReader(in), testBufSize)
	h, err := ParseHeader(br)
	if err != nil {
		t.Fatal(err)
	}
	l, err := h.FindXYZI()
	if err != nil {
		t.Fatal(err)
	}
	dst := make([]byte, 16*h.Points)
	n, err := ReadPoints(br, &h, l, dst)
	if err != nil {
		t.Fatal(err)
	}
	return decode(dst, n)
}

func TestReadPoints(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []pt
	}{
		{"ascii with extra columns and no intensity",
			"FIELDS rgb x y z normal\nSIZE 4 4 4 4 4\nTYPE F F F F F\nCOUNT 1 1 1 1 3\nWIDTH 2\nDATA ascii\n" +
				"9 1 2 3 0 0 1\n9\t-1.5\t2.5e1\t0.125 0 0 1\n",
			[]pt{{1, 2, 3, 0}, {-1.5, 25, 0.125, 0}}},
		{"ascii organized cloud drops NaN points",
			"FIELDS x y z intensity\nSIZE 4 4 4 4\nTYPE F F F F\nWIDTH 2\nHEIGHT 2\nDATA ascii\n" +
				"1 1 1 1\nnan nan nan 0\n2 2 inf 0\n3 3 3 0.5",
			[]pt{{1, 1, 1, 1}, {3, 3, 3, 0.5}}},
		{"binary in slot layout is read in place",
			"FIELDS x y z intensity\nSIZE 4 4 4 4\nTYPE F F F F\nWIDTH 1\nDATA binary\n" +
				string(binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(
					binary.LittleEndian.AppendUint32(nil, math.Float32bits(1)), math.Float32bits(2)), math.Float32bits(3)), math.Float32bits(0.5))),
			[]pt{{1, 2, 3, 0.5}}},
		{"empty cloud", "FIELDS x y z\nSIZE 4 4 4\nTYPE F F F\nWIDTH 0\nDATA binary\n", []pt{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := readAll(t, tc.in); !equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestReadPointsErrors(t *testing.T) {
	tests := []struct {
		name, in, wantErr string
		dstPoints         int
	}{
		{"binary short", "FIELDS x y z\nSIZE 4 4 4\nTYPE F F F\nWIDTH 2\nDATA binary\n" + string(make([]byte, 20)), "binary data ends after 1 of 2 points (12-byte records)", 2},
		{"binary native short", "FIELDS x y z intensity\nSIZE 4 4 4 4\nTYPE F F F F\nWIDTH 2\nDATA binary\n" + string(make([]byte, 20)), "binary data ends after 1 of 2 points", 2},
		{"ascii short", "FIELDS x y z\nSIZE 4 4 4\nTYPE F F F\nWIDTH 3\nDATA ascii\n1 2 3\n", "ascii data ends after 1 of 3 points", 3},
		{"ascii too many values", "FIELDS x y z\nSIZE 4 4 4\nTYPE F F F\nWIDTH 1\nDATA ascii\n1 2 3 4\n", "has 4 values, the header declares 3", 1},
		{"ascii not a number", "FIELDS x y z\nSIZE 4 4 4\nTYPE F F F\nWIDTH 1\nDATA ascii\n1 2 z\n", `value 3 "z" is not a number`, 1},
		{"buffer too small", "FIELDS x y z\nSIZE 4 4 4\nTYPE F F F\nWIDTH 3\nDATA ascii\n", "3 points need 48 bytes, buffer has 32", 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			br := bufio.NewReaderSize(strings.NewReader(tc.in), testBufSize)
			h, err := ParseHeader(br)
			if err != nil {
				t.Fatal(err)
			}
			l, err := h.FindXYZI()
			if err != nil {
				t.Fatal(err)
			}
			_, err = ReadPoints(br, &h, l, make([]byte, 16*tc.dstPoints))
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func TestCompactFinite(t *testing.T) {
	le := binary.LittleEndian
	var b []byte
	for _, p := range []pt{{1, 2, 3, 4}, {float32(math.NaN()), 0, 0, 0}, {5, float32(math.Inf(1)), 6, 7}, {8, 9, 10, 11}} {
		for _, v := range []float32{p.x, p.y, p.z, p.i} {
			b = le.AppendUint32(b, math.Float32bits(v))
		}
	}
	n := CompactFinite(b)
	if got, want := decode(b, n), []pt{{1, 2, 3, 4}, {8, 9, 10, 11}}; !equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

// FuzzParseHeader checks that any input gives either an error or a
// consistent header, and that reading the data after a valid header never
// panics nor writes more points than the header declares.
func FuzzParseHeader(f *testing.F) {
	for _, tc := range headerCases {
		f.Add([]byte(tc.in))
	}
	f.Add([]byte("FIELDS x y z intensity\nSIZE 4 4 4 4\nTYPE F F F F\nWIDTH 2\nDATA ascii\n1 2 3 4\n5 6 7 8\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		br := bufio.NewReaderSize(bytes.NewReader(in), testBufSize)
		h, err := ParseHeader(br)
		if err != nil {
			if h.Fields != nil || h.Points != 0 {
				t.Fatalf("error %v with a non-zero header %+v", err, h)
			}
			return
		}
		if h.Points != h.Width*h.Height || h.Points < 0 || h.Points > MaxPoints {
			t.Fatalf("points %d, width %d, height %d", h.Points, h.Width, h.Height)
		}
		if h.Len > len(in) || (h.Data != DataASCII && h.Data != DataBinary) {
			t.Fatalf("len %d of %d, data %v", h.Len, len(in), h.Data)
		}
		off, col := 0, 0
		for _, fl := range h.Fields {
			if fl.Offset != off || fl.Column != col || fl.Count < 1 || (fl.Size != 1 && fl.Size != 2 && fl.Size != 4 && fl.Size != 8) {
				t.Fatalf("field %+v (want offset %d column %d)", fl, off, col)
			}
			off += fl.Size * fl.Count
			col += fl.Count
		}
		if off != h.RecordSize || col != h.Columns {
			t.Fatalf("record %d columns %d, fields sum to %d %d", h.RecordSize, h.Columns, off, col)
		}
		l, err := h.FindXYZI()
		if err != nil || h.Points > 1<<12 {
			return
		}
		dst := make([]byte, 16*h.Points+16)
		for i := range dst {
			dst[i] = 0xEE
		}
		n, err := ReadPoints(br, &h, l, dst[:16*h.Points])
		if err == nil && (n < 0 || n > h.Points) {
			t.Fatalf("read %d points of %d", n, h.Points)
		}
		if !bytes.Equal(dst[16*h.Points:], bytes.Repeat([]byte{0xEE}, 16)) {
			t.Fatal("ReadPoints wrote past the points it was given room for")
		}
	})
}
