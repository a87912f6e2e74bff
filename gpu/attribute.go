package gpu

// DeviceAttribute is a CUdevice_attribute value for cuDeviceGetAttribute.
//
// Values from the CUDA Driver API reference, enum CUdevice_attribute_enum
// (https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__TYPES.html,
// cuda.h of CUDA 12.x); they are ABI and never renumbered. Cross-checked
// against numba's cuda/cudadrv/enums.py and jcuda's CUdevice_attribute.java.
type DeviceAttribute int32

const (
	AttrMultiprocessorCount               DeviceAttribute = 16
	AttrIntegrated                        DeviceAttribute = 18 // shares memory with the host (Jetson)
	AttrCanMapHostMemory                  DeviceAttribute = 19
	AttrUnifiedAddressing                 DeviceAttribute = 41
	AttrComputeCapabilityMajor            DeviceAttribute = 75
	AttrComputeCapabilityMinor            DeviceAttribute = 76
	AttrCanUseHostPointerForRegisteredMem DeviceAttribute = 91
	AttrHostRegisterSupported             DeviceAttribute = 99
	// AttrPageableMemoryAccessUsesHostPageTables: the device reads host
	// memory through the host's page tables (HMM, Grace); cuda.h: without it,
	// read-only mappings register only with CU_MEMHOSTREGISTER_READ_ONLY.
	AttrPageableMemoryAccessUsesHostPageTables DeviceAttribute = 100
	AttrReadOnlyHostRegisterSupported          DeviceAttribute = 113
)

// Flags for cuMemHostAlloc (CU_MEMHOSTALLOC_*) and cuMemHostRegister
// (CU_MEMHOSTREGISTER_*), from cuda.h.
const (
	memHostAllocPortable  = 0x01
	memHostAllocDeviceMap = 0x02

	memHostRegisterPortable  = 0x01
	memHostRegisterDeviceMap = 0x02
	memHostRegisterReadOnly  = 0x08
)

// Stream and event creation flags, from cuda.h.
const (
	streamNonBlocking = 0x1 // CU_STREAM_NON_BLOCKING: no implicit sync with stream 0
	eventDefault      = 0x0 // CU_EVENT_DEFAULT: timing enabled
)
