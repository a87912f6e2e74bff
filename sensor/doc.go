// Package sensor holds the camera node's data sources. A Source writes the
// LiDAR cloud and the camera image of frame seq straight into memory the
// caller provides (a slot of the pinned pool), with no frame buffer of its own
// in between.
//
// Two sources exist:
//
//   - Synthetic renders a deterministic corridor scene by ray casting: a
//     64-beam spinning LiDAR and a forward pinhole camera. It is the default
//     source and the ground truth for tests (Synthetic.Truth).
//   - Replay plays KITTI .bin and PCD point clouds and PNG/JPEG images from a
//     directory, and reads the recording's timing from its timestamps file
//     (KITTI raw's timestamps.txt, KITTI odometry's times.txt) once, at
//     construction. A Schedule made from it (NewSchedule) says when each
//     frame is due; the camera paces a replay by it.
//
// Point layout (the ROS sensor_msgs/PointCloud2 convention most drivers use):
// PointStep bytes per point, little-endian float32 x, y, z, intensity at byte
// offsets 0, 4, 8, 12, in the robot frame of REP-103 (x forward, y left, z
// up, metres). Images are tightly packed rows (Step = Width × BytesPerPixel).
package sensor
