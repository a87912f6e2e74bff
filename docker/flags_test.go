package docker

// Reading a binary's flags from its --help (Go's flag.PrintDefaults
// format) and reading a compose command against them.

import (
	"fmt"
	"os"
	"path"
	"regexp"
	"strconv"
	"strings"

	"github.com/zerohop/zerohop/ros2/rosargs"
)

type flagSpec struct {
	Name    string
	Bool    bool   // takes no value
	Default string // "" if --help shows none
}

// flagSet is what a binary accepts, by flag name without dashes.
type flagSet map[string]flagSpec

// PrintDefaults writes each flag as "  -name" (bool) or "  -name type",
// the usage on the same line after a tab or on the next lines indented by
// four spaces and a tab; "(default X)" ends the usage when the default is
// not the zero value.
var (
	// The value's name is the usage's back-quoted word when it has one
	// ("m/s", "rad/s per rad"), else the type's.
	helpFlagLine = regexp.MustCompile(`^  -([A-Za-z0-9][A-Za-z0-9_.-]*)(?: ([^\t]+))?(?:\t|$)`)
	helpDefault  = regexp.MustCompile(`\(default ("(?:[^"\\]|\\.)*"|[^)]*)\)\s*$`)
)

func parseHelp(text string) (flagSet, error) {
	fs := flagSet{}
	var cur *flagSpec
	flush := func() {
		if cur != nil {
			fs[cur.Name] = *cur
		}
	}
	for _, line := range strings.Split(text, "\n") {
		if m := helpFlagLine.FindStringSubmatch(line); m != nil {
			flush()
			cur = &flagSpec{Name: m[1], Bool: m[2] == ""}
		}
		if cur == nil {
			continue
		}
		if m := helpDefault.FindStringSubmatch(line); m != nil {
			d := m[1]
			if u, err := strconv.Unquote(d); err == nil {
				d = u
			}
			cur.Default = d
		}
	}
	flush()
	if len(fs) == 0 {
		return nil, fmt.Errorf("no flags found in --help output:\n%s", text)
	}
	return fs, nil
}

// invocation is a compose command read against a flag set: the binary and
// the value of each flag given (bool flags as "true"/"false").
type invocation struct {
	Binary string
	Values map[string]string
	Order  []string // flag names in the order given
	// ROSArgs are the --ros-args sections as written (each without its
	// --ros-args), and ROS what the binaries make of them.
	ROSArgs [][]string
	ROS     *rosargs.Args
}

// value returns the flag's value as given, else its --help default.
func (inv invocation) value(name string, fs flagSet) (string, bool) {
	if v, ok := inv.Values[name]; ok {
		return v, true
	}
	if f, ok := fs[name]; ok && f.Default != "" {
		return f.Default, true
	}
	return "", false
}

// parseCommand reads args (exec form, args[0] the binary) as the binaries
// do: the --ros-args sections taken out and read as rcl reads them, the
// rest as Go's flag package would: -name or --name, =value or a separate
// value for non-bool flags; no positional arguments (the binaries refuse
// them). Every flag must be in fs.
func parseCommand(args []string, fs flagSet) (invocation, error) {
	if len(args) == 0 {
		return invocation{}, fmt.Errorf("empty command")
	}
	inv := invocation{Binary: path.Base(args[0]), Values: map[string]string{}}
	own, sections := rosargs.Split(args[1:])
	ros, err := rosargs.Parse(sections...)
	if err != nil {
		return inv, fmt.Errorf("%s: %w", inv.Binary, err)
	}
	inv.ROSArgs, inv.ROS = sections, ros
	args = append(args[:1:1], own...)
	for i := 1; i < len(args); i++ {
		a := args[i]
		if a == "--" || !strings.HasPrefix(a, "-") {
			return inv, fmt.Errorf("%s: argument %q: the binary takes flags only", inv.Binary, a)
		}
		name, val, hasVal := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-"), "=")
		f, ok := fs[name]
		if !ok {
			return inv, fmt.Errorf("%s: flag --%s is not in `%s --help`", inv.Binary, name, inv.Binary)
		}
		if _, dup := inv.Values[name]; dup {
			return inv, fmt.Errorf("%s: flag --%s given twice", inv.Binary, name)
		}
		switch {
		case f.Bool && !hasVal:
			val = "true"
		case f.Bool:
			if _, err := strconv.ParseBool(val); err != nil {
				return inv, fmt.Errorf("%s: --%s=%q: not a boolean", inv.Binary, name, val)
			}
		case !hasVal:
			if i+1 >= len(args) {
				return inv, fmt.Errorf("%s: flag --%s needs a value", inv.Binary, name)
			}
			i++
			val = args[i]
		}
		inv.Values[name] = val
		inv.Order = append(inv.Order, name)
	}
	return inv, nil
}

// unknownFlags lists the flags of args that fs lacks (for a clear report
// before parseCommand stops at the first).
func unknownFlags(args []string, fs flagSet) []string {
	var out []string
	own, _ := rosargs.Split(args[1:])
	for _, a := range own {
		if !strings.HasPrefix(a, "-") || a == "--" {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if _, ok := fs[name]; !ok {
			out = append(out, "--"+name)
		}
	}
	return out
}

// sourceFlags reads the flags a Go file registers on a FlagSet (fs.Bool,
// fs.StringVar, fs.Var, ...), for flags that exist only in one build of a
// binary.
var sourceFlagRe = regexp.MustCompile(`\bfs\.(?:(Bool|String|Int|Int64|Uint|Uint64|Float64|Duration)(Var)?|Var)\((?:&[^,]+,\s*)?"([^"]+)"`)

func sourceFlags(file string) (flagSet, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	fs := flagSet{}
	for _, m := range sourceFlagRe.FindAllStringSubmatch(string(data), -1) {
		fs[m[3]] = flagSpec{Name: m[3], Bool: m[1] == "Bool"}
	}
	if len(fs) == 0 {
		return nil, fmt.Errorf("%s: no flag registrations found", file)
	}
	return fs, nil
}

func mergeFlags(sets ...flagSet) flagSet {
	out := flagSet{}
	for _, s := range sets {
		for k, v := range s {
			out[k] = v
		}
	}
	return out
}
