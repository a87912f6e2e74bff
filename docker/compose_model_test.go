package docker

// The part of the Compose file format that zerohop's compose.yaml uses,
// decoded with gopkg.in/yaml.v3 after Compose-style variable interpolation.
// Fields that Compose accepts in two syntaxes (short strings and long maps)
// are decoded from both, so a check never passes because a value was
// written in the syntax the test did not read.

import (
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

type composeFile struct {
	Name     string              `yaml:"name"`
	Services map[string]*service `yaml:"services"`
	Volumes  map[string]*volume  `yaml:"volumes"`
}

type volume struct {
	Driver     string            `yaml:"driver"`
	DriverOpts map[string]string `yaml:"driver_opts"`
	External   bool              `yaml:"external"`
}

type service struct {
	Build       *build            `yaml:"build"`
	Image       string            `yaml:"image"`
	PullPolicy  string            `yaml:"pull_policy"`
	Platform    string            `yaml:"platform"`
	Runtime     string            `yaml:"runtime"`
	Entrypoint  execForm          `yaml:"entrypoint"`
	Command     execForm          `yaml:"command"`
	User        string            `yaml:"user"`
	Init        *bool             `yaml:"init"`
	NetworkMode string            `yaml:"network_mode"`
	IPC         string            `yaml:"ipc"`
	PID         string            `yaml:"pid"`
	Privileged  bool              `yaml:"privileged"`
	CapAdd      []string          `yaml:"cap_add"`
	GroupAdd    []string          `yaml:"group_add"`
	CapDrop     []string          `yaml:"cap_drop"`
	SecurityOpt []string          `yaml:"security_opt"`
	Devices     []string          `yaml:"devices"`
	Environment envMap            `yaml:"environment"`
	Volumes     []mount           `yaml:"volumes"`
	Ulimits     map[string]ulimit `yaml:"ulimits"`
	Healthcheck *healthcheck      `yaml:"healthcheck"`
	Deploy      *deploy           `yaml:"deploy"`
	DependsOn   dependsOn         `yaml:"depends_on"`
	Restart     string            `yaml:"restart"`
}

type build struct {
	Context    string
	Dockerfile string
	Args       map[string]string
}

func (b *build) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		b.Context = n.Value
		return nil
	}
	var long struct {
		Context    string `yaml:"context"`
		Dockerfile string `yaml:"dockerfile"`
		Args       envMap `yaml:"args"`
	}
	if err := n.Decode(&long); err != nil {
		return err
	}
	b.Context, b.Dockerfile, b.Args = long.Context, long.Dockerfile, long.Args
	return nil
}

// execForm is a command or entrypoint. Only the list form is accepted: the
// string form is split by a shell-like parser in Compose, and quoting
// mistakes there are exactly what this test cannot see.
type execForm []string

func (e *execForm) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.SequenceNode {
		return fmt.Errorf("line %d: write command/entrypoint as a list (exec form), not %q", n.Line, n.Value)
	}
	var l []string
	if err := n.Decode(&l); err != nil {
		return err
	}
	*e = l
	return nil
}

// envMap is `environment:` (or build args) as a map or as a list of
// KEY=VALUE; a key without a value maps to "".
type envMap map[string]string

func (m *envMap) UnmarshalYAML(n *yaml.Node) error {
	out := envMap{}
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			v := n.Content[i+1]
			if v.Tag == "!!null" {
				out[n.Content[i].Value] = ""
				continue
			}
			out[n.Content[i].Value] = v.Value
		}
	case yaml.SequenceNode:
		for _, item := range n.Content {
			k, v, _ := strings.Cut(item.Value, "=")
			out[k] = v
		}
	default:
		return fmt.Errorf("line %d: environment must be a map or a list", n.Line)
	}
	*m = out
	return nil
}

// mount is one entry of a service's `volumes:`.
type mount struct {
	Type     string // "volume" or "bind"
	Source   string // volume name or host path ("" for an anonymous volume)
	Target   string
	ReadOnly bool
}

func (m *mount) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		parts := strings.Split(n.Value, ":")
		switch len(parts) {
		case 1:
			m.Target = parts[0]
		case 2, 3:
			m.Source, m.Target = parts[0], parts[1]
			if len(parts) == 3 {
				for _, o := range strings.Split(parts[2], ",") {
					if o == "ro" {
						m.ReadOnly = true
					}
				}
			}
		default:
			return fmt.Errorf("line %d: volume %q: want [SOURCE:]TARGET[:MODE]", n.Line, n.Value)
		}
		m.Type = "volume"
		if strings.HasPrefix(m.Source, ".") || strings.HasPrefix(m.Source, "/") || strings.HasPrefix(m.Source, "~") {
			m.Type = "bind"
		}
		return nil
	}
	var long struct {
		Type     string `yaml:"type"`
		Source   string `yaml:"source"`
		Target   string `yaml:"target"`
		ReadOnly bool   `yaml:"read_only"`
	}
	if err := n.Decode(&long); err != nil {
		return err
	}
	*m = mount(long)
	return nil
}

// ulimit is a number (soft = hard) or {soft, hard}; -1 is unlimited.
type ulimit struct{ Soft, Hard int64 }

func (u *ulimit) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		v, err := strconv.ParseInt(n.Value, 10, 64)
		if err != nil {
			return fmt.Errorf("line %d: ulimit %q: %w", n.Line, n.Value, err)
		}
		u.Soft, u.Hard = v, v
		return nil
	}
	var long struct {
		Soft int64 `yaml:"soft"`
		Hard int64 `yaml:"hard"`
	}
	if err := n.Decode(&long); err != nil {
		return err
	}
	*u = ulimit(long)
	return nil
}

type healthcheck struct {
	Test        []string
	Interval    string
	Timeout     string
	Retries     int
	StartPeriod string
	Disable     bool
}

func (h *healthcheck) UnmarshalYAML(n *yaml.Node) error {
	var raw struct {
		Test        yaml.Node `yaml:"test"`
		Interval    string    `yaml:"interval"`
		Timeout     string    `yaml:"timeout"`
		Retries     int       `yaml:"retries"`
		StartPeriod string    `yaml:"start_period"`
		Disable     bool      `yaml:"disable"`
	}
	if err := n.Decode(&raw); err != nil {
		return err
	}
	*h = healthcheck{Interval: raw.Interval, Timeout: raw.Timeout, Retries: raw.Retries, StartPeriod: raw.StartPeriod, Disable: raw.Disable}
	switch raw.Test.Kind {
	case 0:
	case yaml.ScalarNode:
		h.Test = []string{"CMD-SHELL", raw.Test.Value}
	default:
		if err := raw.Test.Decode(&h.Test); err != nil {
			return err
		}
	}
	return nil
}

type deploy struct {
	Resources struct {
		Reservations struct {
			Devices []deviceRequest `yaml:"devices"`
		} `yaml:"reservations"`
	} `yaml:"resources"`
}

type deviceRequest struct {
	Driver       string   `yaml:"driver"`
	Count        any      `yaml:"count"`
	DeviceIDs    []string `yaml:"device_ids"`
	Capabilities []string `yaml:"capabilities"`
}

// dependsOn maps a service to its condition ("service_started" for the
// list syntax).
type dependsOn map[string]string

func (d *dependsOn) UnmarshalYAML(n *yaml.Node) error {
	out := dependsOn{}
	switch n.Kind {
	case yaml.SequenceNode:
		for _, item := range n.Content {
			out[item.Value] = "service_started"
		}
	case yaml.MappingNode:
		var long map[string]struct {
			Condition string `yaml:"condition"`
		}
		if err := n.Decode(&long); err != nil {
			return err
		}
		for k, v := range long {
			out[k] = v.Condition
		}
	default:
		return fmt.Errorf("line %d: depends_on must be a list or a map", n.Line)
	}
	*d = out
	return nil
}

// parseCompose interpolates and decodes a compose file's text. env stands
// for the environment Compose would read: the tests pass an empty one, so
// that every ${VAR:-default} takes its default whatever the machine has
// set.
func parseCompose(name string, data []byte, env map[string]string) (*composeFile, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if err := interpolateNode(&root, false, env); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	var c composeFile
	if err := root.Decode(&c); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(c.Services) == 0 {
		return nil, fmt.Errorf("%s: no services", name)
	}
	for n, s := range c.Services {
		if s == nil {
			return nil, fmt.Errorf("%s: service %q is empty", name, n)
		}
	}
	return &c, nil
}

// mergeCompose applies an override's text to base as `docker compose -f
// base -f override` does, for the keys zerohop's overrides set: command,
// entrypoint and the scalars replace, environment and build args merge by
// key, group_add appends, `deploy: !reset {}` drops the base's. Any other
// key, a new service or a top-level key other than services is refused
// rather than merged in a way Compose might not. env is as for
// parseCompose (the base must have been read with the same).
func mergeCompose(base *composeFile, name string, data []byte, env map[string]string) (*composeFile, error) {
	var raw struct {
		Top      map[string]yaml.Node            `yaml:",inline"`
		Services map[string]map[string]yaml.Node `yaml:"services"`
	}
	if err := yaml.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(raw.Top) > 0 {
		return nil, fmt.Errorf("%s: top-level %v: merging them is not implemented here", name, sortedKeys(raw.Top))
	}
	over, err := parseCompose(name, data, env)
	if err != nil {
		return nil, err
	}
	out := &composeFile{Name: base.Name, Services: map[string]*service{}, Volumes: base.Volumes}
	for n, s := range base.Services {
		c := *s
		c.Environment = maps.Clone(s.Environment)
		c.GroupAdd = slices.Clone(s.GroupAdd)
		if s.Build != nil {
			b := *s.Build
			b.Args = maps.Clone(s.Build.Args)
			c.Build = &b
		}
		out.Services[n] = &c
	}
	for _, n := range sortedKeys(raw.Services) {
		s, ok := out.Services[n]
		if !ok {
			return nil, fmt.Errorf("%s: service %s is not in the base file", name, n)
		}
		o := over.Services[n]
		for _, k := range sortedKeys(raw.Services[n]) {
			switch k {
			case "command":
				s.Command = o.Command
			case "entrypoint":
				s.Entrypoint = o.Entrypoint
			case "image":
				s.Image = o.Image
			case "platform":
				s.Platform = o.Platform
			case "runtime":
				s.Runtime = o.Runtime
			case "user":
				s.User = o.User
			case "environment":
				if s.Environment == nil {
					s.Environment = envMap{}
				}
				maps.Copy(s.Environment, o.Environment)
			case "group_add":
				s.GroupAdd = append(s.GroupAdd, o.GroupAdd...)
			case "build":
				if s.Build == nil {
					s.Build = &build{}
				}
				s.Build.Context = orString(o.Build.Context, s.Build.Context)
				s.Build.Dockerfile = orString(o.Build.Dockerfile, s.Build.Dockerfile)
				if s.Build.Args == nil {
					s.Build.Args = map[string]string{}
				}
				maps.Copy(s.Build.Args, o.Build.Args)
			case "deploy":
				if node := raw.Services[n][k]; node.Tag != "!reset" {
					return nil, fmt.Errorf("%s: service %s: deploy: merging it is not implemented here (only !reset)", name, n)
				}
				s.Deploy = nil
			default:
				return nil, fmt.Errorf("%s: service %s: %s: merging it is not implemented here", name, n, k)
			}
		}
	}
	return out, nil
}

func loadCompose(path string) (*composeFile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return parseCompose(path, data, nil)
}

// interpolateNode applies Compose variable interpolation to every scalar
// value (not to mapping keys, as Compose does).
func interpolateNode(n *yaml.Node, isKey bool, env map[string]string) error {
	switch n.Kind {
	case yaml.ScalarNode:
		if isKey {
			return nil
		}
		v, err := interpolate(n.Value, env)
		if err != nil {
			return fmt.Errorf("line %d: %w", n.Line, err)
		}
		n.Value = v
	case yaml.MappingNode:
		for i, c := range n.Content {
			if err := interpolateNode(c, i%2 == 0, env); err != nil {
				return err
			}
		}
	default:
		for _, c := range n.Content {
			if err := interpolateNode(c, false, env); err != nil {
				return err
			}
		}
	}
	return nil
}

var varName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*`)

// interpolate expands $$, $VAR, ${VAR}, ${VAR:-default} and ${VAR-default}
// as Compose does; the other forms (${VAR:?err}, ${VAR:+alt}) are refused so
// that the test never reads a value differently from Compose.
func interpolate(s string, env map[string]string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' {
			b.WriteByte(s[i])
			continue
		}
		rest := s[i+1:]
		switch {
		case strings.HasPrefix(rest, "$"):
			b.WriteByte('$')
			i++
		case strings.HasPrefix(rest, "{"):
			end := strings.IndexByte(rest, '}')
			if end < 0 {
				return "", fmt.Errorf("%q: unterminated ${", s)
			}
			expr := rest[1:end]
			name := varName.FindString(expr)
			if name == "" {
				return "", fmt.Errorf("%q: bad variable in ${%s}", s, expr)
			}
			val, set := env[name]
			switch op := expr[len(name):]; {
			case op == "":
			case strings.HasPrefix(op, ":-"):
				if val == "" {
					val = op[2:]
				}
			case strings.HasPrefix(op, "-"):
				if !set {
					val = op[1:]
				}
			default:
				return "", fmt.Errorf("%q: ${%s}: only ${VAR}, ${VAR:-default} and ${VAR-default} are understood here", s, expr)
			}
			b.WriteString(val)
			i += 1 + end
		default:
			name := varName.FindString(rest)
			if name == "" {
				return "", fmt.Errorf("%q: lone $ (write $$ for a literal $)", s)
			}
			b.WriteString(env[name])
			i += len(name)
		}
	}
	return b.String(), nil
}
