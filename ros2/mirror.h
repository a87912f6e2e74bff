// mirror.h: full Image/PointCloud2 writes from caller-owned data (mirror.c).
#ifndef ZH_MIRROR_H
#define ZH_MIRROR_H

#include <stdint.h>

#include "dds/dds.h"

// zh_mirror_hdr is per-writer scratch in C memory: header fields and the
// NUL-terminated strings (frame_id[16] and encoding[16] stay 0).
typedef struct zh_mirror_hdr {
  int32_t sec;
  uint32_t nanosec;
  char frame_id[17];
  char encoding[17];
  uint16_t offsets[4]; // x, y, z, intensity within a point (float32 each)
} zh_mirror_hdr;

dds_return_t zh_write_image(dds_entity_t writer, const zh_mirror_hdr *h, uint32_t width, uint32_t height,
                            uint32_t step, const uint8_t *data, uint32_t len);
dds_return_t zh_write_cloud(dds_entity_t writer, const zh_mirror_hdr *h, uint32_t npoints, uint32_t point_step,
                            const uint8_t *data, uint32_t len);

#endif
