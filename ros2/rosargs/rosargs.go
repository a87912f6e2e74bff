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
// zerohop has no use for (log files, rosout) is accepted and reported in
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
	// LogLevels are the --log-level arguments in the order given:
	// "LEVEL" or "LOGGER:=LEVEL".
	LogLevels []string
	// Notes say what was accepted but does nothing here, one line each,
	// for the log.
	Notes []string
	// Applied says what ParseFlags set from parameters and --log-level,
	// one "--flag=value (source)" each, for the log.
	Applied []string

	params []paramSource
}

// Split takes the ROS arguments out of argv (a program's arguments,
// without its name): everything from a "--ros-args" up to the next "--"
// or the end, as rcl does; there may be several such sections.
func Split(argv []string) (own, ros []string) {
	inROS := false
	for _, a := range argv {
		switch {
		case a == "--ros-args":
			inROS = true
		case inROS && a == "--":
			inROS = false
		case inROS:
			ros = append(ros, a)
		default:
			own = append(own, a)
		}
	}
	return own, ros
}

// Parse reads the ROS arguments that Split took out. Parameter files are
// read here, so a missing or malformed one is an error naming it.
func Parse(ros []string) (*Args, error) {
	a := &Args{}
	for i := 0; i < len(ros); i++ {
		arg := ros[i]
		value := func() (string, error) {
			if i+1 >= len(ros) || ros[i+1] == "--ros-args" {
				return "", fmt.Errorf("--ros-args: %s needs a value", arg)
			}
			i++
			return ros[i], nil
		}
		switch arg {
		case "-r", "--remap":
			v, err := value()
			if err != nil {
				return nil, err
			}
			r, err := parseRemap(v)
			if err != nil {
				return nil, fmt.Errorf("--ros-args %s %q: %w", arg, v, err)
			}
			a.Remaps = append(a.Remaps, r)
		case "-p", "--param":
			v, err := value()
			if err != nil {
				return nil, err
			}
			src, err := parseParamRule(arg, v)
			if err != nil {
				return nil, err
			}
			a.params = append(a.params, src)
		case "--params-file":
			v, err := value()
			if err != nil {
				return nil, err
			}
			data, err := os.ReadFile(v)
			if err != nil {
				return nil, fmt.Errorf("--ros-args --params-file: %w", err)
			}
			src, err := parseParamsFile(v, data)
			if err != nil {
				return nil, err
			}
			a.params = append(a.params, src)
		case "-e", "--enclave":
			v, err := value()
			if err != nil {
				return nil, err
			}
			if !strings.HasPrefix(v, "/") {
				return nil, fmt.Errorf("--ros-args %s %q: want an absolute name such as /robot1", arg, v)
			}
			a.Enclave = v
		case "--log-level":
			v, err := value()
			if err != nil {
				return nil, err
			}
			a.LogLevels = append(a.LogLevels, v)
		case "--log-config-file", "--log-file-name":
			v, err := value()
			if err != nil {
				return nil, err
			}
			a.Notes = append(a.Notes, fmt.Sprintf("--ros-args %s %s ignored: zerohop logs to stderr only (JSON when it is not a terminal)", arg, v))
		case "--enable-rosout-logs":
			a.Notes = append(a.Notes, "--ros-args --enable-rosout-logs ignored: zerohop does not publish /rosout; its log goes to stderr")
		case "--disable-rosout-logs", "--disable-external-lib-logs", "--enable-external-lib-logs", "--enable-stdout-logs":
			// What zerohop does anyway, or a library it does not have.
		case "--disable-stdout-logs":
			a.Notes = append(a.Notes, "--ros-args --disable-stdout-logs ignored: zerohop's log goes to stderr (--log-level error keeps it quiet)")
		default:
			return nil, fmt.Errorf("--ros-args: unknown argument %q (zerohop reads -r/--remap, -p/--param, --params-file, -e/--enclave, --log-level; the node's own flags go before --ros-args, see --help)", arg)
		}
	}
	return a, nil
}

// parseRemap reads [NODE:][rostopic://|rosservice://]FROM:=TO. The names
// themselves are checked where they are resolved (ros2.Config.Validate).
func parseRemap(s string) (Remap, error) {
	from, to, ok := strings.Cut(s, ":=")
	if !ok {
		return Remap{}, fmt.Errorf("want FROM:=TO, optionally NODE:FROM:=TO")
	}
	var r Remap
	if i := strings.IndexByte(from, ':'); i >= 0 && !strings.HasPrefix(from[i:], "://") {
		r.Node, from = from[:i], from[i+1:]
		if !isToken(r.Node) {
			return Remap{}, fmt.Errorf("node name %q before ':': want letters, digits and '_', not starting with a digit", r.Node)
		}
	}
	switch {
	case strings.HasPrefix(from, "rostopic://"):
		from = strings.TrimPrefix(from, "rostopic://")
	case strings.HasPrefix(from, "rosservice://"):
		from, r.Service = strings.TrimPrefix(from, "rosservice://"), true
	}
	if from == "" || to == "" {
		return Remap{}, fmt.Errorf("empty name on one side of :=")
	}
	if strings.Contains(from, "*") {
		return Remap{}, fmt.Errorf("wildcards in a rule's name are not supported (nor by rcl)")
	}
	switch from {
	case "__node", "__name":
		from = "__node"
		if !isToken(to) {
			return Remap{}, fmt.Errorf("node name %q: want letters, digits and '_', not starting with a digit", to)
		}
	case "__ns":
		if !validNamespace(to) {
			return Remap{}, fmt.Errorf(`namespace %q: want "/" or /a/b with tokens of letters, digits and '_' (not starting with a digit)`, to)
		}
	}
	r.From, r.To = from, to
	return r, nil
}

// Node returns the node's namespace and name after the __ns and __node
// rules (the first that applies of each), given those it has without
// them. A rule limited to a node applies when that is the node's name
// without rules, as in rcl.
func Node(rules []Remap, namespace, name string) (string, string) {
	outNS, outName := namespace, name
	var nsDone, nameDone bool
	for _, r := range rules {
		if r.Node != "" && r.Node != name {
			continue
		}
		switch {
		case r.From == "__node" && !nameDone:
			outName, nameDone = r.To, true
		case r.From == "__ns" && !nsDone:
			outNS, nsDone = r.To, true
		}
	}
	return outNS, outName
}

// FullName is the node's fully qualified name, /ns/name.
func FullName(namespace, name string) string {
	if namespace == "/" || namespace == "" {
		return "/" + name
	}
	return namespace + "/" + name
}

// isToken reports whether s is a ROS name token: [A-Za-z_][A-Za-z0-9_]*.
func isToken(s string) bool {
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
func validNamespace(s string) bool {
	if s == "/" {
		return true
	}
	if !strings.HasPrefix(s, "/") || len(s) > 255 {
		return false
	}
	for _, tok := range strings.Split(s[1:], "/") {
		if !isToken(tok) {
			return false
		}
	}
	return true
}
