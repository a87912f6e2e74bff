package docker

// .dockerignore matching as Docker does it (moby/patternmatcher): paths
// relative to the context root, '*' and '?' within one path element, '**'
// across elements, a pattern that matches a directory excludes what is in
// it, '!' re-includes, and the last matching pattern wins.

import (
	"fmt"
	"os"
	"path"
	"regexp"
	"strings"
)

type ignorePattern struct {
	re     *regexp.Regexp
	negate bool
	text   string
}

type dockerignore []ignorePattern

func loadDockerignore(file string) (dockerignore, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	return parseDockerignore(string(data))
}

func parseDockerignore(text string) (dockerignore, error) {
	var out dockerignore
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		p := ignorePattern{text: line}
		if strings.HasPrefix(line, "!") {
			p.negate = true
			line = strings.TrimSpace(line[1:])
		}
		line = path.Clean(strings.TrimPrefix(line, "/"))
		re, err := globRegexp(line)
		if err != nil {
			return nil, fmt.Errorf(".dockerignore %q: %w", p.text, err)
		}
		p.re = re
		out = append(out, p)
	}
	return out, nil
}

func globRegexp(glob string) (*regexp.Regexp, error) {
	var b strings.Builder
	b.WriteString("^")
	for i := 0; i < len(glob); i++ {
		switch c := glob[i]; c {
		case '*':
			if i+1 < len(glob) && glob[i+1] == '*' {
				i++
				if i+1 < len(glob) && glob[i+1] == '/' {
					i++
					b.WriteString("(?:.*/)?") // **/ : zero or more elements
				} else {
					b.WriteString(".*")
				}
			} else {
				b.WriteString("[^/]*")
			}
		case '?':
			b.WriteString("[^/]")
		case '[':
			end := strings.IndexByte(glob[i:], ']')
			if end < 0 {
				return nil, fmt.Errorf("unterminated [")
			}
			b.WriteString(glob[i : i+end+1])
			i += end
		case '\\':
			if i+1 < len(glob) {
				i++
				b.WriteString(regexp.QuoteMeta(glob[i : i+1]))
			}
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	b.WriteString("$")
	return regexp.Compile(b.String())
}

// excluded reports whether the context path rel (slash-separated, relative
// to the context root) is left out of the build context.
func (d dockerignore) excluded(rel string) bool {
	rel = path.Clean(strings.TrimPrefix(rel, "/"))
	// The path and each of its parent directories: a pattern matching a
	// parent excludes the path.
	var candidates []string
	for p := rel; p != "." && p != "/"; p = path.Dir(p) {
		candidates = append(candidates, p)
	}
	excluded := false
	for _, p := range d {
		for _, c := range candidates {
			if p.re.MatchString(c) {
				excluded = !p.negate
				break
			}
		}
	}
	return excluded
}
