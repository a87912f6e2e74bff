// Package rosargs reads the ROS 2 command-line arguments (--ros-args ...
// [--]) that ros2 run and ros2 launch give a node, for programs whose own
// settings are Go flags: remapping rules (-r), the node's name and
// namespace (-r __node:=, -r __ns:=), parameters (-p NAME:=VALUE and
// --params-file FILE), the enclave (-e) and the log level (--log-level).
// Parameters set the flag of the same name ("lidar_height" sets
// --lidar-height), so a launch file's parameters= and remappings= work on
// zerohop's nodes as on any ROS node.
//
// It follows rcl (rcl/src/rcl/arguments.c) for the syntax and rclcpp for
// which parameter-file sections apply to a node. What rcl accepts and
// zerohop has no use for (log files, stdout) is accepted and reported in
// Args.Notes; anything else is an error, as rclcpp's UnknownROSArgsError
// is.
package rosargs

import (
	"fmt"
	"os"
	"strings"
)

// Remap is one remapping rule, -r [NODE:]FROM:=TO.
type Remap struct {
	// Node, when not "", limits the rule to the node of that name.
	Node string
	// From and To are ROS names as given (relative, absolute or private,
	// "~/x"), or "__node"/"__ns" for the node's name and namespace.
	From, To string
	// Service is a rule that starts with rosservice://: it never applies
	// to a topic.
	Service bool
}

// String is the rule as the command line gives it.
func (r Remap) String() string {
	s := r.From + ":=" + r.To
	if r.Service {
		s = "rosservice://" + s
	}
	if r.Node != "" {
		s = r.Node + ":" + s
	}
	return s
}

// Args are the ROS arguments of one command line.
type Args struct {
	// Remaps are the -r rules in the order given; the first that matches
	// a name applies, as in rcl.
	Remaps []Remap
	// Enclave is -e/--enclave ("" if not given).
	Enclave string
	// NoRosout is --disable-rosout-logs (the last of it and
	// --enable-rosout-logs wins): the node's log stays off /rosout.
	NoRosout bool
	// LogLevels are the --log-level arguments in the order given:
	// "LEVEL" or "LOGGER:=LEVEL".
	LogLevels []string
	// Notes say what was accepted but does nothing here, one line each,
	// for the log.
	Notes []string
	// Applied says what ParseFlags set from parameters and --log-level,
	// one "--flag=value (source)" each, for the log.
	Applied []string

	params []*nodeEntry
}

// Split takes the ROS arguments out of argv (a program's arguments,
// without its name): each section from a "--ros-args" up to the next "--",
// "--ros-args" or the end, as rcl reads them.
func Split(argv []string) (own []string, sections [][]string) {
	inROS := false
	for _, a := range argv {
		switch {
		case a == "--ros-args":
			inROS = true
			sections = append(sections, []string{})
		case inROS && a == "--":
			inROS = false
		case inROS:
			sections[len(sections)-1] = append(sections[len(sections)-1], a)
		default:
			own = append(own, a)
		}
	}
	return own, sections
}

// Parse reads the ROS argument sections that Split took out; an argument's
// value must be in its section. Parameter files are read here, so a
// missing or malformed one is an error naming it.
func Parse(sections ...[]string) (*Args, error) {
	a := &Args{}
	for _, section := range sections {
		if err := a.parseSection(section); err != nil {
			return nil, err
		}
	}
	return a, nil
}

func (a *Args) parseSection(ros []string) error {
	for i := 0; i < len(ros); i++ {
		arg := ros[i]
		value := func() (string, error) {
			if i+1 >= len(ros) {
				return "", fmt.Errorf("--ros-args: %s needs a value", arg)
			}
			i++
			return ros[i], nil
		}
		switch arg {
		case "-r", "--remap":
			v, err := value()
			if err != nil {
				return err
			}
			r, err := parseRemap(v)
			if err != nil {
				return fmt.Errorf("--ros-args %s %q: %w", arg, v, err)
			}
			a.Remaps = append(a.Remaps, r)
		case "-p", "--param":
			v, err := value()
			if err != nil {
				return err
			}
			sec, err := parseParamRule(arg, v)
			if err != nil {
				return err
			}
			a.addSection(sec)
		case "--params-file":
			v, err := value()
			if err != nil {
				return err
			}
			data, err := os.ReadFile(v)
			if err != nil {
				return fmt.Errorf("--ros-args --params-file: %w", err)
			}
			sections, err := parseParamsFile(v, data)
			if err != nil {
				return err
			}
			for _, sec := range sections {
				a.addSection(sec)
			}
		case "-e", "--enclave":
			v, err := value()
			if err != nil {
				return err
			}
			if !IsNamespace(v) {
				// rcl_validate_enclave_name: a namespace's rules.
				return fmt.Errorf("--ros-args %s %q: want an absolute name such as /robot1/zerohop_agent (tokens of letters, digits and '_', not starting with a digit, at most 255 characters)", arg, v)
			}
			a.Enclave = v
		case "--log-level":
			v, err := value()
			if err != nil {
				return err
			}
			a.LogLevels = append(a.LogLevels, v)
		case "--log-config-file", "--log-file-name":
			v, err := value()
			if err != nil {
				return err
			}
			a.Notes = append(a.Notes, fmt.Sprintf("--ros-args %s %s ignored: zerohop logs to stderr only (JSON when it is not a terminal)", arg, v))
		case "--enable-rosout-logs":
			a.NoRosout = false
		case "--disable-rosout-logs":
			a.NoRosout = true
		case "--disable-external-lib-logs", "--enable-external-lib-logs", "--enable-stdout-logs":
			// What zerohop does anyway, or a library it does not have.
		case "--disable-stdout-logs":
			a.Notes = append(a.Notes, "--ros-args --disable-stdout-logs ignored: zerohop's log goes to stderr (--log-level error keeps it quiet)")
		default:
			return fmt.Errorf("--ros-args: unknown argument %q (zerohop reads -r/--remap, -p/--param, --params-file, -e/--enclave, --log-level; the node's own flags go before --ros-args, see --help)", arg)
		}
	}
	return nil
}

// parseRemap reads [NODE:][rostopic://|rosservice://]FROM:=TO with rcl's
// grammar: FROM and TO are names of tokens separated by '/', absolute
// ("/a/b"), relative ("a/b") or private ("~/a"); __node:=NAME and
// __ns:=/NS rename the node.
func parseRemap(s string) (Remap, error) {
	from, to, ok := strings.Cut(s, ":=")
	if !ok {
		return Remap{}, fmt.Errorf("want FROM:=TO, optionally NODE:FROM:=TO")
	}
	var r Remap
	if i := strings.IndexByte(from, ':'); i >= 0 && !strings.HasPrefix(from[i:], "://") {
		r.Node, from = from[:i], from[i+1:]
		if !IsToken(r.Node) {
			return Remap{}, fmt.Errorf("node name %q before ':': want letters, digits and '_', not starting with a digit", r.Node)
		}
	}
	kind := ""
	switch {
	case strings.HasPrefix(from, "rostopic://"):
		from, kind = strings.TrimPrefix(from, "rostopic://"), "rostopic://"
	case strings.HasPrefix(from, "rosservice://"):
		from, kind, r.Service = strings.TrimPrefix(from, "rosservice://"), "rosservice://", true
	}
	switch from {
	case "__node", "__name":
		if kind != "" {
			return Remap{}, fmt.Errorf("%s%s: a node rename has no %s", kind, from, kind)
		}
		if !IsToken(to) {
			return Remap{}, fmt.Errorf("node name %q: want letters, digits and '_', not starting with a digit", to)
		}
		r.From, r.To = "__node", to
		return r, nil
	case "__ns":
		if kind != "" {
			return Remap{}, fmt.Errorf("%s__ns: a namespace rename has no %s", kind, kind)
		}
		if !validNamespace(to) {
			return Remap{}, fmt.Errorf(`namespace %q: want "/" or /a/b with tokens of letters, digits and '_' (not starting with a digit)`, to)
		}
		r.From, r.To = from, to
		return r, nil
	}
	if strings.Contains(from, "*") {
		return Remap{}, fmt.Errorf("wildcards in a rule's name are not supported (nor by rcl)")
	}
	for _, name := range []string{from, to} {
		if !validRuleName(name) {
			return Remap{}, fmt.Errorf("name %q: want tokens of letters, digits and '_' separated by '/', absolute (/a/b), relative (a/b) or private (~/a)", name)
		}
	}
	r.From, r.To = from, to
	return r, nil
}

// validRuleName reports whether s is a name rcl's remapping grammar takes:
// ('/' | '~/')? token ('/' token)*.
func validRuleName(s string) bool {
	switch {
	case strings.HasPrefix(s, "~/"):
		s = s[2:]
	case strings.HasPrefix(s, "/"):
		s = s[1:]
	}
	if s == "" {
		return false
	}
	for _, tok := range strings.Split(s, "/") {
		if !IsToken(tok) {
			return false
		}
	}
	return true
}

// TopicRules are the rules that move topics, without the node's renames.
func (a *Args) TopicRules() []Remap {
	var out []Remap
	for _, r := range a.Remaps {
		if r.From != "__node" && r.From != "__ns" {
			out = append(out, r)
		}
	}
	return out
}

// Node returns the node's namespace and name after the __node and __ns
// rules (the first that applies of each), given those it has without
// them. As in rcl_node_init, the name is renamed first, matching a
// NODE: prefix against the name without rules; a __ns rule's NODE: prefix
// is matched against the new name.
func Node(rules []Remap, namespace, name string) (string, string) {
	outName := name
	for _, r := range rules {
		if r.From == "__node" && (r.Node == "" || r.Node == name) {
			outName = r.To
			break
		}
	}
	for _, r := range rules {
		if r.From == "__ns" && (r.Node == "" || r.Node == outName) {
			return r.To, outName
		}
	}
	return namespace, outName
}

// FullName is the node's fully qualified name, /ns/name.
func FullName(namespace, name string) string {
	if namespace == "/" || namespace == "" {
		return "/" + name
	}
	return namespace + "/" + name
}

// IsToken reports whether s is a ROS name token: [A-Za-z_][A-Za-z0-9_]*.
func IsToken(s string) bool {
	if s == "" || (s[0] >= '0' && s[0] <= '9') {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) {
			return false
		}
	}
	return true
}

// validNamespace reports whether s is "/" or /a/b of tokens.
// IsNamespace reports whether s is a valid absolute ROS namespace (rcl's
// rmw_validate_namespace): "/", or '/'-separated IsToken parts, at most
// 255 characters. Enclave names follow the same rules.
func IsNamespace(s string) bool { return validNamespace(s) }

func validNamespace(s string) bool {
	if s == "/" {
		return true
	}
	if !strings.HasPrefix(s, "/") || len(s) > 255 {
		return false
	}
	for _, tok := range strings.Split(s[1:], "/") {
		if !IsToken(tok) {
			return false
		}
	}
	return true
}
