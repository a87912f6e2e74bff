package gpu

import _ "embed"

// The kernels also ship as PTX, so that a machine with a CUDA driver but
// no NVRTC (a container with only the driver mounted, a bare host without
// the toolkit) still runs the GPU path: the driver JIT-compiles PTX at
// module load (cached by the driver in ~/.nv/ComputeCache). NVRTC, when
// found, is still preferred: it compiles for the device's own sm_XY.
//
// The PTX is for compute_70, the oldest architecture the kernels run on
// (warp match intrinsics), made by NVRTC 11.8 (PTX ISA 7.8), so that every
// driver for CUDA 11.8 on can JIT it (R520 on; JetPack 6, not JetPack 5's
// CUDA 11.4). --fmad=false is kept in PTX as explicit
// .rn multiplies and adds, which the JIT may not fuse: the same rounding
// as a cubin and the CPU filter. kernels/voxel.ptx starts with comment
// lines naming how it was made and the sha256 of the voxel.cu it came
// from; TestEmbeddedPTXIsFromTheSource fails when they drift apart, and
// TestRealNVRTCMakesTheEmbeddedPTX (make test-cuda-libs) when NVRTC 11.8
// would not produce the same bytes. Regenerate with
// ZEROHOP_UPDATE_TESTDATA=1 make test-cuda-libs.

//go:embed kernels/voxel.ptx
var voxelPTX []byte

const (
	embeddedPTXArch  = 70     // compute_70
	embeddedPTXNVRTC = "11.8" // the NVRTC that makes kernels/voxel.ptx
)

// EmbeddedTarget is what NewVoxelFilter runs without NVRTC (nil *NVRTC):
// the embedded PTX for this virtual architecture.
const EmbeddedTarget = "compute_70"
