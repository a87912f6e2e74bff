package agent

import (
	"math"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/zerohop/zerohop/voxel"
)

// groundWatch checks, about once a second, that the ground in the
// filtered clouds lies where the BEV raster measures heights from
// (voxel.BEVConfig.GroundZ, minus --lidar-height), and says so in the log
// when it does not. A wrong --lidar-height is silent otherwise: too low
// (clouds in the LiDAR's own frame taken as robot-frame ones), every
// obstacle shorter than the sensor reads as flat and the robot drives
// into it; too high, flat ground reads as obstacles and it will not
// move. The check only logs: an estimate from the scene is advice, and
// the robot's geometry is the user's to set.
//
// It is used from the pipeline's goroutine only and allocates nothing
// but on the frames it logs on.
type groundWatch struct {
	bev     *voxel.BEV
	log     *zap.Logger
	scratch [groundSample]float32
	next    time.Time // the next check's time
	misses  int       // checks in a row that disagreed, the same way
	below   bool      // the way they disagreed: the ground lies below the BEV's
	warned  bool      // a warning is standing: the next agreement says so
	agreed  bool      // an agreement was logged since the last warning
	// foundZ (float32 bits; NaN until a check judged) and mismatch are
	// the last verdict, for /metrics: the only fields read elsewhere.
	foundZ   atomic.Uint32
	mismatch atomic.Bool
}

const (
	// groundEvery spaces the checks: the ground does not move between
	// frames, and a check sorts groundSample heights.
	groundEvery = time.Second
	// groundSample voxels are looked at per check.
	groundSample = 512
	// groundMinVoxels is the fewest raster voxels a check judges on: a
	// LiDAR that sees less of its surroundings cannot say where the
	// ground is (and a blind one is sawSomething's business).
	groundMinVoxels = 64
	// groundToleranceM is the disagreement, in metres, that is reported:
	// above a rough floor's bumps and a kerb, below the reference model's
	// obstacle height plus a margin (0.2 m), so that a ground taken too
	// high by more than this hides real obstacles.
	groundToleranceM = 0.3
	// groundMisses checks in a row must disagree before the warning: one
	// scene (the robot facing a wall, on a ramp) must not raise it.
	groundMisses = 5
)

func newGroundWatch(bev *voxel.BEV, log *zap.Logger) *groundWatch {
	g := &groundWatch{bev: bev, log: log}
	g.foundZ.Store(math.Float32bits(float32(math.NaN())))
	return g
}

// FoundZ is the ground's z in the clouds' frame at the last check that
// had enough voxels to judge, NaN before one. Safe for concurrent use.
func (g *groundWatch) FoundZ() float64 { return float64(math.Float32frombits(g.foundZ.Load())) }

// Mismatch is true while the warning stands: the clouds' ground and the
// BEV's have differed by more than groundToleranceM for groundMisses
// checks in a row, and not agreed since. Safe for concurrent use.
func (g *groundWatch) Mismatch() bool { return g.mismatch.Load() }

// observe checks pts, the filtered cloud of the frame just planned, when a
// check is due at now.
func (g *groundWatch) observe(now time.Time, pts *voxel.Points) {
	if now.Before(g.next) {
		return
	}
	g.next = now.Add(groundEvery)
	z, n := g.bev.GroundZEstimate(pts, g.scratch[:])
	if n < groundMinVoxels {
		return
	}
	g.foundZ.Store(math.Float32bits(z))
	bevZ := g.bev.Config().GroundZ
	lidarHeight := 0 - bevZ // as bevConfig set it; 0 - 0 is +0
	off := z - bevZ
	if math.Abs(float64(off)) <= groundToleranceM {
		g.misses = 0
		if g.warned || !g.agreed {
			g.warned, g.agreed = false, true
			g.mismatch.Store(false)
			g.log.Info("ground check: the clouds' ground lies where the BEV raster measures heights from",
				zap.Float32("ground_found_z_m", z), zap.Float32("ground_z_m", bevZ), zap.Float32("lidar_height_m", lidarHeight), zap.Int("voxels", n))
		}
		return
	}
	// A run of disagreements is one way: a ground that moves from below
	// the BEV's to above it (a ramp, a sensor knocked loose) is a
	// new run, and warns again with the new suggestion.
	if below := off < 0; g.misses == 0 || below != g.below {
		g.misses, g.below = 0, below
		g.warned = false
	}
	if g.misses++; g.misses < groundMisses || g.warned {
		return
	}
	g.warned, g.agreed = true, false
	g.mismatch.Store(true)
	suggest := max(0, -z)
	fields := []zap.Field{zap.Float32("ground_found_z_m", z), zap.Float32("ground_z_m", bevZ), zap.Float32("lidar_height_m", lidarHeight),
		zap.Float32("suggested_lidar_height_m", suggest), zap.Int("voxels", n), zap.Int("checks", g.misses)}
	if off < 0 {
		g.log.Warn("ground check: the clouds' ground lies below where the BEV raster measures heights from, so obstacles lower than the difference read as flat ground: are the clouds in the LiDAR's own frame (as ROS 2 drivers and KITTI give them)? Set --lidar-height to the sensor's height above the ground",
			append(fields, zap.Float32("below_m", -off))...)
		return
	}
	g.log.Warn("ground check: the clouds' ground lies above where the BEV raster measures heights from, so flat ground reads as obstacles: is --lidar-height too large (0 for clouds in a robot frame with its origin on the ground)?",
		append(fields, zap.Float32("above_m", off))...)
}
