package typehash

// ROS returns the descriptions of the message types zerohop speaks, written
// from their .msg files (common_interfaces, rcl_interfaces, rmw_dds_common and
// zerohop_msgs/msg/SlotHandle.msg). Field order and names matter; comments
// and constants do not.
func ROS() Registry {
	nested := func(name, typ string) Field { return Field{Name: name, ID: Nested, Nested: typ} }
	r := Registry{}
	for _, t := range []Type{
		{"builtin_interfaces/msg/Time", []Field{{Name: "sec", ID: Int32}, {Name: "nanosec", ID: Uint32}}},
		// rosgraph_msgs: /clock, a simulator's time.
		{"rosgraph_msgs/msg/Clock", []Field{nested("clock", "builtin_interfaces/msg/Time")}},
		{"std_msgs/msg/Header", []Field{nested("stamp", "builtin_interfaces/msg/Time"), {Name: "frame_id", ID: String}}},
		{"geometry_msgs/msg/Vector3", []Field{{Name: "x", ID: Float64}, {Name: "y", ID: Float64}, {Name: "z", ID: Float64}}},
		{"geometry_msgs/msg/Twist", []Field{nested("linear", "geometry_msgs/msg/Vector3"), nested("angular", "geometry_msgs/msg/Vector3")}},
		{"geometry_msgs/msg/TwistStamped", []Field{nested("header", "std_msgs/msg/Header"), nested("twist", "geometry_msgs/msg/Twist")}},
		// tf2_msgs: /tf_static, where the agent reads the LiDAR's mount.
		{"geometry_msgs/msg/Quaternion", []Field{{Name: "x", ID: Float64}, {Name: "y", ID: Float64}, {Name: "z", ID: Float64}, {Name: "w", ID: Float64}}},
		{"geometry_msgs/msg/Transform", []Field{nested("translation", "geometry_msgs/msg/Vector3"), nested("rotation", "geometry_msgs/msg/Quaternion")}},
		{"geometry_msgs/msg/TransformStamped", []Field{nested("header", "std_msgs/msg/Header"), {Name: "child_frame_id", ID: String}, nested("transform", "geometry_msgs/msg/Transform")}},
		{"tf2_msgs/msg/TFMessage", []Field{{Name: "transforms", ID: Nested, Nested: "geometry_msgs/msg/TransformStamped", Sequence: true}}},
		{"sensor_msgs/msg/Image", []Field{
			nested("header", "std_msgs/msg/Header"),
			{Name: "height", ID: Uint32}, {Name: "width", ID: Uint32},
			{Name: "encoding", ID: String}, {Name: "is_bigendian", ID: Uint8},
			{Name: "step", ID: Uint32}, {Name: "data", ID: Uint8, Sequence: true},
		}},
		{"sensor_msgs/msg/PointField", []Field{
			{Name: "name", ID: String}, {Name: "offset", ID: Uint32},
			{Name: "datatype", ID: Uint8}, {Name: "count", ID: Uint32},
		}},
		{"sensor_msgs/msg/PointCloud2", []Field{
			nested("header", "std_msgs/msg/Header"),
			{Name: "height", ID: Uint32}, {Name: "width", ID: Uint32},
			{Name: "fields", ID: Nested, Nested: "sensor_msgs/msg/PointField", Sequence: true},
			{Name: "is_bigendian", ID: Bool}, {Name: "point_step", ID: Uint32},
			{Name: "row_step", ID: Uint32}, {Name: "data", ID: Uint8, Sequence: true},
			{Name: "is_dense", ID: Bool},
		}},
		{"sensor_msgs/msg/LaserScan", []Field{
			nested("header", "std_msgs/msg/Header"),
			{Name: "angle_min", ID: Float32}, {Name: "angle_max", ID: Float32},
			{Name: "angle_increment", ID: Float32}, {Name: "time_increment", ID: Float32},
			{Name: "scan_time", ID: Float32}, {Name: "range_min", ID: Float32},
			{Name: "range_max", ID: Float32}, {Name: "ranges", ID: Float32, Sequence: true},
			{Name: "intensities", ID: Float32, Sequence: true},
		}},
		// diagnostic_msgs: /diagnostics. DiagnosticStatus.msg's level is a
		// byte, not a uint8.
		{"diagnostic_msgs/msg/KeyValue", []Field{{Name: "key", ID: String}, {Name: "value", ID: String}}},
		{"diagnostic_msgs/msg/DiagnosticStatus", []Field{
			{Name: "level", ID: Byte}, {Name: "name", ID: String}, {Name: "message", ID: String},
			{Name: "hardware_id", ID: String},
			{Name: "values", ID: Nested, Nested: "diagnostic_msgs/msg/KeyValue", Sequence: true},
		}},
		{"diagnostic_msgs/msg/DiagnosticArray", []Field{
			nested("header", "std_msgs/msg/Header"),
			{Name: "status", ID: Nested, Nested: "diagnostic_msgs/msg/DiagnosticStatus", Sequence: true},
		}},
		// rcl_interfaces: /rosout (its constants are not part of the hash).
		{"rcl_interfaces/msg/Log", []Field{
			nested("stamp", "builtin_interfaces/msg/Time"), {Name: "level", ID: Uint8},
			{Name: "name", ID: String}, {Name: "msg", ID: String}, {Name: "file", ID: String},
			{Name: "function", ID: String}, {Name: "line", ID: Uint32},
		}},
		// rcl_interfaces: /parameter_events.
		{"rcl_interfaces/msg/ParameterValue", []Field{
			{Name: "type", ID: Uint8}, {Name: "bool_value", ID: Bool}, {Name: "integer_value", ID: Int64},
			{Name: "double_value", ID: Float64}, {Name: "string_value", ID: String},
			{Name: "byte_array_value", ID: Byte, Sequence: true}, {Name: "bool_array_value", ID: Bool, Sequence: true},
			{Name: "integer_array_value", ID: Int64, Sequence: true}, {Name: "double_array_value", ID: Float64, Sequence: true},
			{Name: "string_array_value", ID: String, Sequence: true},
		}},
		{"rcl_interfaces/msg/Parameter", []Field{{Name: "name", ID: String}, nested("value", "rcl_interfaces/msg/ParameterValue")}},
		{"rcl_interfaces/msg/ParameterEvent", []Field{
			nested("stamp", "builtin_interfaces/msg/Time"), {Name: "node", ID: String},
			{Name: "new_parameters", ID: Nested, Nested: "rcl_interfaces/msg/Parameter", Sequence: true},
			{Name: "changed_parameters", ID: Nested, Nested: "rcl_interfaces/msg/Parameter", Sequence: true},
			{Name: "deleted_parameters", ID: Nested, Nested: "rcl_interfaces/msg/Parameter", Sequence: true},
		}},
		// rmw_dds_common 3.x (Jazzy): the graph topic ros_discovery_info.
		// Gid.msg's char[16] is uint8[16] once rosidl turns it into IDL.
		{"rmw_dds_common/msg/Gid", []Field{{Name: "data", ID: Uint8, Array: true, Capacity: 16}}},
		{"rmw_dds_common/msg/NodeEntitiesInfo", []Field{
			{Name: "node_namespace", ID: BoundedString, StringCapacity: 256},
			{Name: "node_name", ID: BoundedString, StringCapacity: 256},
			{Name: "reader_gid_seq", ID: Nested, Nested: "rmw_dds_common/msg/Gid", Sequence: true},
			{Name: "writer_gid_seq", ID: Nested, Nested: "rmw_dds_common/msg/Gid", Sequence: true},
		}},
		{"rmw_dds_common/msg/ParticipantEntitiesInfo", []Field{
			nested("gid", "rmw_dds_common/msg/Gid"),
			{Name: "node_entities_info_seq", ID: Nested, Nested: "rmw_dds_common/msg/NodeEntitiesInfo", Sequence: true},
		}},
	} {
		r[t.Name] = t
	}
	return r
}
