// Package ros2 speaks ROS 2 on the wire through Eclipse Cyclone DDS 0.10
// (libddsc, Debian cyclonedds-dev), the DDS that ROS 2 Humble and Jazzy
// ship, without a ROS installation: topics "rt" + the fully-qualified ROS
// name ("rt/robot1/cmd_vel"), types "<pkg>::msg::dds_::<Msg>_", XCDR1
// little-endian, keyless @final structs, participant USER_DATA
// "enclave=/;" and endpoint USER_DATA "typehash=RIHS01_<hash>;" as
// rmw_cyclonedds writes them.
//
// What it offers:
//
//   - Participant: one per DDS domain and process. It owns a goroutine that
//     logs, for every endpoint, matches (a ROS node subscribed to our
//     cmd_vel), incompatible QoS (a RELIABLE subscriber against a
//     BEST_EFFORT publisher, ...) and lost samples.
//   - TwistSink: publishes geometry_msgs/Twist (or TwistStamped) on
//     cmd_vel, RELIABLE, VOLATILE, KEEP_LAST 10; implements the agent's
//     CmdSink. It never publishes NaN or Inf.
//   - HandleWriter: publishes zerohop_msgs/SlotHandle.
//   - DiagnosticsWriter: publishes diagnostic_msgs/DiagnosticArray on
//     /diagnostics (a status.Sink), a node's health for ROS tools.
//   - MirrorWriter: republishes camera frames as full sensor_msgs/Image or
//     PointCloud2 (BEST_EFFORT, or RELIABLE KEEP_LAST 1 for rviz2's
//     defaults) without ever waiting for a subscriber.
//   - RosoutWriter: publishes rcl_interfaces/Log on /rosout; its Core
//     tees a zap logger there, for rqt_console.
//   - ParameterServer: rcl_interfaces' parameter services for the node
//     (~/list_parameters, ~/get_parameters, ...), so that `ros2 param`
//     lists, gets, describes and dumps a params.Set, and sets its writable
//     parameters (a read-only one's set fails with the reason); it announces
//     them on /parameter_events (rcl_interfaces/ParameterEvent).
//   - Subscription: sensor_msgs/Image, PointCloud2 and LaserScan readers
//     (SubscribeImage, SubscribePointCloud2, SubscribeLaserScan; BEST_EFFORT
//     by default, which matches any publisher) that hand each sample to a
//     callback as a view of Cyclone's loaned sample (ImageView,
//     PointCloud2View, LaserScanView), without copying.
//
// Topic names resolve against the participant's node as rcl resolves a
// ROS node's (Config.ResolveTopic): "/x" is absolute, "x" is relative to
// the namespace ("cmd_vel" in /robot1 is /robot1/cmd_vel, DDS topic
// rt/robot1/cmd_vel), "~/x" is private to the node, and {node}, {ns} are
// substituted. Remapping rules (Config.Remaps, read from --ros-args by
// package rosargs) rename the node and move topics as rcl's do.
//
// What ROS users see: `ros2 topic list`, `ros2 topic info -v` and
// `ros2 topic echo` work on these topics, and `ros2 node list` shows the
// participant's node: it is announced on ros_discovery_info as rmw does
// (rmw_dds_common/ParticipantEntitiesInfo; 24-byte GIDs with
// ROS_DISTRO=humble or older). Discovery follows the ROS environment
// variables as rmw_cyclonedds of that distro does (Config, ConfigFromEnv).
//
// Security: SROS2 as rcl and rmw_cyclonedds set it up (Security, from
// ROS_SECURITY_*): the enclave's certificates and signed documents from
// the keystore go into the domain's Cyclone configuration, which loads
// Cyclone's authentication, access-control and cryptography plugins.
//
// Build: the real implementation needs cgo and the build tag ros2
// (`go build -tags ros2`); without them every constructor fails with
// ErrNotBuilt and the binary needs no C library. The C types come from the
// IDL in ros2/idl through idlc (idl/gen.sh); the C glue is zh_dds.c.
package ros2

//go:generate ./idl/gen.sh
