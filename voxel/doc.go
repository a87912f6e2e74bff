// Package voxel is zerohop's first perception stage on the CPU: a voxel-grid
// filter with the semantics of PCL's pcl::VoxelGrid<PointXYZI>, and a
// bird's-eye-view (BEV) raster that turns the filtered points into a model
// input tensor.
//
// # Frames and units
//
// Points are in the robot (sensor) frame of REP-103: x forward, y left, z up,
// in metres. Intensity is carried through unchanged (KITTI: 0..1).
//
// # Filter semantics (as pcl::VoxelGrid)
//
// Per axis the voxel index is floor(coordinate * (1/leaf)), computed in
// float32 exactly as PCL does (1/leaf rounded to float32, the product rounded
// to float32), so the grid is anchored at the origin, and a point whose
// scaled coordinate is exactly an integer k lies in voxel k (floor, not
// truncation: -0.1 m with a 0.2 m leaf is in voxel -1). Each occupied voxel with at least
// MinPoints points yields one point: the mean of its points' x, y, z and
// intensity. Points with a non-finite x, y, z or intensity are skipped; an
// optional axis-aligned crop box, inclusive on both faces like pcl::CropBox,
// is applied first.
//
// Output order is deterministic: voxels ascending by (iz, iy, ix), which is
// the order of PCL's linear index ix + iy·nx + iz·nx·ny. Means are summed in
// float64 in input order and rounded once to float32; PCL sums in float32 in
// an unspecified order, so centroids agree with PCL's to float32 rounding.
//
// Where PCL silently returns its input unfiltered because its 32-bit voxel
// index would overflow, this filter uses 64-bit keys and, when even those
// cannot hold the grid spanned by the cloud, returns an error wrapping
// ErrGridTooLarge that names the leaf size and the extent. It never passes
// data through unfiltered.
//
// # Algorithm
//
// Run computes a 64-bit key per accepted point, sorts the keys with a stable
// LSD radix sort (13-bit digits: two passes for a LiDAR scan at 0.2 m) and
// averages each run of equal keys. Keys are relative to a box of voxels
// guessed from the crop box, or else from the previous cloud's voxels with a
// margin, so a cloud is read twice: once for the keys, once, in voxel order,
// for the means. A cloud that the guess does not cover (the first, or one
// that grew) costs a third read, for its exact bounds. An open-addressing
// table of voxels was measured as the alternative (hash_bench_test.go): it
// is no faster on one core, and splitting it across cores would need
// per-worker tables whose merge reorders the float sums.
//
// # Memory and concurrency
//
// The input is a Cloud: a view of the slot's bytes (point count, point step
// and field offsets), read in place. NewFilter preallocates everything,
// about 24 bytes per point of maxPoints plus 32 KiB per chunk; Run does not
// allocate. Large clouds are split into chunks that the calling goroutine
// and the Filter's helper goroutines claim dynamically, so a helper that
// wakes late, or a core busy with other work, only costs speed. A Filter is
// used by one goroutine at a time; Close stops its helpers.
package voxel
