package ros2

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/zerohop/zerohop/ros2/internal/typehash"
)

var allTypes = []msgType{typeTwist, typeTwistStamped, typeImage, typePointCloud2, typeSlotHandle, typeDiagnostics, typeLog, typeParameterEvent, typeTFMessage, typeClock, typeLaserScan, typeParticipantEntitiesInfo}

// registry holds the ROS types plus SlotHandle as zerohop_msgs declares it.
func registry(t *testing.T) typehash.Registry {
	t.Helper()
	r := typehash.ROS()
	src, err := os.ReadFile("../zerohop_msgs/msg/SlotHandle.msg")
	if err != nil {
		t.Fatal(err)
	}
	sh, err := typehash.ParseMsg("zerohop_msgs/msg/SlotHandle", src)
	if err != nil {
		t.Fatal(err)
	}
	r[sh.Name] = sh
	return r
}

// The USER_DATA type hashes are recomputed from the type descriptions
// (REP-2011); the algorithm is checked against published hashes in
// internal/typehash.
func TestTypeHashes(t *testing.T) {
	r := registry(t)
	for _, typ := range allTypes {
		got, err := r.Hash(typ.rosName())
		if err != nil {
			t.Fatal(err)
		}
		if got != typ.typeHash() {
			t.Errorf("%s: constant %s, computed %s", typ.rosName(), typ.typeHash(), got)
		}
		if ud := typ.userData(); ud != "typehash="+got+";" {
			t.Errorf("%s: USER_DATA %q", typ.rosName(), ud)
		}
	}
}

func TestDDSTypeNames(t *testing.T) {
	want := map[msgType]string{
		typeTwist:                   "geometry_msgs::msg::dds_::Twist_",
		typeTwistStamped:            "geometry_msgs::msg::dds_::TwistStamped_",
		typeImage:                   "sensor_msgs::msg::dds_::Image_",
		typePointCloud2:             "sensor_msgs::msg::dds_::PointCloud2_",
		typeLaserScan:               "sensor_msgs::msg::dds_::LaserScan_",
		typeSlotHandle:              "zerohop_msgs::msg::dds_::SlotHandle_",
		typeDiagnostics:             "diagnostic_msgs::msg::dds_::DiagnosticArray_",
		typeLog:                     "rcl_interfaces::msg::dds_::Log_",
		typeParameterEvent:          "rcl_interfaces::msg::dds_::ParameterEvent_",
		typeTFMessage:               "tf2_msgs::msg::dds_::TFMessage_",
		typeClock:                   "rosgraph_msgs::msg::dds_::Clock_",
		typeParticipantEntitiesInfo: "rmw_dds_common::msg::dds_::ParticipantEntitiesInfo_",
	}
	for typ, name := range want {
		if got := typ.ddsName(); got != name {
			t.Errorf("ddsName = %q, want %q", got, name)
		}
		// The generated descriptors carry the same names.
		pkg := strings.SplitN(name, "::", 2)[0]
		c, err := os.ReadFile(pkg + ".c")
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(c, []byte(`.m_typename = "`+name+`"`)) {
			t.Errorf("%s.c has no descriptor named %q", pkg, name)
		}
	}
}

// zerohop_msgs ships the handles package's message unchanged.
func TestSlotHandleMsgMirrorsHandles(t *testing.T) {
	ours, err := os.ReadFile("../zerohop_msgs/msg/SlotHandle.msg")
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := os.ReadFile("../handles/msg/SlotHandle.msg")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ours, theirs) {
		t.Error("zerohop_msgs/msg/SlotHandle.msg differs from handles/msg/SlotHandle.msg: copy it over and run make ros2-gen")
	}
}

// The IDL that idlc compiles declares the .msg fields in the same order
// with the same wire types.
func TestSlotHandleIDLMatchesMsg(t *testing.T) {
	r := registry(t)
	idl, err := os.ReadFile("idl/zerohop_msgs.idl")
	if err != nil {
		t.Fatal(err)
	}
	body := idl[bytes.Index(idl, []byte("struct SlotHandle_ {")):]
	member := regexp.MustCompile(`(?m)^\s+([\w:]+)\s+(\w+);`)
	idlType := map[int]string{typehash.Uint8: "uint8", typehash.Uint16: "uint16", typehash.Uint32: "uint32",
		typehash.Uint64: "uint64", typehash.Int64: "int64"}
	var got, want []string
	for _, m := range member.FindAllSubmatch(body, -1) {
		got = append(got, string(m[1])+" "+string(m[2]))
	}
	for _, f := range r["zerohop_msgs/msg/SlotHandle"].Fields {
		typ := idlType[f.ID]
		if f.Nested == "std_msgs/msg/Header" {
			typ = "std_msgs::msg::dds_::Header_"
		}
		want = append(want, typ+" "+f.Name)
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("IDL members:\n%s\n.msg fields:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// The committed C types are what idl/gen.sh makes from the IDL today.
func TestGeneratedCodeIsFresh(t *testing.T) {
	if _, err := exec.LookPath("idlc"); err != nil {
		if os.Getenv("ZEROHOP_REQUIRE_ROS2") == "1" {
			t.Fatal("ZEROHOP_REQUIRE_ROS2=1 but idlc is not installed (make deps installs cyclonedds-tools)")
		}
		t.Skip("idlc not installed (apt-get install -y cyclonedds-tools; ZEROHOP_REQUIRE_ROS2=1 makes this a failure); cannot check the generated C")
	}
	dir := t.TempDir()
	out, err := exec.Command("idl/gen.sh", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("idl/gen.sh: %v\n%s", err, out)
	}
	for _, name := range []string{"builtin_interfaces", "rosgraph_msgs", "std_msgs", "geometry_msgs", "tf2_msgs", "sensor_msgs", "diagnostic_msgs", "zerohop_msgs", "rmw_dds_common", "rmw_dds_common_humble", "rcl_interfaces"} {
		for _, ext := range []string{".c", ".h"} {
			fresh, err := os.ReadFile(filepath.Join(dir, name+ext))
			if err != nil {
				t.Fatal(err)
			}
			committed, err := os.ReadFile(name + ext)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(fresh, committed) {
				t.Errorf("%s%s is stale: run make ros2-gen (ros2/idl/gen.sh)", name, ext)
			}
		}
	}
}

// The diagnostic_msgs IDL that idlc compiles declares the fields the type
// hash is computed from, in order, with the same wire types.
func TestDiagnosticsIDLMatchesMsg(t *testing.T) {
	r := registry(t)
	idl, err := os.ReadFile("idl/diagnostic_msgs.idl")
	if err != nil {
		t.Fatal(err)
	}
	idlType := func(f typehash.Field) string {
		switch {
		case f.ID == typehash.String:
			return "string"
		case f.ID == typehash.Byte:
			return "octet"
		case f.Nested == "std_msgs/msg/Header":
			return "std_msgs::msg::dds_::Header_"
		case f.Sequence:
			return "sequence<" + strings.TrimPrefix(f.Nested, "diagnostic_msgs/msg/") + "_>"
		}
		return fmt.Sprintf("type %d", f.ID)
	}
	checkIDLStructs(t, idl, r, "diagnostic_msgs", []string{"KeyValue", "DiagnosticStatus", "DiagnosticArray"}, idlType)
}

// checkIDLStructs compares the members of each struct NAME_ in idl with
// the fields of pkg/msg/NAME in r, typed as idlType writes them.
func checkIDLStructs(t *testing.T, idl []byte, r typehash.Registry, pkg string, names []string, idlType func(typehash.Field) string) {
	t.Helper()
	member := regexp.MustCompile(`(?m)^\s+([\w:<>]+)\s+(\w+);`)
	for _, name := range names {
		start := bytes.Index(idl, []byte("struct "+name+"_ {"))
		if start < 0 {
			t.Fatalf("no struct %s_ in the IDL", name)
		}
		body := idl[start:]
		body = body[:bytes.Index(body, []byte("};"))]
		var got, want []string
		for _, m := range member.FindAllSubmatch(body, -1) {
			got = append(got, string(m[1])+" "+string(m[2]))
		}
		for _, f := range r[pkg+"/msg/"+name].Fields {
			want = append(want, idlType(f)+" "+f.Name)
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s: IDL members:\n%s\n.msg fields:\n%s", name, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}

// The sensor_msgs IDL that idlc compiles declares the fields the type
// hashes are computed from, in order, with the same wire types.
func TestSensorIDLMatchesMsg(t *testing.T) {
	r := registry(t)
	idl, err := os.ReadFile("idl/sensor_msgs.idl")
	if err != nil {
		t.Fatal(err)
	}
	prim := map[int]string{typehash.Uint8: "uint8", typehash.Uint32: "uint32", typehash.Float32: "float",
		typehash.Bool: "boolean", typehash.String: "string"}
	idlType := func(f typehash.Field) string {
		typ, ok := prim[f.ID]
		switch {
		case f.Nested == "std_msgs/msg/Header":
			typ = "std_msgs::msg::dds_::Header_"
		case f.ID == typehash.Nested:
			typ = strings.TrimPrefix(f.Nested, "sensor_msgs/msg/") + "_"
		case !ok:
			typ = fmt.Sprintf("type %d", f.ID)
		}
		if f.Sequence {
			return "sequence<" + typ + ">"
		}
		return typ
	}
	checkIDLStructs(t, idl, r, "sensor_msgs", []string{"Image", "PointField", "PointCloud2", "LaserScan"}, idlType)
}
