package rosargs

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
	"gopkg.in/yaml.v3"
)

// Options says where a program keeps what the ROS arguments change.
type Options struct {
	// NodeName is the node's name when no flag and no __node rule gives
	// one ("zerohop_agent").
	NodeName string
	// NodeNameFlag and NamespaceFlag name the flags that hold the node's
	// name and namespace, when the program has them ("" when not); the
	// __node and __ns rules win over them, as over a name in a ROS node's
	// code.
	NodeNameFlag, NamespaceFlag string
	// LogLevelFlag names the flag --log-level sets ("log-level").
	LogLevelFlag string
	// Aliases maps ROS parameter names the ecosystem uses to flags of
	// other names ("diagnostic_updater.period": "diagnostics-period").
	Aliases map[string]string
}

// ParseFlags parses args into fs as fs.Parse does, after taking out the
// ROS arguments (Split); then sets the flags the node's parameters name
// (Params; "lidar_height" or "lidar-height" sets --lidar-height, "a.b"
// sets --a-b) and the log level. A parameter that names no flag, or a
// flag also given on the command line, is an error: a setting silently
// dropped or overridden is worse on a robot than a node that does not
// start. A number for a duration flag is seconds, as ROS parameters
// give durations; a list is its values joined by commas.
//
// The returned Args hold the remapping rules for the node's ROS 2
// participant (ros2.Config.Remaps) and Applied, what the parameters set.
func ParseFlags(fs *flag.FlagSet, args []string, opt Options) (*Args, error) {
	own, ros := Split(args)
	// The flag package prints a refused flag's error and then the whole
	// usage, a hundred lines that bury it (a restart loop's log shows only
	// the usage's end): the error is returned alone, explained, and the
	// usage printed only when asked for.
	out := fs.Output()
	fs.SetOutput(io.Discard)
	err := fs.Parse(own)
	fs.SetOutput(out)
	if errors.Is(err, flag.ErrHelp) {
		fs.Usage()
		return nil, err
	}
	if err != nil {
		return nil, explainFlagError(fs, "", err)
	}
	a, err := Parse(ros...)
	if err != nil {
		return nil, err
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	ns, name := "/", opt.NodeName
	if f := fs.Lookup(opt.NamespaceFlag); f != nil && opt.NamespaceFlag != "" {
		ns = f.Value.String()
	}
	if f := fs.Lookup(opt.NodeNameFlag); f != nil && opt.NodeNameFlag != "" {
		name = f.Value.String()
	}
	ns, name = Node(a.Remaps, ns, name)
	byParam := map[string]bool{}
	for _, p := range a.Params(FullName(ns, name)) {
		f := lookupParam(fs, p.Name, opt.Aliases)
		if f == nil {
			return nil, fmt.Errorf("parameter %s (%s): %s has no such setting; its parameters are its flags, written with '_' or '-' (lidar_height for --lidar-height; see --help)", p.Name, p.Source, FullName(ns, name))
		}
		if f.Name == opt.NodeNameFlag || f.Name == opt.NamespaceFlag {
			// The node's name picks the sections that apply: one set by
			// a section could not be honoured.
			return nil, fmt.Errorf("parameter %s (%s): the node's name and namespace cannot be parameters; give them as the launch file's name= and namespace= (--ros-args -r __node:=NAME -r __ns:=/NS) or as --%s", p.Name, p.Source, f.Name)
		}
		if given[f.Name] {
			return nil, fmt.Errorf("parameter %s (%s) and --%s on the command line: give it once", p.Name, p.Source, f.Name)
		}
		s, err := flagValue(f, p.Value)
		if err != nil {
			return nil, fmt.Errorf("parameter %s (%s): %w", p.Name, p.Source, err)
		}
		if err := fs.Set(f.Name, s); err != nil {
			return nil, fmt.Errorf("parameter %s = %q (%s), for --%s: %w", p.Name, s, p.Source, f.Name, explainFlagError(fs, f.Name, err))
		}
		a.Applied = append(a.Applied, fmt.Sprintf("--%s=%s (%s)", f.Name, s, p.Source))
		byParam[f.Name] = true
	}
	if err := a.applyLogLevels(fs, opt.LogLevelFlag, loggerName(ns, name), given, byParam); err != nil {
		return nil, err
	}
	return a, nil
}

// refusedFlag finds the flag's name in the flag package's error for a
// value it refused.
var refusedFlag = regexp.MustCompile(`^invalid (?:boolean )?value ".*" for flag -([^:]+): `)

// explainFlagError adds to err, the flag package's error for flag name
// ("": taken from err), what the flag's values look like where err says
// only "parse error", and a pointer to --help.
func explainFlagError(fs *flag.FlagSet, name string, err error) error {
	if name == "" {
		if m := refusedFlag.FindStringSubmatch(err.Error()); m != nil {
			name = m[1]
		}
	}
	f := fs.Lookup(name)
	if f == nil || !strings.HasSuffix(err.Error(), "parse error") {
		return fmt.Errorf("%w (see --help)", err)
	}
	want := ""
	if g, ok := f.Value.(flag.Getter); ok {
		switch g.Get().(type) {
		case time.Duration:
			want = "a duration with its unit, e.g. 200ms or 1.5s"
		case float64:
			want = "a number"
		case int, int64, uint, uint64:
			want = "a whole number"
		case bool:
			want = "true or false"
		}
	}
	if want == "" {
		return fmt.Errorf("%w (see --help)", err)
	}
	return fmt.Errorf("%w: want %s (see --help)", err, want)
}

// lookupParam finds the flag a parameter name stands for.
func lookupParam(fs *flag.FlagSet, name string, aliases map[string]string) *flag.Flag {
	if alias, ok := aliases[name]; ok {
		return fs.Lookup(alias)
	}
	if f := fs.Lookup(name); f != nil {
		return f
	}
	return fs.Lookup(strings.NewReplacer("_", "-", ".", "-").Replace(name))
}

// loggerName is the node's logger as rcl names it: the namespace's tokens
// and the name joined by '.' ("robot1.zerohop_agent").
func loggerName(ns, name string) string {
	if ns == "/" || ns == "" {
		return name
	}
	return strings.ReplaceAll(strings.TrimPrefix(ns, "/"), "/", ".") + "." + name
}

// yamlBools are YAML 1.1's other spellings of true and false, which rcl's
// parser (libyaml) takes for a bool and yaml.v3 leaves as strings.
var yamlBools = map[string]string{"yes": "true", "on": "true", "no": "false", "off": "false"}

// flagValue is a parameter's value as f's Set takes it.
func flagValue(f *flag.Flag, v *yaml.Node) (string, error) {
	if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() && v.Kind == yaml.ScalarNode {
		if s, ok := yamlBools[strings.ToLower(v.Value)]; ok {
			return s, nil
		}
	}
	if v.Kind == yaml.SequenceNode {
		parts := make([]string, len(v.Content))
		for i, e := range v.Content {
			parts[i] = e.Value
		}
		return strings.Join(parts, ","), nil
	}
	if g, ok := f.Value.(flag.Getter); ok && (v.Tag == "!!int" || v.Tag == "!!float") {
		if _, isDuration := g.Get().(time.Duration); isDuration {
			sec, err := strconv.ParseFloat(v.Value, 64)
			if err != nil || math.IsNaN(sec) || math.IsInf(sec, 0) || math.Abs(sec) > math.MaxInt64/1e9 {
				return "", fmt.Errorf("%q: want a duration in seconds, or with a unit (200ms)", v.Value)
			}
			// Rounded: 0.29 s must be 290ms, not 289.999999ms.
			return time.Duration(math.Round(sec * float64(time.Second))).String(), nil
		}
	}
	return v.Value, nil
}

// rosLevels maps ROS log levels to zerohop's (zap's) names. zerohop has
// nothing above error, so FATAL keeps only errors.
var rosLevels = map[string]string{"debug": "debug", "info": "info", "warn": "warn", "warning": "warn", "error": "error", "fatal": "error"}

// applyLogLevels sets the log level flag from --log-level LEVEL and
// --log-level LOGGER:=LEVEL for the node's logger (others, rcl's and
// rmw's, are not zerohop's: noted and ignored). As in rcl, a level for
// the node's logger wins over a plain one wherever it stands; among
// several of a kind the last wins.
func (a *Args) applyLogLevels(fs *flag.FlagSet, logFlag, logger string, given, byParam map[string]bool) error {
	var plain, named string // the arguments that apply
	for _, arg := range a.LogLevels {
		name, level, isNamed := strings.Cut(arg, ":=")
		if !isNamed {
			level = name
		}
		lvl := strings.ToLower(level)
		if _, ok := rosLevels[lvl]; !ok && lvl != "unset" {
			return fmt.Errorf("--ros-args --log-level %q: want DEBUG, INFO, WARN, ERROR or FATAL, optionally LOGGER:=LEVEL", arg)
		}
		switch {
		case isNamed && name != logger:
			a.Notes = append(a.Notes, fmt.Sprintf("--ros-args --log-level %s ignored: zerohop's one logger is the node's, %s", arg, logger))
		case lvl == "unset":
		case isNamed:
			named = arg
		default:
			plain = arg
		}
	}
	arg := named
	if arg == "" {
		arg = plain
	}
	if arg == "" {
		return nil
	}
	_, level, isNamed := strings.Cut(arg, ":=")
	if !isNamed {
		level = arg
	}
	f := fs.Lookup(logFlag)
	if f == nil || logFlag == "" {
		return errors.New("--ros-args --log-level: this program has no log level")
	}
	switch {
	case given[f.Name]:
		return fmt.Errorf("--ros-args --log-level %s and --%s on the command line: give it once", arg, f.Name)
	case byParam[f.Name]:
		return fmt.Errorf("--ros-args --log-level %s and the parameter for --%s: give it once", arg, f.Name)
	}
	zl := rosLevels[strings.ToLower(level)]
	if err := fs.Set(f.Name, zl); err != nil {
		return fmt.Errorf("--ros-args --log-level %s: %w", arg, err)
	}
	a.Applied = append(a.Applied, fmt.Sprintf("--%s=%s (--ros-args --log-level %s)", f.Name, zl, arg))
	return nil
}

// Log writes what the ROS arguments did: one line with the flags the
// parameters and --log-level set and the remapping rules, if any, and a
// line for each note.
func (a *Args) Log(log *zap.Logger) {
	if len(a.Applied) > 0 || len(a.Remaps) > 0 || a.Enclave != "" {
		log.Info("ROS arguments", zap.Strings("set", a.Applied), zap.Stringers("remaps", a.Remaps), zap.String("enclave", a.Enclave))
	}
	for _, n := range a.Notes {
		log.Info(n)
	}
}
