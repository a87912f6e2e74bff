// ros2pub: a ROS 2 sensor driver stand-in for the camera package's ros2
// source tests, written against the raw Cyclone DDS C API and the
// idlc-generated types of ros2/ only (no zerohop code), run as a separate
// process so that samples cross the wire. Cyclone reads its configuration
// from CYCLONEDDS_URI.
//
//   ros2pub DOMAIN KIND TOPIC PERIOD_MS [N [FRAME]]
//     KIND cloud: N points (default 1000), fields y@0 z@4 x@8 (FLOAT32),
//       ring@12 (UINT16), intensity@16 (FLOAT64), point_step 32; point k is
//       x = k*0.5 + 1, y = -k/3.0, z = k/1024.0 - 2, intensity = k/7.0
//       (each one IEEE operation, so that any compiler rounds them alike);
//       bytes not covered by a field are 0xAB.
//     KIND cloud_int16: as cloud, but x is INT16 (unsupported).
//     KIND cloud_wide: as cloud, with 28 more UINT8 fields pad0..pad27
//       (33 in all, more than a subscriber takes).
//     KIND image: bgr8, width N (default 13), height 7, step 3N + 5; byte c
//       of row r is (r*131 + c*7 + 3) & 0xff, row padding 0xEE.
//     KIND scan: a sensor_msgs/LaserScan of N rays (default 360, at least
//       5), stamp 1700000001.987654321, frame_id FRAME (default "laser"),
//       angle_min = (float)-M_PI, angle_increment = (float)(2*M_PI / N),
//       angle_max = (float)(M_PI - 2*M_PI / N) (the last ray's angle),
//       time_increment = (float)(0.1 / N), scan_time = (float)0.1,
//       range_min = 0.1f, range_max = 30.0f; each one rounding of a double,
//       so in Go float32(-math.Pi), float32(2*math.Pi/float64(n)), ...
//       ranges[i] = 1 + (i % 100) * 0.25 (exact in float), except
//       ranges[1] NaN (bits 0x7fc00000), ranges[2] +Inf, ranges[3] 0.05f
//       (below range_min), ranges[4] 35.0f (above range_max);
//       intensities[i] = i.
//   Prints READY, then publishes the message every PERIOD_MS until stdin
//   closes (or 20 s pass).
//
//   ros2pub DOMAIN sub_image|sub_cloud TOPIC [reliable]
//     A BEST_EFFORT (or RELIABLE) subscriber: prints READY, then for the
//     first sample
//     "SAMPLE sec nanosec frame_id width height step|point_step
//     encoding|fields data_hex" (fields as name:offset:datatype:count,
//     comma-separated) and exits; ERROR after 20 s without one.
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dds/dds.h"
#include "sensor_msgs.h"

static void die(const char *what, dds_return_t rc)
{
  printf("ERROR %s: %s\n", what, dds_strretcode(rc));
  fflush(stdout);
  exit(2);
}

static void put32(uint8_t *p, const void *v) { memcpy(p, v, 4); } // little-endian host
static void put64(uint8_t *p, const void *v) { memcpy(p, v, 8); }

static int sub(dds_entity_t pp, int image, const char *topic, int reliable)
{
  dds_entity_t tp = dds_create_topic(pp, image ? &sensor_msgs_msg_dds__Image__desc : &sensor_msgs_msg_dds__PointCloud2__desc,
                                     topic, NULL, NULL);
  if (tp < 0) die("create topic", tp);
  dds_qos_t *q = dds_create_qos();
  dds_qset_reliability(q, reliable ? DDS_RELIABILITY_RELIABLE : DDS_RELIABILITY_BEST_EFFORT, 0);
  dds_qset_history(q, DDS_HISTORY_KEEP_LAST, 5);
  dds_entity_t rd = dds_create_reader(pp, tp, q, NULL);
  dds_delete_qos(q);
  if (rd < 0) die("create reader", rd);
  printf("READY\n");
  fflush(stdout);
  dds_time_t deadline = dds_time() + DDS_SECS(20);
  while (dds_time() < deadline) {
    void *samples[1] = {NULL};
    dds_sample_info_t info[1];
    dds_return_t n = dds_take(rd, samples, info, 1, 1);
    if (n < 0) die("take", n);
    if (n == 0 || !info[0].valid_data) {
      if (n > 0) dds_return_loan(rd, samples, n);
      dds_sleepfor(DDS_MSECS(5));
      continue;
    }
    const dds_sequence_uint8 *data;
    if (image) {
      const sensor_msgs_msg_dds__Image_ *m = samples[0];
      printf("SAMPLE %d %u %s %u %u %u %s ", m->header.stamp.sec, m->header.stamp.nanosec, m->header.frame_id,
             m->width, m->height, m->step, m->encoding);
      data = &m->data;
    } else {
      const sensor_msgs_msg_dds__PointCloud2_ *m = samples[0];
      printf("SAMPLE %d %u %s %u %u %u ", m->header.stamp.sec, m->header.stamp.nanosec, m->header.frame_id,
             m->width, m->height, m->point_step);
      for (uint32_t i = 0; i < m->fields._length; i++) {
        const sensor_msgs_msg_dds__PointField_ *f = &m->fields._buffer[i];
        printf("%s%s:%u:%u:%u", i ? "," : "", f->name, f->offset, f->datatype, f->count);
      }
      printf(" ");
      data = &m->data;
    }
    for (uint32_t i = 0; i < data->_length; i++)
      printf("%02x", data->_buffer[i]);
    printf("\n");
    fflush(stdout);
    dds_return_loan(rd, samples, n);
    return 0;
  }
  printf("ERROR no sample within 20 s\n");
  return 2;
}

int main(int argc, char **argv)
{
  if ((argc == 4 || argc == 5) && !strncmp(argv[2], "sub_", 4)) {
    dds_entity_t pp = dds_create_participant((dds_domainid_t)atoi(argv[1]), NULL, NULL);
    if (pp < 0) die("create participant", pp);
    int rc = sub(pp, !strcmp(argv[2], "sub_image"), argv[3], argc == 5 && !strcmp(argv[4], "reliable"));
    dds_delete(pp);
    return rc;
  }
  if (argc < 5) {
    fprintf(stderr, "usage: ros2pub DOMAIN cloud|cloud_int16|cloud_wide|image|scan TOPIC PERIOD_MS [N [FRAME]]\n");
    return 1;
  }
  const char *kind = argv[2];
  int period = atoi(argv[4]);
  int image = !strcmp(kind, "image"), scan = !strcmp(kind, "scan");
  uint32_t n = argc > 5 ? (uint32_t)atoi(argv[5]) : (image ? 13 : scan ? 360 : 1000);
  if (scan && n < 5) {
    fprintf(stderr, "ros2pub: a scan needs N >= 5 rays\n");
    return 1;
  }

  dds_entity_t pp = dds_create_participant((dds_domainid_t)atoi(argv[1]), NULL, NULL);
  if (pp < 0) die("create participant", pp);
  dds_entity_t tp = dds_create_topic(pp,
                                     image  ? &sensor_msgs_msg_dds__Image__desc
                                     : scan ? &sensor_msgs_msg_dds__LaserScan__desc
                                            : &sensor_msgs_msg_dds__PointCloud2__desc,
                                     argv[3], NULL, NULL);
  if (tp < 0) die("create topic", tp);
  dds_qos_t *q = dds_create_qos();
  dds_qset_reliability(q, DDS_RELIABILITY_RELIABLE, DDS_MSECS(100));
  dds_qset_durability(q, DDS_DURABILITY_VOLATILE);
  dds_qset_history(q, DDS_HISTORY_KEEP_LAST, 10);
  dds_data_representation_id_t xcdr1 = DDS_DATA_REPRESENTATION_XCDR1;
  dds_qset_data_representation(q, 1, &xcdr1);
  dds_entity_t wr = dds_create_writer(pp, tp, q, NULL);
  dds_delete_qos(q);
  if (wr < 0) die("create writer", wr);

  sensor_msgs_msg_dds__Image_ img;
  sensor_msgs_msg_dds__PointCloud2_ cloud;
  sensor_msgs_msg_dds__LaserScan_ ls;
  sensor_msgs_msg_dds__PointField_ fields[33] = {
    {.name = "y", .offset = 0, .datatype = 7, .count = 1},
    {.name = "z", .offset = 4, .datatype = 7, .count = 1},
    {.name = "x", .offset = 8, .datatype = 7, .count = 1},
    {.name = "ring", .offset = 12, .datatype = 4, .count = 1},
    {.name = "intensity", .offset = 16, .datatype = 8, .count = 1},
  };
  if (!strcmp(kind, "cloud_int16"))
    fields[2].datatype = 3;
  uint32_t nfields = 5;
  static char padnames[28][8];
  if (!strcmp(kind, "cloud_wide")) {
    for (int i = 0; i < 28; i++) {
      snprintf(padnames[i], sizeof padnames[i], "pad%d", i);
      fields[5 + i] = (sensor_msgs_msg_dds__PointField_){.name = padnames[i], .offset = 24, .datatype = 2, .count = 1};
    }
    nfields = 33;
  }
  const void *sample;
  uint8_t *data;
  uint32_t len;
  if (scan) {
    // data holds the ranges, then the intensities.
    len = 2 * n * (uint32_t)sizeof(float);
    data = malloc(len);
    float *ranges = (float *)data, *intensities = ranges + n;
    for (uint32_t i = 0; i < n; i++) {
      ranges[i] = (float)(1 + (i % 100) * 0.25);
      intensities[i] = (float)i;
    }
    const uint32_t qnan = 0x7fc00000u;
    memcpy(&ranges[1], &qnan, 4);
    ranges[2] = INFINITY;
    ranges[3] = 0.05f;
    ranges[4] = 35.0f;
    memset(&ls, 0, sizeof ls);
    ls.header.stamp.sec = 1700000001;
    ls.header.stamp.nanosec = 987654321;
    ls.header.frame_id = argc > 6 ? argv[6] : "laser";
    ls.angle_min = (float)-M_PI;
    ls.angle_increment = (float)(2 * M_PI / n);
    ls.angle_max = (float)(M_PI - 2 * M_PI / n);
    ls.time_increment = (float)(0.1 / n);
    ls.scan_time = (float)0.1;
    ls.range_min = 0.1f;
    ls.range_max = 30.0f;
    ls.ranges._buffer = ranges;
    ls.ranges._length = ls.ranges._maximum = n;
    ls.intensities._buffer = intensities;
    ls.intensities._length = ls.intensities._maximum = n;
    sample = &ls;
  } else if (image) {
    const uint32_t h = 7, step = n * 3 + 5;
    memset(&img, 0, sizeof img);
    img.header.stamp.sec = 1700000000;
    img.header.stamp.nanosec = 123456789;
    img.header.frame_id = "camera_optical";
    img.width = n;
    img.height = h;
    img.encoding = "bgr8";
    img.step = step;
    len = step * h;
    data = malloc(len);
    memset(data, 0xEE, len);
    for (uint32_t r = 0; r < h; r++)
      for (uint32_t c = 0; c < n * 3; c++)
        data[r * step + c] = (uint8_t)(r * 131 + c * 7 + 3);
    img.data._buffer = data;
    img.data._length = img.data._maximum = len;
    sample = &img;
  } else {
    memset(&cloud, 0, sizeof cloud);
    cloud.header.stamp.sec = 1700000001;
    cloud.header.stamp.nanosec = 987654321;
    cloud.header.frame_id = "velodyne_top_front_left"; // longer than a handle's 16 bytes
    cloud.height = 1;
    cloud.width = n;
    cloud.fields._buffer = fields;
    cloud.fields._length = cloud.fields._maximum = nfields;
    cloud.point_step = 32;
    cloud.row_step = 32 * n;
    cloud.is_dense = true;
    len = cloud.row_step;
    data = malloc(len);
    memset(data, 0xAB, len);
    for (uint32_t k = 0; k < n; k++) {
      uint8_t *p = data + 32 * k;
      float x = (float)(k * 0.5 + 1), y = (float)(-(double)k / 3.0), z = (float)(k / 1024.0 - 2);
      double in = (double)k / 7.0;
      uint16_t ring = (uint16_t)(k % 64);
      put32(p + 0, &y);
      put32(p + 4, &z);
      put32(p + 8, &x);
      memcpy(p + 12, &ring, 2);
      put64(p + 16, &in);
    }
    cloud.data._buffer = data;
    cloud.data._length = cloud.data._maximum = len;
    sample = &cloud;
  }
  printf("READY\n");
  fflush(stdout);
  dds_time_t deadline = dds_time() + DDS_SECS(20);
  struct pollfd pfd = {.fd = 0, .events = POLLIN};
  while (dds_time() < deadline) {
    if (poll(&pfd, 1, period) > 0) {
      char b[64];
      if (fgets(b, sizeof b, stdin) == NULL)
        break; // stdin closed: the test is done
    }
    dds_return_t rc = dds_write(wr, sample);
    if (rc < 0) die("write", rc);
  }
  free(data);
  dds_delete(pp);
  return 0;
}
