package sensor

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"
)

// smallConfig keeps tests fast; the code paths are those of the defaults.
func smallConfig() SyntheticConfig {
	return SyntheticConfig{Beams: 32, AzimuthSteps: 720, ImageWidth: 320, ImageHeight: 180}
}

func newSynthetic(t testing.TB, cfg SyntheticConfig) *Synthetic {
	t.Helper()
	s, err := NewSynthetic(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

type frame struct {
	points []testPoint
	raw    []byte // the written point bytes
	img    []byte
	info   ImageInfo
}

func render(t testing.TB, s *Synthetic, seq uint64) frame {
	t.Helper()
	pts := make([]byte, s.MaxPoints()*PointStep)
	n, err := s.FillPoints(seq, pts)
	if err != nil {
		t.Fatal(err)
	}
	img := make([]byte, s.MaxImageBytes())
	info, err := s.FillImage(seq, img)
	if err != nil {
		t.Fatal(err)
	}
	return frame{decodePoints(pts, n), pts[:n*PointStep], img, info}
}

func vec(p testPoint) Vec3 { return Vec3{float64(p.X), float64(p.Y), float64(p.Z)} }

// Seqs at 30 Hz covering both hazard sides and several obstacle positions.
var sceneSeqs = []uint64{0, 20, 45, 90, 130, 150, 200, 239}

func TestSyntheticDefaults(t *testing.T) {
	s := newSynthetic(t, SyntheticConfig{})
	if s.MaxPoints() != 64*1800 || s.MaxImageBytes() != 1280*720*3 || s.Frames() != 0 {
		t.Fatalf("MaxPoints %d, MaxImageBytes %d, Frames %d; want 115200, %d, 0", s.MaxPoints(), s.MaxImageBytes(), s.Frames(), 1280*720*3)
	}
	f := render(t, s, 0)
	// The corridor is closed and nothing is farther than 80 m: every ray hits.
	if len(f.points) != 64*1800 {
		t.Errorf("%d points, want 115200", len(f.points))
	}
	if want := (ImageInfo{1280, 720, 1280 * 3, EncodingRGB8}); f.info != want {
		t.Errorf("image %+v, want %+v", f.info, want)
	}
	if tr := s.Truth(30); tr.Time != 1 {
		t.Errorf("Truth(30).Time = %v, want 1 s at the default 30 Hz", tr.Time)
	}
}

// TestSyntheticMatchesReference compares the cached renderer with a brute
// force one that casts every ray and pixel against the whole scene.
func TestSyntheticMatchesReference(t *testing.T) {
	configs := map[string]SyntheticConfig{
		"small":          smallConfig(),
		"default":        {},
		"odd sizes, bgr": {Beams: 7, AzimuthSteps: 333, ImageWidth: 201, ImageHeight: 97, HorizontalFOVDeg: 120, Encoding: EncodingBGR8, MaxRange: 12},
	}
	for name, cfg := range configs {
		t.Run(name, func(t *testing.T) {
			s := newSynthetic(t, cfg)
			seqs := sceneSeqs
			if name == "default" {
				seqs = []uint64{20}
			}
			for _, seq := range seqs {
				f := render(t, s, seq)
				if want := refPoints(s, seq); !bytes.Equal(f.raw, want) {
					t.Errorf("seq %d: points differ from the reference (%d vs %d bytes)", seq, len(f.raw), len(want))
				}
				want := refImage(s, seq)
				if diff := countDiff(f.img[:len(want)], want, s.bpp); diff != 0 {
					t.Errorf("seq %d: %d pixels differ from the reference", seq, diff)
				}
			}
		})
	}
}

func countDiff(a, b []byte, bpp int) int {
	n := 0
	for i := 0; i < len(a); i += bpp {
		if !bytes.Equal(a[i:i+bpp], b[i:i+bpp]) {
			n++
		}
	}
	return n
}

// refPoints casts every LiDAR ray against ground, static boxes and the
// obstacle, with no precomputed distances.
func refPoints(s *Synthetic, seq uint64) []byte {
	all := append(append([]aabb(nil), s.static...), newAABB(s.Truth(seq).Obstacle, matObstacle))
	out := make([]byte, 0, s.MaxPoints()*PointStep)
	var rec [PointStep]byte
	for j := range s.cfg.AzimuthSteps {
		for i := range s.cfg.Beams {
			dx, dy, dz := s.lidarDir(i, j)
			t, m := math.Inf(1), matSky
			if dz < 0 {
				t, m = s.lidarZ/-dz, matGround
			}
			for _, b := range all {
				if th, _, ok := b.hit(0, 0, s.lidarZ, dx, dy, dz); ok && th < t {
					t, m = th, b.mat
				}
			}
			if t <= s.cfg.MaxRange {
				putPoint(rec[:], 0, 0, s.lidarZ, dx, dy, dz, t, m)
				out = append(out, rec[:]...)
			}
		}
	}
	return out
}

// refImage shades every pixel from scratch.
func refImage(s *Synthetic, seq uint64) []byte {
	truth := s.Truth(seq)
	all := append(append([]aabb(nil), s.static...), newAABB(truth.Obstacle, matObstacle))
	w, h, oz := s.cfg.ImageWidth, s.cfg.ImageHeight, s.cfg.CameraHeight
	out := make([]byte, w*h*s.bpp)
	for v := range h {
		for u := range w {
			r := s.cam.Ray(float64(u)+0.5, float64(v)+0.5)
			t, m, axis := math.Inf(1), matSky, int8(2)
			if r.Z < 0 {
				t, m = oz/-r.Z, matGround
			}
			for _, b := range all {
				if th, ax, ok := b.hit(0, 0, oz, r.X, r.Y, r.Z); ok && th < t {
					t, m, axis = th, b.mat, ax
				}
			}
			c := s.staticColor(u, v, m, axis)
			if m == matGround {
				if gx, gy := float64(t*r.X), float64(t*r.Y); truth.Hazard.Contains(gx, gy) {
					c = truth.HazardColor
				}
			}
			putPixel(out[(v*w+u)*s.bpp:], s.cfg.Encoding, c.R, c.G, c.B)
		}
	}
	return out
}

func TestSyntheticObstaclePointsLieInTruthBox(t *testing.T) {
	s := newSynthetic(t, smallConfig())
	for _, seq := range sceneSeqs {
		box := s.Truth(seq).Obstacle
		obstacle, intruders := 0, 0
		for _, p := range render(t, s, seq).points {
			if p.I == matObstacle.intensity() {
				obstacle++
				if !box.Contains(vec(p), 1e-4) {
					t.Fatalf("seq %d: obstacle point %v outside the truth box %+v", seq, p, box)
				}
			} else if (Box{box.Center, Vec3{box.Size.X - 2e-3, box.Size.Y - 2e-3, box.Size.Z - 2e-3}}).Contains(vec(p), 0) {
				intruders++ // a surface seen through the obstacle
			}
		}
		if obstacle < 100 {
			t.Errorf("seq %d: %d obstacle points, want at least 100 (box at y=%.2f)", seq, obstacle, box.Center.Y)
		}
		if intruders != 0 {
			t.Errorf("seq %d: %d other points inside the obstacle", seq, intruders)
		}
	}
}

func TestSyntheticGroundPointsAreAtZeroHeight(t *testing.T) {
	s := newSynthetic(t, smallConfig())
	ground := 0
	for _, p := range render(t, s, 45).points {
		if p.I == matGround.intensity() {
			ground++
			if math.Abs(float64(p.Z)) > 1e-5 {
				t.Fatalf("ground point %v is not at z = 0", p)
			}
		} else if p.Z < -1e-5 {
			t.Fatalf("point %v below the ground", p)
		}
	}
	if ground < s.MaxPoints()/3 {
		t.Errorf("%d ground points of %d, want at least a third", ground, s.MaxPoints())
	}
}

// TestSyntheticHazardIsInvisibleToLidar: the points on a hazard rectangle
// are byte for byte those on the same rectangle when the hazard is elsewhere.
func TestSyntheticHazardIsInvisibleToLidar(t *testing.T) {
	s := newSynthetic(t, smallConfig())
	const left, right = 0, 150 // hazard at y = +1, then y = -1
	if s.Truth(left).Hazard.CenterY <= 0 || s.Truth(right).Hazard.CenterY >= 0 {
		t.Fatalf("hazard sides: %+v, %+v", s.Truth(left).Hazard, s.Truth(right).Hazard)
	}
	for _, seqs := range [][2]uint64{{left, right}, {right, left}} {
		rect := s.Truth(seqs[0]).Hazard
		on := pointsIn(render(t, s, seqs[0]).points, rect)
		off := pointsIn(render(t, s, seqs[1]).points, rect)
		if len(on) < 10 {
			t.Fatalf("%d points on the hazard, want at least 10", len(on))
		}
		if !equalPoints(on, off) {
			t.Errorf("points on the hazard %+v differ with and without it:\n%v\n%v", rect, on, off)
		}
		for _, p := range on {
			if p.I != matGround.intensity() || math.Abs(float64(p.Z)) > 1e-5 {
				t.Errorf("point on the hazard %v: want ground (z 0, intensity %v)", p, matGround.intensity())
			}
		}
	}
}

func pointsIn(pts []testPoint, r GroundRect) []testPoint {
	var out []testPoint
	for _, p := range pts {
		if r.Contains(float64(p.X), float64(p.Y)) {
			out = append(out, p)
		}
	}
	return out
}

func TestSyntheticImageShowsHazard(t *testing.T) {
	s := newSynthetic(t, smallConfig())
	cam := s.Camera()
	for _, seq := range []uint64{0, 150} {
		truth := s.Truth(seq)
		f := render(t, s, seq)
		px := func(x, y float64) RGB {
			u, v, ok := cam.Project(Vec3{x, y, 0})
			if !ok || u < 0 || v < 0 || int(u) >= f.info.Width || int(v) >= f.info.Height {
				t.Fatalf("(%v, %v, 0) projects outside the image: %v %v %v", x, y, u, v, ok)
			}
			o := int(v)*f.info.Step + 3*int(u)
			return RGB{f.img[o], f.img[o+1], f.img[o+2]}
		}
		hz := truth.Hazard
		if got := px(hz.CenterX, hz.CenterY); got != truth.HazardColor {
			t.Errorf("seq %d: hazard centre pixel %v, want %v", seq, got, truth.HazardColor)
		}
		if got := px(hz.CenterX, -hz.CenterY); got == truth.HazardColor {
			t.Errorf("seq %d: the other side (y=%v) shows the hazard too", seq, -hz.CenterY)
		}
		// Every hazard-coloured pixel looks at the hazard rectangle.
		n := 0
		for v := range f.info.Height {
			for u := range f.info.Width {
				o := v*f.info.Step + 3*u
				if (RGB{f.img[o], f.img[o+1], f.img[o+2]}) != truth.HazardColor {
					continue
				}
				n++
				r := cam.Ray(float64(u)+0.5, float64(v)+0.5)
				tg := cam.Position.Z / -r.Z
				grown := GroundRect{hz.CenterX, hz.CenterY, hz.SizeX + 0.05, hz.SizeY + 0.05}
				if r.Z >= 0 || !grown.Contains(tg*r.X, tg*r.Y) {
					t.Fatalf("seq %d: pixel (%d,%d) is hazard-coloured but looks at (%.2f, %.2f)", seq, u, v, tg*r.X, tg*r.Y)
				}
			}
		}
		if n < 500 {
			t.Errorf("seq %d: %d hazard pixels, want at least 500", seq, n)
		}
	}
}

func TestSyntheticImageShowsObstacle(t *testing.T) {
	s := newSynthetic(t, smallConfig())
	cam := s.Camera()
	pixel := func(f frame, p Vec3) RGB {
		u, v, ok := cam.Project(p)
		if !ok {
			t.Fatalf("%v is behind the camera", p)
		}
		o := int(v)*f.info.Step + 3*int(u)
		return RGB{f.img[o], f.img[o+1], f.img[o+2]}
	}
	// Pairs of frames with the obstacle at least 1.5 m apart.
	for _, seqs := range [][2]uint64{{0, 45}, {20, 110}, {130, 40}} {
		seq := seqs[0]
		box := s.Truth(seq).Obstacle
		front := Vec3{box.Min().X, box.Center.Y, box.Center.Z} // the face towards the robot
		here := pixel(render(t, s, seq), front)
		if here.B < 150 || here.R > 80 || here.B < here.G {
			t.Errorf("seq %d: obstacle face pixel %v, want the obstacle's blue", seq, here)
		}
		other := pixel(render(t, s, seqs[1]), front)
		if other == here {
			t.Errorf("seq %d: pixel %v unchanged after the obstacle moved away", seq, here)
		}
	}
}

func TestSyntheticIsDeterministic(t *testing.T) {
	a, b := newSynthetic(t, smallConfig()), newSynthetic(t, smallConfig())
	fa := render(t, a, 77)
	// A dirty buffer must not show through: every reported byte is written.
	pts := bytes.Repeat([]byte{0xFF}, a.MaxPoints()*PointStep)
	n, err := b.FillPoints(77, pts)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(pts[:n*PointStep], fa.raw) {
		t.Error("same seq, different points")
	}
	img := bytes.Repeat([]byte{0xFF}, b.MaxImageBytes())
	if _, err := b.FillImage(77, img); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(img, fa.img) {
		t.Error("same seq, different image")
	}
	if fb := render(t, a, 78); bytes.Equal(fb.raw, fa.raw) || bytes.Equal(fb.img, fa.img) {
		t.Error("consecutive frames are identical: the obstacle did not move")
	}
}

func TestSyntheticObstacleMoves(t *testing.T) {
	s := newSynthetic(t, smallConfig())
	meanY := func(seq uint64) float64 {
		sum, n := 0.0, 0
		for _, p := range render(t, s, seq).points {
			if p.I == matObstacle.intensity() {
				sum += float64(p.Y)
				n++
			}
		}
		return sum / float64(n)
	}
	// Quarter period apart: centre at y = 0, then +3, then 0, then -3.
	for _, seq := range []uint64{0, 45, 90, 135} {
		truth := s.Truth(seq).Obstacle.Center
		if got := meanY(seq); math.Abs(got-truth.Y) > 0.3 {
			t.Errorf("seq %d: obstacle points centred at y=%.2f, truth %.2f", seq, got, truth.Y)
		}
	}
	if y0, y1 := s.Truth(0).Obstacle.Center.Y, s.Truth(45).Obstacle.Center.Y; math.Abs(y1-y0) < 2.9 {
		t.Errorf("obstacle moved from y=%.2f to %.2f in 1.5 s, want about 3 m", y0, y1)
	}
}

func TestSyntheticMaxRangeOmitsFarRays(t *testing.T) {
	cfg := smallConfig()
	cfg.MaxRange = 10
	s := newSynthetic(t, cfg)
	f := render(t, s, 0)
	if len(f.points) >= s.MaxPoints() || len(f.points) == 0 {
		t.Fatalf("%d points of %d: want some rays omitted", len(f.points), s.MaxPoints())
	}
	for _, p := range f.points {
		if r := math.Sqrt(float64(p.X*p.X + p.Y*p.Y + (p.Z-1)*(p.Z-1))); r > 10+1e-4 {
			t.Fatalf("point %v at range %.3f beyond MaxRange 10", p, r)
		}
	}
}

func TestSyntheticEncodings(t *testing.T) {
	rgb := render(t, newSynthetic(t, smallConfig()), 30)
	for _, enc := range []ImageEncoding{EncodingBGR8, EncodingMono8} {
		cfg := smallConfig()
		cfg.Encoding = enc
		s := newSynthetic(t, cfg)
		f := render(t, s, 30)
		if f.info.Encoding != enc || f.info.Step != 320*enc.BytesPerPixel() || len(f.img) != 320*180*enc.BytesPerPixel() {
			t.Fatalf("%v: info %+v, %d bytes", enc, f.info, len(f.img))
		}
		for p := range 320 * 180 {
			r, g, b := rgb.img[3*p], rgb.img[3*p+1], rgb.img[3*p+2]
			ok := true
			if enc == EncodingBGR8 {
				ok = f.img[3*p] == b && f.img[3*p+1] == g && f.img[3*p+2] == r
			} else {
				ok = f.img[p] == luma(r, g, b)
			}
			if !ok {
				t.Fatalf("%v: pixel %d does not match rgb8 (%d,%d,%d)", enc, p, r, g, b)
			}
		}
	}
}

func TestSyntheticShortBuffers(t *testing.T) {
	s := newSynthetic(t, smallConfig())
	for _, n := range []int{0, 1, s.MaxPoints()*PointStep - 1} {
		if _, err := s.FillPoints(0, make([]byte, n)); !errors.Is(err, ErrShortBuffer) {
			t.Errorf("FillPoints into %d bytes: %v, want ErrShortBuffer", n, err)
		}
	}
	for _, n := range []int{0, 1, s.MaxImageBytes() - 1} {
		if _, err := s.FillImage(0, make([]byte, n)); !errors.Is(err, ErrShortBuffer) {
			t.Errorf("FillImage into %d bytes: %v, want ErrShortBuffer", n, err)
		}
	}
	if _, err := s.FillPoints(0, nil); err == nil {
		t.Error("FillPoints(nil): no error")
	}
}

func TestSyntheticFiniteFrames(t *testing.T) {
	cfg := smallConfig()
	cfg.Frames = 3
	s := newSynthetic(t, cfg)
	if s.Frames() != 3 {
		t.Fatalf("Frames = %d", s.Frames())
	}
	render(t, s, 2)
	if _, err := s.FillPoints(3, make([]byte, s.MaxPoints()*PointStep)); !errors.Is(err, ErrEndOfFrames) {
		t.Errorf("FillPoints(3): %v, want ErrEndOfFrames", err)
	}
	if _, err := s.FillImage(3, make([]byte, s.MaxImageBytes())); !errors.Is(err, ErrEndOfFrames) {
		t.Errorf("FillImage(3): %v, want ErrEndOfFrames", err)
	}
}

func TestSyntheticConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		mod  func(*SyntheticConfig)
		want string
	}{
		{"negative rate", func(c *SyntheticConfig) { c.Rate = -1 }, "Rate"},
		{"NaN rate", func(c *SyntheticConfig) { c.Rate = math.NaN() }, "Rate"},
		{"negative beams", func(c *SyntheticConfig) { c.Beams = -3 }, "Beams × AzimuthSteps = -3 × 720: want both > 0"},
		{"too many rays", func(c *SyntheticConfig) { c.Beams, c.AzimuthSteps = 4096, 4096 }, "Beams × AzimuthSteps"},
		{"elevations upside down", func(c *SyntheticConfig) { c.ElevationMaxDeg, c.ElevationMinDeg = -10, 5 }, "ElevationMinDeg = 5: want > -90 and below ElevationMaxDeg"},
		{"straight up", func(c *SyntheticConfig) { c.ElevationMaxDeg = 90 }, "ElevationMaxDeg"},
		{"negative range", func(c *SyntheticConfig) { c.MaxRange = -5 }, "MaxRange"},
		{"lidar underground", func(c *SyntheticConfig) { c.LidarHeight = -1 }, "LidarHeight"},
		{"huge image", func(c *SyntheticConfig) { c.ImageWidth, c.ImageHeight = 100000, 100000 }, "ImageWidth × ImageHeight"},
		{"negative width", func(c *SyntheticConfig) { c.ImageWidth = -1 }, "ImageWidth × ImageHeight"},
		{"fov 180", func(c *SyntheticConfig) { c.HorizontalFOVDeg = 180 }, "HorizontalFOVDeg"},
		{"camera above the walls", func(c *SyntheticConfig) { c.CameraHeight = 5 }, "CameraHeight"},
		{"pitch 90", func(c *SyntheticConfig) { c.CameraPitchDownDeg = 90 }, "CameraPitchDownDeg"},
		{"bad encoding", func(c *SyntheticConfig) { c.Encoding = 9 }, "Encoding"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := smallConfig()
			tc.mod(&cfg)
			_, err := NewSynthetic(cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want one naming %s", err, tc.want)
			}
		})
	}
}

func TestSyntheticFillDoesNotAllocate(t *testing.T) {
	s := newSynthetic(t, smallConfig())
	pts := make([]byte, s.MaxPoints()*PointStep)
	img := make([]byte, s.MaxImageBytes())
	seq := uint64(0)
	if a := testing.AllocsPerRun(50, func() {
		if _, err := s.FillPoints(seq, pts); err != nil {
			t.Fatal(err)
		}
		seq += 7
	}); a != 0 {
		t.Errorf("FillPoints: %v allocations per frame, want 0", a)
	}
	if a := testing.AllocsPerRun(50, func() {
		if _, err := s.FillImage(seq, img); err != nil {
			t.Fatal(err)
		}
		seq += 7
	}); a != 0 {
		t.Errorf("FillImage: %v allocations per frame, want 0", a)
	}
}

func TestPinholeCameraProjectInvertsRay(t *testing.T) {
	cam := newSynthetic(t, smallConfig()).Camera()
	for _, uv := range [][2]float64{{0.5, 0.5}, {160, 90}, {319.5, 10.25}, {12, 179}} {
		r := cam.Ray(uv[0], uv[1])
		for _, k := range []float64{0.5, 3, 40} {
			p := Vec3{cam.Position.X + k*r.X, cam.Position.Y + k*r.Y, cam.Position.Z + k*r.Z}
			u, v, ok := cam.Project(p)
			if !ok || math.Abs(u-uv[0]) > 1e-9 || math.Abs(v-uv[1]) > 1e-9 {
				t.Errorf("Project(Ray(%v)·%v) = %v, %v, %v", uv, k, u, v, ok)
			}
		}
	}
	if _, _, ok := cam.Project(Vec3{-1, 0, 0.8}); ok {
		t.Error("a point behind the camera projected")
	}
	// The image centre looks 10° down and straight ahead (u grows towards -y).
	if r := cam.Ray(160, 90); math.Abs(math.Atan2(-r.Z, r.X)*180/math.Pi-10) > 1e-9 || r.Y != 0 {
		t.Errorf("centre ray %v, want 10° down along +x", r)
	}
	if r := cam.Ray(300, 90); r.Y >= 0 {
		t.Errorf("right-hand ray %v has y >= 0", r)
	}
}

func TestImageEncodingNames(t *testing.T) {
	for _, tc := range []struct {
		e    ImageEncoding
		name string
		bpp  int
	}{{EncodingRGB8, "rgb8", 3}, {EncodingBGR8, "bgr8", 3}, {EncodingMono8, "mono8", 1}} {
		if tc.e.String() != tc.name || tc.e.BytesPerPixel() != tc.bpp || !tc.e.Valid() {
			t.Errorf("%d: %q %d", tc.e, tc.e.String(), tc.e.BytesPerPixel())
		}
		if got, err := ParseImageEncoding(tc.name); err != nil || got != tc.e {
			t.Errorf("ParseImageEncoding(%q) = %v, %v", tc.name, got, err)
		}
	}
	if ImageEncoding(0).Valid() || ImageEncoding(0).BytesPerPixel() != 0 || ImageEncoding(7).String() != "ImageEncoding(7)" {
		t.Error("invalid encodings look valid")
	}
	if _, err := ParseImageEncoding("yuv422"); err == nil {
		t.Error("ParseImageEncoding(yuv422): no error")
	}
}

// TestSyntheticConcurrentFills: a Synthetic is read-only after construction;
// the race detector checks it.
func TestSyntheticConcurrentFills(t *testing.T) {
	s := newSynthetic(t, smallConfig())
	want := [2]frame{render(t, s, 10), render(t, s, 11)}
	errs := make(chan error, 2)
	for g := range 2 {
		go func() {
			pts := make([]byte, s.MaxPoints()*PointStep)
			img := make([]byte, s.MaxImageBytes())
			for range 5 {
				n, err := s.FillPoints(uint64(10+g), pts)
				if err == nil {
					_, err = s.FillImage(uint64(10+g), img)
				}
				if err == nil && (!bytes.Equal(pts[:n*PointStep], want[g].raw) || !bytes.Equal(img, want[g].img)) {
					err = errors.New("concurrent fill differs from a sequential one")
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// Both sources satisfy Source.
var _ = []Source{(*Synthetic)(nil), (*Replay)(nil)}

// TestSyntheticNoImage: a LiDAR-only scene has no image stream (as a
// replay folder without images), builds no image tables, ignores the
// camera's fields, and renders the very clouds of the scene with a camera.
func TestSyntheticNoImage(t *testing.T) {
	withImages := newSynthetic(t, smallConfig())
	tests := []struct {
		name string
		mod  func(*SyntheticConfig)
	}{
		{"camera fields as usual", func(*SyntheticConfig) {}},
		{"default camera fields", func(c *SyntheticConfig) { c.ImageWidth, c.ImageHeight = 0, 0 }},
		// Refused with a camera (TestSyntheticConfigErrors); unused without.
		{"huge image", func(c *SyntheticConfig) { c.ImageWidth, c.ImageHeight = 100000, 100000 }},
		{"negative width", func(c *SyntheticConfig) { c.ImageWidth = -1 }},
		{"fov 180", func(c *SyntheticConfig) { c.HorizontalFOVDeg = 180 }},
		{"camera above the walls", func(c *SyntheticConfig) { c.CameraHeight = 5 }},
		{"pitch 90", func(c *SyntheticConfig) { c.CameraPitchDownDeg = 90 }},
		{"bad encoding", func(c *SyntheticConfig) { c.Encoding = 9 }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := smallConfig()
			tc.mod(&cfg)
			cfg.NoImage = true
			s := newSynthetic(t, cfg)
			if got := s.MaxImageBytes(); got != 0 {
				t.Errorf("MaxImageBytes = %d, want 0", got)
			}
			for _, n := range []int{0, withImages.MaxImageBytes()} {
				if _, err := s.FillImage(0, make([]byte, n)); !errors.Is(err, ErrNotProvided) {
					t.Errorf("FillImage into %d bytes: %v, want ErrNotProvided", n, err)
				}
			}
			// No CPU or memory spent on a camera that is not there.
			if s.background != nil || s.pixT != nil || s.pixMat != nil || s.rowDX != nil || s.colDY != nil || s.rowGroundT != nil {
				t.Errorf("image tables built: background %d, pixT %d, pixMat %d, rowDX %d, colDY %d, rowGroundT %d",
					len(s.background), len(s.pixT), len(s.pixMat), len(s.rowDX), len(s.colDY), len(s.rowGroundT))
			}
			if s.MaxPoints() != withImages.MaxPoints() {
				t.Fatalf("MaxPoints = %d, want %d as with images", s.MaxPoints(), withImages.MaxPoints())
			}
			got, want := make([]byte, s.MaxPoints()*PointStep), make([]byte, s.MaxPoints()*PointStep)
			for _, seq := range sceneSeqs {
				n, err := s.FillPoints(seq, got)
				if err != nil {
					t.Fatal(err)
				}
				m, err := withImages.FillPoints(seq, want)
				if err != nil {
					t.Fatal(err)
				}
				if n != m || !bytes.Equal(got[:n*PointStep], want[:m*PointStep]) {
					t.Fatalf("frame %d: %d points, differ from the %d with images", seq, n, m)
				}
			}
		})
	}
	// The LiDAR's checks still apply.
	cfg := smallConfig()
	cfg.NoImage, cfg.Beams = true, -3
	if _, err := NewSynthetic(cfg); err == nil || !strings.Contains(err.Error(), "Beams × AzimuthSteps") {
		t.Errorf("NoImage with -3 beams: %v, want the beams refused", err)
	}
}

// TestSyntheticPlanarScansOnePlane: a planar LiDAR's every point lies at
// its height, none on the ground, one per azimuth step (the corridor is
// closed), and the moving obstacle, which stands from the ground to 1 m,
// crosses the plane; the source says it is planar, the 3D one does not.
func TestSyntheticPlanarScansOnePlane(t *testing.T) {
	for _, tc := range []struct {
		name   string
		height float64 // LidarHeight given
		wantZ  float32
	}{
		{"default height", 0, 0.3},
		{"at 0.15 m", 0.15, 0.15},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Beams and elevations as given are ignored: planar is one level beam.
			s := newSynthetic(t, SyntheticConfig{Planar: true, Beams: 64, ElevationMinDeg: -20, AzimuthSteps: 720,
				LidarHeight: tc.height, ImageWidth: 64, ImageHeight: 36})
			if !Planar(s) {
				t.Fatal("Planar(source) = false")
			}
			if s.MaxPoints() != 720 {
				t.Fatalf("MaxPoints = %d, want 720 (one beam)", s.MaxPoints())
			}
			for _, seq := range sceneSeqs {
				pts := render(t, s, seq).points
				if len(pts) != 720 {
					t.Fatalf("frame %d: %d points, want 720", seq, len(pts))
				}
				obstacle := 0
				for _, p := range pts {
					if p.Z != float32(tc.wantZ) {
						t.Fatalf("frame %d: point %+v off the scan plane z = %v", seq, p, tc.wantZ)
					}
					if p.I == matGround.intensity() {
						t.Fatalf("frame %d: ground point %+v in a planar scan", seq, p)
					}
					if p.I == matObstacle.intensity() {
						obstacle++
					}
				}
				if obstacle == 0 {
					t.Errorf("frame %d: the obstacle (0 to 1 m high) is not in the scan", seq)
				}
			}
		})
	}
	if Planar(newSynthetic(t, smallConfig())) {
		t.Error("Planar(3D synthetic) = true")
	}
}
