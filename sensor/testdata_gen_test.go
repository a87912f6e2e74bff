package sensor

// The files under testdata/replay are made by the generators below. To
// change them, edit the generators and run
//
//	go test ./sensor -run TestTestdataUpToDate -update
//
// Without -update the test checks that the committed point files are exactly
// what the generators make (images are checked by decoding, since PNG and
// JPEG encoder output may change between Go releases).

import (
	"bytes"
	"encoding/binary"
	"flag"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite sensor/testdata from the generators")

type testPoint struct{ X, Y, Z, I float32 }

// mixedClouds are the clouds of testdata/replay/mixed, one per frame, as
// written (including points with NaN coordinates, which the reader drops).
func mixedClouds() [][]testPoint {
	nan := float32(math.NaN())
	return [][]testPoint{
		{{1.5, -2.25, 0.125, 0.5}, {10, 0, -1.75, 0.25}, {nan, 1, 1, 1}, {-3.5, 4.75, 2, 0}, {0.001, 1e5, -7, 0.75}},
		{{0.5, 0.25, 0, 0.1}, {nan, nan, nan, 0}, {-1.25, 3.5, 1.125, 0.9}, {42, -17.5, 0.0625, 0.33}},
		{{2, 3, 4, 5}, {-6.5, 7.25, -8.125, 9}, {100.5, -200.25, 0.5, 0}},
		{{1, 2, 3, 0.4}, {-1, -2, -3, 0.6}, {0, 0, 0, 0}, {5.5, 6.5, 7.5, 0.7}, {-8, 9, -10, 0.8}, {11, -12, 13, 0.9}},
	}
}

// mixedTimestamps are the lines of testdata/replay/mixed/timestamps.txt,
// one per frame in KITTI raw's format; mixedOffsets are their times after
// the first's (irregular intervals, as a LiDAR's are).
func mixedTimestamps() []string {
	return []string{"2011-09-26 13:02:25.964389445", "2011-09-26 13:02:26.074012001", "2011-09-26 13:02:26.170000000", "2011-09-26 13:02:26.276543210"}
}

func mixedOffsets() []time.Duration { return []time.Duration{0, 109622556, 205610555, 312153765} }

// testImageSize is the size of every generated image; 8×8 blocks of one
// colour keep JPEG close to the original.
const testImageW, testImageH = 24, 16

func testPatternRGB(x, y int) RGB {
	palette := [...]RGB{{255, 0, 0}, {0, 200, 0}, {0, 0, 255}, {250, 250, 250}, {20, 20, 20}, {255, 160, 0}}
	return palette[(x/8+3*(y/8))%len(palette)]
}

func testPatternGray(x, y int) uint8 { return uint8(30 + 40*((x/8+3*(y/8))%6)) }

// mixedFiles returns the files of testdata/replay/mixed.
func mixedFiles(t *testing.T) map[string][]byte {
	clouds := mixedClouds()
	files := map[string][]byte{
		"000000.bin":     kittiBin(clouds[0]),
		"000001.pcd":     pcdASCII(clouds[1]),
		"000002.pcd":     pcdBinaryReordered(clouds[2]),
		"000003.pcd":     pcdBinaryNative(clouds[3]),
		"timestamps.txt": []byte(strings.Join(mixedTimestamps(), "\n") + "\n"),
	}
	rgb := image.NewNRGBA(image.Rect(0, 0, testImageW, testImageH))
	gray := image.NewGray(image.Rect(0, 0, testImageW, testImageH))
	for y := range testImageH {
		for x := range testImageW {
			c := testPatternRGB(x, y)
			rgb.SetNRGBA(x, y, color.NRGBA{c.R, c.G, c.B, 255})
			gray.SetGray(x, y, color.Gray{testPatternGray(x, y)})
		}
	}
	files["000000.png"] = encodePNG(t, rgb)
	files["000001.jpg"] = encodeJPEG(t, rgb)
	files["000002.png"] = encodePNG(t, gray)
	files["000003.jpg"] = encodeJPEG(t, gray)
	return files
}

// badFiles returns the malformed files of testdata/replay/bad.
func badFiles(t *testing.T) map[string][]byte {
	header := func(fields, size, typ, count string, points int, data string) string {
		return fmt.Sprintf("# .PCD v0.7\nVERSION 0.7\nFIELDS %s\nSIZE %s\nTYPE %s\nCOUNT %s\nWIDTH %d\nHEIGHT 1\nVIEWPOINT 0 0 0 1 0 0 0\nPOINTS %d\nDATA %s\n",
			fields, size, typ, count, points, points, data)
	}
	// A PNG big enough that cutting it leaves a valid header and part of the data.
	noise := image.NewGray(image.Rect(0, 0, 64, 64))
	for i := range noise.Pix {
		noise.Pix[i] = uint8(i * 7919 >> 3)
	}
	fullPNG := encodePNG(t, noise)
	return map[string][]byte{
		"truncated.bin": bytes.Repeat([]byte{0}, 1001),
		"bad_header.pcd": []byte("VERSION 0.7\nFIELDS x y z intensity\nSIZE 4 4 4\nTYPE F F F F\n" +
			"WIDTH 1\nHEIGHT 1\nPOINTS 1\nDATA ascii\n1 2 3 4\n"),
		"compressed.pcd":  []byte(header("x y z intensity", "4 4 4 4", "F F F F", "1 1 1 1", 1, "binary_compressed") + "\x10\x00\x00\x00\x10\x00\x00\x00"),
		"missing_z.pcd":   []byte(header("x y intensity", "4 4 4", "F F F", "1 1 1", 1, "ascii") + "1 2 3\n"),
		"short_data.pcd":  append([]byte(header("x y z intensity", "4 4 4 4", "F F F F", "1 1 1 1", 10, "binary")), make([]byte, 5*16)...),
		"short_ascii.pcd": []byte(header("x y z intensity", "4 4 4 4", "F F F F", "1 1 1 1", 5, "ascii") + "1 2 3 4\n5 6 7 8\n9 10 11 12\n"),
		"bad_number.pcd":  []byte(header("x y z intensity", "4 4 4 4", "F F F F", "1 1 1 1", 2, "ascii") + "1 2 3 4\n1.0 abc 3 4\n"),
		"few_values.pcd":  []byte(header("x y z intensity", "4 4 4 4", "F F F F", "1 1 1 1", 2, "ascii") + "1 2 3 4\n1 2 3\n"),
		"not_image.png":   []byte("this is text, not a PNG\n"),
		"truncated.png":   fullPNG[:len(fullPNG)/2],
	}
}

func kittiBin(pts []testPoint) []byte {
	var b bytes.Buffer
	for _, p := range pts {
		_ = binary.Write(&b, binary.LittleEndian, p)
	}
	return b.Bytes()
}

func formatF32(f float32) string {
	if math.IsNaN(float64(f)) {
		return "nan"
	}
	return strconv.FormatFloat(float64(f), 'g', -1, 32)
}

// pcdASCII writes x y z intensity as text, with a comment and a blank line
// the reader must skip.
func pcdASCII(pts []testPoint) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "# .PCD v0.7 - Point Cloud Data file format\nVERSION 0.7\nFIELDS x y z intensity\nSIZE 4 4 4 4\nTYPE F F F F\nCOUNT 1 1 1 1\n"+
		"WIDTH %d\nHEIGHT 1\nVIEWPOINT 0 0 0 1 0 0 0\nPOINTS %d\nDATA ascii\n", len(pts), len(pts))
	for i, p := range pts {
		if i == 1 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "%s %s %s %s\n", formatF32(p.X), formatF32(p.Y), formatF32(p.Z), formatF32(p.I))
	}
	return []byte(b.String())
}

// pcdBinaryReordered stores the fields out of order, with other types, a
// padding field and an extra field: intensity F4, x F8, _ U1×3, y F4, z F8,
// ring U2 (29-byte records).
func pcdBinaryReordered(pts []testPoint) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "VERSION .7\nFIELDS intensity x _ y z ring\nSIZE 4 8 1 4 8 2\nTYPE F F U F F U\nCOUNT 1 1 3 1 1 1\n"+
		"WIDTH %d\nHEIGHT 1\nPOINTS %d\nDATA binary\n", len(pts), len(pts))
	le := binary.LittleEndian
	for i, p := range pts {
		_ = binary.Write(&b, le, p.I)
		_ = binary.Write(&b, le, float64(p.X))
		b.Write([]byte{0xAA, 0xBB, 0xCC})
		_ = binary.Write(&b, le, p.Y)
		_ = binary.Write(&b, le, float64(p.Z))
		_ = binary.Write(&b, le, uint16(i))
	}
	return b.Bytes()
}

// pcdBinaryNative stores records in the slot layout (the reader's fast path).
func pcdBinaryNative(pts []testPoint) []byte {
	h := fmt.Sprintf("VERSION 0.7\nFIELDS x y z intensity\nSIZE 4 4 4 4\nTYPE F F F F\nCOUNT 1 1 1 1\nWIDTH %d\nHEIGHT 1\nPOINTS %d\nDATA binary\n", len(pts), len(pts))
	return append([]byte(h), kittiBin(pts)...)
}

func encodePNG(t *testing.T, img image.Image) []byte {
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func encodeJPEG(t *testing.T, img image.Image) []byte {
	var b bytes.Buffer
	if err := jpeg.Encode(&b, img, &jpeg.Options{Quality: 95}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestTestdataUpToDate(t *testing.T) {
	sets := map[string]map[string][]byte{
		"testdata/replay/mixed": mixedFiles(t),
		"testdata/replay/bad":   badFiles(t),
	}
	for dir, files := range sets {
		for name, want := range files {
			path := filepath.Join(dir, name)
			if *update {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, want, 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Errorf("%v (run with -update to create it)", err)
				continue
			}
			switch filepath.Ext(name) {
			case ".png", ".jpg":
				if _, _, err := image.Decode(bytes.NewReader(got)); err != nil && name != "not_image.png" && name != "truncated.png" {
					t.Errorf("%s: %v", path, err)
				}
			default:
				if !bytes.Equal(got, want) {
					t.Errorf("%s differs from its generator (run with -update)", path)
				}
			}
		}
	}
}
