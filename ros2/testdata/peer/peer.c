// peer: a ROS 2 stand-in for the ros2 package's tests, written against
// the raw Cyclone DDS C API and the idlc-generated types only (none of
// zh_dds.c), run as a separate process so that samples cross the wire.
// Cyclone reads its configuration from CYCLONEDDS_URI.
//
//   peer DOMAIN sub TYPE TOPIC RELIABILITY COUNT
//     TYPE: twist | twist_stamped | slot_handle | image | cloud | scan |
//     diagnostics | log | param_event (each parameter as
//     nI= or cI=NAME,TYPE,BOOL,INT,DOUBLE,STRING, strings in hex). Prints
//     READY, then MATCHED once a publisher matches, then PUBLICATION (the
//     matched writer's discovery data) and PARTICIPANT (its participant's
//     USER_DATA), then for each of COUNT samples a CDR line (the
//     serialized payload, hex; not for image and cloud) and a SAMPLE line
//     (key=value; image and cloud give the data's length and FNV-1a
//     hash; diagnostics give each status as sI=LEVEL,NAME,MESSAGE,HWID,NVALUES
//     and its values as sIvK=KEY,VALUE, strings in hex). COUNT 0: take
//     samples silently and print RECEIVED n when
//     stdin closes.
//   peer DOMAIN pub TYPE TOPIC RELIABILITY PERIOD_MS [N [NFIELDS]]
//     TYPE: image (N = width) | cloud (N = points, NFIELDS = PointFields,
//     default 5, at most 64) | scan (N = ranges, NFIELDS = intensities,
//     default N; see pub_scan for the values). Prints READY and
//     MATCHED, publishes one fixed test message every PERIOD_MS.
//
//   peer DOMAIN static TOPIC TF...
//     Publishes one tf2_msgs/TFMessage holding every TF
//     (PARENT,CHILD,X,Y,Z,QX,QY,QZ,QW) as tf2_ros's StaticTransformBroadcaster
//     does (RELIABLE, TRANSIENT_LOCAL, KEEP_LAST 1), then prints READY and WRITTEN:
//     a reader started after that must still get it.
//
//   peer DOMAIN odom TOPIC SEC PERIOD_MS MILLIRAD_PER_S
//     Publishes odom→base_link on TOPIC as a base's driver does on /tf
//     (RELIABLE, VOLATILE, KEEP_LAST 100): stamped SEC.0, then PERIOD_MS
//     later each time, turning about z at MILLIRAD_PER_S (yaw = rate × time
//     since SEC.0), at the origin; prints READY.
//
//   peer DOMAIN clock TOPIC SEC PERIOD_MS
//     Publishes rosgraph_msgs/Clock as a simulator does (RELIABLE, KEEP_LAST
//     1): SEC.5, then one more second every PERIOD_MS.
//
// All end when stdin closes.
//
// Every wait is bounded (20 s) so a broken test never leaves it running.
#include <inttypes.h>
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dds/dds.h"
#include "dds/ddsi/ddsi_serdata.h"
#include "geometry_msgs.h"
#include "sensor_msgs.h"
#include "zerohop_msgs.h"
#include "diagnostic_msgs.h"
#include "rcl_interfaces.h"
#include "tf2_msgs.h"
#include "rosgraph_msgs.h"

#define WAIT DDS_SECS(20)

static void die(const char *what, dds_return_t rc)
{
  printf("ERROR %s: %s\n", what, dds_strretcode(rc));
  fflush(stdout);
  exit(2);
}

static void hexline(const char *tag, const unsigned char *b, size_t n)
{
  printf("%s ", tag);
  for (size_t i = 0; i < n; i++)
    printf("%02x", b[i]);
  printf("\n");
}

static void print_octets(const char *tag, const void *p, size_t n)
{
  printf(" %s=", tag);
  for (size_t i = 0; i < n; i++)
    putchar(((const char *)p)[i] >= 0x20 && ((const char *)p)[i] < 0x7f ? ((const char *)p)[i] : '?');
}

static const dds_topic_descriptor_t *desc_of(const char *type)
{
  if (!strcmp(type, "twist")) return &geometry_msgs_msg_dds__Twist__desc;
  if (!strcmp(type, "twist_stamped")) return &geometry_msgs_msg_dds__TwistStamped__desc;
  if (!strcmp(type, "slot_handle")) return &zerohop_msgs_msg_dds__SlotHandle__desc;
  if (!strcmp(type, "image")) return &sensor_msgs_msg_dds__Image__desc;
  if (!strcmp(type, "cloud")) return &sensor_msgs_msg_dds__PointCloud2__desc;
  if (!strcmp(type, "scan")) return &sensor_msgs_msg_dds__LaserScan__desc;
  if (!strcmp(type, "diagnostics")) return &diagnostic_msgs_msg_dds__DiagnosticArray__desc;
  if (!strcmp(type, "log")) return &rcl_interfaces_msg_dds__Log__desc;
  if (!strcmp(type, "param_event")) return &rcl_interfaces_msg_dds__ParameterEvent__desc;
  return NULL;
}

static dds_qos_t *qos_of(const char *reliability)
{
  dds_qos_t *q = dds_create_qos();
  dds_qset_reliability(q, strcmp(reliability, "besteffort") ? DDS_RELIABILITY_RELIABLE : DDS_RELIABILITY_BEST_EFFORT,
                       DDS_MSECS(100));
  dds_qset_durability(q, DDS_DURABILITY_VOLATILE);
  dds_qset_history(q, DDS_HISTORY_KEEP_LAST, 10);
  return q;
}

static int stdin_closed(int period_ms)
{
  struct pollfd pfd = {.fd = 0, .events = POLLIN};
  if (poll(&pfd, 1, period_ms) > 0) {
    char c[64];
    if (read(0, c, sizeof c) <= 0)
      return 1;
  }
  return 0;
}

// quit_if_stdin_closed ends the peer when the test closes its stdin.
static void quit_if_stdin_closed(void)
{
  if (stdin_closed(0))
    exit(0);
}

// wait_matched waits until entity's matched count is ≥ 1.
static void wait_matched(dds_entity_t pp, dds_entity_t e, int is_writer)
{
  dds_entity_t ws = dds_create_waitset(pp);
  uint32_t mask = is_writer ? DDS_PUBLICATION_MATCHED_STATUS : DDS_SUBSCRIPTION_MATCHED_STATUS;
  dds_set_status_mask(e, mask);
  dds_waitset_attach(ws, e, 0);
  dds_time_t deadline = dds_time() + WAIT;
  for (;;) {
    uint32_t count = 0;
    if (is_writer) {
      dds_publication_matched_status_t st;
      dds_get_publication_matched_status(e, &st);
      count = st.current_count;
    } else {
      dds_subscription_matched_status_t st;
      dds_get_subscription_matched_status(e, &st);
      count = st.current_count;
    }
    if (count > 0) {
      printf("MATCHED %" PRIu32 "\n", count);
      fflush(stdout);
      break;
    }
    if (dds_time() > deadline)
      die("wait for match", DDS_RETCODE_TIMEOUT);
    quit_if_stdin_closed();
    dds_waitset_wait(ws, NULL, 0, DDS_MSECS(50));
  }
  dds_waitset_detach(ws, e);
  dds_delete(ws);
}

static void print_userdata(const char *tag, const dds_qos_t *qos)
{
  void *ud = NULL;
  size_t n = 0;
  printf(" %s=", tag);
  if (dds_qget_userdata(qos, &ud, &n) && ud != NULL)
    fwrite(ud, 1, n, stdout);
  dds_free(ud);
}

// print_publication prints the discovery data of the writer on topic,
// from the builtin topics, as a ROS node would see it.
static void print_publication(dds_entity_t pp, const char *topic)
{
  dds_entity_t rd = dds_create_reader(pp, DDS_BUILTIN_TOPIC_DCPSPUBLICATION, NULL, NULL);
  dds_time_t deadline = dds_time() + WAIT;
  dds_guid_t participant;
  int found = 0;
  while (!found && dds_time() < deadline) {
    void *buf[16] = {NULL};
    dds_sample_info_t si[16];
    dds_return_t n = dds_read(rd, buf, si, 16, 16);
    for (dds_return_t i = 0; i < n && !found; i++) {
      dds_builtintopic_endpoint_t *e = buf[i];
      if (!si[i].valid_data || strcmp(e->topic_name, topic) != 0)
        continue;
      found = 1;
      participant = e->participant_key;
      dds_reliability_kind_t rk = DDS_RELIABILITY_BEST_EFFORT;
      dds_duration_t blocking;
      dds_durability_kind_t dk = DDS_DURABILITY_VOLATILE;
      dds_history_kind_t hk = DDS_HISTORY_KEEP_ALL;
      int32_t depth = -1;
      dds_qget_reliability(e->qos, &rk, &blocking);
      dds_qget_durability(e->qos, &dk);
      dds_qget_history(e->qos, &hk, &depth);
      uint32_t nrep = 0;
      dds_data_representation_id_t *reps = NULL;
      dds_qget_data_representation(e->qos, &nrep, &reps);
      printf("PUBLICATION type=%s reliability=%s durability=%s history=%s depth=%" PRId32 " representation=%s",
             e->type_name, rk == DDS_RELIABILITY_RELIABLE ? "RELIABLE" : "BEST_EFFORT",
             dk == DDS_DURABILITY_VOLATILE ? "VOLATILE" : "OTHER", hk == DDS_HISTORY_KEEP_LAST ? "KEEP_LAST" : "KEEP_ALL",
             depth, nrep == 1 && reps[0] == DDS_DATA_REPRESENTATION_XCDR1 ? "XCDR1" : "OTHER");
      dds_free(reps);
      print_userdata("userdata", e->qos);
      printf("\n");
    }
    if (n > 0)
      dds_return_loan(rd, buf, n);
    if (!found)
      dds_sleepfor(DDS_MSECS(20));
  }
  dds_delete(rd);
  if (!found)
    die("find publication", DDS_RETCODE_TIMEOUT);

  rd = dds_create_reader(pp, DDS_BUILTIN_TOPIC_DCPSPARTICIPANT, NULL, NULL);
  found = 0;
  while (!found && dds_time() < deadline) {
    void *buf[16] = {NULL};
    dds_sample_info_t si[16];
    dds_return_t n = dds_read(rd, buf, si, 16, 16);
    for (dds_return_t i = 0; i < n && !found; i++) {
      dds_builtintopic_participant_t *p = buf[i];
      if (si[i].valid_data && memcmp(&p->key, &participant, sizeof participant) == 0) {
        found = 1;
        printf("PARTICIPANT");
        print_userdata("userdata", p->qos);
        printf("\n");
      }
    }
    if (n > 0)
      dds_return_loan(rd, buf, n);
    if (!found)
      dds_sleepfor(DDS_MSECS(20));
  }
  dds_delete(rd);
  if (!found)
    die("find participant", DDS_RETCODE_TIMEOUT);
  fflush(stdout);
}

// fnv1a is the 32-bit FNV-1a hash (hash/fnv's New32a in the Go tests).
static uint32_t fnv1a(const uint8_t *b, uint32_t n)
{
  uint32_t h = 2166136261u;
  for (uint32_t i = 0; i < n; i++)
    h = (h ^ b[i]) * 16777619u;
  return h;
}

static void print_hex(const char *s)
{
  for (; *s; s++)
    printf("%02x", (unsigned char)*s);
}

static void print_params(const char *tag, const dds_sequence_rcl_interfaces_msg_dds__Parameter_ *ps)
{
  for (uint32_t i = 0; i < ps->_length; i++) {
    const rcl_interfaces_msg_dds__Parameter_ *p = &ps->_buffer[i];
    printf(" %s%" PRIu32 "=", tag, i);
    print_hex(p->name);
    printf(",%u,%d,%" PRId64 ",%.17g,", p->value.type, p->value.bool_value, p->value.integer_value,
           p->value.double_value);
    print_hex(p->value.string_value ? p->value.string_value : "");
  }
}

static void print_sample(const char *type, struct ddsi_serdata *sd)
{
  if (!strcmp(type, "param_event")) {
    rcl_interfaces_msg_dds__ParameterEvent_ m;
    memset(&m, 0, sizeof m);
    ddsi_serdata_to_sample(sd, &m, NULL, NULL);
    printf("SAMPLE sec=%" PRId32 " nanosec=%" PRIu32 " node=", m.stamp.sec, m.stamp.nanosec);
    print_hex(m.node);
    printf(" new=%" PRIu32 " changed=%" PRIu32 " deleted=%" PRIu32, m.new_parameters._length,
           m.changed_parameters._length, m.deleted_parameters._length);
    print_params("n", &m.new_parameters);
    print_params("c", &m.changed_parameters);
    printf("\n");
    dds_sample_free(&m, &rcl_interfaces_msg_dds__ParameterEvent__desc, DDS_FREE_CONTENTS);
  } else if (!strcmp(type, "log")) {
    rcl_interfaces_msg_dds__Log_ m;
    memset(&m, 0, sizeof m);
    ddsi_serdata_to_sample(sd, &m, NULL, NULL);
    printf("SAMPLE sec=%" PRId32 " nanosec=%" PRIu32 " level=%u line=%" PRIu32 " name=", m.stamp.sec, m.stamp.nanosec,
           m.level, m.line);
    print_hex(m.name);
    printf(" msg=");
    print_hex(m.msg);
    printf(" file=");
    print_hex(m.file);
    printf(" function=");
    print_hex(m.function);
    printf("\n");
    dds_sample_free(&m, &rcl_interfaces_msg_dds__Log__desc, DDS_FREE_CONTENTS);
  } else if (!strcmp(type, "diagnostics")) {
    diagnostic_msgs_msg_dds__DiagnosticArray_ m;
    memset(&m, 0, sizeof m);
    ddsi_serdata_to_sample(sd, &m, NULL, NULL);
    printf("SAMPLE sec=%" PRId32 " nanosec=%" PRIu32 " n=%" PRIu32, m.header.stamp.sec, m.header.stamp.nanosec,
           m.status._length);
    for (uint32_t i = 0; i < m.status._length; i++) {
      const diagnostic_msgs_msg_dds__DiagnosticStatus_ *st = &m.status._buffer[i];
      printf(" s%" PRIu32 "=%u,", i, st->level);
      print_hex(st->name);
      putchar(',');
      print_hex(st->message);
      putchar(',');
      print_hex(st->hardware_id);
      printf(",%" PRIu32, st->values._length);
      for (uint32_t k = 0; k < st->values._length; k++) {
        printf(" s%" PRIu32 "v%" PRIu32 "=", i, k);
        print_hex(st->values._buffer[k].key);
        putchar(',');
        print_hex(st->values._buffer[k].value);
      }
    }
    printf("\n");
    dds_sample_free(&m, &diagnostic_msgs_msg_dds__DiagnosticArray__desc, DDS_FREE_CONTENTS);
  } else if (!strcmp(type, "image")) {
    sensor_msgs_msg_dds__Image_ m;
    memset(&m, 0, sizeof m);
    ddsi_serdata_to_sample(sd, &m, NULL, NULL);
    printf("SAMPLE sec=%" PRId32 " nanosec=%" PRIu32, m.header.stamp.sec, m.header.stamp.nanosec);
    print_octets("frame_id", m.header.frame_id, strlen(m.header.frame_id));
    print_octets("encoding", m.encoding, strlen(m.encoding));
    printf(" width=%" PRIu32 " height=%" PRIu32 " step=%" PRIu32 " len=%" PRIu32 " fnv=%08" PRIx32 "\n",
           m.width, m.height, m.step, m.data._length, fnv1a(m.data._buffer, m.data._length));
    dds_sample_free(&m, &sensor_msgs_msg_dds__Image__desc, DDS_FREE_CONTENTS);
  } else if (!strcmp(type, "cloud")) {
    sensor_msgs_msg_dds__PointCloud2_ m;
    memset(&m, 0, sizeof m);
    ddsi_serdata_to_sample(sd, &m, NULL, NULL);
    printf("SAMPLE sec=%" PRId32 " nanosec=%" PRIu32, m.header.stamp.sec, m.header.stamp.nanosec);
    print_octets("frame_id", m.header.frame_id, strlen(m.header.frame_id));
    printf(" width=%" PRIu32 " height=%" PRIu32 " point_step=%" PRIu32 " fields=%" PRIu32 " len=%" PRIu32 " fnv=%08" PRIx32 "\n",
           m.width, m.height, m.point_step, m.fields._length, m.data._length, fnv1a(m.data._buffer, m.data._length));
    dds_sample_free(&m, &sensor_msgs_msg_dds__PointCloud2__desc, DDS_FREE_CONTENTS);
  } else if (!strcmp(type, "scan")) {
    sensor_msgs_msg_dds__LaserScan_ m;
    memset(&m, 0, sizeof m);
    ddsi_serdata_to_sample(sd, &m, NULL, NULL);
    printf("SAMPLE sec=%" PRId32 " nanosec=%" PRIu32, m.header.stamp.sec, m.header.stamp.nanosec);
    print_octets("frame_id", m.header.frame_id, strlen(m.header.frame_id));
    printf(" ranges=%" PRIu32 " intensities=%" PRIu32 "\n", m.ranges._length, m.intensities._length);
    dds_sample_free(&m, &sensor_msgs_msg_dds__LaserScan__desc, DDS_FREE_CONTENTS);
  } else if (!strcmp(type, "twist")) {
    geometry_msgs_msg_dds__Twist_ t;
    memset(&t, 0, sizeof t);
    ddsi_serdata_to_sample(sd, &t, NULL, NULL);
    printf("SAMPLE lx=%a ly=%a lz=%a ax=%a ay=%a az=%a\n", t.linear.x, t.linear.y, t.linear.z,
           t.angular.x, t.angular.y, t.angular.z);
  } else if (!strcmp(type, "twist_stamped")) {
    geometry_msgs_msg_dds__TwistStamped_ t;
    memset(&t, 0, sizeof t);
    ddsi_serdata_to_sample(sd, &t, NULL, NULL);
    printf("SAMPLE sec=%" PRId32 " nanosec=%" PRIu32, t.header.stamp.sec, t.header.stamp.nanosec);
    print_octets("frame_id", t.header.frame_id, strlen(t.header.frame_id));
    printf(" lx=%a ly=%a lz=%a ax=%a ay=%a az=%a\n", t.twist.linear.x, t.twist.linear.y, t.twist.linear.z,
           t.twist.angular.x, t.twist.angular.y, t.twist.angular.z);
    dds_sample_free(&t, &geometry_msgs_msg_dds__TwistStamped__desc, DDS_FREE_CONTENTS);
  } else {
    zerohop_msgs_msg_dds__SlotHandle_ h;
    memset(&h, 0, sizeof h);
    ddsi_serdata_to_sample(sd, &h, NULL, NULL);
    printf("SAMPLE sec=%" PRId32 " nanosec=%" PRIu32, h.header.stamp.sec, h.header.stamp.nanosec);
    print_octets("frame_id", h.header.frame_id, strlen(h.header.frame_id));
    printf(" version=%u kind=%u pool_id=%" PRIu32 " slot=%" PRIu32 " generation=%" PRIu64 " seq=%" PRIu64
           " publish_time_ns=%" PRId64 " length=%" PRIu64 " checksum=%" PRIu64
           " width=%" PRIu32 " height=%" PRIu32 " row_step=%" PRIu32 " encoding=%u"
           " point_count=%" PRIu32 " point_step=%" PRIu32 " offset_x=%u offset_y=%u offset_z=%u"
           " offset_intensity=%u datatype=%u point_flags=%u\n",
           h.version, h.kind, h.pool_id, h.slot, h.generation, h.seq, h.publish_time_ns, h.length, h.checksum,
           h.width, h.height, h.row_step, h.encoding, h.point_count, h.point_step, h.offset_x, h.offset_y,
           h.offset_z, h.offset_intensity, h.datatype, h.point_flags);
    dds_sample_free(&h, &zerohop_msgs_msg_dds__SlotHandle__desc, DDS_FREE_CONTENTS);
  }
}

// count_silently takes samples without printing them until stdin closes,
// then prints RECEIVED n (benchmarks).
static int count_silently(dds_entity_t pp, dds_entity_t rd)
{
  dds_entity_t ws = dds_create_waitset(pp);
  dds_entity_t cond = dds_create_readcondition(rd, DDS_ANY_STATE);
  dds_waitset_attach(ws, cond, 0);
  uint64_t received = 0;
  for (;;) {
    void *buf[16] = {NULL};
    dds_sample_info_t si[16];
    dds_return_t n = dds_take(rd, buf, si, 16, 16);
    if (n < 0) die("take", n);
    for (dds_return_t i = 0; i < n; i++)
      received += si[i].valid_data;
    if (n > 0) {
      dds_return_loan(rd, buf, n);
      continue;
    }
    if (stdin_closed(0))
      break;
    dds_waitset_wait(ws, NULL, 0, DDS_MSECS(50));
  }
  printf("RECEIVED %" PRIu64 "\n", received);
  fflush(stdout);
  return 0;
}

static int sub(dds_entity_t pp, const char *type, const char *topic, const char *rel, int count)
{
  dds_entity_t tp = dds_create_topic(pp, desc_of(type), topic, NULL, NULL);
  if (tp < 0) die("create topic", tp);
  dds_qos_t *q = qos_of(rel);
  dds_entity_t rd = dds_create_reader(pp, tp, q, NULL);
  dds_delete_qos(q);
  if (rd < 0) die("create reader", rd);
  printf("READY\n");
  fflush(stdout);
  wait_matched(pp, rd, 0);
  if (count <= 0)
    return count_silently(pp, rd);
  print_publication(pp, topic);

  dds_entity_t ws = dds_create_waitset(pp);
  dds_entity_t cond = dds_create_readcondition(rd, DDS_ANY_STATE);
  dds_waitset_attach(ws, cond, 0);
  int got = 0;
  dds_time_t deadline = dds_time() + WAIT;
  while (got < count) {
    struct ddsi_serdata *sd = NULL;
    dds_sample_info_t si;
    dds_return_t n = dds_takecdr(rd, &sd, 1, &si, DDS_ANY_STATE);
    if (n < 0) die("takecdr", n);
    if (n == 0) {
      if (dds_time() > deadline)
        die("wait for data", DDS_RETCODE_TIMEOUT);
      quit_if_stdin_closed();
      dds_waitset_wait(ws, NULL, 0, DDS_MSECS(50));
      continue;
    }
    if (si.valid_data) {
      if (strcmp(type, "image") && strcmp(type, "cloud")) {
        uint32_t size = ddsi_serdata_size(sd);
        unsigned char *b = malloc(size);
        ddsi_serdata_to_ser(sd, 0, size, b);
        hexline("CDR", b, size);
        free(b);
      }
      print_sample(type, sd);
      fflush(stdout);
      got++;
    }
    ddsi_serdata_unref(sd);
  }
  return 0;
}

// The test pattern of every payload byte; the Go test computes the same.
static uint8_t pattern(uint32_t i)
{
  return (uint8_t)(i * 31u + 7u + (i >> 8));
}

// scan_range_bits and scan_intensity_bits are the IEEE-754 bits of a
// test LaserScan's ranges[i] and intensities[i]; the Go test computes the
// same. The ranges cycle through the values a driver may send that
// arithmetic would not keep: a quiet NaN with a payload, +Inf, -Inf, a
// signalling NaN, -0, the smallest subnormal, then normal floats.
static uint32_t scan_range_bits(uint32_t i)
{
  static const uint32_t special[6] = {0x7fc0beefu, 0x7f800000u, 0xff800000u, 0x7f800001u, 0x80000000u, 0x00000001u};
  return i % 8 < 6 ? special[i % 8] : 0x3f800000u + i * 4099u;
}

static uint32_t scan_intensity_bits(uint32_t i) { return 0x42000000u + i * 31u; }

// pub_scan publishes, every period_ms, a LaserScan of n ranges and
// nint intensities: stamp 1700000003.444444444, frame_id "laser_frame",
// angle_min -2.5, angle_max 2.25, angle_increment 0.0078125,
// time_increment 0.0001220703125, scan_time 0.125, range_min 0.0625,
// range_max 40.5 (all exact in float), values scan_*_bits.
static int pub_scan(dds_entity_t wr, int period_ms, uint32_t n, uint32_t nint)
{
  float *ranges = calloc(n + 1, sizeof *ranges), *intensities = calloc(nint + 1, sizeof *intensities);
  for (uint32_t i = 0; i < n; i++) {
    uint32_t b = scan_range_bits(i);
    memcpy(&ranges[i], &b, 4);
  }
  for (uint32_t i = 0; i < nint; i++) {
    uint32_t b = scan_intensity_bits(i);
    memcpy(&intensities[i], &b, 4);
  }
  sensor_msgs_msg_dds__LaserScan_ m = {
    .header = {.stamp = {.sec = 1700000003, .nanosec = 444444444}, .frame_id = "laser_frame"},
    .angle_min = -2.5f, .angle_max = 2.25f, .angle_increment = 0.0078125f,
    .time_increment = 0.0001220703125f, .scan_time = 0.125f, .range_min = 0.0625f, .range_max = 40.5f,
    .ranges = {._buffer = ranges, ._length = n, ._maximum = n},
    .intensities = {._buffer = nint ? intensities : NULL, ._length = nint, ._maximum = nint},
  };
  wait_matched(dds_get_participant(wr), wr, 1);
  dds_time_t deadline = dds_time() + WAIT;
  while (!stdin_closed(period_ms) && dds_time() < deadline) {
    dds_return_t rc = dds_write(wr, &m);
    if (rc < 0) die("write", rc);
  }
  free(ranges);
  free(intensities);
  return 0;
}

static int pub(dds_entity_t pp, const char *type, const char *topic, const char *rel, int period_ms, uint32_t n,
               uint32_t nfields)
{
  dds_entity_t tp = dds_create_topic(pp, desc_of(type), topic, NULL, NULL);
  if (tp < 0) die("create topic", tp);
  dds_qos_t *q = qos_of(rel);
  dds_data_representation_id_t xcdr1 = DDS_DATA_REPRESENTATION_XCDR1;
  dds_qset_data_representation(q, 1, &xcdr1);
  dds_entity_t wr = dds_create_writer(pp, tp, q, NULL);
  dds_delete_qos(q);
  if (wr < 0) die("create writer", wr);
  printf("READY\n");
  fflush(stdout);
  if (!strcmp(type, "scan"))
    return pub_scan(wr, period_ms, n, nfields);

  sensor_msgs_msg_dds__Image_ img;
  sensor_msgs_msg_dds__PointCloud2_ cloud;
  // The first five fields describe the points; extra ones (nfields > 5)
  // are "extraN" entries that test the field limit.
  sensor_msgs_msg_dds__PointField_ fields[64] = {
    {.name = "x", .offset = 0, .datatype = 7, .count = 1},
    {.name = "y", .offset = 4, .datatype = 7, .count = 1},
    {.name = "z", .offset = 8, .datatype = 7, .count = 1},
    {.name = "intensity", .offset = 13, .datatype = 7, .count = 1},
    {.name = "ring", .offset = 17, .datatype = 4, .count = 1},
  };
  char extra_names[64][16];
  if (nfields < 5 || nfields > 64)
    nfields = 5;
  for (uint32_t i = 5; i < nfields; i++) {
    snprintf(extra_names[i], sizeof extra_names[i], "extra%u", (unsigned)i);
    fields[i] = (sensor_msgs_msg_dds__PointField_){.name = extra_names[i], .offset = 0, .datatype = 2, .count = 1};
  }
  const void *sample;
  uint8_t *data;
  uint32_t len;
  if (!strcmp(type, "image")) {
    // rgb8, width n, height n/2 + 1, two bytes of row padding.
    memset(&img, 0, sizeof img);
    img.header.stamp.sec = 1700000000;
    img.header.stamp.nanosec = 123456789;
    img.header.frame_id = "camera_optical";
    img.width = n;
    img.height = n / 2 + 1;
    img.encoding = "rgb8";
    img.step = n * 3 + 2;
    len = img.step * img.height;
    data = malloc(len);
    img.data._buffer = data;
    img.data._length = img.data._maximum = len;
    sample = &img;
  } else {
    // n points of 19 bytes: x, y, z at 0, 4, 8, intensity at 13, ring at 17.
    memset(&cloud, 0, sizeof cloud);
    cloud.header.stamp.sec = 1700000001;
    cloud.header.stamp.nanosec = 987654321;
    cloud.header.frame_id = "lidar";
    cloud.height = 1;
    cloud.width = n;
    cloud.fields._buffer = fields;
    cloud.fields._length = cloud.fields._maximum = nfields;
    cloud.is_bigendian = false;
    cloud.point_step = 19;
    cloud.row_step = 19 * n;
    cloud.is_dense = true;
    len = cloud.row_step;
    data = malloc(len);
    cloud.data._buffer = data;
    cloud.data._length = cloud.data._maximum = len;
    sample = &cloud;
  }
  for (uint32_t i = 0; i < len; i++)
    data[i] = pattern(i);

  wait_matched(pp, wr, 1);
  dds_time_t deadline = dds_time() + WAIT;
  while (!stdin_closed(period_ms) && dds_time() < deadline) {
    dds_return_t rc = dds_write(wr, sample);
    if (rc < 0) die("write", rc);
  }
  free(data);
  return 0;
}

// reliable_writer creates a RELIABLE, KEEP_LAST depth writer on topic
// (XCDR1, as rmw_cyclonedds), TRANSIENT_LOCAL when latched (tf2's static
// broadcaster) and VOLATILE otherwise.
static dds_entity_t reliable_writer(dds_entity_t pp, const dds_topic_descriptor_t *desc, const char *topic, int32_t depth, bool latched)
{
  dds_entity_t tp = dds_create_topic(pp, desc, topic, NULL, NULL);
  if (tp < 0) die("create topic", tp);
  dds_qos_t *q = dds_create_qos();
  dds_qset_reliability(q, DDS_RELIABILITY_RELIABLE, DDS_MSECS(100));
  if (latched)
    dds_qset_durability(q, DDS_DURABILITY_TRANSIENT_LOCAL);
  dds_qset_history(q, DDS_HISTORY_KEEP_LAST, depth);
  dds_data_representation_id_t xcdr1 = DDS_DATA_REPRESENTATION_XCDR1;
  dds_qset_data_representation(q, 1, &xcdr1);
  dds_entity_t wr = dds_create_writer(pp, tp, q, NULL);
  dds_delete_qos(q);
  if (wr < 0) die("create writer", wr);
  return wr;
}

static int pub_static(dds_entity_t pp, const char *topic, int ntf, char **tfs)
{
  dds_entity_t wr = reliable_writer(pp, &tf2_msgs_msg_dds__TFMessage__desc, topic, 1, true);
  printf("READY\n");
  geometry_msgs_msg_dds__TransformStamped_ *ts = calloc((size_t)ntf + 1, sizeof *ts);
  char (*names)[2][128] = calloc((size_t)ntf + 1, sizeof *names);
  for (int i = 0; i < ntf; i++) {
    double v[7];
    if (sscanf(tfs[i], "%127[^,],%127[^,],%lf,%lf,%lf,%lf,%lf,%lf,%lf", names[i][0], names[i][1],
               &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6]) != 9) {
      fprintf(stderr, "peer: transform %s: want PARENT,CHILD,X,Y,Z,QX,QY,QZ,QW\n", tfs[i]);
      exit(1);
    }
    ts[i].header.stamp.sec = 1700000002;
    ts[i].header.frame_id = names[i][0];
    ts[i].child_frame_id = names[i][1];
    ts[i].transform.translation = (geometry_msgs_msg_dds__Vector3_){v[0], v[1], v[2]};
    ts[i].transform.rotation = (geometry_msgs_msg_dds__Quaternion_){v[3], v[4], v[5], v[6]};
  }
  tf2_msgs_msg_dds__TFMessage_ m = {.transforms = {._buffer = ts, ._length = (uint32_t)ntf, ._maximum = (uint32_t)ntf}};
  dds_return_t rc = dds_write(wr, &m);
  if (rc < 0) die("write", rc);
  printf("WRITTEN\n");
  fflush(stdout);
  dds_time_t deadline = dds_time() + WAIT;
  while (!stdin_closed(50) && dds_time() < deadline)
    ;
  free(ts);
  free(names);
  return 0;
}

static int pub_odom(dds_entity_t pp, const char *topic, int32_t sec, int period_ms, double rate)
{
  dds_entity_t wr = reliable_writer(pp, &tf2_msgs_msg_dds__TFMessage__desc, topic, 100, false);
  printf("READY\n");
  fflush(stdout);
  geometry_msgs_msg_dds__TransformStamped_ ts;
  memset(&ts, 0, sizeof ts);
  ts.header.frame_id = "odom";
  ts.child_frame_id = "base_link";
  tf2_msgs_msg_dds__TFMessage_ m = {.transforms = {._buffer = &ts, ._length = 1, ._maximum = 1}};
  dds_time_t deadline = dds_time() + WAIT;
  for (int64_t k = 0; !stdin_closed(period_ms) && dds_time() < deadline; k++) {
    int64_t ns = k * (int64_t)period_ms * 1000000;
    double yaw = rate * (double)ns / 1e9;
    ts.header.stamp.sec = sec + (int32_t)(ns / 1000000000);
    ts.header.stamp.nanosec = (uint32_t)(ns % 1000000000);
    ts.transform.rotation = (geometry_msgs_msg_dds__Quaternion_){0, 0, sin(yaw / 2), cos(yaw / 2)};
    dds_return_t rc = dds_write(wr, &m);
    if (rc < 0) die("write", rc);
  }
  return 0;
}

static int pub_clock(dds_entity_t pp, const char *topic, int32_t sec, int period_ms)
{
  dds_entity_t wr = reliable_writer(pp, &rosgraph_msgs_msg_dds__Clock__desc, topic, 1, false);
  printf("READY\n");
  fflush(stdout);
  rosgraph_msgs_msg_dds__Clock_ c = {.clock = {.sec = sec, .nanosec = 500000000}};
  dds_time_t deadline = dds_time() + WAIT;
  while (!stdin_closed(period_ms) && dds_time() < deadline) {
    dds_return_t rc = dds_write(wr, &c);
    if (rc < 0) die("write", rc);
    c.clock.sec++;
  }
  return 0;
}

int main(int argc, char **argv)
{
  if (argc >= 6 && !strcmp(argv[2], "clock")) {
    dds_entity_t pp = dds_create_participant((dds_domainid_t)atoi(argv[1]), NULL, NULL);
    if (pp < 0) die("create participant", pp);
    int rc = pub_clock(pp, argv[3], (int32_t)atoi(argv[4]), atoi(argv[5]));
    dds_delete(pp);
    return rc;
  }
  if (argc >= 7 && !strcmp(argv[2], "odom")) {
    dds_entity_t pp = dds_create_participant((dds_domainid_t)atoi(argv[1]), NULL, NULL);
    if (pp < 0) die("create participant", pp);
    int rc = pub_odom(pp, argv[3], (int32_t)atoi(argv[4]), atoi(argv[5]), atoi(argv[6]) / 1000.0);
    dds_delete(pp);
    return rc;
  }
  if (argc >= 4 && !strcmp(argv[2], "static")) {
    dds_entity_t pp = dds_create_participant((dds_domainid_t)atoi(argv[1]), NULL, NULL);
    if (pp < 0) die("create participant", pp);
    int rc = pub_static(pp, argv[3], argc - 4, argv + 4);
    dds_delete(pp);
    return rc;
  }
  if (argc < 7) {
    fprintf(stderr, "usage: peer DOMAIN sub|pub TYPE TOPIC RELIABILITY COUNT|PERIOD_MS [N [NFIELDS]]\n");
    return 1;
  }
  if (desc_of(argv[3]) == NULL) {
    fprintf(stderr, "peer: unknown type %s\n", argv[3]);
    return 1;
  }
  dds_entity_t pp = dds_create_participant((dds_domainid_t)atoi(argv[1]), NULL, NULL);
  if (pp < 0) die("create participant", pp);
  int rc;
  if (!strcmp(argv[2], "sub"))
    rc = sub(pp, argv[3], argv[4], argv[5], atoi(argv[6]));
  else {
    uint32_t n = argc > 7 ? (uint32_t)atoi(argv[7]) : 64;
    // NFIELDS: a cloud's PointFields (default 5), a scan's intensities (default N).
    uint32_t nfields = argc > 8 ? (uint32_t)atoi(argv[8]) : (!strcmp(argv[3], "scan") ? n : 5);
    rc = pub(pp, argv[3], argv[4], argv[5], atoi(argv[6]), n, nfields);
  }
  dds_delete(pp);
  return rc;
}
