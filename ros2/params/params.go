// Package params holds a node's ROS 2 parameters as `ros2 param` sees
// them: names, typed values and descriptors, and the rules by which
// rclcpp's parameter services list, get and set them. It is pure Go: the
// ros2 package serves a Set over DDS (Participant.ServeParameters), and
// FromFlags makes one from a program's flags, the reverse of the
// parameter-to-flag mapping of package rosargs.
//
// zerohop's nodes read most parameters once, at start: those are
// read-only, and a set request is refused with a reason that says how to
// change it (restart with -p NAME:=VALUE). That is the truth about the
// node, where a setting accepted but not applied would not be. A
// parameter the node can change while it runs (log_level) has an Apply
// function; a set calls it and, when it succeeds, stores the new value.
package params

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Type is rcl_interfaces/msg/ParameterType.
type Type uint8

// The parameter types of rcl_interfaces/msg/ParameterType.
const (
	NotSet       Type = 0
	Bool         Type = 1
	Integer      Type = 2
	Double       Type = 3
	String       Type = 4
	ByteArray    Type = 5
	BoolArray    Type = 6
	IntegerArray Type = 7
	DoubleArray  Type = 8
	StringArray  Type = 9
)

func (t Type) String() string {
	switch t {
	case NotSet:
		return "not set"
	case Bool:
		return "boolean"
	case Integer:
		return "integer"
	case Double:
		return "double"
	case String:
		return "string"
	case ByteArray:
		return "byte array"
	case BoolArray:
		return "boolean array"
	case IntegerArray:
		return "integer array"
	case DoubleArray:
		return "double array"
	case StringArray:
		return "string array"
	}
	return "Type(" + strconv.Itoa(int(t)) + ")"
}

// Value is a scalar rcl_interfaces/msg/ParameterValue: the field Type
// names is the one that holds it. Arrays are not represented: zerohop's
// lists are comma-separated strings.
type Value struct {
	Type    Type
	Bool    bool
	Integer int64
	Double  float64
	String  string
}

func (v Value) Format() string {
	switch v.Type {
	case Bool:
		return strconv.FormatBool(v.Bool)
	case Integer:
		return strconv.FormatInt(v.Integer, 10)
	case Double:
		return strconv.FormatFloat(v.Double, 'g', -1, 64)
	case String:
		return strconv.Quote(v.String)
	}
	return v.Type.String()
}

// Parameter is one declared parameter and its descriptor.
type Parameter struct {
	Name        string
	Value       Value
	Description string
	Constraints string // additional_constraints: free text for people
	ReadOnly    bool
	// Apply puts a new value (of the parameter's type) into effect, or
	// says why it cannot; required unless ReadOnly. Set calls it with the
	// set's lock held: one at a time.
	Apply func(Value) error
	// Range, if set, is a double's floating_point_range: what
	// rqt_reconfigure draws a slider for. Apply still judges each value
	// (a range cannot say "above 0").
	Range *Range
}

// Range is an rcl_interfaces/FloatingPointRange: From to To inclusive;
// Step 0 is any value between.
type Range struct{ From, To, Step float64 }

// Set is a node's declared parameters, ordered by name (as rclcpp keeps
// them). The names and descriptors are fixed; the values of writable
// parameters change through Set. Safe for concurrent use.
type Set struct {
	mu     sync.RWMutex
	params []Parameter // values under mu
	index  map[string]int
	// applyAll, if set, puts an atomic request's values into effect all
	// at once or not at all (SetApplyAtomically).
	applyAll func(names []string, values []Value) error
}

// SetApplyAtomically makes SetAtomically hand its whole request to apply,
// which puts every value into effect or none (saying why), instead of
// calling each parameter's Apply in turn: for parameters whose values
// are judged together (a stop distance below a slow distance), so that
// raising both in one request works whatever their order, as an rclcpp
// node's set-parameters callback sees the whole request. Call it before
// the set is shared.
func (s *Set) SetApplyAtomically(apply func(names []string, values []Value) error) {
	s.applyAll = apply
}

// Separator splits parameter names into prefixes, as rclcpp's
// list_parameters does ("diagnostic_updater.period" has the prefix
// "diagnostic_updater").
const Separator = "."

// NewSet checks the parameters' names (non-empty, unique, valid ROS
// parameter names) and orders them by name.
func NewSet(ps []Parameter) (*Set, error) {
	s := &Set{params: slices.Clone(ps), index: make(map[string]int, len(ps))}
	slices.SortFunc(s.params, func(a, b Parameter) int { return strings.Compare(a.Name, b.Name) })
	var errs []error
	for i, p := range s.params {
		if err := checkName(p.Name); err != nil {
			errs = append(errs, err)
			continue
		}
		if _, dup := s.index[p.Name]; dup {
			errs = append(errs, fmt.Errorf("params: parameter %q declared twice", p.Name))
			continue
		}
		if !p.ReadOnly && p.Apply == nil {
			errs = append(errs, fmt.Errorf("params: parameter %q is writable but has no Apply", p.Name))
			continue
		}
		s.index[p.Name] = i
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return s, nil
}

// checkName accepts what rcl accepts as a parameter name: tokens of
// letters, digits and '_' joined by '.', not starting with a digit.
func checkName(name string) error {
	if name == "" {
		return errors.New("params: empty parameter name")
	}
	for _, tok := range strings.Split(name, Separator) {
		ok := tok != "" && !(tok[0] >= '0' && tok[0] <= '9')
		for i := 0; ok && i < len(tok); i++ {
			c := tok[i]
			ok = c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		}
		if !ok {
			return fmt.Errorf("params: parameter name %q: want letters, digits and '_' in tokens joined by %q", name, Separator)
		}
	}
	return nil
}

// Len is the number of parameters.
func (s *Set) Len() int { return len(s.params) }

// All returns the parameters in name order; the slice is the caller's.
func (s *Set) All() []Parameter {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.Clone(s.params)
}

// Get returns the parameter of that name, with its current value.
func (s *Set) Get(name string) (Parameter, bool) {
	i, ok := s.index[name]
	if !ok {
		return Parameter{}, false
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.params[i], true
}

// DepthRecursive is ListParameters' depth for "all levels".
const DepthRecursive = 0

// List answers rcl_interfaces/srv/ListParameters as rclcpp's
// NodeParameters::list_parameters does: with no prefixes, every name with
// fewer than depth separators (all of them for DepthRecursive); with
// prefixes, the names equal to one, or under one ("prefix.") with fewer
// than depth separators after it. prefixes are the distinct parents (the
// name up to its last separator) of the names listed, in first-seen order.
func (s *Set) List(prefixes []string, depth uint64) (names, parents []string) {
	below := func(rest string) bool {
		return depth == DepthRecursive || uint64(strings.Count(rest, Separator)) < depth
	}
	for _, p := range s.params {
		match := len(prefixes) == 0 && below(p.Name)
		for _, pre := range prefixes {
			if match {
				break
			}
			if p.Name == pre {
				match = true
			} else if rest, ok := strings.CutPrefix(p.Name, pre+Separator); ok {
				// Separators after the prefix's own one count.
				match = below(rest)
			}
		}
		if !match {
			continue
		}
		names = append(names, p.Name)
		if i := strings.LastIndex(p.Name, Separator); i >= 0 && !slices.Contains(parents, p.Name[:i]) {
			parents = append(parents, p.Name[:i])
		}
	}
	return names, parents
}

// Set sets one parameter, as set_parameters does for each of its list:
// it checks the name, type and writability (Check), then applies the
// value and stores it. The reason (for a SetParametersResult) says why it
// failed.
func (s *Set) Set(name string, v Value) (ok bool, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.setLocked(name, v)
}

func (s *Set) setLocked(name string, v Value) (bool, string) {
	if ok, reason := s.checkLocked(name, v); !ok {
		return false, reason
	}
	p := &s.params[s.index[name]]
	if err := p.Apply(v); err != nil {
		return false, fmt.Sprintf("parameter '%s' = %s: %v", name, v.Format(), err)
	}
	p.Value = v
	return true, ""
}

// SetAtomically sets every (names[i], values[i]) or none, as
// set_parameters_atomically does: all are checked first, and the first
// that fails the check fails the whole. Then the values go into effect
// through SetApplyAtomically's function, or else each parameter's Apply
// in turn; when one fails, those applied before it get their old values
// back, in reverse order (each step back returns to a state Apply took
// before), and nothing changes.
func (s *Set) SetAtomically(names []string, values []Value) (ok bool, reason string) {
	if len(names) != len(values) {
		return false, fmt.Sprintf("%d names, %d values", len(names), len(values))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, name := range names {
		if ok, reason := s.checkLocked(name, values[i]); !ok {
			return false, reason
		}
	}
	if s.applyAll != nil {
		if err := s.applyAll(names, values); err != nil {
			return false, fmt.Sprintf("parameters %s: %v (none was set)", strings.Join(names, ", "), err)
		}
		for i, name := range names {
			s.params[s.index[name]].Value = values[i]
		}
		return true, ""
	}
	olds := make([]Value, 0, len(names)) // each value before its step
	for i, name := range names {
		olds = append(olds, s.params[s.index[name]].Value)
		if ok, reason := s.setLocked(name, values[i]); !ok {
			for j := i - 1; j >= 0; j-- {
				p := &s.params[s.index[names[j]]]
				if err := p.Apply(olds[j]); err != nil {
					return false, reason + fmt.Sprintf(" (and '%s' could not be put back to %s: %v; it stays %s)", names[j], olds[j].Format(), err, p.Value.Format())
				}
				p.Value = olds[j]
			}
			return false, reason + " (none was set)"
		}
	}
	return true, ""
}

// Check says whether setting name to v would pass the checks (declared,
// writable, same type), and why not.
func (s *Set) Check(name string, v Value) (ok bool, reason string) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.checkLocked(name, v)
}

func (s *Set) checkLocked(name string, v Value) (ok bool, reason string) {
	i, declared := s.index[name]
	var p Parameter
	if declared {
		p = s.params[i]
	}
	switch {
	case !declared:
		return false, fmt.Sprintf("parameter '%s' is not declared by this node (ros2 param list shows the ones it has)", name)
	case p.ReadOnly:
		return false, fmt.Sprintf("parameter '%s' is read-only: this node reads its parameters at start; restart it with --ros-args -p %s:=%s (or set it in the launch file's parameters)",
			name, name, paramText(v, p.Value.Type))
	case v.Type == Integer && p.Value.Type == Double:
		// ros2 param set reads 1 as an integer, as YAML does; rclcpp
		// refuses it for a double too, so say how to write it.
		return false, fmt.Sprintf("parameter '%s' is of type %s, not %s (write %d.0)", name, p.Value.Type, v.Type, v.Integer)
	case v.Type != p.Value.Type:
		return false, fmt.Sprintf("parameter '%s' is of type %s, not %s", name, p.Value.Type, v.Type)
	}
	return true, ""
}

// paramText writes v as a -p rule's YAML value for a parameter of type
// declared: a string is quoted only where YAML would read another type.
func paramText(v Value, declared Type) string {
	if v.Type == String && declared != String {
		return v.String
	}
	if v.Type == String {
		if _, err := strconv.ParseFloat(v.String, 64); err == nil || v.String == "" || strings.ContainsAny(v.String, " :#'\"") {
			return strconv.Quote(v.String)
		}
		return v.String
	}
	if v.Type == NotSet {
		return "VALUE"
	}
	return v.Format()
}
