package sensor

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const mixedDir = "testdata/replay/mixed"

// decodePoints reads n slot-layout points from b.
func decodePoints(b []byte, n int) []testPoint {
	le := binary.LittleEndian
	out := make([]testPoint, n)
	for i := range out {
		p := b[i*PointStep:]
		out[i] = testPoint{
			math.Float32frombits(le.Uint32(p[PointOffsetX:])), math.Float32frombits(le.Uint32(p[PointOffsetY:])),
			math.Float32frombits(le.Uint32(p[PointOffsetZ:])), math.Float32frombits(le.Uint32(p[PointOffsetIntensity:])),
		}
	}
	return out
}

// finitePoints is pts without the points a reader must drop.
func finitePoints(pts []testPoint) []testPoint {
	var out []testPoint
	for _, p := range pts {
		if !math.IsNaN(float64(p.X)) && !math.IsNaN(float64(p.Y)) && !math.IsNaN(float64(p.Z)) {
			out = append(out, p)
		}
	}
	return out
}

func TestReplayReadsEveryFormat(t *testing.T) {
	clouds := mixedClouds()
	// Frame k's image: colour or grey, exact (PNG) or lossy (JPEG).
	images := []struct {
		enc ImageEncoding
		tol int
	}{{EncodingRGB8, 0}, {EncodingRGB8, 12}, {EncodingMono8, 0}, {EncodingMono8, 6}}
	probe, err := NewReplay(mixedDir, ReplayConfig{})
	if err != nil {
		t.Fatal(err)
	}
	decoded := probe.DecodedBytes()
	want := int64(0)
	for k, c := range clouds {
		want += int64(len(c)*PointStep + testImageW*testImageH*images[k].enc.BytesPerPixel())
	}
	if decoded != want {
		t.Fatalf("DecodedBytes = %d, want %d: every cloud's points and every image's pixels", decoded, want)
	}
	for _, tc := range []struct {
		name      string
		cfg       ReplayConfig
		preloaded bool
	}{
		{"read per frame", ReplayConfig{}, false},
		{"preloaded", ReplayConfig{Preload: true}, true},
		{"preloaded, at its limit", ReplayConfig{Preload: true, PreloadLimit: decoded}, true},
		// Over the limit, read as it plays: a whole KITTI sequence
		// decoded did not fit a Jetson's memory.
		{"over the preload limit", ReplayConfig{Preload: true, PreloadLimit: decoded - 1}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := NewReplay(mixedDir, tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if r.Preloaded() != tc.preloaded || r.DecodedBytes() != decoded {
				t.Fatalf("preloaded %t, %d decoded bytes; want %t, %d", r.Preloaded(), r.DecodedBytes(), tc.preloaded, decoded)
			}
			if got := r.Frames(); got != uint64(len(clouds)) {
				t.Fatalf("Frames = %d, want %d", got, len(clouds))
			}
			maxPts := 0
			for _, c := range clouds {
				maxPts = max(maxPts, len(c))
			}
			if r.MaxPoints() != maxPts {
				t.Errorf("MaxPoints = %d, want %d", r.MaxPoints(), maxPts)
			}
			if want := testImageW * testImageH * 3; r.MaxImageBytes() != want {
				t.Errorf("MaxImageBytes = %d, want %d", r.MaxImageBytes(), want)
			}
			pts := make([]byte, r.MaxPoints()*PointStep)
			img := make([]byte, r.MaxImageBytes())
			for k := range clouds {
				n, err := r.FillPoints(uint64(k), pts)
				if err != nil {
					t.Fatalf("frame %d: %v", k, err)
				}
				want := finitePoints(clouds[k])
				if got := decodePoints(pts, n); !equalPoints(got, want) {
					t.Errorf("frame %d points:\n got %v\nwant %v", k, got, want)
				}
				info, err := r.FillImage(uint64(k), img)
				if err != nil {
					t.Fatalf("frame %d: %v", k, err)
				}
				wantInfo := ImageInfo{testImageW, testImageH, testImageW * images[k].enc.BytesPerPixel(), images[k].enc}
				if info != wantInfo {
					t.Fatalf("frame %d image info %+v, want %+v", k, info, wantInfo)
				}
				checkPattern(t, k, img, info, images[k].tol)
			}
		})
	}
}

func equalPoints(a, b []testPoint) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// checkPattern compares an image written by Replay with the generator's
// pattern, allowing tol per channel.
func checkPattern(t *testing.T, frame int, img []byte, info ImageInfo, tol int) {
	t.Helper()
	bad := 0
	for y := range info.Height {
		for x := range info.Width {
			c := testPatternRGB(x, y)
			want := []uint8{c.R, c.G, c.B}
			if info.Encoding == EncodingMono8 {
				want = []uint8{testPatternGray(x, y)}
			}
			got := img[y*info.Step+x*len(want):][:len(want)]
			for ch := range want {
				if d := int(got[ch]) - int(want[ch]); d > tol || d < -tol {
					if bad++; bad <= 3 {
						t.Errorf("frame %d pixel (%d,%d) = %v, want %v ±%d", frame, x, y, got, want, tol)
					}
					break
				}
			}
		}
	}
	if bad > 3 {
		t.Errorf("frame %d: %d pixels differ", frame, bad)
	}
}

func TestReplayEncodingOverride(t *testing.T) {
	r, err := NewReplay(mixedDir, ReplayConfig{Encoding: EncodingBGR8})
	if err != nil {
		t.Fatal(err)
	}
	img := make([]byte, r.MaxImageBytes())
	for k, frame := range []uint64{0, 2} { // a colour and a grey PNG
		info, err := r.FillImage(frame, img)
		if err != nil {
			t.Fatal(err)
		}
		if info.Encoding != EncodingBGR8 || info.Step != 3*testImageW {
			t.Fatalf("frame %d: info %+v, want bgr8 rows of %d bytes", frame, info, 3*testImageW)
		}
		for y := range testImageH {
			for x := range testImageW {
				c := testPatternRGB(x, y)
				want := [3]uint8{c.B, c.G, c.R}
				if k == 1 {
					g := testPatternGray(x, y)
					want = [3]uint8{g, g, g}
				}
				if got := [3]uint8(img[y*info.Step+3*x:]); got != want {
					t.Fatalf("frame %d pixel (%d,%d) = %v, want %v", frame, x, y, got, want)
				}
			}
		}
	}
}

func TestReplayFrameSequence(t *testing.T) {
	tests := []struct {
		name      string
		loop      bool
		seq       uint64
		wantFrame int // -1: ErrEndOfFrames
	}{
		{"first frame", false, 0, 0},
		{"last frame", false, 3, 3},
		{"past the end stops", false, 4, -1},
		{"far past the end stops", false, math.MaxUint64, -1},
		{"looping wraps", true, 5, 1},
		{"looping wraps huge seq", true, math.MaxUint64, int(math.MaxUint64 % 4)},
	}
	clouds := mixedClouds()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := NewReplay(mixedDir, ReplayConfig{Loop: tc.loop})
			if err != nil {
				t.Fatal(err)
			}
			if wantFrames := map[bool]uint64{false: 4, true: 0}[tc.loop]; r.Frames() != wantFrames {
				t.Errorf("Frames = %d, want %d", r.Frames(), wantFrames)
			}
			buf := make([]byte, r.MaxPoints()*PointStep)
			n, err := r.FillPoints(tc.seq, buf)
			_, imgErr := r.FillImage(tc.seq, make([]byte, r.MaxImageBytes()))
			if tc.wantFrame < 0 {
				if !errors.Is(err, ErrEndOfFrames) || !errors.Is(imgErr, ErrEndOfFrames) {
					t.Fatalf("got %v and %v, want ErrEndOfFrames", err, imgErr)
				}
				return
			}
			if err != nil || imgErr != nil {
				t.Fatal(err, imgErr)
			}
			if got, want := decodePoints(buf, n), finitePoints(clouds[tc.wantFrame]); !equalPoints(got, want) {
				t.Errorf("seq %d gave %v, want frame %d %v", tc.seq, got, tc.wantFrame, want)
			}
		})
	}
}

// copyTestFile copies testdata file src into dir under name.
func copyTestFile(t *testing.T, src, dir, name string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestReplayPairsFilesBySortedOrder(t *testing.T) {
	dir := t.TempDir()
	// Names differ between the streams; order alone pairs them.
	copyTestFile(t, filepath.Join(mixedDir, "000003.pcd"), dir, "a_cloud.pcd")
	copyTestFile(t, filepath.Join(mixedDir, "000000.bin"), dir, "b_cloud.bin")
	copyTestFile(t, filepath.Join(mixedDir, "000002.png"), dir, "img_1.png")
	copyTestFile(t, filepath.Join(mixedDir, "000000.png"), dir, "img_2.png")
	r, err := NewReplay(dir, ReplayConfig{})
	if err != nil {
		t.Fatal(err)
	}
	clouds := mixedClouds()
	pts := make([]byte, r.MaxPoints()*PointStep)
	img := make([]byte, r.MaxImageBytes())
	for k, want := range []struct {
		cloud []testPoint
		enc   ImageEncoding
	}{{clouds[3], EncodingMono8}, {clouds[0], EncodingRGB8}} {
		n, err := r.FillPoints(uint64(k), pts)
		if err != nil {
			t.Fatal(err)
		}
		if got := decodePoints(pts, n); !equalPoints(got, finitePoints(want.cloud)) {
			t.Errorf("frame %d points %v, want %v", k, got, finitePoints(want.cloud))
		}
		info, err := r.FillImage(uint64(k), img)
		if err != nil {
			t.Fatal(err)
		}
		if info.Encoding != want.enc {
			t.Errorf("frame %d image %v, want %v", k, info.Encoding, want.enc)
		}
	}

	// One more image than clouds: the pairing would be ambiguous.
	copyTestFile(t, filepath.Join(mixedDir, "000000.png"), dir, "img_3.png")
	if _, err := NewReplay(dir, ReplayConfig{}); err == nil || !strings.Contains(err.Error(), "counts must match") {
		t.Errorf("2 clouds + 3 images: err = %v, want a count mismatch", err)
	}
}

func TestReplaySeparateImageDir(t *testing.T) {
	points, images := t.TempDir(), t.TempDir()
	copyTestFile(t, filepath.Join(mixedDir, "000000.bin"), points, "0.bin")
	copyTestFile(t, filepath.Join(mixedDir, "000002.png"), points, "ignored.png") // not the image stream
	copyTestFile(t, filepath.Join(mixedDir, "000000.png"), images, "0.png")
	r, err := NewReplay(points, ReplayConfig{ImageDir: images})
	if err != nil {
		t.Fatal(err)
	}
	info, err := r.FillImage(0, make([]byte, r.MaxImageBytes()))
	if err != nil {
		t.Fatal(err)
	}
	if info.Encoding != EncodingRGB8 || r.Frames() != 1 {
		t.Errorf("image %+v, frames %d: want the rgb8 image from ImageDir, 1 frame", info, r.Frames())
	}
}

func TestReplayOneStreamOnly(t *testing.T) {
	dir := t.TempDir()
	copyTestFile(t, filepath.Join(mixedDir, "000000.bin"), dir, "0.bin")
	r, err := NewReplay(dir, ReplayConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if r.MaxImageBytes() != 0 {
		t.Errorf("MaxImageBytes = %d without images, want 0", r.MaxImageBytes())
	}
	if _, err := r.FillImage(0, nil); !errors.Is(err, ErrNotProvided) {
		t.Errorf("FillImage without images: %v, want ErrNotProvided", err)
	}

	dir = t.TempDir()
	copyTestFile(t, filepath.Join(mixedDir, "000000.png"), dir, "0.png")
	if r, err = NewReplay(dir, ReplayConfig{}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.FillPoints(0, nil); !errors.Is(err, ErrNotProvided) {
		t.Errorf("FillPoints without clouds: %v, want ErrNotProvided", err)
	}

	if _, err := NewReplay(t.TempDir(), ReplayConfig{}); err == nil || !strings.Contains(err.Error(), "no point") {
		t.Errorf("empty dir: %v, want an error saying there are no files", err)
	}
	if _, err := NewReplay(filepath.Join(t.TempDir(), "missing"), ReplayConfig{}); err == nil {
		t.Error("missing dir: no error")
	}
}

func TestReplayShortBuffer(t *testing.T) {
	for _, preload := range []bool{false, true} {
		r, err := NewReplay(mixedDir, ReplayConfig{Preload: preload})
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []int{0, r.MaxPoints()*PointStep - 1} {
			if _, err := r.FillPoints(0, make([]byte, n)); !errors.Is(err, ErrShortBuffer) {
				t.Errorf("preload %v: FillPoints into %d bytes: %v, want ErrShortBuffer", preload, n, err)
			}
		}
		for _, n := range []int{0, r.MaxImageBytes() - 1} {
			if _, err := r.FillImage(0, make([]byte, n)); !errors.Is(err, ErrShortBuffer) {
				t.Errorf("preload %v: FillImage into %d bytes: %v, want ErrShortBuffer", preload, n, err)
			}
		}
	}
}

// TestReplayMalformedFiles puts each bad file alone in a directory. Header
// and size defects fail NewReplay; defects in the data fail the frame (or
// NewReplay with Preload). Every error names the file and the problem.
func TestReplayMalformedFiles(t *testing.T) {
	tests := []struct {
		file     string
		atFill   bool // found only when the frame is read
		wantText string
	}{
		{"truncated.bin", false, "size 1001 bytes is not a multiple of 16 (float32 x,y,z,i)"},
		{"bad_header.pcd", false, "SIZE has 3 values for 4 fields"},
		{"compressed.pcd", false, "binary_compressed is not supported"},
		{"missing_z.pcd", false, "missing field z"},
		{"short_data.pcd", false, "binary data is 80 bytes, but POINTS 10 × 16-byte records need 160"},
		{"short_ascii.pcd", true, "ascii data ends after 3 of 5 points"},
		{"bad_number.pcd", true, `value 2 "abc" is not a number`},
		{"few_values.pcd", true, "has 3 values, the header declares 4"},
		{"not_image.png", false, "not a PNG or JPEG image"},
		{"truncated.png", true, "decode image"},
		// Headers that would size buffers from nothing: 2^30 points in 99
		// bytes, 32768×32768 pixels in 59 (no buffer may be sized first).
		{"huge_ascii.pcd", false, "ascii data is 6 bytes, too short for POINTS 1073741824 (at most 3 points fit)"},
		{"huge.png", false, "image size 32768×32768 is out of range"},
	}
	for _, tc := range tests {
		for _, preload := range []bool{false, true} {
			t.Run(tc.file+map[bool]string{false: "", true: " preloaded"}[preload], func(t *testing.T) {
				dir := t.TempDir()
				copyTestFile(t, filepath.Join("testdata/replay/bad", tc.file), dir, tc.file)
				r, err := NewReplay(dir, ReplayConfig{Preload: preload})
				if tc.atFill && !preload {
					if err != nil {
						t.Fatalf("NewReplay: %v, want the error when the frame is read", err)
					}
					if strings.HasSuffix(tc.file, ".png") {
						_, err = r.FillImage(0, make([]byte, r.MaxImageBytes()))
					} else {
						_, err = r.FillPoints(0, make([]byte, r.MaxPoints()*PointStep))
					}
				}
				if err == nil {
					t.Fatal("no error")
				}
				path := filepath.Join(dir, tc.file)
				if !strings.Contains(err.Error(), `replay: "`+path+`": `) || !strings.Contains(err.Error(), tc.wantText) {
					t.Errorf("error %q\nwant it to name %q and say %q", err, path, tc.wantText)
				}
			})
		}
	}
}

func TestReplayPreloadedFillDoesNotAllocate(t *testing.T) {
	r, err := NewReplay(mixedDir, ReplayConfig{Preload: true, Loop: true})
	if err != nil {
		t.Fatal(err)
	}
	pts := make([]byte, r.MaxPoints()*PointStep)
	img := make([]byte, r.MaxImageBytes())
	seq := uint64(0)
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := r.FillPoints(seq, pts); err != nil {
			t.Fatal(err)
		}
		if _, err := r.FillImage(seq, img); err != nil {
			t.Fatal(err)
		}
		seq++
	})
	if allocs != 0 {
		t.Errorf("preloaded FillPoints+FillImage: %v allocations per frame, want 0", allocs)
	}
}

// TestReplayPreloadStopsWithItsContext: reading a recording into memory
// ignored SIGINT until it had read every file.
func TestReplayPreloadStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if r, err := NewReplayContext(ctx, mixedDir, ReplayConfig{Preload: true}); !errors.Is(err, context.Canceled) {
		t.Fatalf("NewReplayContext with a cancelled context: %v, %v; want context.Canceled", r, err)
	}
	if _, err := NewReplayContext(context.Background(), mixedDir, ReplayConfig{Preload: true}); err != nil {
		t.Fatal(err)
	}
}

func TestReplayKITTIFolders(t *testing.T) {
	for _, tt := range []struct {
		name           string
		points, images string // folders under DIR; "" for none
		wantFrames     uint64
		wantImg        int // image streams (0 or 1)
	}{
		{"odometry sequence, colour", "velodyne", "image_2", 2, 1},
		{"odometry sequence, grey only", "velodyne", "image_0", 2, 1},
		{"odometry sequence, points only", "velodyne", "", 2, 0},
		{"raw drive", "velodyne_points/data", "image_02/data", 2, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			pd := filepath.Join(dir, filepath.FromSlash(tt.points))
			if err := os.MkdirAll(pd, 0o755); err != nil {
				t.Fatal(err)
			}
			copyTestFile(t, filepath.Join(mixedDir, "000000.bin"), pd, "000000.bin")
			copyTestFile(t, filepath.Join(mixedDir, "000000.bin"), pd, "000001.bin")
			if tt.images != "" {
				id := filepath.Join(dir, filepath.FromSlash(tt.images))
				if err := os.MkdirAll(id, 0o755); err != nil {
					t.Fatal(err)
				}
				copyTestFile(t, filepath.Join(mixedDir, "000000.png"), id, "000000.png")
				copyTestFile(t, filepath.Join(mixedDir, "000000.png"), id, "000001.png")
			}
			r, err := NewReplay(dir, ReplayConfig{})
			if err != nil {
				t.Fatal(err)
			}
			if r.Frames() != tt.wantFrames || r.MaxPoints() == 0 {
				t.Fatalf("frames %d, max points %d: want %d frames with points", r.Frames(), r.MaxPoints(), tt.wantFrames)
			}
			_, err = r.FillImage(1, make([]byte, r.MaxImageBytes()))
			if tt.wantImg == 1 && err != nil {
				t.Fatalf("image of frame 1: %v", err)
			}
			if tt.wantImg == 0 && !errors.Is(err, ErrNotProvided) {
				t.Fatalf("image without an image folder: %v, want ErrNotProvided", err)
			}
		})
	}

	// Unequal streams are named by their folders.
	dir := t.TempDir()
	for _, sub := range []string{"velodyne", "image_2"} {
		if err := os.Mkdir(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	copyTestFile(t, filepath.Join(mixedDir, "000000.bin"), filepath.Join(dir, "velodyne"), "000000.bin")
	copyTestFile(t, filepath.Join(mixedDir, "000000.bin"), filepath.Join(dir, "velodyne"), "000001.bin")
	copyTestFile(t, filepath.Join(mixedDir, "000000.png"), filepath.Join(dir, "image_2"), "000000.png")
	if _, err := NewReplay(dir, ReplayConfig{}); err == nil || !strings.Contains(err.Error(), "image_2") || !strings.Contains(err.Error(), "velodyne") {
		t.Fatalf("2 clouds, 1 image: %v, want an error naming both folders", err)
	}
	// Neither layout: the folder given is named.
	empty := t.TempDir()
	if err := os.Mkdir(filepath.Join(empty, "other"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := NewReplay(empty, ReplayConfig{}); err == nil || !strings.Contains(err.Error(), empty) {
		t.Fatalf("no frames, no KITTI folder: %v", err)
	}
}

// NoImages (no camera) leaves the images out entirely: a folder whose
// image count differs from its point files', or whose image is corrupt,
// replays its clouds, unchanged, and a folder of images alone is refused
// naming the reason.
func TestReplayNoImages(t *testing.T) {
	dir := t.TempDir()
	copyTestFile(t, filepath.Join(mixedDir, "000000.bin"), dir, "0.bin")
	copyTestFile(t, filepath.Join(mixedDir, "000001.pcd"), dir, "1.pcd")
	copyTestFile(t, filepath.Join(mixedDir, "000000.png"), dir, "0.png")
	if err := os.WriteFile(filepath.Join(dir, "1.jpg"), []byte("not a JPEG"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "2.png"), []byte("not a PNG"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := NewReplay(dir, ReplayConfig{}); err == nil {
		t.Fatal("with images, 2 point files and 3 images (2 corrupt) were accepted; fix the test")
	}
	for _, preload := range []bool{false, true} {
		r, err := NewReplay(dir, ReplayConfig{NoImages: true, Preload: preload})
		if err != nil {
			t.Fatalf("preload %v: %v", preload, err)
		}
		if r.MaxImageBytes() != 0 || r.Frames() != 2 {
			t.Errorf("preload %v: MaxImageBytes %d, Frames %d; want 0, 2", preload, r.MaxImageBytes(), r.Frames())
		}
		if _, err := r.FillImage(0, make([]byte, 1<<16)); !errors.Is(err, ErrNotProvided) {
			t.Errorf("preload %v: FillImage: %v, want ErrNotProvided", preload, err)
		}
		with, err := NewReplay(filepath.Join(mixedDir), ReplayConfig{})
		if err != nil {
			t.Fatal(err)
		}
		a, b := make([]byte, r.MaxPoints()*PointStep), make([]byte, with.MaxPoints()*PointStep)
		na, errA := r.FillPoints(0, a)
		nb, errB := with.FillPoints(0, b)
		if errA != nil || errB != nil || na != nb || string(a[:na*PointStep]) != string(b[:nb*PointStep]) {
			t.Errorf("preload %v: frame 0's cloud %d points (%v), with images %d (%v), or the bytes differ", preload, na, errA, nb, errB)
		}
	}
	images := t.TempDir()
	copyTestFile(t, filepath.Join(mixedDir, "000000.png"), images, "0.png")
	if _, err := NewReplay(images, ReplayConfig{NoImages: true}); err == nil || !strings.Contains(err.Error(), "no point files") || !strings.Contains(err.Error(), "no camera") {
		t.Errorf("images alone with NoImages: %v, want an error saying there are no point files", err)
	}
}
