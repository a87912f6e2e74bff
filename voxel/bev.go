package voxel

import (
	"fmt"
	"math"
	"slices"
)

// BEVChannels is the number of channels of the BEV tensor.
const BEVChannels = 3

// The BEV tensor's channels, in order.
const (
	// ChannelOccupancy is 1 in cells that hold at least one point, else 0.
	ChannelOccupancy = 0
	// ChannelHeight is the highest top among the cell's drawn points,
	// above BEVConfig.GroundZ in metres, clamped to [0, MaxHeight]; 0 in
	// empty cells. A filtered point's top is its voxel's highest point
	// (Points.Top), not its centroid, which lies up to half a leaf lower:
	// an obstacle reads as tall as its highest return.
	ChannelHeight = 1
	// ChannelIntensity is the mean intensity of the cell's points; 0 in
	// empty cells.
	ChannelIntensity = 2
)

// BEVConfig sets up a bird's-eye-view raster. The zero value of each field
// is its default.
//
// The raster is a top-down image of the robot frame (REP-103: x forward,
// y left, z up) with forward pointing up the image:
//
//	                x (forward)
//	                ^
//	row 0       ....|....   x in [MinX + (H-1)·Cell, MinX + H·Cell)
//	 ...            |
//	row H-1     ....|....   x in [MinX, MinX + Cell)
//	       y <------+------  robot at the bottom centre when MinX = 0
//	     (left)   W/2        columns increase to the robot's right (-y)
//
// A point (x, y) falls in row H-1-floor((x-MinX)/Cell) and column
// floor(W/2 - y/Cell), when both are in range; points outside the raster
// are ignored. The boundary between columns W/2-1 and W/2 is y = 0 (for
// odd W, column (W-1)/2 is centred on y = 0). Points come in the clouds'
// frame, which Mount places in the robot frame.
type BEVConfig struct {
	// Channels must be 0 or BEVChannels: occupancy, height, intensity.
	Channels int
	// H and W are the rows and columns; 0 means 128.
	H, W int
	// Cell is a cell's edge in metres; 0 means 0.2.
	Cell float32
	// MinX is the x of the raster's bottom edge in metres; 0 puts the
	// robot on the bottom edge, a negative value shows the area behind it.
	MinX float32
	// GroundZ is the height reference: the ground's z in the robot frame
	// (0 for base_link on the ground; about -1.73 in KITTI's LiDAR frame).
	GroundZ float32
	// Mount moves each point from the clouds' frame into the robot frame
	// before it is drawn; the zero value leaves points where they are
	// (and costs nothing). The filter's voxels stay in the clouds' frame:
	// only their centroids are moved; their tops, which the height
	// channel draws, the filter measures in the robot frame of its own
	// Config.Mount, which must be this one (Fill refuses other tops).
	Mount Mount
	// MaxHeight caps the height channel, in metres above GroundZ; 0 means
	// 3. Points above it still mark their cell occupied; to drop overhangs
	// (ceilings, branches), crop them in the filter's Config.Crop.
	MaxHeight float32
}

// BEV fills BEV tensors from filtered points. It holds preallocated scratch
// memory; use it from one goroutine at a time.
type BEV struct {
	cfg     BEVConfig
	cell    float64
	mounted bool      // cfg.Mount is not the identity
	tf      Transform // cfg.Mount's, when mounted
	count   []uint32  // points per cell
	isum    []float64 // intensity sum per cell
}

// NewBEV checks cfg and preallocates.
func NewBEV(cfg BEVConfig) (*BEV, error) {
	if cfg.Channels == 0 {
		cfg.Channels = BEVChannels
	}
	if cfg.H == 0 {
		cfg.H = 128
	}
	if cfg.W == 0 {
		cfg.W = 128
	}
	if cfg.Cell == 0 {
		cfg.Cell = 0.2
	}
	if cfg.MaxHeight == 0 {
		cfg.MaxHeight = 3
	}
	switch {
	case cfg.Channels != BEVChannels:
		return nil, fmt.Errorf("BEV config: channels %d, only %d (occupancy, height, intensity) is supported", cfg.Channels, BEVChannels)
	case cfg.H < 1 || cfg.W < 1 || cfg.H > 1<<14 || cfg.W > 1<<14:
		return nil, fmt.Errorf("BEV config: size %d × %d cells out of range [1, %d]", cfg.H, cfg.W, 1<<14)
	case !(cfg.Cell > 0) || math.IsInf(float64(cfg.Cell), 0):
		return nil, fmt.Errorf("BEV config: cell %g m must be positive and finite", cfg.Cell)
	case !(cfg.MaxHeight > 0) || math.IsInf(float64(cfg.MaxHeight), 0):
		return nil, fmt.Errorf("BEV config: max height %g m must be positive and finite", cfg.MaxHeight)
	case !finite32(cfg.MinX) || !finite32(cfg.GroundZ):
		return nil, fmt.Errorf("BEV config: min x %g m and ground z %g m must be finite", cfg.MinX, cfg.GroundZ)
	}
	if err := cfg.Mount.check(); err != nil {
		return nil, fmt.Errorf("BEV config: %w", err)
	}
	return &BEV{
		cfg:     cfg,
		cell:    float64(cfg.Cell),
		mounted: !cfg.Mount.IsIdentity(),
		tf:      cfg.Mount.Transform(),
		count:   make([]uint32, cfg.H*cfg.W),
		isum:    make([]float64, cfg.H*cfg.W),
	}, nil
}

func finite32(v float32) bool { return absBits(v) < infBits }

// Config returns the configuration with defaults applied.
func (b *BEV) Config() BEVConfig { return b.cfg }

// CropFarZ bounds CropFor's box in z: points farther than this above or
// below GroundZ, in metres. No robot's sensor sees its surroundings there;
// such a point is a marker or garbage (FLT_MAX for "no return"), whose
// voxel index would fail the whole frame (ErrGridTooLarge).
const CropFarZ = 1000

// CropFarZTilted is CropFarZ for a Mount that tilts the clouds: the
// crop's box in the clouds' frame grows by the band's height times the
// tilt's sine (±1000 m at 8° would keep points 139 m ahead and behind,
// and the filter would sort three times the points), so the band is
// narrower. No ground robot's LiDAR sees a surface 50 m above or below
// the ground within the raster's window; without the mount, such a point
// would mark its cell occupied.
const CropFarZTilted = 50

// CropFor returns a crop box, in the clouds' frame, for a Filter with
// this leaf size whose outside cannot change what Fill writes, but for
// points beyond CropFarZ: the raster's x/y window grown by two leaves. A
// voxel's centroid lies in its cell, one leaf wide, so a voxel with a
// point beyond one leaf of the window lies wholly outside it; the second
// leaf covers float rounding. Cropping so drops far points before the
// filter sorts them, and a garbage point far away cannot fail the frame.
//
// With a Mount, the window (x, y and the z band, in the robot frame) is
// moved into the clouds' frame first and its bounding box grown by the
// leaves there, where the voxels are; a mount with a roll or pitch
// takes the band of CropFarZTilted.
func (b *BEV) CropFor(leaf [3]float32) Box {
	c := b.cfg
	halfW := float32(float64(c.W) / 2 * b.cell)
	maxX := c.MinX + float32(float64(c.H)*b.cell)
	if !b.mounted {
		return Box{
			Min: [3]float32{c.MinX - 2*leaf[0], -halfW - 2*leaf[1], c.GroundZ - CropFarZ},
			Max: [3]float32{maxX + 2*leaf[0], halfW + 2*leaf[1], c.GroundZ + CropFarZ},
		}
	}
	band := float32(CropFarZ)
	if m := c.Mount; m.Roll != 0 || m.Pitch != 0 { // a yaw keeps the band level
		band = CropFarZTilted
	}
	box := b.tf.inverseBox(Box{
		Min: [3]float32{c.MinX, -halfW, c.GroundZ - band},
		Max: [3]float32{maxX, halfW, c.GroundZ + band},
	})
	for a := range 3 {
		box.Min[a] -= 2 * leaf[a]
		box.Max[a] += 2 * leaf[a]
	}
	return box
}

// CropUnder is CropFor with the box's top at ceiling metres above
// GroundZ in the robot frame (ceiling > 0): points above it (a ceiling, an
// overhang the robot passes under) are left out before the filter, so
// they mark no cell. exact reports whether the cut is at ceiling
// everywhere: with a mount that rolls or pitches, the box in the clouds'
// frame is the tilted band's bounding box, whose top keeps points above
// ceiling at some places in the window (farther the more it tilts).
func (b *BEV) CropUnder(leaf [3]float32, ceiling float32) (box Box, exact bool) {
	c := b.cfg
	top := c.GroundZ + ceiling
	if !b.mounted {
		box = b.CropFor(leaf)
		box.Max[2] = top
		return box, true
	}
	halfW := float32(float64(c.W) / 2 * b.cell)
	maxX := c.MinX + float32(float64(c.H)*b.cell)
	band := float32(CropFarZ)
	tilted := c.Mount.Roll != 0 || c.Mount.Pitch != 0
	if tilted {
		band = CropFarZTilted
	}
	box = b.tf.inverseBox(Box{
		Min: [3]float32{c.MinX, -halfW, c.GroundZ - band},
		Max: [3]float32{maxX, halfW, top},
	})
	for a := range 3 {
		box.Min[a] -= 2 * leaf[a]
		if a < 2 || tilted { // level: the top is the ceiling's own height
			box.Max[a] += 2 * leaf[a]
		}
	}
	return box, !tilted
}

// Len returns the tensor length Fill needs: Channels·H·W.
func (b *BEV) Len() int { return BEVChannels * b.cfg.H * b.cfg.W }

// Cell returns the row and column of the cell that holds the robot-frame
// (x, y), and false if the point is outside the raster.
func (b *BEV) Cell(x, y float32) (row, col int, ok bool) {
	return b.cellAt(float64(x), float64(y))
}

func (b *BEV) cellAt(x, y float64) (row, col int, ok bool) {
	u := (x - float64(b.cfg.MinX)) / b.cell
	v := float64(b.cfg.W)/2 - y/b.cell
	if !(u >= 0 && u < float64(b.cfg.H) && v >= 0 && v < float64(b.cfg.W)) {
		return 0, 0, false // also NaN
	}
	return b.cfg.H - 1 - int(u), int(v), true
}

// place returns where the cloud point p lies in the robot frame: x and y
// in float64, as the cell arithmetic takes them, z rounded to float32, as
// the height channel holds it. A non-finite coordinate makes x or y
// non-finite too (every row of a rotation has a nonzero entry, and 0·Inf
// is NaN), which no cell holds.
// Loops over many points write it out instead (x, y, z from p, then
// placeMounted when mounted), which the compiler inlines: a call per
// point doubled GroundZEstimate's time with no mount at all.
func (b *BEV) place(p Point) (x, y float64, z float32) {
	if b.mounted {
		return b.placeMounted(p)
	}
	return float64(p.X), float64(p.Y), p.Z
}

func (b *BEV) placeMounted(p Point) (x, y float64, z float32) {
	rx, ry, rz := b.tf.Apply(float64(p.X), float64(p.Y), float64(p.Z))
	return rx, ry, float32(rz)
}

// Holds reports whether Fill draws the cloud point p: its z and intensity
// are finite and it lies inside the raster once Mount has placed it.
func (b *BEV) Holds(p Point) bool {
	if !finite32(p.Z) || !finite32(p.I) {
		return false
	}
	x, y, _ := b.place(p)
	_, _, ok := b.cellAt(x, y)
	return ok
}

// LevelAbove reports whether the points of pts that Fill draws, at least
// minPoints of them, all lie in one level slab: heights above GroundZ
// (placed by Mount, as Fill places them) from lo to at most lo + span,
// with lo at least minHeight; lo is returned. A planar LiDAR's scan
// looks so (every return at the scanner's height); a 3D LiDAR's cloud,
// which shows the ground near it, does not, and the loop ends at its
// first point below minHeight. It does not allocate.
func (b *BEV) LevelAbove(pts *Points, minHeight, span float32, minPoints int) (lo float32, ok bool) {
	lo, hi, n := float32(math.Inf(1)), float32(math.Inf(-1)), 0
	for _, p := range pts.P {
		if !finite32(p.Z) || !finite32(p.I) {
			continue
		}
		x, y, z := b.place(p)
		if _, _, in := b.cellAt(x, y); !in {
			continue
		}
		h := z - b.cfg.GroundZ
		lo, hi = min(lo, h), max(hi, h)
		if lo < minHeight || hi-lo > span {
			return lo, false
		}
		n++
	}
	return lo, n >= minPoints
}

// CellCenter returns the robot-frame x and y of a cell's centre.
func (b *BEV) CellCenter(row, col int) (x, y float32) {
	x = b.cfg.MinX + float32(float64(b.cfg.H-row)-0.5)*b.cfg.Cell
	y = float32((float64(b.cfg.W)/2 - float64(col) - 0.5) * b.cell)
	return x, y
}

// Fill writes the BEV tensor of pts into dst, laid out [channel][row][col]
// (CHW, row-major), overwriting all of it. dst must have length Len(); it is
// typically a model's input tensor. Points with a non-finite field are
// ignored. A point's height is its top (Points.Top) when pts has tops,
// which must then have been measured with this raster's Mount; else its
// own z. Fill does not allocate.
func (b *BEV) Fill(pts *Points, dst []float32) error {
	if len(dst) != b.Len() {
		return fmt.Errorf("BEV fill: tensor has %d elements, want %d × %d × %d = %d", len(dst), BEVChannels, b.cfg.H, b.cfg.W, b.Len())
	}
	tops, err := b.topsOf(pts)
	if err != nil {
		return err
	}
	plane := b.cfg.H * b.cfg.W
	occ := dst[ChannelOccupancy*plane : (ChannelOccupancy+1)*plane]
	height := dst[ChannelHeight*plane : (ChannelHeight+1)*plane]
	inten := dst[ChannelIntensity*plane : (ChannelIntensity+1)*plane]
	clear(dst)
	clear(b.count)
	clear(b.isum)
	if b.mounted {
		b.drawMounted(pts, tops, occ, height)
	} else {
		// The identity mount's loop, apart: a call inside it, even on a
		// branch never taken, made the compiler keep the loop's state in
		// memory, and Fill took 2.4 times as long (BenchmarkBEV).
		ground, maxH := b.cfg.GroundZ, b.cfg.MaxHeight
		for i, p := range pts.P {
			if !finite32(p.Z) || !finite32(p.I) {
				continue
			}
			row, col, ok := b.cellAt(float64(p.X), float64(p.Y))
			if !ok {
				continue
			}
			k := row*b.cfg.W + col
			z := p.Z
			if tops != nil {
				z = tops[i]
			}
			h := min(max(z-ground, 0), maxH)
			occ[k] = 1
			height[k] = max(height[k], h)
			b.count[k]++
			b.isum[k] += float64(p.I)
		}
	}
	for k, n := range b.count {
		if n > 0 {
			inten[k] = float32(b.isum[k] / float64(n))
		}
	}
	return nil
}

// topsOf returns pts's tops for Fill, nil when it has none, or an error
// when they cannot be this raster's.
func (b *BEV) topsOf(pts *Points) ([]float32, error) {
	switch {
	case len(pts.Top) == 0:
		return nil, nil
	case len(pts.Top) != len(pts.P):
		return nil, fmt.Errorf("BEV fill: %d tops for %d points", len(pts.Top), len(pts.P))
	case pts.Mount != b.cfg.Mount:
		return nil, fmt.Errorf("BEV fill: the points' tops were measured with mount %+v, the raster's is %+v: give the filter's Config.Mount the BEV's", pts.Mount, b.cfg.Mount)
	}
	return pts.Top, nil
}

// drawMounted is Fill's per-point loop for a mounted BEV: each point
// placed in the robot frame first (its top already is, when it has one).
func (b *BEV) drawMounted(pts *Points, tops, occ, height []float32) {
	ground, maxH := b.cfg.GroundZ, b.cfg.MaxHeight
	for i, p := range pts.P {
		if !finite32(p.Z) || !finite32(p.I) {
			continue
		}
		x, y, z := b.placeMounted(p)
		row, col, ok := b.cellAt(x, y)
		if !ok {
			continue
		}
		if tops != nil {
			z = tops[i]
		}
		k := row*b.cfg.W + col
		h := min(max(z-ground, 0), maxH)
		occ[k] = 1
		height[k] = max(height[k], h)
		b.count[k]++
		b.isum[k] += float64(p.I)
	}
}

// GroundPercentile is the share of a cloud's voxels, lowest first, under
// GroundZEstimate's answer: below every obstacle a robot's LiDAR sees
// ground around it, and most of its voxels are that ground, so a low
// percentile of their heights is the ground's, above the few stray
// returns below it (puddle reflections, multipath).
const GroundPercentile = 0.1

// GroundZEstimate estimates where the ground is in the robot frame (the
// clouds' frame moved by Mount): the GroundPercentile-th z among the
// voxels of pts inside the raster's x/y window, sampled evenly to at most len(scratch) of them (scratch is
// overwritten; it is caller-owned so that this does not allocate). It
// returns the z and how many voxels it looked at; with none, z is NaN.
// A GroundZ far from it means the raster measures heights from the
// wrong plane: obstacles lower than the error read as flat, or flat
// ground as an obstacle.
func (b *BEV) GroundZEstimate(pts *Points, scratch []float32) (z float32, n int) {
	if len(scratch) == 0 {
		return float32(math.NaN()), 0
	}
	// The raster's x/y window as a box (Cell's test without its
	// divisions; a voxel on an edge may go either way, which cannot move
	// a percentile of hundreds).
	c := b.cfg
	x0, x1 := float64(c.MinX), float64(c.MinX+float32(float64(c.H)*b.cell))
	halfW := float64(float32(float64(c.W) / 2 * b.cell))
	inside := func(p Point) (z float32, ok bool) {
		if !finite32(p.Z) || !finite32(p.I) { // as Fill
			return 0, false
		}
		x, y, z := float64(p.X), float64(p.Y), p.Z
		if b.mounted {
			x, y, z = b.placeMounted(p)
		}
		return z, x >= x0 && x < x1 && y > -halfW && y <= halfW
	}
	// Two passes, so that the sample spreads over the raster's voxels
	// only: most of a spinning LiDAR's lie outside it.
	total := 0
	for _, p := range pts.P {
		if _, ok := inside(p); ok {
			total++
		}
	}
	stride := max(1, (total+len(scratch)-1)/len(scratch)) // ceil
	k := 0
	for _, p := range pts.P {
		z, ok := inside(p)
		if !ok {
			continue
		}
		if k%stride == 0 && n < len(scratch) {
			scratch[n] = z
			n++
		}
		k++
	}
	if n == 0 {
		return float32(math.NaN()), 0
	}
	s := scratch[:n]
	slices.Sort(s)
	return s[int(GroundPercentile*float64(n-1))], n
}
