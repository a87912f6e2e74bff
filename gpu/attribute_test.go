package gpu

import "testing"

// The enum values below are copied by hand from cuda.h (CUDA 12.x,
// enum CUdevice_attribute_enum and the CU_MEMHOST* #defines); the constants
// in attribute.go must agree, since a wrong value silently queries another
// attribute.
func TestDeviceAttributeValues(t *testing.T) {
	tests := []struct {
		name string
		got  DeviceAttribute
		want int32
	}{
		{"CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT", AttrMultiprocessorCount, 16},
		{"CU_DEVICE_ATTRIBUTE_INTEGRATED", AttrIntegrated, 18},
		{"CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY", AttrCanMapHostMemory, 19},
		{"CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING", AttrUnifiedAddressing, 41},
		{"CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR", AttrComputeCapabilityMajor, 75},
		{"CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR", AttrComputeCapabilityMinor, 76},
		{"CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM", AttrCanUseHostPointerForRegisteredMem, 91},
		{"CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED", AttrHostRegisterSupported, 99},
		{"CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES", AttrPageableMemoryAccessUsesHostPageTables, 100},
		{"CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED", AttrReadOnlyHostRegisterSupported, 113},
	}
	for _, tt := range tests {
		if int32(tt.got) != tt.want {
			t.Errorf("%s = %d, want %d", tt.name, tt.got, tt.want)
		}
	}
}

func TestMemHostFlagValues(t *testing.T) {
	tests := []struct {
		name      string
		got, want int
	}{
		{"CU_MEMHOSTALLOC_PORTABLE", memHostAllocPortable, 0x01},
		{"CU_MEMHOSTALLOC_DEVICEMAP", memHostAllocDeviceMap, 0x02},
		{"CU_MEMHOSTREGISTER_PORTABLE", memHostRegisterPortable, 0x01},
		{"CU_MEMHOSTREGISTER_DEVICEMAP", memHostRegisterDeviceMap, 0x02},
		{"CU_MEMHOSTREGISTER_READ_ONLY", memHostRegisterReadOnly, 0x08},
		{"CU_STREAM_NON_BLOCKING", streamNonBlocking, 0x1},
		{"CU_EVENT_DEFAULT", eventDefault, 0x0},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s = %#x, want %#x", tt.name, tt.got, tt.want)
		}
	}
}
