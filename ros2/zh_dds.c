//go:build ros2 && cgo

// zh_dds.c: see zh_dds.h. Plain C over Cyclone DDS 0.10 and the
// idlc-generated types; no state of its own.

#include <stdlib.h>
#include <string.h>

#include "zh_dds.h"
#include "geometry_msgs.h"
#include "sensor_msgs.h"
#include "zerohop_msgs.h"
#include "diagnostic_msgs.h"
#include "rcl_interfaces.h"
#include "tf2_msgs.h"
#include "rosgraph_msgs.h"
#include "rmw_dds_common.h"
#include "rmw_dds_common_humble.h"

dds_entity_t zh_participant(uint32_t domain_id, const char *config, const char *userdata,
                            const char *const *names, const char *const *values, int nprops,
                            dds_entity_t *domain_out)
{
  *domain_out = -1;
  // An explicitly created domain takes `config` instead of reading
  // CYCLONEDDS_URI (Go passes that in `config` when it wants it). It lives
  // until deleted, independent of its participants.
  dds_entity_t dom = dds_create_domain(domain_id, config);
  if (dom < 0)
    return dom;
  dds_qos_t *qos = dds_create_qos();
  dds_qset_userdata(qos, userdata, strlen(userdata));
  // Properties win over a <Security> section of the configuration, as
  // for rmw_cyclonedds's participants.
  for (int i = 0; i < nprops; i++)
    dds_qset_prop(qos, names[i], values[i]);
  dds_entity_t pp = dds_create_participant(domain_id, qos, NULL);
  dds_delete_qos(qos);
  if (pp < 0) {
    dds_delete(dom);
    return pp;
  }
  *domain_out = dom;
  return pp;
}

static const dds_topic_descriptor_t *descriptor(int type)
{
  switch (type) {
  case ZH_TWIST:
    return &geometry_msgs_msg_dds__Twist__desc;
  case ZH_TWIST_STAMPED:
    return &geometry_msgs_msg_dds__TwistStamped__desc;
  case ZH_IMAGE:
    return &sensor_msgs_msg_dds__Image__desc;
  case ZH_POINTCLOUD2:
    return &sensor_msgs_msg_dds__PointCloud2__desc;
  case ZH_SLOT_HANDLE:
    return &zerohop_msgs_msg_dds__SlotHandle__desc;
  case ZH_DIAGNOSTICS:
    return &diagnostic_msgs_msg_dds__DiagnosticArray__desc;
  case ZH_LOG:
    return &rcl_interfaces_msg_dds__Log__desc;
  case ZH_PARAMETER_EVENT:
    return &rcl_interfaces_msg_dds__ParameterEvent__desc;
  case ZH_TF_MESSAGE:
    return &tf2_msgs_msg_dds__TFMessage__desc;
  case ZH_CLOCK:
    return &rosgraph_msgs_msg_dds__Clock__desc;
  case ZH_LASER_SCAN:
    return &sensor_msgs_msg_dds__LaserScan__desc;
  }
  return zh_service_descriptor(type);
}

dds_entity_t zh_endpoint(dds_entity_t participant, int type, const char *topic_name,
                         int is_writer, int best_effort, int transient_local, int32_t depth,
                         int64_t max_blocking_ns, int64_t lifespan_ns,
                         const char *userdata, uint32_t status_mask)
{
  const dds_topic_descriptor_t *desc = descriptor(type);
  if (desc == NULL || depth < 1 || max_blocking_ns < 0 || lifespan_ns < 0)
    return DDS_RETCODE_BAD_PARAMETER;
  // The topic is a child of the participant; deleting the endpoint leaves
  // it, deleting the participant removes it. Cyclone returns a new handle
  // for the same name and type each time, sharing the DDS topic.
  dds_entity_t topic = dds_create_topic(participant, desc, topic_name, NULL, NULL);
  if (topic < 0)
    return topic;
  dds_qos_t *qos = dds_create_qos();
  // max_blocking_time: how long dds_write may wait. Cyclone's KEEP_LAST
  // writers never wait for acknowledgements; what remains is delivery to a
  // full in-process reader (see mirrorMaxBlocking in mirror.go).
  dds_qset_reliability(qos, best_effort ? DDS_RELIABILITY_BEST_EFFORT : DDS_RELIABILITY_RELIABLE,
                       (dds_duration_t)max_blocking_ns);
  dds_qset_durability(qos, transient_local ? DDS_DURABILITY_TRANSIENT_LOCAL : DDS_DURABILITY_VOLATILE);
  dds_qset_history(qos, DDS_HISTORY_KEEP_LAST, depth);
  if (lifespan_ns > 0)
    dds_qset_lifespan(qos, (dds_duration_t)lifespan_ns);
  dds_qset_userdata(qos, userdata, strlen(userdata));
  dds_entity_t ep;
  if (is_writer) {
    // rmw: a publisher's instances are not disposed when it goes away.
    dds_qset_writer_data_lifecycle(qos, false);
    // XCDR1 only: rmw's readers refuse XCDR2.
    dds_data_representation_id_t xcdr1 = DDS_DATA_REPRESENTATION_XCDR1;
    dds_qset_data_representation(qos, 1, &xcdr1);
    ep = dds_create_writer(participant, topic, qos, NULL);
  } else {
    ep = dds_create_reader(participant, topic, qos, NULL);
  }
  dds_delete_qos(qos);
  if (ep < 0) {
    dds_delete(topic);
    return ep;
  }
  dds_return_t rc = dds_set_status_mask(ep, status_mask);
  if (rc < 0) {
    dds_delete(ep);
    dds_delete(topic);
    return rc;
  }
  return ep;
}

dds_return_t zh_endpoint_delete(dds_entity_t endpoint)
{
  dds_entity_t topic = dds_get_topic(endpoint);
  dds_return_t rc = dds_delete(endpoint);
  if (topic >= 0)
    (void)dds_delete(topic);
  return rc;
}

dds_return_t zh_write_twist(dds_entity_t writer, double linear_x, double angular_z)
{
  geometry_msgs_msg_dds__Twist_ s;
  memset(&s, 0, sizeof s);
  s.linear.x = linear_x;
  s.angular.z = angular_z;
  return dds_write(writer, &s);
}

dds_return_t zh_write_twist_stamped(dds_entity_t writer, int32_t sec, uint32_t nanosec,
                                    const char *frame_id, double linear_x, double angular_z)
{
  geometry_msgs_msg_dds__TwistStamped_ s;
  memset(&s, 0, sizeof s);
  s.header.stamp.sec = sec;
  s.header.stamp.nanosec = nanosec;
  s.header.frame_id = (char *)frame_id; // only read by dds_write
  s.twist.linear.x = linear_x;
  s.twist.angular.z = angular_z;
  return dds_write(writer, &s);
}

// zh_diag_max_values bounds the stack arrays of one DiagnosticArray.
enum { zh_diag_max_statuses = 32, zh_diag_max_values = 512 };

dds_return_t zh_write_diagnostics(dds_entity_t writer, int32_t sec, uint32_t nanosec, const char *strings,
                                  const zh_diag_status *statuses, uint32_t n, const uint32_t *values)
{
  if (n > zh_diag_max_statuses)
    return DDS_RETCODE_BAD_PARAMETER;
  diagnostic_msgs_msg_dds__DiagnosticStatus_ st[zh_diag_max_statuses];
  diagnostic_msgs_msg_dds__KeyValue_ kv[zh_diag_max_values];
  uint32_t used = 0;
  memset(st, 0, sizeof st);
  for (uint32_t i = 0; i < n; i++) {
    const zh_diag_status *in = &statuses[i];
    if (in->nvalues > zh_diag_max_values - used)
      return DDS_RETCODE_BAD_PARAMETER;
    // Only read by dds_write: the casts drop const for idlc's char *.
    st[i].level = in->level;
    st[i].name = (char *)strings + in->name;
    st[i].message = (char *)strings + in->message;
    st[i].hardware_id = (char *)strings + in->hardware_id;
    for (uint32_t k = 0; k < in->nvalues; k++) {
      const uint32_t *pair = &values[2 * (in->first_value + k)];
      kv[used + k].key = (char *)strings + pair[0];
      kv[used + k].value = (char *)strings + pair[1];
    }
    st[i].values._length = st[i].values._maximum = in->nvalues;
    st[i].values._buffer = in->nvalues ? &kv[used] : NULL;
    st[i].values._release = false;
    used += in->nvalues;
  }
  diagnostic_msgs_msg_dds__DiagnosticArray_ a;
  memset(&a, 0, sizeof a);
  a.header.stamp.sec = sec;
  a.header.stamp.nanosec = nanosec;
  a.header.frame_id = "";
  a.status._length = a.status._maximum = n;
  a.status._buffer = n ? st : NULL;
  a.status._release = false;
  return dds_write(writer, &a);
}

dds_return_t zh_write_slot_handle(dds_entity_t writer, const zh_slot_handle *h)
{
  zerohop_msgs_msg_dds__SlotHandle_ s;
  memset(&s, 0, sizeof s);
  s.header.stamp.sec = h->sec;
  s.header.stamp.nanosec = h->nanosec;
  s.header.frame_id = (char *)h->frame_id; // NUL-terminated: frame_id[16] is always 0
  s.version = h->version;
  s.kind = h->kind;
  s.pool_id = h->pool_id;
  s.slot = h->slot;
  s.generation = h->generation;
  s.seq = h->seq;
  s.publish_time_ns = h->publish_time_ns;
  s.length = h->length;
  s.checksum = h->checksum;
  s.width = h->width;
  s.height = h->height;
  s.row_step = h->row_step;
  s.encoding = h->encoding;
  s.point_count = h->point_count;
  s.point_step = h->point_step;
  s.offset_x = h->offset_x;
  s.offset_y = h->offset_y;
  s.offset_z = h->offset_z;
  s.offset_intensity = h->offset_intensity;
  s.datatype = h->datatype;
  s.point_flags = h->point_flags;
  return dds_write(writer, &s);
}

uint32_t zh_writer_status_mask(void)
{
  return DDS_PUBLICATION_MATCHED_STATUS | DDS_OFFERED_INCOMPATIBLE_QOS_STATUS;
}

uint32_t zh_reader_status_mask(void)
{
  return DDS_SUBSCRIPTION_MATCHED_STATUS | DDS_REQUESTED_INCOMPATIBLE_QOS_STATUS |
         DDS_SAMPLE_LOST_STATUS;
}

dds_return_t zh_take_status(dds_entity_t endpoint, int is_writer, zh_status *out)
{
  memset(out, 0, sizeof *out);
  dds_return_t rc;
  // Every status in the mask is read, so that all "changed" flags reset
  // and the status waitset stops triggering for this endpoint.
  if (is_writer) {
    dds_publication_matched_status_t m;
    if ((rc = dds_get_publication_matched_status(endpoint, &m)) < 0)
      return rc;
    out->matched_current = (int32_t)m.current_count;
    out->matched_current_change = m.current_count_change;
    out->matched_total = m.total_count;
    dds_offered_incompatible_qos_status_t q;
    if ((rc = dds_get_offered_incompatible_qos_status(endpoint, &q)) < 0)
      return rc;
    out->incompatible_total = q.total_count;
    out->incompatible_change = q.total_count_change;
    out->incompatible_policy = q.last_policy_id;
    return 0;
  }
  dds_subscription_matched_status_t m;
  if ((rc = dds_get_subscription_matched_status(endpoint, &m)) < 0)
    return rc;
  out->matched_current = (int32_t)m.current_count;
  out->matched_current_change = m.current_count_change;
  out->matched_total = m.total_count;
  dds_requested_incompatible_qos_status_t q;
  if ((rc = dds_get_requested_incompatible_qos_status(endpoint, &q)) < 0)
    return rc;
  out->incompatible_total = q.total_count;
  out->incompatible_change = q.total_count_change;
  out->incompatible_policy = q.last_policy_id;
  dds_sample_lost_status_t l;
  if ((rc = dds_get_sample_lost_status(endpoint, &l)) < 0)
    return rc;
  out->lost_total = l.total_count;
  out->lost_change = l.total_count_change;
  return 0;
}

const char *zh_policy_name(uint32_t id)
{
  switch ((dds_qos_policy_id_t)id) {
  case DDS_USERDATA_QOS_POLICY_ID: return "USER_DATA";
  case DDS_DURABILITY_QOS_POLICY_ID: return "DURABILITY";
  case DDS_PRESENTATION_QOS_POLICY_ID: return "PRESENTATION";
  case DDS_DEADLINE_QOS_POLICY_ID: return "DEADLINE";
  case DDS_LATENCYBUDGET_QOS_POLICY_ID: return "LATENCY_BUDGET";
  case DDS_OWNERSHIP_QOS_POLICY_ID: return "OWNERSHIP";
  case DDS_OWNERSHIPSTRENGTH_QOS_POLICY_ID: return "OWNERSHIP_STRENGTH";
  case DDS_LIVELINESS_QOS_POLICY_ID: return "LIVELINESS";
  case DDS_TIMEBASEDFILTER_QOS_POLICY_ID: return "TIME_BASED_FILTER";
  case DDS_PARTITION_QOS_POLICY_ID: return "PARTITION";
  case DDS_RELIABILITY_QOS_POLICY_ID: return "RELIABILITY";
  case DDS_DESTINATIONORDER_QOS_POLICY_ID: return "DESTINATION_ORDER";
  case DDS_HISTORY_QOS_POLICY_ID: return "HISTORY";
  case DDS_RESOURCELIMITS_QOS_POLICY_ID: return "RESOURCE_LIMITS";
  case DDS_ENTITYFACTORY_QOS_POLICY_ID: return "ENTITY_FACTORY";
  case DDS_WRITERDATALIFECYCLE_QOS_POLICY_ID: return "WRITER_DATA_LIFECYCLE";
  case DDS_READERDATALIFECYCLE_QOS_POLICY_ID: return "READER_DATA_LIFECYCLE";
  case DDS_TOPICDATA_QOS_POLICY_ID: return "TOPIC_DATA";
  case DDS_GROUPDATA_QOS_POLICY_ID: return "GROUP_DATA";
  case DDS_TRANSPORTPRIORITY_QOS_POLICY_ID: return "TRANSPORT_PRIORITY";
  case DDS_LIFESPAN_QOS_POLICY_ID: return "LIFESPAN";
  case DDS_DURABILITYSERVICE_QOS_POLICY_ID: return "DURABILITY_SERVICE";
  case DDS_PROPERTY_QOS_POLICY_ID: return "PROPERTY";
  case DDS_TYPE_CONSISTENCY_ENFORCEMENT_QOS_POLICY_ID: return "TYPE_CONSISTENCY_ENFORCEMENT";
  case DDS_DATA_REPRESENTATION_QOS_POLICY_ID: return "DATA_REPRESENTATION";
  case DDS_INVALID_QOS_POLICY_ID: break;
  }
  return "UNKNOWN";
}

// self_attached creates a waitset attached to itself: without that,
// dds_waitset_set_trigger does not wake a thread blocked in
// dds_waitset_wait (Cyclone issue #1443), and Close could not stop the
// goroutine. A wakeup by the trigger reports the waitset's own handle.
static dds_entity_t self_attached(dds_entity_t participant)
{
  dds_entity_t ws = dds_create_waitset(participant);
  if (ws < 0)
    return ws;
  dds_return_t rc = dds_waitset_attach(ws, ws, (dds_attach_t)ws);
  if (rc < 0) {
    dds_delete(ws);
    return rc;
  }
  return ws;
}

dds_entity_t zh_waitset(dds_entity_t participant)
{
  return self_attached(participant);
}

dds_return_t zh_waitset_attach(dds_entity_t waitset, dds_entity_t entity)
{
  // The attach argument is the entity itself, so a wakeup names it.
  return dds_waitset_attach(waitset, entity, (dds_attach_t)entity);
}

#define ZH_MAX_WAKEUPS 64

dds_return_t zh_waitset_wait(dds_entity_t waitset, int32_t *xs, int32_t nxs)
{
  dds_attach_t a[ZH_MAX_WAKEUPS];
  if (nxs > ZH_MAX_WAKEUPS)
    nxs = ZH_MAX_WAKEUPS;
  if (nxs < 0)
    nxs = 0;
  dds_return_t n = dds_waitset_wait(waitset, a, (size_t)nxs, DDS_INFINITY);
  for (int32_t i = 0; i < n && i < nxs; i++)
    xs[i] = (int32_t)a[i];
  return n;
}

dds_entity_t zh_reader_waitset(dds_entity_t participant, dds_entity_t reader)
{
  dds_entity_t ws = self_attached(participant);
  if (ws < 0)
    return ws;
  // The read condition is the reader's child and goes with it.
  dds_entity_t cond = dds_create_readcondition(reader, DDS_ANY_STATE);
  if (cond < 0) {
    dds_delete(ws);
    return cond;
  }
  dds_return_t rc = dds_waitset_attach(ws, cond, (dds_attach_t)cond);
  if (rc < 0) {
    dds_delete(cond);
    dds_delete(ws);
    return rc;
  }
  return ws;
}

// take_loaned takes one sample with a loan (buf[0] == NULL asks Cyclone
// for its reader-owned buffer) and skips samples without data.
static int32_t take_loaned(dds_entity_t reader, void **loan)
{
  for (;;) {
    void *buf[1] = {NULL};
    dds_sample_info_t si;
    dds_return_t n = dds_take(reader, buf, &si, 1, 1);
    if (n <= 0)
      return n;
    if (si.valid_data) {
      *loan = buf[0];
      return 1;
    }
    (void)dds_return_loan(reader, buf, n);
  }
}

static size_t len_or_zero(const char *s)
{
  return s == NULL ? 0 : strlen(s);
}

int32_t zh_take_image(dds_entity_t reader, zh_image *v)
{
  void *loan = NULL;
  int32_t n = take_loaned(reader, &loan);
  if (n <= 0)
    return n;
  const sensor_msgs_msg_dds__Image_ *s = loan;
  v->loan = loan;
  v->sec = s->header.stamp.sec;
  v->nanosec = s->header.stamp.nanosec;
  v->frame_id = s->header.frame_id;
  v->frame_id_len = len_or_zero(s->header.frame_id);
  v->height = s->height;
  v->width = s->width;
  v->encoding = s->encoding;
  v->encoding_len = len_or_zero(s->encoding);
  v->is_bigendian = s->is_bigendian;
  v->step = s->step;
  v->data = s->data._buffer;
  v->data_len = s->data._buffer == NULL ? 0 : s->data._length;
  return 1;
}

int32_t zh_take_cloud(dds_entity_t reader, zh_cloud *v)
{
  void *loan = NULL;
  int32_t n = take_loaned(reader, &loan);
  if (n <= 0)
    return n;
  const sensor_msgs_msg_dds__PointCloud2_ *s = loan;
  v->loan = loan;
  v->sec = s->header.stamp.sec;
  v->nanosec = s->header.stamp.nanosec;
  v->frame_id = s->header.frame_id;
  v->frame_id_len = len_or_zero(s->header.frame_id);
  v->height = s->height;
  v->width = s->width;
  v->nfields = s->fields._buffer == NULL ? 0 : s->fields._length;
  for (uint32_t i = 0; i < v->nfields && i < ZH_MAX_FIELDS; i++) {
    const sensor_msgs_msg_dds__PointField_ *f = &s->fields._buffer[i];
    v->fields[i].name = f->name;
    v->fields[i].name_len = len_or_zero(f->name);
    v->fields[i].offset = f->offset;
    v->fields[i].datatype = f->datatype;
    v->fields[i].count = f->count;
  }
  v->is_bigendian = s->is_bigendian;
  v->point_step = s->point_step;
  v->row_step = s->row_step;
  v->data = s->data._buffer;
  v->data_len = s->data._buffer == NULL ? 0 : s->data._length;
  v->is_dense = s->is_dense;
  return 1;
}

int32_t zh_take_scan(dds_entity_t reader, zh_scan *v)
{
  void *loan = NULL;
  int32_t n = take_loaned(reader, &loan);
  if (n <= 0)
    return n;
  const sensor_msgs_msg_dds__LaserScan_ *s = loan;
  v->loan = loan;
  v->sec = s->header.stamp.sec;
  v->nanosec = s->header.stamp.nanosec;
  v->frame_id = s->header.frame_id;
  v->frame_id_len = len_or_zero(s->header.frame_id);
  // Plain copies, no arithmetic: on x86-64 (SSE) and arm64 a float load
  // and store keep every bit, NaN payloads included.
  v->angle_min = s->angle_min;
  v->angle_max = s->angle_max;
  v->angle_increment = s->angle_increment;
  v->time_increment = s->time_increment;
  v->scan_time = s->scan_time;
  v->range_min = s->range_min;
  v->range_max = s->range_max;
  v->ranges = s->ranges._buffer;
  v->ranges_len = s->ranges._buffer == NULL ? 0 : s->ranges._length;
  v->intensities = s->intensities._buffer;
  v->intensities_len = s->intensities._buffer == NULL ? 0 : s->intensities._length;
  return 1;
}

dds_return_t zh_return_loan(dds_entity_t reader, void *loan)
{
  void *buf[1] = {loan};
  return dds_return_loan(reader, buf, 1);
}

int32_t zh_take_clock(dds_entity_t reader, int32_t *sec, uint32_t *nanosec)
{
  void *loan = NULL;
  int32_t got = take_loaned(reader, &loan);
  if (got <= 0)
    return got;
  const rosgraph_msgs_msg_dds__Clock_ *c = loan;
  *sec = c->clock.sec;
  *nanosec = c->clock.nanosec;
  void *buf[1] = {loan};
  dds_return_t rc = dds_return_loan(reader, buf, 1);
  return rc < 0 ? rc : 1;
}

// put_str copies s into strs at *used if it fits, recording where.
static int put_str(char *strs, size_t nstrs, size_t *used, const char *s, uint32_t *off, uint32_t *len)
{
  size_t l = len_or_zero(s);
  if (l > nstrs - *used || l > UINT32_MAX)
    return 0;
  memcpy(strs + *used, s, l);
  *off = (uint32_t)*used;
  *len = (uint32_t)l;
  *used += l;
  return 1;
}

int32_t zh_take_tf(dds_entity_t reader, zh_tf_rec *recs, uint32_t max, char *strs, size_t nstrs,
                   uint32_t *n, uint32_t *total)
{
  void *loan = NULL;
  int32_t got = take_loaned(reader, &loan);
  if (got <= 0)
    return got;
  const tf2_msgs_msg_dds__TFMessage_ *m = loan;
  uint32_t count = m->transforms._buffer == NULL ? 0 : m->transforms._length;
  uint32_t filled = 0;
  size_t used = 0;
  for (uint32_t i = 0; i < count && filled < max; i++) {
    const geometry_msgs_msg_dds__TransformStamped_ *t = &m->transforms._buffer[i];
    zh_tf_rec *r = &recs[filled];
    size_t mark = used;
    if (!put_str(strs, nstrs, &used, t->header.frame_id, &r->parent_off, &r->parent_len) ||
        !put_str(strs, nstrs, &used, t->child_frame_id, &r->child_off, &r->child_len)) {
      used = mark;
      continue;
    }
    r->translation[0] = t->transform.translation.x;
    r->translation[1] = t->transform.translation.y;
    r->translation[2] = t->transform.translation.z;
    r->rotation[0] = t->transform.rotation.x;
    r->rotation[1] = t->transform.rotation.y;
    r->rotation[2] = t->transform.rotation.z;
    r->rotation[3] = t->transform.rotation.w;
    r->sec = t->header.stamp.sec;
    r->nanosec = t->header.stamp.nanosec;
    filled++;
  }
  *n = filled;
  *total = count;
  void *buf[1] = {loan};
  dds_return_t rc = dds_return_loan(reader, buf, 1);
  return rc < 0 ? rc : 1;
}

dds_return_t zh_guid(dds_entity_t entity, uint8_t out[16])
{
  dds_guid_t g;
  dds_return_t rc = dds_get_guid(entity, &g);
  if (rc < 0)
    return rc;
  memcpy(out, g.v, 16);
  return DDS_RETCODE_OK;
}

dds_entity_t zh_discovery_writer(dds_entity_t participant, int gid_size, const char *userdata)
{
  const dds_topic_descriptor_t *desc;
  if (gid_size == 16)
    desc = &rmw_dds_common_msg_dds__ParticipantEntitiesInfo__desc;
  else if (gid_size == 24)
    desc = &rmw_dds_common_humble_msg_dds__ParticipantEntitiesInfo__desc; // named as the 16-byte form (idl/gen.sh)
  else
    return DDS_RETCODE_BAD_PARAMETER;
  dds_entity_t topic = dds_create_topic(participant, desc, "ros_discovery_info", NULL, NULL);
  if (topic < 0)
    return topic;
  dds_qos_t *qos = dds_create_qos();
  dds_qset_reliability(qos, DDS_RELIABILITY_RELIABLE, DDS_MSECS(100));
  dds_qset_durability(qos, DDS_DURABILITY_TRANSIENT_LOCAL);
  dds_qset_history(qos, DDS_HISTORY_KEEP_LAST, 1);
  dds_qset_writer_data_lifecycle(qos, false);
  dds_data_representation_id_t xcdr1 = DDS_DATA_REPRESENTATION_XCDR1;
  dds_qset_data_representation(qos, 1, &xcdr1);
  if (userdata[0] != '\0')
    dds_qset_userdata(qos, userdata, strlen(userdata));
  dds_entity_t wr = dds_create_writer(participant, topic, qos, NULL);
  dds_delete_qos(qos);
  if (wr < 0)
    dds_delete(topic);
  return wr;
}

// FILL_DISCOVERY writes the sample of struct type T (one of the two Gid
// widths); GIDs are copied into zeroed storage, so the tail is padding.
#define FILL_DISCOVERY(T, G)                                                         \
  do {                                                                               \
    T s;                                                                             \
    memset(&s, 0, sizeof s);                                                         \
    memcpy(s.gid.data, gid, 16);                                                     \
    G *rs = calloc(nreaders ? nreaders : 1, sizeof *rs);                             \
    G *ws = calloc(nwriters ? nwriters : 1, sizeof *ws);                             \
    if (rs == NULL || ws == NULL) {                                                  \
      free(rs);                                                                      \
      free(ws);                                                                      \
      return DDS_RETCODE_OUT_OF_RESOURCES;                                           \
    }                                                                                \
    for (uint32_t i = 0; i < nreaders; i++)                                          \
      memcpy(rs[i].data, readers + 16 * (size_t)i, 16);                              \
    for (uint32_t i = 0; i < nwriters; i++)                                          \
      memcpy(ws[i].data, writers + 16 * (size_t)i, 16);                              \
    node_t n;                                                                        \
    memset(&n, 0, sizeof n);                                                         \
    strncpy(n.node_namespace, ns, sizeof n.node_namespace - 1);                      \
    strncpy(n.node_name, name, sizeof n.node_name - 1);                              \
    n.reader_gid_seq._buffer = rs;                                                   \
    n.reader_gid_seq._length = n.reader_gid_seq._maximum = nreaders;                 \
    n.writer_gid_seq._buffer = ws;                                                   \
    n.writer_gid_seq._length = n.writer_gid_seq._maximum = nwriters;                 \
    s.node_entities_info_seq._buffer = &n;                                           \
    s.node_entities_info_seq._length = s.node_entities_info_seq._maximum = 1;        \
    rc = dds_write(writer, &s);                                                      \
    free(rs);                                                                        \
    free(ws);                                                                        \
  } while (0)

dds_return_t zh_write_discovery(dds_entity_t writer, int gid_size, const uint8_t gid[16],
                                const char *ns, const char *name,
                                const uint8_t *readers, uint32_t nreaders,
                                const uint8_t *writers, uint32_t nwriters)
{
  dds_return_t rc;
  if (strlen(ns) > 256 || strlen(name) > 256)
    return DDS_RETCODE_BAD_PARAMETER;
  if (gid_size == 16) {
    typedef rmw_dds_common_msg_dds__NodeEntitiesInfo_ node_t;
    FILL_DISCOVERY(rmw_dds_common_msg_dds__ParticipantEntitiesInfo_, rmw_dds_common_msg_dds__Gid_);
  } else if (gid_size == 24) {
    typedef rmw_dds_common_humble_msg_dds__NodeEntitiesInfo_ node_t;
    FILL_DISCOVERY(rmw_dds_common_humble_msg_dds__ParticipantEntitiesInfo_, rmw_dds_common_humble_msg_dds__Gid_);
  } else {
    return DDS_RETCODE_BAD_PARAMETER;
  }
  return rc;
}

dds_entity_t zh_builtin_reader(dds_entity_t participant, int publications)
{
  dds_entity_t topic =
      publications ? DDS_BUILTIN_TOPIC_DCPSPUBLICATION : DDS_BUILTIN_TOPIC_DCPSSUBSCRIPTION;
  dds_entity_t rd = dds_create_reader(participant, topic, NULL, NULL);
  if (rd < 0)
    return rd;
  dds_return_t rc = dds_set_status_mask(rd, DDS_DATA_AVAILABLE_STATUS);
  if (rc < 0) {
    dds_delete(rd);
    return rc;
  }
  return rd;
}

static void copy_name(char *dst, size_t n, const char *src)
{
  if (n == 0)
    return;
  if (src == NULL)
    src = "";
  size_t l = strlen(src);
  if (l >= n)
    l = n - 1;
  memcpy(dst, src, l);
  dst[l] = 0;
}

int32_t zh_take_endpoint(dds_entity_t reader, char *topic, size_t ntopic, char *type,
                         size_t ntype, uint8_t participant_guid[16])
{
  void *samples[1] = {NULL};
  dds_sample_info_t info;
  dds_return_t n = dds_take(reader, samples, &info, 1, 1);
  if (n <= 0)
    return n;
  const dds_builtintopic_endpoint_t *e = samples[0];
  copy_name(topic, ntopic, info.valid_data ? e->topic_name : NULL);
  copy_name(type, ntype, info.valid_data ? e->type_name : NULL);
  memcpy(participant_guid, e->participant_key.v, 16);
  int32_t alive = info.instance_state == DDS_IST_ALIVE && info.valid_data ? 1 : 2;
  dds_return_t rc = dds_return_loan(reader, samples, n);
  return rc < 0 ? rc : alive;
}

dds_return_t zh_write_log(dds_entity_t writer, int32_t sec, uint32_t nanosec, uint8_t level,
                          const char *name, const char *msg, const char *file, const char *function,
                          uint32_t line)
{
  // The idlc type's strings are char *; dds_write only reads them.
  rcl_interfaces_msg_dds__Log_ m = {
      .stamp = {.sec = sec, .nanosec = nanosec},
      .level = level,
      .name = (char *)name,
      .msg = (char *)msg,
      .file = (char *)file,
      .function = (char *)function,
      .line = line,
  };
  return dds_write(writer, &m);
}
