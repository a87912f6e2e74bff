// cmdsub: subscribes to rt/<topic> geometry_msgs/TwistStamped (RELIABLE,
// KEEP_LAST 10, as ROS's default profile) and prints one line per sample:
//   <arrival CLOCK_REALTIME ns> <header.stamp ns> <linear.x> <angular.z> <source_timestamp ns>
// (source_timestamp: the writer's clock when the agent wrote the sample)
// Derived from ros2/testdata/peer/peer.c (raw Cyclone C API,
// idlc types from ros2/*.c). Usage: cmdsub DOMAIN TOPIC SECONDS
// Ends after SECONDS or on SIGTERM/SIGINT. Build (from the repository root):
//   gcc -O2 -I ros2 $(pkg-config --cflags CycloneDDS) scripts/soak/cmdsub.c ros2/geometry_msgs.c \
//       ros2/std_msgs.c ros2/builtin_interfaces.c $(pkg-config --libs CycloneDDS) -o /tmp/zerohop-cmdsub
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dds/dds.h"
#include "geometry_msgs.h"

static volatile sig_atomic_t quit;
static void onsig(int s) { (void)s; quit = 1; }

static int64_t now_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int main(int argc, char **argv)
{
  if (argc < 4) { fprintf(stderr, "usage: cmdsub DOMAIN TOPIC SECONDS\n"); return 2; }
  signal(SIGTERM, onsig);
  signal(SIGINT, onsig);
  int64_t end = now_ns() + (int64_t)atoi(argv[3]) * 1000000000;
  dds_entity_t pp = dds_create_participant((dds_domainid_t)atoi(argv[1]), NULL, NULL);
  if (pp < 0) { printf("ERROR participant %s\n", dds_strretcode(pp)); return 2; }
  dds_entity_t tp = dds_create_topic(pp, &geometry_msgs_msg_dds__TwistStamped__desc, argv[2], NULL, NULL);
  if (tp < 0) { printf("ERROR topic %s\n", dds_strretcode(tp)); return 2; }
  dds_qos_t *q = dds_create_qos();
  dds_qset_reliability(q, DDS_RELIABILITY_RELIABLE, DDS_MSECS(100));
  dds_qset_durability(q, DDS_DURABILITY_VOLATILE);
  dds_qset_history(q, DDS_HISTORY_KEEP_LAST, 10);
  dds_entity_t rd = dds_create_reader(pp, tp, q, NULL);
  dds_delete_qos(q);
  if (rd < 0) { printf("ERROR reader %s\n", dds_strretcode(rd)); return 2; }
  dds_entity_t ws = dds_create_waitset(pp);
  dds_entity_t cond = dds_create_readcondition(rd, DDS_ANY_STATE);
  dds_waitset_attach(ws, cond, 0);
  printf("READY\n");
  fflush(stdout);
  uint64_t n = 0;
  while (!quit && now_ns() < end) {
    void *buf[1] = {NULL};
    dds_sample_info_t si[1];
    dds_return_t r = dds_take(rd, buf, si, 1, 1);
    if (r < 0) { printf("ERROR take %s\n", dds_strretcode(r)); break; }
    if (r == 0) {
      dds_waitset_wait(ws, NULL, 0, DDS_MSECS(100));
      continue;
    }
    int64_t t = now_ns();
    if (si[0].valid_data) {
      geometry_msgs_msg_dds__TwistStamped_ *m = buf[0];
      int64_t st = (int64_t)m->header.stamp.sec * 1000000000 + m->header.stamp.nanosec;
      printf("%" PRId64 " %" PRId64 " %.4f %.4f %" PRId64 "\n", t, st, m->twist.linear.x, m->twist.angular.z, (int64_t)si[0].source_timestamp);
      n++;
      fflush(stdout);
    }
    dds_return_loan(rd, buf, r);
  }
  printf("END %" PRIu64 "\n", n);
  fflush(stdout);
  dds_delete(pp);
  return 0;
}
