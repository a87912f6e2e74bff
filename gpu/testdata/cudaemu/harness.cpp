#include "prelude.h"
#include "../../kernels/voxel.cu"
#include <cstdio>
#include <string>
#include <cstdlib>
// Mirrors gpu/voxelgpu.go's runOnThread, launch by launch, on the emulator.
// Usage: harness IN.bin OUT.bin LEAF [MIN_POINTS [BEV_CELL [reverse]]];
// writes OUT.bin (voxels, KITTI layout), OUT.bin.top (their tops, float32,
// identity mount) and OUT.bin.bev (3x128x128 float32,
// cell BEV_CELL m (0.2), min x 0, ground z -1, max height 3). "reverse"
// hands zh_bev_finish each cell's list in descending voxel order, the worst
// order zh_bev_fill may leave, and prints the longest list.
static unsigned blocks(size_t n, size_t per) { return (n + per - 1) / per; }
static float fromOrdered(u32 u) { return (u & 0x80000000u) ? __uint_as_float(u & 0x7fffffffu) : __uint_as_float(~u); }
static std::vector<u32> tileSums(1 << 20);
static void scan(u32* in, u32* out, u32 n, u32* total) {
	u32 tiles = blocks(n, SCAN_TILE);
	u32* ts = tileSums.data();
	launch(tiles, SCAN_THREADS, [=] { zh_scan_tiles(in, out, n, ts); });
	launch(1, SCAN_THREADS, [=] { zh_scan_sums(ts, tiles, total); });
	launch(blocks(n, 256), 256, [=] { zh_scan_add(out, ts, n); });
}
int main(int argc, char** argv) {
	float leaf = atof(argv[3]);
	u32 minPoints = argc > 4 ? atoi(argv[4]) : 1;
	float bevCell = argc > 5 ? atof(argv[5]) : 0.2f;
	bool reverse = argc > 6 && std::string(argv[6]) == "reverse";
	FILE* fin = fopen(argv[1], "rb"); fseek(fin, 0, SEEK_END); long sz = ftell(fin); fseek(fin, 0, SEEK_SET);
	std::vector<unsigned char> pts(sz); fread(pts.data(), 1, sz, fin); fclose(fin);
	u32 n = sz / 16;
	std::vector<u32> state(16, 0); state[0] = state[1] = state[2] = 0xFFFFFFFFu;
	u32* st = state.data(); const unsigned char* P = pts.data();
	launch(std::min(blocks(n, 256), 1024u), 256, [=] { zh_bounds(P, n, 16, 0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0.0, 0.0, 1.0, 0.0, HUGE_VAL, st); });
	u32 m = st[ST_ACCEPTED];
	float inv = 1.0f / leaf;
	i64 mn[3]; u64 dim[3];
	for (int a = 0; a < 3; a++) {
		double f = std::floor((double)(float)(fromOrdered(st[ST_MIN + a]) * inv));
		double l = std::floor((double)(float)(fromOrdered(st[ST_MAX + a]) * inv));
		mn[a] = (i64)f; dim[a] = (u64)((i64)l - mn[a] + 1);
	}
	u64 total = dim[0] * dim[1] * dim[2];
	int keyBits = total == 1 ? 0 : 64 - __builtin_clzll(total - 1);
	int passes = std::max(1, (keyBits + 7) / 8);
	fprintf(stderr, "n %u accepted %u dims %llu %llu %llu keyBits %d passes %d\n", n, m, dim[0], dim[1], dim[2], keyBits, passes);
	std::vector<float4> pcopy(n); float4* PC = pcopy.data();
	std::vector<u64> keys0(n), keyA(n), keyB(n); std::vector<u32> idxA(n), idxB(n), hist(256 * blocks(n, SORT_TILE) + 1);
	u64 *k0 = keys0.data(), *kA = keyA.data(), *kB = keyB.data(); u32 *iA = idxA.data(), *iB = idxB.data(), *H = hist.data();
	launch(blocks(n, 256), 256, [=] { zh_keys(P, n, 16, 0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0.0, 0.0, 1.0, 0.0, HUGE_VAL, inv, inv, inv, mn[0], mn[1], mn[2], dim[0], dim[1], dim[2], k0, PC, st); });
	u64 *src = k0, *dst = kA; u32 *srcI = nullptr, *dstI = iA; u32 count = n;
	for (int p = 0; p < passes; p++) {
		u32 first = p == 0, tiles = blocks(count, SORT_TILE), shift = 8 * p;
		launch(tiles, SORT_THREADS, [=] { zh_radix_hist(src, count, shift, first, H); });
		scan(H, H, 256 * tiles, st + 11);
		launch(tiles, SORT_THREADS, [=] { zh_radix_scatter(src, srcI, count, shift, first, H, dst, dstI); });
		count = m;
		if (first) { src = kA; srcI = iA; dst = kB; dstI = iB; } else { std::swap(src, dst); std::swap(srcI, dstI); }
	}
	std::vector<u32> flags(n), starts(n), keep(n); std::vector<float4> vox(n), outD(n), outH(n);
	u32 *F = flags.data(), *S = starts.data(), *K = keep.data(); float4 *V = vox.data(), *OD = outD.data(), *OH = outH.data();
	std::vector<float> top(n), topD(n), topH(n); float *T = top.data(), *TD = topD.data(), *TH = topH.data();
	u32 mb = blocks(m, 256);
	launch(mb, 256, [=] { zh_heads(src, m, F); });
	scan(F, F, m, st + ST_SEGMENTS);
	launch(mb, 256, [=] { zh_starts(src, F, m, S); });
	launch(mb, 256, [=] { zh_reduce(PC, srcI, S, st, m, minPoints, 0.0, 0.0, 1.0, 0.0, V, T, K); });
	scan(K, F, m, st + ST_VOXELS);
	launch(mb, 256, [=] { zh_compact(V, T, K, F, m, OD, OH, TD, TH); });
	fprintf(stderr, "segments %u voxels %u miss %u\n", st[ST_SEGMENTS], st[ST_VOXELS], st[ST_MISS]);
	FILE* fo = fopen(argv[2], "wb"); fwrite(OH, 16, st[ST_VOXELS], fo); fclose(fo);
	FILE* ft = fopen((std::string(argv[2]) + ".top").c_str(), "wb"); fwrite(TH, 4, st[ST_VOXELS], ft); fclose(ft);
	u32 Hh = 128, W = 128, cells = Hh * W;
	std::vector<u32> cnt(cells), off(cells), cur(cells), hb(cells), lst(n); std::vector<int> cellOf(n); std::vector<float> bev(3 * cells, -7.0f);
	u32 *C = cnt.data(), *O = off.data(), *CU = cur.data(), *HB = hb.data(), *L = lst.data(); int* CO = cellOf.data(); float* B = bev.data();
	u32 cb = blocks(cells, 256);
	launch(cb, 256, [=] { zh_bev_clear(C, CU, HB, cells); });
	launch(mb, 256, [=] { zh_bev_cells(OD, TD, st, m, Hh, W, bevCell, 0.0f, -1.0f, 3.0f, 0u, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, CO, C, HB); });
	scan(C, O, cells, st + ST_BEVTOTAL);
	launch(mb, 256, [=] { zh_bev_fill(CO, O, st, m, CU, L); });
	if (reverse) {
		u32 longest = 0;
		for (u32 k = 0; k < cells; k++) {
			std::sort(L + O[k], L + O[k] + C[k], [](u32 a, u32 b) { return a > b; });
			longest = std::max(longest, C[k]);
		}
		fprintf(stderr, "longest cell list %u, reversed\n", longest);
	}
	launch(cb, 256, [=] { zh_bev_finish(OD, O, C, HB, L, cells, B); });
	// zh_bev_finish sorts each cell's list in place: check it did, since
	// float64 sums of float32 intensities rarely depend on their order.
	u32 unsorted = 0;
	for (u32 k = 0; k < cells; k++) {
		for (u32 a = 1; a < C[k]; a++) {
			unsorted += L[O[k] + a - 1] >= L[O[k] + a];
		}
	}
	fprintf(stderr, "cell lists out of order %u\n", unsorted);
	FILE* fb = fopen((std::string(argv[2]) + ".bev").c_str(), "wb"); fwrite(B, 4, 3 * cells, fb); fclose(fb);
}
