package ros2

import (
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

func envOf(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestConfigFromEnv(t *testing.T) {
	cases := []struct {
		name string
		env  map[string]string
		want Config
	}{
		{"nothing set: domain 0, subnet", nil, Config{}},
		{"a domain", map[string]string{"ROS_DOMAIN_ID": " 42 "}, Config{Domain: 42}},
		{"an empty domain is the default", map[string]string{"ROS_DOMAIN_ID": ""}, Config{}},
		{"localhost range", map[string]string{"ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST"}, Config{Range: RangeLocalhost}},
		{"off", map[string]string{"ROS_AUTOMATIC_DISCOVERY_RANGE": "OFF"}, Config{Range: RangeOff}},
		{"system default", map[string]string{"ROS_AUTOMATIC_DISCOVERY_RANGE": "SYSTEM_DEFAULT"}, Config{Range: RangeSystemDefault}},
		{"static peers", map[string]string{"ROS_STATIC_PEERS": "robot.local; 10.0.0.7;;"},
			Config{StaticPeers: []string{"robot.local", "10.0.0.7"}}},
		{"ROS_LOCALHOST_ONLY=1 wins and drops peers", map[string]string{
			"ROS_LOCALHOST_ONLY": "1", "ROS_AUTOMATIC_DISCOVERY_RANGE": "SUBNET", "ROS_STATIC_PEERS": "a"},
			Config{Range: RangeLocalhost, LocalhostOnly: true}},
		{"ROS_LOCALHOST_ONLY=0 changes nothing", map[string]string{"ROS_LOCALHOST_ONLY": "0"}, Config{}},
		{"CYCLONEDDS_URI verbatim", map[string]string{"CYCLONEDDS_URI": "file:///etc/cdds.xml"},
			Config{CycloneURI: "file:///etc/cdds.xml"}},
		{"ROS_DISTRO", map[string]string{"ROS_DISTRO": "humble"}, Config{Distro: "humble"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ConfigFromEnv(envOf(c.env))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("ConfigFromEnv = %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestConfigFromEnvRejects(t *testing.T) {
	for _, env := range []map[string]string{
		{"ROS_DOMAIN_ID": "233"},
		{"ROS_DOMAIN_ID": "-1"},
		{"ROS_DOMAIN_ID": "seven"},
		{"ROS_AUTOMATIC_DISCOVERY_RANGE": "localhost"},
	} {
		if c, err := ConfigFromEnv(envOf(env)); err == nil {
			t.Errorf("ConfigFromEnv(%v) = %+v, want an error", env, c)
		}
	}
}

// The discovery XML is rmw_cyclonedds's (rmw_node.cpp, check_create_domain,
// Jazzy), so that zerohop finds ROS nodes started with the same environment.
func TestCycloneConfigMirrorsRMW(t *testing.T) {
	const auto = "<Discovery><ParticipantIndex>auto</ParticipantIndex><MaxAutoParticipantIndex>32</MaxAutoParticipantIndex>"
	cases := []struct {
		name string
		cfg  Config
		want string
	}{
		{"subnet", Config{}, "<CycloneDDS><Domain>" + auto + "</Discovery></Domain></CycloneDDS>"},
		{"subnet with peers", Config{StaticPeers: []string{"10.0.0.7", "robot.local"}},
			"<CycloneDDS><Domain>" + auto + `<Peers><Peer address="10.0.0.7"/><Peer address="robot.local"/></Peers>` +
				"</Discovery></Domain></CycloneDDS>"},
		{"localhost", Config{Range: RangeLocalhost, StaticPeers: []string{"10.0.0.7"}},
			"<CycloneDDS><Domain><General><AllowMulticast>false</AllowMulticast></General>" + auto +
				`<Peers><Peer address="localhost"/><Peer address="10.0.0.7"/></Peers></Discovery></Domain></CycloneDDS>`},
		{"off", Config{Range: RangeOff, StaticPeers: []string{"ignored"}},
			"<CycloneDDS><Domain><General><AllowMulticast>false</AllowMulticast></General>" +
				"<Discovery><ParticipantIndex>none</ParticipantIndex><Tag>ros_discovery_off_" + strconv.Itoa(os.Getpid()) +
				"</Tag></Discovery></Domain></CycloneDDS>"},
		{"system default, then CYCLONEDDS_URI, then XML", Config{Range: RangeSystemDefault, CycloneURI: "file:///a.xml", XML: "<CycloneDDS/>"},
			"file:///a.xml,<CycloneDDS/>"},
		{"system default alone", Config{Range: RangeSystemDefault}, ""},
		// Humble's rmw: only ROS_LOCALHOST_ONLY, which binds to loopback.
		{"humble, localhost only", Config{Distro: "humble", Range: RangeLocalhost, LocalhostOnly: true},
			`<CycloneDDS><Domain><General><Interfaces><NetworkInterface address="127.0.0.1"/></Interfaces></General></Domain></CycloneDDS>`},
		{"humble ignores the range and static peers", Config{Distro: "Humble", Range: RangeLocalhost, StaticPeers: []string{"10.0.0.7"}, CycloneURI: "file:///a.xml"},
			"file:///a.xml"},
		{"humble default", Config{Distro: "humble"}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.cfg.CycloneConfig(); got != c.want {
				t.Errorf("CycloneConfig:\n got %s\nwant %s", got, c.want)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []Config{
		{Domain: MaxDomainID + 1},
		{Range: RangeSystemDefault + 1},
		{StaticPeers: []string{""}},
		{StaticPeers: []string{`x"/><Peer address="y`}},
		{Enclave: "/a;b"},
		{NodeName: "9lives"},
		{NodeName: "zero-hop"},
		{NodeName: "a/b"},
		{NodeName: strings.Repeat("n", 256)},
		{Namespace: "robot"},
		{Namespace: "/robot/"},
		{Namespace: "//robot"},
		{Namespace: "/robot/1st"},
		{Namespace: "/robot arm"},
	} {
		if err := c.Validate(); err == nil {
			t.Errorf("Validate(%+v) = nil", c)
		}
	}
	for _, c := range []Config{
		{Domain: MaxDomainID, StaticPeers: []string{"fe80::1", "host-1.lan"}},
		{NodeName: "zerohop_agent", Namespace: "/robot1/perception"},
		{NodeName: "_x9", Namespace: "/"},
	} {
		if err := c.Validate(); err != nil {
			t.Errorf("Validate(%+v): %v", c, err)
		}
	}
	if err := (Config{NodeName: "zero-hop"}).Validate(); err == nil || !strings.Contains(err.Error(), `"zero-hop"`) {
		t.Errorf("Validate: %v, want an error naming the node name", err)
	}
}

func TestNodeDefaultsAndGIDWidth(t *testing.T) {
	if ns, name := (Config{}).node(); ns != "/" || name != DefaultNodeName {
		t.Errorf("default node %q %q", ns, name)
	}
	for distro, want := range map[string]int{"": 16, "jazzy": 16, "iron": 16, "kilted": 16, "rolling": 16,
		"humble": 24, "Humble": 24, "galactic": 24, "foxy": 24} {
		if got := (Config{Distro: distro}).gidSize(); got != want {
			t.Errorf("gidSize(%q) = %d, want %d", distro, got, want)
		}
	}
}

func TestParticipantUserData(t *testing.T) {
	if got := (Config{}).userData(); got != "enclave=/;" {
		t.Errorf("default USER_DATA %q", got)
	}
	if got := (Config{Enclave: "/robot/agent"}).userData(); got != "enclave=/robot/agent;" {
		t.Errorf("USER_DATA %q", got)
	}
}

func TestDDSTopicName(t *testing.T) {
	good := map[string]string{
		"/cmd_vel": "rt/cmd_vel", "cmd_vel": "rt/cmd_vel", "/robot_1/cmd_vel": "rt/robot_1/cmd_vel",
		"/camera/image_raw": "rt/camera/image_raw", "/_private": "rt/_private",
	}
	for in, want := range good {
		if got, err := ddsTopicName(in); err != nil || got != want {
			t.Errorf("ddsTopicName(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "/", "//cmd_vel", "/cmd_vel/", "/1cmd", "~/cmd_vel", "/{node}/cmd", "/cmd-vel", "/cmd vel", "/ümlaut"} {
		if got, err := ddsTopicName(in); err == nil {
			t.Errorf("ddsTopicName(%q) = %q, want an error", in, got)
		}
	}
}

func TestQoSResolve(t *testing.T) {
	cases := []struct {
		in, def, want QoS
	}{
		{QoS{}, DefaultQoS(), QoS{Reliable, 10}},
		{QoS{}, SensorDataQoS(), QoS{BestEffort, 5}},
		{QoS{Reliability: BestEffort}, DefaultQoS(), QoS{BestEffort, 10}},
		{QoS{Depth: 1}, SensorDataQoS(), QoS{BestEffort, 1}},
	}
	for _, c := range cases {
		got, err := c.in.resolve(c.def)
		if err != nil || got != c.want {
			t.Errorf("%+v.resolve(%+v) = %+v, %v; want %+v", c.in, c.def, got, err, c.want)
		}
	}
	for _, q := range []QoS{{Depth: -1}, {Depth: maxDepth + 1}, {Reliability: BestEffort + 1}} {
		if _, err := q.resolve(DefaultQoS()); err == nil {
			t.Errorf("%+v.resolve accepted", q)
		}
	}
	if s := DefaultQoS().String(); s != "RELIABLE, VOLATILE, KEEP_LAST 10" {
		t.Errorf("DefaultQoS().String() = %q", s)
	}
}

func TestROSTime(t *testing.T) {
	cases := []struct {
		t       time.Time
		sec     int32
		nanosec uint32
	}{
		{time.Time{}, 0, 0},
		{time.Unix(1700000000, 999999999), 1700000000, 999999999},
		{time.Unix(-2, 300000000), -2, 300000000}, // -1.7 s, as builtin_interfaces/Time spells it
		{time.Unix(1<<31, 0), 0, 0},               // beyond 2038: no stamp rather than a wrapped one
	}
	for _, c := range cases {
		if sec, ns := rosTime(c.t); sec != c.sec || ns != c.nanosec {
			t.Errorf("rosTime(%v) = %d, %d; want %d, %d", c.t, sec, ns, c.sec, c.nanosec)
		}
	}
}

func TestErrNotBuiltSaysHowToBuild(t *testing.T) {
	for _, want := range []string{"-tags ros2", "libddsc", "cyclonedds-dev"} {
		if !strings.Contains(ErrNotBuilt.Error(), want) {
			t.Errorf("ErrNotBuilt %q does not mention %q", ErrNotBuilt, want)
		}
	}
}

// Up to Humble, rmw reads only ROS_LOCALHOST_ONLY: the rest is named as
// ignored (compose passes ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST, which a
// Humble node never sees), and the log names the rule in effect.
func TestHumbleIgnoresIronSettings(t *testing.T) {
	for _, tc := range []struct {
		env       map[string]string
		ignored   []string
		discovery string
	}{
		{map[string]string{"ROS_DISTRO": "humble", "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST", "ROS_STATIC_PEERS": "10.0.0.7"},
			[]string{"ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST", "ROS_STATIC_PEERS"}, "Cyclone's default (humble: multicast on the default interface)"},
		{map[string]string{"ROS_DISTRO": "humble", "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST", "ROS_LOCALHOST_ONLY": "1"},
			nil, "ROS_LOCALHOST_ONLY (humble: bound to 127.0.0.1)"},
		{map[string]string{"ROS_DISTRO": "humble"}, nil, "Cyclone's default (humble: multicast on the default interface)"},
		{map[string]string{"ROS_DISTRO": "jazzy", "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST", "ROS_STATIC_PEERS": "10.0.0.7"}, nil, "LOCALHOST"},
	} {
		c, err := ConfigFromEnv(envOf(tc.env))
		if err != nil {
			t.Fatal(err)
		}
		if got := c.ignoredSettings(); !reflect.DeepEqual(got, tc.ignored) {
			t.Errorf("%v: ignored %q, want %q", tc.env, got, tc.ignored)
		}
		if got := c.discovery(); got != tc.discovery {
			t.Errorf("%v: discovery %q, want %q", tc.env, got, tc.discovery)
		}
	}
}
