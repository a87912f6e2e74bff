package gpu

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"strings"
)

// The kernels also ship as PTX, so that a machine with a CUDA driver but
// no NVRTC (a container with only the driver mounted, a bare host without
// the toolkit) still runs the GPU path: the driver JIT-compiles PTX at
// module load (cached by the driver in ~/.nv/ComputeCache). NVRTC, when
// found, is still preferred: it compiles for the device's own sm_XY.
//
// The PTX is for compute_70, the oldest architecture the kernels run on
// (warp match intrinsics), made by NVRTC 11.8 (PTX ISA 7.8), so that every
// driver from R520 on can JIT it. --fmad=false is kept in PTX as explicit
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

// embeddedPTXOptions are NVRTC's options for kernels/voxel.ptx.
func embeddedPTXOptions() []string {
	return voxelCompileArgs(fmt.Sprintf("compute_%d", embeddedPTXArch))
}

// embeddedPTXHeader is the comment block kernels/voxel.ptx starts with.
func embeddedPTXHeader(source string) string {
	sum := sha256.Sum256([]byte(source))
	return fmt.Sprintf("// zerohop: generated from kernels/voxel.cu by NVRTC %s with %s; do not edit.\n"+
		"// zerohop: regenerate with ZEROHOP_UPDATE_TESTDATA=1 make test-cuda-libs\n"+
		"// zerohop: voxel.cu sha256 %s\n",
		embeddedPTXNVRTC, strings.Join(embeddedPTXOptions(), " "), hex.EncodeToString(sum[:]))
}

// embeddedPTXFile is kernels/voxel.ptx's content for NVRTC's PTX of
// source (its trailing NUL dropped: a text file; LoadModule adds it back).
func embeddedPTXFile(source string, ptx []byte) []byte {
	ptx = bytes.TrimRight(ptx, "\x00")
	return append([]byte(embeddedPTXHeader(source)), ptx...)
}
