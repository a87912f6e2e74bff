package sensor

import (
	"errors"
	"image"
	"image/color"
	"testing"
)

// TestWriteImage converts each decoder output type, from an image whose
// bounds do not start at (0, 0), and checks every pixel against At().
func TestWriteImage(t *testing.T) {
	r := image.Rect(3, 2, 13, 9) // 10×7, offset origin
	fill := func(set func(x, y int, c color.Color)) {
		for y := r.Min.Y; y < r.Max.Y; y++ {
			for x := r.Min.X; x < r.Max.X; x++ {
				set(x, y, color.NRGBA{uint8(x * 20), uint8(y * 25), uint8(x*y + 7), uint8(255 - x*10)})
			}
		}
	}
	nrgba := image.NewNRGBA(r)
	fill(nrgba.Set)
	rgba := image.NewRGBA(r)
	fill(rgba.Set)
	gray := image.NewGray(r)
	fill(gray.Set)
	gray16 := image.NewGray16(r)
	fill(gray16.Set)
	pal := image.NewPaletted(r, color.Palette{color.RGBA{255, 0, 0, 255}, color.RGBA{0, 0, 255, 255}, color.RGBA{10, 20, 30, 255}})
	fill(pal.Set)
	ycc := image.NewYCbCr(r, image.YCbCrSubsampleRatio420)
	for i := range ycc.Y {
		ycc.Y[i] = uint8(i * 3)
	}
	for i := range ycc.Cb {
		ycc.Cb[i], ycc.Cr[i] = uint8(100+i*5), uint8(200-i*4)
	}
	tests := []struct {
		name string
		img  image.Image
	}{{"NRGBA with alpha", nrgba}, {"RGBA", rgba}, {"Gray", gray}, {"Gray16", gray16}, {"Paletted", pal}, {"YCbCr 4:2:0", ycc}}
	for _, tc := range tests {
		for _, enc := range []ImageEncoding{EncodingRGB8, EncodingBGR8, EncodingMono8} {
			t.Run(tc.name+" to "+enc.String(), func(t *testing.T) {
				bpp := enc.BytesPerPixel()
				dst := make([]byte, 10*7*bpp+5)
				for i := range dst {
					dst[i] = 0xEE
				}
				info, err := writeImage(dst, tc.img, enc)
				if err != nil {
					t.Fatal(err)
				}
				if want := (ImageInfo{10, 7, 10 * bpp, enc}); info != want {
					t.Fatalf("info %+v, want %+v", info, want)
				}
				for y := range 7 {
					for x := range 10 {
						// Premultiplied 16-bit → 8-bit: over black.
						cr, cg, cb, _ := tc.img.At(r.Min.X+x, r.Min.Y+y).RGBA()
						want := make([]byte, bpp)
						putPixel(want, enc, uint8(cr>>8), uint8(cg>>8), uint8(cb>>8))
						got := dst[y*info.Step+x*bpp:][:bpp]
						for i := range want {
							if d := int(got[i]) - int(want[i]); d < -1 || d > 1 { // NRGBA rounds, At() truncates
								t.Fatalf("pixel (%d,%d) = %v, want %v", x, y, got, want)
							}
						}
					}
				}
				for _, b := range dst[10*7*bpp:] {
					if b != 0xEE {
						t.Fatal("wrote past the image")
					}
				}
			})
		}
	}
	if _, err := writeImage(make([]byte, 10), nrgba, EncodingRGB8); !errors.Is(err, ErrShortBuffer) {
		t.Errorf("short buffer: %v, want ErrShortBuffer", err)
	}
}
