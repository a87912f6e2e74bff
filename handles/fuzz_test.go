package handles

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var updateSeeds = flag.Bool("update", false, "rewrite the seed corpus in testdata/fuzz from the case tables")

// acceptedWithinGeometry is the fuzz oracle: an independent statement,
// in arbitrary-precision arithmetic, of what an accepted handle
// guarantees. It returns why h is out of bounds, or "".
func acceptedWithinGeometry(h *Handle, pools []Geometry) string {
	var g *Geometry
	for i := range pools {
		if pools[i].PoolID == h.PoolID {
			g = &pools[i]
		}
	}
	if g == nil {
		return fmt.Sprintf("pool %d not announced", h.PoolID)
	}
	if h.Kind != g.Kind {
		return fmt.Sprintf("kind %v on a %v pool", h.Kind, g.Kind)
	}
	if h.Slot >= g.SlotCount {
		return fmt.Sprintf("slot %d of %d", h.Slot, g.SlotCount)
	}
	if h.Length > g.SlotCapacity {
		return fmt.Sprintf("payload [0,%d) outside slot of %d bytes", h.Length, g.SlotCapacity)
	}
	n := func(x uint64) *big.Int { return new(big.Int).SetUint64(x) }
	length := n(h.Length)
	for _, c := range h.FrameID {
		if c != 0 && (c < ' ' || c > '~') {
			return fmt.Sprintf("frame id byte %#x", c)
		}
	}
	if !strings.HasPrefix(string(h.FrameID[:]), h.FrameID.String()) ||
		strings.Trim(string(h.FrameID[len(h.FrameID.String()):]), "\x00") != "" {
		return fmt.Sprintf("frame id %q not NUL-padded", h.FrameID[:])
	}
	switch h.Kind {
	case KindImage:
		im := h.Image
		if h.Points != (PointFormat{}) {
			return "point section set on an image"
		}
		var bpp int64
		switch im.Encoding {
		case EncodingMono8:
			bpp = 1
		case EncodingRGB8, EncodingBGR8:
			bpp = 3
		case EncodingRGBA8, EncodingBGRA8:
			bpp = 4
		default:
			return fmt.Sprintf("encoding %d", im.Encoding)
		}
		if im.Width == 0 || im.Height == 0 {
			return "empty image"
		}
		// The last byte read is that of the last pixel of the last row.
		last := new(big.Int).Mul(n(uint64(im.Height-1)), n(uint64(im.RowStep)))
		last.Add(last, new(big.Int).Mul(n(uint64(im.Width)), big.NewInt(bpp)))
		if last.Cmp(length) > 0 {
			return fmt.Sprintf("image reads up to byte %v of %v", last, length)
		}
		if n(uint64(im.RowStep)).Cmp(new(big.Int).Mul(n(uint64(im.Width)), big.NewInt(bpp))) < 0 {
			return "rows overlap"
		}
		if new(big.Int).Mul(n(uint64(im.Height)), n(uint64(im.RowStep))).Cmp(length) > 0 {
			return "rows past length"
		}
	case KindPoints:
		p := h.Points
		if h.Image != (ImageFormat{}) {
			return "image section set on points"
		}
		if p.Datatype != DatatypeFloat32 {
			return fmt.Sprintf("datatype %d", p.Datatype)
		}
		for _, off := range []uint16{p.X, p.Y, p.Z, p.Intensity} {
			if int64(off)+4 > int64(p.Step) {
				return fmt.Sprintf("field at %d outside point of %d bytes", off, p.Step)
			}
		}
		if new(big.Int).Mul(n(uint64(p.Count)), n(uint64(p.Step))).Cmp(length) > 0 {
			return "points past length"
		}
	default:
		return fmt.Sprintf("kind %d", h.Kind)
	}
	return ""
}

// FuzzDecode: Validator.Decode either rejects a datagram with exactly one
// class of error, leaving the handle and the accepted count alone, or
// accepts a handle that lies within its pool and re-encodes to the input.
// It never panics. The seeds in testdata/fuzz/FuzzDecode come from
// handleCases (see TestFuzzSeedsMatchCaseTables).
func FuzzDecode(f *testing.F) {
	v := newTestValidator(f)
	f.Fuzz(func(t *testing.T, in []byte) {
		before := v.Stats()
		h := poisonHandle
		err := v.Decode(&h, in)
		after := v.Stats()

		var u Handle
		if uerr := u.Unmarshal(in); uerr == nil {
			var out [Size]byte
			u.MarshalTo(&out)
			if !bytes.Equal(out[:], in) {
				t.Fatalf("Unmarshal accepted %x but re-encodes to %x", in, out)
			}
		} else if err == nil {
			t.Fatalf("Decode accepted what Unmarshal rejects (%v)", uerr)
		}

		if err != nil {
			if h != poisonHandle {
				t.Fatalf("Decode failed (%v) and changed the handle to %+v", err, h)
			}
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v (%T) is not a *FieldError", err, err)
			}
			matched := 0
			for _, s := range decodeSentinels {
				if errors.Is(err, s) {
					matched++
				}
			}
			if matched != 1 {
				t.Fatalf("error %v matches %d classes, want 1", err, matched)
			}
			_ = err.Error() // must not panic
			if after.Handles != before.Handles || after.Rejected() != before.Rejected()+1 {
				t.Fatalf("rejection counted as %+v -> %+v", before, after)
			}
			if *statsFor(&after, err) != *statsFor(&before, err)+1 {
				t.Fatalf("rejection %v not counted in its class", err)
			}
			return
		}
		if why := acceptedWithinGeometry(&h, testPools); why != "" {
			t.Fatalf("Decode accepted %+v: %s", h, why)
		}
		if after.Handles != before.Handles+1 || after.Rejected() != before.Rejected() {
			t.Fatalf("acceptance counted as %+v -> %+v", before, after)
		}
		var out [Size]byte
		h.MarshalTo(&out)
		if !bytes.Equal(out[:], in) {
			t.Fatalf("accepted %x re-encodes to %x", in, out)
		}
	})
}

// FuzzRelease is FuzzDecode for releases.
func FuzzRelease(f *testing.F) {
	v := newTestValidator(f)
	f.Fuzz(func(t *testing.T, in []byte) {
		before := v.Stats()
		r := poisonRelease
		err := v.DecodeRelease(&r, in)
		after := v.Stats()
		if err != nil {
			if r != poisonRelease {
				t.Fatalf("DecodeRelease failed (%v) and changed the release to %+v", err, r)
			}
			matched := 0
			for _, s := range decodeSentinels {
				if errors.Is(err, s) {
					matched++
				}
			}
			if matched != 1 {
				t.Fatalf("error %v matches %d classes, want 1", err, matched)
			}
			_ = err.Error()
			if after.Releases != before.Releases || after.Rejected() != before.Rejected()+1 {
				t.Fatalf("rejection counted as %+v -> %+v", before, after)
			}
			return
		}
		g, ok := v.Pool(r.PoolID)
		if !ok || r.Slot >= g.SlotCount {
			t.Fatalf("DecodeRelease accepted %+v outside the pools %+v", r, testPools)
		}
		if after.Releases != before.Releases+1 {
			t.Fatalf("acceptance counted as %+v -> %+v", before, after)
		}
		var out [ReleaseSize]byte
		r.MarshalTo(&out)
		if !bytes.Equal(out[:], in) {
			t.Fatalf("accepted %x re-encodes to %x", in, out)
		}
	})
}

var nonWord = regexp.MustCompile(`[^a-z0-9]+`)

func seedFileName(caseName string) string {
	return "seed-" + strings.Trim(nonWord.ReplaceAllString(strings.ToLower(caseName), "-"), "-")
}

// corpusFile is Go's fuzz corpus format for one []byte argument. Bytes
// outside printable ASCII are written as \xNN, so that reviewers see the
// bytes rather than whatever UTF-8 they happen to spell.
func corpusFile(in []byte) string {
	var b strings.Builder
	b.WriteString("go test fuzz v1\n[]byte(\"")
	for _, c := range in {
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c >= ' ' && c <= '~':
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "\\x%02x", c)
		}
	}
	b.WriteString("\")\n")
	return b.String()
}

// TestFuzzSeedsMatchCaseTables keeps the committed seed corpus equal to the
// case tables; `go test ./handles -run TestFuzzSeeds -update` rewrites it.
// Files not named seed-* (inputs the fuzzer found) are left alone.
func TestFuzzSeedsMatchCaseTables(t *testing.T) {
	seeds := map[string]map[string][]byte{"FuzzDecode": {}, "FuzzRelease": {}}
	for _, c := range handleCases() {
		seeds["FuzzDecode"][seedFileName(c.name)] = c.input()
	}
	for _, c := range releaseCases() {
		seeds["FuzzRelease"][seedFileName(c.name)] = c.input()
	}
	if len(seeds["FuzzDecode"]) != len(handleCases()) || len(seeds["FuzzRelease"]) != len(releaseCases()) {
		t.Fatal("two cases map to the same seed file name")
	}
	for target, files := range seeds {
		dir := filepath.Join("testdata", "fuzz", target)
		if *updateSeeds {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			old, _ := filepath.Glob(filepath.Join(dir, "seed-*"))
			for _, p := range old {
				if err := os.Remove(p); err != nil {
					t.Fatal(err)
				}
			}
		}
		for name, in := range files {
			path := filepath.Join(dir, name)
			want := corpusFile(in)
			if *updateSeeds {
				if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Errorf("seed %s missing (run go test ./handles -run TestFuzzSeeds -update): %v", path, err)
				continue
			}
			if string(got) != want {
				t.Errorf("seed %s differs from its case (run go test ./handles -run TestFuzzSeeds -update)", path)
			}
		}
		stale, _ := filepath.Glob(filepath.Join(dir, "seed-*"))
		for _, p := range stale {
			if _, ok := files[filepath.Base(p)]; !ok {
				t.Errorf("seed %s has no case (run go test ./handles -run TestFuzzSeeds -update)", p)
			}
		}
	}
}
