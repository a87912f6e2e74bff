//go:build ros2 && cgo

// mirror.c: writes full sensor_msgs/Image and PointCloud2 samples whose
// data point at memory the caller owns (a camera slot). dds_write
// serializes before it returns, so nothing is retained. See mirror.go.

#include <string.h>

#include "dds/dds.h"
#include "sensor_msgs.h"
#include "mirror.h"

dds_return_t zh_write_image(dds_entity_t writer, const zh_mirror_hdr *h, uint32_t width, uint32_t height,
                            uint32_t step, const uint8_t *data, uint32_t len)
{
  sensor_msgs_msg_dds__Image_ s;
  memset(&s, 0, sizeof s);
  s.header.stamp.sec = h->sec;
  s.header.stamp.nanosec = h->nanosec;
  s.header.frame_id = (char *)h->frame_id;
  s.height = height;
  s.width = width;
  s.encoding = (char *)h->encoding;
  s.step = step;
  s.data._buffer = (uint8_t *)data;
  s.data._length = s.data._maximum = len;
  return dds_write(writer, &s);
}

dds_return_t zh_write_cloud(dds_entity_t writer, const zh_mirror_hdr *h, uint32_t npoints, uint32_t point_step,
                            const uint8_t *data, uint32_t len)
{
  sensor_msgs_msg_dds__PointField_ f[4] = {
    {.name = "x", .offset = h->offsets[0], .datatype = 7, .count = 1},
    {.name = "y", .offset = h->offsets[1], .datatype = 7, .count = 1},
    {.name = "z", .offset = h->offsets[2], .datatype = 7, .count = 1},
    {.name = "intensity", .offset = h->offsets[3], .datatype = 7, .count = 1},
  };
  sensor_msgs_msg_dds__PointCloud2_ s;
  memset(&s, 0, sizeof s);
  s.header.stamp.sec = h->sec;
  s.header.stamp.nanosec = h->nanosec;
  s.header.frame_id = (char *)h->frame_id;
  s.height = 1;
  s.width = npoints;
  s.fields._buffer = f;
  s.fields._length = s.fields._maximum = 4;
  s.point_step = point_step;
  s.row_step = point_step * npoints;
  s.data._buffer = (uint8_t *)data;
  s.data._length = s.data._maximum = len;
  s.is_dense = false; // the slot may hold NaN points, as the driver sent them
  return dds_write(writer, &s);
}
