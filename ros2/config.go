package ros2

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/zerohop/zerohop/ros2/rosargs"
)

// MaxDomainID is the largest DDS domain id: with the standard port mapping
// (7400 + 250 × domain + ...) larger ids run out of UDP ports.
const MaxDomainID = 232

// DiscoveryRange says how far automatic discovery reaches, as
// ROS_AUTOMATIC_DISCOVERY_RANGE does in ROS 2 Jazzy.
type DiscoveryRange uint8

const (
	// RangeSubnet is the default: Cyclone's multicast discovery on the
	// local network, plus StaticPeers.
	RangeSubnet DiscoveryRange = iota
	// RangeLocalhost keeps discovery on this host: no multicast, localhost
	// and StaticPeers as unicast peers (ROS_LOCALHOST_ONLY=1 or
	// ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST).
	RangeLocalhost
	// RangeOff disables discovery beyond this process.
	RangeOff
	// RangeSystemDefault leaves Cyclone's discovery settings alone
	// (StaticPeers are ignored).
	RangeSystemDefault
)

func (r DiscoveryRange) String() string {
	switch r {
	case RangeSubnet:
		return "SUBNET"
	case RangeLocalhost:
		return "LOCALHOST"
	case RangeOff:
		return "OFF"
	case RangeSystemDefault:
		return "SYSTEM_DEFAULT"
	}
	return "DiscoveryRange(" + strconv.Itoa(int(r)) + ")"
}

// Config says how a Participant joins the ROS 2 graph. The zero value is
// domain 0 with ROS 2's default discovery. ConfigFromEnv fills it from the
// environment variables ROS users already set.
type Config struct {
	Domain      uint32         // DDS domain id = ROS_DOMAIN_ID, 0..MaxDomainID
	Range       DiscoveryRange // ROS_AUTOMATIC_DISCOVERY_RANGE / ROS_LOCALHOST_ONLY (Iron on)
	StaticPeers []string       // ROS_STATIC_PEERS: host names or addresses, unicast discovery (Iron on)
	// LocalhostOnly is ROS_LOCALHOST_ONLY=1. Up to Humble it is the only
	// discovery setting rmw reads (bind to 127.0.0.1); from Iron on it
	// sets Range to RangeLocalhost.
	LocalhostOnly bool
	// CycloneURI is Cyclone's own configuration as CYCLONEDDS_URI holds
	// it: file URIs and/or XML fragments, comma-separated. It is applied
	// after the discovery settings above, so it can override them.
	CycloneURI string
	// XML is one more Cyclone XML fragment, applied last.
	XML string
	// Enclave goes into the participant's USER_DATA ("enclave=/;");
	// default "/". With Security on it also names the keystore folder
	// whose certificates the participant uses.
	Enclave string
	// Security is SROS2 (ROS_SECURITY_*); off by default.
	Security Security
	// NodeName and Namespace are the ROS node this participant shows up
	// as in `ros2 node list`, `ros2 node info` and rqt_graph (announced on
	// ros_discovery_info, owning every endpoint of the participant).
	// Defaults "zerohop" and "/".
	NodeName, Namespace string
	// Remaps are the node's remapping rules (--ros-args -r, package
	// rosargs): __node and __ns rules rename the node, the others move
	// its topics, as rcl applies them (ResolveTopic).
	Remaps []rosargs.Remap
	// Distro is ROS_DISTRO ("jazzy", "humble", ...). Up to Humble the
	// graph announcement's GID is 24 bytes, not 16, and discovery is
	// Humble's (see LocalhostOnly); "" or any other name means Jazzy's.
	Distro string
}

// DefaultNodeName is the node name of a Config without one.
const DefaultNodeName = "zerohop"

// node returns the node's namespace and name, defaults and the __ns and
// __node rules applied.
func (c Config) node() (namespace, name string) {
	namespace, name = c.Namespace, c.NodeName
	if namespace == "" {
		namespace = "/"
	}
	if name == "" {
		name = DefaultNodeName
	}
	return rosargs.Node(c.Remaps, namespace, name)
}

// FullNodeName is the node's fully qualified name, "/robot1/zerohop_camera"
// (defaults and the __node and __ns rules applied).
func (c Config) FullNodeName() string { return rosargs.FullName(c.node()) }

// preIron reports whether c.Distro is Humble or older, whose rcl and rmw
// differ from Iron's on: 24-byte GIDs, no discovery range.
func (c Config) preIron() bool {
	switch strings.ToLower(c.Distro) {
	case "dashing", "eloquent", "foxy", "galactic", "humble":
		return true
	}
	return false
}

// gidSize is the byte length of rmw_dds_common/Gid in c.Distro.
func (c Config) gidSize() int {
	if c.preIron() {
		return 24
	}
	return 16
}

// ConfigFromEnv reads ROS_DOMAIN_ID, ROS_LOCALHOST_ONLY,
// ROS_AUTOMATIC_DISCOVERY_RANGE, ROS_STATIC_PEERS, CYCLONEDDS_URI and
// ROS_DISTRO
// through lookup (os.LookupEnv when nil), the way rcl and rmw_cyclonedds
// do, except that an invalid value is an error rather than a fallback.
// ROS_LOCALHOST_ONLY=1 wins over the discovery range and drops static
// peers, as in Jazzy.
func ConfigFromEnv(lookup func(string) (string, bool)) (Config, error) {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	get := func(k string) string { v, _ := lookup(k); return strings.TrimSpace(v) }
	var c Config
	if v := get("ROS_DOMAIN_ID"); v != "" {
		id, err := strconv.ParseUint(v, 10, 32)
		if err != nil || id > MaxDomainID {
			return Config{}, fmt.Errorf("ros2: ROS_DOMAIN_ID %q: want an integer 0..%d", v, MaxDomainID)
		}
		c.Domain = uint32(id)
	}
	switch v := get("ROS_AUTOMATIC_DISCOVERY_RANGE"); v {
	case "", "SUBNET":
		c.Range = RangeSubnet
	case "LOCALHOST":
		c.Range = RangeLocalhost
	case "OFF":
		c.Range = RangeOff
	case "SYSTEM_DEFAULT":
		c.Range = RangeSystemDefault
	default:
		return Config{}, fmt.Errorf("ros2: ROS_AUTOMATIC_DISCOVERY_RANGE %q: want SUBNET, LOCALHOST, OFF or SYSTEM_DEFAULT", v)
	}
	for _, p := range strings.Split(get("ROS_STATIC_PEERS"), ";") {
		if p = strings.TrimSpace(p); p != "" {
			c.StaticPeers = append(c.StaticPeers, p)
		}
	}
	if get("ROS_LOCALHOST_ONLY") == "1" {
		c.Range, c.StaticPeers, c.LocalhostOnly = RangeLocalhost, nil, true
	}
	c.CycloneURI, _ = lookup("CYCLONEDDS_URI")
	c.Distro = get("ROS_DISTRO")
	// rcl's rules: security only for exactly "true", enforced only for
	// exactly "Enforce".
	enable, strategy := get("ROS_SECURITY_ENABLE"), get("ROS_SECURITY_STRATEGY")
	c.Security = Security{Enable: enable == "true", Keystore: get("ROS_SECURITY_KEYSTORE"),
		Enforce: strategy == "Enforce", EnclaveOverride: get("ROS_SECURITY_ENCLAVE_OVERRIDE")}
	var notes []string
	if enable != "" && enable != "true" && enable != "false" {
		notes = append(notes, fmt.Sprintf("ROS_SECURITY_ENABLE=%q is not \"true\": security is off", enable))
	}
	if strategy != "" && strategy != "Enforce" && strategy != "Permissive" {
		notes = append(notes, fmt.Sprintf("ROS_SECURITY_STRATEGY=%q is not \"Enforce\": security is not enforced", strategy))
	}
	c.Security.Note = strings.Join(notes, "; ")
	return c, nil
}

// Validate checks the fields a participant cannot be made without.
func (c Config) Validate() error {
	if c.Domain > MaxDomainID {
		return fmt.Errorf("ros2: domain %d: want 0..%d", c.Domain, MaxDomainID)
	}
	if c.Range > RangeSystemDefault {
		return fmt.Errorf("ros2: discovery range %v unknown", c.Range)
	}
	for _, p := range c.StaticPeers {
		if p == "" || strings.ContainsAny(p, "<>&\"' ,") {
			return fmt.Errorf("ros2: static peer %q: want a host name or an address", p)
		}
	}
	if strings.ContainsRune(c.Enclave, ';') || strings.ContainsRune(c.Enclave, 0) {
		return fmt.Errorf("ros2: enclave %q must not hold ';' or NUL", c.Enclave)
	}
	if err := validateNode(c.node()); err != nil {
		return fmt.Errorf("ros2: %w", err)
	}
	for _, r := range c.Remaps {
		if r.From == "__node" || r.From == "__ns" || r.Service {
			continue // checked by rosargs; a service rule applies to no topic
		}
		for _, name := range []string{r.From, r.To} {
			if reason := topicNameInvalid(name); reason != "" {
				return fmt.Errorf("ros2: remapping rule %s: %q: %s", r, name, reason)
			}
		}
	}
	return nil
}

// validateNode checks a node's namespace and name (defaults applied).
func validateNode(ns, name string) error {
	if !rosargs.IsToken(name) || len(name) > 255 {
		return fmt.Errorf("node name %q: want letters, digits and '_', not starting with a digit, at most 255 bytes", name)
	}
	if ns != "/" {
		tokens := strings.Split(ns, "/")
		ok := len(ns) <= 255 && tokens[0] == ""
		for _, tok := range tokens[1:] {
			ok = ok && rosargs.IsToken(tok)
		}
		if !ok {
			return fmt.Errorf(`namespace %q: want "/" or /a/b with tokens of letters, digits and '_' (not starting with a digit), no trailing '/'`, ns)
		}
	}
	return nil
}

// CycloneConfig returns the configuration string the domain is created
// with: the discovery fragment rmw_cyclonedds builds (Jazzy's for Range and
// StaticPeers; up to Humble, Humble's for LocalhostOnly), then CycloneURI,
// then XML. Later parts override earlier ones.
func (c Config) CycloneConfig() string {
	var parts []string
	if d := c.discoveryXML(); d != "" {
		parts = append(parts, d)
	}
	for _, s := range []string{c.CycloneURI, c.XML} {
		if s = strings.TrimSpace(s); s != "" {
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, ",")
}

// discovery names the discovery rule in effect, for the start-up log.
func (c Config) discovery() string {
	if c.preIron() {
		if c.LocalhostOnly {
			return "ROS_LOCALHOST_ONLY (" + c.Distro + ": bound to 127.0.0.1)"
		}
		return "Cyclone's default (" + c.Distro + ": multicast on the default interface)"
	}
	return c.Range.String()
}

// ignoredSettings names the settings c holds that its distro's rmw does
// not read, so that the participant can say so: up to Humble only
// ROS_LOCALHOST_ONLY counts.
func (c Config) ignoredSettings() []string {
	if !c.preIron() {
		return nil
	}
	var ignored []string
	if c.Range != RangeSubnet && !c.LocalhostOnly {
		ignored = append(ignored, "ROS_AUTOMATIC_DISCOVERY_RANGE="+c.Range.String())
	}
	if len(c.StaticPeers) > 0 {
		ignored = append(ignored, "ROS_STATIC_PEERS")
	}
	return ignored
}

// humbleLocalhostXML is what rmw_cyclonedds_cpp (Humble, rmw_node.cpp,
// check_create_domain) prepends for ROS_LOCALHOST_ONLY=1: bind to
// loopback. A Humble node so configured drops a peer that advertises only
// another interface, as Jazzy's fragment would have zerohop do.
const humbleLocalhostXML = `<CycloneDDS><Domain><General><Interfaces><NetworkInterface address="127.0.0.1"/></Interfaces></General></Domain></CycloneDDS>`

// discoveryXML mirrors check_create_domain in rmw_cyclonedds_cpp
// (rmw_node.cpp; Jazzy's, or Humble's for pre-Iron distros), so that zerohop
// and ROS nodes started with the same environment find each other.
func (c Config) discoveryXML() string {
	if c.preIron() {
		// Humble's rcl reads neither ROS_AUTOMATIC_DISCOVERY_RANGE nor
		// ROS_STATIC_PEERS: only ROS_LOCALHOST_ONLY.
		if c.LocalhostOnly {
			return humbleLocalhostXML
		}
		return ""
	}
	localhostPeer, staticPeers, noMulticast := false, false, false
	switch c.Range {
	case RangeSubnet:
		staticPeers = true
	case RangeLocalhost:
		localhostPeer, staticPeers, noMulticast = true, true, true
	case RangeOff:
		noMulticast = true
	case RangeSystemDefault:
		return ""
	}
	var b strings.Builder
	b.WriteString("<CycloneDDS><Domain>")
	if noMulticast {
		b.WriteString("<General><AllowMulticast>false</AllowMulticast></General>")
	}
	if noMulticast && !localhostPeer && !staticPeers {
		// OFF: a domain tag no other process uses blocks all discovery;
		// ParticipantIndex none lifts the per-host participant limit.
		b.WriteString("<Discovery><ParticipantIndex>none</ParticipantIndex>")
		b.WriteString("<Tag>ros_discovery_off_" + strconv.Itoa(os.Getpid()) + "</Tag>")
	} else {
		// One unicast discovery port per participant on a host; 32 is
		// rmw's choice (roughly the number of ROS processes per host).
		b.WriteString("<Discovery><ParticipantIndex>auto</ParticipantIndex>")
		b.WriteString("<MaxAutoParticipantIndex>32</MaxAutoParticipantIndex>")
	}
	if (staticPeers && len(c.StaticPeers) > 0) || localhostPeer {
		b.WriteString("<Peers>")
		if localhostPeer {
			b.WriteString(`<Peer address="localhost"/>`)
		}
		if staticPeers {
			for _, p := range c.StaticPeers {
				b.WriteString(`<Peer address="` + p + `"/>`)
			}
		}
		b.WriteString("</Peers>")
	}
	b.WriteString("</Discovery></Domain></CycloneDDS>")
	return b.String()
}

// userData is the participant's USER_DATA, as rmw writes it.
func (c Config) userData() string {
	enclave := c.Enclave
	if enclave == "" {
		enclave = "/"
	}
	return "enclave=" + enclave + ";"
}

// ErrNotBuilt is returned by every constructor of a binary built without
// ROS 2 support.
var ErrNotBuilt = errors.New("ros2: built without ROS 2 support (build with -tags ros2; needs libddsc from Debian cyclonedds-dev)")

// ErrClosed is returned by an endpoint used after Close (its own or its
// participant's).
var ErrClosed = errors.New("ros2: closed")

// ErrDomainInUse is returned by NewParticipant when this process already
// has a participant in the domain: share that one instead.
var ErrDomainInUse = errors.New("ros2: this process already has a participant in the domain")
