package params

import (
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
	if _, err := NewSet([]Parameter{{Name: "lidar_height"}, {Name: "diagnostic_updater.period"}, {Name: "_x9"}}); err != nil {
		t.Error(err)
	}
}

func TestCheck(t *testing.T) {
	s, err := NewSet([]Parameter{
		{Name: "watchdog", Value: Value{Type: Double, Double: 0.2}, ReadOnly: true},
		{Name: "mode", Value: Value{Type: String, String: "x"}},
		{Name: "label", Value: Value{Type: String, String: "x"}, ReadOnly: true},
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
	fs.Float64("lidar-height", 1.5, "height")
	fs.Duration("diagnostics-period", time.Second, "period")
	fs.String("ros2-node-name", "n", "node")
	fs.String("camera", "synthetic", "source")
	fs.Uint64("seed", 7, "seed")
	if err := fs.Parse([]string{"--max-points", "9", "--diagnostics-period", "250ms", "--ros2"}); err != nil {
		t.Fatal(err)
	}
	s, err := FromFlags(fs, map[string]string{"diagnostic_updater.period": "diagnostics-period"}, "ros2-node-name")
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
		if !p.ReadOnly || p.Constraints != ReadAtStart || !strings.Contains(p.Description, "(flag --") {
			t.Errorf("%s: descriptor %+v", p.Name, p)
		}
	}
	if !slices.IsSorted(got) || len(got) != len(want) {
		t.Errorf("parameters %q: want the %d of %v, sorted (the node name flag hidden)", got, len(want), want)
	}
	if _, err := FromFlags(fs, map[string]string{"x.y": "no-such-flag"}); err == nil {
		t.Error("an alias of no flag: no error")
	}
}
