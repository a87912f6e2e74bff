package ros2

import (
	"fmt"
	"strings"
)

// maxTopicLength is the longest fully-qualified ROS topic name:
// RMW_TOPIC_MAX_NAME_LENGTH, 255 less 8 bytes rmw reserves for prefixes
// such as "rt" (rmw/validate_full_topic_name.h).
const maxTopicLength = 255 - 8

// ResolveTopic expands the ROS topic name against c's node (NodeName and
// Namespace, defaults and the __node/__ns rules applied), then applies the
// first of c.Remaps that matches, as rcl_node_resolve_name does for every
// publisher and subscription:
//
//   - "/x" is absolute and stays "/x";
//   - "x" is relative to the namespace: "/robot1/x" (with "/", "/x");
//   - "~" is the node's private namespace: "~/x" becomes
//     "/robot1/<node>/x" and "~" alone "/robot1/<node>";
//   - "{node}" becomes the node name, "{ns}" and "{namespace}" the
//     namespace; no other substitution exists;
//   - a rule FROM:=TO (for any node, or NODE:FROM:=TO for this one)
//     matches when FROM, expanded the same way, is the expanded name, which
//     then becomes TO, expanded ("cmd_vel:=/base/cmd_vel" in /robot1 moves
//     /robot1/cmd_vel to /base/cmd_vel).
//
// It rejects what rcl rejects, first the name as given
// (rcl_validate_topic_name: empty, a trailing '/', a token or substitution
// that starts with a digit, '~' other than first or not followed by '/',
// unbalanced or nested braces, characters other than [A-Za-z0-9_/~{}]),
// then the expansion (rmw_validate_full_topic_name: "//", as "{ns}/x"
// makes in the root namespace, and more than 247 bytes). Errors name the
// topic as given and, past the first check, what it expanded to.
func (c Config) ResolveTopic(name string) (string, error) {
	ns, node := c.node()
	if err := validateNode(ns, node); err != nil {
		return "", fmt.Errorf("ros2: topic %q: %w", name, err)
	}
	out, err := expandTopic(name, ns, node)
	if err != nil {
		return "", fmt.Errorf("ros2: topic %q: %w", name, err)
	}
	for _, r := range c.Remaps {
		if r.Service || r.From == "__node" || r.From == "__ns" || (r.Node != "" && r.Node != node) {
			continue
		}
		match, err := expandTopic(r.From, ns, node)
		if err != nil {
			return "", fmt.Errorf("ros2: remapping rule %s: %w", r, err)
		}
		if match != out {
			continue
		}
		to, err := expandTopic(r.To, ns, node)
		if err != nil {
			return "", fmt.Errorf("ros2: remapping rule %s: %w", r, err)
		}
		if reason := fullTopicNameInvalid(to); reason != "" {
			return "", fmt.Errorf("ros2: topic %q (%s by remapping rule %s, in node %s): %s", name, to, r, joinNamespace(ns, node), reason)
		}
		return to, nil
	}
	if reason := fullTopicNameInvalid(out); reason != "" {
		return "", fmt.Errorf("ros2: topic %q (expanded to %q in node %s): %s", name, out, joinNamespace(ns, node), reason)
	}
	return out, nil
}

// expandTopic checks a topic name as given and expands it against the
// node (ResolveTopic), without the full name's checks.
func expandTopic(name, ns, node string) (string, error) {
	if reason := topicNameInvalid(name); reason != "" {
		return "", fmt.Errorf("%s", reason)
	}
	// The order is rcl_expand_topic_name's: the private namespace, then
	// substitutions, then the namespace for what is still relative.
	// https://github.com/ros2/rcl/blob/rolling/rcl/src/rcl/expand_topic_name.c
	out := name
	if strings.HasPrefix(out, "~") {
		out = joinNamespace(ns, node) + out[1:]
	}
	for {
		open := strings.IndexByte(out, '{')
		if open < 0 {
			break
		}
		closing := open + strings.IndexByte(out[open:], '}') // balanced: checked above
		var repl string
		switch sub := out[open : closing+1]; sub {
		case "{node}":
			repl = node
		case "{ns}", "{namespace}":
			repl = ns
		default:
			return "", fmt.Errorf("unknown substitution %s (want {node}, {ns} or {namespace})", sub)
		}
		out = out[:open] + repl + out[closing+1:]
	}
	if !strings.HasPrefix(out, "/") {
		out = joinNamespace(ns, out)
	}
	return out, nil
}

// joinNamespace is ns + "/" + rest, without doubling the root's "/".
func joinNamespace(ns, rest string) string {
	if ns == "/" {
		return "/" + rest
	}
	return ns + "/" + rest
}

// ddsTopicName resolves the ROS topic name against c's node (ResolveTopic)
// and maps the result to its DDS topic as rmw does: "/robot1/cmd_vel" →
// "rt/robot1/cmd_vel".
func (c Config) ddsTopicName(name string) (resolved, dds string, err error) {
	resolved, err = c.ResolveTopic(name)
	if err != nil {
		return "", "", err
	}
	return resolved, "rt" + resolved, nil
}

// topicNameInvalid says why rcl_validate_topic_name rejects a topic name
// as given (before expansion), or returns "".
// https://github.com/ros2/rcl/blob/rolling/rcl/src/rcl/validate_topic_name.c
func topicNameInvalid(s string) string {
	switch {
	case s == "":
		return "empty name"
	case isDigit(s[0]):
		return "a token starts with a digit"
	case s[len(s)-1] == '/':
		return `ends with "/"`
	}
	inBrace := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case isAlnum(c) || c == '_':
			if inBrace && isDigit(c) && s[i-1] == '{' {
				return "a substitution starts with a digit"
			}
		case c == '/':
			if inBrace {
				return `"/" inside a substitution {...}`
			}
		case c == '~':
			if i != 0 {
				return `"~" (the node's private namespace) is allowed only as the first character`
			}
		case c == '{':
			if inBrace {
				return "nested braces"
			}
			inBrace = true
		case c == '}':
			if !inBrace {
				return `unmatched "}"`
			}
			inBrace = false
		case inBrace:
			return fmt.Sprintf("character %q not allowed in a substitution (want letters, digits and '_')", c)
		default:
			return fmt.Sprintf("character %q not allowed (want letters, digits, '_' and '/', '~' first, {substitutions})", c)
		}
	}
	if inBrace {
		return `unmatched "{"`
	}
	// rcl skips this check when "~" is followed by a single character
	// ("~x"), by an off-by-one; its rule, and this function, reject it.
	if len(s) > 1 && s[0] == '~' && s[1] != '/' {
		return `"~" must be followed by "/" ("~/x")`
	}
	for i := 0; i+1 < len(s); i++ {
		if s[i] == '/' && isDigit(s[i+1]) {
			return "a token starts with a digit"
		}
	}
	return ""
}

// fullTopicNameInvalid says why rmw_validate_full_topic_name rejects an
// expanded topic name, or returns "".
// https://github.com/ros2/rmw/blob/rolling/rmw/src/validate_full_topic_name.c
func fullTopicNameInvalid(s string) string {
	switch {
	case s == "":
		return "empty name"
	case s[0] != '/':
		return `not absolute (does not start with "/")`
	case s[len(s)-1] == '/':
		return `ends with "/"`
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !isAlnum(c) && c != '_' && c != '/' {
			return fmt.Sprintf("character %q not allowed (want letters, digits, '_' and '/')", c)
		}
	}
	for i := 0; i+1 < len(s); i++ {
		if s[i] == '/' && s[i+1] == '/' {
			return `empty token ("//")`
		}
		if s[i] == '/' && isDigit(s[i+1]) {
			return "a token starts with a digit"
		}
	}
	if len(s) > maxTopicLength {
		return fmt.Sprintf("%d bytes, more than %d", len(s), maxTopicLength)
	}
	return ""
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isAlnum(c byte) bool {
	return isDigit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}
