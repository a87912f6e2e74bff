package voxel

import (
	"fmt"
	"math"
	"math/bits"

	"github.com/zerohop/zerohop/internal/team"
)

// Filter is a voxel-grid filter with preallocated scratch memory. Build one
// per stream with NewFilter, call Run for each cloud from one goroutine at a
// time, and Close it when done.
type Filter struct {
	cfg       Config
	maxPoints int
	inv       [3]float32 // float32(1/leaf), as PCL's inverse_leaf_size_
	up        [4]float64 // the mount's z row and z translation: a point's height in the robot frame
	ceil      bool       // Config.Ceiling is set
	ceiling   float64    // *Config.Ceiling
	crop      bool
	cropMin   [3]float32
	cropMax   [3]float32
	team      *team.Team // nil when Workers == 1
	closed    bool
	// guess is the grid the next cloud's keys are first computed on: from
	// the crop box when it is small enough (fixedGrid), else from the
	// previous cloud's voxels with a margin.
	guess     grid
	fixedGrid bool

	// Scratch sized for maxPoints. Sort elements are key<<idxBits | point
	// index in one word when both fit (packed), else keys in bufA/bufB and
	// point indices alongside in idxA/idxB.
	bufA, bufB []uint64
	idxA, idxB []uint32
	hist       [][radixSize]uint32 // per chunk: digit counts, then scatter offsets
	digitBase  [radixSize]uint32   // prefixSums' running offset per digit
	chunks     []chunkState

	job job // the Run in progress, read by the chunk kernels

	// Tuning and test hooks; production code leaves them as NewFilter sets them.
	parallelMin         int    // clouds smaller than this run on the caller alone
	forceExact          bool   // take the exact (two-pass) path for every cloud
	digitBits           int    // widest radix digit, at most radixBits
	forceUnpacked       bool   // sort keys and point indices in separate arrays
	testHookAfterBounds func() // runs between the bounds and keys phases
	exactRuns           int    // Runs that took the exact path
}

// Radix sort digits are at most radixBits wide.
const (
	radixBits = 13
	radixSize = 1 << radixBits
)

// Clouds smaller than parallelMin points run on the calling goroutine alone;
// waking helpers costs more than it saves. Chunks are claimed dynamically, so
// having several per worker lets an early finisher take over a late
// starter's share.
const (
	parallelMin     = 16 << 10
	chunksPerWorker = 4
)

// chunkState is one chunk's range and results, padded against false sharing.
type chunkState struct {
	lo, hi     int        // input point range, or sort element range
	min, max   [3]float32 // bounds of accepted points (bounds phase)
	accepted   int        // accepted points (bounds, keys), voxels (voxels phase)
	miss       bool       // a point fell outside the grid (keys phase)
	vmin, vmax [3]float32 // bounds of one point of each voxel (reduce phase)
	_          [64]byte
}

type phaseKind int

const (
	phaseBounds phaseKind = iota
	phaseKeys
	phaseCount
	phaseScatter
	phaseVoxels
	phaseReduce
)

// job is the state of one Run, written by the lead between phases and read
// by the chunk kernels during them.
type job struct {
	phase     phaseKind
	in        pointReader
	nChunks   int
	packed    bool // key and point index share one word
	idxBits   uint // bits of the point index in a packed element
	keyShift  uint // element >> keyShift is the key (idxBits packed, else 0)
	grid      grid // the voxel grid the keys are relative to
	passes    int  // radix sort passes
	digitBits int  // bits per digit
	shift     uint // digit position in the element, this pass
	digitMask uint64
	first     bool     // the first scatter: src is indexed by point, with rejected marks
	src, dst  []uint64 // sort elements (packed) or keys
	srcIdx    []uint32 // point indices, when not packed
	dstIdx    []uint32
	out       []Point
	outTop    []float32 // out's tops, index for index
	outOff    []int     // per chunk: index in out of its first voxel
}

// NewFilter checks cfg and preallocates for clouds of up to maxPoints points.
// With Workers > 1, and maxPoints large enough to split, it starts
// Workers-1 helper goroutines, stopped by Close.
func NewFilter(cfg Config, maxPoints int) (*Filter, error) {
	cfg, err := cfg.resolved()
	if err != nil {
		return nil, err
	}
	if maxPoints < 1 || uint64(maxPoints) > math.MaxUint32 {
		return nil, fmt.Errorf("voxel filter: max points %d out of range [1, %d]", maxPoints, uint64(math.MaxUint32))
	}
	f := &Filter{cfg: cfg, maxPoints: maxPoints, parallelMin: parallelMin, digitBits: radixBits}
	tf := cfg.Mount.Transform()
	f.up = [4]float64{tf.R[6], tf.R[7], tf.R[8], tf.T[2]}
	for a := range 3 {
		f.inv[a] = 1 / cfg.Leaf[a]
		f.cropMin[a] = float32(math.Inf(-1))
		f.cropMax[a] = float32(math.Inf(1))
	}
	if cfg.Ceiling != nil {
		f.ceil, f.ceiling = true, float64(*cfg.Ceiling)
	}
	if cfg.Crop != nil {
		f.crop = true
		f.cropMin, f.cropMax = cfg.Crop.Min, cfg.Crop.Max
		// A finite crop box bounds every accepted point: its grid never
		// misses. Use it when it sorts in two passes; a loose box is better
		// left to the guesses from the data.
		var lo, hi [3]float64
		for a := range 3 {
			lo[a], hi[a] = voxelIndex(f.cropMin[a], f.inv[a]), voxelIndex(f.cropMax[a], f.inv[a])
		}
		if g, ok := newGrid(lo, hi); ok && g.keyBits() <= 2*radixBits {
			f.guess, f.fixedGrid = g, true
		}
	}
	nChunks := 1
	parallel := cfg.Workers > 1 && maxPoints >= parallelMin
	if parallel {
		nChunks = cfg.Workers * chunksPerWorker
	}
	f.bufA = make([]uint64, maxPoints)
	f.bufB = make([]uint64, maxPoints)
	f.idxA = make([]uint32, maxPoints)
	f.idxB = make([]uint32, maxPoints)
	f.hist = make([][radixSize]uint32, nChunks)
	f.chunks = make([]chunkState, nChunks)
	f.job.outOff = make([]int, nChunks)
	if parallel {
		f.team = team.New(cfg.Workers-1, f.runChunk)
	}
	return f, nil
}

// Config returns the filter's configuration with defaults applied.
func (f *Filter) Config() Config {
	cfg := f.cfg
	if cfg.Crop != nil {
		b := *cfg.Crop
		cfg.Crop = &b
	}
	return cfg
}

// MaxPoints returns the largest cloud Run accepts.
func (f *Filter) MaxPoints() int { return f.maxPoints }

// Close stops the helper goroutines. Run returns ErrClosed afterwards.
func (f *Filter) Close() error {
	if f.closed {
		return nil
	}
	f.closed = true
	if f.team != nil {
		f.team.Close()
	}
	return nil
}

// Run filters the cloud into out, replacing its contents. It reads in.Data in
// place, which must not change during the call, and does not retain it
// after returning. out must have capacity for the result (at most the
// number of points in the cloud; NewPoints with the filter's MaxPoints
// always suffices). On error out is left empty. Run is not safe for
// concurrent use; use one Filter per goroutine.
func (f *Filter) Run(in Cloud, out *Points) error {
	out.P, out.Top, out.Mount = out.P[:0], out.Top[:0], f.cfg.Mount
	if f.closed {
		return ErrClosed
	}
	if err := in.Validate(); err != nil {
		return fmt.Errorf("voxel filter: %w", err)
	}
	if in.Count > f.maxPoints {
		return fmt.Errorf("voxel filter: cloud of %d points exceeds the filter's max points %d", in.Count, f.maxPoints)
	}
	if in.Count == 0 {
		return nil
	}
	j := &f.job
	*j = job{in: newPointReader(in), outOff: j.outOff}
	j.nChunks = 1
	if f.team != nil && in.Count >= f.parallelMin {
		j.nChunks = len(f.chunks)
		f.team.Begin() // helpers take a while to wake; start them first
	}
	err := f.run(in.Count, out)
	if j.nChunks > 1 {
		f.team.End()
	}
	*j = job{outOff: j.outOff} // drop references to the caller's memory
	if err != nil {
		out.P, out.Top = out.P[:0], out.Top[:0]
	}
	return err
}

// phase runs the kernel of kind over the job's chunks.
func (f *Filter) phase(kind phaseKind) {
	f.job.phase = kind
	if f.job.nChunks == 1 {
		f.runChunk(0)
		return
	}
	f.team.Phase(f.job.nChunks)
}

func (f *Filter) runChunk(c int) {
	switch f.job.phase {
	case phaseBounds:
		f.boundsChunk(c)
	case phaseKeys:
		f.keysChunk(c)
	case phaseCount:
		f.countChunk(c)
	case phaseScatter:
		switch {
		case f.job.packed:
			f.scatterChunk(c)
		case f.job.first:
			f.scatterFirstPairsChunk(c)
		default:
			f.scatterPairsChunk(c)
		}
	case phaseVoxels:
		f.voxelsChunk(c)
	case phaseReduce:
		f.reduceChunk(c)
	}
}

func (f *Filter) run(n int, out *Points) error {
	j := &f.job
	cs := f.chunks[:j.nChunks]

	// 1. Keys of the accepted points in one pass over the cloud, on the grid
	// guessed from the crop box or the previous cloud. If a point falls
	// outside it (the first cloud, a scene that grew), take the exact path:
	// a bounds pass, then the keys on the grid it gives.
	splitEven(cs, n)
	missed := true
	if f.guess.valid && !f.forceExact {
		j.grid = f.guess
		f.plan(n)
		f.phase(phaseKeys)
		missed = false
		for c := range cs {
			missed = missed || cs[c].miss
		}
	}
	if missed {
		if err := f.exactKeys(n); err != nil {
			return err
		}
	}
	m := 0
	for c := range cs {
		m += cs[c].accepted
	}
	if m == 0 {
		return nil
	}

	// 2. LSD radix sort on the key, stable, so each voxel's points stay in
	// input order and the output is reproducible bit for bit. The keys phase
	// left the elements at their points' positions (rejected points marked);
	// the first pass compacts them, so it always runs.
	src, dst := f.bufB[:n], f.bufA[:m]
	srcIdx, dstIdx := []uint32(nil), f.idxA[:m]
	for p := range j.passes {
		j.shift = j.keyShift + uint(p*j.digitBits)
		if p > 0 {
			splitEven(cs, m)
			j.src = src
			f.phase(phaseCount)
		}
		if spread := f.prefixSums(m); !spread && p > 0 {
			continue // every element has the same digit: order unchanged
		}
		j.first = p == 0
		j.src, j.dst, j.srcIdx, j.dstIdx = src, dst, srcIdx, dstIdx
		f.phase(phaseScatter)
		if p == 0 {
			src, dst = f.bufA[:m], f.bufB[:m]
			srcIdx, dstIdx = f.idxA[:m], f.idxB[:m]
		} else {
			src, dst = dst, src
			srcIdx, dstIdx = dstIdx, srcIdx
		}
	}

	// 3. Count voxels per chunk, with chunk edges moved to voxel edges, then
	// average each voxel into its place in out.
	j.src, j.srcIdx = src, srcIdx
	splitAtKeys(cs, src, j.keyShift)
	f.phase(phaseVoxels)
	voxels := 0
	for c := range cs {
		j.outOff[c] = voxels
		voxels += cs[c].accepted
	}
	if voxels > cap(out.P) || voxels > cap(out.Top) {
		return fmt.Errorf("voxel filter: output holds %d points and %d tops, result has %d voxels (make it with NewPoints)", cap(out.P), cap(out.Top), voxels)
	}
	j.out, j.outTop = out.P[:voxels], out.Top[:voxels]
	f.phase(phaseReduce)
	out.P, out.Top = j.out, j.outTop
	if !f.fixedGrid {
		f.guessGrid(cs)
	}
	return nil
}

// exactKeys is the path for clouds that the guessed grid does not cover:
// bounds in float32, a grid of up to 2^63 voxels (or ErrGridTooLarge), then
// the keys. The next cloud's guess comes from this one's voxels.
func (f *Filter) exactKeys(n int) error {
	f.exactRuns++
	j := &f.job
	cs := f.chunks[:j.nChunks]
	splitEven(cs, n)
	f.phase(phaseBounds)
	var lo, hi [3]float32
	for a := range 3 {
		lo[a], hi[a] = float32(math.Inf(1)), float32(math.Inf(-1))
	}
	accepted := 0
	for c := range cs {
		accepted += cs[c].accepted
		for a := range 3 {
			lo[a] = min(lo[a], cs[c].min[a])
			hi[a] = max(hi[a], cs[c].max[a])
		}
	}
	if accepted == 0 {
		return nil // every chunk's accepted is 0: an empty result
	}
	grid, err := f.gridOf(lo, hi)
	if err != nil {
		return err
	}
	if f.testHookAfterBounds != nil {
		f.testHookAfterBounds()
	}
	j.grid = grid
	f.plan(n)
	f.phase(phaseKeys)
	for c := range cs {
		accepted -= cs[c].accepted
		if cs[c].miss {
			accepted = -1
		}
	}
	if accepted != 0 {
		return fmt.Errorf("voxel filter: cloud data changed while it was being filtered (slot written while leased?)")
	}
	return nil
}

// plan lays out the sort for n points on the job's grid: packed elements
// when key and point index fit 63 bits (the top bit marks rejected points),
// the number of radix passes (at least one, which compacts) and their digit
// width.
func (f *Filter) plan(n int) {
	j := &f.job
	keyBits := j.grid.keyBits()
	j.idxBits = uint(bits.Len64(uint64(n - 1)))
	j.packed = keyBits+int(j.idxBits) <= 63 && !f.forceUnpacked
	j.keyShift = 0
	if j.packed {
		j.keyShift = j.idxBits
	}
	j.passes = max(1, (keyBits+f.digitBits-1)/f.digitBits)
	j.digitBits = (keyBits + j.passes - 1) / j.passes
	j.digitMask = 1<<j.digitBits - 1
	j.shift = j.keyShift
}

// splitEven splits [0, n) into len(cs) contiguous ranges of near-equal size.
func splitEven(cs []chunkState, n int) {
	k := len(cs)
	for c := range cs {
		cs[c].lo, cs[c].hi = n*c/k, n*(c+1)/k
	}
}

// splitAtKeys splits the sorted elements into len(cs) ranges of near-equal
// size whose edges do not cut a voxel.
func splitAtKeys(cs []chunkState, e []uint64, keyShift uint) {
	k, n := len(cs), len(e)
	prev := 0
	for c := range cs {
		cs[c].lo = prev
		end := n * (c + 1) / k
		if end > prev && end < n {
			// First index in [end, n) whose key differs from e[end-1]'s.
			key := e[end-1] >> keyShift
			lo, hi := end, n
			for lo < hi {
				mid := int(uint(lo+hi) >> 1)
				if e[mid]>>keyShift == key {
					lo = mid + 1
				} else {
					hi = mid
				}
			}
			end = lo
		}
		end = max(end, prev)
		cs[c].hi = end
		prev = end
	}
}

// grid is a box of voxels: dim[a] voxels along axis a from index min[a].
// A key is ix + dim[0]*(iy + dim[1]*iz) for the index offsets from min, so
// keys order voxels by (iz, iy, ix) whatever the box, as PCL orders its
// leaves. Invariant when valid: each |index| within the box is at most 2^62,
// and dim[0]*dim[1]*dim[2] <= 2^63, so a key leaves the top bit free.
type grid struct {
	min   [3]int64
	dim   [3]uint64
	valid bool
}

// indexLimit bounds voxel indices so that differences fit int64 and floats
// convert exactly.
const indexLimit = 1 << 62

// indexLimitBits is the bit pattern of float32(indexLimit).
var indexLimitBits = math.Float32bits(indexLimit)

// newGrid returns the grid from voxel lo to voxel hi per axis (float64
// integers, as voxelIndex gives), or false if it breaks the invariant.
func newGrid(lo, hi [3]float64) (grid, bool) {
	g := grid{valid: true}
	for a := range 3 {
		// Strict: the keys pass refuses an index of exactly ±2^62 too.
		if !(lo[a] > -indexLimit && hi[a] < indexLimit && lo[a] <= hi[a]) {
			return grid{}, false
		}
		g.min[a] = int64(lo[a])
		g.dim[a] = uint64(int64(hi[a])) - uint64(g.min[a]) + 1
	}
	h1, xy := bits.Mul64(g.dim[0], g.dim[1])
	h2, xyz := bits.Mul64(xy, g.dim[2])
	return g, h1 == 0 && h2 == 0 && xyz <= 1<<63
}

// keyBits returns the bits a key needs.
func (g grid) keyBits() int {
	return bits.Len64(g.dim[0]*g.dim[1]*g.dim[2] - 1)
}

// gridOf returns the grid over the accepted points' bounds lo..hi, or an
// error wrapping ErrGridTooLarge.
func (f *Filter) gridOf(lo, hi [3]float32) (grid, error) {
	var first, last [3]float64
	for a := range 3 {
		first[a] = voxelIndex(lo[a], f.inv[a])
		last[a] = voxelIndex(hi[a], f.inv[a])
		if !(first[a] > -indexLimit && last[a] < indexLimit) {
			return grid{}, fmt.Errorf("%w: leaf %s = %g m over %s from %g to %g m gives voxel indices %g to %g, not within ±2^62; use a larger leaf or a crop box",
				ErrGridTooLarge, axisNames[a], f.cfg.Leaf[a], axisNames[a], lo[a], hi[a], first[a], last[a])
		}
	}
	g, ok := newGrid(first, last)
	if !ok {
		return grid{}, fmt.Errorf("%w: leaf (%g, %g, %g) m over x [%g, %g] y [%g, %g] z [%g, %g] m spans %.4g × %.4g × %.4g voxels, more than 2^63; use a larger leaf or a crop box",
			ErrGridTooLarge, f.cfg.Leaf[0], f.cfg.Leaf[1], f.cfg.Leaf[2],
			lo[0], hi[0], lo[1], hi[1], lo[2], hi[2], last[0]-first[0]+1, last[1]-first[1]+1, last[2]-first[2]+1)
	}
	return g, nil
}

// guessGrid sets the next cloud's grid from the voxels of this one (the
// reduce phase's bounds), with a margin of an eighth of the extent plus
// guessMargin voxels on every side, so that a cloud like this one needs one
// pass over its points. Without voxels it keeps the old guess.
func (f *Filter) guessGrid(cs []chunkState) {
	var lo, hi [3]float64
	for a := range 3 {
		vlo, vhi := float32(math.Inf(1)), float32(math.Inf(-1))
		for c := range cs {
			vlo, vhi = min(vlo, cs[c].vmin[a]), max(vhi, cs[c].vmax[a])
		}
		if !(vlo <= vhi) {
			return
		}
		lo[a], hi[a] = voxelIndex(vlo, f.inv[a]), voxelIndex(vhi, f.inv[a])
		margin := guessMargin + math.Floor((hi[a]-lo[a])/8)
		lo[a], hi[a] = lo[a]-margin, hi[a]+margin
	}
	g, ok := newGrid(lo, hi)
	if ok && g.keyBits() > maxGuessBits {
		ok = false // a sparse cloud over a huge box: not worth guessing
	}
	f.guess = g
	f.guess.valid = ok
}

// guessMargin is the least margin, in voxels, of a guessed grid; a guessed
// grid has at most maxGuessBits key bits.
const (
	guessMargin  = 4
	maxGuessBits = 48
)

// voxelIndex is PCL's per-axis voxel index, floor(v * inv) with the product
// rounded to float32, as a float64 holding an integer (exact: every float32
// integer is a float64 integer). The explicit float32 conversion forbids
// fusing the multiply into anything wider.
func voxelIndex(v, inv float32) float64 {
	return math.Floor(float64(float32(v * inv)))
}

// floorInt returns floor(p) for |p| < 2^62. It is the hot loops' voxelIndex:
// math.Floor needs SSE4.1, and its fallback call makes the compiler spill
// every live register around it on the default GOAMD64=v1. Truncation is
// exact here (a float32 of magnitude >= 2^23 is an integer, and any integer
// below 2^23 is a float32), so one comparison corrects negative fractions.
func floorInt(p float32) int64 {
	i := int64(p)
	if float32(i) > p {
		i--
	}
	return i
}

// prefixSums turns the chunks' digit counts into scatter offsets: elements
// with a smaller digit go first, and within a digit chunk c's go before chunk
// c+1's, which keeps the sort stable. It reports whether the m elements have
// more than one digit (if not, the pass would not reorder them). Rows are
// walked one at a time: walking a digit down the chunks would touch
// addresses radixSize*4 bytes apart, which share an L1 cache set.
func (f *Filter) prefixSums(m int) bool {
	j := &f.job
	radix := int(j.digitMask) + 1
	hist := f.hist[:j.nChunks]
	base := f.digitBase[:radix]
	clear(base)
	for c := range hist {
		for d, h := range hist[c][:radix] {
			base[d] += h
		}
	}
	var sum uint32
	spread := true
	for d, total := range base {
		if int(total) == m {
			spread = false
		}
		base[d] = sum
		sum += total
	}
	for c := range hist {
		row := hist[c][:radix]
		for d, h := range row {
			row[d] = base[d]
			base[d] += h
		}
	}
	return spread
}
