// Package tf holds ROS 2 transforms (/tf_static and /tf, tf2_msgs/TFMessage)
// as a tree and answers lookups between its frames, the way tf2's
// BufferCore does, so that the agent can read where its sensors sit on the
// robot (the LiDAR's mount) from what robot_state_publisher and
// static_transform_publisher announce.
//
// Conventions are tf2's and REP-103's:
//
//   - Axes: x forward, y left, z up; angles in radians, right handed. A
//     positive pitch turns +x towards −z (a LiDAR tilted down to see the
//     ground has a positive pitch).
//   - A geometry_msgs/TransformStamped with header.frame_id P and
//     child_frame_id C holds C's pose in P: a point p given in C lies at
//     R·p + t in P.
//   - Roll, pitch and yaw are rotations about the parent's fixed x, y and
//     z axes, roll first: R = Rz(yaw)·Ry(pitch)·Rx(roll), as URDF's
//     <origin rpy>, tf2's Quaternion::setRPY and Matrix3x3::getRPY.
//   - Lookup(target, source) is tf2's lookupTransform(target_frame,
//     source_frame): it takes points in source into target, and its
//     translation and RPY are what `ros2 run tf2_ros tf2_echo target
//     source` prints.
//
// Tree holds static transforms only: no stamps, no interpolation, and a
// later transform for a child replaces the earlier one, as a latched
// /tf_static does in tf2. Buffer holds moving ones too (/tf, each with its
// stamp, a bounded history per edge) and answers lookups at a time,
// interpolating between stamps (linear translation, slerp) and
// extrapolating a bounded time past the newest: what the camera needs to
// deskew a scan.
package tf
