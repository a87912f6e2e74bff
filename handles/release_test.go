package handles

import (
	"bytes"
	"testing"
)

func TestReleaseMarshalToWritesTheLayoutTable(t *testing.T) {
	for _, c := range releaseCases() {
		if c.wire == "" {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			want := mustHex(t, c.wire)
			var dirty [ReleaseSize]byte
			for i := range dirty {
				dirty[i] = 0xa5
			}
			c.r.MarshalTo(&dirty)
			if !bytes.Equal(dirty[:], want) {
				t.Errorf("MarshalTo:\n got %x\nwant %x", dirty, want)
			}
		})
	}
}

var poisonRelease = Release{PoolID: 0xdead, Slot: 0xbeef, Generation: 0xfeed}

func TestDecodeReleaseChecksEveryField(t *testing.T) {
	for _, c := range releaseCases() {
		t.Run(c.name, func(t *testing.T) {
			v := newTestValidator(t)
			r := poisonRelease
			err := v.DecodeRelease(&r, c.input())
			if c.err == nil {
				if err != nil {
					t.Fatalf("DecodeRelease: %v", err)
				}
				if r != c.r {
					t.Errorf("DecodeRelease = %+v, want %+v", r, c.r)
				}
				return
			}
			checkFieldError(t, err, c.err, c.field)
			if r != poisonRelease {
				t.Errorf("failed DecodeRelease changed the release to %+v", r)
			}
		})
	}
}

// Release.Validate checks against one pool's geometry: the pool the
// camera looked up itself.
func TestReleaseValidateAgainstOnePool(t *testing.T) {
	g := testPools[0]
	for _, c := range []struct {
		name  string
		r     Release
		err   error
		field string
	}{
		{name: "first slot", r: Release{PoolID: g.PoolID, Slot: 0}},
		{name: "last slot", r: Release{PoolID: g.PoolID, Slot: g.SlotCount - 1, Generation: 5}},
		{name: "slot count", r: Release{PoolID: g.PoolID, Slot: g.SlotCount}, err: ErrIndexRange, field: "slot"},
		{name: "other pool", r: Release{PoolID: g.PoolID + 1, Slot: 0}, err: ErrUnknownPool, field: "pool_id"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.r.Validate(g)
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

func TestReleaseAllocatesNothing(t *testing.T) {
	v := newTestValidator(t)
	for _, c := range releaseCases() {
		if c.err != nil {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			r := c.r
			in := c.input()
			var buf [ReleaseSize]byte
			var out Release
			g, _ := v.Pool(r.PoolID)
			for _, op := range []struct {
				name string
				fn   func()
			}{
				{"MarshalTo", func() { r.MarshalTo(&buf) }},
				{"Unmarshal", func() {
					if err := out.Unmarshal(in); err != nil {
						t.Fatal(err)
					}
				}},
				{"Validate", func() {
					if err := r.Validate(g); err != nil {
						t.Fatal(err)
					}
				}},
				{"Validator.DecodeRelease", func() {
					if err := v.DecodeRelease(&out, in); err != nil {
						t.Fatal(err)
					}
				}},
				{"Validator.ValidateRelease", func() {
					if err := v.ValidateRelease(&r); err != nil {
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

func TestReleaseCaseTableCoversEveryClass(t *testing.T) {
	seen := map[error]bool{}
	valid := 0
	for _, c := range releaseCases() {
		if c.err == nil {
			valid++
		}
		seen[c.err] = true
	}
	for _, s := range []error{ErrRecordSize, ErrBadMagic, ErrBadVersion, ErrReserved, ErrUnknownPool, ErrIndexRange} {
		if !seen[s] {
			t.Errorf("no invalid release case for %v", s)
		}
	}
	if valid == 0 {
		t.Error("no valid release case")
	}
}
