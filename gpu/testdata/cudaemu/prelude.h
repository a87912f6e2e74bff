// Host emulation of the CUDA subset that gpu/kernels/voxel.cu uses, so that
// the kernels' logic can be run and compared with the CPU filter on a
// machine without a GPU (voxel_emu_test.go, -tags cudaemu). It proves
// nothing about NVRTC, the driver or the device: one block at a time, one
// std::thread per CUDA thread, __syncthreads and warp collectives as block
// barriers, IEEE float/double without contraction (-ffp-contract=off).
#include <barrier>
#include <cmath>
#include <cstring>
#include <thread>
#include <vector>
#include <algorithm>
#include <cstdint>
struct dim3_ { unsigned x, y, z; };
inline thread_local dim3_ threadIdx, blockIdx;
inline dim3_ blockDim, gridDim;
inline std::barrier<>* g_bar;
#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static
struct float4 { float x, y, z, w; };
inline float4 make_float4(float a, float b, float c, float d) { return {a, b, c, d}; }
inline void __syncthreads() { g_bar->arrive_and_wait(); }
inline unsigned __float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
inline float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }
inline double __longlong_as_double(long long v) { double d; memcpy(&d, &v, 8); return d; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __dsub_rn(double a, double b) { return a - b; }
inline double __ddiv_rn(double a, double b) { return a / b; }
inline float __double2float_rn(double d) { return (float)d; }
inline int __popc(unsigned v) { return __builtin_popcount(v); }
using std::min; using std::max; using std::floor;
inline float floorf(float f) { return std::floor(f); }
inline unsigned atomicAdd(unsigned* p, unsigned v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
inline unsigned atomicMin(unsigned* p, unsigned v) { unsigned o = __atomic_load_n(p, __ATOMIC_SEQ_CST); while (v < o && !__atomic_compare_exchange_n(p, &o, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {} return o; }
inline unsigned atomicMax(unsigned* p, unsigned v) { unsigned o = __atomic_load_n(p, __ATOMIC_SEQ_CST); while (v > o && !__atomic_compare_exchange_n(p, &o, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {} return o; }
inline unsigned g_match[1024];
// Called uniformly by the whole block, so block barriers stand in for the warp's.
inline unsigned __match_any_sync(unsigned, unsigned v) {
	unsigned t = threadIdx.x, w = t / 32;
	g_match[t] = v;
	__syncthreads();
	unsigned m = 0;
	for (unsigned l = 0; l < 32; l++) if (g_match[w * 32 + l] == v) m |= 1u << l;
	__syncthreads();
	return m;
}
// launch runs the grid's blocks one after another on block threads; the
// barrier after each block keeps __shared__ (static) data to one block.
template <class F> void launch(unsigned grid, unsigned block, F f) {
	if (grid == 0) return;
	gridDim = {grid, 1, 1}; blockDim = {block, 1, 1};
	std::barrier<> bar(block); g_bar = &bar;
	std::vector<std::thread> ts;
	for (unsigned t = 0; t < block; t++) ts.emplace_back([=, &bar] {
		threadIdx = {t, 0, 0};
		for (unsigned b = 0; b < grid; b++) { blockIdx = {b, 0, 0}; f(); bar.arrive_and_wait(); }
	});
	for (auto& th : ts) th.join();
}
