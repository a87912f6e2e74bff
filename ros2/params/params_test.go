package params

import (
	"errors"
	"flag"
	"slices"
	"strings"
	"testing"
	"time"
)

func names(t *testing.T, ns ...string) *Set {
	t.Helper()
	var ps []Parameter
	for _, n := range ns {
		ps = append(ps, Parameter{Name: n, Value: Value{Type: Integer, Integer: 1}, ReadOnly: true})
	}
	s, err := NewSet(ps)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The rows follow rclcpp's NodeParameters::list_parameters: depth counts
// separators of the whole name without prefixes, and of the part after
// "prefix." with them; 0 is recursive.
func TestList(t *testing.T) {
	s := names(t, "use_sim_time", "watchdog", "diagnostic_updater.period", "a.b.c", "a.b", "ab.c")
	for _, tc := range []struct {
		prefixes      []string
		depth         uint64
		names, values string
	}{
		{nil, 0, "a.b a.b.c ab.c diagnostic_updater.period use_sim_time watchdog", "a a.b ab diagnostic_updater"},
		{nil, 1, "use_sim_time watchdog", ""},
		{nil, 2, "a.b ab.c diagnostic_updater.period use_sim_time watchdog", "a ab diagnostic_updater"},
		{[]string{"a"}, 0, "a.b a.b.c", "a a.b"},
		{[]string{"a"}, 1, "a.b", "a"},
		{[]string{"a"}, 2, "a.b a.b.c", "a a.b"},
		{[]string{"a.b"}, 1, "a.b a.b.c", "a a.b"}, // the prefix itself, and one level under it
		{[]string{"watchdog", "diagnostic_updater"}, 1, "diagnostic_updater.period watchdog", "diagnostic_updater"},
		{[]string{"nothing"}, 0, "", ""},
	} {
		gotNames, gotPrefixes := s.List(tc.prefixes, tc.depth)
		if g := strings.Join(gotNames, " "); g != tc.names {
			t.Errorf("List(%q, %d) names %q, want %q", tc.prefixes, tc.depth, g, tc.names)
		}
		if g := strings.Join(gotPrefixes, " "); g != tc.values {
			t.Errorf("List(%q, %d) prefixes %q, want %q", tc.prefixes, tc.depth, g, tc.values)
		}
	}
}

func TestNewSetRefusesBadNames(t *testing.T) {
	for _, bad := range [][]string{{""}, {"a..b"}, {"1a"}, {"a-b"}, {"a", "a"}, {"a.", "b"}} {
		var ps []Parameter
		for _, n := range bad {
			ps = append(ps, Parameter{Name: n})
		}
		if _, err := NewSet(ps); err == nil {
			t.Errorf("NewSet(%q): no error", bad)
		}
	}
	if _, err := NewSet([]Parameter{{Name: "lidar_height", ReadOnly: true}, {Name: "diagnostic_updater.period", ReadOnly: true}, {Name: "_x9", ReadOnly: true}}); err != nil {
		t.Error(err)
	}
	if _, err := NewSet([]Parameter{{Name: "writable_without_apply"}}); err == nil {
		t.Error("a writable parameter without Apply: no error")
	}
}

func TestCheck(t *testing.T) {
	s, err := NewSet([]Parameter{
		{Name: "watchdog", Value: Value{Type: Double, Double: 0.2}, ReadOnly: true},
		{Name: "mode", Value: Value{Type: String, String: "x"}, Apply: func(Value) error { return nil }},
		{Name: "label", Value: Value{Type: String, String: "x"}, ReadOnly: true},
		{Name: "gain", Value: Value{Type: Double, Double: 1.5}, Apply: func(Value) error { return nil }},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		v      Value
		ok     bool
		reason string
	}{
		{"watchdog", Value{Type: Double, Double: 0.3}, false, "restart it with --ros-args -p watchdog:=0.3"},
		{"watchdog", Value{Type: String, String: "0.3"}, false, `-p watchdog:=0.3 `},
		{"nope", Value{Type: Bool, Bool: true}, false, "'nope' is not declared"},
		{"mode", Value{Type: Integer, Integer: 3}, false, "is of type string, not integer"},
		{"mode", Value{Type: String, String: "y"}, true, ""},
		{"gain", Value{Type: Integer, Integer: 2}, false, "'gain' is of type double, not integer (write 2.0)"},
		{"gain", Value{Type: Double, Double: 2}, true, ""},
		{"label", Value{Type: String, String: "1.5"}, false, `-p label:="1.5" `},
		{"label", Value{Type: String, String: "a b"}, false, `-p label:="a b" `},
		{"label", Value{Type: String, String: "abc"}, false, `-p label:=abc `},
	} {
		ok, reason := s.Check(tc.name, tc.v)
		if ok != tc.ok || !strings.Contains(reason, tc.reason) || (tc.reason == "" && reason != "") {
			t.Errorf("Check(%s, %+v) = %v, %q; want %v, %q", tc.name, tc.v, ok, reason, tc.ok, tc.reason)
		}
	}
}

func TestFromFlags(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.Bool("ros2", false, "publish")
	fs.Int("max-points", 5, "most points")
	fs.Float64("lidar-height", 1.5, "height in `metres`")
	fs.Duration("diagnostics-period", time.Second, "period")
	fs.String("ros2-node-name", "n", "node")
	fs.String("camera", "synthetic", "source")
	fs.Uint64("seed", 7, "seed")
	if err := fs.Parse([]string{"--max-points", "9", "--diagnostics-period", "250ms", "--ros2"}); err != nil {
		t.Fatal(err)
	}
	var applied []Value
	s, err := FromFlags(fs, FlagOptions{Aliases: map[string]string{"diagnostic_updater.period": "diagnostics-period"}, Hide: []string{"ros2-node-name"},
		Writable: map[string]func(Value) error{"camera": func(v Value) error { applied = append(applied, v); return nil }}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Value{
		"ros2":                      {Type: Bool, Bool: true},
		"max_points":                {Type: Integer, Integer: 9},
		"lidar_height":              {Type: Double, Double: 1.5},
		"diagnostics_period":        {Type: Double, Double: 0.25},
		"diagnostic_updater.period": {Type: Double, Double: 0.25},
		"camera":                    {Type: String, String: "synthetic"},
		"seed":                      {Type: Integer, Integer: 7},
	}
	var got []string
	for _, p := range s.All() {
		got = append(got, p.Name)
		if p.Value != want[p.Name] {
			t.Errorf("%s = %+v, want %+v", p.Name, p.Value, want[p.Name])
		}
		writable := p.Name == "camera"
		if p.ReadOnly == writable || (p.Constraints == ReadAtStart) == writable || (p.Apply != nil) != writable || !strings.Contains(p.Description, "(flag --") {
			t.Errorf("%s: descriptor %+v", p.Name, p)
		}
	}
	if p, _ := s.Get("lidar_height"); p.Description != "height in metres (flag --lidar-height)" {
		t.Errorf("lidar_height's description %q: want --help's words without the value name's quotes", p.Description)
	}
	if !slices.IsSorted(got) || len(got) != len(want) {
		t.Errorf("parameters %q: want the %d of %v, sorted (the node name flag hidden)", got, len(want), want)
	}
	if ok, reason := s.Set("camera", Value{Type: String, String: "replay:x"}); !ok || len(applied) != 1 || applied[0].String != "replay:x" {
		t.Errorf("Set(camera) = %v %q, applied %+v", ok, reason, applied)
	}
	if p, _ := s.Get("camera"); p.Value.String != "replay:x" {
		t.Errorf("camera after Set: %+v", p.Value)
	}
	if _, err := FromFlags(fs, FlagOptions{Aliases: map[string]string{"x.y": "no-such-flag"}}); err == nil {
		t.Error("an alias of no flag: no error")
	}
	if _, err := FromFlags(fs, FlagOptions{Writable: map[string]func(Value) error{"nope": nil}}); err == nil {
		t.Error("a writable flag that does not exist: no error")
	}
}

// A float flag's range is its parameters' floating_point_range, aliases
// included; a range on another kind of flag, or upside down, is refused.
func TestFromFlagsRanges(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.Float64("lidar-height", 1.5, "height")
	fs.Duration("diagnostics-period", time.Second, "period")
	fs.Int("max-points", 5, "most points")
	s, err := FromFlags(fs, FlagOptions{Aliases: map[string]string{"diagnostic_updater.period": "diagnostics-period"},
		Ranges: map[string]Range{"lidar-height": {From: 0, To: 100}, "diagnostics-period": {From: 0.01, To: 3600, Step: 0.01}}})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]*Range{"lidar_height": {0, 100, 0}, "diagnostics_period": {0.01, 3600, 0.01},
		"diagnostic_updater.period": {0.01, 3600, 0.01}, "max_points": nil} {
		p, _ := s.Get(name)
		if (p.Range == nil) != (want == nil) || (want != nil && *p.Range != *want) {
			t.Errorf("%s: range %+v, want %+v", name, p.Range, want)
		}
	}
	for _, ranges := range []map[string]Range{{"max-points": {0, 9, 0}}, {"nope": {0, 1, 0}}, {"lidar-height": {5, 1, 0}}, {"lidar-height": {0, 1, -1}}} {
		if _, err := FromFlags(fs, FlagOptions{Ranges: ranges}); err == nil {
			t.Errorf("ranges %v: no error", ranges)
		}
	}
}

// Set applies and stores; SetAtomically checks every parameter before it
// applies any, and a failing Apply leaves the value as it was.
func TestSet(t *testing.T) {
	var log []string
	apply := func(name string) func(Value) error {
		return func(v Value) error {
			if v.String == "bad" {
				return errors.New("refused")
			}
			log = append(log, name+"="+v.String)
			return nil
		}
	}
	s, err := NewSet([]Parameter{
		{Name: "a", Value: Value{Type: String, String: "0"}, Apply: apply("a")},
		{Name: "b", Value: Value{Type: String, String: "0"}, Apply: apply("b")},
		{Name: "ro", Value: Value{Type: String, String: "0"}, ReadOnly: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	str := func(s string) Value { return Value{Type: String, String: s} }
	value := func(name string) string { p, _ := s.Get(name); return p.Value.String }
	if ok, reason := s.Set("a", str("bad")); ok || !strings.Contains(reason, `parameter 'a' = "bad": refused`) || value("a") != "0" {
		t.Errorf("Set(a, bad) = %v %q; a = %q", ok, reason, value("a"))
	}
	if ok, _ := s.Set("a", str("1")); !ok || value("a") != "1" {
		t.Errorf("Set(a, 1) = %v; a = %q", ok, value("a"))
	}
	// A read-only one in the request: nothing is applied.
	if ok, reason := s.SetAtomically([]string{"a", "ro"}, []Value{str("2"), str("2")}); ok || !strings.Contains(reason, "'ro' is read-only") || value("a") != "1" {
		t.Errorf("SetAtomically(a, ro) = %v %q; a = %q", ok, reason, value("a"))
	}
	if ok, _ := s.SetAtomically([]string{"a", "b"}, []Value{str("3"), str("3")}); !ok || value("a") != "3" || value("b") != "3" {
		t.Errorf("SetAtomically(a, b): a = %q, b = %q", value("a"), value("b"))
	}
	// b's Apply refuses: a, applied before it, is put back.
	if ok, reason := s.SetAtomically([]string{"a", "b"}, []Value{str("4"), str("bad")}); ok || !strings.Contains(reason, "(none was set)") || value("a") != "3" || value("b") != "3" {
		t.Errorf("SetAtomically(a, b=bad) = %v %q; a = %q, b = %q", ok, reason, value("a"), value("b"))
	}
	// The same name twice, the second refused: back to the first's old value.
	if ok, _ := s.SetAtomically([]string{"a", "a", "a"}, []Value{str("5"), str("6"), str("bad")}); ok || value("a") != "3" {
		t.Errorf("SetAtomically(a, a, a=bad) = %v; a = %q", ok, value("a"))
	}
	if got := strings.Join(log, " "); got != "a=1 a=3 b=3 a=4 a=3 a=5 a=6 a=5 a=3" {
		t.Errorf("applied %q", got)
	}
}

// With SetApplyAtomically the whole request goes to one function, which
// takes all or nothing; Set still applies one parameter at a time.
func TestSetApplyAtomically(t *testing.T) {
	var lo, hi float64 = 1, 3
	one := func(which *float64, other func() bool) func(Value) error {
		return func(v Value) error {
			old := *which
			if *which = v.Double; !other() {
				*which = old
				return errors.New("lo must stay below hi")
			}
			return nil
		}
	}
	ordered := func() bool { return lo < hi }
	s, err := NewSet([]Parameter{
		{Name: "lo", Value: Value{Type: Double, Double: lo}, Apply: one(&lo, ordered)},
		{Name: "hi", Value: Value{Type: Double, Double: hi}, Apply: one(&hi, ordered)},
	})
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	s.SetApplyAtomically(func(names []string, values []Value) error {
		calls++
		nlo, nhi := lo, hi
		for i, n := range names {
			if n == "lo" {
				nlo = values[i].Double
			} else {
				nhi = values[i].Double
			}
		}
		if nlo >= nhi {
			return errors.New("lo must stay below hi")
		}
		lo, hi = nlo, nhi
		return nil
	})
	d := func(v float64) Value { return Value{Type: Double, Double: v} }
	// Both raised past each other's old value: fine as a whole.
	if ok, reason := s.SetAtomically([]string{"lo", "hi"}, []Value{d(4), d(6)}); !ok || lo != 4 || hi != 6 {
		t.Fatalf("SetAtomically(lo 4, hi 6) = %v %q; lo %v hi %v", ok, reason, lo, hi)
	}
	if ok, reason := s.SetAtomically([]string{"lo", "hi"}, []Value{d(7), d(5)}); ok || !strings.Contains(reason, "parameters lo, hi: lo must stay below hi (none was set)") || lo != 4 || hi != 6 {
		t.Errorf("SetAtomically(lo 7, hi 5) = %v %q; lo %v hi %v", ok, reason, lo, hi)
	}
	if p, _ := s.Get("lo"); p.Value.Double != 4 || calls != 2 {
		t.Errorf("lo reads %v after the refused request; %d atomic calls", p.Value.Double, calls)
	}
	if ok, _ := s.Set("lo", d(5)); !ok || lo != 5 || calls != 2 {
		t.Errorf("Set(lo 5) = %v; lo %v; %d atomic calls (want Apply, not the atomic function)", ok, lo, calls)
	}
}

// A flag the node changed after FromFlags (the LiDAR's mount from
// /tf_static) shows as its read-only parameter's value; a change of type
// or a flag without a parameter is refused, leaving the value.
func TestRefreshFromFlag(t *testing.T) {
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	height := fs.Float64("lidar-height", 0, "")
	fs.String("lidar-xy", "0,0", "")
	fs.Int("beams", 64, "")
	s, err := FromFlags(fs, FlagOptions{Hide: []string{"beams"}})
	if err != nil {
		t.Fatal(err)
	}
	*height = 0.62
	if err := fs.Set("lidar-xy", "0.2,0"); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"lidar-height", "lidar-xy"} {
		if err := s.RefreshFromFlag(fs.Lookup(name)); err != nil {
			t.Fatal(err)
		}
	}
	if p, _ := s.Get("lidar_height"); p.Value.Type != Double || p.Value.Double != 0.62 || !p.ReadOnly {
		t.Errorf("lidar_height %+v, want the read-only double 0.62", p)
	}
	if p, _ := s.Get("lidar_xy"); p.Value.String != "0.2,0" {
		t.Errorf("lidar_xy %+v, want 0.2,0", p.Value)
	}
	if err := s.RefreshFromFlag(fs.Lookup("beams")); err == nil || !strings.Contains(err.Error(), `no parameter "beams"`) {
		t.Errorf("refresh of a hidden flag: %v", err)
	}
	other := flag.NewFlagSet("other", flag.ContinueOnError)
	other.Int("lidar-height", 2, "")
	if err := s.RefreshFromFlag(other.Lookup("lidar-height")); err == nil || !strings.Contains(err.Error(), "--lidar-height") {
		t.Errorf("refresh with an integer for a double: %v", err)
	}
	if p, _ := s.Get("lidar_height"); p.Value.Double != 0.62 {
		t.Errorf("lidar_height %v after a refused refresh, want 0.62 kept", p.Value)
	}
}
