package gpu

import (
	"fmt"
	"math"

	"github.com/zerohop/zerohop/voxel"
)

// Launch parameters of the voxel kernels. Each kernel's arguments are
// built in an argList, which records their C types, and then copied into
// the KernelArgs block; a test checks every pack function against the
// kernel's signature parsed from kernels/voxel.cu, type by type.

// argKind is a kernel parameter's C type, by size and meaning.
type argKind uint8

const (
	argU32 argKind = iota + 1 // u32 (unsigned int)
	argI32                    // int
	argF32                    // float
	argU64                    // u64 (unsigned long long)
	argI64                    // i64 (long long)
	argPtr                    // any pointer (a DevicePtr)
	argF64                    // double
)

func (k argKind) String() string {
	switch k {
	case argU32:
		return "u32"
	case argI32:
		return "int"
	case argF32:
		return "float"
	case argU64:
		return "u64"
	case argI64:
		return "i64"
	case argPtr:
		return "pointer"
	case argF64:
		return "double"
	}
	return fmt.Sprintf("argKind(%d)", uint8(k))
}

// maxKernelArgs bounds every voxel kernel's parameter count (zh_keys has 31).
const maxKernelArgs = 32

// argList is a fixed-size record of one launch's arguments; it never
// allocates.
type argList struct {
	n     int
	kinds [maxKernelArgs]argKind
	vals  [maxKernelArgs]uint64
}

func (l *argList) reset() *argList { l.n = 0; return l }

func (l *argList) add(k argKind, v uint64) *argList {
	if l.n < maxKernelArgs {
		l.kinds[l.n], l.vals[l.n] = k, v
	}
	l.n++ // past the capacity, into() reports it
	return l
}

func (l *argList) u32(v uint32) *argList    { return l.add(argU32, uint64(v)) }
func (l *argList) i32(v int32) *argList     { return l.add(argI32, uint64(uint32(v))) }
func (l *argList) f32(v float32) *argList   { return l.add(argF32, uint64(math.Float32bits(v))) }
func (l *argList) u64(v uint64) *argList    { return l.add(argU64, v) }
func (l *argList) i64(v int64) *argList     { return l.add(argI64, uint64(v)) }
func (l *argList) ptr(p DevicePtr) *argList { return l.add(argPtr, uint64(p)) }
func (l *argList) f64(v float64) *argList   { return l.add(argF64, math.Float64bits(v)) }
func (l *argList) Kinds() []argKind         { return l.kinds[:min(l.n, maxKernelArgs)] }

func (k argKind) size() int {
	switch k {
	case argU32, argI32, argF32:
		return 4
	}
	return 8
}

// into refills a with the list's values, each in its C type's size.
func (l *argList) into(a *KernelArgs) error {
	if l.n > maxKernelArgs {
		return fmt.Errorf("gpu: %d kernel arguments, at most %d", l.n, maxKernelArgs)
	}
	a.Reset()
	for i := range l.n {
		v := l.vals[i]
		switch l.kinds[i].size() {
		case 4:
			a.Uint32(uint32(v))
		default:
			a.Uint64(v)
		}
	}
	return a.Err()
}

// cloudArgs is the part of a launch that describes the input points.
type cloudArgs struct {
	pts            DevicePtr
	n, step        uint32
	ox, oy, oz, oi int32
}

// cropArgs is the crop box (crop == 0: none).
type cropArgs struct {
	crop     uint32
	min, max [3]float32
}

func (l *argList) cloud(c cloudArgs) *argList {
	return l.ptr(c.pts).u32(c.n).u32(c.step).i32(c.ox).i32(c.oy).i32(c.oz).i32(c.oi)
}

func (l *argList) cropBox(c cropArgs) *argList {
	return l.u32(c.crop).f32(c.min[0]).f32(c.min[1]).f32(c.min[2]).f32(c.max[0]).f32(c.max[1]).f32(c.max[2])
}

// ceilingArgs is voxel.Config's Ceiling as the kernels test it: the
// mount's up row and the ceiling, +Inf when there is none.
type ceilingArgs struct {
	up      upRow
	ceiling float64
}

func ceilingArgsOf(c voxel.Config) ceilingArgs {
	a := ceilingArgs{up: upRowOf(c.Mount), ceiling: math.Inf(1)}
	if c.Ceiling != nil {
		a.ceiling = float64(*c.Ceiling)
	}
	return a
}

func (l *argList) ceilingOf(c ceilingArgs) *argList {
	return l.f64(c.up[0]).f64(c.up[1]).f64(c.up[2]).f64(c.up[3]).f64(c.ceiling)
}

// Pack functions, one per kernel, in the order of kernels/voxel.cu.

func packBounds(l *argList, c cloudArgs, crop cropArgs, ceil ceilingArgs, state DevicePtr) *argList {
	return l.reset().cloud(c).cropBox(crop).ceilingOf(ceil).ptr(state)
}

func packKeys(l *argList, c cloudArgs, crop cropArgs, ceil ceilingArgs, inv [3]float32, g voxelGrid, keys, points, state DevicePtr) *argList {
	l.reset().cloud(c).cropBox(crop).ceilingOf(ceil).f32(inv[0]).f32(inv[1]).f32(inv[2])
	l.i64(g.min[0]).i64(g.min[1]).i64(g.min[2]).u64(g.dim[0]).u64(g.dim[1]).u64(g.dim[2])
	return l.ptr(keys).ptr(points).ptr(state)
}

func packRadixHist(l *argList, keys DevicePtr, n, shift uint32, first bool, hist DevicePtr) *argList {
	return l.reset().ptr(keys).u32(n).u32(shift).u32(b2u(first)).ptr(hist)
}

func packRadixScatter(l *argList, keysIn, idxIn DevicePtr, n, shift uint32, first bool, offsets, keysOut, idxOut DevicePtr) *argList {
	return l.reset().ptr(keysIn).ptr(idxIn).u32(n).u32(shift).u32(b2u(first)).ptr(offsets).ptr(keysOut).ptr(idxOut)
}

func packScanTiles(l *argList, in, out DevicePtr, n uint32, tileSums DevicePtr) *argList {
	return l.reset().ptr(in).ptr(out).u32(n).ptr(tileSums)
}

func packScanSums(l *argList, tileSums DevicePtr, nTiles uint32, total DevicePtr) *argList {
	return l.reset().ptr(tileSums).u32(nTiles).ptr(total)
}

func packScanAdd(l *argList, out, tileSums DevicePtr, n uint32) *argList {
	return l.reset().ptr(out).ptr(tileSums).u32(n)
}

func packHeads(l *argList, keys DevicePtr, m uint32, flags DevicePtr) *argList {
	return l.reset().ptr(keys).u32(m).ptr(flags)
}

func packStarts(l *argList, keys, segID DevicePtr, m uint32, starts DevicePtr) *argList {
	return l.reset().ptr(keys).ptr(segID).u32(m).ptr(starts)
}

// upRow is the part of a mount that gives a point's robot-frame z: the
// rotation's z row and the z translation (voxel.Transform's R[6:9], T[2]).
type upRow [4]float64

func upRowOf(m voxel.Mount) upRow {
	tf := m.Transform()
	return upRow{tf.R[6], tf.R[7], tf.R[8], tf.T[2]}
}

func packReduce(l *argList, points, idx, starts, state DevicePtr, m, minPoints uint32, up upRow, vox, top, keep DevicePtr) *argList {
	l.reset().ptr(points).ptr(idx).ptr(starts).ptr(state).u32(m).u32(minPoints)
	return l.f64(up[0]).f64(up[1]).f64(up[2]).f64(up[3]).ptr(vox).ptr(top).ptr(keep)
}

func packCompact(l *argList, vox, top, keep, pos DevicePtr, m uint32, outDev, outHost, topDev, topHost DevicePtr) *argList {
	return l.reset().ptr(vox).ptr(top).ptr(keep).ptr(pos).u32(m).ptr(outDev).ptr(outHost).ptr(topDev).ptr(topHost)
}

func packBEVClear(l *argList, count, cursor, heightBits DevicePtr, cells uint32) *argList {
	return l.reset().ptr(count).ptr(cursor).ptr(heightBits).u32(cells)
}

// bevArgs is the raster's geometry, from a resolved voxel.BEVConfig.
type bevArgs struct {
	h, w                           uint32
	cell, minX, groundZ, maxHeight float32
	mounted                        bool            // the mount is not the identity
	mount                          voxel.Transform // the CPU's very numbers
}

func bevArgsOf(c voxel.BEVConfig) bevArgs {
	return bevArgs{h: uint32(c.H), w: uint32(c.W), cell: c.Cell, minX: c.MinX, groundZ: c.GroundZ, maxHeight: c.MaxHeight,
		mounted: !c.Mount.IsIdentity(), mount: c.Mount.Transform()}
}

func packBEVCells(l *argList, vox, top, state DevicePtr, m uint32, b bevArgs, cellOf, count, heightBits DevicePtr) *argList {
	l.reset().ptr(vox).ptr(top).ptr(state).u32(m).u32(b.h).u32(b.w)
	l.f32(b.cell).f32(b.minX).f32(b.groundZ).f32(b.maxHeight).u32(b2u(b.mounted))
	for _, r := range b.mount.R {
		l.f64(r)
	}
	for _, t := range b.mount.T {
		l.f64(t)
	}
	return l.ptr(cellOf).ptr(count).ptr(heightBits)
}

func packBEVFill(l *argList, cellOf, cellOff, state DevicePtr, m uint32, cursor, list DevicePtr) *argList {
	return l.reset().ptr(cellOf).ptr(cellOff).ptr(state).u32(m).ptr(cursor).ptr(list)
}

func packBEVFinish(l *argList, vox, cellOff, count, heightBits, list DevicePtr, cells uint32, dst DevicePtr) *argList {
	return l.reset().ptr(vox).ptr(cellOff).ptr(count).ptr(heightBits).ptr(list).u32(cells).ptr(dst)
}

func b2u(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}

// Launch geometry; the constants match the #defines in kernels/voxel.cu
// (a test checks).
const (
	radixBitsGPU = 8
	radixSizeGPU = 1 << radixBitsGPU
	sortThreads  = 256
	sortItems    = 8
	sortTile     = sortThreads * sortItems
	scanThreads  = 256
	scanItems    = 4
	scanTile     = scanThreads * scanItems
	pointThreads = 256 // block size of the one-thread-per-element kernels
	boundsBlocks = 1024
	stateWords   = 16
	stMin        = 0
	stMax        = 3
	stAccepted   = 6
	stSegments   = 7
	stVoxels     = 8
	stMiss       = 9
	stBEVTotal   = 10
	stScratch    = 11
	// stKeyed is the first radix pass's scan total: how many points
	// zh_keys gave a key. Not in voxel.cu's ST_ list (no kernel writes it
	// by name: Run passes it to scan as the total's address). A count
	// other than stAccepted means the cloud changed between the bounds and
	// keys passes.
	stKeyed = 12
)

// blocks returns the blocks of size per that cover n elements (0 for 0).
func blocks(n, per int) uint32 { return uint32((n + per - 1) / per) }

// radixPasses returns the 8-bit passes that sort keyBits-bit keys; at
// least one, because pass 0 also compacts out rejected points.
func radixPasses(keyBits int) int { return max(1, (keyBits+radixBitsGPU-1)/radixBitsGPU) }

// scanTiles returns the tiles of an exclusive scan over n words.
func scanTiles(n int) int { return (n + scanTile - 1) / scanTile }

// keyShiftOf returns pass p's digit position.
func keyShiftOf(p int) uint32 { return uint32(p * radixBitsGPU) }
