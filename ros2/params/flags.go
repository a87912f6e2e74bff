package params

import (
	"flag"
	"fmt"
	"math"
	"strings"
	"time"
)

// ReadAtStart is the additional_constraints text of FromFlags' parameters.
const ReadAtStart = "read at start: restart the node to change it"

// FromFlags declares a read-only parameter for each flag of fs, named as
// package rosargs maps parameters to flags in reverse: --lidar-height is
// lidar_height. Each alias (a ROS parameter name the ecosystem uses, e.g.
// "diagnostic_updater.period" for --diagnostics-period) is declared too,
// with its flag's value. Flags named in hide are left out (the node's
// name and namespace flags: ROS tools show those as the node itself).
//
// Types follow the flags' values (flag.Getter): bool is a boolean,
// integers an integer, float64 a double, a time.Duration a double in
// seconds (as a -p rule gives it), anything else a string. Call it after
// the flags are parsed: the values are the ones the node runs with.
func FromFlags(fs *flag.FlagSet, aliases map[string]string, hide ...string) (*Set, error) {
	hidden := map[string]bool{}
	for _, h := range hide {
		hidden[h] = true
	}
	var ps []Parameter
	byFlag := map[string]Parameter{}
	fs.VisitAll(func(f *flag.Flag) {
		if hidden[f.Name] {
			return
		}
		p := Parameter{Name: strings.ReplaceAll(f.Name, "-", "_"), Value: flagValue(f),
			Description: f.Usage + " (flag --" + f.Name + ")", Constraints: ReadAtStart, ReadOnly: true}
		if _, ok := f.Value.(flag.Getter); ok {
			if _, isDur := f.Value.(flag.Getter).Get().(time.Duration); isDur {
				p.Description += "; in seconds"
			}
		}
		ps = append(ps, p)
		byFlag[f.Name] = p
	})
	for alias, name := range aliases {
		p, ok := byFlag[name]
		if !ok {
			if hidden[name] {
				continue
			}
			return nil, fmt.Errorf("params: alias %q names no flag --%s", alias, name)
		}
		p.Name = alias
		ps = append(ps, p)
	}
	return NewSet(ps)
}

// flagValue types a flag's current value.
func flagValue(f *flag.Flag) Value {
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return Value{Type: String, String: f.Value.String()}
	}
	switch v := g.Get().(type) {
	case bool:
		return Value{Type: Bool, Bool: v}
	case int:
		return Value{Type: Integer, Integer: int64(v)}
	case int64:
		return Value{Type: Integer, Integer: v}
	case uint:
		if uint64(v) <= math.MaxInt64 {
			return Value{Type: Integer, Integer: int64(v)}
		}
	case uint64:
		if v <= math.MaxInt64 {
			return Value{Type: Integer, Integer: int64(v)}
		}
	case float64:
		return Value{Type: Double, Double: v}
	case time.Duration:
		return Value{Type: Double, Double: v.Seconds()}
	case string:
		return Value{Type: String, String: v}
	}
	return Value{Type: String, String: f.Value.String()}
}
