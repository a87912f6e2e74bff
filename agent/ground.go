package agent

import (
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/zerohop/zerohop/voxel"
)

// groundWatch checks, about once a second, that the ground in the
// filtered clouds lies where the BEV raster measures heights from
// (voxel.BEVConfig.GroundZ, minus --lidar-height) and is level there
// (--lidar-rpy), and says so in the log when it does not. A wrong
// --lidar-height is silent otherwise: too low (clouds in the LiDAR's own
// frame taken as robot-frame ones), every obstacle shorter than the
// sensor reads as flat and the robot drives into it; too high, flat
// ground reads as obstacles and it will not move. A wrong pitch or roll
// tilts the ground: rising, it reads as obstacles ahead; sinking, it
// hides them. The check only logs: an estimate from the scene is advice
// (a robot on a ramp sees a tilted ground), and the robot's geometry is
// the user's to set.
//
// It is used from the pipeline's goroutine only and allocates nothing
// but on the frames it logs on.
type groundWatch struct {
	bev     *voxel.BEV
	log     *zap.Logger
	scratch [groundSample]float32
	plane   voxel.GroundScratch
	next    time.Time // the next check's time
	height  streak    // the ground's height, way -1 below the BEV's, +1 above
	tilt    streak    // the ground's tilt, way 1
	agreed  bool      // an agreement was logged since the last warning
	// foundZ and tiltDeg (float32 bits; NaN until a check judged) and
	// mismatch are the last verdicts, for /metrics: the only fields read
	// elsewhere.
	foundZ   atomic.Uint32
	tiltDeg  atomic.Uint32
	mismatch atomic.Bool
}

// streak follows one kind of disagreement over the checks.
type streak struct {
	misses   int  // checks in a row that disagreed, the same way
	way      int8 // the way they disagreed
	warned   bool // this run has warned
	standing bool // a warning was logged and no agreement since
}

// disagree counts a check that disagreed the given way and reports
// whether to warn now: on the groundMisses-th in a row the same way,
// once per run. A run that changes way starts over (a ground that moves
// from below the BEV's to above it is new news).
func (s *streak) disagree(way int8) bool {
	if s.misses == 0 || way != s.way {
		s.misses, s.way, s.warned = 0, way, false
	}
	if s.misses++; s.misses < groundMisses || s.warned {
		return false
	}
	s.warned = true
	return true
}

// agree ends a run and lifts its warning.
func (s *streak) agree() { s.misses, s.warned, s.standing = 0, false, false }

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
	// groundAgreeM: a warning is lifted only once the two agree within
	// this, less than the tolerance, so that one a little under it does
	// not lift a warning that the next check raises again.
	groundAgreeM = 0.2
	// groundTiltToleranceDeg is the tilt that is reported: above a
	// road's camber (2 %, 1.1°), while at 1.5° the ground 7.6 m ahead
	// already stands 0.2 m high, an obstacle to the reference model.
	groundTiltToleranceDeg = 1.5
	// groundTiltAgreeDeg: a tilt warning is lifted below this.
	groundTiltAgreeDeg = 1.0
	// groundMisses checks in a row must disagree before the warning: one
	// scene (the robot facing a wall, on a ramp) must not raise it.
	groundMisses = 5
)

func newGroundWatch(bev *voxel.BEV, log *zap.Logger) *groundWatch {
	g := &groundWatch{bev: bev, log: log}
	g.foundZ.Store(math.Float32bits(float32(math.NaN())))
	g.tiltDeg.Store(math.Float32bits(float32(math.NaN())))
	return g
}

// FoundZ is the ground's z under the LiDAR, levelled, in the frame the
// BEV measures heights in (minus the LiDAR's height, when right), at the
// last check that had enough voxels to judge, NaN before one. Safe for
// concurrent use.
func (g *groundWatch) FoundZ() float64 { return float64(math.Float32frombits(g.foundZ.Load())) }

// TiltDeg is the ground's tilt in degrees at the last check that found
// its plane, NaN before one. Safe for concurrent use.
func (g *groundWatch) TiltDeg() float64 { return float64(math.Float32frombits(g.tiltDeg.Load())) }

// Mismatch is true while a warning stands: the clouds' ground and the
// BEV's have differed by more than groundToleranceM, or the ground has
// tilted more than groundTiltToleranceDeg, for groundMisses checks in a
// row, and not agreed since. Safe for concurrent use.
func (g *groundWatch) Mismatch() bool { return g.mismatch.Load() }

const toDeg = 180 / math.Pi

// observe checks pts, the filtered cloud of the frame just planned, when a
// check is due at now.
func (g *groundWatch) observe(now time.Time, pts *voxel.Points) {
	if now.Before(g.next) {
		return
	}
	g.next = now.Add(groundEvery)
	cfg := g.bev.Config()
	mount := cfg.Mount
	// The ground's plane, where one is found: its height under the
	// LiDAR along its normal is right whatever the tilt; else the 10th
	// percentile of the window's heights (a scene too small for a plane).
	plane, havePlane := g.bev.GroundPlaneEstimate(pts, &g.plane)
	var z float32
	var n int
	if havePlane {
		z, n = float32(-plane.HeightAbove(mount.X, mount.Y, 0)), plane.Tiles
	} else if z, n = g.bev.GroundZEstimate(pts, g.scratch[:]); n < groundMinVoxels {
		return
	}
	g.foundZ.Store(math.Float32bits(z))
	bevZ := cfg.GroundZ
	lidarHeight := 0 - bevZ // as bevConfig set it; 0 - 0 is +0
	off := z - bevZ
	// Between agreeing and disagreeing a check says nothing: it neither
	// lifts a warning nor counts towards one, so that a ground at the
	// tolerance does not warn and lift, warn and lift.
	heightAgrees := math.Abs(float64(off)) <= groundAgreeM
	warnHeight := false
	switch {
	case heightAgrees:
		g.height.agree()
	case off < -groundToleranceM:
		warnHeight = g.height.disagree(-1)
	case off > groundToleranceM:
		warnHeight = g.height.disagree(1)
	}
	tilted, warnTilt := false, false
	var tilt float64
	if havePlane {
		tilt = plane.Tilt() * toDeg
		g.tiltDeg.Store(math.Float32bits(float32(tilt)))
		switch tilted = tilt > groundTiltToleranceDeg; {
		case tilted:
			warnTilt = g.tilt.disagree(1)
		case tilt <= groundTiltAgreeDeg:
			g.tilt.agree()
		}
	}
	// A tilt (judged now, on its way to a warning, or warned about)
	// distorts the ground's height everywhere but under the LiDAR, and its
	// warning says what to fix first: the height's waits, and comes if it
	// outlasts the tilt.
	if warnHeight && (tilted || g.tilt.misses > 0 || g.tilt.standing) {
		g.height.warned, warnHeight = false, false
	}
	g.height.standing = g.height.standing || warnHeight
	g.tilt.standing = g.tilt.standing || warnTilt
	g.mismatch.Store(g.height.standing || g.tilt.standing)
	judged := zap.Int("voxels", n)
	if havePlane {
		judged = zap.Int("tiles", n)
	}
	heightFields := func(more ...zap.Field) []zap.Field {
		return append([]zap.Field{zap.Float32("ground_found_z_m", z), zap.Float32("ground_z_m", bevZ), zap.Float32("lidar_height_m", lidarHeight)}, more...)
	}
	switch {
	case warnTilt:
		g.agreed = false
		slopeAhead, slopeLeft := math.Atan(plane.SlopeX)*toDeg, math.Atan(plane.SlopeY)*toDeg
		g.log.Warn("ground check: the clouds' ground is not level in the robot frame, so where it rises it reads as obstacles and where it sinks obstacles vanish: are the LiDAR's angles (--lidar-rpy) right? suggested_lidar_rpy is the mount that levels it (on a ramp or a slope the scene is level, not the robot: judge on flat ground)",
			zap.Float64("ground_tilt_deg", tilt), zap.Float64("rising_ahead_deg", slopeAhead), zap.Float64("rising_left_deg", slopeLeft),
			zap.String("lidar_rpy", rpyFlag(mount)), zap.String("suggested_lidar_rpy", rpyFlag(mount.Levelled(plane))),
			zap.Float32("suggested_lidar_height_m", max(0, -z)), judged, zap.Int("checks", g.tilt.misses))
	case warnHeight && off < 0:
		g.agreed = false
		g.log.Warn("ground check: the clouds' ground lies below where the BEV raster measures heights from, so obstacles lower than the difference read as flat ground: are the clouds in the LiDAR's own frame (as ROS 2 drivers and KITTI give them)? Set --lidar-height to the sensor's height above the ground",
			heightFields(zap.Float32("suggested_lidar_height_m", max(0, -z)), judged, zap.Int("checks", g.height.misses), zap.Float32("below_m", -off))...)
	case warnHeight:
		g.agreed = false
		g.log.Warn("ground check: the clouds' ground lies above where the BEV raster measures heights from, so flat ground reads as obstacles: is --lidar-height too large (0 for clouds in a robot frame with its origin on the ground)?",
			heightFields(zap.Float32("suggested_lidar_height_m", max(0, -z)), judged, zap.Int("checks", g.height.misses), zap.Float32("above_m", off))...)
	case heightAgrees && g.tilt.misses == 0 && !g.tilt.standing && !g.agreed:
		g.agreed = true
		if !havePlane { // the tilt was not measured
			g.log.Info("ground check: the clouds' ground lies where the BEV raster measures heights from", heightFields(judged)...)
			break
		}
		g.log.Info("ground check: the clouds' ground lies where the BEV raster measures heights from",
			heightFields(zap.Float64("ground_tilt_deg", tilt), judged)...)
	}
}

// rpyFlag writes m's angles as --lidar-rpy takes them, in degrees.
func rpyFlag(m voxel.Mount) string {
	return fmt.Sprintf("%.2fdeg,%.2fdeg,%.2fdeg", m.Roll*toDeg, m.Pitch*toDeg, m.Yaw*toDeg)
}
