package infer

import (
	"encoding/binary"
	"fmt"
	"math"
	"runtime"

	"github.com/zerohop/zerohop/internal/team"
)

// PixelFormat is the layout of a source image's bytes.
type PixelFormat uint8

const (
	PixelRGB8  PixelFormat = iota + 1 // 3 bytes per pixel: R, G, B
	PixelBGR8                         // 3 bytes per pixel: B, G, R
	PixelMono8                        // 1 byte per pixel: grey
	PixelRGBA8                        // 4 bytes per pixel: R, G, B, alpha (not read)
	PixelBGRA8                        // 4 bytes per pixel: B, G, R, alpha (not read): the ZED wrapper's
)

// BytesPerPixel is 3 for RGB8 and BGR8, 4 for RGBA8 and BGRA8, 1 for Mono8
// and 0 for an unknown format.
func (f PixelFormat) BytesPerPixel() int {
	switch f {
	case PixelRGB8, PixelBGR8:
		return 3
	case PixelRGBA8, PixelBGRA8:
		return 4
	case PixelMono8:
		return 1
	}
	return 0
}

// blueFirst: the format's first byte is blue.
func (f PixelFormat) blueFirst() bool { return f == PixelBGR8 || f == PixelBGRA8 }

// String is the ROS sensor_msgs/Image encoding name.
func (f PixelFormat) String() string {
	switch f {
	case PixelRGB8:
		return "rgb8"
	case PixelBGR8:
		return "bgr8"
	case PixelMono8:
		return "mono8"
	case PixelRGBA8:
		return "rgba8"
	case PixelBGRA8:
		return "bgra8"
	}
	return fmt.Sprintf("PixelFormat(%d)", uint8(f))
}

// PixelFormatFromEncoding maps a ROS sensor_msgs/Image encoding ("rgb8",
// "bgr8", "mono8", "rgba8", "bgra8") to a PixelFormat.
func PixelFormatFromEncoding(encoding string) (PixelFormat, error) {
	for _, f := range []PixelFormat{PixelRGB8, PixelBGR8, PixelMono8, PixelRGBA8, PixelBGRA8} {
		if f.String() == encoding {
			return f, nil
		}
	}
	return 0, fmt.Errorf("infer: %w: encoding %q: want rgb8, bgr8, mono8, rgba8 or bgra8", ErrImage, encoding)
}

// ImageView describes an image in memory someone else owns (typically a
// leased slot). Preprocessing only reads it.
type ImageView struct {
	Pix    []byte
	Width  int
	Height int
	Step   int // bytes from the start of one row to the next, >= Width*BytesPerPixel
	Format PixelFormat
}

// maxImageSide bounds Width and Height so that no size arithmetic overflows.
const maxImageSide = 1 << 16

// Validate checks that the view's sizes are consistent with its buffer.
func (v ImageView) Validate() error {
	bpp := v.Format.BytesPerPixel()
	switch {
	case bpp == 0:
		return fmt.Errorf("infer: %w: unknown pixel format %v", ErrImage, v.Format)
	case v.Width <= 0 || v.Height <= 0 || v.Width > maxImageSide || v.Height > maxImageSide:
		return fmt.Errorf("infer: %w: size %dx%d: want 1..%d per side", ErrImage, v.Width, v.Height, maxImageSide)
	case v.Step < v.Width*bpp || v.Step > maxImageSide*4:
		return fmt.Errorf("infer: %w: step %d for width %d %v: want %d..%d", ErrImage, v.Step, v.Width, v.Format, v.Width*bpp, maxImageSide*4)
	}
	if need := (v.Height-1)*v.Step + v.Width*bpp; len(v.Pix) < need {
		return fmt.Errorf("infer: %w: %dx%d %v with step %d needs %d bytes, view has %d", ErrImage, v.Width, v.Height, v.Format, v.Step, need, len(v.Pix))
	}
	return nil
}

// ColorOrder is the channel order the model expects.
type ColorOrder uint8

const (
	ColorRGB ColorOrder = iota // channel 0 = R (default)
	ColorBGR                   // channel 0 = B
)

// ResizeMethod chooses how the source is resampled to the model's size.
type ResizeMethod uint8

const (
	// ResizeAuto (the zero value) picks ResizeArea when the model input is
	// no larger than the source in both directions, else ResizeBilinear.
	ResizeAuto ResizeMethod = iota
	// ResizeArea averages the source pixels of each destination pixel's
	// footprint. Footprints are whole source pixels: destination column j
	// covers source columns [j*sw/dw, (j+1)*sw/dw) (integer division), rows
	// likewise, so every source pixel is read exactly once and belongs to
	// one output pixel; with integer ratios (1280x720 → 256x144 is 5x5) it is
	// exact area averaging. It does not alias on large reductions, which
	// keeps small features such as a hazard patch from flickering.
	ResizeArea
	// ResizeBilinear samples with half-pixel centres (as OpenCV's
	// INTER_LINEAR and PyTorch's align_corners=false), clamping at the
	// edges. Right for enlarging; aliases when reducing by more than 2.
	ResizeBilinear
)

// PreprocessParams describes the model's image input.
type PreprocessParams struct {
	Width, Height int        // model input size
	Order         ColorOrder // channel order written into the tensor
	// Mean and Std are per output channel (in Order): value = (x/255 -
	// Mean[c]) / Std[c]. A zero Std means 1, so the zero value is plain x/255.
	Mean, Std [3]float32
	Resize    ResizeMethod
}

func (p PreprocessParams) validate() error {
	if p.Width <= 0 || p.Height <= 0 || p.Width > maxImageSide || p.Height > maxImageSide {
		return fmt.Errorf("infer: %w: model input size %dx%d", ErrImage, p.Width, p.Height)
	}
	if p.Order > ColorBGR || p.Resize > ResizeBilinear {
		return fmt.Errorf("infer: %w: unknown color order %d or resize method %d", ErrImage, p.Order, p.Resize)
	}
	for c := range 3 {
		m, s := float64(p.Mean[c]), float64(p.Std[c])
		if math.IsNaN(m) || math.IsInf(m, 0) || math.IsNaN(s) || math.IsInf(s, 0) || s < 0 {
			return fmt.Errorf("infer: %w: channel %d mean %v std %v: want finite, std >= 0", ErrImage, c, m, s)
		}
	}
	std := p.Std
	for c := range std {
		if std[c] == 0 {
			std[c] = 1
		}
	}
	if err := checkNormalization(p.Mean[:], std[:]); err != nil {
		return fmt.Errorf("infer: %w: mean %v std %v: %v", ErrImage, p.Mean, p.Std, err)
	}
	return nil
}

// Preprocess resizes src to p's size, normalises it and writes float32 CHW
// (3 planes of Width*Height) into dst[:3*Width*Height]. It reads src in place
// (no copy of the frame), allocates nothing and runs on the calling
// goroutine; Preprocessor spreads the same work over several cores.
//
// Mono8 sources fill all three channels with the grey value.
func Preprocess(dst []float32, src ImageView, p PreprocessParams) error {
	plan, err := newPrepPlan(dst, src, p)
	if err != nil {
		return err
	}
	plan.rows(0, p.Height)
	return nil
}

// prepPlan is one frame's preprocessing, split by destination rows.
type prepPlan struct {
	pix              []byte
	srcW, srcH, step int
	bpp              int
	dstW, dstH       int
	area             bool
	// For source byte k of a pixel (k < bpp; for Mono8 k = 0 feeds all
	// three): the plane it is written to and out = x*scale + bias there.
	planes      [3][]float32
	scale, bias [3]float32
}

func newPrepPlan(dst []float32, src ImageView, p PreprocessParams) (prepPlan, error) {
	if err := p.validate(); err != nil {
		return prepPlan{}, err
	}
	if err := src.Validate(); err != nil {
		return prepPlan{}, err
	}
	plane := p.Width * p.Height
	if len(dst) < 3*plane {
		return prepPlan{}, fmt.Errorf("infer: %w: destination holds %d values, %dx%dx3 needs %d", ErrImage, len(dst), p.Width, p.Height, 3*plane)
	}
	pl := prepPlan{
		pix: src.Pix, srcW: src.Width, srcH: src.Height, step: src.Step,
		bpp:  src.Format.BytesPerPixel(),
		dstW: p.Width, dstH: p.Height,
	}
	switch p.Resize {
	case ResizeArea:
		pl.area = true
	case ResizeAuto:
		pl.area = p.Width <= src.Width && p.Height <= src.Height
	}
	// outChan[k]: the output channel fed by source byte k.
	outChan := [3]int{0, 1, 2}
	if src.Format.blueFirst() != (p.Order == ColorBGR) && src.Format != PixelMono8 {
		outChan = [3]int{2, 1, 0}
	}
	for k, c := range outChan {
		std := p.Std[c]
		if std == 0 {
			std = 1
		}
		pl.planes[k] = dst[c*plane : (c+1)*plane]
		pl.scale[k] = 1 / (255 * std)
		pl.bias[k] = -p.Mean[c] / std
	}
	return pl, nil
}

// rows fills destination rows [i0, i1) of all three planes.
func (pl *prepPlan) rows(i0, i1 int) {
	switch {
	case pl.area && pl.packedOK():
		pl.areaPacked(i0, i1)
	case pl.area && pl.bpp >= 3:
		pl.areaRGB(i0, i1)
	case pl.area:
		pl.areaMono(i0, i1)
	default:
		pl.bilinear(i0, i1)
	}
}

// areaChunkBytes is how much of a source row areaPacked sums at a time; its
// column sums for one chunk live on the stack. A multiple of 8.
const areaChunkBytes = 2048

// packedOK: areaPacked can take this plan. Its column sums are 16-bit
// lanes, exact while a footprint spans at most 257 rows (257 × 255 <
// 2^16), and every footprint must fit in one chunk (so that each chunk
// takes at least one). A footprint spans floor((i+1)s/n) - floor(is/n) ≤
// ceil(s/n) source pixels, and at least 1.
func (pl *prepPlan) packedOK() bool {
	rows := (pl.srcH + pl.dstH - 1) / pl.dstH
	cols := (pl.srcW + pl.dstW - 1) / pl.dstW
	return rows <= 257 && cols*pl.bpp <= areaChunkBytes
}

// areaPacked is areaRGB and areaMono, faster: the same integer sums, so the
// same output bit for bit, but summed column-wise first: each source row of
// a footprint band is read once, 8 bytes at a time, into column sums held
// as four 16-bit lanes per uint64 (even bytes in lo, odd bytes in hi), and
// only then summed across each footprint's columns.
func (pl *prepPlan) areaPacked(i0, i1 int) {
	const laneMask = 0x00FF00FF00FF00FF
	var lo, hi [areaChunkBytes / 8]uint64
	var col [areaChunkBytes]uint32
	pix, step, bpp := pl.pix, pl.step, pl.bpp
	srcW, srcH, dstW, dstH := pl.srcW, pl.srcH, pl.dstW, pl.dstH
	p0, p1, p2 := pl.planes[0], pl.planes[1], pl.planes[2]
	a0, a1, a2 := pl.scale[0], pl.scale[1], pl.scale[2]
	b0, b1, b2 := pl.bias[0], pl.bias[1], pl.bias[2]
	for i := i0; i < i1; i++ {
		y0, y1 := footprint(i, dstH, srcH)
		out := p0[i*dstW : (i+1)*dstW]
		out1 := p1[i*dstW : (i+1)*dstW]
		out2 := p2[i*dstW : (i+1)*dstW]
		x0 := 0 // footprint start of column j, as in areaRGB
		for j := 0; j < dstW; {
			// The chunk: columns [j, jEnd), whose footprints lie in source
			// pixels [cx, xe) of at most areaChunkBytes bytes.
			cx, xe, jEnd, nx := x0, x0, j, x0
			for jEnd < dstW {
				next := (jEnd + 1) * srcW / dstW
				x1 := max(next, nx+1)
				if (x1-cx)*bpp > areaChunkBytes {
					break
				}
				xe, nx, jEnd = max(xe, x1), next, jEnd+1
			}
			n := (xe - cx) * bpp
			groups := n / 8
			clear(lo[:groups])
			clear(hi[:groups])
			clear(col[groups*8 : n])
			for y := y0; y < y1; y++ {
				row := pix[y*step+cx*bpp : y*step+xe*bpp]
				for g := range groups {
					v := binary.LittleEndian.Uint64(row[8*g : 8*g+8])
					lo[g] += v & laneMask
					hi[g] += (v >> 8) & laneMask
				}
				for b := groups * 8; b < n; b++ {
					col[b] += uint32(row[b])
				}
			}
			for g := range groups {
				l, h := lo[g], hi[g]
				c := col[8*g : 8*g+8]
				c[0], c[2], c[4], c[6] = uint32(l&0xFFFF), uint32(l>>16&0xFFFF), uint32(l>>32&0xFFFF), uint32(l>>48)
				c[1], c[3], c[5], c[7] = uint32(h&0xFFFF), uint32(h>>16&0xFFFF), uint32(h>>32&0xFFFF), uint32(h>>48)
			}
			for ; j < jEnd; j++ {
				next := (j + 1) * srcW / dstW
				x1 := max(next, x0+1)
				sums := col[(x0-cx)*bpp : (x1-cx)*bpp]
				if bpp >= 3 { // a fourth byte, alpha, is summed and not read
					var s0, s1, s2 uint32
					for k := 0; k+2 < len(sums); k += bpp {
						s0 += sums[k]
						s1 += sums[k+1]
						s2 += sums[k+2]
					}
					inv := 1 / float32((y1-y0)*(x1-x0))
					out[j] = float32(s0)*inv*a0 + b0
					out1[j] = float32(s1)*inv*a1 + b1
					out2[j] = float32(s2)*inv*a2 + b2
				} else {
					var sum uint32
					for _, v := range sums {
						sum += v
					}
					g := float32(sum) / float32((y1-y0)*(x1-x0))
					out[j] = g*a0 + b0
					out1[j] = g*a1 + b1
					out2[j] = g*a2 + b2
				}
				x0 = next
			}
		}
	}
}

// footprint is the source range [lo, hi) behind destination index i of n;
// never empty, so enlarging with ResizeArea degrades to nearest neighbour.
func footprint(i, n, src int) (lo, hi int) {
	lo = i * src / n
	hi = (i + 1) * src / n
	if hi <= lo {
		hi = lo + 1
	}
	return lo, hi
}

// areaRGB takes 3 or 4 bytes per pixel (the fourth, alpha, not read).
func (pl *prepPlan) areaRGB(i0, i1 int) {
	// Locals, not fields: stores into the planes would otherwise make the
	// compiler reload pl's fields in the inner loops.
	pix, step, bpp := pl.pix, pl.step, pl.bpp
	srcW, srcH, dstW, dstH := pl.srcW, pl.srcH, pl.dstW, pl.dstH
	p0, p1, p2 := pl.planes[0], pl.planes[1], pl.planes[2]
	a0, a1, a2 := pl.scale[0], pl.scale[1], pl.scale[2]
	b0, b1, b2 := pl.bias[0], pl.bias[1], pl.bias[2]
	for i := i0; i < i1; i++ {
		y0, y1 := footprint(i, dstH, srcH)
		out := p0[i*dstW : (i+1)*dstW]
		out1 := p1[i*dstW : (i+1)*dstW]
		out2 := p2[i*dstW : (i+1)*dstW]
		x0 := 0
		for j := range out {
			next := (j + 1) * srcW / dstW // footprint(j+1)'s start
			x1 := max(next, x0+1)
			// 64-bit sums: a footprint of more than 2^24 pixels (a huge
			// image to a tiny input) would overflow 32 bits.
			var s0, s1, s2 uint64
			for y := y0; y < y1; y++ {
				row := pix[y*step+x0*bpp : y*step+x1*bpp]
				for k := 0; k+2 < len(row); k += bpp {
					s0 += uint64(row[k])
					s1 += uint64(row[k+1])
					s2 += uint64(row[k+2])
				}
			}
			inv := 1 / float32((y1-y0)*(x1-x0))
			out[j] = float32(s0)*inv*a0 + b0
			out1[j] = float32(s1)*inv*a1 + b1
			out2[j] = float32(s2)*inv*a2 + b2
			x0 = next
		}
	}
}

func (pl *prepPlan) areaMono(i0, i1 int) {
	pix, step := pl.pix, pl.step
	srcW, srcH, dstW, dstH := pl.srcW, pl.srcH, pl.dstW, pl.dstH
	p0, p1, p2 := pl.planes[0], pl.planes[1], pl.planes[2]
	a0, a1, a2 := pl.scale[0], pl.scale[1], pl.scale[2]
	b0, b1, b2 := pl.bias[0], pl.bias[1], pl.bias[2]
	for i := i0; i < i1; i++ {
		y0, y1 := footprint(i, dstH, srcH)
		out := p0[i*dstW : (i+1)*dstW]
		out1 := p1[i*dstW : (i+1)*dstW]
		out2 := p2[i*dstW : (i+1)*dstW]
		x0 := 0
		for j := range out {
			next := (j + 1) * srcW / dstW
			x1 := max(next, x0+1)
			var sum uint64 // 64 bits: see areaRGB
			for y := y0; y < y1; y++ {
				for _, v := range pix[y*step+x0 : y*step+x1] {
					sum += uint64(v)
				}
			}
			g := float32(sum) / float32((y1-y0)*(x1-x0))
			out[j] = g*a0 + b0
			out1[j] = g*a1 + b1
			out2[j] = g*a2 + b2
			x0 = next
		}
	}
}

// bilinearTap is the two source indices and the weight of the second for
// destination index i of n (half-pixel centres, clamped).
func bilinearTap(i, n, src int) (lo, hi int, w float32) {
	f := (float32(i)+0.5)*float32(src)/float32(n) - 0.5
	if f < 0 {
		f = 0
	}
	lo = int(f)
	if lo > src-1 {
		lo = src - 1
	}
	hi = min(lo+1, src-1)
	return lo, hi, f - float32(lo)
}

func (pl *prepPlan) bilinear(i0, i1 int) {
	pix, step, bpp := pl.pix, pl.step, pl.bpp
	srcW, srcH, dstW, dstH := pl.srcW, pl.srcH, pl.dstW, pl.dstH
	p0, p1, p2 := pl.planes[0], pl.planes[1], pl.planes[2]
	a0, a1, a2 := pl.scale[0], pl.scale[1], pl.scale[2]
	b0, b1, b2 := pl.bias[0], pl.bias[1], pl.bias[2]
	// lerp2 interpolates byte k of the pixels at offsets a, b in rows r0, r1.
	lerp2 := func(r0, r1 []byte, a, b, k int, wx, wy float32) float32 {
		top := float32(r0[a+k]) + wx*(float32(r0[b+k])-float32(r0[a+k]))
		bot := float32(r1[a+k]) + wx*(float32(r1[b+k])-float32(r1[a+k]))
		return top + wy*(bot-top)
	}
	for i := i0; i < i1; i++ {
		y0, y1, wy := bilinearTap(i, dstH, srcH)
		r0 := pix[y0*step : y0*step+srcW*bpp]
		r1 := pix[y1*step : y1*step+srcW*bpp]
		out := p0[i*dstW : (i+1)*dstW]
		out1 := p1[i*dstW : (i+1)*dstW]
		out2 := p2[i*dstW : (i+1)*dstW]
		for j := range out {
			x0, x1, wx := bilinearTap(j, dstW, srcW)
			a, b := x0*bpp, x1*bpp
			if bpp == 1 {
				g := lerp2(r0, r1, a, b, 0, wx, wy)
				out[j], out1[j], out2[j] = g*a0+b0, g*a1+b1, g*a2+b2
				continue
			}
			out[j] = lerp2(r0, r1, a, b, 0, wx, wy)*a0 + b0
			out1[j] = lerp2(r0, r1, a, b, 1, wx, wy)*a1 + b1
			out2[j] = lerp2(r0, r1, a, b, 2, wx, wy)*a2 + b2
		}
	}
}

// Preprocessor runs Preprocess split by destination rows over a fixed set of
// persistent helper goroutines (plus the caller's), so a frame costs no
// goroutine start and no allocation. The rows are cut into more chunks than
// goroutines and claimed as they go (internal/team): a helper that wakes
// late, or whose core is busy, leaves its rows to the others instead of
// holding up the frame (fixed halves on 2 workers: 1.2× slower here).
//
// Run and Close must be called from one goroutine at a time (the frame
// loop that owns it). Close stops the helpers.
type Preprocessor struct {
	params  PreprocessParams
	plan    prepPlan   // this frame's job; written by Run before the phase starts
	team    *team.Team // nil with parallelism 1
	workers int
	chunks  int
	closed  bool
}

// DefaultPreprocessParallelism caps the parallelism NewPreprocessor picks,
// leaving cores to the robot's own software.
const DefaultPreprocessParallelism = 4

// prepChunksPerWorker: chunks of rows per goroutine and frame, enough to
// even out a late start, few enough that claiming stays negligible.
const prepChunksPerWorker = 4

// NewPreprocessor starts parallelism-1 helpers (the caller of Run works
// too). parallelism <= 0 means min(GOMAXPROCS, DefaultPreprocessParallelism).
func NewPreprocessor(p PreprocessParams, parallelism int) (*Preprocessor, error) {
	if err := p.validate(); err != nil {
		return nil, err
	}
	if parallelism <= 0 {
		parallelism = min(runtime.GOMAXPROCS(0), DefaultPreprocessParallelism)
	}
	parallelism = min(parallelism, p.Height)
	pp := &Preprocessor{params: p, workers: parallelism, chunks: 1}
	if parallelism > 1 {
		pp.chunks = min(p.Height, parallelism*prepChunksPerWorker, team.MaxChunks)
		pp.team = team.New(parallelism-1, pp.runChunk)
	}
	return pp, nil
}

// runChunk converts chunk c of the destination rows.
func (pp *Preprocessor) runChunk(c int) {
	h := pp.params.Height
	pp.plan.rows(c*h/pp.chunks, (c+1)*h/pp.chunks)
}

// Params returns the parameters the Preprocessor was made with.
func (pp *Preprocessor) Params() PreprocessParams { return pp.params }

// Parallelism is the number of goroutines sharing a frame, the caller's
// included.
func (pp *Preprocessor) Parallelism() int { return pp.workers }

// Run is Preprocess with the rows shared among the goroutines. It returns
// when dst is complete; src is not read after it returns.
func (pp *Preprocessor) Run(dst []float32, src ImageView) error {
	if pp.closed {
		return fmt.Errorf("infer: preprocessor: %w", ErrClosed)
	}
	plan, err := newPrepPlan(dst, src, pp.params)
	if err != nil {
		return err
	}
	pp.plan = plan
	if pp.team == nil {
		pp.runChunk(0)
	} else {
		// Phase publishes plan to the helpers (its state store) and returns
		// once every chunk's writes to dst are done.
		pp.team.Begin()
		pp.team.Phase(pp.chunks)
		pp.team.End()
	}
	pp.plan = prepPlan{} // drop references to the caller's buffers
	return nil
}

// Close stops the helpers and waits for them. Further Runs fail with
// ErrClosed; closing twice is a no-op.
func (pp *Preprocessor) Close() {
	if pp.closed {
		return
	}
	pp.closed = true
	if pp.team != nil {
		pp.team.Close()
	}
}
