package ros2

import (
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zerohop/zerohop/ros2/rosargs"
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

// TestResolveTopic follows rcl's expansion (rcl_expand_topic_name) and
// its checks before (rcl_validate_topic_name) and after
// (rmw_validate_full_topic_name).
func TestResolveTopic(t *testing.T) {
	root := Config{}                                       // namespace "/", node "zerohop"
	ns := Config{NodeName: "cam", Namespace: "/robot1"}    // one token
	deep := Config{NodeName: "agent_1", Namespace: "/a/b"} // two
	good := []struct {
		name string
		cfg  Config
		in   string
		want string
	}{
		{"an absolute name stays in the root namespace", root, "/cmd_vel", "/cmd_vel"},
		{"an absolute name stays under a namespace", ns, "/cmd_vel", "/cmd_vel"},
		{"an absolute name keeps its tokens", deep, "/robot_1/cmd_vel", "/robot_1/cmd_vel"},
		{"a relative name in the root namespace is absolute", root, "cmd_vel", "/cmd_vel"},
		{"a relative name goes under the namespace", ns, "cmd_vel", "/robot1/cmd_vel"},
		{"a relative name goes under a deep namespace", deep, "camera/image_raw", "/a/b/camera/image_raw"},
		{"a private name in the root namespace", root, "~/status", "/zerohop/status"},
		{"a private name under a namespace", ns, "~/status", "/robot1/cam/status"},
		{"a private name under a deep namespace", deep, "~/x/y", "/a/b/agent_1/x/y"},
		{"the bare private namespace", ns, "~", "/robot1/cam"},
		{"the bare private namespace of the root", root, "~", "/zerohop"},
		{"{node} in a relative name", ns, "{node}/cmd", "/robot1/cam/cmd"},
		{"{node} in an absolute name", ns, "/{node}/cmd", "/cam/cmd"},
		{"{ns} starts an absolute name", deep, "{ns}/cmd", "/a/b/cmd"},
		{"{namespace} is {ns}", ns, "{namespace}/points", "/robot1/points"},
		{"several substitutions", ns, "/x/{node}_{node}/y", "/x/cam_cam/y"},
		{"a substitution after a private name", ns, "~/{node}", "/robot1/cam/cam"},
		{"a leading underscore", root, "/_private", "/_private"},
		{"a longest name", root, "/" + strings.Repeat("x", maxTopicLength-1), "/" + strings.Repeat("x", maxTopicLength-1)},
	}
	for _, c := range good {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.cfg.ResolveTopic(c.in)
			if err != nil || got != c.want {
				t.Errorf("ResolveTopic(%q) in %s = %q, %v; want %q", c.in, c.cfg.Namespace, got, err, c.want)
			}
			if _, dds, err := c.cfg.ddsTopicName(c.in); err != nil || dds != "rt"+c.want {
				t.Errorf("ddsTopicName(%q) = %q, %v; want %q", c.in, dds, err, "rt"+c.want)
			}
		})
	}
	bad := []struct {
		name string
		cfg  Config
		in   string
		want []string // in the error, besides the name as given
	}{
		{"the empty name", ns, "", []string{"empty"}},
		{"the root alone", ns, "/", []string{`ends with "/"`}},
		{"a trailing slash", ns, "cmd_vel/", []string{`ends with "/"`}},
		{"a private name with a trailing slash", ns, "~/", []string{`ends with "/"`}},
		{"an empty token", ns, "//cmd_vel", []string{"in node /robot1/cam", `"//cmd_vel"`, "//"}},
		{"an empty token in a relative name", ns, "a//b", []string{`"/robot1/a//b"`}},
		{"{ns} in the root namespace doubles the slash", root, "{ns}/cmd", []string{`expanded to "//cmd"`}},
		{"a relative name starting with a digit", ns, "1cmd", []string{"digit"}},
		{"a token starting with a digit", ns, "/robot/1cmd", []string{"digit"}},
		{"a substitution starting with a digit", ns, "/{1node}", []string{"substitution starts with a digit"}},
		{"a tilde without a slash", ns, "~x", []string{`"~" must be followed by "/"`}},
		{"a longer tilde without a slash", ns, "~foo/bar", []string{`"~" must be followed by "/"`}},
		{"a tilde not first", ns, "/~", []string{"first character"}},
		{"a tilde inside", ns, "foo/~/bar", []string{"first character"}},
		{"an unknown substitution", ns, "/{robot}/cmd", []string{"unknown substitution {robot}"}},
		{"an empty substitution", ns, "/{}/cmd", []string{"unknown substitution {}"}},
		{"an unclosed brace", ns, "/{node/cmd", []string{`"/" inside a substitution`}},
		{"an unclosed brace at the end", ns, "/cmd{node", []string{`unmatched "{"`}},
		{"an unopened brace", ns, "/node}/cmd", []string{`unmatched "}"`}},
		{"nested braces", ns, "/{{node}}", []string{"nested"}},
		{"a dash", ns, "/cmd-vel", []string{"not allowed"}},
		{"a space", ns, "/cmd vel", []string{"not allowed"}},
		{"a non-ASCII letter", ns, "/ümlaut", []string{"not allowed"}},
		{"a dash in a substitution", ns, "/{no-de}", []string{"substitution"}},
		{"a name too long once expanded", ns, strings.Repeat("x", maxTopicLength-len("/robot1")), []string{"more than 247"}},
		{"an invalid namespace", Config{Namespace: "robot1"}, "cmd_vel", []string{`namespace "robot1"`}},
		{"an invalid node name", Config{NodeName: "9lives"}, "~/x", []string{`node name "9lives"`}},
	}
	for _, c := range bad {
		t.Run(c.name+" is rejected", func(t *testing.T) {
			got, err := c.cfg.ResolveTopic(c.in)
			if err == nil {
				t.Fatalf("ResolveTopic(%q) = %q, want an error", c.in, got)
			}
			for _, w := range append([]string{strconv.Quote(c.in)}, c.want...) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("ResolveTopic(%q): %v; want it to say %s", c.in, err, w)
				}
			}
			if _, _, err := c.cfg.ddsTopicName(c.in); err == nil {
				t.Errorf("ddsTopicName(%q) accepted", c.in)
			}
		})
	}
}

// TestResolveTopicRemaps follows rcl_remap_topic_name: a rule's FROM is
// expanded against the node and compared with the expanded name, the first
// rule that matches wins, its TO is expanded too, and a rule for another
// node (NODE:FROM:=TO) or a service does nothing to a topic. The __node and
// __ns rules rename the node first, so they move relative and private
// names.
func TestResolveTopicRemaps(t *testing.T) {
	rules := func(args ...string) []rosargs.Remap {
		a, err := rosargs.Parse(args)
		if err != nil {
			t.Fatal(err)
		}
		return a.Remaps
	}
	agent := Config{NodeName: "zerohop_agent", Namespace: "/robot1"}
	for _, c := range []struct {
		name  string
		rules []rosargs.Remap
		in    string
		want  string
	}{
		{"a relative rule matches the relative name", rules("-r", "cmd_vel:=/base/cmd_vel"), "cmd_vel", "/base/cmd_vel"},
		{"a relative rule matches the absolute name it expands to", rules("-r", "cmd_vel:=/base/cmd_vel"), "/robot1/cmd_vel", "/base/cmd_vel"},
		{"an absolute rule in another namespace does not match", rules("-r", "/cmd_vel:=/base/cmd_vel"), "cmd_vel", "/robot1/cmd_vel"},
		{"a relative replacement goes under the namespace", rules("-r", "/cmd_vel:=diff_drive/cmd_vel"), "/cmd_vel", "/robot1/diff_drive/cmd_vel"},
		{"a private rule", rules("-r", "~/status:=status"), "~/status", "/robot1/status"},
		{"a private replacement", rules("-r", "points:=~/points"), "points", "/robot1/zerohop_agent/points"},
		{"the first matching rule wins", rules("-r", "image:=a", "-r", "cmd_vel:=b", "-r", "cmd_vel:=c"), "cmd_vel", "/robot1/b"},
		{"a rule for this node", rules("-r", "zerohop_agent:cmd_vel:=/x"), "cmd_vel", "/x"},
		{"a rule for another node", rules("-r", "zerohop_camera:cmd_vel:=/x"), "cmd_vel", "/robot1/cmd_vel"},
		{"a service rule", rules("-r", "rosservice://cmd_vel:=/x"), "cmd_vel", "/robot1/cmd_vel"},
		{"rostopic:// is a topic rule", rules("-r", "rostopic://cmd_vel:=/x"), "cmd_vel", "/x"},
		{"__ns moves relative names", rules("-r", "__ns:=/robot2"), "cmd_vel", "/robot2/cmd_vel"},
		{"__node moves private names", rules("-r", "__node:=front"), "~/status", "/robot1/front/status"},
		{"a rule for the node by its new name", rules("-r", "__node:=front", "-r", "front:cmd_vel:=/x"), "cmd_vel", "/x"},
		{"a rule matches after __ns", rules("-r", "__ns:=/r2", "-r", "cmd_vel:=/x"), "/r2/cmd_vel", "/x"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := agent
			cfg.Remaps = c.rules
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			got, err := cfg.ResolveTopic(c.in)
			if err != nil || got != c.want {
				t.Errorf("ResolveTopic(%q) with %v = %q, %v; want %q", c.in, c.rules, got, err, c.want)
			}
		})
	}
	// Rules made without rosargs (which refuses these) are checked too.
	for _, c := range []struct {
		rules []rosargs.Remap
		want  string
	}{
		{[]rosargs.Remap{{From: "cmd_vel", To: "/x/"}}, "remapping rule cmd_vel:=/x/"},
		{[]rosargs.Remap{{From: "cmd_vel", To: "/{robot}/x"}}, "unknown substitution"},
		{[]rosargs.Remap{{From: "{robot}", To: "/x"}}, "unknown substitution"},
	} {
		cfg := agent
		cfg.Remaps = c.rules
		if _, err := cfg.ResolveTopic("cmd_vel"); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ResolveTopic with %v: %v, want an error with %q", c.rules, err, c.want)
		}
	}
	// Validate checks every rule before a participant starts, matching
	// or not.
	cfg := agent
	cfg.Remaps = []rosargs.Remap{{From: "points", To: "/x"}, {From: "img-raw", To: "/y"}}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), `remapping rule img-raw:=/y: "img-raw"`) {
		t.Errorf("Validate: %v", err)
	}
	cfg.Remaps = rules("-r", "__node:=front", "-r", "__ns:=/r2")
	if ns, name := cfg.node(); ns != "/r2" || name != "front" {
		t.Errorf("node() = %s %s", ns, name)
	}
}

func TestQoSResolve(t *testing.T) {
	cases := []struct {
		in, def, want QoS
	}{
		{QoS{}, DefaultQoS(), QoS{Reliability: Reliable, Depth: 10}},
		{QoS{}, SensorDataQoS(), QoS{Reliability: BestEffort, Depth: 5}},
		{QoS{Reliability: BestEffort}, DefaultQoS(), QoS{Reliability: BestEffort, Depth: 10}},
		{QoS{Depth: 1}, SensorDataQoS(), QoS{Reliability: BestEffort, Depth: 1}},
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
