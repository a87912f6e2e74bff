package voxel

import (
	"errors"
	"fmt"
	"math"
	"runtime"
)

// Box is an axis-aligned box in metres, inclusive on every face like
// pcl::CropBox. A bound may be ±Inf to leave that side open (for example a
// height band only: x and y from -Inf to +Inf).
type Box struct {
	Min, Max [3]float32
}

// Config sets up a Filter. The zero value of each optional field is its
// default.
type Config struct {
	// Leaf is the voxel edge along x, y and z in metres. Each must be positive
	// and finite and have a finite float32 inverse.
	Leaf [3]float32
	// MinPoints is the fewest points a voxel needs to yield an output point
	// (PCL's setMinimumPointsNumberPerVoxel). 0 means 1.
	MinPoints int
	// Crop, when non-nil, drops points outside the box before voxelising. The
	// box is copied by NewFilter.
	Crop *Box
	// Workers is how many goroutines share a large cloud, the caller's
	// included. 0 means min(GOMAXPROCS, 2); it is never more than GOMAXPROCS.
	// 1 runs everything on the calling goroutine and starts no helpers.
	Workers int
	// Mount is the robot frame Points.Top is measured in: each voxel's top
	// is the highest robot-frame z of its points. Give it the BEV's
	// Mount (BEVConfig.Mount), which Fill checks; the zero value measures
	// tops in the clouds' own frame. Voxels and centroids stay in the
	// clouds' frame whatever it is.
	Mount Mount
	// Ceiling, when non-nil, drops every point whose robot-frame z (the
	// same z a top is measured with) is above it, before voxelising:
	// exactly, however Mount tilts the clouds, where a crop box in the
	// clouds' frame can only bound a tilted ceiling. The value is copied
	// by NewFilter and must be finite.
	Ceiling *float32
}

// ErrGridTooLarge is wrapped by the error Run returns when the voxel grid
// spanned by a cloud does not fit 64-bit keys (a leaf too small for the
// cloud's extent, or absurd coordinates). The filter never falls back to
// passing the input through.
var ErrGridTooLarge = errors.New("voxel grid too large for 64-bit keys")

// ErrClosed is returned by Run after Close.
var ErrClosed = errors.New("voxel filter closed")

// axisNames labels the axes in error messages.
var axisNames = [3]string{"x", "y", "z"}

// maxWorkers bounds Workers so that chunk numbers fit the team's state word.
const maxWorkers = 64

// resolved returns the configuration with defaults applied, or an error
// naming the offending field.
func (c Config) resolved() (Config, error) {
	for a, l := range c.Leaf {
		if !(l > 0) || math.IsInf(float64(l), 0) || math.IsInf(float64(1/l), 0) {
			return c, fmt.Errorf("voxel config: leaf %s = %g m: must be positive, finite and have a finite inverse", axisNames[a], l)
		}
	}
	if c.MinPoints < 0 {
		return c, fmt.Errorf("voxel config: min points %d is negative", c.MinPoints)
	}
	if c.MinPoints == 0 {
		c.MinPoints = 1
	}
	if c.Crop != nil {
		b := *c.Crop
		for a := range 3 {
			lo, hi := b.Min[a], b.Max[a]
			if lo != lo || hi != hi || !(lo <= hi) {
				return c, fmt.Errorf("voxel config: crop %s range [%g, %g] is empty or NaN", axisNames[a], lo, hi)
			}
		}
		c.Crop = &b
	}
	if err := c.Mount.check(); err != nil {
		return c, fmt.Errorf("voxel config: %w", err)
	}
	if c.Ceiling != nil {
		v := *c.Ceiling
		if !finite32(v) {
			return c, fmt.Errorf("voxel config: ceiling %g m must be finite", v)
		}
		c.Ceiling = &v
	}
	procs := runtime.GOMAXPROCS(0)
	switch {
	case c.Workers < 0:
		return c, fmt.Errorf("voxel config: workers %d is negative", c.Workers)
	case c.Workers == 0:
		c.Workers = min(procs, 2)
	case c.Workers > maxWorkers:
		return c, fmt.Errorf("voxel config: workers %d exceeds %d", c.Workers, maxWorkers)
	}
	c.Workers = max(1, min(c.Workers, procs))
	return c, nil
}
