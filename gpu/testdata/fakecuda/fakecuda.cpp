// A FAKE of the CUDA driver API (libcuda.so.1), for zerohop's plumbing
// tests on machines without a GPU. It is NOT a GPU and passing tests on it
// verify nothing about CUDA, NVRTC or a device. What it does check is the
// Go side as it calls a real C library: symbol names, the C signatures of
// cuda.h (argument order and widths, through purego), that calls needing a
// context come from the thread where it was made current, that device
// pointers and host pointers are not confused, and that everything made is
// freed. Kernels run on the host emulation of ../cudaemu/prelude.h, with
// their parameters unpacked from kernelParams by their C signatures.
//
// Device addresses are host addresses + kDevOffset (non-canonical on
// x86-64/arm64), translated back only for ranges the fake knows: device
// allocations, and host memory allocated or registered with DEVICEMAP. A
// host address passed where a device one belongs fails with
// CUDA_ERROR_ILLEGAL_ADDRESS instead of silently working.
//
// Built by gpu/fakecuda_test.go: g++ -std=c++20 -shared -fPIC.
#include "../cudaemu/prelude.h"
#include "../../kernels/voxel.cu"
// The test kernel of gpu/device_gpu_test.go (axpbSource), copied: the fake
// runs only kernels it was built with.
extern "C" __global__ void axpb(const float* x, float* y, float a, float b, unsigned int n) {
	unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) y[i] = a * x[i] + b;
}

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;

enum : CUresult {
	CUDA_SUCCESS = 0,
	CUDA_ERROR_INVALID_VALUE = 1,
	CUDA_ERROR_OUT_OF_MEMORY = 2,
	CUDA_ERROR_NOT_INITIALIZED = 3,
	CUDA_ERROR_INVALID_DEVICE = 101,
	CUDA_ERROR_INVALID_IMAGE = 200,
	CUDA_ERROR_INVALID_CONTEXT = 201,
	CUDA_ERROR_INVALID_PTX = 218,
	CUDA_ERROR_INVALID_HANDLE = 400,
	CUDA_ERROR_NOT_FOUND = 500,
	CUDA_ERROR_ILLEGAL_ADDRESS = 700,
	CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES = 701,
	CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED = 712,
	CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED = 713,
	CUDA_ERROR_NOT_SUPPORTED = 801,
};

static const unsigned long long kDevOffset = 1ull << 52;

namespace {

struct HostRange {
	size_t len;
	unsigned flags;
	bool allocated; // cuMemHostAlloc (else cuMemHostRegister)
};

std::mutex mu;
bool inited = false;
int primaryRefs = 0;
unsigned primaryFlags = 0; // cuDevicePrimaryCtxSetFlags_v2
char primaryCtx; // the one context's handle is its address
thread_local void* current = nullptr;
std::map<uintptr_t, HostRange> hostRanges;  // by host address
std::map<uintptr_t, size_t> devAllocs;      // by host address of the backing
std::map<void*, int> streams, events, modules;
// The text of each module loaded from zerohop's embedded PTX (kernels/voxel.ptx).
std::map<void*, std::string> modulePTX;
std::map<void*, std::chrono::steady_clock::time_point> eventTimes;
unsigned long long launches = 0;
bool moveAfterBounds = false; // zhfake_move_after_bounds(_to)
float moveAfterBoundsTo = 1.0e4f; // the x it writes

// find returns the range of m containing [p, p+n), or m.end().
template <class M> typename M::iterator find(M& m, uintptr_t p, size_t n, size_t (*len)(const typename M::mapped_type&)) {
	auto it = m.upper_bound(p);
	if (it == m.begin()) return m.end();
	--it;
	if (p >= it->first && p + n <= it->first + len(it->second)) return it;
	return m.end();
}
size_t hostLen(const HostRange& r) { return r.len; }
size_t devLen(const size_t& n) { return n; }

// toHost translates a device address of n bytes; nullptr if it is not one.
void* toHost(CUdeviceptr d, size_t n) {
	if (d < kDevOffset) return nullptr;
	uintptr_t p = d - kDevOffset;
	if (find(devAllocs, p, n, devLen) != devAllocs.end()) return (void*)p;
	auto h = find(hostRanges, p, n, hostLen);
	if (h != hostRanges.end() && (h->second.flags & 0x02)) return (void*)p; // DEVICEMAP
	return nullptr;
}

// Host memory given to async copies must be pinned (allocated or registered).
bool pinnedHost(const void* p, size_t n) { return find(hostRanges, (uintptr_t)p, n, hostLen) != hostRanges.end(); }

CUresult needContext() {
	if (!inited) return CUDA_ERROR_NOT_INITIALIZED;
	if (current != &primaryCtx || primaryRefs == 0) return CUDA_ERROR_INVALID_CONTEXT; // wrong thread, or none
	return CUDA_SUCCESS;
}

// Kernel parameters: kernelParams[i] points at the value of parameter i.
// Pointer parameters are device addresses, translated to host ones (any
// size: the fake cannot know how far a kernel reads, so it checks only that
// the address lies in a known range); null stays null.
template <class T> bool param(void* slot, T& out) {
	if constexpr (std::is_pointer_v<T>) {
		CUdeviceptr d;
		memcpy(&d, slot, sizeof d);
		if (d == 0) { out = nullptr; return true; }
		void* h = toHost(d, 1);
		if (!h) { fprintf(stderr, "fakecuda: kernel parameter %#llx is not a device address\n", d); return false; }
		out = (T)h;
		return true;
	} else {
		memcpy(&out, slot, sizeof(T));
		return true;
	}
}

struct Kernel {
	const char* name;
	CUresult (*launch)(unsigned grid, unsigned block, void** params);
};

template <class... A, size_t... I>
CUresult launchWith(void (*k)(A...), unsigned grid, unsigned block, void** p, std::index_sequence<I...>) {
	std::tuple<std::remove_cv_t<A>...> args;
	bool ok = (param(p[I], std::get<I>(args)) && ...);
	if (!ok) return CUDA_ERROR_ILLEGAL_ADDRESS;
	launch(grid, block, [=] { std::apply(k, args); });
	return CUDA_SUCCESS;
}

template <class... A> CUresult launchKernel(void (*k)(A...), unsigned grid, unsigned block, void** p) {
	return launchWith(k, grid, block, p, std::index_sequence_for<A...>{});
}

#define K(name) {#name, [](unsigned g, unsigned b, void** p) { return launchKernel(name, g, b, p); }}
const Kernel kernels[] = {
	K(zh_bounds), K(zh_keys), K(zh_radix_hist), K(zh_radix_scatter), K(zh_scan_tiles), K(zh_scan_sums),
	K(zh_scan_add), K(zh_heads), K(zh_starts), K(zh_reduce), K(zh_compact), K(zh_bev_clear),
	K(zh_bev_cells), K(zh_bev_fill), K(zh_bev_finish), K(axpb),
};
#undef K

const char kCubinMagic[] = "ZHFAKECUBIN1"; // what the fake NVRTC emits

const char* errName(CUresult r) {
	switch (r) {
	case CUDA_SUCCESS: return "CUDA_SUCCESS";
	case CUDA_ERROR_INVALID_VALUE: return "CUDA_ERROR_INVALID_VALUE";
	case CUDA_ERROR_OUT_OF_MEMORY: return "CUDA_ERROR_OUT_OF_MEMORY";
	case CUDA_ERROR_NOT_INITIALIZED: return "CUDA_ERROR_NOT_INITIALIZED";
	case CUDA_ERROR_INVALID_DEVICE: return "CUDA_ERROR_INVALID_DEVICE";
	case CUDA_ERROR_INVALID_IMAGE: return "CUDA_ERROR_INVALID_IMAGE";
	case CUDA_ERROR_INVALID_CONTEXT: return "CUDA_ERROR_INVALID_CONTEXT";
	case CUDA_ERROR_INVALID_PTX: return "CUDA_ERROR_INVALID_PTX";
	case CUDA_ERROR_INVALID_HANDLE: return "CUDA_ERROR_INVALID_HANDLE";
	case CUDA_ERROR_NOT_FOUND: return "CUDA_ERROR_NOT_FOUND";
	case CUDA_ERROR_ILLEGAL_ADDRESS: return "CUDA_ERROR_ILLEGAL_ADDRESS";
	case CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES: return "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES";
	case CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED: return "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED";
	case CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED: return "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED";
	case CUDA_ERROR_NOT_SUPPORTED: return "CUDA_ERROR_NOT_SUPPORTED";
	}
	return nullptr;
}

} // namespace

#define GUARD std::lock_guard<std::mutex> lock(mu)
#define NEED_CONTEXT                            \
	if (CUresult r = needContext(); r != 0) return r

// Work on the legacy default stream that a real GPU may not have done yet.
// cuMemsetD8 on device memory returns before the memset runs ("The
// synchronous memset functions are asynchronous with respect to the host
// except when the target is pinned host memory"), and a CU_STREAM_NON_BLOCKING
// stream does not wait for the legacy stream. The fake takes the worst
// order a GPU may pick: pending memsets land at a synchronisation of the
// legacy stream, before work on it or on a blocking stream, and AFTER work
// on a non-blocking stream, wiping what that work wrote.
struct PendingMemset {
	void* host;
	unsigned char value;
	size_t n;
};
static std::vector<PendingMemset> legacyPending;

static void runLegacyPending() {
	for (const PendingMemset& m : legacyPending) memset(m.host, m.value, m.n);
	legacyPending.clear();
}

// streams[s] is the stream's creation flags + 1.
static bool nonBlocking(void* s) {
	auto it = s ? streams.find(s) : streams.end();
	return it != streams.end() && ((it->second - 1) & 1u);
}

static bool knownStream(void* s) { return s == nullptr || streams.count(s); }

// onStream runs work as stream s would order it against the legacy stream.
template <typename F>
static CUresult onStream(void* s, F work) {
	if (!nonBlocking(s)) runLegacyPending();
	CUresult r = work();
	if (nonBlocking(s)) runLegacyPending();
	return r;
}

extern "C" {

CUresult cuGetErrorName(CUresult r, const char** s) {
	const char* n = errName(r);
	if (!n) return CUDA_ERROR_INVALID_VALUE;
	*s = n;
	return CUDA_SUCCESS;
}

CUresult cuGetErrorString(CUresult r, const char** s) {
	const char* n = errName(r);
	if (!n) return CUDA_ERROR_INVALID_VALUE;
	*s = "fake CUDA driver (host emulation, not a GPU)";
	return CUDA_SUCCESS;
}

CUresult cuInit(unsigned flags) {
	GUARD;
	if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
	inited = true;
	return CUDA_SUCCESS;
}

CUresult cuDriverGetVersion(int* v) {
	*v = 12090;
	return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int* n) {
	if (!inited) return CUDA_ERROR_NOT_INITIALIZED;
	*n = 1;
	return CUDA_SUCCESS;
}

CUresult cuDeviceGet(int* dev, int ordinal) {
	if (!inited) return CUDA_ERROR_NOT_INITIALIZED;
	if (ordinal != 0) return CUDA_ERROR_INVALID_DEVICE;
	*dev = 0;
	return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char* name, int len, int dev) {
	if (!inited) return CUDA_ERROR_NOT_INITIALIZED;
	if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
	if (len <= 0) return CUDA_ERROR_INVALID_VALUE;
	snprintf(name, len, "zerohop fake CUDA device (host emulation)");
	return CUDA_SUCCESS;
}

CUresult cuDeviceGetAttribute(int* v, int attr, int dev) {
	if (!inited) return CUDA_ERROR_NOT_INITIALIZED;
	if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
	switch (attr) {
	case 16: *v = 4; break;   // multiprocessors
	case 18: *v = 0; break;   // integrated
	case 19: *v = 1; break;   // can map host memory
	case 41: *v = 1; break;   // unified addressing
	case 75: *v = 9; break;   // compute capability major
	case 76: *v = 0; break;   // minor
	case 91: *v = 0; break;   // host pointer for registered memory: no (device addresses differ)
	case 99: *v = 1; break;   // host register supported
	case 113: *v = 1; break;  // read-only host register supported
	default: return CUDA_ERROR_INVALID_VALUE;
	}
	return CUDA_SUCCESS;
}

// The flags a later retain activates the context with; the driver takes
// one scheduling mode (CU_CTX_SCHED_*: 0, 1, 2 or 4) in the low 3 bits.
CUresult cuDevicePrimaryCtxSetFlags_v2(int dev, unsigned int flags) {
	GUARD;
	if (!inited) return CUDA_ERROR_NOT_INITIALIZED;
	if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
	unsigned sched = flags & 7;
	if (sched == 3 || sched > 4 || (flags & ~0xffu)) return CUDA_ERROR_INVALID_VALUE;
	primaryFlags = flags;
	return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRetain(void** ctx, int dev) {
	GUARD;
	if (!inited) return CUDA_ERROR_NOT_INITIALIZED;
	if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
	primaryRefs++;
	*ctx = &primaryCtx;
	return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease_v2(int dev) {
	GUARD;
	if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
	if (primaryRefs == 0) return CUDA_ERROR_INVALID_CONTEXT;
	primaryRefs--;
	return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(void* ctx) {
	if (ctx != nullptr && ctx != &primaryCtx) return CUDA_ERROR_INVALID_CONTEXT;
	current = ctx;
	return CUDA_SUCCESS;
}

CUresult cuMemHostAlloc(void** pp, size_t size, unsigned flags) {
	GUARD;
	NEED_CONTEXT;
	if (size == 0 || (flags & ~0x07u)) return CUDA_ERROR_INVALID_VALUE;
	void* p = aligned_alloc(4096, (size + 4095) / 4096 * 4096);
	if (!p) return CUDA_ERROR_OUT_OF_MEMORY;
	memset(p, 0xA5, size); // like real pinned memory, not zeroed: callers must not assume zeros
	hostRanges[(uintptr_t)p] = {size, flags, true};
	*pp = p;
	return CUDA_SUCCESS;
}

CUresult cuMemFreeHost(void* p) {
	GUARD;
	NEED_CONTEXT;
	auto it = hostRanges.find((uintptr_t)p);
	if (it == hostRanges.end() || !it->second.allocated) return CUDA_ERROR_INVALID_VALUE;
	hostRanges.erase(it);
	free(p);
	return CUDA_SUCCESS;
}

CUresult cuMemHostRegister_v2(void* p, size_t size, unsigned flags) {
	GUARD;
	NEED_CONTEXT;
	if (!p || size == 0 || (flags & ~0x0Fu)) return CUDA_ERROR_INVALID_VALUE;
	// Tests set this to play a platform without host registration.
	if (getenv("ZEROHOP_FAKECUDA_FAIL_REGISTER")) return CUDA_ERROR_NOT_SUPPORTED;
	uintptr_t a = (uintptr_t)p;
	auto next = hostRanges.lower_bound(a);
	if (next != hostRanges.end() && next->first < a + size) return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
	if (next != hostRanges.begin() && std::prev(next)->first + std::prev(next)->second.len > a)
		return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
	hostRanges[a] = {size, flags, false};
	return CUDA_SUCCESS;
}

CUresult cuMemHostUnregister(void* p) {
	GUARD;
	NEED_CONTEXT;
	auto it = hostRanges.find((uintptr_t)p);
	if (it == hostRanges.end() || it->second.allocated) return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
	hostRanges.erase(it);
	return CUDA_SUCCESS;
}

CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr* d, void* p, unsigned flags) {
	GUARD;
	NEED_CONTEXT;
	if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
	auto it = find(hostRanges, (uintptr_t)p, 1, hostLen);
	if (it == hostRanges.end() || !(it->second.flags & 0x02)) return CUDA_ERROR_INVALID_VALUE;
	*d = (CUdeviceptr)(uintptr_t)p + kDevOffset;
	return CUDA_SUCCESS;
}

CUresult cuMemAlloc_v2(CUdeviceptr* d, size_t size) {
	GUARD;
	NEED_CONTEXT;
	if (size == 0) return CUDA_ERROR_INVALID_VALUE;
	void* p = aligned_alloc(256, (size + 255) / 256 * 256);
	if (!p) return CUDA_ERROR_OUT_OF_MEMORY;
	memset(p, 0x5A, size); // device memory is not zeroed either
	devAllocs[(uintptr_t)p] = size;
	*d = (CUdeviceptr)(uintptr_t)p + kDevOffset;
	return CUDA_SUCCESS;
}

CUresult cuMemFree_v2(CUdeviceptr d) {
	GUARD;
	NEED_CONTEXT;
	runLegacyPending(); // cuMemFree waits for work in flight on the memory
	auto it = d >= kDevOffset ? devAllocs.find((uintptr_t)(d - kDevOffset)) : devAllocs.end();
	if (it == devAllocs.end()) return CUDA_ERROR_INVALID_VALUE;
	free((void*)it->first);
	devAllocs.erase(it);
	return CUDA_SUCCESS;
}

CUresult cuMemsetD8_v2(CUdeviceptr d, unsigned char v, size_t n) {
	GUARD;
	NEED_CONTEXT;
	void* h = toHost(d, n);
	if (!h) return CUDA_ERROR_INVALID_VALUE;
	if (pinnedHost(h, n)) {
		memset(h, v, n); // pinned host memory: synchronous
	} else {
		legacyPending.push_back({h, v, n});
	}
	return CUDA_SUCCESS;
}


CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void* src, size_t n, void* stream) {
	GUARD;
	NEED_CONTEXT;
	void* h = toHost(dst, n);
	if (!h || !knownStream(stream) || !pinnedHost(src, n)) return CUDA_ERROR_INVALID_VALUE;
	return onStream(stream, [&] {
		memcpy(h, src, n);
		return CUDA_SUCCESS;
	});
}

CUresult cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, size_t n, void* stream) {
	GUARD;
	NEED_CONTEXT;
	void* h = toHost(src, n);
	if (!h || !knownStream(stream) || !pinnedHost(dst, n)) return CUDA_ERROR_INVALID_VALUE;
	return onStream(stream, [&] {
		memcpy(dst, h, n);
		return CUDA_SUCCESS;
	});
}

// The synchronous copies take any host memory (pageable included).
CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, size_t n) {
	GUARD;
	NEED_CONTEXT;
	void* h = toHost(dst, n);
	if (!h || (n && !src)) return CUDA_ERROR_INVALID_VALUE;
	runLegacyPending(); // synchronous copies run on the legacy stream
	memcpy(h, src, n);
	return CUDA_SUCCESS;
}

CUresult cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, size_t n) {
	GUARD;
	NEED_CONTEXT;
	void* h = toHost(src, n);
	if (!h || (n && !dst)) return CUDA_ERROR_INVALID_VALUE;
	runLegacyPending();
	memcpy(dst, h, n);
	return CUDA_SUCCESS;
}

CUresult cuStreamCreate(void** s, unsigned flags) {
	GUARD;
	NEED_CONTEXT;
	if (flags & ~1u) return CUDA_ERROR_INVALID_VALUE;
	void* h = new char;
	streams[h] = int(flags) + 1;
	*s = h;
	return CUDA_SUCCESS;
}

CUresult cuStreamDestroy_v2(void* s) {
	GUARD;
	NEED_CONTEXT;
	if (!streams.erase(s)) return CUDA_ERROR_INVALID_HANDLE;
	delete (char*)s;
	return CUDA_SUCCESS;
}

CUresult cuStreamSynchronize(void* s) {
	GUARD;
	NEED_CONTEXT;
	if (!knownStream(s)) return CUDA_ERROR_INVALID_HANDLE;
	if (!nonBlocking(s)) runLegacyPending(); // other work is done at launch
	return CUDA_SUCCESS;
}

CUresult cuEventCreate(void** e, unsigned flags) {
	GUARD;
	NEED_CONTEXT;
	if (flags & ~0x0Fu) return CUDA_ERROR_INVALID_VALUE;
	void* h = new char;
	events[h] = 1;
	*e = h;
	return CUDA_SUCCESS;
}

CUresult cuEventRecord(void* e, void* s) {
	GUARD;
	NEED_CONTEXT;
	if (!events.count(e) || !knownStream(s)) return CUDA_ERROR_INVALID_HANDLE;
	eventTimes[e] = std::chrono::steady_clock::now();
	return CUDA_SUCCESS;
}

CUresult cuEventSynchronize(void* e) {
	GUARD;
	NEED_CONTEXT;
	return events.count(e) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult cuEventElapsedTime(float* ms, void* start, void* end) {
	GUARD;
	NEED_CONTEXT;
	if (!eventTimes.count(start) || !eventTimes.count(end)) return CUDA_ERROR_INVALID_HANDLE;
	*ms = std::chrono::duration<float, std::milli>(eventTimes[end] - eventTimes[start]).count();
	return CUDA_SUCCESS;
}

CUresult cuEventDestroy_v2(void* e) {
	GUARD;
	NEED_CONTEXT;
	if (!events.erase(e)) return CUDA_ERROR_INVALID_HANDLE;
	eventTimes.erase(e);
	delete (char*)e;
	return CUDA_SUCCESS;
}

// As the driver: the JIT's error log goes into the CU_JIT_ERROR_LOG_BUFFER
// (5) of n options, at most CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES (6) bytes
// with its NUL, and that option's value becomes the bytes written.
static void jitErrorLog(unsigned n, const int* options, void** values, const char* msg) {
	char* buf = nullptr;
	size_t* size = nullptr;
	for (unsigned i = 0; i < n; i++) {
		if (options[i] == 5) buf = (char*)values[i];
		if (options[i] == 6) size = (size_t*)&values[i];
	}
	if (!buf || !size || *size == 0) return;
	size_t k = std::min(strlen(msg), *size - 1);
	memcpy(buf, msg, k);
	buf[k] = 0;
	*size = k + 1;
}

CUresult cuModuleLoadDataEx(void** m, const void* image, unsigned nOptions, int* options, void** values) {
	GUARD;
	NEED_CONTEXT;
	// The fake NVRTC's cubins, or its PTX (which a driver would JIT-compile),
	// or real NVRTC PTX shipped with zerohop (kernels/voxel.ptx, the tests'
	// axpb), which this fake does not compile: it checks the header and,
	// in cuModuleGetFunction, which entries the text has.
	static const char kPTXMagic[] = "// ZHFAKEPTX1 compute_";
	static const char kNVVM[] = "// Generated by NVIDIA NVVM Compiler";
	if (image && std::string_view((const char*)image, strnlen((const char*)image, 1024)).find(kNVVM) != std::string_view::npos) {
		std::string text((const char*)image); // the driver reads PTX up to its NUL
		if (text.find("\n.version ") == std::string::npos || text.find("\n.target sm_") == std::string::npos) {
			jitErrorLog(nOptions, options, values, "fake JIT: ptxas fatal: no .version or .target directive");
			return CUDA_ERROR_INVALID_PTX;
		}
		void* h = new char;
		modules[h] = 1;
		modulePTX[h] = text;
		*m = h;
		return CUDA_SUCCESS;
	}
	if (!image || (memcmp(image, kCubinMagic, sizeof kCubinMagic - 1) != 0 &&
	               memcmp(image, kPTXMagic, sizeof kPTXMagic - 1) != 0))
		return CUDA_ERROR_INVALID_IMAGE;
	void* h = new char;
	modules[h] = 1;
	*m = h;
	return CUDA_SUCCESS;
}

CUresult cuModuleGetFunction(void** f, void* m, const char* name) {
	GUARD;
	NEED_CONTEXT;
	if (!modules.count(m)) return CUDA_ERROR_INVALID_HANDLE;
	auto ptx = modulePTX.find(m);
	if (ptx != modulePTX.end() && ptx->second.find(std::string(".entry ") + name + "(") == std::string::npos)
		return CUDA_ERROR_NOT_FOUND;
	for (const Kernel& k : kernels) {
		if (strcmp(k.name, name) == 0) {
			*f = (void*)&k;
			return CUDA_SUCCESS;
		}
	}
	return CUDA_ERROR_NOT_FOUND;
}

CUresult cuModuleUnload(void* m) {
	GUARD;
	NEED_CONTEXT;
	if (!modules.erase(m)) return CUDA_ERROR_INVALID_HANDLE;
	modulePTX.erase(m);
	delete (char*)m;
	return CUDA_SUCCESS;
}

CUresult cuLaunchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shared, void* stream, void** params, void** extra) {
	GUARD;
	NEED_CONTEXT;
	const Kernel* k = nullptr;
	for (const Kernel& c : kernels)
		if (&c == f) k = &c;
	if (!k || !knownStream(stream)) return CUDA_ERROR_INVALID_HANDLE;
	if (gx == 0 || gy != 1 || gz != 1 || by != 1 || bz != 1 || shared != 0 || extra != nullptr || !params)
		return CUDA_ERROR_INVALID_VALUE; // zerohop's launches are 1-D, static shared memory only
	if (bx == 0 || bx > 1024) return CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
	launches++;
	CUresult r = onStream(stream, [&] { return k->launch(gx, bx, params); });
	if (r == CUDA_SUCCESS && moveAfterBounds && strcmp(k->name, "zh_bounds") == 0) {
		// A writer racing the filter: the first point's x changes after
		// the bounds were measured (by default it jumps far outside them,
		// still finite, so still accepted).
		moveAfterBounds = false;
		unsigned char* pts;
		int ox;
		param(params[0], pts);
		param(params[3], ox);
		memcpy(pts + ox, &moveAfterBoundsTo, sizeof moveAfterBoundsTo);
	}
	return r;
}

// Not CUDA: makes the next zh_bounds launch be followed by a change of the
// cloud it read (see cuLaunchKernel), for the tests of a slot written
// while the filter reads it.
void zhfake_move_after_bounds(void) {
	GUARD;
	moveAfterBounds = true;
	moveAfterBoundsTo = 1.0e4f;
}

// Not CUDA: zhfake_move_after_bounds, writing the float with these bits
// (NaN, or a value inside the bounds).
void zhfake_move_after_bounds_to(unsigned int bits) {
	GUARD;
	moveAfterBounds = true;
	memcpy(&moveAfterBoundsTo, &bits, sizeof bits);
}

// Not CUDA: for the tests' leak checks. kind 0: host allocations, 1: host
// registrations, 2: device allocations, 3: streams, 4: events, 5: modules,
// 6: primary context references, 7: kernel launches so far, 8: the
// primary context's flags (cuDevicePrimaryCtxSetFlags_v2).
unsigned long long zhfake_live(int kind) {
	GUARD;
	unsigned long long n = 0;
	switch (kind) {
	case 0: for (auto& [a, r] : hostRanges) n += r.allocated; return n;
	case 1: for (auto& [a, r] : hostRanges) n += !r.allocated; return n;
	case 2: return devAllocs.size();
	case 3: return streams.size();
	case 4: return events.size();
	case 5: return modules.size();
	case 6: return primaryRefs;
	case 7: return launches;
	case 8: return primaryFlags;
	}
	return ~0ull;
}

} // extern "C"
