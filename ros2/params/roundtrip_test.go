package params_test

import (
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zerohop/zerohop/ros2/params"
	"github.com/zerohop/zerohop/ros2/rosargs"
)

// pairFlag is a custom flag.Value (not a Getter), as the agent's
// --lidar-xy is: it reads back as a string.
type pairFlag struct{ s string }

func (p *pairFlag) String() string     { return p.s }
func (p *pairFlag) Set(s string) error { p.s = s; return nil }

// newFlags is one flag of each kind the nodes have.
func newFlags() *flag.FlagSet {
	fs := flag.NewFlagSet("node", flag.ContinueOnError)
	fs.Bool("ros2", false, "")
	fs.Int("max-points", 500000, "")
	fs.Uint64("seed", 1, "")
	fs.Float64("lidar-height", 0, "")
	fs.Duration("watchdog", 200*time.Millisecond, "")
	fs.Duration("diagnostics-period", time.Second, "")
	fs.String("camera", "", "")
	fs.String("mode", "", "")
	fs.String("ros2-node-name", "node", "")
	fs.Var(&pairFlag{"0,0"}, "lidar-xy", "")
	return fs
}

// pyYAMLFloat writes f as PyYAML's represent_float does (ros2 param dump
// is yaml.dump): Python's repr, with ".0" put before an exponent that has
// no point ("1e-09" is "1.0e-09"), and .inf, -.inf, .nan.
func pyYAMLFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return ".inf"
	case math.IsInf(f, -1):
		return "-.inf"
	case math.IsNaN(f):
		return ".nan"
	}
	r := strconv.FormatFloat(f, 'g', -1, 64) // Python's repr for these: shortest round trip
	if e := strings.IndexByte(r, 'e'); e >= 0 {
		mant, exp := r[:e], r[e+1:]
		if !strings.Contains(mant, ".") {
			mant += ".0"
		}
		if len(exp) == 2 && (exp[0] == '+' || exp[0] == '-') { // Python: e-09, e+16
			exp = exp[:1] + "0" + exp[1:]
		}
		return mant + "e" + exp
	}
	if !strings.Contains(r, ".") {
		r += ".0"
	}
	return r
}

// dumpYAML writes the set as `ros2 param dump` does: the node's section,
// dotted names nested, PyYAML's floats and quoted strings.
func dumpYAML(s *params.Set, node string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s:\n  ros__parameters:\n", node)
	var open []string // nesting of the previous name
	for _, p := range s.All() {
		parts := strings.Split(p.Name, params.Separator)
		common := 0
		for common < len(open) && common < len(parts)-1 && open[common] == parts[common] {
			common++
		}
		for i := common; i < len(parts)-1; i++ {
			fmt.Fprintf(&b, "%s%s:\n", strings.Repeat("  ", i+2), parts[i])
		}
		open = parts[:len(parts)-1]
		var v string
		switch p.Value.Type {
		case params.Bool:
			v = strconv.FormatBool(p.Value.Bool)
		case params.Integer:
			v = strconv.FormatInt(p.Value.Integer, 10)
		case params.Double:
			v = pyYAMLFloat(p.Value.Double)
		default:
			// PyYAML's single-quoted style ('' for '), which it uses
			// where a plain scalar would read as something else.
			v = "'" + strings.ReplaceAll(p.Value.String, "'", "''") + "'"
		}
		fmt.Fprintf(&b, "%s%s: %s\n", strings.Repeat("  ", len(parts)+1), parts[len(parts)-1], v)
	}
	return b.String()
}

// What ros2 param dump prints of a node is a parameters file the node
// accepts, and it sets every flag to the value it had: the parameters'
// names and types are the reverse of rosargs' parameter-to-flag mapping.
func TestDumpIsAParamsFileTheNodeReads(t *testing.T) {
	opts := rosargs.Options{NodeName: "node", NodeNameFlag: "ros2-node-name", Aliases: map[string]string{"diagnostic_updater.period": "diagnostics-period"}}
	for _, args := range [][]string{
		nil,
		{"--ros2", "--max-points", "-7", "--seed", "18446744073709551615", "--lidar-height", "1.73", "--watchdog", "290ms",
			"--diagnostics-period", "1.5s", "--camera", "replay:/data/kitti 00", "--mode", "yes", "--lidar-xy", "0.45,-0.1"},
		{"--camera", `a: "b" # c`, "--mode", "0.5", "--lidar-height", "1e-9", "--watchdog", "1h"},
	} {
		orig := newFlags()
		if _, err := rosargs.ParseFlags(orig, args, opts); err != nil {
			t.Fatal(err)
		}
		set, err := params.FromFlags(orig, params.FlagOptions{Aliases: opts.Aliases, Hide: []string{opts.NodeNameFlag}})
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(t.TempDir(), "dump.yaml")
		dump := dumpYAML(set, "/node")
		if err := os.WriteFile(file, []byte(dump), 0o644); err != nil {
			t.Fatal(err)
		}
		back := newFlags()
		if _, err := rosargs.ParseFlags(back, []string{"--ros-args", "--params-file", file}, opts); err != nil {
			t.Fatalf("args %q: the dump does not read back: %v\n%s", args, err, dump)
		}
		orig.VisitAll(func(f *flag.Flag) {
			got := back.Lookup(f.Name).Value.String()
			if f.Name == opts.NodeNameFlag {
				return
			}
			if got != f.Value.String() {
				t.Errorf("args %q: --%s = %q after the round trip, was %q\n%s", args, f.Name, got, f.Value.String(), dump)
			}
		})
	}
	// A uint64 beyond int64 is a string parameter, not a wrapped integer.
	fs := newFlags()
	fs.Set("seed", strconv.FormatUint(math.MaxUint64, 10))
	set, _ := params.FromFlags(fs, params.FlagOptions{})
	if p, _ := set.Get("seed"); p.Value.Type != params.String {
		t.Errorf("seed %d: %+v", uint64(math.MaxUint64), p.Value)
	}
}
