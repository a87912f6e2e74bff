package sensor

import (
	"fmt"
	"image"
	"image/color"
)

// encodingFor is the encoding a decoded image of colour model m is written
// in when the caller asks for none: mono8 for grey images, rgb8 otherwise.
func encodingFor(m color.Model, want ImageEncoding) ImageEncoding {
	if want != 0 {
		return want
	}
	if m == color.GrayModel || m == color.Gray16Model {
		return EncodingMono8
	}
	return EncodingRGB8
}

// writeImage converts img into dst as tightly packed rows of enc. Alpha is
// dropped after compositing over black (premultiplied values are used as
// they are). dst must hold width × height × enc.BytesPerPixel() bytes.
func writeImage(dst []byte, img image.Image, enc ImageEncoding) (ImageInfo, error) {
	b := img.Bounds()
	w, h, bpp := b.Dx(), b.Dy(), enc.BytesPerPixel()
	info := ImageInfo{Width: w, Height: h, Step: w * bpp, Encoding: enc}
	if need := info.Bytes(); len(dst) < need {
		return ImageInfo{}, fmt.Errorf("%d×%d %s image needs %d bytes, buffer has %d: %w", w, h, enc, need, len(dst), ErrShortBuffer)
	}
	o := 0
	put := func(r, g, bl uint8) {
		putPixel(dst[o:], enc, r, g, bl)
		o += bpp
	}
	switch m := img.(type) {
	case *image.YCbCr: // JPEG colour
		for y := b.Min.Y; y < b.Max.Y; y++ {
			for x := b.Min.X; x < b.Max.X; x++ {
				ci := m.COffset(x, y)
				put(color.YCbCrToRGB(m.Y[m.YOffset(x, y)], m.Cb[ci], m.Cr[ci]))
			}
		}
	case *image.Gray: // PNG and JPEG grey
		for y := b.Min.Y; y < b.Max.Y; y++ {
			row := m.Pix[m.PixOffset(b.Min.X, y):][:w]
			for _, g := range row {
				put(g, g, g)
			}
		}
	case *image.RGBA:
		for y := b.Min.Y; y < b.Max.Y; y++ {
			row := m.Pix[m.PixOffset(b.Min.X, y):][:4*w]
			for i := 0; i < len(row); i += 4 {
				put(row[i], row[i+1], row[i+2])
			}
		}
	case *image.NRGBA: // PNG colour, with or without alpha
		for y := b.Min.Y; y < b.Max.Y; y++ {
			row := m.Pix[m.PixOffset(b.Min.X, y):][:4*w]
			for i := 0; i < len(row); i += 4 {
				a := uint32(row[i+3])
				mul := func(c uint8) uint8 { return uint8((uint32(c)*a + 127) / 255) }
				put(mul(row[i]), mul(row[i+1]), mul(row[i+2]))
			}
		}
	default: // paletted, 16-bit, CMYK, ...: slow but general
		for y := b.Min.Y; y < b.Max.Y; y++ {
			for x := b.Min.X; x < b.Max.X; x++ {
				r, g, bl, _ := img.At(x, y).RGBA()
				put(uint8(r>>8), uint8(g>>8), uint8(bl>>8))
			}
		}
	}
	return info, nil
}
