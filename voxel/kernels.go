package voxel

import (
	"encoding/binary"
	"math"
)

// The chunk kernels. Each reads the job and writes only its own chunk's
// state, its own histogram row, and element or output ranges that no other
// chunk of the phase writes.

// accept reports whether a point is finite, inside the crop box and not
// above the ceiling. v-v is NaN exactly when v is NaN or ±Inf, and a sum
// with a NaN is NaN: one test covers all four fields.
func (f *Filter) accept(x, y, z, in float32) bool {
	if (x-x)+(y-y)+(z-z)+(in-in) != 0 {
		return false
	}
	return (!f.crop || f.inCrop(x, y, z)) && (!f.ceil || f.under(x, y, z))
}

// height is the point's z in the robot frame of Config.Mount, as
// Transform.Apply computes it (the GPU kernels' mount_row does the same
// operations): the conversions round each product and sum on its own, so
// that no multiply-add is fused (arm64 would).
func (f *Filter) height(x, y, z float32) float64 {
	return float64(float64(float64(f.up[0]*float64(x))+float64(f.up[1]*float64(y)))+float64(f.up[2]*float64(z))) + f.up[3]
}

// under reports whether the point is not above Config.Ceiling; false for
// NaN.
func (f *Filter) under(x, y, z float32) bool { return f.height(x, y, z) <= f.ceiling }

// inCrop reports whether the point is inside the crop box; false for NaN.
func (f *Filter) inCrop(x, y, z float32) bool {
	return x >= f.cropMin[0] && x <= f.cropMax[0] &&
		y >= f.cropMin[1] && y <= f.cropMax[1] &&
		z >= f.cropMin[2] && z <= f.cropMax[2]
}

// infBits is the bit pattern of +Inf; |v| has a larger or equal one exactly
// when v is not finite.
const infBits = 0x7f800000

// absBits returns the bit pattern of |v|.
func absBits(v float32) uint32 { return math.Float32bits(v) &^ (1 << 31) }

// boundsChunk finds the bounds and number of the chunk's accepted points.
func (f *Filter) boundsChunk(c int) {
	cs := &f.chunks[c]
	r := f.job.in
	inf := float32(math.Inf(1))
	minX, minY, minZ := inf, inf, inf
	maxX, maxY, maxZ := -inf, -inf, -inf
	n := 0
	var blk pointBlock
	for lo, hi := cs.lo, cs.hi; lo < hi; lo += blockSize {
		pts := blk[:min(blockSize, hi-lo)]
		r.read(lo, pts)
		for k := range pts {
			x, y, z, in := pts[k][0], pts[k][1], pts[k][2], pts[k][3]
			if !f.accept(x, y, z, in) {
				continue
			}
			minX, maxX = min(minX, x), max(maxX, x)
			minY, maxY = min(minY, y), max(maxY, y)
			minZ, maxZ = min(minZ, z), max(maxZ, z)
			n++
		}
	}
	cs.min = [3]float32{minX, minY, minZ}
	cs.max = [3]float32{maxX, maxY, maxZ}
	cs.accepted = n
}

// rejected marks the element of a point that the keys phase skipped; no key
// or packed element has its top bit set (grid invariant, plan).
const rejected = 1 << 63

// keysChunk computes the key of each accepted point of the chunk on the
// job's grid and writes its sort element at the point's own position in
// bufB (so the position is the point index when keys are not packed), with
// rejected for skipped points; it counts the first digit of the keys. A
// finite point outside the grid stops the chunk with miss set: on a guessed
// grid the cloud then takes the exact path; on the exact grid it means the
// cloud changed since the bounds phase (it must not: the slot is leased).
//
// Only the intensity is tested for NaN and Inf up front; a non-finite
// coordinate makes its product non-finite, which the range test catches.
func (f *Filter) keysChunk(c int) {
	cs := &f.chunks[c]
	j := &f.job
	r := j.in
	hist := &f.hist[c]
	*hist = [radixSize]uint32{}
	keys := f.bufB[cs.lo:cs.hi]
	inv0, inv1, inv2 := f.inv[0], f.inv[1], f.inv[2]
	min0, min1, min2 := j.grid.min[0], j.grid.min[1], j.grid.min[2]
	dim0, dim1, dim2 := j.grid.dim[0], j.grid.dim[1], j.grid.dim[2]
	mask, packed, idxBits, crop, ceil := j.digitMask&(radixSize-1), j.packed, j.idxBits, f.crop, f.ceil
	accepted, miss := 0, false
	var blk pointBlock
	for lo, hi := cs.lo, cs.hi; lo < hi && !miss; lo += blockSize {
		pts := blk[:min(blockSize, hi-lo)]
		r.read(lo, pts)
		out := keys[lo-cs.lo:][:len(pts)]
		for k := range pts {
			x, y, z, in := pts[k][0], pts[k][1], pts[k][2], pts[k][3]
			if absBits(in) >= infBits || (crop && !f.inCrop(x, y, z)) || (ceil && !f.under(x, y, z)) {
				out[k] = rejected
				continue
			}
			// The explicit conversions round each product to float32, as
			// PCL, and forbid fusing it into anything wider.
			px, py, pz := float32(x*inv0), float32(y*inv1), float32(z*inv2)
			// Tested before converting (a float beyond int64 converts to an
			// implementation-defined value), on the bits: for non-negative
			// floats, bit patterns order as the values do.
			if max(absBits(px), absBits(py), absBits(pz)) >= indexLimitBits {
				if max(absBits(x), absBits(y), absBits(z)) >= infBits {
					out[k] = rejected // a non-finite coordinate
					continue
				}
				miss = true
				break
			}
			ix := uint64(floorInt(px) - min0)
			iy := uint64(floorInt(py) - min1)
			iz := uint64(floorInt(pz) - min2)
			if ix >= dim0 || iy >= dim1 || iz >= dim2 {
				miss = true
				break
			}
			key := ix + dim0*(iy+dim1*iz)
			if packed {
				out[k] = key<<idxBits | uint64(lo+k)
			} else {
				out[k] = key
			}
			hist[key&mask]++
			accepted++
		}
	}
	cs.accepted, cs.miss = accepted, miss
}

// countChunk counts the current digit of the chunk's elements.
func (f *Filter) countChunk(c int) {
	cs := &f.chunks[c]
	j := &f.job
	hist := &f.hist[c]
	*hist = [radixSize]uint32{}
	shift, mask := j.shift, j.digitMask
	for _, e := range j.src[cs.lo:cs.hi] {
		hist[(e>>shift)&mask&(radixSize-1)]++
	}
}

// scatterChunk moves the chunk's packed elements to their places for the
// current digit, skipping rejected ones (only the first pass has any).
// Offsets come from prefixSums.
func (f *Filter) scatterChunk(c int) {
	cs := &f.chunks[c]
	j := &f.job
	off := &f.hist[c]
	shift, mask := j.shift, j.digitMask
	dst := j.dst
	for _, e := range j.src[cs.lo:cs.hi] {
		if e == rejected {
			continue
		}
		d := (e >> shift) & mask & (radixSize - 1)
		dst[off[d]] = e
		off[d]++
	}
}

// scatterFirstPairsChunk is the first pass for keys without packed point
// indices: an element's position is its point's index.
func (f *Filter) scatterFirstPairsChunk(c int) {
	cs := &f.chunks[c]
	j := &f.job
	off := &f.hist[c]
	shift, mask := j.shift, j.digitMask
	dst, dstIdx := j.dst, j.dstIdx
	for k, e := range j.src[cs.lo:cs.hi] {
		if e == rejected {
			continue
		}
		d := (e >> shift) & mask & (radixSize - 1)
		o := off[d]
		dst[o] = e
		dstIdx[o] = uint32(cs.lo + k)
		off[d] = o + 1
	}
}

// scatterPairsChunk is scatterChunk for keys with separate point indices,
// after the first pass.
func (f *Filter) scatterPairsChunk(c int) {
	cs := &f.chunks[c]
	j := &f.job
	off := &f.hist[c]
	shift, mask := j.shift, j.digitMask
	dst, dstIdx := j.dst, j.dstIdx
	idx := j.srcIdx[cs.lo:cs.hi]
	for k, e := range j.src[cs.lo:cs.hi] {
		d := (e >> shift) & mask & (radixSize - 1)
		o := off[d]
		dst[o] = e
		dstIdx[o] = idx[k]
		off[d] = o + 1
	}
}

// voxelsChunk counts the voxels of the chunk's sorted elements that have at
// least MinPoints points. Chunk edges lie on voxel edges (splitAtKeys).
func (f *Filter) voxelsChunk(c int) {
	cs := &f.chunks[c]
	j := &f.job
	e := j.src[cs.lo:cs.hi]
	shift, minPoints := j.keyShift, f.cfg.MinPoints
	voxels := 0
	if minPoints == 1 && len(e) > 0 {
		// Count key changes without a branch per voxel: voxel sizes are
		// irregular, so a loop per voxel mispredicts once per voxel.
		voxels = 1
		prev := e[0] >> shift
		for _, x := range e[1:] {
			key := x >> shift
			if key != prev {
				voxels++
			}
			prev = key
		}
		cs.accepted = voxels
		return
	}
	for i := 0; i < len(e); {
		key := e[i] >> shift
		k := i + 1
		for k < len(e) && e[k]>>shift == key {
			k++
		}
		if k-i >= minPoints {
			voxels++
		}
		i = k
	}
	cs.accepted = voxels
}

// topOf rounds a voxel's highest robot-frame z to its top: once to
// float32 (rounding keeps order, so this is the largest rounded z), and
// a zero as +0, so that a top does not depend on which of its points
// with a zero height was met first, or how a max orders -0 and +0 (the
// GPU kernel's does not as Go's does).
func topOf(h float64) float32 {
	t := float32(h)
	if t == 0 {
		return 0
	}
	return t
}

// reduceChunk writes the mean point of each of the chunk's voxels with at
// least MinPoints points, from the chunk's output offset on, and its top.
// Sums are in float64 in input order (the sort is stable), rounded once to
// float32. A top is the largest robot-frame z of the voxel's points, each
// computed as Transform.Apply computes z (so as the GPU kernel does),
// rounded by topOf. It
// also bounds one point of every voxel (the mean, which lies in its voxel,
// or for a voxel with too few points its first point), for the next guess.
func (f *Filter) reduceChunk(c int) {
	cs := &f.chunks[c]
	j := &f.job
	r := j.in
	e := j.src[cs.lo:cs.hi]
	idx := j.srcIdx[cs.lo:cs.hi]
	shift, minPoints, packed := j.keyShift, f.cfg.MinPoints, j.packed
	idxMask := uint64(1)<<j.idxBits - 1
	out := j.out[j.outOff[c] : j.outOff[c]+cs.accepted]
	outTop := j.outTop[j.outOff[c] : j.outOff[c]+cs.accepted]
	u0, u1, u2, ut := f.up[0], f.up[1], f.up[2], f.up[3]
	pointAt := func(t int) int {
		if packed {
			return int(e[t] & idxMask)
		}
		return int(idx[t])
	}
	inf := float32(math.Inf(1))
	minX, minY, minZ := inf, inf, inf
	maxX, maxY, maxZ := -inf, -inf, -inf
	o := 0
	for i := 0; i < len(e); {
		key := e[i] >> shift
		k := i + 1
		for k < len(e) && e[k]>>shift == key {
			k++
		}
		if k-i < minPoints {
			x, y, z, _ := r.at(pointAt(i))
			minX, maxX = min(minX, x), max(maxX, x)
			minY, maxY = min(minY, y), max(maxY, y)
			minZ, maxZ = min(minZ, z), max(maxZ, z)
			i = k
			continue
		}
		var sx, sy, sz, si float64
		top := math.Inf(-1)
		for t := i; t < k; t++ {
			p := pointAt(t)
			var x, y, z, in float32
			if r.std { // inlined: at is too large to inline here
				b := r.data[p*XYZIStep : p*XYZIStep+XYZIStep]
				x = math.Float32frombits(binary.LittleEndian.Uint32(b[0:4]))
				y = math.Float32frombits(binary.LittleEndian.Uint32(b[4:8]))
				z = math.Float32frombits(binary.LittleEndian.Uint32(b[8:12]))
				in = math.Float32frombits(binary.LittleEndian.Uint32(b[12:16]))
			} else {
				x, y, z, in = r.at(p)
			}
			sx += float64(x)
			sy += float64(y)
			sz += float64(z)
			si += float64(in)
			// height, written out (the call is not inlined here). The
			// builtin max has no branch to mispredict (a branch here cost
			// 16 % of BenchmarkFilter, max 3 %).
			top = max(top, float64(float64(float64(u0*float64(x))+float64(u1*float64(y)))+float64(u2*float64(z)))+ut)
		}
		d := float64(k - i)
		pt := Point{X: float32(sx / d), Y: float32(sy / d), Z: float32(sz / d), I: float32(si / d)}
		out[o] = pt
		outTop[o] = topOf(top)
		o++
		minX, maxX = min(minX, pt.X), max(maxX, pt.X)
		minY, maxY = min(minY, pt.Y), max(maxY, pt.Y)
		minZ, maxZ = min(minZ, pt.Z), max(maxZ, pt.Z)
		i = k
	}
	cs.vmin = [3]float32{minX, minY, minZ}
	cs.vmax = [3]float32{maxX, maxY, maxZ}
}
