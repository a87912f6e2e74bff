package docker

// A small Dockerfile reader: enough of the syntax for the checks (stages,
// ARG defaults, instruction flags, exec-form CMD), not a full parser. It
// joins backslash continuations, drops comment lines (parser directives
// included) and refuses heredocs, which it cannot read.

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
)

type instruction struct {
	Line  int               // 1-based line of the instruction's first line
	Cmd   string            // upper case: FROM, RUN, COPY, ...
	Flags map[string]string // leading --name=value flags (FROM, COPY, ADD, RUN)
	Args  string            // the rest, continuations joined with spaces
}

type stage struct {
	Index    int
	Name     string // AS name, lower case ("" if none)
	Base     string // FROM image, global ARGs expanded
	Platform string // FROM --platform, expanded
	Instrs   []instruction
}

type dockerfile struct {
	Path       string
	GlobalArgs map[string]string // ARGs before the first FROM, with defaults
	Stages     []*stage
}

func loadDockerfile(path string) (*dockerfile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return parseDockerfile(path, string(data))
}

func parseDockerfile(path, text string) (*dockerfile, error) {
	df := &dockerfile{Path: path, GlobalArgs: map[string]string{}}
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		line := strings.TrimSpace(lines[i])
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		start := i + 1
		// Join continuations; comment lines inside them are dropped, as
		// Docker does.
		for strings.HasSuffix(line, "\\") && i+1 < len(lines) {
			line = strings.TrimSuffix(line, "\\")
			i++
			next := strings.TrimSpace(lines[i])
			if strings.HasPrefix(next, "#") {
				line += "\\"
				continue
			}
			line = strings.TrimRight(line, " \t") + " " + next
		}
		in, err := parseInstruction(start, line)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, start, err)
		}
		if in.Cmd == "FROM" {
			st, err := df.newStage(in)
			if err != nil {
				return nil, fmt.Errorf("%s:%d: %w", path, start, err)
			}
			df.Stages = append(df.Stages, st)
			continue
		}
		if len(df.Stages) == 0 {
			if in.Cmd != "ARG" {
				return nil, fmt.Errorf("%s:%d: %s before the first FROM", path, start, in.Cmd)
			}
			for k, v := range parseArgDecl(in.Args) {
				df.GlobalArgs[k] = v
			}
			continue
		}
		st := df.Stages[len(df.Stages)-1]
		st.Instrs = append(st.Instrs, in)
	}
	if len(df.Stages) == 0 {
		return nil, fmt.Errorf("%s: no FROM", path)
	}
	return df, nil
}

func parseInstruction(line int, text string) (instruction, error) {
	cmd, rest, _ := strings.Cut(text, " ")
	in := instruction{Line: line, Cmd: strings.ToUpper(cmd), Flags: map[string]string{}}
	rest = strings.TrimSpace(rest)
	if strings.Contains(rest, "<<") && (in.Cmd == "RUN" || in.Cmd == "COPY" || in.Cmd == "ADD") {
		return in, fmt.Errorf("%s with a heredoc: this reader cannot check it", in.Cmd)
	}
	switch in.Cmd {
	case "FROM", "COPY", "ADD", "RUN":
		for strings.HasPrefix(rest, "--") {
			tok, after, _ := strings.Cut(rest, " ")
			k, v, _ := strings.Cut(strings.TrimPrefix(tok, "--"), "=")
			if old, dup := in.Flags[k]; dup {
				v = old + " " + v // RUN --mount may repeat
			}
			in.Flags[k] = v
			rest = strings.TrimSpace(after)
		}
	}
	in.Args = rest
	return in, nil
}

// parseArgDecl reads "NAME=default" or "NAME" (one per ARG line here).
func parseArgDecl(s string) map[string]string {
	out := map[string]string{}
	for _, f := range strings.Fields(s) {
		k, v, _ := strings.Cut(f, "=")
		out[k] = strings.Trim(v, `"`)
	}
	return out
}

var fromRe = regexp.MustCompile(`^(\S+)(?:\s+(?i:as)\s+(\S+))?$`)

func (df *dockerfile) newStage(in instruction) (*stage, error) {
	m := fromRe.FindStringSubmatch(in.Args)
	if m == nil {
		return nil, fmt.Errorf("FROM %q: want IMAGE [AS NAME]", in.Args)
	}
	st := &stage{
		Index:    len(df.Stages),
		Name:     strings.ToLower(m[2]),
		Base:     expandVars(m[1], df.GlobalArgs),
		Platform: expandVars(in.Flags["platform"], df.GlobalArgs),
	}
	if strings.Contains(st.Base, "$") {
		return nil, fmt.Errorf("FROM %q: a variable without a global ARG default", in.Args)
	}
	for _, other := range df.Stages {
		if st.Name != "" && other.Name == st.Name {
			return nil, fmt.Errorf("stage name %q used twice", st.Name)
		}
	}
	return st, nil
}

// stage returns the stage named name (or with that index), or nil.
func (df *dockerfile) stage(name string) *stage {
	for _, st := range df.Stages {
		if st.Name == strings.ToLower(name) || fmt.Sprint(st.Index) == name {
			return st
		}
	}
	return nil
}

func (df *dockerfile) final() *stage { return df.Stages[len(df.Stages)-1] }

// args returns the stage's ARG defaults, each expanded with the ones
// before it (global ARGs re-declared without a value take the global
// default, as in Docker).
func (st *stage) args(global map[string]string) map[string]string {
	out := map[string]string{}
	for _, in := range st.Instrs {
		if in.Cmd != "ARG" {
			continue
		}
		for k, v := range parseArgDecl(in.Args) {
			if v == "" && !strings.Contains(in.Args, "=") {
				v = global[k]
			}
			out[k] = expandVars(v, out)
		}
	}
	return out
}

// env returns the stage's ENV values (KEY=VALUE pairs, no quoting).
func (st *stage) env() map[string]string {
	out := map[string]string{}
	for _, in := range st.Instrs {
		if in.Cmd != "ENV" {
			continue
		}
		for _, f := range strings.Fields(in.Args) {
			if k, v, ok := strings.Cut(f, "="); ok {
				out[k] = v
			}
		}
	}
	return out
}

func (st *stage) each(cmd string) []instruction {
	var out []instruction
	for _, in := range st.Instrs {
		if in.Cmd == cmd {
			out = append(out, in)
		}
	}
	return out
}

// copySpec is one COPY or ADD: sources and destination.
type copySpec struct {
	From string // --from, "" for the build context
	Srcs []string
	Dest string
	Line int
}

func (st *stage) copies() ([]copySpec, error) {
	var out []copySpec
	for _, in := range st.Instrs {
		if in.Cmd != "COPY" && in.Cmd != "ADD" {
			continue
		}
		var parts []string
		if strings.HasPrefix(in.Args, "[") {
			if err := json.Unmarshal([]byte(in.Args), &parts); err != nil {
				return nil, fmt.Errorf("line %d: %s %s: %w", in.Line, in.Cmd, in.Args, err)
			}
		} else {
			parts = strings.Fields(in.Args)
		}
		if len(parts) < 2 {
			return nil, fmt.Errorf("line %d: %s needs a source and a destination", in.Line, in.Cmd)
		}
		out = append(out, copySpec{From: in.Flags["from"], Srcs: parts[:len(parts)-1], Dest: parts[len(parts)-1], Line: in.Line})
	}
	return out, nil
}

// execForm returns the last CMD or ENTRYPOINT of the stage in exec form,
// or an error if it is in shell form.
func (st *stage) execForm(cmd string) ([]string, int, error) {
	ins := st.each(cmd)
	if len(ins) == 0 {
		return nil, 0, nil
	}
	in := ins[len(ins)-1]
	var l []string
	if err := json.Unmarshal([]byte(in.Args), &l); err != nil {
		return nil, in.Line, fmt.Errorf("line %d: %s %s: write it in exec form (a JSON list): %w", in.Line, cmd, in.Args, err)
	}
	return l, in.Line, nil
}

var dockerVar = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)`)

// expandVars replaces ${VAR} and $VAR with their values in vars, leaving
// unknown ones as they are.
func expandVars(s string, vars map[string]string) string {
	return dockerVar.ReplaceAllStringFunc(s, func(m string) string {
		sub := dockerVar.FindStringSubmatch(m)
		name := sub[1] + sub[2]
		if v, ok := vars[name]; ok {
			return v
		}
		return m
	})
}
