package params

import (
	"flag"
	"fmt"
	"math"
	"strings"
	"time"
)

// ReadAtStart is the additional_constraints text of FromFlags' read-only
// parameters; ChangesWhileRunning that of its writable ones.
const (
	ReadAtStart         = "read at start: restart the node to change it"
	ChangesWhileRunning = "changes while the node runs (ros2 param set)"
)

// FlagOptions say how FromFlags turns flags into parameters.
type FlagOptions struct {
	// Aliases are ROS parameter names the ecosystem uses for flags of
	// other names ("diagnostic_updater.period": "diagnostics-period");
	// each is declared too, with its flag's value.
	Aliases map[string]string
	// Hide names flags left out: the node's name and namespace flags,
	// which ROS tools show as the node itself.
	Hide []string
	// Writable maps the flags the node can change while it runs to the
	// function that does it (Parameter.Apply); every other parameter is
	// read-only.
	Writable map[string]func(Value) error
	// Ranges give float flags' parameters their Range.
	Ranges map[string]Range
	// ApplyAtomically, if set, is the set's SetApplyAtomically: it gets
	// an atomic request's parameter names and values.
	ApplyAtomically func(names []string, values []Value) error
}

// FromFlags declares a parameter for each flag of fs, named as package
// rosargs maps parameters to flags in reverse: --lidar-height is
// lidar_height.
//
// Types follow the flags' values (flag.Getter): bool is a boolean,
// integers an integer, float64 a double, a time.Duration a double in
// seconds (as a -p rule gives it), anything else a string. Call it after
// the flags are parsed: the values are the ones the node runs with.
func FromFlags(fs *flag.FlagSet, opt FlagOptions) (*Set, error) {
	hidden := map[string]bool{}
	for _, h := range opt.Hide {
		hidden[h] = true
	}
	for name := range opt.Writable {
		if fs.Lookup(name) == nil || hidden[name] {
			return nil, fmt.Errorf("params: writable flag --%s: no such flag", name)
		}
	}
	for name, r := range opt.Ranges {
		if f := fs.Lookup(name); f == nil || hidden[name] || flagValue(f).Type != Double {
			return nil, fmt.Errorf("params: range of flag --%s: no such flag of floating-point value", name)
		}
		if !(r.From <= r.To) || r.Step < 0 {
			return nil, fmt.Errorf("params: range of flag --%s: %v to %v step %v", name, r.From, r.To, r.Step)
		}
	}
	var ps []Parameter
	byFlag := map[string]Parameter{}
	fs.VisitAll(func(f *flag.Flag) {
		if hidden[f.Name] {
			return
		}
		_, usage := flag.UnquoteUsage(f) // without --help's `name` quotes
		p := Parameter{Name: strings.ReplaceAll(f.Name, "-", "_"), Value: flagValue(f),
			Description: usage + " (flag --" + f.Name + ")", Constraints: ReadAtStart, ReadOnly: true}
		if g, ok := f.Value.(flag.Getter); ok {
			if _, isDur := g.Get().(time.Duration); isDur {
				p.Description += "; in seconds"
			}
		}
		if apply := opt.Writable[f.Name]; apply != nil {
			p.Apply, p.ReadOnly, p.Constraints = apply, false, ChangesWhileRunning
		}
		if r, ok := opt.Ranges[f.Name]; ok {
			p.Range = &r
		}
		ps = append(ps, p)
		byFlag[f.Name] = p
	})
	for alias, name := range opt.Aliases {
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
	s, err := NewSet(ps)
	if err != nil {
		return nil, err
	}
	if opt.ApplyAtomically != nil {
		s.SetApplyAtomically(opt.ApplyAtomically)
	}
	return s, nil
}

// RefreshFromFlag stores flag's current value as its parameter's, for a
// value the node itself changed after FromFlags, read-only parameters
// included (the agent's LiDAR mount, read from /tf_static at start):
// nothing is applied, and the caller announces the change. The value must
// keep the parameter's type.
func (s *Set) RefreshFromFlag(f *flag.Flag) error {
	name := strings.ReplaceAll(f.Name, "-", "_")
	i, ok := s.index[name]
	if !ok {
		return fmt.Errorf("params: refresh --%s: no parameter %q", f.Name, name)
	}
	v := flagValue(f)
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.params[i].Value.Type; v.Type != old {
		return fmt.Errorf("params: refresh --%s: value %s is %v, the parameter %v", f.Name, v.Format(), v.Type, old)
	}
	s.params[i].Value = v
	return nil
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

// StringApply adapts a setter of a string to Parameter.Apply (Set has
// already checked that the value is a string).
func StringApply(set func(string) error) func(Value) error {
	return func(v Value) error { return set(v.String) }
}
