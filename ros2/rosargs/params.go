package rosargs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"

	"gopkg.in/yaml.v3"
)

// Param is one parameter for the node: a name as ROS writes it
// ("lidar_height", "voxel.leaf" for a nested one) and its YAML value.
type Param struct {
	Name   string
	Value  *yaml.Node // a scalar or a sequence of scalars
	Source string     // where it came from, for errors: "-p lidar_height:=1.7", "params.yaml (/**)"
}

// paramSection is the parameters a -p rule or one node key of a
// parameters file gives, for the nodes its key matches.
type paramSection struct {
	key    string // node key: "/**", "/robot1/zerohop_agent", ...
	params []Param
}

// nodeEntry is what rcl keeps for one node key over all -p rules and
// files (rcl_params_t): the key's parameters in the order given, a later
// value of a name overriding an earlier one. Entries stay in the order
// their keys first appeared.
type nodeEntry struct {
	key    string
	match  *regexp.Regexp
	params []Param
}

// addSection merges sec into the entry of its key, or starts one.
func (a *Args) addSection(sec paramSection) {
	for _, e := range a.params {
		if e.key == sec.key {
			e.params = append(e.params, sec.params...)
			return
		}
	}
	a.params = append(a.params, &nodeEntry{key: sec.key, match: nodeKeyPattern(sec.key), params: sec.params})
}

// parseParamRule reads -p [NODE:]NAME:=VALUE. The value is YAML, as rcl
// reads it: launch_ros writes it with PyYAML's dump, "1.73\n...\n". Without
// NODE the rule is for every node (/**).
func parseParamRule(flag, rule string) (paramSection, error) {
	name, value, ok := strings.Cut(rule, ":=")
	if !ok || name == "" {
		return paramSection{}, fmt.Errorf("--ros-args %s %q: want NAME:=VALUE or NODE:NAME:=VALUE", flag, rule)
	}
	key := "/**"
	if node, param, prefixed := strings.Cut(name, ":"); prefixed {
		if !IsToken(node) {
			return paramSection{}, fmt.Errorf("--ros-args %s %q: node name %q before ':': want letters, digits and '_', not starting with a digit", flag, rule, node)
		}
		key, name = "/"+node, param
	}
	if err := checkParamName(name); err != nil {
		return paramSection{}, fmt.Errorf("--ros-args %s %q: %w", flag, rule, err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(value), &doc); err != nil {
		return paramSection{}, fmt.Errorf("--ros-args %s %q: value: %w", flag, rule, err)
	}
	if len(doc.Content) == 0 {
		return paramSection{}, fmt.Errorf("--ros-args %s %q: no value after :=", flag, rule)
	}
	src := fmt.Sprintf("%s %s:=%s", flag, rule[:strings.Index(rule, ":=")], strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(value), "...")))
	var params []Param
	if err := flatten(name, doc.Content[0], src, &params); err != nil {
		return paramSection{}, fmt.Errorf("--ros-args %s %q: %w", flag, rule, err)
	}
	return paramSection{key: key, params: params}, nil
}

// parseParamsFile reads a ROS 2 parameters file, a section per node key:
//
//	/**:                      # or /ns/node, node, /**/node, /*/node
//	  ros__parameters:
//	    lidar_height: 1.73
//	    lidar_xy: [0.45, 0.0]
//
// Nested mappings under ros__parameters give dotted names, as in rcl.
func parseParamsFile(path string, data []byte) ([]paramSection, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("--params-file %s: empty", path)
		}
		return nil, fmt.Errorf("--params-file %s: %w", path, err)
	}
	top := doc.Content[0]
	if top.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("--params-file %s:%d: want a mapping of node names (/** for every node) to ros__parameters", path, top.Line)
	}
	var out []paramSection
	for i := 0; i+1 < len(top.Content); i += 2 {
		keyNode, body := top.Content[i], top.Content[i+1]
		sections, err := nodeSections(path, keyNode.Value, keyNode.Line, body)
		if err != nil {
			return nil, err
		}
		out = append(out, sections...)
	}
	return out, nil
}

// nodeSections reads one node key's body: ros__parameters, or (as rcl
// allows) more namespace levels above it, "robot1: zerohop_agent:
// ros__parameters:".
func nodeSections(path, key string, line int, body *yaml.Node) ([]paramSection, error) {
	if body.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("--params-file %s:%d: %s: want ros__parameters under it", path, line, key)
	}
	var out []paramSection
	for i := 0; i+1 < len(body.Content); i += 2 {
		k, v := body.Content[i], body.Content[i+1]
		if k.Value != "ros__parameters" {
			sub, err := nodeSections(path, strings.TrimSuffix(key, "/")+"/"+k.Value, k.Line, v)
			if err != nil {
				return nil, err
			}
			out = append(out, sub...)
			continue
		}
		full := key
		if !strings.HasPrefix(full, "/") {
			full = "/" + full
		}
		if err := checkNodeKey(full); err != nil {
			return nil, fmt.Errorf("--params-file %s:%d: node %q: %w", path, line, key, err)
		}
		sec := paramSection{key: full}
		if v.Kind != yaml.MappingNode {
			return nil, fmt.Errorf("--params-file %s:%d: %s: ros__parameters: want a mapping of names to values", path, k.Line, key)
		}
		src := fmt.Sprintf("--params-file %s (%s)", path, full)
		for j := 0; j+1 < len(v.Content); j += 2 {
			name := v.Content[j].Value
			if err := checkParamName(name); err != nil {
				return nil, fmt.Errorf("--params-file %s:%d: %w", path, v.Content[j].Line, err)
			}
			if err := flatten(name, v.Content[j+1], src, &sec.params); err != nil {
				return nil, fmt.Errorf("--params-file %s:%d: %w", path, v.Content[j].Line, err)
			}
		}
		out = append(out, sec)
	}
	return out, nil
}

// flatten appends name's parameters: a mapping's entries as name.key,
// else the value itself.
func flatten(name string, v *yaml.Node, src string, out *[]Param) error {
	switch v.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(v.Content); i += 2 {
			sub := name + "." + v.Content[i].Value
			if err := checkParamName(sub); err != nil {
				return err
			}
			if err := flatten(sub, v.Content[i+1], src, out); err != nil {
				return err
			}
		}
		return nil
	case yaml.SequenceNode:
		for _, e := range v.Content {
			if e.Kind != yaml.ScalarNode {
				return fmt.Errorf("parameter %s: a list holds only plain values", name)
			}
		}
	case yaml.ScalarNode:
		if v.Tag == "!!null" {
			return fmt.Errorf("parameter %s: no value", name)
		}
	case yaml.AliasNode:
		if v.Alias != nil {
			return flatten(name, v.Alias, src, out)
		}
		return fmt.Errorf("parameter %s: unresolved alias", name)
	default:
		return fmt.Errorf("parameter %s: unsupported value", name)
	}
	*out = append(*out, Param{Name: name, Value: v, Source: src})
	return nil
}

// checkParamName accepts ROS parameter names: tokens separated by '.'
// ("lidar_height", "voxel.leaf"). zerohop also takes a flag's own
// spelling, with '-' ("lidar-height").
func checkParamName(name string) error {
	for _, tok := range strings.Split(name, ".") {
		if tok == "" || strings.Trim(tok, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") != "" {
			return fmt.Errorf("parameter name %q: want letters, digits, '_' and '-', parts separated by '.'", name)
		}
	}
	return nil
}

// checkNodeKey accepts a parameter file's node key: /-separated tokens,
// "*" (one token) or "**" (any number of them).
func checkNodeKey(key string) error {
	for _, tok := range strings.Split(key[1:], "/") {
		if tok != "*" && tok != "**" && !IsToken(tok) {
			return fmt.Errorf(`want /ns/node of letters, digits and '_', with * for one part or ** for any number ("/**" for every node)`)
		}
	}
	return nil
}

// nodeKeyPattern turns a node key into a pattern on the node's fully
// qualified name, as rclcpp does: "/*" is one /token, "/**" any number of
// them (none too).
func nodeKeyPattern(key string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString("^")
	for _, tok := range strings.Split(key[1:], "/") {
		switch tok {
		case "**":
			b.WriteString(`(/\w+)*`)
		case "*":
			b.WriteString(`/\w+`)
		default:
			b.WriteString("/" + regexp.QuoteMeta(tok))
		}
	}
	b.WriteString("$")
	return regexp.MustCompile(b.String())
}

// Params returns the parameters for the node named fullName (/ns/name),
// in the order they apply, a later one overriding an earlier one of the
// same name, as rclcpp (Galactic on) applies them: every node key's entry
// that matches, in the order the keys first appeared over all -p rules and
// files, each entry's parameters in the order given. So a value given
// later for a key seen before joins that key's place: a /** rule after a
// file whose /** section precedes the node's own section loses to it.
func (a *Args) Params(fullName string) []Param {
	var out []Param
	for _, e := range a.params {
		if e.match.MatchString(fullName) {
			out = append(out, e.params...)
		}
	}
	return out
}
