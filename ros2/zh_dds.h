// zh_dds: the small, plain-typed C layer between package ros2 (Go) and
// Cyclone DDS 0.10 (libddsc). Each function does one DDS job; Go calls it
// with integers, doubles and pointers to the plain structs below, never
// with Cyclone or idlc types, so the Go side does not depend on idlc's
// naming. Entity handles (dds_entity_t, int32_t) are Cyclone's: a deleted
// handle makes later calls fail with DDS_RETCODE_BAD_PARAMETER or
// ALREADY_DELETED, never touch freed memory.
#ifndef ZH_DDS_H
#define ZH_DDS_H

#include <stddef.h>
#include <stdint.h>

#include "dds/dds.h"

// Message types, by the DDS type names rmw_cyclonedds uses.
enum zh_type {
  ZH_TWIST = 1,         // geometry_msgs::msg::dds_::Twist_
  ZH_TWIST_STAMPED = 2, // geometry_msgs::msg::dds_::TwistStamped_
  ZH_IMAGE = 3,         // sensor_msgs::msg::dds_::Image_
  ZH_POINTCLOUD2 = 4,   // sensor_msgs::msg::dds_::PointCloud2_
  ZH_SLOT_HANDLE = 5,   // zerohop_msgs::msg::dds_::SlotHandle_
  ZH_DIAGNOSTICS = 7,   // diagnostic_msgs::msg::dds_::DiagnosticArray_ (6: the graph topic's type)
  ZH_LOG = 8,           // rcl_interfaces::msg::dds_::Log_ (/rosout)
  ZH_PARAMETER_EVENT = 9, // rcl_interfaces::msg::dds_::ParameterEvent_ (/parameter_events)
  ZH_TF_MESSAGE = 10,   // tf2_msgs::msg::dds_::TFMessage_ (/tf_static)
  ZH_CLOCK = 11,        // rosgraph_msgs::msg::dds_::Clock_ (/clock)
  ZH_LASER_SCAN = 12,   // sensor_msgs::msg::dds_::LaserScan_
  // A parameter service's request type is ZH_REQUEST + its zh_param_service,
  // its reply type ZH_REPLY + it: rcl_interfaces::srv::dds_::<Srv>_Request_
  // and _Response_.
  ZH_REQUEST = 16,
  ZH_REPLY = 32,
};

// The parameter services of rcl_interfaces/srv, as rclcpp serves them.
enum zh_param_service {
  ZH_SRV_DESCRIBE = 1,        // describe_parameters
  ZH_SRV_GET_TYPES = 2,       // get_parameter_types
  ZH_SRV_GET = 3,             // get_parameters
  ZH_SRV_LIST = 4,            // list_parameters
  ZH_SRV_SET = 5,             // set_parameters
  ZH_SRV_SET_ATOMICALLY = 6,  // set_parameters_atomically
};

// zh_participant creates the domain with `config` (Cyclone's config
// string: file URIs and XML fragments, comma-separated; "" = defaults)
// and a participant in it whose USER_DATA is `userdata` and whose QoS
// carries the nprops properties (names[i], values[i]): DDS Security's
// dds.sec.* settings, as rmw_cyclonedds sets them. It returns the
// participant and stores the domain handle in *domain_out; on failure a
// negative DDS return code, with *domain_out < 0 if no domain was made.
// DDS_RETCODE_PRECONDITION_NOT_MET: this process already has that domain.
dds_entity_t zh_participant(uint32_t domain_id, const char *config, const char *userdata,
                            const char *const *names, const char *const *values, int nprops,
                            dds_entity_t *domain_out);

// zh_endpoint creates a topic `topic_name` of `type` and a writer
// (is_writer != 0) or a reader on it. QoS: RELIABLE (max_blocking_time
// `max_blocking_ns`, ≥ 0; it matters only for a writer) or
// BEST_EFFORT, VOLATILE (TRANSIENT_LOCAL if transient_local), KEEP_LAST
// `depth`, lifespan `lifespan_ns` (0: infinite); writers also autodispose
// = false and data representation XCDR1 only. `userdata` is the
// endpoint's USER_DATA ("typehash=RIHS01_...;"). `status_mask` is set on
// the endpoint before it is returned.
dds_entity_t zh_endpoint(dds_entity_t participant, int type, const char *topic_name,
                         int is_writer, int best_effort, int transient_local, int32_t depth,
                         int64_t max_blocking_ns, int64_t lifespan_ns,
                         const char *userdata, uint32_t status_mask);

// zh_endpoint_delete deletes an endpoint and the topic handle made for it.
// A RELIABLE writer first waits (up to Cyclone's writer linger duration,
// 1 s by default) for its last samples to be acknowledged.
dds_return_t zh_endpoint_delete(dds_entity_t endpoint);

// Writers. Each builds the sample on its stack and calls dds_write.
dds_return_t zh_write_twist(dds_entity_t writer, double linear_x, double angular_z);
dds_return_t zh_write_twist_stamped(dds_entity_t writer, int32_t sec, uint32_t nanosec,
                                    const char *frame_id, double linear_x, double angular_z);

// zh_write_log writes one rcl_interfaces/Log (strings NUL-terminated,
// read during the call only).
dds_return_t zh_write_log(dds_entity_t writer, int32_t sec, uint32_t nanosec, uint8_t level,
                          const char *name, const char *msg, const char *file, const char *function,
                          uint32_t line);

// zh_slot_handle is zerohop_msgs/SlotHandle in plain fields; frame_id is
// NUL-terminated inside the struct, so Go can fill it without allocating.
typedef struct zh_slot_handle {
  int32_t sec;
  uint32_t nanosec;
  char frame_id[17];
  uint16_t version;
  uint8_t kind;
  uint32_t pool_id;
  uint32_t slot;
  uint64_t generation;
  uint64_t seq;
  int64_t publish_time_ns;
  uint64_t length;
  uint64_t checksum;
  uint32_t width;
  uint32_t height;
  uint32_t row_step;
  uint8_t encoding;
  uint32_t point_count;
  uint32_t point_step;
  uint16_t offset_x;
  uint16_t offset_y;
  uint16_t offset_z;
  uint16_t offset_intensity;
  uint8_t datatype;
  uint8_t point_flags;
} zh_slot_handle;

dds_return_t zh_write_slot_handle(dds_entity_t writer, const zh_slot_handle *h);

// zh_diag_status is one diagnostic_msgs/DiagnosticStatus whose strings are
// offsets into one buffer of NUL-terminated strings, and whose values are
// nvalues (key, value) offset pairs starting at values[first_value*2].
typedef struct zh_diag_status {
  uint8_t level;
  uint32_t name, message, hardware_id; // offsets into strings
  uint32_t first_value, nvalues;
} zh_diag_status;

// zh_write_diagnostics writes one DiagnosticArray of n statuses; the sample
// points into the caller's arrays (no copy), which dds_write serializes
// before it returns. Offsets are not checked: the caller builds them.
dds_return_t zh_write_diagnostics(dds_entity_t writer, int32_t sec, uint32_t nanosec, const char *strings,
                                  const zh_diag_status *statuses, uint32_t n, const uint32_t *values);

// zh_request is one taken service request: rmw_cyclonedds's header
// (client_guid: the client's request writer instance handle, and the
// request's sequence number, both echoed in the reply), the request
// writer's publication handle (for zh_client_reply_matched), and the
// sizes of what zh_request_strings copies. The loan is the caller's
// until zh_return_loan.
typedef struct zh_request {
  void *loan;
  uint64_t client_guid;
  int64_t sequence_number;
  uint64_t writer;     // dds_instance_handle_t of the request's writer
  uint64_t depth;      // ListParameters: 0 = recursive
  uint32_t nnames;     // names (or ListParameters' prefixes, or the parameters of a set)
  uint32_t bytes;      // what zh_request_strings writes
} zh_request;

// zh_service_descriptor is the topic descriptor of a ZH_REQUEST or ZH_REPLY
// type (zh_params.c); NULL for any other.
const dds_topic_descriptor_t *zh_service_descriptor(int type);

// zh_take_request takes one valid request of service `srv` from `reader`:
// 1 with *out filled, 0 when the reader holds none, or a negative DDS
// return code.
int32_t zh_take_request(dds_entity_t reader, int srv, zh_request *out);

// zh_param_value is a scalar rcl_interfaces ParameterValue (its
// string_value in the strings buffer).
typedef struct zh_param_value {
  uint8_t type;
  uint8_t bool_value;
  int64_t integer_value;
  double double_value;
} zh_param_value;

// zh_request_strings copies the request's names, each NUL-terminated, into
// buf (cap ≥ req->bytes): the names, the prefixes of a ListParameters, or,
// for the two set services, each parameter's name then its string_value,
// with the rest of each value in values[i] (nnames entries). A NUL inside
// a string ends it early. DDS_RETCODE_BAD_PARAMETER if cap is too small.
dds_return_t zh_request_strings(int srv, const zh_request *req, char *buf, uint32_t cap, zh_param_value *values);

// zh_param_rec is one element of a reply, its strings offsets into one
// buffer of NUL-terminated strings. Which fields count depends on the
// service: list (name; prefixes apart), get (type and the value fields),
// get types (type), describe (name, type, description, constraints,
// read_only; has_range and range_*: one floating_point_range), set
// (successful, reason).
typedef struct zh_param_rec {
  uint32_t name, string_value, description, constraints, reason;
  uint8_t type, bool_value, read_only, successful, has_range;
  int64_t integer_value;
  double double_value;
  double range_from, range_to, range_step;
} zh_param_rec;

// zh_write_reply writes the reply of service `srv` to the request
// (client_guid, sequence_number): n records (exactly 1 for set
// atomically) and, for list, nprefixes prefix offsets. It reads the
// arrays during the call only.
dds_return_t zh_write_reply(dds_entity_t writer, int srv, uint64_t client_guid, int64_t sequence_number,
                            const char *strings, const zh_param_rec *recs, uint32_t n,
                            const uint32_t *prefixes, uint32_t nprefixes);

// zh_write_parameter_event writes one rcl_interfaces/ParameterEvent from
// node `node`: the first nnew records (name and value fields, as for a
// get reply with names) are its new_parameters, the next nchanged its
// changed_parameters. It reads the arrays during the call only.
dds_return_t zh_write_parameter_event(dds_entity_t writer, int32_t sec, uint32_t nanosec, const char *node,
                                      const char *strings, const zh_param_rec *recs, uint32_t nnew,
                                      uint32_t nchanged);

// zh_client_reply_matched says whether the client that sent a request
// through the writer with publication handle `request_writer` (matched to
// `request_reader`) can receive the reply on `reply_writer`: 1 when one of
// the reply writer's matched readers carries the request writer's USER_DATA
// clientid (or the client gives none: rmw before Humble), 0 not yet, 2 when
// the request writer is gone, or a negative DDS return code.
// rmw_cyclonedds's service waits on this before it replies; so do we.
int32_t zh_client_reply_matched(dds_entity_t request_reader, dds_entity_t reply_writer, uint64_t request_writer);

// zh_waitset_attach_reader attaches to `waitset` a read condition that
// triggers while `reader` holds any sample (attach argument: the reader).
dds_return_t zh_waitset_attach_reader(dds_entity_t waitset, dds_entity_t reader);

// zh_guid stores the entity's DDS GUID (participant, reader or writer) in
// out: 12-byte prefix then 4-byte entity id, as the builtin topics key it.
dds_return_t zh_guid(dds_entity_t entity, uint8_t out[16]);

// zh_discovery_writer creates the participant's writer of the ROS graph
// topic "ros_discovery_info" (rmw_dds_common ParticipantEntitiesInfo) as
// rmw does: RELIABLE, TRANSIENT_LOCAL, KEEP_LAST 1, autodispose off,
// XCDR1. gid_size is 16 (Iron and later) or 24 (Humble and earlier); both
// forms go by the type name rmw_dds_common::msg::dds_::
// ParticipantEntitiesInfo_. `userdata` as in zh_endpoint ("" for none).
dds_entity_t zh_discovery_writer(dds_entity_t participant, int gid_size, const char *userdata);

// zh_write_discovery writes one ParticipantEntitiesInfo: participant
// `gid` hosting one node (namespace `ns`, name `name`, each at most 256
// bytes) that owns the `nreaders` readers and `nwriters` writers whose
// 16-byte GUIDs lie back to back in `readers` and `writers`. Each GUID is
// zero-padded to the writer's gid_size. The arrays are read during the
// call only.
dds_return_t zh_write_discovery(dds_entity_t writer, int gid_size, const uint8_t gid[16],
                                const char *ns, const char *name,
                                const uint8_t *readers, uint32_t nreaders,
                                const uint8_t *writers, uint32_t nwriters);

// zh_status is what the status goroutine logs for one endpoint. Reading
// it (zh_take_status) resets the entity's "changed" flags, which is what
// makes an attached waitset stop triggering.
typedef struct zh_status {
  int32_t matched_current;        // publication/subscription matched
  int32_t matched_current_change;
  uint32_t matched_total;
  uint32_t incompatible_total;    // offered (writer) / requested (reader) incompatible QoS
  int32_t incompatible_change;
  uint32_t incompatible_policy;   // last policy id, see zh_policy_name
  uint32_t lost_total;            // reader only: samples lost
  int32_t lost_change;
} zh_status;

dds_return_t zh_take_status(dds_entity_t endpoint, int is_writer, zh_status *out);

// zh_policy_name names a DDS QoS policy id ("RELIABILITY"); never NULL.
const char *zh_policy_name(uint32_t policy_id);

// Status mask bits, for Go.
uint32_t zh_writer_status_mask(void);
uint32_t zh_reader_status_mask(void);

// Waitsets. Both kinds are attached to themselves, so that
// dds_waitset_set_trigger(ws, true) wakes zh_waitset_wait. zh_waitset_wait
// blocks until an attached entity triggers; it returns how many attach
// args it stored in xs (always entity handles here, the waitset's own for
// its trigger), or a negative DDS return code.
dds_entity_t zh_waitset(dds_entity_t participant);
dds_return_t zh_waitset_attach(dds_entity_t waitset, dds_entity_t entity);
dds_return_t zh_waitset_wait(dds_entity_t waitset, int32_t *xs, int32_t nxs);

// zh_reader_waitset makes a waitset that triggers while `reader` holds any
// sample (a read condition is attached) or its trigger is set.
dds_entity_t zh_reader_waitset(dds_entity_t participant, dds_entity_t reader);

// zh_image is a view of a loaned sensor_msgs/Image: pointers into the
// sample that Cyclone owns until zh_return_loan(reader, loan).
typedef struct zh_image {
  void *loan;
  int32_t sec;
  uint32_t nanosec;
  const char *frame_id;
  size_t frame_id_len;
  uint32_t height;
  uint32_t width;
  const char *encoding;
  size_t encoding_len;
  uint8_t is_bigendian;
  uint32_t step;
  const uint8_t *data;
  uint32_t data_len;
} zh_image;

// ZH_MAX_FIELDS bounds the PointCloud2 fields a view can describe; a
// cloud with more is reported (nfields holds the true count) and skipped.
#define ZH_MAX_FIELDS 32

typedef struct zh_point_field {
  const char *name;
  size_t name_len;
  uint32_t offset;
  uint8_t datatype;
  uint32_t count;
} zh_point_field;

typedef struct zh_cloud {
  void *loan;
  int32_t sec;
  uint32_t nanosec;
  const char *frame_id;
  size_t frame_id_len;
  uint32_t height;
  uint32_t width;
  uint32_t nfields; // true count; only min(nfields, ZH_MAX_FIELDS) are filled
  zh_point_field fields[ZH_MAX_FIELDS];
  uint8_t is_bigendian;
  uint32_t point_step;
  uint32_t row_step;
  const uint8_t *data;
  uint32_t data_len;
  uint8_t is_dense;
} zh_cloud;

// zh_scan is a view of a loaned sensor_msgs/LaserScan, like zh_image.
typedef struct zh_scan {
  void *loan;
  int32_t sec;
  uint32_t nanosec;
  const char *frame_id;
  size_t frame_id_len;
  float angle_min;
  float angle_max;
  float angle_increment;
  float time_increment;
  float scan_time;
  float range_min;
  float range_max;
  const float *ranges;
  uint32_t ranges_len;
  const float *intensities;
  uint32_t intensities_len;
} zh_scan;

// zh_take_image / zh_take_cloud / zh_take_scan take one sample with a
// loan. They return 1 with the view filled (the caller must
// zh_return_loan(reader, view->loan)), 0 when the reader holds no valid
// sample (samples without data, e.g. a writer's unregistration, are
// returned at once), or a negative DDS return code.
int32_t zh_take_image(dds_entity_t reader, zh_image *view);
int32_t zh_take_cloud(dds_entity_t reader, zh_cloud *view);
int32_t zh_take_scan(dds_entity_t reader, zh_scan *view);
dds_return_t zh_return_loan(dds_entity_t reader, void *loan);

// zh_take_clock takes one valid Clock from `reader` into *sec, *nanosec:
// 1, 0 when the reader holds no valid sample, or a negative DDS return code.
int32_t zh_take_clock(dds_entity_t reader, int32_t *sec, uint32_t *nanosec);

// zh_tf_rec is one geometry_msgs/TransformStamped of a TFMessage, its frame
// ids as offsets into the caller's string buffer (not NUL-terminated).
typedef struct zh_tf_rec {
  double translation[3];
  double rotation[4]; // x, y, z, w
  int32_t sec;
  uint32_t nanosec;
  uint32_t parent_off, parent_len; // header.frame_id
  uint32_t child_off, child_len;   // child_frame_id
} zh_tf_rec;

// zh_take_tf takes one valid TFMessage from `reader` and copies it out,
// returning the loan before it returns: the first `max` transforms whose
// frame ids fit into `strs` (`nstrs` bytes) go into `recs`. It returns 1
// with *n the records filled and *total the message's transform count
// (more than *n when some did not fit), 0 when the reader holds no valid
// sample, or a negative DDS return code.
int32_t zh_take_tf(dds_entity_t reader, zh_tf_rec *recs, uint32_t max, char *strs, size_t nstrs,
                   uint32_t *n, uint32_t *total);

// zh_builtin_reader reads the DCPSPublication (publications != 0) or
// DCPSSubscription built-in topic: what every participant of the domain,
// this one included, announces about its endpoints. Its status mask is
// DATA_AVAILABLE, so that a status waitset it is attached to wakes when
// discovery brings news.
dds_entity_t zh_builtin_reader(dds_entity_t participant, int publications);

// zh_take_endpoint takes one sample of a built-in endpoint reader and
// copies its topic and type names (NUL-terminated, cut to the buffer)
// and its participant's GUID. It returns 1 for an endpoint that is alive,
// 2 for one that is gone (disposed or no writers), 0 when nothing is
// left, or a negative DDS return code.
int32_t zh_take_endpoint(dds_entity_t reader, char *topic, size_t ntopic, char *type,
                         size_t ntype, uint8_t participant_guid[16]);

#endif // ZH_DDS_H
