//go:build ros2 && cgo

package ros2

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math"
	"strconv"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/zerohop/zerohop/planner"
)

// cdr builds XCDR1 little-endian payloads by hand, independently of
// Cyclone, to check what goes on the wire.
type cdr struct{ b []byte }

func newCDR() *cdr { return &cdr{b: []byte{0x00, 0x01, 0x00, 0x00}} } // CDR_LE encapsulation

// align pads to n bytes from the start of the payload (after the header).
func (c *cdr) align(n int) {
	for (len(c.b)-4)%n != 0 {
		c.b = append(c.b, 0)
	}
}
func (c *cdr) u8(v uint8)    { c.b = append(c.b, v) }
func (c *cdr) u16(v uint16)  { c.align(2); c.b = binary.LittleEndian.AppendUint16(c.b, v) }
func (c *cdr) u32(v uint32)  { c.align(4); c.b = binary.LittleEndian.AppendUint32(c.b, v) }
func (c *cdr) u64(v uint64)  { c.align(8); c.b = binary.LittleEndian.AppendUint64(c.b, v) }
func (c *cdr) f64(v float64) { c.u64(math.Float64bits(v)) }

// done pads the payload to a multiple of 4 bytes and records the padding
// in the low bits of the encapsulation options, as Cyclone does (DDS-XTypes
// 1.3, 7.6.3.1.2); readers ignore it.
func (c *cdr) done() []byte {
	pad := (4 - (len(c.b)-4)%4) % 4
	c.b = append(c.b, make([]byte, pad)...)
	c.b[3] = byte(pad)
	return c.b
}

func (c *cdr) str(s string) {
	c.u32(uint32(len(s) + 1))
	c.b = append(append(c.b, s...), 0)
}

func parseHexFloat(t *testing.T, s string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("peer printed %q: %v", s, err)
	}
	return v
}

func TestTwistOnTheWire(t *testing.T) {
	cfg := loopbackConfig(t)
	sink := newTwistSink(t, cfg, zaptest.NewLogger(t))
	peer := startPeer(t, cfg, "sub", "twist", "rt/cmd_vel", "reliable", "1")
	peer.expect("MATCHED")
	waitFor(t, "the publisher to match the peer", func() bool { return sink.Matched() == 1 })
	checkPublication(t, peer, typeTwist, "RELIABLE", 10)
	if err := sink.PublishTwist(planner.Twist{LinearX: 1.5, AngularZ: -0.25}, time.Now()); err != nil {
		t.Fatal(err)
	}
	raw, err := hex.DecodeString(peer.expect("CDR"))
	if err != nil {
		t.Fatal(err)
	}
	sample := fields(peer.expect("SAMPLE"))

	want := newCDR()
	for _, v := range []float64{1.5, 0, 0, 0, 0, -0.25} {
		want.f64(v)
	}
	if len(raw) != 52 || string(raw) != string(want.done()) {
		t.Errorf("payload (%d bytes)\n got %x\nwant %x", len(raw), raw, want.b)
	}
	// The same, spelled out: CDR_LE header, then linear.x = 1.5,
	// linear.y, linear.z, angular.x, angular.y = 0, angular.z = -0.25.
	const spelled = "00010000" + "000000000000f83f" + "0000000000000000" + "0000000000000000" +
		"0000000000000000" + "0000000000000000" + "000000000000d0bf"
	if hex.EncodeToString(raw) != spelled {
		t.Errorf("payload %x, want %s", raw, spelled)
	}
	for k, v := range map[string]float64{"lx": 1.5, "ly": 0, "lz": 0, "ax": 0, "ay": 0, "az": -0.25} {
		if got := parseHexFloat(t, sample[k]); got != v || math.Signbit(got) != math.Signbit(v) {
			t.Errorf("sample %s = %v, want %v", k, got, v)
		}
	}
}

// checkPublication checks what a ROS node learns about our writer from
// discovery: type name, QoS, endpoint USER_DATA, participant USER_DATA.
func checkPublication(t *testing.T, peer *peer, typ msgType, reliability string, depth int) {
	t.Helper()
	pub := fields(peer.expect("PUBLICATION"))
	hash, err := registry(t).Hash(typ.rosName()) // computed, not the constant under test
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"type": typ.ddsName(), "reliability": reliability, "durability": "VOLATILE",
		"history": "KEEP_LAST", "depth": strconv.Itoa(depth), "representation": "XCDR1",
		"userdata": "typehash=" + hash + ";",
	}
	for k, v := range want {
		if pub[k] != v {
			t.Errorf("publication %s = %q, want %q", k, pub[k], v)
		}
	}
	if part := fields(peer.expect("PARTICIPANT")); part["userdata"] != "enclave=/;" {
		t.Errorf("participant USER_DATA = %q, want %q", part["userdata"], "enclave=/;")
	}
}

func TestTwistStampedOnTheWire(t *testing.T) {
	cfg := loopbackConfig(t)
	p, err := NewParticipant(cfg, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	sink, err := p.NewTwistSink(TwistOptions{Topic: "/robot1/cmd_vel", Stamped: true, FrameID: "base_footprint"})
	if err != nil {
		t.Fatal(err)
	}
	peer := startPeer(t, cfg, "sub", "twist_stamped", "rt/robot1/cmd_vel", "reliable", "2")
	peer.expect("MATCHED")
	waitFor(t, "the publisher to match the peer", func() bool { return sink.Matched() == 1 })
	checkPublication(t, peer, typeTwistStamped, "RELIABLE", 10)

	cases := []struct {
		stamp   time.Time
		sec     int32
		nanosec uint32
	}{
		{time.Unix(1700000000, 500000000), 1700000000, 500000000},
		{time.Time{}, 0, 0}, // no stamp: controllers read it as "now"
	}
	for _, c := range cases {
		if err := sink.PublishTwist(planner.Twist{LinearX: 0.75, AngularZ: 0.5}, c.stamp); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range cases {
		raw, err := hex.DecodeString(peer.expect("CDR"))
		if err != nil {
			t.Fatal(err)
		}
		want := newCDR()
		want.u32(uint32(c.sec))
		want.u32(c.nanosec)
		want.str("base_footprint")
		for _, v := range []float64{0.75, 0, 0, 0, 0, 0.5} {
			want.f64(v)
		}
		if string(raw) != string(want.done()) {
			t.Errorf("stamp %v: payload\n got %x\nwant %x", c.stamp, raw, want.b)
		}
		s := fields(peer.expect("SAMPLE"))
		if s["sec"] != strconv.Itoa(int(c.sec)) || s["nanosec"] != strconv.Itoa(int(c.nanosec)) ||
			s["frame_id"] != "base_footprint" || parseHexFloat(t, s["lx"]) != 0.75 || parseHexFloat(t, s["az"]) != 0.5 {
			t.Errorf("stamp %v: sample %v", c.stamp, s)
		}
	}
}

// ZeroStamp (--twist-stamp zero): every command goes out with header.stamp
// {0, 0}, whatever stamp the agent passes, so that the controller stamps it
// on arrival with its own (simulation) clock.
func TestTwistStampedZeroStamp(t *testing.T) {
	cfg := loopbackConfig(t)
	p, err := NewParticipant(cfg, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, err := p.NewTwistSink(TwistOptions{Topic: "/unstamped", ZeroStamp: true}); err == nil {
		t.Fatal("a zero stamp for plain Twist was accepted")
	}
	sink, err := p.NewTwistSink(TwistOptions{Topic: "/cmd_vel", Stamped: true, ZeroStamp: true})
	if err != nil {
		t.Fatal(err)
	}
	peer := startPeer(t, cfg, "sub", "twist_stamped", "rt/cmd_vel", "reliable", "1")
	peer.expect("MATCHED")
	waitFor(t, "the publisher to match the peer", func() bool { return sink.Matched() == 1 })
	if err := sink.PublishTwist(planner.Twist{LinearX: 0.25}, time.Unix(1700000000, 5)); err != nil {
		t.Fatal(err)
	}
	if s := fields(peer.expect("SAMPLE")); s["sec"] != "0" || s["nanosec"] != "0" || parseHexFloat(t, s["lx"]) != 0.25 {
		t.Fatalf("sample %v; want stamp 0.0 and linear.x 0.25", s)
	}
}

// A non-finite command never reaches the robot: zero goes out instead.
func TestNonFiniteTwistPublishesZero(t *testing.T) {
	cfg := loopbackConfig(t)
	p, err := NewParticipant(cfg, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	sink, err := p.NewTwistSink(TwistOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cases := []planner.Twist{
		{LinearX: math.NaN(), AngularZ: 0.1},
		{LinearX: 0.5, AngularZ: math.Inf(1)},
		{LinearX: math.Inf(-1), AngularZ: math.NaN()},
	}
	peer := startPeer(t, cfg, "sub", "twist", "rt/cmd_vel", "reliable", strconv.Itoa(len(cases)))
	peer.expect("MATCHED")
	waitFor(t, "the publisher to match the peer", func() bool { return sink.Matched() == 1 })
	for _, c := range cases {
		if err := sink.PublishTwist(c, time.Now()); !errors.Is(err, planner.ErrNonFinite) {
			t.Errorf("PublishTwist(%+v) = %v, want ErrNonFinite", c, err)
		}
	}
	zero := newCDR()
	for range 6 {
		zero.f64(0)
	}
	for _, c := range cases {
		raw, _ := hex.DecodeString(peer.expect("CDR"))
		if string(raw) != string(zero.done()) {
			t.Errorf("after PublishTwist(%+v) the robot got %x, want the zero Twist %x", c, raw, zero.b)
		}
	}
}

// The discovery settings ROS users set (here ROS_AUTOMATIC_DISCOVERY_RANGE
// = LOCALHOST, as rmw_cyclonedds turns it into Cyclone XML) connect us to
// a peer started with the same environment.
func TestLocalhostDiscoveryRangeConnects(t *testing.T) {
	env := map[string]string{
		"ROS_DOMAIN_ID":                 strconv.Itoa(int(testDomain())),
		"ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST",
	}
	cfg, err := ConfigFromEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	cfg.XML = runTag()
	p, err := NewParticipant(cfg, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	sink, err := p.NewTwistSink(TwistOptions{})
	if err != nil {
		t.Fatal(err)
	}
	peer := startPeer(t, cfg, "sub", "twist", "rt/cmd_vel", "reliable", "1")
	peer.expect("MATCHED")
	waitFor(t, "the publisher to match the peer", func() bool { return sink.Matched() == 1 })
	if err := sink.PublishTwist(planner.Twist{LinearX: 0.25}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if s := fields(peer.expect("SAMPLE")); parseHexFloat(t, s["lx"]) != 0.25 {
		t.Errorf("sample %v, want lx 0.25", s)
	}
}
