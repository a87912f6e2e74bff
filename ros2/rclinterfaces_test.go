package ros2

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// idlMemberType is the IDL type rosidl gives a .msg field type; qualified
// names nested types with their module (as the srv module must).
func idlMemberType(t *testing.T, typ string, qualified bool) string {
	t.Helper()
	base, seq := strings.CutSuffix(typ, "[]")
	bounded := ""
	if i := strings.Index(base, "[<="); i >= 0 {
		bounded, base, seq = strings.TrimSuffix(base[i+3:], "]"), base[:i], true
	}
	prim := map[string]string{"bool": "boolean", "byte": "octet", "uint8": "octet", "int64": "long long",
		"uint64": "unsigned long long", "float64": "double", "string": "string"}
	elem, ok := prim[base]
	if pkg, name, other := strings.Cut(base, "/"); other { // builtin_interfaces/Time
		elem, ok = pkg+"::msg::dds_::"+name+"_", true
	}
	if !ok {
		elem = base + "_"
		if qualified {
			elem = "rcl_interfaces::msg::dds_::" + elem
		}
	}
	switch {
	case bounded != "":
		return "sequence<" + elem + ", " + bounded + ">"
	case seq:
		return "sequence<" + elem + ">"
	}
	return elem
}

// The rcl_interfaces IDL that idlc compiles declares, in order, the fields
// of the ROS definitions (testdata/rcl_interfaces), each request and
// response after rmw_cyclonedds's two-field request header: what makes the
// samples the bytes rmw_cyclonedds reads and writes.
func TestRclInterfacesIDLMatchesDefinitions(t *testing.T) {
	idl, err := os.ReadFile("idl/rcl_interfaces.idl")
	if err != nil {
		t.Fatal(err)
	}
	member := regexp.MustCompile(`^\s*((?:unsigned )?long long|[\w:]+|sequence<[^>]+>)\s+(\w+)\s*$`)
	members := func(structName string) []string {
		start := bytes.Index(idl, []byte("struct "+structName+" {"))
		if start < 0 {
			t.Fatalf("no struct %s in the IDL", structName)
		}
		body := idl[start+len("struct "+structName+" {"):]
		body = body[:bytes.Index(body, []byte("};"))]
		var out []string
		for _, line := range strings.Split(string(body), "\n") {
			line, _, _ = strings.Cut(line, "//")
			decls := strings.Split(line, ";")
			for _, d := range decls[:len(decls)-1] { // each ends with ';'
				if m := member.FindStringSubmatch(d); m != nil {
					out = append(out, m[1]+" "+m[2])
				}
			}
		}
		return out
	}
	fieldsOf := func(src string, qualified bool) []string {
		var out []string
		for _, line := range strings.Split(src, "\n") {
			f := strings.Fields(line)
			if len(f) < 2 || strings.Contains(f[1], "=") {
				continue // blank, or a constant
			}
			out = append(out, idlMemberType(t, f[0], qualified)+" "+f[1])
		}
		return out
	}
	files, err := filepath.Glob("testdata/rcl_interfaces/*.*")
	if err != nil {
		t.Fatal(err)
	}
	header := []string{"unsigned long long client_guid", "long long sequence_number"}
	checked := 0
	for _, file := range files {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimSuffix(filepath.Base(file), filepath.Ext(file))
		want := map[string][]string{}
		switch filepath.Ext(file) {
		case ".msg":
			want[name+"_"] = fieldsOf(string(src), false)
		case ".srv":
			req, resp, ok := strings.Cut(string(src), "---")
			if !ok {
				t.Fatalf("%s: no ---", file)
			}
			want[name+"_Request_"] = append(append([]string{}, header...), fieldsOf(req, true)...)
			want[name+"_Response_"] = append(append([]string{}, header...), fieldsOf(resp, true)...)
		default:
			continue
		}
		for s, w := range want {
			if got := members(s); strings.Join(got, "\n") != strings.Join(w, "\n") {
				t.Errorf("%s: IDL members:\n%s\nROS fields:\n%s", s, strings.Join(got, "\n"), strings.Join(w, "\n"))
			}
			checked++
		}
	}
	if checked != 8+2*6 {
		t.Errorf("checked %d structs, want the 8 messages and 6 services' requests and responses", checked)
	}
}
