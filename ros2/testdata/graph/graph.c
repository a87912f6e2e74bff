// graph: reads the ROS graph topic the way rmw_dds_common's GraphCache
// does, for the ros2 package's tests. Raw Cyclone C API and the
// idlc-generated types only (none of zh_dds.c), in its own process.
//
//   graph DOMAIN GID_BYTES
//     GID_BYTES: 16 (Iron and later) or 24 (Humble). Subscribes to
//     ros_discovery_info (RELIABLE, TRANSIENT_LOCAL) and prints READY.
//     For every sample: a GRAPH line (participant gid, whether DDS
//     discovery knows that participant, node count), a NODE line per node,
//     and an ENDPOINT line per reader and writer GID: the topic and type
//     DDS discovery reports for that GUID, whether it belongs to the
//     sample's participant, and whether the GID's padding is zero. Then
//     END. It ends when stdin closes, or after 60 s.
//
// Cyclone reads its configuration from CYCLONEDDS_URI.
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dds/dds.h"
#include "rmw_dds_common.h"
#include "rmw_dds_common_humble.h"

static void die(const char *what, dds_return_t rc)
{
  printf("ERROR %s: %s\n", what, dds_strretcode(rc));
  fflush(stdout);
  exit(2);
}

static int stdin_closed(void)
{
  struct pollfd pfd = {.fd = 0, .events = POLLIN};
  if (poll(&pfd, 1, 0) > 0) {
    char c[64];
    if (read(0, c, sizeof c) <= 0)
      return 1;
  }
  return 0;
}

static void hex(const uint8_t *b, size_t n)
{
  for (size_t i = 0; i < n; i++)
    printf("%02x", b[i]);
}

static int zero(const uint8_t *b, size_t n)
{
  for (size_t i = 0; i < n; i++)
    if (b[i] != 0)
      return 0;
  return 1;
}

// known_participant waits up to 5 s for DDS discovery to report the
// participant with GUID g.
static int known_participant(dds_entity_t rd, const uint8_t *g)
{
  dds_time_t deadline = dds_time() + DDS_SECS(5);
  do {
    void *buf[32] = {NULL};
    dds_sample_info_t si[32];
    dds_return_t n = dds_read(rd, buf, si, 32, 32);
    int found = 0;
    for (dds_return_t i = 0; i < n; i++) {
      dds_builtintopic_participant_t *p = buf[i];
      if (si[i].valid_data && memcmp(p->key.v, g, 16) == 0)
        found = 1;
    }
    if (n > 0)
      dds_return_loan(rd, buf, n);
    if (found)
      return 1;
    dds_sleepfor(DDS_MSECS(20));
  } while (dds_time() < deadline);
  return 0;
}

// print_endpoint looks the GUID up in the builtin publication or
// subscription topic (waiting up to 5 s) and prints what it found.
static void print_endpoint(dds_entity_t rd, const char *side, const uint8_t *gid, size_t gid_bytes,
                           const uint8_t *participant)
{
  dds_time_t deadline = dds_time() + DDS_SECS(5);
  printf("ENDPOINT side=%s gid=", side);
  hex(gid, 16);
  do {
    void *buf[64] = {NULL};
    dds_sample_info_t si[64];
    dds_return_t n = dds_read(rd, buf, si, 64, 64);
    int found = 0;
    for (dds_return_t i = 0; i < n && !found; i++) {
      dds_builtintopic_endpoint_t *e = buf[i];
      if (!si[i].valid_data || memcmp(e->key.v, gid, 16) != 0)
        continue;
      found = 1;
      printf(" topic=%s type=%s same_participant=%d", e->topic_name, e->type_name,
             memcmp(e->participant_key.v, participant, 16) == 0);
    }
    if (n > 0)
      dds_return_loan(rd, buf, n);
    if (found) {
      printf(" padding_zero=%d\n", zero(gid + 16, gid_bytes - 16));
      return;
    }
    dds_sleepfor(DDS_MSECS(20));
  } while (dds_time() < deadline);
  printf(" topic=? type=? same_participant=0 padding_zero=%d\n", zero(gid + 16, gid_bytes - 16));
}

// The two sample layouts differ only in the Gid width; this macro walks
// one of them.
#define PRINT_SAMPLE(S, GB)                                                                    \
  do {                                                                                         \
    printf("GRAPH gid=");                                                                      \
    hex((S)->gid.data, 16);                                                                    \
    printf(" padding_zero=%d known=%d nodes=%" PRIu32 "\n", zero((S)->gid.data + 16, GB - 16), \
           known_participant(parts, (S)->gid.data), (S)->node_entities_info_seq._length);      \
    for (uint32_t k = 0; k < (S)->node_entities_info_seq._length; k++) {                       \
      const __typeof__((S)->node_entities_info_seq._buffer[0]) *nd =                           \
          &(S)->node_entities_info_seq._buffer[k];                                             \
      printf("NODE ns=%s name=%s readers=%" PRIu32 " writers=%" PRIu32 "\n", nd->node_namespace, \
             nd->node_name, nd->reader_gid_seq._length, nd->writer_gid_seq._length);           \
      for (uint32_t j = 0; j < nd->reader_gid_seq._length; j++)                                \
        print_endpoint(subs, "reader", nd->reader_gid_seq._buffer[j].data, GB, (S)->gid.data); \
      for (uint32_t j = 0; j < nd->writer_gid_seq._length; j++)                                \
        print_endpoint(pubs, "writer", nd->writer_gid_seq._buffer[j].data, GB, (S)->gid.data); \
    }                                                                                          \
    printf("END\n");                                                                           \
    fflush(stdout);                                                                            \
  } while (0)

int main(int argc, char **argv)
{
  if (argc != 3 || (atoi(argv[2]) != 16 && atoi(argv[2]) != 24)) {
    fprintf(stderr, "usage: graph DOMAIN 16|24\n");
    return 1;
  }
  int gid_bytes = atoi(argv[2]);
  dds_entity_t pp = dds_create_participant((dds_domainid_t)atoi(argv[1]), NULL, NULL);
  if (pp < 0) die("create participant", pp);
  dds_entity_t parts = dds_create_reader(pp, DDS_BUILTIN_TOPIC_DCPSPARTICIPANT, NULL, NULL);
  dds_entity_t pubs = dds_create_reader(pp, DDS_BUILTIN_TOPIC_DCPSPUBLICATION, NULL, NULL);
  dds_entity_t subs = dds_create_reader(pp, DDS_BUILTIN_TOPIC_DCPSSUBSCRIPTION, NULL, NULL);
  if (parts < 0 || pubs < 0 || subs < 0) die("create builtin readers", DDS_RETCODE_ERROR);
  const dds_topic_descriptor_t *desc = gid_bytes == 16 ? &rmw_dds_common_msg_dds__ParticipantEntitiesInfo__desc
                                                       : &rmw_dds_common_humble_msg_dds__ParticipantEntitiesInfo__desc;
  dds_entity_t topic = dds_create_topic(pp, desc, "ros_discovery_info", NULL, NULL);
  if (topic < 0) die("create topic", topic);
  dds_qos_t *q = dds_create_qos();
  dds_qset_reliability(q, DDS_RELIABILITY_RELIABLE, DDS_MSECS(100));
  dds_qset_durability(q, DDS_DURABILITY_TRANSIENT_LOCAL);
  dds_qset_history(q, DDS_HISTORY_KEEP_LAST, 16);
  dds_entity_t rd = dds_create_reader(pp, topic, q, NULL);
  dds_delete_qos(q);
  if (rd < 0) die("create reader", rd);
  printf("READY\n");
  fflush(stdout);

  dds_time_t deadline = dds_time() + DDS_SECS(60);
  while (!stdin_closed() && dds_time() < deadline) {
    void *buf[1] = {NULL};
    dds_sample_info_t si;
    dds_return_t n = dds_take(rd, buf, &si, 1, 1);
    if (n < 0) die("take", n);
    if (n == 0) {
      dds_sleepfor(DDS_MSECS(10));
      continue;
    }
    if (si.valid_data) {
      if (gid_bytes == 16) {
        const rmw_dds_common_msg_dds__ParticipantEntitiesInfo_ *s = buf[0];
        PRINT_SAMPLE(s, 16);
      } else {
        const rmw_dds_common_humble_msg_dds__ParticipantEntitiesInfo_ *s = buf[0];
        PRINT_SAMPLE(s, 24);
      }
    }
    dds_return_loan(rd, buf, n);
  }
  dds_delete(pp);
  return 0;
}
