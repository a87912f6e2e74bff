package sensor

import (
	"image"
	"image/jpeg"
	"image/png"
	"os"
	"path/filepath"
	"testing"
)

// Run with -cpu 1: the synthetic source must keep up with 30 Hz on one core.
//
//	go test ./sensor -run '^$' -bench . -benchmem -cpu 1 -count 5

func BenchmarkSyntheticPoints(b *testing.B) {
	s := newSynthetic(b, SyntheticConfig{})
	dst := make([]byte, s.MaxPoints()*PointStep)
	b.SetBytes(int64(len(dst)))
	b.ReportAllocs()
	seq := uint64(0)
	for b.Loop() {
		if _, err := s.FillPoints(seq, dst); err != nil {
			b.Fatal(err)
		}
		seq++ // the obstacle moves every frame
	}
}

func BenchmarkSyntheticImage(b *testing.B) {
	s := newSynthetic(b, SyntheticConfig{})
	dst := make([]byte, s.MaxImageBytes())
	b.SetBytes(int64(len(dst)))
	b.ReportAllocs()
	seq := uint64(0)
	for b.Loop() {
		if _, err := s.FillImage(seq, dst); err != nil {
			b.Fatal(err)
		}
		seq++
	}
}

// BenchmarkNewSynthetic is the one-off cost of ray casting the static scene.
func BenchmarkNewSynthetic(b *testing.B) {
	for b.Loop() {
		newSynthetic(b, SyntheticConfig{})
	}
}

// writeReplayFrame stores synthetic frame 0 as a KITTI .bin, a PNG and a
// JPEG in dir, so that replay benchmarks read full-size files.
func writeReplayFrame(b *testing.B, dir string) {
	s := newSynthetic(b, SyntheticConfig{})
	pts := make([]byte, s.MaxPoints()*PointStep)
	n, err := s.FillPoints(0, pts)
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "0.bin"), pts[:n*PointStep], 0o644); err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, s.MaxImageBytes())
	info, err := s.FillImage(0, buf)
	if err != nil {
		b.Fatal(err)
	}
	img := image.NewRGBA(image.Rect(0, 0, info.Width, info.Height))
	for i := range info.Width * info.Height {
		copy(img.Pix[4*i:], buf[3*i:3*i+3])
		img.Pix[4*i+3] = 255
	}
	for name, enc := range map[string]func(*os.File) error{
		"png": func(f *os.File) error { return png.Encode(f, img) },
		"jpg": func(f *os.File) error { return jpeg.Encode(f, img, &jpeg.Options{Quality: 90}) },
	} {
		if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
			b.Fatal(err)
		}
		f, err := os.Create(filepath.Join(dir, name, "0."+name))
		if err != nil {
			b.Fatal(err)
		}
		if err := enc(f); err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
}

// BenchmarkReplay reads one full-size frame per iteration from disk (page
// cache): the .bin straight into dst, the images decoded and converted.
func BenchmarkReplay(b *testing.B) {
	dir := b.TempDir()
	writeReplayFrame(b, dir)
	for _, format := range []string{"png", "jpg"} {
		r, err := NewReplay(dir, ReplayConfig{Loop: true, ImageDir: filepath.Join(dir, format)})
		if err != nil {
			b.Fatal(err)
		}
		if format == "png" {
			pts := make([]byte, r.MaxPoints()*PointStep)
			b.Run("bin", func(b *testing.B) {
				b.SetBytes(int64(len(pts)))
				b.ReportAllocs()
				for b.Loop() {
					if _, err := r.FillPoints(0, pts); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		img := make([]byte, r.MaxImageBytes())
		b.Run(format, func(b *testing.B) {
			b.SetBytes(int64(len(img)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := r.FillImage(0, img); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSyntheticReference is the brute-force cast of every ray and pixel
// against the whole scene (the test oracle): the cost the static-scene cache
// saves. Compare with BenchmarkSyntheticPoints and BenchmarkSyntheticImage.
func BenchmarkSyntheticReference(b *testing.B) {
	s := newSynthetic(b, SyntheticConfig{})
	b.Run("points", func(b *testing.B) {
		for seq := uint64(0); b.Loop(); seq++ {
			refPoints(s, seq)
		}
	})
	b.Run("image", func(b *testing.B) {
		for seq := uint64(0); b.Loop(); seq++ {
			refImage(s, seq)
		}
	})
}
