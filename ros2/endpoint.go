package ros2

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Reliability is the DDS reliability QoS kind.
type Reliability uint8

const (
	// ReliabilityDefault takes the endpoint's default: RELIABLE for
	// cmd_vel, BEST_EFFORT for sensor subscriptions and handles.
	ReliabilityDefault Reliability = iota
	Reliable
	BestEffort
)

func (r Reliability) String() string {
	switch r {
	case ReliabilityDefault:
		return "DEFAULT"
	case Reliable:
		return "RELIABLE"
	case BestEffort:
		return "BEST_EFFORT"
	}
	return "Reliability(" + strconv.Itoa(int(r)) + ")"
}

// maxDepth bounds KEEP_LAST depths: a typo must not reserve gigabytes.
const maxDepth = 1 << 16

// QoS is the part of an endpoint's QoS that zerohop lets callers choose.
// Durability is always VOLATILE and history KEEP_LAST. The zero value
// means the endpoint's default.
type QoS struct {
	Reliability Reliability
	Depth       int // KEEP_LAST depth; 0 = the endpoint's default

	// For the endpoints that are not VOLATILE (/rosout): kept for late
	// joiners, each sample for at most lifespan (0: no limit).
	transientLocal bool
	lifespan       time.Duration
}

// DefaultQoS is ROS 2's default profile (rmw_qos_profile_default):
// RELIABLE, VOLATILE, KEEP_LAST 10.
func DefaultQoS() QoS { return QoS{Reliability: Reliable, Depth: 10} }

// SensorDataQoS is ROS 2's sensor data profile
// (rmw_qos_profile_sensor_data): BEST_EFFORT, VOLATILE, KEEP_LAST 5. A
// BEST_EFFORT subscription matches every publisher.
func SensorDataQoS() QoS { return QoS{Reliability: BestEffort, Depth: 5} }

func (q QoS) String() string {
	durability := ", VOLATILE"
	if q.transientLocal {
		durability = ", TRANSIENT_LOCAL"
	}
	s := q.Reliability.String() + durability + ", KEEP_LAST " + strconv.Itoa(q.Depth)
	if q.lifespan > 0 {
		s += ", lifespan " + q.lifespan.String()
	}
	return s
}

// resolve fills unset fields from def and checks the result.
func (q QoS) resolve(def QoS) (QoS, error) {
	if q.Reliability == ReliabilityDefault {
		q.Reliability = def.Reliability
	}
	if q.Depth == 0 {
		q.Depth = def.Depth
	}
	if q.Reliability != Reliable && q.Reliability != BestEffort {
		return q, fmt.Errorf("ros2: QoS reliability %v unknown", q.Reliability)
	}
	if q.Depth < 1 || q.Depth > maxDepth {
		return q, fmt.Errorf("ros2: QoS depth %d: want 1..%d", q.Depth, maxDepth)
	}
	return q, nil
}

// msgType names a message type zerohop speaks. The values are the C enum
// zh_type of zh_dds.h.
type msgType uint8

const (
	typeTwist        msgType = 1
	typeTwistStamped msgType = 2
	typeImage        msgType = 3
	typePointCloud2  msgType = 4
	typeSlotHandle   msgType = 5
	typeDiagnostics  msgType = 7 // diagnostic_msgs/DiagnosticArray
	typeLog          msgType = 8 // rcl_interfaces/Log (/rosout)
	// typeParameterEvent is rcl_interfaces/ParameterEvent (/parameter_events).
	typeParameterEvent msgType = 9
	// typeTFMessage is tf2_msgs/TFMessage (/tf_static), read only.
	typeTFMessage msgType = 10
	// typeClock is rosgraph_msgs/Clock (/clock), read only.
	typeClock msgType = 11
	// typeLaserScan is sensor_msgs/LaserScan (planar LiDARs), read only.
	typeLaserScan msgType = 12
	// typeParticipantEntitiesInfo is the graph topic's type
	// (ros_discovery_info); the participant's own writer, not an endpoint.
	typeParticipantEntitiesInfo msgType = 6

	// A parameter service's request type is typeRequest + its
	// paramService, its reply type typeReply + it (zh_dds.h's ZH_REQUEST,
	// ZH_REPLY): rcl_interfaces::srv::dds_::<Srv>_Request_ and _Response_.
	typeRequest msgType = 16
	typeReply   msgType = 32
)

// paramService is one of rcl_interfaces' parameter services (zh_dds.h's
// zh_param_service).
type paramService uint8

const (
	srvDescribe paramService = iota + 1
	srvGetTypes
	srvGet
	srvList
	srvSet
	srvSetAtomically
)

var paramServices = [...]paramService{srvDescribe, srvGetTypes, srvGet, srvList, srvSet, srvSetAtomically}

// isService says whether t is a parameter service's request or reply.
func (t msgType) isService() bool { return t > typeRequest && t <= typeReply+msgType(srvSetAtomically) }

// name is the service's name under the node ("~/get_parameters") and
// rcl_interfaces' type name.
func (s paramService) name() (service, typ string) {
	switch s {
	case srvDescribe:
		return "describe_parameters", "DescribeParameters"
	case srvGetTypes:
		return "get_parameter_types", "GetParameterTypes"
	case srvGet:
		return "get_parameters", "GetParameters"
	case srvList:
		return "list_parameters", "ListParameters"
	case srvSet:
		return "set_parameters", "SetParameters"
	case srvSetAtomically:
		return "set_parameters_atomically", "SetParametersAtomically"
	}
	return "", ""
}

// Type hashes (REP-2011 RIHS01) of the types above, for endpoint USER_DATA.
// TestTypeHashes recomputes each one from the type descriptions.
const (
	hashTwist          = "RIHS01_9c45bf16fe0983d80e3cfe750d6835843d265a9a6c46bd2e609fcddde6fb8d2a"
	hashTwistStamped   = "RIHS01_5f0fcd4f81d5d06ad9b4c4c63e3ea51b82d6ae4d0558f1d475229b1121db6f64"
	hashImage          = "RIHS01_d31d41a9a4c4bc8eae9be757b0beed306564f7526c88ea6a4588fb9582527d47"
	hashPointCloud2    = "RIHS01_9198cabf7da3796ae6fe19c4cb3bdd3525492988c70522628af5daa124bae2b5"
	hashSlotHandle     = "RIHS01_dfce5d5c7ba45e1b76b3706dfdc7cb74762e11f365fee94c28cee0d2b3a9d3e5"
	hashDiagnostics    = "RIHS01_5a8a36efb05fb25070fa0fb3810290c0e6cd4862b54a8fb975a1ee8dc55a333e"
	hashLog            = "RIHS01_e28ce254ca8abc06abf92773b74602cdbf116ed34fbaf294fb9f81da9f318eac"
	hashParameterEvent = "RIHS01_043e627780fcad87a22d225bc2a037361dba713fca6a6b9f4b869a5aa0393204"
	hashTFMessage      = "RIHS01_e369d0f05a23ae52508854b66f6aa0437f3449d652e8cbf22d5abe85d020f087"
	hashClock          = "RIHS01_692f7a66e93a3c83e71765d033b60349ba68023a8c689a79e48078bcb5c58564"
	hashLaserScan      = "RIHS01_64c191398013af96509d518dac71d5164f9382553fce5c1f8cca5be7924bd828"
	// rmw_dds_common 3.x (Jazzy), the 16-byte Gid.
	hashParticipantEntitiesInfo = "RIHS01_91a0593bacdcc50ea9bdcf849a938b128412cc1ea821245c663bcd26f83c295e"
)

// rosName is the ROS type name ("geometry_msgs/msg/Twist").
func (t msgType) rosName() string {
	switch t {
	case typeTwist:
		return "geometry_msgs/msg/Twist"
	case typeTwistStamped:
		return "geometry_msgs/msg/TwistStamped"
	case typeImage:
		return "sensor_msgs/msg/Image"
	case typePointCloud2:
		return "sensor_msgs/msg/PointCloud2"
	case typeLaserScan:
		return "sensor_msgs/msg/LaserScan"
	case typeSlotHandle:
		return "zerohop_msgs/msg/SlotHandle"
	case typeDiagnostics:
		return "diagnostic_msgs/msg/DiagnosticArray"
	case typeLog:
		return "rcl_interfaces/msg/Log"
	case typeParameterEvent:
		return "rcl_interfaces/msg/ParameterEvent"
	case typeTFMessage:
		return "tf2_msgs/msg/TFMessage"
	case typeClock:
		return "rosgraph_msgs/msg/Clock"
	case typeParticipantEntitiesInfo:
		return "rmw_dds_common/msg/ParticipantEntitiesInfo"
	}
	if t > typeRequest && t <= typeRequest+msgType(srvSetAtomically) {
		_, typ := paramService(t - typeRequest).name()
		return "rcl_interfaces/srv/" + typ + "_Request"
	}
	if t > typeReply && t <= typeReply+msgType(srvSetAtomically) {
		_, typ := paramService(t - typeReply).name()
		return "rcl_interfaces/srv/" + typ + "_Response"
	}
	return "msgType(" + strconv.Itoa(int(t)) + ")"
}

// ddsName is the DDS type name rmw_cyclonedds registers for the ROS type:
// "pkg/msg/Name" → "pkg::msg::dds_::Name_", and so for "/srv/".
func (t msgType) ddsName() string {
	name := t.rosName()
	for _, kind := range []string{"msg", "srv"} {
		if pkg, n, ok := strings.Cut(name, "/"+kind+"/"); ok {
			return pkg + "::" + kind + "::dds_::" + n + "_"
		}
	}
	return name
}

func (t msgType) typeHash() string {
	switch t {
	case typeTwist:
		return hashTwist
	case typeTwistStamped:
		return hashTwistStamped
	case typeImage:
		return hashImage
	case typePointCloud2:
		return hashPointCloud2
	case typeLaserScan:
		return hashLaserScan
	case typeSlotHandle:
		return hashSlotHandle
	case typeDiagnostics:
		return hashDiagnostics
	case typeLog:
		return hashLog
	case typeParameterEvent:
		return hashParameterEvent
	case typeTFMessage:
		return hashTFMessage
	case typeClock:
		return hashClock
	case typeParticipantEntitiesInfo:
		return hashParticipantEntitiesInfo
	}
	return ""
}

// userData is the endpoint USER_DATA rmw writes (REP-2016 key=value;).
// Jazzy nodes log an error for every endpoint without it.
func (t msgType) userData() string { return "typehash=" + t.typeHash() + ";" }

// rosTime splits t into a builtin_interfaces/Time. The zero time.Time, and
// a time whose seconds do not fit in int32, become {0, 0}: "no stamp",
// which ROS controllers read as "now".
func rosTime(t time.Time) (sec int32, nanosec uint32) {
	if t.IsZero() {
		return 0, 0
	}
	s := t.Unix()
	if s < math.MinInt32 || s > math.MaxInt32 {
		return 0, 0
	}
	return int32(s), uint32(t.Nanosecond())
}

// ImageView is one received sensor_msgs/Image. The byte slices point into
// the sample Cyclone has loaned to the subscription: they are valid only
// until the callback returns, after which the loan is returned. Copy what
// must outlive the callback.
type ImageView struct {
	Sec         int32  // header.stamp.sec
	Nanosec     uint32 // header.stamp.nanosec
	FrameID     []byte // header.frame_id
	Height      uint32
	Width       uint32
	Encoding    []byte // e.g. "rgb8" (sensor_msgs/image_encodings)
	IsBigEndian uint8
	Step        uint32 // bytes per row
	Data        []byte // Step × Height bytes when the publisher is well-formed; not checked
}

// Stamp returns header.stamp as a time.
func (v *ImageView) Stamp() time.Time { return time.Unix(int64(v.Sec), int64(v.Nanosec)) }

// PointField describes one field of a PointCloud2 point. Name is valid
// for the callback only, like every slice of a view.
type PointField struct {
	Name     []byte
	Offset   uint32
	Datatype uint8 // sensor_msgs/PointField: 1 INT8 ... 7 FLOAT32, 8 FLOAT64
	Count    uint32
}

// MaxPointFields is the most fields a PointCloud2View describes; a cloud
// with more is counted as skipped and not delivered.
const MaxPointFields = 32

// PointCloud2View is one received sensor_msgs/PointCloud2; its slices are
// valid until the callback returns (see ImageView).
type PointCloud2View struct {
	Sec         int32
	Nanosec     uint32
	FrameID     []byte
	Height      uint32
	Width       uint32
	Fields      []PointField // len ≤ MaxPointFields
	IsBigEndian bool
	PointStep   uint32
	RowStep     uint32
	Data        []byte
	IsDense     bool

	fields [MaxPointFields]PointField // backing store of Fields: no allocation per sample
}

// Stamp returns header.stamp as a time.
func (v *PointCloud2View) Stamp() time.Time { return time.Unix(int64(v.Sec), int64(v.Nanosec)) }

// LaserScanView is one received sensor_msgs/LaserScan (a planar LiDAR's
// sweep); its slices are valid only during the callback (see ImageView).
// Angles are in radians around the frame's +Z axis, 0 along +X; ray i
// points at AngleMin + i×AngleIncrement. The values are as sent, NaN and
// ±Inf included (REP 117: +Inf no return, -Inf too close, NaN no
// measurement); ranges outside [RangeMin, RangeMax] are to be discarded.
type LaserScanView struct {
	Sec                                int32  // header.stamp.sec: the first ray's time
	Nanosec                            uint32 // header.stamp.nanosec
	FrameID                            []byte // header.frame_id
	AngleMin, AngleMax, AngleIncrement float32
	TimeIncrement, ScanTime            float32 // seconds between rays, between scans
	RangeMin, RangeMax                 float32 // metres
	Ranges                             []float32
	Intensities                        []float32 // empty when the driver sends none
}

// Stamp returns header.stamp as a time.
func (v *LaserScanView) Stamp() time.Time { return time.Unix(int64(v.Sec), int64(v.Nanosec)) }

// TwistOptions configure a TwistSink. The zero value publishes
// geometry_msgs/Twist on cmd_vel (relative: /<namespace>/cmd_vel),
// RELIABLE, VOLATILE, KEEP_LAST 10.
type TwistOptions struct {
	Topic   string // ROS topic, resolved against the node (Config.ResolveTopic); default "cmd_vel"
	Stamped bool   // publish geometry_msgs/TwistStamped (newer controllers) instead
	FrameID string // TwistStamped header.frame_id; default "base_link"
	// ZeroStamp publishes every TwistStamped with header.stamp {0, 0},
	// which diff_drive_controller (and controllers that follow it) stamp
	// on arrival with their own clock.
	ZeroStamp bool
	// Clock, if set, stamps each TwistStamped with its time at publish
	// instead of the frame's: SimClock.Now under use_sim_time, as an
	// rclcpp node stamps with now(). It must not allocate.
	Clock func() time.Time
	QoS   QoS // default DefaultQoS()
}

// ParameterOptions tune a ParameterServer.
type ParameterOptions struct {
	// Clock stamps the /parameter_events; nil: this machine's clock.
	// Under use_sim_time, SimClock.Now: rclcpp stamps them with the node's
	// clock, which is then the simulation's.
	Clock func() time.Time
}

// RosoutOptions configure a RosoutWriter. The zero value publishes on
// /rosout with rcl's rosout QoS: RELIABLE, TRANSIENT_LOCAL, KEEP_LAST
// 1000, lifespan 10 s, so that rqt_console started a little later still
// shows the last lines.
type RosoutOptions struct {
	Topic string // default "/rosout"
}

// RosoutQoS is rcl's QoS for /rosout (rcl_qos_profile_rosout_default).
func RosoutQoS() QoS {
	return QoS{Reliability: Reliable, Depth: 1000, transientLocal: true, lifespan: 10 * time.Second}
}

// Limits of one DiagnosticArray (zh_write_diagnostics' stack arrays).
const (
	MaxDiagnosticStatuses = 32
	MaxDiagnosticValues   = 512 // over all statuses
)

// DiagnosticsOptions configure a DiagnosticsWriter. The zero value
// publishes on /diagnostics (absolute, as diagnostic_updater does),
// RELIABLE, VOLATILE, KEEP_LAST 10.
type DiagnosticsOptions struct {
	Topic string // default "/diagnostics"
	QoS   QoS    // default DefaultQoS()
}

// HandleWriterOptions configure a HandleWriter. The zero value publishes
// on /zerohop/handles with SensorDataQoS (BEST_EFFORT never blocks the
// camera).
type HandleWriterOptions struct {
	Topic string // ROS topic, resolved against the node (Config.ResolveTopic); default "/zerohop/handles"
	QoS   QoS    // default SensorDataQoS()
}

// SubscriptionOptions configure a Subscription. The zero value is
// SensorDataQoS: BEST_EFFORT, KEEP_LAST 5, which matches any publisher.
type SubscriptionOptions struct {
	QoS QoS
}

var errNilCallback = errors.New("ros2: subscription callback is nil")
