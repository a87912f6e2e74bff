package infer

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
)

// testImage makes a w x h image in format f with the given row step, filled
// by pattern(x, y, channel byte index) and 0xEE in row padding.
func testImage(w, h, step int, f PixelFormat, pattern func(x, y, k int) byte) ImageView {
	bpp := f.BytesPerPixel()
	pix := make([]byte, (h-1)*step+w*bpp) // exactly as long as needed
	for i := range pix {
		pix[i] = 0xEE
	}
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			for k := 0; k < bpp; k++ {
				pix[y*step+x*bpp+k] = pattern(x, y, k)
			}
		}
	}
	return ImageView{Pix: pix, Width: w, Height: h, Step: step, Format: f}
}

// noise is a deterministic pseudo-random pattern.
func noise(x, y, k int) byte {
	v := uint32(x*73856093) ^ uint32(y*19349663) ^ uint32(k*83492791)
	v ^= v >> 13
	v *= 0x5bd1e995
	return byte(v >> 24)
}

// refPreprocess is a direct float64 transcription of the documented rules,
// to compare the fast code against.
func refPreprocess(src ImageView, p PreprocessParams) []float64 {
	bpp := src.Format.BytesPerPixel()
	at := func(x, y, k int) float64 {
		if src.Format == PixelMono8 {
			k = 0
		}
		return float64(src.Pix[y*src.Step+x*bpp+k])
	}
	// byteFor[c]: which source byte feeds output channel c.
	byteFor := [3]int{0, 1, 2}
	if src.Format != PixelMono8 && (src.Format == PixelBGR8) != (p.Order == ColorBGR) {
		byteFor = [3]int{2, 1, 0}
	}
	area := p.Resize == ResizeArea || (p.Resize == ResizeAuto && p.Width <= src.Width && p.Height <= src.Height)
	out := make([]float64, 3*p.Width*p.Height)
	for c := 0; c < 3; c++ {
		std := float64(p.Std[c])
		if std == 0 {
			std = 1
		}
		for i := 0; i < p.Height; i++ {
			for j := 0; j < p.Width; j++ {
				var v float64
				if area {
					y0, y1 := i*src.Height/p.Height, (i+1)*src.Height/p.Height
					x0, x1 := j*src.Width/p.Width, (j+1)*src.Width/p.Width
					y1, x1 = max(y1, y0+1), max(x1, x0+1)
					for y := y0; y < y1; y++ {
						for x := x0; x < x1; x++ {
							v += at(x, y, byteFor[c])
						}
					}
					v /= float64((y1 - y0) * (x1 - x0))
				} else {
					tap := func(i, n, size int) (int, int, float64) {
						f := math.Max((float64(i)+0.5)*float64(size)/float64(n)-0.5, 0)
						lo := min(int(f), size-1)
						return lo, min(lo+1, size-1), f - float64(lo)
					}
					y0, y1, wy := tap(i, p.Height, src.Height)
					x0, x1, wx := tap(j, p.Width, src.Width)
					k := byteFor[c]
					top := at(x0, y0, k)*(1-wx) + at(x1, y0, k)*wx
					bot := at(x0, y1, k)*(1-wx) + at(x1, y1, k)*wx
					v = top*(1-wy) + bot*wy
				}
				out[c*p.Width*p.Height+i*p.Width+j] = (v/255 - float64(p.Mean[c])) / std
			}
		}
	}
	return out
}

func TestPreprocessMatchesReference(t *testing.T) {
	norm := PreprocessParams{Mean: [3]float32{0.485, 0.456, 0.406}, Std: [3]float32{0.229, 0.224, 0.225}}
	cases := []struct {
		name          string
		w, h, padding int
		f             PixelFormat
		p             PreprocessParams
	}{
		{"rgb8 1280x720 to 256x144, exact 5x5 area", 1280, 720, 0, PixelRGB8, PreprocessParams{Width: 256, Height: 144}},
		{"bgr8 to rgb swaps channels", 160, 90, 0, PixelBGR8, PreprocessParams{Width: 32, Height: 18}},
		{"rgb8 to a bgr model swaps channels", 160, 90, 0, PixelRGB8, PreprocessParams{Width: 32, Height: 18, Order: ColorBGR}},
		{"bgr8 to a bgr model keeps the order", 160, 90, 0, PixelBGR8, PreprocessParams{Width: 32, Height: 18, Order: ColorBGR}},
		{"mono8 fills all channels", 200, 100, 0, PixelMono8, PreprocessParams{Width: 64, Height: 36}},
		{"non-integer ratio 1000x700 to 288x160", 1000, 700, 0, PixelRGB8, PreprocessParams{Width: 288, Height: 160}},
		{"padded rows are skipped", 100, 60, 13, PixelRGB8, PreprocessParams{Width: 40, Height: 24}},
		{"mean and std", 320, 180, 0, PixelRGB8, PreprocessParams{Width: 64, Height: 36, Mean: norm.Mean, Std: norm.Std}},
		{"enlarging uses bilinear", 64, 36, 0, PixelRGB8, PreprocessParams{Width: 256, Height: 144}},
		{"bilinear on request when reducing", 640, 360, 5, PixelBGR8, PreprocessParams{Width: 256, Height: 144, Resize: ResizeBilinear}},
		{"bilinear mono8", 50, 40, 3, PixelMono8, PreprocessParams{Width: 77, Height: 61}},
		{"area on request when enlarging (nearest)", 30, 20, 0, PixelRGB8, PreprocessParams{Width: 64, Height: 48, Resize: ResizeArea}},
		{"same size is a copy", 32, 16, 0, PixelRGB8, PreprocessParams{Width: 32, Height: 16}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src := testImage(tc.w, tc.h, tc.w*tc.f.BytesPerPixel()+tc.padding, tc.f, noise)
			want := refPreprocess(src, tc.p)
			got := make([]float32, len(want))
			if err := Preprocess(got, src, tc.p); err != nil {
				t.Fatal(err)
			}
			for i := range want {
				if d := math.Abs(float64(got[i]) - want[i]); d > 1e-4 || math.IsNaN(float64(got[i])) {
					c, rest := i/(tc.p.Width*tc.p.Height), i%(tc.p.Width*tc.p.Height)
					t.Fatalf("channel %d pixel (%d,%d): got %v, want %v", c, rest%tc.p.Width, rest/tc.p.Width, got[i], want[i])
				}
			}
		})
	}
}

// Channel routing checked on plain colours, independent of the reference.
func TestPreprocessChannelOrder(t *testing.T) {
	orangeBytes := [3]byte{255, 80, 0} // R, G, B
	for _, tc := range []struct {
		f     PixelFormat
		order ColorOrder
		want  [3]float32
	}{
		{PixelRGB8, ColorRGB, [3]float32{1, 80.0 / 255, 0}},
		{PixelBGR8, ColorRGB, [3]float32{1, 80.0 / 255, 0}},
		{PixelRGB8, ColorBGR, [3]float32{0, 80.0 / 255, 1}},
		{PixelBGR8, ColorBGR, [3]float32{0, 80.0 / 255, 1}},
	} {
		src := testImage(8, 4, 24, tc.f, func(x, y, k int) byte {
			if tc.f == PixelBGR8 {
				k = 2 - k
			}
			return orangeBytes[k]
		})
		dst := make([]float32, 3*2*2)
		if err := Preprocess(dst, src, PreprocessParams{Width: 2, Height: 2, Order: tc.order}); err != nil {
			t.Fatal(err)
		}
		for c := range 3 {
			if math.Abs(float64(dst[c*4]-tc.want[c])) > 1e-6 {
				t.Fatalf("%v source, order %d: channels %v, want %v", tc.f, tc.order, []float32{dst[0], dst[4], dst[8]}, tc.want)
			}
		}
	}
}

func TestPreprocessRejects(t *testing.T) {
	good := testImage(64, 32, 192, PixelRGB8, noise)
	p := PreprocessParams{Width: 16, Height: 8}
	dst := make([]float32, 3*16*8)
	cases := []struct {
		name string
		dst  []float32
		src  ImageView
		p    PreprocessParams
		want string
	}{
		{"an unknown pixel format", dst, ImageView{Pix: good.Pix, Width: 64, Height: 32, Step: 192}, p, "unknown pixel format"},
		{"a zero width", dst, ImageView{Pix: good.Pix, Height: 32, Step: 192, Format: PixelRGB8}, p, "size 0x32"},
		{"a step shorter than a row", dst, ImageView{Pix: good.Pix, Width: 64, Height: 32, Step: 191, Format: PixelRGB8}, p, "step 191"},
		{"a buffer shorter than the image", dst, ImageView{Pix: good.Pix[:len(good.Pix)-1], Width: 64, Height: 32, Step: 192, Format: PixelRGB8}, p, "needs 6144 bytes, view has 6143"},
		{"a destination too small", dst[:3*16*8-1], good, p, "destination holds 383 values"},
		{"a zero model size", dst, good, PreprocessParams{Width: 0, Height: 8}, "model input size 0x8"},
		{"a negative std", dst, good, PreprocessParams{Width: 16, Height: 8, Std: [3]float32{1, -1, 1}}, "std -1"},
		{"a NaN mean", dst, good, PreprocessParams{Width: 16, Height: 8, Mean: [3]float32{float32(math.NaN())}}, "mean NaN"},
		{"a std that makes Inf", dst, good, PreprocessParams{Width: 16, Height: 8, Std: [3]float32{1e-39, 1, 1}}, "not a finite float32"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := Preprocess(tc.dst, tc.src, tc.p)
			if !errors.Is(err, ErrImage) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want ErrImage containing %q", err, tc.want)
			}
		})
	}
	if _, err := PixelFormatFromEncoding("rgb16"); !errors.Is(err, ErrImage) {
		t.Fatalf("rgb16: %v", err)
	}
	for _, f := range []PixelFormat{PixelRGB8, PixelBGR8, PixelMono8, PixelRGBA8, PixelBGRA8} {
		if got, err := PixelFormatFromEncoding(f.String()); got != f || err != nil {
			t.Fatalf("%v round trip: %v, %v", f, got, err)
		}
	}
}

// TestPreprocessAreaHugeFootprint: a footprint of more than 2^24 pixels
// (a 17.6-megapixel image to one pixel) once overflowed the 32-bit sums.
func TestPreprocessAreaHugeFootprint(t *testing.T) {
	for _, f := range []PixelFormat{PixelMono8, PixelRGB8} {
		const side = 4200
		src := testImage(side, side, side*f.BytesPerPixel(), f, func(x, y, k int) byte { return 255 })
		dst := make([]float32, 3)
		if err := Preprocess(dst, src, PreprocessParams{Width: 1, Height: 1}); err != nil {
			t.Fatal(err)
		}
		for c, v := range dst {
			if v != 1 {
				t.Errorf("%v, channel %d: %v, want 1 (all pixels 255)", f, c, v)
			}
		}
	}
}

// The parallel Preprocessor writes exactly what Preprocess writes.
func TestPreprocessorMatchesSerial(t *testing.T) {
	src := testImage(1280, 720, 1280*3+64, PixelBGR8, noise)
	for _, par := range []int{1, 2, 3, 7, 0} {
		for _, p := range []PreprocessParams{
			{Width: 256, Height: 144},
			{Width: 300, Height: 151, Resize: ResizeBilinear, Mean: [3]float32{0.5, 0.5, 0.5}},
			{Width: 9, Height: 5}, // fewer rows than chunks: a row per chunk
		} {
			t.Run(fmt.Sprintf("parallelism %d, %dx%d", par, p.Width, p.Height), func(t *testing.T) {
				want := make([]float32, 3*p.Width*p.Height)
				if err := Preprocess(want, src, p); err != nil {
					t.Fatal(err)
				}
				pp, err := NewPreprocessor(p, par)
				if err != nil {
					t.Fatal(err)
				}
				defer pp.Close()
				got := make([]float32, len(want))
				for round := 0; round < 3; round++ {
					clear(got)
					if err := pp.Run(got, src); err != nil {
						t.Fatal(err)
					}
					for i := range want {
						if got[i] != want[i] {
							t.Fatalf("round %d, parallelism %d: value %d is %v, serial %v", round, pp.Parallelism(), i, got[i], want[i])
						}
					}
				}
			})
		}
	}
}

func TestPreprocessAllocatesNothing(t *testing.T) {
	src := testImage(1280, 720, 1280*3, PixelRGB8, noise)
	p := PreprocessParams{Width: 256, Height: 144}
	dst := make([]float32, 3*256*144)
	if n := testing.AllocsPerRun(5, func() {
		if err := Preprocess(dst, src, p); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("Preprocess allocates %v times per frame, want 0", n)
	}
	pp, err := NewPreprocessor(p, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer pp.Close()
	if n := testing.AllocsPerRun(5, func() {
		if err := pp.Run(dst, src); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("Preprocessor.Run allocates %v times per frame, want 0", n)
	}
}

func TestPreprocessorClose(t *testing.T) {
	pp, err := NewPreprocessor(PreprocessParams{Width: 8, Height: 8}, 4)
	if err != nil {
		t.Fatal(err)
	}
	pp.Close()
	pp.Close()
	src := testImage(16, 16, 48, PixelRGB8, noise)
	if err := pp.Run(make([]float32, 3*64), src); !errors.Is(err, ErrClosed) {
		t.Fatalf("Run after Close: %v, want ErrClosed", err)
	}
}

// End to end on the CPU path: a 1280x720 bgr8 camera frame with orange
// paint in its lower right, preprocessed straight into the session's image
// tensor, penalises the right sectors.
func TestPreprocessIntoReferenceModel(t *testing.T) {
	s := newRefSession(t)
	cfg := s.Config()
	p, err := cfg.PreprocessParams()
	if err != nil {
		t.Fatal(err)
	}
	pp, err := NewPreprocessor(p, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer pp.Close()
	frame := testImage(1280, 720, 1280*3, PixelBGR8, func(x, y, k int) byte {
		if x >= 800 && x < 1200 && y >= 500 {
			return [3]byte{0, 80, 255}[k] // orange, B G R
		}
		return 128
	})
	if err := pp.Run(s.Image(), frame); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Run(); err != nil {
		t.Fatal(err)
	}
	scores := s.Scores()
	if minOf(pick(scores, rightSectors)) > 0.5 || minOf(pick(scores, leftSectors)) != 1 {
		t.Fatalf("scores %v: want the right sectors penalised and the left ones not", scores)
	}
}

func BenchmarkPreprocess1280x720(b *testing.B) {
	rgb := testImage(1280, 720, 1280*3, PixelRGB8, noise)
	mono := testImage(1280, 720, 1280, PixelMono8, noise)
	area := PreprocessParams{Width: 256, Height: 144}
	bilinear := PreprocessParams{Width: 256, Height: 144, Resize: ResizeBilinear}
	dst := make([]float32, 3*256*144)
	for _, bc := range []struct {
		name string
		src  ImageView
		p    PreprocessParams
		par  int // 0: serial Preprocess
	}{
		{"rgb8/area/serial", rgb, area, 0},
		{"rgb8/area/parallel2", rgb, area, 2},
		{"rgb8/area/parallel4", rgb, area, 4}, // --prep-threads' default cap: for machines with the cores
		{"rgb8/area/parallel8", rgb, area, 8},
		{"rgb8/bilinear/serial", rgb, bilinear, 0},
		{"mono8/area/serial", mono, area, 0},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(bc.src.Pix)))
			if bc.par == 0 {
				for b.Loop() {
					if err := Preprocess(dst, bc.src, bc.p); err != nil {
						b.Fatal(err)
					}
				}
				return
			}
			pp, err := NewPreprocessor(bc.p, bc.par)
			if err != nil {
				b.Fatal(err)
			}
			defer pp.Close()
			for b.Loop() {
				if err := pp.Run(dst, bc.src); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// areaPacked must give exactly areaRGB's and areaMono's output (the same
// integer sums and float operations), over sizes that exercise chunk
// splits, row tails that are not a multiple of 8 bytes, padded steps,
// non-integer ratios and footprints of one pixel.
func TestAreaPackedMatchesDirect(t *testing.T) {
	for _, tc := range []struct {
		w, h, pad, dw, dh int
	}{
		{1280, 720, 0, 256, 144}, {1280, 720, 5, 256, 144}, {640, 480, 3, 224, 224}, {1920, 1080, 0, 300, 170},
		{13, 7, 1, 5, 3}, {100, 50, 0, 100, 50}, {3000, 40, 7, 7, 3}, {997, 613, 11, 211, 97}, {64, 514, 0, 2, 2}, {1364, 3, 0, 2, 3}, {2000, 3, 0, 3, 3},
	} {
		for _, f := range []PixelFormat{PixelRGB8, PixelBGR8, PixelMono8, PixelRGBA8, PixelBGRA8} {
			bpp := f.BytesPerPixel()
			pattern := noise
			if tc.h == 514 { // 257-row footprints of 255: the 16-bit lanes' limit
				pattern = func(int, int, int) byte { return 255 }
			}
			src := testImage(tc.w, tc.h, tc.w*bpp+tc.pad, f, pattern)
			p := PreprocessParams{Width: tc.dw, Height: tc.dh, Resize: ResizeArea, Mean: [3]float32{0.4, 0.5, 0.6}, Std: [3]float32{0.2, 0.25, 0.3}}
			direct := make([]float32, 3*tc.dw*tc.dh)
			packed := make([]float32, 3*tc.dw*tc.dh)
			pd, err := newPrepPlan(direct, src, p)
			if err != nil {
				t.Fatal(err)
			}
			pp, _ := newPrepPlan(packed, src, p)
			if cols := (tc.w + tc.dw - 1) / tc.dw; cols*bpp > areaChunkBytes {
				continue // a footprint wider than a chunk (cases made for 3 bytes per pixel, at 4)
			}
			if !pp.packedOK() {
				t.Fatalf("%dx%d → %dx%d %v: packed path not taken", tc.w, tc.h, tc.dw, tc.dh, f)
			}
			if bpp >= 3 {
				pd.areaRGB(0, tc.dh)
			} else {
				pd.areaMono(0, tc.dh)
			}
			pp.areaPacked(0, tc.dh)
			for k := range direct {
				if math.Float32bits(direct[k]) != math.Float32bits(packed[k]) { // NaN-free: bits = values
					t.Fatalf("%dx%d (pad %d) → %dx%d %v: value %d is %v packed, %v direct", tc.w, tc.h, tc.pad, tc.dw, tc.dh, f, k, packed[k], direct[k])
				}
			}
		}
	}
}

// TestFourByteFormatsAreTheirThreeByteOnes: an rgba8 or bgra8 image (the
// ZED wrapper's bgra8, cv_bridge's 8UC4) preprocesses to exactly what the
// same image in rgb8 or bgr8 does, whatever its alpha bytes, on every
// resize path. The agent took them for an unknown format and failed every
// frame.
func TestFourByteFormatsAreTheirThreeByteOnes(t *testing.T) {
	for _, tc := range []struct {
		four, three PixelFormat
	}{{PixelRGBA8, PixelRGB8}, {PixelBGRA8, PixelBGR8}} {
		for _, sz := range []struct {
			w, h, dw, dh int
			resize       ResizeMethod
		}{
			{1280, 720, 256, 144, ResizeArea},     // packed sums
			{3000, 40, 7, 3, ResizeArea},          // footprints wider than a chunk: direct sums
			{64, 36, 256, 144, ResizeBilinear},    // enlarged
			{1280, 720, 256, 144, ResizeBilinear}, // reduced, bilinear
		} {
			three := testImage(sz.w, sz.h, sz.w*3+5, tc.three, noise)
			four := testImage(sz.w, sz.h, sz.w*4+7, tc.four, func(x, y, k int) byte {
				if k == 3 {
					return byte(x*31 + y*17) // alpha: anything
				}
				return noise(x, y, k)
			})
			for _, order := range []ColorOrder{ColorRGB, ColorBGR} {
				p := PreprocessParams{Width: sz.dw, Height: sz.dh, Resize: sz.resize, Order: order, Mean: [3]float32{0.4, 0.5, 0.6}, Std: [3]float32{0.2, 0.25, 0.3}}
				want := make([]float32, 3*sz.dw*sz.dh)
				got := make([]float32, 3*sz.dw*sz.dh)
				if err := Preprocess(want, three, p); err != nil {
					t.Fatal(err)
				}
				if err := Preprocess(got, four, p); err != nil {
					t.Fatalf("%v %dx%d: %v", tc.four, sz.w, sz.h, err)
				}
				for k := range want {
					if math.Float32bits(got[k]) != math.Float32bits(want[k]) {
						t.Fatalf("%v %dx%d → %dx%d (resize %d, order %d): value %d is %v, %v gives %v", tc.four, sz.w, sz.h, sz.dw, sz.dh, sz.resize, order, k, got[k], tc.three, want[k])
					}
				}
			}
		}
	}
	for _, e := range []string{"rgba8", "bgra8"} {
		if f, err := PixelFormatFromEncoding(e); err != nil || f.String() != e || f.BytesPerPixel() != 4 {
			t.Errorf("PixelFormatFromEncoding(%q) = %v, %v", e, f, err)
		}
	}
}

// Footprints taller than 257 rows (16-bit lanes could overflow) or wider
// than a chunk go the direct way.
func TestAreaPackedLimits(t *testing.T) {
	for _, tc := range []struct {
		w, h, dw, dh int
		bpp          int
		want         bool
	}{
		{64, 514, 2, 2, 3, true}, {64, 515, 2, 2, 3, false}, {64, 600, 2, 2, 1, false},
		{1364, 8, 2, 2, 3, true}, {1366, 8, 2, 2, 3, false}, {4096, 8, 2, 2, 1, true}, {4098, 8, 2, 2, 1, false},
	} {
		pl := prepPlan{srcW: tc.w, srcH: tc.h, dstW: tc.dw, dstH: tc.dh, bpp: tc.bpp}
		if got := pl.packedOK(); got != tc.want {
			t.Errorf("%dx%d → %dx%d, %d bytes per pixel: packedOK = %t, want %t", tc.w, tc.h, tc.dw, tc.dh, tc.bpp, got, tc.want)
		}
	}
}

// BenchmarkAreaPaths measures the two area implementations side by side on
// the camera's 1280x720 frame to the 256x144 model input.
func BenchmarkAreaPaths(b *testing.B) {
	for _, f := range []PixelFormat{PixelRGB8, PixelMono8} {
		src := testImage(1280, 720, 1280*f.BytesPerPixel(), f, noise)
		dst := make([]float32, 3*256*144)
		pl, err := newPrepPlan(dst, src, PreprocessParams{Width: 256, Height: 144})
		if err != nil {
			b.Fatal(err)
		}
		direct := pl.areaRGB
		if f == PixelMono8 {
			direct = pl.areaMono
		}
		for _, impl := range []struct {
			name string
			run  func(int, int)
		}{{"direct", direct}, {"packed", pl.areaPacked}} {
			b.Run(f.String()+"/"+impl.name, func(b *testing.B) {
				b.SetBytes(int64(len(src.Pix)))
				for b.Loop() {
					impl.run(0, 144)
				}
			})
		}
	}
}
