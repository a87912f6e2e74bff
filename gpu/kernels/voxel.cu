// zerohop voxel-grid filter and BEV raster on the GPU.
//
// Same results, bit for bit, as the CPU filter in voxel/ (filter.go,
// kernels.go, bev.go): voxel index per axis = floor(float32(coord * inv))
// with inv = float32(1/leaf), 64-bit keys ix + dim0*(iy + dim1*iz) on a grid
// anchored at the accepted points' bounds, so keys order voxels (z, y, x);
// a STABLE sort by key keeps each voxel's points in input order, and one
// thread per voxel sums them in float64 in that order and rounds once.
//
// Pipeline (gpu/voxelgpu.go launches it; all on one stream):
//   zh_bounds                     accepted count and float32 bounds (one host sync follows:
//                                 the host computes the grid and the number of radix passes)
//   zh_keys                       key per point, INVALID_KEY for rejected points
//   per pass: zh_radix_hist, scan, zh_radix_scatter
//                                 LSD radix sort, 8-bit digits, stable; pass 0 compacts
//   zh_heads, scan, zh_starts     segment (voxel) starts in the sorted keys
//   zh_reduce, scan, zh_compact   means in float64 (from zh_keys' device copy of the points) and
//                                 tops (highest robot-frame z), min-points filter, output in key order
//   zh_bev_clear, zh_bev_cells, scan, zh_bev_fill, zh_bev_finish
//                                 [3,H,W] float32 raster, mean intensity summed in output order
//
// Sort choice: LSD radix (not bitonic) because it is stable by construction
// (bitonic is not) and has no power-of-two limit. Ranking inside a block uses
// __match_any_sync, so the kernels need sm_70 or newer.
//
// Built with --fmad=false besides the explicit __fmul_rn: no product may be
// fused into anything wider, as in the Go code.

typedef unsigned int u32;
typedef unsigned long long u64;
typedef long long i64;

#define INVALID_KEY 0xFFFFFFFFFFFFFFFFull
#define NO_DIGIT 0xFFFFFFFFu
#define RADIX 256
#define SORT_THREADS 256
#define SORT_ITEMS 8
#define SORT_TILE (SORT_THREADS * SORT_ITEMS)
#define SCAN_THREADS 256
#define SCAN_ITEMS 4
#define SCAN_TILE (SCAN_THREADS * SCAN_ITEMS)

// Words of the state block (device memory; the host copies it into pinned
// memory and reads it after a stream sync). Keep in step with st* in
// voxelgpu.go.
#define ST_MIN 0       // 3 words: ordered bits of the min x, y, z
#define ST_MAX 3       // 3 words: ordered bits of the max x, y, z
#define ST_ACCEPTED 6  // accepted points
#define ST_SEGMENTS 7  // voxels before the min-points filter
#define ST_VOXELS 8    // output voxels
#define ST_MISS 9      // nonzero: a point fell outside the grid (data changed)
#define ST_BEVTOTAL 10 // scan total of the BEV cell counts (unused by the host)

__device__ __forceinline__ bool finite32(float v) {
	return (__float_as_uint(v) & 0x7fffffffu) < 0x7f800000u;
}

// Field loads: the cloud layout comes from the caller; offsets need not be
// 4-byte aligned.
__device__ __forceinline__ float load_f32(const unsigned char* p) {
	if (((u64)p & 3) == 0) {
		return *(const float*)p;
	}
	u32 b = (u32)p[0] | ((u32)p[1] << 8) | ((u32)p[2] << 16) | ((u32)p[3] << 24);
	return __uint_as_float(b);
}

__device__ __forceinline__ void load_point(const unsigned char* pts, u32 i, u32 step,
		int ox, int oy, int oz, int oi, float* x, float* y, float* z, float* in) {
	const unsigned char* p = pts + (u64)i * step;
	*x = load_f32(p + ox);
	*y = load_f32(p + oy);
	*z = load_f32(p + oz);
	*in = oi < 0 ? 0.0f : load_f32(p + oi);
}

// mount_row is one row of voxel.Transform.Apply: ((r0·x + r1·y) + r2·z) + t,
// each product and sum rounded on its own, in that order.
__device__ __forceinline__ double mount_row(double r0, double r1, double r2, double t, double x, double y, double z) {
	return __dadd_rn(__dadd_rn(__dadd_rn(__dmul_rn(r0, x), __dmul_rn(r1, y)), __dmul_rn(r2, z)), t);
}

// accept mirrors Filter.accept: all four fields finite, inside the inclusive
// crop box when there is one, and the robot-frame z (the mount's z row
// u0..u2 and translation ut) not above ceiling (+Inf when there is none:
// a finite point's z always is).
__device__ __forceinline__ bool accept(float x, float y, float z, float in, u32 crop,
		float cx0, float cy0, float cz0, float cx1, float cy1, float cz1,
		double u0, double u1, double u2, double ut, double ceiling) {
	if (!(finite32(x) && finite32(y) && finite32(z) && finite32(in))) {
		return false;
	}
	if (crop && !(x >= cx0 && x <= cx1 && y >= cy0 && y <= cy1 && z >= cz0 && z <= cz1)) {
		return false;
	}
	return mount_row(u0, u1, u2, ut, (double)x, (double)y, (double)z) <= ceiling;
}

// Ordered bits: unsigned order of ordered(f) is the float order of f, with
// -0 < +0 as Go's min and max treat them.
__device__ __forceinline__ u32 ordered(float f) {
	u32 u = __float_as_uint(f);
	return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

extern "C" __global__ void zh_bounds(const unsigned char* pts, u32 n, u32 step,
		int ox, int oy, int oz, int oi, u32 crop,
		float cx0, float cy0, float cz0, float cx1, float cy1, float cz1,
		double u0, double u1, double u2, double ut, double ceiling, u32* state) {
	__shared__ u32 smin[3], smax[3], scount;
	if (threadIdx.x < 3) {
		smin[threadIdx.x] = 0xFFFFFFFFu;
		smax[threadIdx.x] = 0;
	}
	if (threadIdx.x == 0) {
		scount = 0;
	}
	__syncthreads();
	u32 lmin[3] = {0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu};
	u32 lmax[3] = {0, 0, 0};
	u32 count = 0;
	for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
		float x, y, z, in;
		load_point(pts, i, step, ox, oy, oz, oi, &x, &y, &z, &in);
		if (!accept(x, y, z, in, crop, cx0, cy0, cz0, cx1, cy1, cz1, u0, u1, u2, ut, ceiling)) {
			continue;
		}
		u32 o[3] = {ordered(x), ordered(y), ordered(z)};
		for (int a = 0; a < 3; a++) {
			lmin[a] = o[a] < lmin[a] ? o[a] : lmin[a];
			lmax[a] = o[a] > lmax[a] ? o[a] : lmax[a];
		}
		count++;
	}
	if (count > 0) {
		for (int a = 0; a < 3; a++) {
			atomicMin(&smin[a], lmin[a]);
			atomicMax(&smax[a], lmax[a]);
		}
		atomicAdd(&scount, count);
	}
	__syncthreads();
	if (threadIdx.x == 0 && scount > 0) {
		for (int a = 0; a < 3; a++) {
			atomicMin(&state[ST_MIN + a], smin[a]);
			atomicMax(&state[ST_MAX + a], smax[a]);
		}
		atomicAdd(&state[ST_ACCEPTED], scount);
	}
}

// zh_keys mirrors keysChunk on the exact grid: the explicit __fmul_rn rounds
// each product to float32 as PCL does. It also stores each accepted point
// in device memory (points[i], input index), so that zh_reduce's gather
// reads device memory rather than the mapped host slot: the slot is read
// twice, in order (bounds and keys), whatever the input mode.
extern "C" __global__ void zh_keys(const unsigned char* pts, u32 n, u32 step,
		int ox, int oy, int oz, int oi, u32 crop,
		float cx0, float cy0, float cz0, float cx1, float cy1, float cz1,
		double u0, double u1, double u2, double ut, double ceiling,
		float inv0, float inv1, float inv2, i64 min0, i64 min1, i64 min2,
		u64 dim0, u64 dim1, u64 dim2, u64* keys, float4* points, u32* state) {
	u32 i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= n) {
		return;
	}
	float x, y, z, in;
	load_point(pts, i, step, ox, oy, oz, oi, &x, &y, &z, &in);
	if (!accept(x, y, z, in, crop, cx0, cy0, cz0, cx1, cy1, cz1, u0, u1, u2, ut, ceiling)) {
		keys[i] = INVALID_KEY;
		return;
	}
	float px = __fmul_rn(x, inv0), py = __fmul_rn(y, inv1), pz = __fmul_rn(z, inv2);
	// |p| < 2^62 for accepted points: the host checked the bounds' indices.
	u64 ix = (u64)((i64)floorf(px) - min0);
	u64 iy = (u64)((i64)floorf(py) - min1);
	u64 iz = (u64)((i64)floorf(pz) - min2);
	if (ix >= dim0 || iy >= dim1 || iz >= dim2) {
		atomicAdd(&state[ST_MISS], 1u);
		keys[i] = INVALID_KEY;
		return;
	}
	keys[i] = ix + dim0 * (iy + dim1 * iz);
	points[i] = make_float4(x, y, z, in);
}

// zh_radix_hist counts the digit (key >> shift) & 255 of each tile's keys
// into hist[digit * gridDim.x + tile], digit-major, so that one exclusive
// scan of hist gives every (digit, tile) its first output position. With
// first set, INVALID_KEY elements are skipped (pass 0 compacts).
extern "C" __global__ void zh_radix_hist(const u64* keys, u32 n, u32 shift, u32 first, u32* hist) {
	__shared__ u32 h[RADIX];
	for (u32 d = threadIdx.x; d < RADIX; d += blockDim.x) {
		h[d] = 0;
	}
	__syncthreads();
	u32 base = blockIdx.x * SORT_TILE;
	for (u32 k = threadIdx.x; k < SORT_TILE; k += blockDim.x) {
		u32 i = base + k;
		if (i < n) {
			u64 e = keys[i];
			if (!(first && e == INVALID_KEY)) {
				atomicAdd(&h[(u32)(e >> shift) & (RADIX - 1)], 1u);
			}
		}
	}
	__syncthreads();
	for (u32 d = threadIdx.x; d < RADIX; d += blockDim.x) {
		hist[d * gridDim.x + blockIdx.x] = h[d];
	}
}

// zh_radix_scatter moves each tile's elements to their places for the
// digit, stably: a tile is walked in rounds of SORT_THREADS consecutive
// elements; within a round, an element's rank among equal digits is the
// count in earlier warps plus earlier lanes of its own warp
// (__match_any_sync). Launch with blockDim.x == SORT_THREADS.
extern "C" __global__ void zh_radix_scatter(const u64* keysIn, const u32* idxIn, u32 n, u32 shift,
		u32 first, const u32* offsets, u64* keysOut, u32* idxOut) {
	__shared__ u32 running[RADIX];
	__shared__ u32 warpCount[SORT_THREADS / 32][RADIX];
	u32 tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
	for (u32 d = tid; d < RADIX; d += SORT_THREADS) {
		running[d] = offsets[d * gridDim.x + blockIdx.x];
		for (u32 w = 0; w < SORT_THREADS / 32; w++) {
			warpCount[w][d] = 0;
		}
	}
	__syncthreads();
	u32 base = blockIdx.x * SORT_TILE;
	for (u32 r = 0; r < SORT_ITEMS; r++) {
		u32 i = base + r * SORT_THREADS + tid;
		u32 d = NO_DIGIT;
		u64 e = 0;
		u32 idx = 0;
		if (i < n) {
			e = keysIn[i];
			if (!(first && e == INVALID_KEY)) {
				d = (u32)(e >> shift) & (RADIX - 1);
				idx = first ? i : idxIn[i];
			}
		}
		u32 peers = __match_any_sync(0xFFFFFFFFu, d);
		u32 rank = __popc(peers & ((1u << lane) - 1u));
		if (d != NO_DIGIT && rank == 0) {
			warpCount[warp][d] = __popc(peers);
		}
		__syncthreads();
		if (d != NO_DIGIT) {
			u32 pos = running[d] + rank;
			for (u32 w = 0; w < warp; w++) {
				pos += warpCount[w][d];
			}
			keysOut[pos] = e;
			idxOut[pos] = idx;
		}
		__syncthreads();
		for (u32 dd = tid; dd < RADIX; dd += SORT_THREADS) {
			u32 s = 0;
			for (u32 w = 0; w < SORT_THREADS / 32; w++) {
				s += warpCount[w][dd];
				warpCount[w][dd] = 0;
			}
			running[dd] += s;
		}
		__syncthreads();
	}
}

// block_exclusive_scan returns the exclusive prefix of v over the block
// (blockDim.x == SCAN_THREADS) and sets *total to the block's sum.
__device__ u32 block_exclusive_scan(u32 v, u32* s, u32* total) {
	u32 tid = threadIdx.x;
	s[tid] = v;
	__syncthreads();
	for (u32 off = 1; off < SCAN_THREADS; off <<= 1) {
		u32 add = tid >= off ? s[tid - off] : 0;
		__syncthreads();
		s[tid] += add;
		__syncthreads();
	}
	u32 incl = s[tid];
	*total = s[SCAN_THREADS - 1];
	__syncthreads();
	return incl - v;
}

// Exclusive scan of n words, in three launches: zh_scan_tiles (SCAN_TILE
// words per block; in may equal out), zh_scan_sums (one block over the tile
// sums, writing the grand total to *total), zh_scan_add.
extern "C" __global__ void zh_scan_tiles(const u32* in, u32* out, u32 n, u32* tileSums) {
	__shared__ u32 s[SCAN_THREADS];
	u32 base = blockIdx.x * SCAN_TILE + threadIdx.x * SCAN_ITEMS;
	u32 v[SCAN_ITEMS];
	u32 sum = 0;
	for (u32 k = 0; k < SCAN_ITEMS; k++) {
		v[k] = base + k < n ? in[base + k] : 0;
		sum += v[k];
	}
	u32 total;
	u32 prefix = block_exclusive_scan(sum, s, &total);
	for (u32 k = 0; k < SCAN_ITEMS; k++) {
		if (base + k < n) {
			out[base + k] = prefix;
		}
		prefix += v[k];
	}
	if (threadIdx.x == 0) {
		tileSums[blockIdx.x] = total;
	}
}

extern "C" __global__ void zh_scan_sums(u32* tileSums, u32 nTiles, u32* total) {
	__shared__ u32 s[SCAN_THREADS];
	u32 carry = 0;
	for (u32 base = 0; base < nTiles; base += SCAN_THREADS) {
		u32 i = base + threadIdx.x;
		u32 v = i < nTiles ? tileSums[i] : 0;
		u32 chunk;
		u32 prefix = block_exclusive_scan(v, s, &chunk);
		if (i < nTiles) {
			tileSums[i] = carry + prefix;
		}
		carry += chunk;
	}
	if (threadIdx.x == 0) {
		*total = carry;
	}
}

extern "C" __global__ void zh_scan_add(u32* out, const u32* tileSums, u32 n) {
	u32 i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) {
		out[i] += tileSums[i / SCAN_TILE];
	}
}

// zh_heads flags the first element of each run of equal keys.
extern "C" __global__ void zh_heads(const u64* keys, u32 m, u32* flags) {
	u32 i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < m) {
		flags[i] = (i == 0 || keys[i] != keys[i - 1]) ? 1u : 0u;
	}
}

// zh_starts writes the start of segment s at starts[s]; segId is the
// exclusive scan of zh_heads' flags.
extern "C" __global__ void zh_starts(const u64* keys, const u32* segId, u32 m, u32* starts) {
	u32 i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < m && (i == 0 || keys[i] != keys[i - 1])) {
		starts[segId[i]] = i;
	}
}

// zh_reduce: one thread per voxel sums its points in input order in
// float64 and rounds the means once, as reduceChunk; the voxel's top is
// the largest of its points' robot-frame z (the mount's z row u0..u2 and
// translation ut, as Transform.Apply), rounded once, a zero as +0 (as
// voxel's topOf: which zero the max keeps does not matter). Voxels with fewer than minPoints points, and threads past
// the last voxel, get keep = 0.
extern "C" __global__ void zh_reduce(const float4* points, const u32* idx, const u32* starts, const u32* state, u32 m, u32 minPoints,
		double u0, double u1, double u2, double ut, float4* vox, float* top, u32* keep) {
	u32 s = blockIdx.x * blockDim.x + threadIdx.x;
	if (s >= m) {
		return;
	}
	u32 segments = state[ST_SEGMENTS];
	if (s >= segments) {
		keep[s] = 0;
		return;
	}
	u32 start = starts[s];
	u32 end = s + 1 < segments ? starts[s + 1] : m;
	if (end - start < minPoints) {
		keep[s] = 0;
		return;
	}
	double sx = 0, sy = 0, sz = 0, si = 0;
	double hi = -__longlong_as_double(0x7ff0000000000000ll); // -Inf
	for (u32 t = start; t < end; t++) {
		float4 p = points[idx[t]];
		sx = __dadd_rn(sx, (double)p.x);
		sy = __dadd_rn(sy, (double)p.y);
		sz = __dadd_rn(sz, (double)p.z);
		si = __dadd_rn(si, (double)p.w);
		double h = mount_row(u0, u1, u2, ut, (double)p.x, (double)p.y, (double)p.z);
		if (h > hi) {
			hi = h;
		}
	}
	double d = (double)(end - start);
	vox[s] = make_float4(__double2float_rn(__ddiv_rn(sx, d)), __double2float_rn(__ddiv_rn(sy, d)),
		__double2float_rn(__ddiv_rn(sz, d)), __double2float_rn(__ddiv_rn(si, d)));
	float t = __double2float_rn(hi);
	top[s] = t == 0.0f ? 0.0f : t;
	keep[s] = 1;
}

// zh_compact writes kept voxels and their tops, in key order, to the
// device copies (for the BEV) and to the host-mapped outputs.
extern "C" __global__ void zh_compact(const float4* vox, const float* top, const u32* keep, const u32* pos, u32 m,
		float4* outDev, float4* outHost, float* topDev, float* topHost) {
	u32 s = blockIdx.x * blockDim.x + threadIdx.x;
	if (s < m && keep[s]) {
		float4 v = vox[s];
		float t = top[s];
		u32 o = pos[s];
		outDev[o] = v;
		outHost[o] = v;
		topDev[o] = t;
		topHost[o] = t;
	}
}

extern "C" __global__ void zh_bev_clear(u32* count, u32* cursor, u32* heightBits, u32 cells) {
	u32 k = blockIdx.x * blockDim.x + threadIdx.x;
	if (k < cells) {
		count[k] = 0;
		cursor[k] = 0;
		heightBits[k] = 0;
	}
}

// zh_bev_cells mirrors BEV.Cell and the per-point part of BEV.Fill: the
// voxel moved into the robot frame when mounted (voxel.BEV.place: R row
// major, T; x and y kept in float64), the cell arithmetic in float64, the
// height from the voxel's top (already in the robot frame) in float32,
// clamped to [0, maxHeight] (non-negative, so its bits order as its
// values). The mount's z row is not used here: zh_reduce applied it.
extern "C" __global__ void zh_bev_cells(const float4* vox, const float* top, const u32* state, u32 m, u32 H, u32 W,
		float cell, float minX, float groundZ, float maxHeight,
		u32 mounted, double r0, double r1, double r2, double r3, double r4, double r5,
		double r6, double r7, double r8, double t0, double t1, double t2,
		int* cellOf, u32* count, u32* heightBits) {
	u32 i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= m || i >= state[ST_VOXELS]) {
		return;
	}
	float4 p = vox[i];
	cellOf[i] = -1;
	if (!finite32(p.z) || !finite32(p.w)) {
		return;
	}
	double x = (double)p.x, y = (double)p.y;
	float z = top[i];
	if (mounted) {
		double px = x, py = y, pz = (double)p.z;
		x = mount_row(r0, r1, r2, t0, px, py, pz);
		y = mount_row(r3, r4, r5, t1, px, py, pz);
	}
	double c = (double)cell;
	double u = __ddiv_rn(__dsub_rn(x, (double)minX), c);
	double v = __dsub_rn(__ddiv_rn((double)W, 2.0), __ddiv_rn(y, c));
	if (!(u >= 0 && u < (double)H && v >= 0 && v < (double)W)) {
		return;
	}
	u32 row = H - 1 - (u32)u, col = (u32)v;
	u32 k = row * W + col;
	cellOf[i] = (int)k;
	atomicAdd(&count[k], 1u);
	float h = __fsub_rn(z, groundZ);
	h = h > 0.0f ? h : 0.0f; // also turns -0 into +0, as Go's max(h, 0)
	h = h < maxHeight ? h : maxHeight;
	atomicMax(&heightBits[k], __float_as_uint(h));
}

// zh_bev_fill lists each cell's voxels (in any order; zh_bev_finish sorts).
extern "C" __global__ void zh_bev_fill(const int* cellOf, const u32* cellOff, const u32* state, u32 m,
		u32* cursor, u32* list) {
	u32 i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= m || i >= state[ST_VOXELS]) {
		return;
	}
	int k = cellOf[i];
	if (k >= 0) {
		u32 slot = atomicAdd(&cursor[k], 1u);
		list[cellOff[k] + slot] = i;
	}
}

// sift_down restores the max-heap below root in l[0..n).
__device__ __forceinline__ void sift_down(u32* l, u32 root, u32 n) {
	u32 v = l[root];
	for (;;) {
		u32 child = 2 * root + 1; // n < 2^31: at most one entry per voxel
		if (child >= n) {
			break;
		}
		if (child + 1 < n && l[child + 1] > l[child]) {
			child++;
		}
		if (l[child] <= v) {
			break;
		}
		l[root] = l[child];
		root = child;
	}
	l[root] = v;
}

// sort_voxel_list sorts one cell's distinct voxel indices ascending, on one
// thread: insertion sort for short lists (a column of voxels at the defaults,
// cell 0.2 m over leaf 0.2 m: 29 in the test scan), heap sort above, so that a cell many leaves
// wide (thousands of voxels) costs O(k log k) steps rather than O(k²).
#define SHORT_LIST 32
__device__ void sort_voxel_list(u32* l, u32 n) {
	if (n <= SHORT_LIST) {
		for (u32 a = 1; a < n; a++) {
			u32 v = l[a];
			u32 b = a;
			while (b > 0 && l[b - 1] > v) {
				l[b] = l[b - 1];
				b--;
			}
			l[b] = v;
		}
		return;
	}
	for (u32 s = n / 2; s-- > 0;) {
		sift_down(l, s, n);
	}
	for (u32 end = n - 1; end > 0; end--) {
		u32 t = l[0];
		l[0] = l[end];
		l[end] = t;
		sift_down(l, 0, end);
	}
}

// zh_bev_finish writes the three channels of each cell; the intensity sum
// runs over the cell's voxels in output order (its list sorted first), in
// float64, as BEV.Fill.
extern "C" __global__ void zh_bev_finish(const float4* vox, const u32* cellOff, const u32* count,
		const u32* heightBits, u32* list, u32 cells, float* dst) {
	u32 k = blockIdx.x * blockDim.x + threadIdx.x;
	if (k >= cells) {
		return;
	}
	u32 n = count[k];
	u32* l = list + cellOff[k];
	sort_voxel_list(l, n);
	double si = 0;
	for (u32 a = 0; a < n; a++) {
		si = __dadd_rn(si, (double)vox[l[a]].w);
	}
	dst[k] = n > 0 ? 1.0f : 0.0f;
	dst[cells + k] = __uint_as_float(heightBits[k]);
	dst[2 * cells + k] = n > 0 ? __double2float_rn(__ddiv_rn(si, (double)n)) : 0.0f;
}
