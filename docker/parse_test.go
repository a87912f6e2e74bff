package docker

// The readers the checks rest on: interpolation, --help, command lines,
// .dockerignore and Dockerfile syntax.

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestInterpolate(t *testing.T) {
	env := map[string]string{"SET": "v", "EMPTY": ""}
	for _, tc := range []struct {
		in, want string
		fails    bool
	}{
		{in: "plain", want: "plain"},
		{in: "${SET}", want: "v"},
		{in: "$SET/x", want: "v/x"},
		{in: "${UNSET}", want: ""},
		{in: "${UNSET:-d}", want: "d"},
		{in: "${EMPTY:-d}", want: "d"},
		{in: "${EMPTY-d}", want: ""},
		{in: "${UNSET-d}", want: "d"},
		{in: "${SET:-d}", want: "v"},
		{in: "--rate=${UNSET:-30}", want: "--rate=30"},
		{in: "$$SET", want: "$SET"},
		{in: "${SET:?needed}", fails: true},
		{in: "${SET:+alt}", fails: true},
		{in: "${SET", fails: true},
		{in: "cost: 5$", fails: true},
	} {
		got, err := interpolate(tc.in, env)
		if tc.fails {
			if err == nil {
				t.Errorf("interpolate(%q) = %q, want an error", tc.in, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("interpolate(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestParseHelp(t *testing.T) {
	text, err := os.ReadFile(filepath.Join("testdata", "camera.help"))
	if err != nil {
		t.Fatal(err)
	}
	fs, err := parseHelp(string(text))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []flagSpec{
		{Name: "mlock", Bool: true},
		{Name: "loop", Bool: true},
		{Name: "rate", Default: "30"},
		{Name: "metrics", Default: "127.0.0.1:9091"},
		{Name: "allow-gid", Default: "-1"},
		{Name: "slots"},
		{Name: "source", Default: "synthetic"},
	} {
		if got := fs[want.Name]; got != want {
			t.Errorf("flag %s: %+v, want %+v", want.Name, got, want)
		}
	}
	if _, err := parseHelp("Usage: x\n\nno flags here\n"); err == nil {
		t.Error("help without flags: no error")
	}
}

func TestParseCommand(t *testing.T) {
	fs := flagSet{
		"rate":  {Name: "rate"},
		"mlock": {Name: "mlock", Bool: true},
	}
	for _, tc := range []struct {
		args   []string
		want   map[string]string
		remaps []string // the --ros-args -r rules
		fails  string
	}{
		{args: []string{"/usr/local/bin/camera", "--rate", "5", "--mlock"}, want: map[string]string{"rate": "5", "mlock": "true"}},
		{args: []string{"camera", "-rate=5", "-mlock=false"}, want: map[string]string{"rate": "5", "mlock": "false"}},
		{args: []string{"camera"}, want: map[string]string{}},
		{args: []string{"camera", "--mlock=maybe"}, fails: "not a boolean"},
		{args: []string{"camera", "--rate"}, fails: "needs a value"},
		{args: []string{"camera", "--rate=1", "--rate=2"}, fails: "twice"},
		{args: []string{"camera", "--speed=1"}, fails: "--speed"},
		{args: []string{"camera", "fast"}, fails: "flags only"},
		{args: []string{"camera", "--", "--rate=1"}, fails: "flags only"},
		{args: []string{"camera", "--rate=5", "--ros-args", "-r", "/tf:=tf"}, want: map[string]string{"rate": "5"}, remaps: []string{"/tf:=tf"}},
		{args: []string{"camera", "--ros-args", "-r", "/tf:=tf", "--", "--mlock", "--ros-args", "-r", "a:=b"}, want: map[string]string{"mlock": "true"}, remaps: []string{"/tf:=tf", "a:=b"}},
		{args: []string{"camera", "--ros-args", "-r", "/tf"}, fails: "/tf"},
		{args: []string{"camera", "--ros-args", "-r"}, fails: "needs a value"},
		{args: nil, fails: "empty"},
	} {
		inv, err := parseCommand(tc.args, fs)
		if tc.fails != "" {
			if err == nil || !strings.Contains(err.Error(), tc.fails) {
				t.Errorf("parseCommand(%q): %v, want an error with %q", tc.args, err, tc.fails)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(inv.Values, tc.want) || inv.Binary != "camera" {
			t.Errorf("parseCommand(%q) = %+v, %v; want %v", tc.args, inv, err, tc.want)
			continue
		}
		var remaps []string
		for _, r := range inv.ROS.Remaps {
			remaps = append(remaps, r.String())
		}
		if !slices.Equal(remaps, tc.remaps) {
			t.Errorf("parseCommand(%q): remaps %q, want %q", tc.args, remaps, tc.remaps)
		}
	}
}

func TestDockerignore(t *testing.T) {
	ig, err := parseDockerignore("# comment\nbin\n/.cache/\n**/testdata\n*.test\ndocs/*.md\n!docs/keep.md\n")
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]bool{
		"bin":                     true,
		"bin/agent":               true,
		"cmd/bin":                 false, // a pattern without ** matches at the root only
		".cache/ort/lib.so":       true,
		"voxel/testdata/a.bin":    true,
		"testdata/x":              true,
		"voxel/voxel.go":          false,
		"transport.test":          true,
		"pkg/transport.test":      false,
		"docs/a.md":               true,
		"docs/keep.md":            false,
		"docs/sub/a.md":           false,
		"models/reference.onnx":   false,
		"ros2/cyclonedds.xml":     false,
		"./bin/camera":            true,
		"telemetry/page.html":     false,
		"handles/testdata/corpus": true,
	} {
		if got := ig.excluded(path); got != want {
			t.Errorf("excluded(%q) = %v, want %v", path, got, want)
		}
	}
}

func TestParseDockerfile(t *testing.T) {
	text := `# syntax=docker/dockerfile:1
ARG BASE=ubuntu:24.04
FROM ${BASE} AS Build
ARG V=1.2.3
ARG PKG=pkg-${V}
RUN --mount=type=cache,target=/a \
    --mount=type=cache,target=/b \
    echo one \
    # a comment inside a continuation
    && echo two
COPY --from=build ["/a b", "/c"]
FROM --platform=linux/arm64 $BASE
ENV A=1 B=2
CMD ["agent", "--x"]
`
	df, err := parseDockerfile("t", text)
	if err != nil {
		t.Fatal(err)
	}
	if len(df.Stages) != 2 {
		t.Fatalf("%d stages, want 2", len(df.Stages))
	}
	b, final := df.Stages[0], df.Stages[1]
	if b.Name != "build" || b.Base != "ubuntu:24.04" || final.Base != "ubuntu:24.04" || final.Platform != "linux/arm64" {
		t.Errorf("stages %+v, %+v", b, final)
	}
	if got := b.args(df.GlobalArgs)["PKG"]; got != "pkg-1.2.3" {
		t.Errorf("ARG PKG = %q, want pkg-1.2.3", got)
	}
	runs := b.each("RUN")
	if len(runs) != 1 || runs[0].Args != "echo one && echo two" || runs[0].Flags["mount"] != "type=cache,target=/a type=cache,target=/b" || runs[0].Line != 6 {
		t.Errorf("RUN = %+v", runs)
	}
	cs, err := b.copies()
	if err != nil || len(cs) != 1 || cs[0].From != "build" || !reflect.DeepEqual(cs[0].Srcs, []string{"/a b"}) || cs[0].Dest != "/c" {
		t.Errorf("COPY = %+v, %v", cs, err)
	}
	if env := final.env(); env["A"] != "1" || env["B"] != "2" {
		t.Errorf("ENV = %v", env)
	}
	if cmd, _, err := final.execForm("CMD"); err != nil || !reflect.DeepEqual(cmd, []string{"agent", "--x"}) {
		t.Errorf("CMD = %q, %v", cmd, err)
	}

	for _, bad := range []string{
		"RUN echo before FROM\n",
		"FROM ${NOT_DECLARED}\n",
		"FROM a AS x\nFROM b AS x\n",
		"ARG A=1\n",
	} {
		if _, err := parseDockerfile("bad", bad); err == nil {
			t.Errorf("parseDockerfile(%q): no error", bad)
		}
	}
}

// sourceFlags finds every way the binaries register a flag, fs.Var (a
// flag.Value such as --lidar-rpy's) included: one it misses makes compose
// files that use it fail as "not in --help".
func TestSourceFlagsReadsEveryRegistration(t *testing.T) {
	file := filepath.Join(t.TempDir(), "main.go")
	src := `fs.BoolVar(&cfg.Spin, "spin", false, "")
	fs.StringVar(&cfg.Socket, "socket", "x", "")
	fs.Float64Var(&leaf, "leaf", 0.2, "")
	fs.Var(&lidarXY, "lidar-xy", "")
	fs.Int("beams", 64, "")
	fs.Duration("watchdog", 0, "")
	fs.Lookup("not-a-registration")
`
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	fs, err := sourceFlags(file)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"spin": true, "socket": false, "leaf": false, "lidar-xy": false, "beams": false, "watchdog": false}
	for name, isBool := range want {
		if f, ok := fs[name]; !ok || f.Bool != isBool {
			t.Errorf("--%s: %+v, %v; want found, bool %v", name, f, ok, isBool)
		}
	}
	if len(fs) != len(want) {
		t.Errorf("found %d flags, want %d: %v", len(fs), len(want), fs)
	}
}
