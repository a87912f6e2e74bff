package handles

import (
	"errors"
	"sync"
	"testing"
)

func TestNewValidatorRejectsBadPools(t *testing.T) {
	img := Geometry{PoolID: 1, SlotCount: 2, SlotCapacity: 100, Kind: KindImage}
	nine := make([]Geometry, MaxPools+1)
	for i := range nine {
		nine[i] = img
		nine[i].PoolID = uint32(i)
	}
	for _, c := range []struct {
		name  string
		pools []Geometry
	}{
		{"unknown kind", []Geometry{{PoolID: 1, SlotCount: 2, SlotCapacity: 100}}},
		{"no slots", []Geometry{{PoolID: 1, SlotCapacity: 100, Kind: KindImage}}},
		{"zero capacity", []Geometry{{PoolID: 1, SlotCount: 2, Kind: KindPoints}}},
		{"duplicate id", []Geometry{img, {PoolID: 1, SlotCount: 1, SlotCapacity: 1, Kind: KindPoints}}},
		{"more than MaxPools", nine},
	} {
		t.Run(c.name, func(t *testing.T) {
			v, err := NewValidator(c.pools...)
			if !errors.Is(err, ErrPoolConfig) || v != nil {
				t.Errorf("NewValidator = %v, %v; want nil, ErrPoolConfig", v, err)
			}
		})
	}
	if _, err := NewValidator(nine[:MaxPools]...); err != nil {
		t.Errorf("NewValidator with MaxPools pools: %v", err)
	}
}

func TestPoolLookup(t *testing.T) {
	v := newTestValidator(t)
	for _, want := range testPools {
		got, ok := v.Pool(want.PoolID)
		if !ok || got != want {
			t.Errorf("Pool(%d) = %+v, %v; want %+v, true", want.PoolID, got, ok, want)
		}
	}
	// The unused entries of the fixed table are zero; id 0 must not match them.
	if g, ok := v.Pool(0); ok {
		t.Errorf("Pool(0) = %+v, true; want not found", g)
	}
}

// statsFor returns the counter of s that counts err's class.
func statsFor(s *Stats, err error) *uint64 {
	for _, c := range []struct {
		err error
		n   *uint64
	}{
		{ErrRecordSize, &s.RecordSize}, {ErrBadMagic, &s.BadMagic}, {ErrBadVersion, &s.BadVersion},
		{ErrReserved, &s.Reserved}, {ErrFrameID, &s.FrameID}, {ErrUnknownPool, &s.UnknownPool},
		{ErrKind, &s.Kind}, {ErrEncoding, &s.Encoding}, {ErrIndexRange, &s.IndexRange},
		{ErrLength, &s.Length}, {ErrGeometry, &s.Geometry}, {ErrChecksum, &s.Checksum},
	} {
		if errors.Is(err, c.err) {
			return c.n
		}
	}
	return nil
}

func TestStatsCountEveryOutcome(t *testing.T) {
	v := newTestValidator(t)
	var want Stats
	for _, c := range handleCases() {
		var h Handle
		err := v.Decode(&h, c.input())
		if c.err == nil {
			want.Handles++
		} else {
			*statsFor(&want, c.err)++
		}
		if !errors.Is(err, c.err) && !(err == nil && c.err == nil) {
			t.Fatalf("%s: Decode = %v, want %v", c.name, err, c.err)
		}
	}
	for _, c := range releaseCases() {
		var r Release
		if err := v.DecodeRelease(&r, c.input()); !errors.Is(err, c.err) && !(err == nil && c.err == nil) {
			t.Fatalf("%s: DecodeRelease = %v, want %v", c.name, err, c.err)
		}
		if c.err == nil {
			want.Releases++
		} else {
			*statsFor(&want, c.err)++
		}
	}
	if got := v.Stats(); got != want {
		t.Errorf("Stats:\n got %+v\nwant %+v", got, want)
	}
	invalid := uint64(0)
	for _, c := range handleCases() {
		if c.err != nil {
			invalid++
		}
	}
	for _, c := range releaseCases() {
		if c.err != nil {
			invalid++
		}
	}
	if got := v.Stats().Rejected(); got != invalid {
		t.Errorf("Rejected() = %d, want %d invalid cases", got, invalid)
	}
}

// Run with -race: counters and the pool table are shared by all receivers.
func TestValidatorConcurrentUse(t *testing.T) {
	v := newTestValidator(t)
	cases := handleCases()
	const workers, rounds = 4, 50
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range rounds {
				for _, c := range cases {
					var h Handle
					_ = v.Decode(&h, c.input())
				}
			}
		})
	}
	wg.Wait()
	valid := uint64(0)
	for _, c := range cases {
		if c.err == nil {
			valid++
		}
	}
	s := v.Stats()
	if want := valid * workers * rounds; s.Handles != want {
		t.Errorf("Handles = %d, want %d", s.Handles, want)
	}
	if want := uint64(len(cases)-int(valid)) * workers * rounds; s.Rejected() != want {
		t.Errorf("Rejected() = %d, want %d", s.Rejected(), want)
	}
}

func TestVerifyPayload(t *testing.T) {
	payload := make([]byte, 4096)
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	sum := PayloadChecksum(payload[:1000])
	if sum == 0 {
		t.Fatal("PayloadChecksum returned 0, which means no checksum")
	}
	if PayloadChecksum(payload[:999]) == sum {
		t.Fatal("PayloadChecksum ignores the last byte")
	}
	for _, c := range []struct {
		name     string
		checksum uint64
		length   uint64
		payload  []byte
		err      error
	}{
		{name: "no checksum", checksum: 0, length: 1000, payload: nil},
		{name: "match", checksum: sum, length: 1000, payload: payload},
		{name: "match on a longer buffer", checksum: sum, length: 1000, payload: payload[:1000:1000]},
		{name: "one bit flipped", checksum: sum ^ 1, length: 1000, payload: payload, err: ErrChecksum},
		{name: "payload shorter than length", checksum: sum, length: 1000, payload: payload[:999], err: ErrLength},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := newTestValidator(t)
			h := Handle{Checksum: c.checksum, Length: c.length}
			err := v.VerifyPayload(&h, c.payload)
			if !errors.Is(err, c.err) || (c.err == nil && err != nil) {
				t.Fatalf("VerifyPayload = %v, want %v", err, c.err)
			}
			var want Stats
			if c.err != nil {
				*statsFor(&want, c.err) = 1
			}
			if got := v.Stats(); got != want {
				t.Errorf("Stats = %+v, want %+v", got, want)
			}
			if c.err == nil {
				if n := testing.AllocsPerRun(20, func() { _ = v.VerifyPayload(&h, c.payload) }); n != 0 {
					t.Errorf("VerifyPayload: %v allocations per run, want 0", n)
				}
			}
		})
	}
}

// A handle passed in-process (never marshalled) with a flag this version
// does not define is refused as Unmarshal refuses it on the wire; the
// planar flag passes.
func TestValidateRefusesUndefinedPointFlags(t *testing.T) {
	v := newTestValidator(t)
	for _, tc := range []struct {
		flags PointFlags
		ok    bool
	}{{0, true}, {PointsPlanar, true}, {2, false}, {PointsPlanar | 0x80, false}} {
		h := pointsHandle()
		h.Points.Flags = tc.flags
		err := v.Validate(&h)
		if tc.ok != (err == nil) {
			t.Errorf("flags %#x: %v", tc.flags, err)
		}
		if !tc.ok {
			checkFieldError(t, err, ErrReserved, "points.flags")
		}
	}
}
