// Package handles defines the records that flow between a camera and its
// subscribers: the Handle that announces a filled slot of a pinned pool,
// and the Release that returns it. Both are fixed-size, little-endian and
// versioned; encoding and decoding allocate nothing. Transports that carry
// them live in subpackages.
//
// A received record is never trusted: Validator.Decode checks every field
// against the pool geometry announced at connect and counts each rejection
// by class, so that no field can make a reader touch memory outside its
// slot.
//
// # Handle record (Size = 128 bytes, Version 1)
//
// All integers little-endian. Bytes marked reserved must be zero, and the
// section of the other kind must be all zero, so that a decoded record
// re-encodes to the same bytes.
//
//	offset size type     field                 notes
//	     0    4 [4]byte  magic                 "ZHHN"
//	     4    2 uint16   version               1
//	     6    1 uint8    kind                  1 image, 2 points
//	     7    1 -        reserved              0
//	     8    4 uint32   pool_id               announced at connect
//	    12    4 uint32   slot                  < pool slot count
//	    16    8 uint64   generation            slot reuse count; the lease table checks it
//	    24    8 uint64   seq                   per-camera frame sequence number
//	    32    8 int64    capture_time_ns       UNIX ns (ROS header stamp)
//	    40    8 int64    publish_time_ns       CLOCK_MONOTONIC ns on the camera host
//	    48    8 uint64   length                payload bytes from slot start, ≤ slot capacity
//	    56    8 uint64   checksum              PayloadChecksum (CRC-64/ECMA) in test mode, 0 = none
//	    64   16 [16]byte frame_id              printable ASCII 0x20–0x7e, NUL-padded
//	   --- image section (kind 1; zero for points) ---
//	    80    4 uint32   image.width           pixels, ≥ 1
//	    84    4 uint32   image.height          rows, ≥ 1
//	    88    4 uint32   image.row_step        bytes per row, ≥ width × bytes per pixel
//	    92    1 uint8    image.encoding        1 rgb8, 2 bgr8, 3 mono8, 4 rgba8, 5 bgra8
//	    93    3 -        image.reserved        0
//	   --- point section (kind 2; zero for images) ---
//	    96    4 uint32   points.count          points; 0 = empty cloud
//	   100    4 uint32   points.point_step     bytes per point
//	   104    2 uint16   points.offset_x       byte offset of x in a point
//	   106    2 uint16   points.offset_y       byte offset of y
//	   108    2 uint16   points.offset_z       byte offset of z
//	   110    2 uint16   points.offset_intensity byte offset of intensity
//	   112    1 uint8    points.datatype       sensor_msgs/PointField type of all four; 7 = FLOAT32, the only one accepted
//	   113    1 uint8    points.flags          bit 0: planar (a 2D LiDAR's scan, PointsPlanar); other bits 0
//	   114   14 -        points.reserved       0
//
// The field layout of a point is given by explicit offsets plus one
// datatype byte rather than a fixed layout code, so that common driver
// layouts (packed XYZI with step 16, Ouster's step 48 with intensity at 16)
// pass through without repacking.
//
// # Release record (ReleaseSize = 24 bytes, Version 1)
//
//	offset size type     field       notes
//	     0    4 [4]byte  magic       "ZHRL"
//	     4    2 uint16   version     1
//	     6    2 -        reserved    0
//	     8    4 uint32   pool_id     known pool
//	    12    4 uint32   slot        < pool slot count
//	    16    8 uint64   generation  checked by the camera's lease table
//
// # Checks
//
// Unmarshal checks what needs no geometry: record size (ErrRecordSize),
// magic (ErrBadMagic), version (ErrBadVersion), reserved bytes
// (ErrReserved) and the frame id (ErrFrameID). Validator.Validate then
// checks, in this order: known kind (ErrKind), known pool
// (ErrUnknownPool), kind equal to the pool's (ErrKind), slot < slot count
// (ErrIndexRange), length ≤ slot capacity (ErrLength), frame id, and per
// kind:
//
//   - image: known encoding (ErrEncoding); point section zero
//     (ErrReserved); width, height ≥ 1, row_step ≥ width × bytes per pixel
//     and row_step × height ≤ length (ErrGeometry).
//   - points: datatype FLOAT32 (ErrEncoding); image section zero
//     (ErrReserved); every offset + 4 ≤ point_step and
//     count × point_step ≤ length (ErrGeometry).
//
// So an accepted handle's payload, bytes [0, length) of the slot, lies
// inside the slot, and so does every pixel row and every point field.
// Products are computed in uint64 from uint32 operands and cannot
// overflow.
package handles
