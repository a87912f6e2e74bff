package sensor

import (
	"encoding/binary"
	"fmt"
	"math"
)

// SyntheticConfig configures NewSynthetic. Every zero field takes the default
// named in its comment.
type SyntheticConfig struct {
	Rate   float64 // frames per second of scene time, t = seq / Rate; 0 → 30
	Frames uint64  // number of frames; 0 → endless

	// LiDAR: a spinning multi-beam scanner at (0, 0, LidarHeight).
	Beams           int     // 0 → 64
	AzimuthSteps    int     // columns per revolution; 0 → 1800 (0.2°)
	ElevationMaxDeg float64 // top beam; if both are 0 → +2 (HDL-64E)
	ElevationMinDeg float64 // bottom beam; if both are 0 → -24.8
	MaxRange        float64 // metres; 0 → 80. A ray with no hit within it yields no point.
	LidarHeight     float64 // metres above ground; 0 → 1.0 (0.3 when Planar)
	// Planar: a planar (2D) LiDAR, as a robot's laser scanner, instead:
	// one level beam (Beams and the elevations are then neither checked
	// nor used), every point at LidarHeight, none on the ground; the
	// source says so (Planar), so that the camera marks its clouds.
	Planar bool

	// Camera: a forward-looking pinhole camera at (0, 0, CameraHeight).
	ImageWidth       int     // pixels; 0 → 1280
	ImageHeight      int     // pixels; 0 → 720
	HorizontalFOVDeg float64 // 0 → 90
	CameraHeight     float64 // metres above ground; 0 → 0.8
	// CameraPitchDownDeg tilts the camera towards the ground; 0 → 10. (A
	// level camera is not expressible; use a tiny value such as 1e-9.)
	CameraPitchDownDeg float64
	Encoding           ImageEncoding // 0 → rgb8
	// NoImage: no camera: MaxImageBytes is 0 and FillImage returns
	// ErrNotProvided, as a replay folder without images; for LiDAR-only
	// robots. The camera fields above are then neither checked nor used,
	// and no image tables are built; the clouds are the same bytes as
	// with the camera.
	NoImage bool
}

// Limits on SyntheticConfig that keep the tables a sensible size.
const (
	maxSyntheticRays   = 1 << 22 // beams × azimuth steps
	maxSyntheticPixels = 1 << 25 // width × height
)

func (c SyntheticConfig) withDefaults() SyntheticConfig {
	def := func(v *float64, d float64) {
		if *v == 0 {
			*v = d
		}
	}
	defInt := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.Rate, 30)
	defInt(&c.AzimuthSteps, 1800)
	if c.Planar {
		c.Beams, c.ElevationMaxDeg, c.ElevationMinDeg = 1, 0, 0
		def(&c.LidarHeight, 0.3)
	}
	defInt(&c.Beams, 64)
	if c.ElevationMaxDeg == 0 && c.ElevationMinDeg == 0 && !c.Planar {
		c.ElevationMaxDeg, c.ElevationMinDeg = 2, -24.8
	}
	def(&c.MaxRange, 80)
	def(&c.LidarHeight, 1.0)
	defInt(&c.ImageWidth, 1280)
	defInt(&c.ImageHeight, 720)
	def(&c.HorizontalFOVDeg, 90)
	def(&c.CameraHeight, 0.8)
	def(&c.CameraPitchDownDeg, 10)
	if c.Encoding == 0 {
		c.Encoding = EncodingRGB8
	}
	return c
}

func (c SyntheticConfig) validate() error {
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	type check struct {
		ok   bool
		what string
		val  any
		want string
	}
	checks := []check{
		{finite(c.Rate) && c.Rate > 0, "Rate", c.Rate, "> 0"},
		{c.Beams > 0 && c.AzimuthSteps > 0 && c.Beams <= maxSyntheticRays/c.AzimuthSteps,
			"Beams × AzimuthSteps", fmt.Sprintf("%d × %d", c.Beams, c.AzimuthSteps), fmt.Sprintf("both > 0, product <= %d", maxSyntheticRays)},
		{finite(c.ElevationMaxDeg) && c.ElevationMaxDeg < 90, "ElevationMaxDeg", c.ElevationMaxDeg, "< 90"},
		{finite(c.ElevationMinDeg) && c.ElevationMinDeg > -90 &&
			(c.ElevationMinDeg < c.ElevationMaxDeg || (c.Beams == 1 && c.ElevationMinDeg == c.ElevationMaxDeg)),
			"ElevationMinDeg", c.ElevationMinDeg, "> -90 and below ElevationMaxDeg"},
		{finite(c.MaxRange) && c.MaxRange > 0, "MaxRange", c.MaxRange, "> 0"},
		{finite(c.LidarHeight) && c.LidarHeight > 0 && c.LidarHeight < wallHeight, "LidarHeight", c.LidarHeight, "in (0, 3) m, between ground and wall tops"},
	}
	if !c.NoImage { // without a camera its fields are not used
		checks = append(checks, []check{
			{c.ImageWidth > 0 && c.ImageHeight > 0 && c.ImageWidth <= maxSyntheticPixels/c.ImageHeight,
				"ImageWidth × ImageHeight", fmt.Sprintf("%d × %d", c.ImageWidth, c.ImageHeight), fmt.Sprintf("both > 0, product <= %d", maxSyntheticPixels)},
			{finite(c.HorizontalFOVDeg) && c.HorizontalFOVDeg > 0 && c.HorizontalFOVDeg < 180, "HorizontalFOVDeg", c.HorizontalFOVDeg, "in (0, 180)"},
			{finite(c.CameraHeight) && c.CameraHeight > 0 && c.CameraHeight < wallHeight, "CameraHeight", c.CameraHeight, "in (0, 3) m, between ground and wall tops"},
			{finite(c.CameraPitchDownDeg) && c.CameraPitchDownDeg > -90 && c.CameraPitchDownDeg < 90, "CameraPitchDownDeg", c.CameraPitchDownDeg, "in (-90, 90)"},
			{c.Encoding.Valid(), "Encoding", c.Encoding, "rgb8, bgr8 or mono8"},
		}...)
	}
	for _, ch := range checks {
		if !ch.ok {
			return fmt.Errorf("synthetic: config %s = %v: want %s", ch.what, ch.val, ch.want)
		}
	}
	return nil
}

// Synthetic renders a fixed corridor scene with one moving obstacle and a
// hazard marking on the ground, as a function of scene time t = seq / Rate:
//
//   - ground plane z = 0; side walls (3 m high) with inner faces at y = ±4,
//     end walls at x = 40 and x = -20, so every LiDAR ray of the default
//     geometry hits something; four static boxes (x = 12, 18, 26, -6);
//   - the obstacle, a 0.6 × 0.6 × 1.0 m box at x = 4 whose centre swings
//     between y = -3 and +3 with a 6 s period (sinusoidal, y = 0 at t = 0);
//   - the hazard, a 1.5 × 1.0 m orange-red rectangle flat on the ground at
//     x = 2.8, y = +1 for the first 4 s of every 8 s and y = -1 for the rest.
//     It is paint: the LiDAR sees ground there (same z, same intensity).
//
// The LiDAR cloud lists points column by column (azimuth 0 = +x, counter-
// clockwise, as seen from above), top beam first within a column. Rays with no
// hit within MaxRange are omitted (like a real scanner without an echo), so
// the count can be below MaxPoints. Intensity is constant per material:
// ground 0.20, wall 0.45, box 0.60, obstacle 0.85.
//
// The static part of the scene is ray cast once, at construction; each frame
// copies it and re-casts only the rays and pixels near the obstacle and the
// hazard (see BenchmarkSyntheticReference for the brute-force cost).
// A Synthetic is read-only after construction and safe for concurrent use.
type Synthetic struct {
	cfg    SyntheticConfig
	static []aabb

	// LiDAR. Ray k = j*beams + i is beam i of azimuth column j; its unit
	// direction is (cosE[i]·cosA[j], cosE[i]·sinA[j], sinE[i]).
	lidarZ     float64
	cosE, sinE []float64
	cosA, sinA []float64
	rayT       []float64  // static hit distance per ray, +Inf for none
	rayMat     []material // static material per ray
	staticPts  []byte     // static points in output order, misses omitted
	colOff     []int      // column j's static points are staticPts[colOff[j]:colOff[j+1]]

	// Camera. The ray through pixel (u, v) is (rowDX[v], colDY[u], rowDZ[v]).
	cam          PinholeCamera
	rowDX, rowDZ []float64
	colDY        []float64
	rowGroundT   []float64 // distance to the ground along row v's rays; +Inf above the horizon
	rowGroundX   []float64 // x of that ground hit (the same for the whole row)
	pixT         []float64 // static hit distance per pixel
	pixMat       []material
	background   []byte // the static image in cfg.Encoding
	bpp          int
}

// NewSynthetic builds the scene and its ray tables. It costs one full ray
// cast of the static scene (tens of milliseconds at the default sizes).
func NewSynthetic(cfg SyntheticConfig) (*Synthetic, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Synthetic{cfg: cfg, static: staticScene(), lidarZ: cfg.LidarHeight, bpp: cfg.Encoding.BytesPerPixel()}
	s.initLidar()
	if !cfg.NoImage {
		s.initCamera()
	}
	return s, nil
}

// MaxPoints is Beams × AzimuthSteps.
func (s *Synthetic) MaxPoints() int { return s.cfg.Beams * s.cfg.AzimuthSteps }

// MaxImageBytes is width × height × bytes per pixel of the configured
// encoding; 0 with NoImage.
func (s *Synthetic) MaxImageBytes() int {
	if s.cfg.NoImage {
		return 0
	}
	return s.cfg.ImageWidth * s.cfg.ImageHeight * s.bpp
}

// Frames is SyntheticConfig.Frames (0: endless).
func (s *Synthetic) Frames() uint64 { return s.cfg.Frames }

// Camera is the camera model the image is rendered with; the zero
// PinholeCamera with NoImage.
func (s *Synthetic) Camera() PinholeCamera { return s.cam }

// Truth is the position of the moving parts at frame seq.
func (s *Synthetic) Truth(seq uint64) SceneTruth { return truthAt(s.timeOf(seq)) }

// Planar reports whether the clouds are a planar LiDAR's scans
// (SyntheticConfig.Planar).
func (s *Synthetic) Planar() bool { return s.cfg.Planar }

func (s *Synthetic) timeOf(seq uint64) float64 { return float64(seq) / s.cfg.Rate }

func (s *Synthetic) checkSeq(op string, seq uint64) error {
	if s.cfg.Frames != 0 && seq >= s.cfg.Frames {
		return fmt.Errorf("synthetic: %s frame %d of %d: %w", op, seq, s.cfg.Frames, ErrEndOfFrames)
	}
	return nil
}

func (s *Synthetic) initLidar() {
	c := s.cfg
	beams, cols := c.Beams, c.AzimuthSteps
	s.cosE, s.sinE = make([]float64, beams), make([]float64, beams)
	for i := range beams {
		e := c.ElevationMaxDeg
		if beams > 1 {
			e -= float64(i) * (c.ElevationMaxDeg - c.ElevationMinDeg) / float64(beams-1)
		}
		s.sinE[i], s.cosE[i] = math.Sincos(e * math.Pi / 180)
	}
	s.cosA, s.sinA = make([]float64, cols), make([]float64, cols)
	for j := range cols {
		s.sinA[j], s.cosA[j] = math.Sincos(2 * math.Pi * float64(j) / float64(cols))
	}
	n := beams * cols
	s.rayT, s.rayMat = make([]float64, n), make([]material, n)
	s.colOff = make([]int, cols+1)
	pts := make([]byte, 0, n*PointStep)
	var rec [PointStep]byte
	for j := range cols {
		s.colOff[j] = len(pts)
		for i := range beams {
			k := j*beams + i
			dx, dy, dz := s.lidarDir(i, j)
			t, m, _ := s.castStatic(0, 0, s.lidarZ, dx, dy, dz, s.lidarGroundT(i))
			s.rayT[k], s.rayMat[k] = t, m
			if t <= c.MaxRange {
				putPoint(rec[:], 0, 0, s.lidarZ, dx, dy, dz, t, m)
				pts = append(pts, rec[:]...)
			}
		}
	}
	s.colOff[cols] = len(pts)
	s.staticPts = pts
}

func (s *Synthetic) lidarDir(i, j int) (dx, dy, dz float64) {
	return float64(s.cosE[i] * s.cosA[j]), float64(s.cosE[i] * s.sinA[j]), s.sinE[i]
}

func (s *Synthetic) lidarGroundT(i int) float64 {
	if s.sinE[i] >= 0 {
		return math.Inf(1)
	}
	return s.lidarZ / -s.sinE[i]
}

// castStatic finds the nearest static surface along o + t·d given the ground
// distance groundT (+Inf if the ray does not descend). Ties go to the ground,
// then to the earlier box.
func (s *Synthetic) castStatic(ox, oy, oz, dx, dy, dz, groundT float64) (t float64, m material, axis int8) {
	t, m, axis = groundT, matSky, 2
	if !math.IsInf(groundT, 1) {
		m = matGround
	}
	for bi := range s.static {
		b := &s.static[bi]
		if th, ax, ok := b.hit(ox, oy, oz, dx, dy, dz); ok && th < t {
			t, m, axis = th, b.mat, ax
		}
	}
	return t, m, axis
}

// putPoint writes the point at distance t along the ray into p[:PointStep].
func putPoint(p []byte, ox, oy, oz, dx, dy, dz, t float64, m material) {
	p = p[:PointStep:PointStep]
	binary.LittleEndian.PutUint32(p[PointOffsetX:], math.Float32bits(float32(ox+float64(t*dx))))
	binary.LittleEndian.PutUint32(p[PointOffsetY:], math.Float32bits(float32(oy+float64(t*dy))))
	binary.LittleEndian.PutUint32(p[PointOffsetZ:], math.Float32bits(float32(oz+float64(t*dz))))
	binary.LittleEndian.PutUint32(p[PointOffsetIntensity:], math.Float32bits(m.intensity()))
}

// FillPoints writes the LiDAR cloud of frame seq into dst; see Synthetic for
// the point order. It does not allocate.
func (s *Synthetic) FillPoints(seq uint64, dst []byte) (int, error) {
	if err := s.checkSeq("FillPoints", seq); err != nil {
		return 0, err
	}
	if need := s.MaxPoints() * PointStep; len(dst) < need {
		return 0, fmt.Errorf("synthetic: FillPoints: dst has %d bytes, need %d (%d points × %d): %w",
			len(dst), need, s.MaxPoints(), PointStep, ErrShortBuffer)
	}
	ob := newAABB(s.Truth(seq).Obstacle, matObstacle)
	cols := s.cfg.AzimuthSteps
	first, n := s.azimuthWindow(&ob)
	inWindow := func(j int) bool { return (j-first+cols)%cols < n }
	w := 0
	for j := 0; j < cols; {
		if inWindow(j) {
			w = s.castColumn(dst, w, j, &ob)
			j++
			continue
		}
		end := j + 1
		for end < cols && !inWindow(end) {
			end++
		}
		w += copy(dst[w:], s.staticPts[s.colOff[j]:s.colOff[end]])
		j = end
	}
	return w / PointStep, nil
}

// castColumn casts column j against the static result and the obstacle,
// writes its points at dst[w:] and returns the new write offset.
func (s *Synthetic) castColumn(dst []byte, w, j int, ob *aabb) int {
	beams := s.cfg.Beams
	for i := range beams {
		k := j*beams + i
		t, m := s.rayT[k], s.rayMat[k]
		dx, dy, dz := s.lidarDir(i, j)
		if th, _, ok := ob.hit(0, 0, s.lidarZ, dx, dy, dz); ok && th < t {
			t, m = th, matObstacle
		}
		if t <= s.cfg.MaxRange {
			putPoint(dst[w:], 0, 0, s.lidarZ, dx, dy, dz, t, m)
			w += PointStep
		}
	}
	return w
}

// azimuthWindow returns the columns [first, first+n) (mod AzimuthSteps) whose
// rays can meet box b: those within the angle b's footprint subtends at the
// sensor, plus one column of margin on each side for rounding.
func (s *Synthetic) azimuthWindow(b *aabb) (first, n int) {
	cols := s.cfg.AzimuthSteps
	if b.minX <= 0 && b.maxX >= 0 && b.minY <= 0 && b.maxY >= 0 {
		return 0, cols // the sensor is above or inside the footprint
	}
	centre := math.Atan2((b.minY+b.maxY)/2, (b.minX+b.maxX)/2)
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, c := range [4][2]float64{{b.minX, b.minY}, {b.minX, b.maxY}, {b.maxX, b.minY}, {b.maxX, b.maxY}} {
		d := math.Remainder(math.Atan2(c[1], c[0])-centre, 2*math.Pi)
		lo, hi = math.Min(lo, d), math.Max(hi, d)
	}
	step := 2 * math.Pi / float64(cols)
	jlo := int(math.Floor((centre+lo)/step)) - 1
	jhi := int(math.Ceil((centre+hi)/step)) + 1
	if jhi-jlo+1 >= cols {
		return 0, cols
	}
	return ((jlo % cols) + cols) % cols, jhi - jlo + 1
}

func (s *Synthetic) initCamera() {
	c := s.cfg
	w, h := c.ImageWidth, c.ImageHeight
	fx := float64(w) / 2 / math.Tan(c.HorizontalFOVDeg*math.Pi/360)
	s.cam = PinholeCamera{
		Width: w, Height: h, Fx: fx, Fy: fx, Cx: float64(w) / 2, Cy: float64(h) / 2,
		Position:  Vec3{0, 0, c.CameraHeight},
		PitchDown: c.CameraPitchDownDeg * math.Pi / 180,
	}
	s.rowDX, s.rowDZ = make([]float64, h), make([]float64, h)
	s.rowGroundT, s.rowGroundX = make([]float64, h), make([]float64, h)
	for v := range h {
		r := s.cam.Ray(0.5, float64(v)+0.5)
		s.rowDX[v], s.rowDZ[v] = r.X, r.Z
		s.rowGroundT[v], s.rowGroundX[v] = math.Inf(1), math.NaN()
		if r.Z < 0 {
			t := c.CameraHeight / -r.Z
			s.rowGroundT[v], s.rowGroundX[v] = t, float64(t*r.X)
		}
	}
	s.colDY = make([]float64, w)
	for u := range w {
		s.colDY[u] = s.cam.Ray(float64(u)+0.5, 0.5).Y
	}
	s.pixT, s.pixMat = make([]float64, w*h), make([]material, w*h)
	s.background = make([]byte, w*h*s.bpp)
	oz := c.CameraHeight
	for v := range h {
		for u := range w {
			p := v*w + u
			dx, dy, dz := s.rowDX[v], s.colDY[u], s.rowDZ[v]
			t, m, axis := s.castStatic(0, 0, oz, dx, dy, dz, s.rowGroundT[v])
			s.pixT[p], s.pixMat[p] = t, m
			col := s.staticColor(u, v, m, axis)
			putPixel(s.background[p*s.bpp:], c.Encoding, col.R, col.G, col.B)
		}
	}
}

// staticColor is the colour of pixel (u, v) whose ray meets material m on a
// face with normal axis.
func (s *Synthetic) staticColor(u, v int, m material, axis int8) RGB {
	switch m {
	case matSky:
		return skyColor(s.rowDZ[v] / math.Hypot(s.rowDX[v], s.colDY[u]))
	case matGround:
		gx, gy := s.groundHit(u, v)
		return groundColor(gx, gy)
	}
	return shade(m.color(), axis)
}

// groundHit is where pixel (u, v)'s ray meets the ground plane; valid only
// when rowGroundT[v] is finite.
func (s *Synthetic) groundHit(u, v int) (x, y float64) {
	return s.rowGroundX[v], float64(s.rowGroundT[v] * s.colDY[u])
}

// FillImage writes the camera image of frame seq into dst: the static
// background, then the hazard marking on visible ground, then the obstacle
// where it is nearer than the static scene. It does not allocate. With
// NoImage it returns an error wrapping ErrNotProvided.
func (s *Synthetic) FillImage(seq uint64, dst []byte) (ImageInfo, error) {
	if err := s.checkSeq("FillImage", seq); err != nil {
		return ImageInfo{}, err
	}
	if s.cfg.NoImage {
		return ImageInfo{}, fmt.Errorf("synthetic: FillImage: NoImage, no camera: %w", ErrNotProvided)
	}
	if need := s.MaxImageBytes(); len(dst) < need {
		return ImageInfo{}, fmt.Errorf("synthetic: FillImage: dst has %d bytes, need %d (%d×%d %s): %w",
			len(dst), need, s.cfg.ImageWidth, s.cfg.ImageHeight, s.cfg.Encoding, ErrShortBuffer)
	}
	copy(dst, s.background)
	truth := s.Truth(seq)
	s.drawHazard(dst, truth.Hazard)
	ob := newAABB(truth.Obstacle, matObstacle)
	s.drawObstacle(dst, &ob)
	w := s.cfg.ImageWidth
	return ImageInfo{Width: w, Height: s.cfg.ImageHeight, Step: w * s.bpp, Encoding: s.cfg.Encoding}, nil
}

func (s *Synthetic) drawHazard(dst []byte, r GroundRect) {
	x0, x1 := r.CenterX-r.SizeX/2, r.CenterX+r.SizeX/2
	y0, y1 := r.CenterY-r.SizeY/2, r.CenterY+r.SizeY/2
	u0, u1, v0, v1 := s.bbox([]Vec3{{x0, y0, 0}, {x0, y1, 0}, {x1, y0, 0}, {x1, y1, 0}})
	col := hazardColor()
	w := s.cfg.ImageWidth
	for v := v0; v < v1; v++ {
		// The ground x is the same along a row: skip rows that miss the rectangle.
		if gx := s.rowGroundX[v]; !(gx >= x0 && gx < x1) {
			continue
		}
		for u := u0; u < u1; u++ {
			p := v*w + u
			if s.pixMat[p] != matGround {
				continue
			}
			if gx, gy := s.groundHit(u, v); r.Contains(gx, gy) {
				putPixel(dst[p*s.bpp:], s.cfg.Encoding, col.R, col.G, col.B)
			}
		}
	}
}

func (s *Synthetic) drawObstacle(dst []byte, b *aabb) {
	u0, u1, v0, v1 := s.bbox([]Vec3{
		{b.minX, b.minY, b.minZ}, {b.minX, b.minY, b.maxZ}, {b.minX, b.maxY, b.minZ}, {b.minX, b.maxY, b.maxZ},
		{b.maxX, b.minY, b.minZ}, {b.maxX, b.minY, b.maxZ}, {b.maxX, b.maxY, b.minZ}, {b.maxX, b.maxY, b.maxZ},
	})
	w, oz := s.cfg.ImageWidth, s.cfg.CameraHeight
	for v := v0; v < v1; v++ {
		dx, dz := s.rowDX[v], s.rowDZ[v]
		for u := u0; u < u1; u++ {
			p := v*w + u
			if t, axis, ok := b.hit(0, 0, oz, dx, s.colDY[u], dz); ok && t < s.pixT[p] {
				c := shade(b.mat.color(), axis)
				putPixel(dst[p*s.bpp:], s.cfg.Encoding, c.R, c.G, c.B)
			}
		}
	}
}

// bbox is the pixel range [u0, u1) × [v0, v1) that may show the convex hull
// of corners: their projections' bounding box plus one pixel of margin,
// clipped to the image; the whole image if a corner is not in front of the
// camera.
func (s *Synthetic) bbox(corners []Vec3) (u0, u1, v0, v1 int) {
	w, h := s.cfg.ImageWidth, s.cfg.ImageHeight
	umin, umax, vmin, vmax := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	for _, c := range corners {
		u, v, ok := s.cam.Project(c)
		if !ok {
			return 0, w, 0, h
		}
		umin, umax = math.Min(umin, u), math.Max(umax, u)
		vmin, vmax = math.Min(vmin, v), math.Max(vmax, v)
	}
	clamp := func(x float64, hi int) int { return int(math.Max(0, math.Min(x, float64(hi)))) }
	return clamp(math.Floor(umin)-1, w), clamp(math.Ceil(umax)+1, w), clamp(math.Floor(vmin)-1, h), clamp(math.Ceil(vmax)+1, h)
}
