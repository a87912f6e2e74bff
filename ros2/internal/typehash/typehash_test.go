package typehash

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// Hashes as published by rosidl-generated code of ROS 2 Jazzy (the
// *__EXPECTED_HASH constants of rosidl_generator_c description files,
// also what `ros2 topic info -v` prints as "Topic type hash").
var published = []struct{ name, hash string }{
	{"builtin_interfaces/msg/Time", "RIHS01_b106235e25a4c5ed35098aa0a61a3ee9c9b18d197f398b0e4206cea9acf9c197"},
	{"std_msgs/msg/Header", "RIHS01_f49fb3ae2cf070f793645ff749683ac6b06203e41c891e17701b1cb597ce6a01"},
	{"geometry_msgs/msg/Vector3", "RIHS01_cc12fe83e4c02719f1ce8070bfd14aecd40f75a96696a67a2a1f37f7dbb0765d"},
	{"geometry_msgs/msg/Twist", "RIHS01_9c45bf16fe0983d80e3cfe750d6835843d265a9a6c46bd2e609fcddde6fb8d2a"},
	{"geometry_msgs/msg/TwistStamped", "RIHS01_5f0fcd4f81d5d06ad9b4c4c63e3ea51b82d6ae4d0558f1d475229b1121db6f64"},
	{"sensor_msgs/msg/Image", "RIHS01_d31d41a9a4c4bc8eae9be757b0beed306564f7526c88ea6a4588fb9582527d47"},
	{"sensor_msgs/msg/PointField", "RIHS01_5c6a4750728c2bcfbbf7037225b20b02d4429634732146b742dee1726637ef01"},
	{"sensor_msgs/msg/PointCloud2", "RIHS01_9198cabf7da3796ae6fe19c4cb3bdd3525492988c70522628af5daa124bae2b5"},
	// sensor_msgs/msg/detail/laser_scan__struct.h's TYPE_HASH.
	{"sensor_msgs/msg/LaserScan", "RIHS01_64c191398013af96509d518dac71d5164f9382553fce5c1f8cca5be7924bd828"},
	// diagnostic_msgs: the *__get_type_hash constants of its generated
	// description files (Jazzy's TYPE_HASH). Newer rosidl headers carry a
	// TYPE_VERSION_HASH (14fe60cb... for DiagnosticArray) that is not
	// this hash.
	{"diagnostic_msgs/msg/KeyValue", "RIHS01_d68081eaa540288c5440753baecef0c4e16e81a5f78ad68902ded5100413bb42"},
	{"diagnostic_msgs/msg/DiagnosticStatus", "RIHS01_b0e3e692ea2d54a8af2f4ef1930e81556a2db55216b771f8a7d2724ed47bf0e4"},
	{"diagnostic_msgs/msg/DiagnosticArray", "RIHS01_5a8a36efb05fb25070fa0fb3810290c0e6cd4862b54a8fb975a1ee8dc55a333e"},
	// rcl_interfaces (Jazzy): log__description.c's get_type_hash.
	{"rcl_interfaces/msg/Log", "RIHS01_e28ce254ca8abc06abf92773b74602cdbf116ed34fbaf294fb9f81da9f318eac"},
	// parameter_event__description.c's get_type_hash.
	{"rcl_interfaces/msg/ParameterEvent", "RIHS01_043e627780fcad87a22d225bc2a037361dba713fca6a6b9f4b869a5aa0393204"},
	// Jazzy's, as `ros2 topic info -v /tf` and rosbag2 metadata print it.
	{"tf2_msgs/msg/TFMessage", "RIHS01_e369d0f05a23ae52508854b66f6aa0437f3449d652e8cbf22d5abe85d020f087"},
	{"rosgraph_msgs/msg/Clock", "RIHS01_692f7a66e93a3c83e71765d033b60349ba68023a8c689a79e48078bcb5c58564"},
	// rmw_dds_common 3.x: the *__get_type_hash constants of its generated
	// description files.
	{"rmw_dds_common/msg/Gid", "RIHS01_ab6f21cfbb0a6dbb837161e1110c2051a2850ed9f9c53944d7115d9bcebedf71"},
	{"rmw_dds_common/msg/NodeEntitiesInfo", "RIHS01_8ffef65ee2d088c63b1e8fcd31e800ba9fc8dbe0ee15ca60d1676de5218087a7"},
	{"rmw_dds_common/msg/ParticipantEntitiesInfo", "RIHS01_91a0593bacdcc50ea9bdcf849a938b128412cc1ea821245c663bcd26f83c295e"},
}

func TestHashMatchesPublishedHashes(t *testing.T) {
	r := ROS()
	for _, c := range published {
		t.Run(c.name, func(t *testing.T) {
			got, err := r.Hash(c.name)
			if err != nil {
				t.Fatal(err)
			}
			if got != c.hash {
				t.Errorf("Hash(%q) = %s, want %s", c.name, got, c.hash)
			}
		})
	}
}

func TestJSONIsPythonJSONDumps(t *testing.T) {
	got, err := ROS().JSON("builtin_interfaces/msg/Time")
	if err != nil {
		t.Fatal(err)
	}
	want := `{"type_description": {"type_name": "builtin_interfaces/msg/Time", "fields": [` +
		`{"name": "sec", "type": {"type_id": 6, "capacity": 0, "string_capacity": 0, "nested_type_name": ""}}, ` +
		`{"name": "nanosec", "type": {"type_id": 7, "capacity": 0, "string_capacity": 0, "nested_type_name": ""}}]}, ` +
		`"referenced_type_descriptions": []}`
	if got != want {
		t.Errorf("JSON:\n got %s\nwant %s", got, want)
	}
}

func TestParseMsgMatchesDescriptions(t *testing.T) {
	r := ROS()
	for _, name := range []string{
		"builtin_interfaces/msg/Time", "std_msgs/msg/Header", "geometry_msgs/msg/Vector3",
		"geometry_msgs/msg/Twist", "geometry_msgs/msg/TwistStamped", "sensor_msgs/msg/Image",
		"sensor_msgs/msg/PointField", "sensor_msgs/msg/PointCloud2", "sensor_msgs/msg/LaserScan",
	} {
		t.Run(name, func(t *testing.T) {
			base := name[strings.LastIndex(name, "/")+1:]
			src, err := os.ReadFile(filepath.Join("testdata", "msg", base+".msg"))
			if err != nil {
				t.Fatal(err)
			}
			got, err := ParseMsg(name, src)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, r[name]) {
				t.Errorf("ParseMsg:\n got %+v\nwant %+v", got, r[name])
			}
		})
	}
}

func TestParseMsgRejects(t *testing.T) {
	for _, c := range []struct{ name, src string }{
		{"a field without a name", "uint8\n"},
		{"a fixed array", "uint8[4] x\n"},
		{"a bounded sequence", "uint8[<=4] x\n"},
		{"a bounded string", "string<=8 x\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := ParseMsg("p/msg/T", []byte(c.src)); err == nil {
				t.Errorf("ParseMsg(%q) = nil error", c.src)
			}
		})
	}
	if _, err := ParseMsg("T", []byte("uint8 x\n")); err == nil {
		t.Error("ParseMsg accepted a type name without /msg/")
	}
}

func TestHashUnknownType(t *testing.T) {
	r := ROS()
	if _, err := r.Hash("nope/msg/Nope"); err == nil {
		t.Error("Hash of an unknown type: nil error")
	}
	r["p/msg/Dangling"] = Type{Name: "p/msg/Dangling", Fields: []Field{{Name: "x", ID: Nested, Nested: "p/msg/Missing"}}}
	if _, err := r.Hash("p/msg/Dangling"); err == nil {
		t.Error("Hash with an unresolved reference: nil error")
	}
}
