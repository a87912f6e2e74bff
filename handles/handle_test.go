package handles

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestMarshalToWritesTheLayoutTable(t *testing.T) {
	for _, c := range handleCases() {
		if c.wire == "" {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			want := mustHex(t, c.wire)
			if len(want) != Size {
				t.Fatalf("case wire is %d bytes, want %d", len(want), Size)
			}
			var clean [Size]byte
			c.h.MarshalTo(&clean)
			if !bytes.Equal(clean[:], want) {
				t.Errorf("MarshalTo:\n got %x\nwant %x", clean, want)
			}
			// A reused buffer must come out the same: reserved bytes are
			// written, not left as they were.
			var dirty [Size]byte
			for i := range dirty {
				dirty[i] = 0xa5
			}
			c.h.MarshalTo(&dirty)
			if dirty != clean {
				t.Errorf("MarshalTo into a dirty buffer:\n got %x\nwant %x", dirty, clean)
			}
		})
	}
}

// poisonHandle is what h holds before a decode; a failed decode must leave
// it there.
var poisonHandle = Handle{Kind: 0x5a, Seq: 0xdeadbeef, FrameID: FrameID{'p', 'o', 'i', 's', 'o', 'n'}}

func checkFieldError(t *testing.T, err, wantErr error, wantField string) {
	t.Helper()
	if !errors.Is(err, wantErr) {
		t.Fatalf("err = %v, want %v", err, wantErr)
	}
	var fe *FieldError
	if !errors.As(err, &fe) {
		t.Fatalf("err %v (%T) is not a *FieldError", err, err)
	}
	if fe.Field != wantField {
		t.Errorf("FieldError.Field = %q, want %q (err: %v)", fe.Field, wantField, err)
	}
	for _, other := range decodeSentinels {
		if other != wantErr && errors.Is(err, other) {
			t.Errorf("err %v also matches %v; want exactly one class", err, other)
		}
	}
}

func TestDecodeChecksEveryField(t *testing.T) {
	for _, c := range handleCases() {
		t.Run(c.name, func(t *testing.T) {
			v := newTestValidator(t)
			h := poisonHandle
			err := v.Decode(&h, c.input())
			if c.err == nil {
				if err != nil {
					t.Fatalf("Decode: %v", err)
				}
				if h != c.h {
					t.Errorf("Decode:\n got %+v\nwant %+v", h, c.h)
				}
				return
			}
			checkFieldError(t, err, c.err, c.field)
			if h != poisonHandle {
				t.Errorf("failed Decode changed the handle to %+v", h)
			}
		})
	}
}

// Composed mode hands Handle values over without bytes; Validate must
// reach the same verdict as Decode for every case that is not a byte-level
// corruption.
func TestValidateAgreesWithDecode(t *testing.T) {
	for _, c := range handleCases() {
		if c.patch != nil {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			v := newTestValidator(t)
			h := c.h
			err := v.Validate(&h)
			if c.err == nil {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			checkFieldError(t, err, c.err, c.field)
		})
	}
}

func TestUnmarshalThenMarshalReproducesInput(t *testing.T) {
	accepted := 0
	for _, c := range handleCases() {
		in := c.input()
		var h Handle
		if err := h.Unmarshal(in); err != nil {
			continue
		}
		accepted++
		var out [Size]byte
		h.MarshalTo(&out)
		if !bytes.Equal(out[:], in) {
			t.Errorf("%s: re-encoded\n got %x\nwant %x", c.name, out, in)
		}
	}
	if accepted == 0 {
		t.Fatal("no case passed Unmarshal")
	}
}

// Unmarshal alone rejects what is wrong with the bytes, with no pools to
// consult: size, magic, version, reserved bytes and the frame id.
func TestUnmarshalChecksRecordLevelFields(t *testing.T) {
	for _, c := range handleCases() {
		recordLevel := c.err == ErrRecordSize || c.err == ErrBadMagic || c.err == ErrBadVersion ||
			c.err == ErrFrameID || (c.err == ErrReserved && c.patch != nil)
		t.Run(c.name, func(t *testing.T) {
			var h Handle
			err := h.Unmarshal(c.input())
			if !recordLevel {
				if err != nil {
					t.Fatalf("Unmarshal: %v; this case is for the validator", err)
				}
				return
			}
			checkFieldError(t, err, c.err, c.field)
		})
	}
}

func TestUnmarshalLeavesHandleOnError(t *testing.T) {
	for _, c := range handleCases() {
		h := poisonHandle
		if err := h.Unmarshal(c.input()); err != nil && h != poisonHandle {
			t.Errorf("%s: Unmarshal failed (%v) but changed the handle to %+v", c.name, err, h)
		}
	}
}

func TestEncodeDecodeAllocateNothing(t *testing.T) {
	v := newTestValidator(t)
	for _, c := range handleCases() {
		if c.err != nil {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			h := c.h
			in := c.input()
			var buf [Size]byte
			var out Handle
			for _, op := range []struct {
				name string
				fn   func()
			}{
				{"MarshalTo", func() { h.MarshalTo(&buf) }},
				{"Unmarshal", func() {
					if err := out.Unmarshal(in); err != nil {
						t.Fatal(err)
					}
				}},
				{"Validator.Decode", func() {
					if err := v.Decode(&out, in); err != nil {
						t.Fatal(err)
					}
				}},
				{"Validator.Validate", func() {
					if err := v.Validate(&h); err != nil {
						t.Fatal(err)
					}
				}},
			} {
				if n := testing.AllocsPerRun(100, op.fn); n != 0 {
					t.Errorf("%s: %v allocations per run, want 0", op.name, n)
				}
			}
		})
	}
}

func TestKindString(t *testing.T) {
	for _, c := range []struct {
		k    Kind
		want string
	}{{KindImage, "image"}, {KindPoints, "points"}, {0, "Kind(0)"}, {9, "Kind(9)"}} {
		if got := c.k.String(); got != c.want {
			t.Errorf("Kind(%d).String() = %q, want %q", uint8(c.k), got, c.want)
		}
	}
}

func TestEncodingNamesAndPixelSizes(t *testing.T) {
	for _, c := range []struct {
		e    Encoding
		name string
		bpp  uint64
	}{
		{EncodingRGB8, "rgb8", 3},
		{EncodingBGR8, "bgr8", 3},
		{EncodingMono8, "mono8", 1},
		{EncodingRGBA8, "rgba8", 4},
		{EncodingBGRA8, "bgra8", 4},
		{0, "Encoding(0)", 0},
		{6, "Encoding(6)", 0},
	} {
		if got := c.e.String(); got != c.name {
			t.Errorf("Encoding(%d).String() = %q, want %q", uint8(c.e), got, c.name)
		}
		if got := c.e.BytesPerPixel(); got != c.bpp {
			t.Errorf("%v.BytesPerPixel() = %d, want %d", c.e, got, c.bpp)
		}
		got, err := ParseEncoding(c.name)
		if c.bpp == 0 {
			if !errors.Is(err, ErrEncoding) {
				t.Errorf("ParseEncoding(%q) = %v, %v; want ErrEncoding", c.name, got, err)
			}
			continue
		}
		if err != nil || got != c.e {
			t.Errorf("ParseEncoding(%q) = %v, %v; want %v", c.name, got, err, c.e)
		}
	}
}

func TestFrameID(t *testing.T) {
	for _, c := range []struct {
		name  string
		in    string
		err   error
		field string
	}{
		{name: "empty", in: ""},
		{name: "typical", in: "base_link"},
		{name: "exactly 16 bytes", in: "cam_left_optical"},
		{name: "with space and punctuation", in: "map /odom~"},
		{name: "17 bytes", in: "cam_right_optical", err: ErrFrameID, field: "frame_id length"},
		{name: "tab", in: "a\tb", err: ErrFrameID, field: "frame_id[1]"},
		{name: "embedded NUL", in: "a\x00b", err: ErrFrameID, field: "frame_id[2]"},
		{name: "UTF-8", in: "kamera_ä", err: ErrFrameID, field: "frame_id[7]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, err := NewFrameID(c.in)
			if c.err != nil {
				checkFieldError(t, err, c.err, c.field)
				if f != (FrameID{}) {
					t.Errorf("NewFrameID returned %q with an error", f[:])
				}
				return
			}
			if err != nil {
				t.Fatalf("NewFrameID(%q): %v", c.in, err)
			}
			if got := f.String(); got != c.in {
				t.Errorf("String() = %q, want %q", got, c.in)
			}
		})
	}
}

func TestFieldErrorMessages(t *testing.T) {
	v := newTestValidator(t)
	for _, c := range []struct {
		name string
		in   func() []byte
		want string
	}{
		{
			name: "slot out of range names value and bound",
			in: func() []byte {
				h := image(func(h *Handle) { h.Slot = 4 })
				var b [Size]byte
				h.MarshalTo(&b)
				return b[:]
			},
			want: "handle slot = 4, want < 4: handles: slot index out of range",
		},
		{
			name: "magic is shown in hex",
			in: func() []byte {
				var b [Size]byte
				b[0] = 'X'
				return b[:]
			},
			want: "handle magic = 0x58, want == 0x4e48485a: handles: bad magic",
		},
		{
			name: "unknown pool has no bound",
			in: func() []byte {
				h := image(func(h *Handle) { h.PoolID = 77 })
				var b [Size]byte
				h.MarshalTo(&b)
				return b[:]
			},
			want: "handle pool_id = 77: handles: unknown pool",
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			var h Handle
			err := v.Decode(&h, c.in())
			if err == nil || err.Error() != c.want {
				t.Errorf("error = %v\n want %s", err, c.want)
			}
		})
	}
}

// decodeSentinels are the classes a received record can be rejected with.
var decodeSentinels = []error{
	ErrRecordSize, ErrBadMagic, ErrBadVersion, ErrReserved, ErrFrameID, ErrUnknownPool,
	ErrKind, ErrEncoding, ErrIndexRange, ErrLength, ErrGeometry,
}

func TestCaseTableCoversEveryClass(t *testing.T) {
	seen := map[error]int{}
	valid := map[Kind]int{}
	for _, c := range handleCases() {
		if c.err == nil {
			valid[c.h.Kind]++
			continue
		}
		seen[c.err]++
	}
	for _, s := range decodeSentinels {
		if seen[s] == 0 {
			t.Errorf("no invalid handle case for %v", s)
		}
	}
	for _, k := range []Kind{KindImage, KindPoints} {
		if valid[k] == 0 {
			t.Errorf("no valid %v handle case", k)
		}
	}
	names := map[string]bool{}
	for _, c := range handleCases() {
		if names[c.name] {
			t.Errorf("case name %q used twice", c.name)
		}
		names[c.name] = true
		if strings.TrimSpace(c.name) != c.name || c.name == "" {
			t.Errorf("case name %q has stray spaces", c.name)
		}
	}
}

func BenchmarkMarshalTo(b *testing.B) {
	h := imageHandle()
	var buf [Size]byte
	b.ReportAllocs()
	for b.Loop() {
		h.MarshalTo(&buf)
	}
}

func BenchmarkDecode(b *testing.B) {
	for _, h := range []Handle{imageHandle(), pointsHandle()} {
		b.Run(h.Kind.String(), func(b *testing.B) {
			v := newTestValidator(b)
			var buf [Size]byte
			h.MarshalTo(&buf)
			var out Handle
			b.ReportAllocs()
			for b.Loop() {
				if err := v.Decode(&out, buf[:]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// A rejection costs one allocation, its *FieldError: a hostile peer that
// sends only bad records cannot make the receiver allocate more.
func TestRejectionAllocatesOnlyItsError(t *testing.T) {
	v := newTestValidator(t)
	for _, c := range handleCases() {
		if c.err == nil {
			continue
		}
		in := c.input()
		var h Handle
		if n := testing.AllocsPerRun(20, func() { _ = v.Decode(&h, in) }); n > 1 {
			t.Errorf("%s: %v allocations per rejection, want ≤ 1", c.name, n)
		}
	}
	for _, c := range releaseCases() {
		if c.err == nil {
			continue
		}
		in := c.input()
		var r Release
		if n := testing.AllocsPerRun(20, func() { _ = v.DecodeRelease(&r, in) }); n > 1 {
			t.Errorf("release %s: %v allocations per rejection, want ≤ 1", c.name, n)
		}
	}
}
