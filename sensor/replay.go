package sensor

import (
	"bufio"
	"context"
	"fmt"
	"image"
	_ "image/jpeg" // register the decoders Replay reads
	_ "image/png"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/zerohop/zerohop/sensor/internal/pcd"
)

// ReplayConfig configures NewReplay. The zero value plays each frame once,
// reading files as they are needed.
type ReplayConfig struct {
	// Loop plays the frames endlessly: frame seq is file seq mod N, and
	// Frames reports 0.
	Loop bool
	// Preload reads and decodes every file at construction and keeps the
	// results in memory; FillPoints and FillImage then only copy (no file
	// access, no allocation per frame). Without it each frame reads its files
	// (and decodes its image, which allocates).
	Preload bool
	// PreloadLimit bounds what Preload keeps in memory: a recording whose
	// decoded clouds and images total more is read as it plays instead
	// (Preloaded says which; a KITTI sequence of 4541 frames is about
	// 15 GB decoded). 0: no bound.
	PreloadLimit int64
	// ImageDir, if set, is where the images are; points stay in the
	// directory given to NewReplay (KITTI keeps velodyne_points and image_02
	// apart). Images in the points directory are then ignored.
	ImageDir string
	// Encoding converts every image to it; 0 keeps grey images mono8 and
	// writes all others as rgb8.
	Encoding ImageEncoding
	// NoImages leaves the images out, for a robot without a camera: none
	// is listed, read or decoded (a bad or missing one does not matter),
	// and the frames are the point files; MaxImageBytes is 0.
	NoImages bool
	// Planar: the clouds are a planar (2D) LiDAR's scans, each in one
	// plane (recorded sensor_msgs/LaserScan turned into clouds); the
	// source says so (Planar), so that the camera marks them. Nothing in
	// the files says it: the user does.
	Planar bool
	// NoTimestamps: do not look for a timestamps file (the frames are to
	// be played at a fixed rate, so a defective one must not stop them).
	NoTimestamps bool
}

// Replay plays recorded frames from a directory:
//
//   - point clouds: KITTI .bin (float32 x, y, z, intensity records, exactly
//     the slot layout, read straight into dst) and PCD v0.7 with DATA ascii
//     or binary (fields x, y, z required; intensity or i, else reflectivity
//     as Livox and Ouster tools save it, optional → 0; any order, extra
//     fields skipped, types I/U/F of any size converted to float32, values
//     as they are). Points with a non-finite x, y or z are dropped.
//   - images: PNG and JPEG, written as rgb8, or mono8 for grey files (see
//     ReplayConfig.Encoding). Alpha is composited over black.
//
// Files are recognised by extension (.bin, .pcd, .png, .jpg, .jpeg, any case);
// other files and subdirectories are ignored. A directory with no such file
// may be a KITTI folder: an odometry sequence (velodyne/ with image_2/ or
// image_0/) or a raw drive (velodyne_points/data/ with image_02/data/ or
// image_00/data/); its images are then read from there. Point files sorted by name form
// one stream and image files sorted by name the other; frame k pairs the k-th
// of each, whatever their names (so cloud_0001.pcd may pair with
// img_0001.png). When both streams exist they must have the same length. A
// directory with only one kind of file provides only that stream; the other
// Fill method returns ErrNotProvided.
//
// Every file's header is read at construction (slot sizing needs the largest
// cloud and image), so bad headers and sizes show up there; defects deeper in
// a file show up when its frame is filled, unless Preload is set. Errors name
// the file.
//
// Recorded timing: unless ReplayConfig.NoTimestamps is set, NewReplay reads
// the recording's timestamps file, the first found of timestamps.txt and
// times.txt in the point folder (the image folder where there are no
// points, or none is found there), and KITTI's beside it: a raw drive's
// velodyne_points/timestamps.txt (image_02/timestamps.txt) and an odometry
// sequence's times.txt. Each line is one frame's time, in seconds (KITTI
// odometry: 1.036000e-01) or as a date and time (KITTI raw:
// 2011-09-26 13:02:25.964389445, local time; only differences matter), the
// first line deciding which. A line that is not a time, a time before the
// line above, all times equal, or fewer lines than frames fail NewReplay
// with a *TimestampsError naming the file and line; lines beyond the frames
// are counted (Timestamps.Lines), not read. Timestamps returns the result
// for a player to pace the frames by (NewSchedule); Fill methods do not
// use it.
//
// A Replay is not safe for concurrent use: it reuses one read buffer.
type Replay struct {
	cfg           ReplayConfig
	points        []pointFile
	images        []imageFile
	frames        int
	maxPoints     int
	maxImageBytes int
	decodedBytes  int64         // the clouds' and images' decoded sizes, summed
	br            *bufio.Reader // reused by every fill
	timestamps    Timestamps    // File "": none found
	searched      []string      // where the timestamps file was looked for
}

type pointFile struct {
	path  string
	isPCD bool
	count int    // points declared by the header or implied by the size
	data  []byte // the decoded points when preloaded
}

type imageFile struct {
	path string
	enc  ImageEncoding
	size int       // bytes its pixels take, from the header
	info ImageInfo // geometry when preloaded
	data []byte    // the converted pixels when preloaded
}

// readBufferSize bounds one PCD header or ascii data line.
const readBufferSize = 64 << 10

// maxImagePixels bounds a replayed image (8192 × 8192): its slots and
// decode buffers are sized from the header before any pixel is read.
const maxImagePixels = 1 << 26

// NewReplay scans dir (and cfg.ImageDir) and reads every file's header.
func NewReplay(dir string, cfg ReplayConfig) (*Replay, error) {
	return NewReplayContext(context.Background(), dir, cfg)
}

// NewReplayContext is NewReplay that gives up, with ctx's error, once ctx
// is done: reading a whole recording (Preload) can take minutes, and a
// SIGINT meanwhile must stop it.
func NewReplayContext(ctx context.Context, dir string, cfg ReplayConfig) (*Replay, error) {
	if cfg.Encoding != 0 && !cfg.Encoding.Valid() {
		return nil, fmt.Errorf("replay: config Encoding %v is not valid", cfg.Encoding)
	}
	r := &Replay{cfg: cfg, br: bufio.NewReaderSize(nil, readBufferSize)}
	pointNames, imageNames, err := listFrames(dir)
	if err != nil {
		return nil, err
	}
	imageDir := dir
	if len(pointNames) == 0 && len(imageNames) == 0 && cfg.ImageDir == "" {
		if dir, imageDir, pointNames, imageNames, err = kittiLayout(dir); err != nil {
			return nil, err
		}
	}
	if cfg.ImageDir != "" && !cfg.NoImages {
		imageDir = cfg.ImageDir
		if _, imageNames, err = listFrames(imageDir); err != nil {
			return nil, err
		}
	}
	if cfg.NoImages {
		if len(pointNames) == 0 {
			return nil, fmt.Errorf("replay: %q has no point files (.bin, .pcd); images are left out (no camera)", dir)
		}
		imageNames = nil
	}
	if len(pointNames) == 0 && len(imageNames) == 0 {
		return nil, fmt.Errorf("replay: %q has no point (.bin, .pcd) or image (.png, .jpg, .jpeg) files", dir)
	}
	if len(pointNames) != 0 && len(imageNames) != 0 && len(pointNames) != len(imageNames) {
		return nil, fmt.Errorf("replay: %d point files in %q but %d images in %q; frames pair them by sorted order, so the counts must match",
			len(pointNames), dir, len(imageNames), imageDir)
	}
	r.frames = max(len(pointNames), len(imageNames))
	if !cfg.NoTimestamps {
		if len(pointNames) != 0 {
			r.searched = timestampsCandidates(dir)
		}
		if len(imageNames) != 0 && (len(pointNames) == 0 || filepath.Clean(imageDir) != filepath.Clean(dir)) {
			r.searched = append(r.searched, timestampsCandidates(imageDir)...)
		}
		if file := findTimestamps(r.searched); file != "" {
			names := pointNames
			if len(names) == 0 {
				names = imageNames
			}
			if r.timestamps, err = readTimestamps(file, r.frames, frameLines(names)); err != nil {
				return nil, err
			}
		}
	}
	// Headers first: their sizes decide whether the recording fits the
	// preload limit before anything is decoded.
	preload := cfg.Preload
	r.cfg.Preload = false
	for _, name := range pointNames {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("replay: reading %q stopped: %w", dir, err)
		}
		pf, err := r.openPoints(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		r.points = append(r.points, pf)
		r.maxPoints = max(r.maxPoints, pf.count)
		r.decodedBytes += int64(pf.count) * PointStep
	}
	for _, name := range imageNames {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("replay: reading %q stopped: %w", imageDir, err)
		}
		im, size, err := r.openImage(filepath.Join(imageDir, name))
		if err != nil {
			return nil, err
		}
		r.images = append(r.images, im)
		r.maxImageBytes = max(r.maxImageBytes, size)
		r.decodedBytes += int64(size)
	}
	if !preload || (cfg.PreloadLimit > 0 && r.decodedBytes > cfg.PreloadLimit) {
		return r, nil
	}
	for i := range r.points {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("replay: reading %q stopped: %w", dir, err)
		}
		pf := &r.points[i]
		buf := make([]byte, pf.count*PointStep)
		n, err := r.readPoints(pf, buf)
		if err != nil {
			return nil, err
		}
		pf.data = buf[:n*PointStep]
	}
	for i := range r.images {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("replay: reading %q stopped: %w", imageDir, err)
		}
		im := &r.images[i]
		buf := make([]byte, im.size)
		info, err := r.decodeImage(im, buf)
		if err != nil {
			return nil, err
		}
		im.info, im.data = info, buf[:info.Bytes():info.Bytes()]
	}
	r.cfg.Preload = true
	return r, nil
}

// Preloaded reports whether the frames are in memory (ReplayConfig.Preload
// within PreloadLimit); else each frame reads its files as it plays.
func (r *Replay) Preloaded() bool { return r.cfg.Preload }

// Timestamps returns the recording's timing from its timestamps file and
// true, or false when NewReplay found no such file (or was told not to look:
// ReplayConfig.NoTimestamps). The result's Offsets are shared: do not
// modify them.
func (r *Replay) Timestamps() (Timestamps, bool) {
	return r.timestamps, r.timestamps.File != ""
}

// TimestampsSearched lists where NewReplay looked for a timestamps file,
// in order (nil with ReplayConfig.NoTimestamps), for a message saying none
// was found.
func (r *Replay) TimestampsSearched() []string { return r.searched }

// DecodedBytes is the recording's decoded size: its clouds' points and its
// images' pixels, summed (what Preload keeps in memory).
func (r *Replay) DecodedBytes() int64 { return r.decodedBytes }

// kittiFolders are KITTI's layouts, tried in order for a directory with no
// frame files of its own: an odometry sequence (sequences/NN) and a raw
// drive (…_sync). Colour images first, then grey.
var kittiFolders = [...]struct{ points, images []string }{
	{[]string{"velodyne"}, []string{"image_2", "image_0"}},
	{[]string{"velodyne_points", "data"}, []string{"image_02/data", "image_00/data"}},
}

// kittiLayout finds KITTI's point and image folders under dir. Without one
// it returns dir, unchanged, and no names, for the caller's error.
func kittiLayout(dir string) (pointDir, imageDir string, points, images []string, err error) {
	for _, l := range kittiFolders {
		pd := filepath.Join(append([]string{dir}, l.points...)...)
		if st, err := os.Stat(pd); err != nil || !st.IsDir() {
			continue
		}
		if points, _, err = listFrames(pd); err != nil {
			return "", "", nil, nil, err
		}
		imageDir = pd // no image folder: only the point stream
		for _, sub := range l.images {
			id := filepath.Join(dir, filepath.FromSlash(sub))
			if st, err := os.Stat(id); err != nil || !st.IsDir() {
				continue
			}
			if _, images, err = listFrames(id); err != nil {
				return "", "", nil, nil, err
			}
			imageDir = id
			break
		}
		return pd, imageDir, points, images, nil
	}
	return dir, dir, nil, nil, nil
}

// listFrames returns the point and image file names in dir, sorted by name.
func listFrames(dir string) (points, images []string, err error) {
	entries, err := os.ReadDir(dir) // sorted by name
	if err != nil {
		return nil, nil, fmt.Errorf("replay: %w", err)
	}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		switch strings.ToLower(filepath.Ext(e.Name())) {
		case ".bin", ".pcd":
			points = append(points, e.Name())
		case ".png", ".jpg", ".jpeg":
			images = append(images, e.Name())
		}
	}
	return points, images, nil
}

// openPoints reads a point file's header.
func (r *Replay) openPoints(path string) (pointFile, error) {
	pf := pointFile{path: path, isPCD: strings.EqualFold(filepath.Ext(path), ".pcd")}
	f, err := os.Open(path)
	if err != nil {
		return pf, fmt.Errorf("replay: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return pf, fmt.Errorf("replay: %w", err)
	}
	if !pf.isPCD {
		if pf.count, err = binCount(st.Size()); err != nil {
			return pf, fmt.Errorf("replay: %q: %w", path, err)
		}
	} else {
		r.br.Reset(f)
		h, _, err := readPCDHeader(r.br, st.Size())
		if err != nil {
			return pf, fmt.Errorf("replay: %q: %w", path, err)
		}
		pf.count = h.Points
	}
	return pf, nil
}

// binCount is the number of points in a KITTI .bin file of size bytes.
func binCount(size int64) (int, error) {
	if size%PointStep != 0 {
		return 0, fmt.Errorf("size %d bytes is not a multiple of %d (float32 x,y,z,i)", size, PointStep)
	}
	if size/PointStep > pcd.MaxPoints {
		return 0, fmt.Errorf("size %d bytes is more than %d points", size, pcd.MaxPoints)
	}
	return int(size / PointStep), nil
}

// readPCDHeader parses a PCD header from br and checks that binary data fits
// in a file of fileSize bytes.
func readPCDHeader(br *bufio.Reader, fileSize int64) (pcd.Header, pcd.XYZI, error) {
	h, err := pcd.ParseHeader(br)
	if err != nil {
		return h, pcd.XYZI{}, fmt.Errorf("PCD header: %w", err)
	}
	l, err := h.FindXYZI()
	if err != nil {
		return h, l, fmt.Errorf("PCD header: %w", err)
	}
	if data := h.DataSize(); data >= 0 && fileSize-int64(h.Len) < data {
		return h, l, fmt.Errorf("binary data is %d bytes, but POINTS %d × %d-byte records need %d",
			fileSize-int64(h.Len), h.Points, h.RecordSize, data)
	}
	// ASCII: each point takes at least two bytes (a digit and a line end,
	// but for the file's last). Checked here, before any buffer is sized
	// from POINTS: a 99-byte file can declare 2^30 points. Loose on purpose:
	// a file with fewer values than its header declares is diagnosed line
	// by line when it is read.
	if h.Data == pcd.DataASCII {
		if most := (fileSize - int64(h.Len) + 1) / 2; int64(h.Points) > most {
			return h, l, fmt.Errorf("ascii data is %d bytes, too short for POINTS %d (at most %d points fit)",
				fileSize-int64(h.Len), h.Points, most)
		}
	}
	return h, l, nil
}

// readPoints reads the points of pf from disk into dst and returns the count.
// Errors name the file.
func (r *Replay) readPoints(pf *pointFile, dst []byte) (int, error) {
	fail := func(err error) (int, error) { return 0, fmt.Errorf("replay: %q: %w", pf.path, err) }
	f, err := os.Open(pf.path)
	if err != nil {
		return 0, fmt.Errorf("replay: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("replay: %w", err)
	}
	if !pf.isPCD {
		n, err := binCount(st.Size())
		if err != nil {
			return fail(err)
		}
		if n*PointStep > len(dst) {
			return fail(fmt.Errorf("%d points (the file grew since the replay opened it?) exceed the buffer of %d points: %w", n, len(dst)/PointStep, ErrShortBuffer))
		}
		// KITTI records are the slot layout: read them in place.
		if _, err := io.ReadFull(f, dst[:n*PointStep]); err != nil {
			return fail(fmt.Errorf("read %d points: %w", n, err))
		}
		return pcd.CompactFinite(dst[:n*PointStep]), nil
	}
	r.br.Reset(f)
	defer r.br.Reset(nil) // drop the file
	h, l, err := readPCDHeader(r.br, st.Size())
	if err != nil {
		return fail(err)
	}
	if h.Points*PointStep > len(dst) {
		return fail(fmt.Errorf("POINTS %d (the file changed since the replay opened it?) exceed the buffer of %d points: %w", h.Points, len(dst)/PointStep, ErrShortBuffer))
	}
	n, err := pcd.ReadPoints(r.br, &h, l, dst)
	if err != nil {
		return fail(fmt.Errorf("PCD %s data: %w", h.Data, err))
	}
	return n, nil
}

// openImage reads an image's header and returns the bytes its frame
// needs.
func (r *Replay) openImage(path string) (imageFile, int, error) {
	im := imageFile{path: path}
	f, err := os.Open(path)
	if err != nil {
		return im, 0, fmt.Errorf("replay: %w", err)
	}
	defer f.Close()
	c, format, err := image.DecodeConfig(f)
	if err != nil {
		return im, 0, fmt.Errorf("replay: %q: not a PNG or JPEG image: %w", path, err)
	}
	if format != "png" && format != "jpeg" {
		return im, 0, fmt.Errorf("replay: %q: %s image: only PNG and JPEG are read", path, format)
	}
	// Both sides and their product: a 59-byte PNG can declare 32768×32768,
	// and the slots and decoder would be sized from it before any pixel.
	if c.Width <= 0 || c.Height <= 0 || c.Width > 1<<15 || c.Height > 1<<15 || c.Width*c.Height > maxImagePixels {
		return im, 0, fmt.Errorf("replay: %q: image size %d×%d is out of range (at most %d pixels, %d per side)", path, c.Width, c.Height, maxImagePixels, 1<<15)
	}
	im.enc = encodingFor(c.ColorModel, r.cfg.Encoding)
	size := c.Width * c.Height * im.enc.BytesPerPixel()
	im.size = size
	return im, size, nil
}

// decodeImage decodes im from disk into dst. Errors name the file.
func (r *Replay) decodeImage(im *imageFile, dst []byte) (ImageInfo, error) {
	f, err := os.Open(im.path)
	if err != nil {
		return ImageInfo{}, fmt.Errorf("replay: %w", err)
	}
	defer f.Close()
	r.br.Reset(f)
	defer r.br.Reset(nil)
	img, _, err := image.Decode(r.br)
	if err != nil {
		return ImageInfo{}, fmt.Errorf("replay: %q: decode image: %w", im.path, err)
	}
	info, err := writeImage(dst, img, im.enc)
	if err != nil {
		return ImageInfo{}, fmt.Errorf("replay: %q: %w", im.path, err)
	}
	return info, nil
}

// MaxPoints is the largest point count among the point files.
func (r *Replay) MaxPoints() int { return r.maxPoints }

// MaxImageBytes is the largest image among the image files; 0 without images.
func (r *Replay) MaxImageBytes() int { return r.maxImageBytes }

// Planar reports whether the clouds are a planar LiDAR's scans
// (ReplayConfig.Planar).
func (r *Replay) Planar() bool { return r.cfg.Planar }

// Frames is the number of frames, or 0 when looping.
func (r *Replay) Frames() uint64 {
	if r.cfg.Loop {
		return 0
	}
	return uint64(r.frames)
}

// frame maps seq to a file index.
func (r *Replay) frame(op string, seq uint64) (int, error) {
	if r.cfg.Loop {
		return int(seq % uint64(r.frames)), nil
	}
	if seq >= uint64(r.frames) {
		return 0, fmt.Errorf("replay: %s frame %d of %d: %w", op, seq, r.frames, ErrEndOfFrames)
	}
	return int(seq), nil
}

// FillPoints writes the cloud of frame seq into dst, which must hold
// MaxPoints()*PointStep bytes. With Preload it only copies and does not
// allocate.
func (r *Replay) FillPoints(seq uint64, dst []byte) (int, error) {
	k, err := r.frame("FillPoints", seq)
	if err != nil {
		return 0, err
	}
	if len(r.points) == 0 {
		return 0, fmt.Errorf("replay: FillPoints: no point files: %w", ErrNotProvided)
	}
	need := r.maxPoints * PointStep
	if len(dst) < need {
		return 0, fmt.Errorf("replay: FillPoints: dst has %d bytes, need %d (%d points × %d): %w",
			len(dst), need, r.maxPoints, PointStep, ErrShortBuffer)
	}
	pf := &r.points[k]
	if r.cfg.Preload {
		return copy(dst, pf.data) / PointStep, nil
	}
	return r.readPoints(pf, dst[:need])
}

// FillImage writes the image of frame seq into dst, which must hold
// MaxImageBytes() bytes. Without Preload it decodes the file, which
// allocates; the pixels are then converted straight into dst.
func (r *Replay) FillImage(seq uint64, dst []byte) (ImageInfo, error) {
	k, err := r.frame("FillImage", seq)
	if err != nil {
		return ImageInfo{}, err
	}
	if len(r.images) == 0 {
		return ImageInfo{}, fmt.Errorf("replay: FillImage: no image files: %w", ErrNotProvided)
	}
	if len(dst) < r.maxImageBytes {
		return ImageInfo{}, fmt.Errorf("replay: FillImage: dst has %d bytes, need %d: %w", len(dst), r.maxImageBytes, ErrShortBuffer)
	}
	im := &r.images[k]
	if r.cfg.Preload {
		copy(dst, im.data)
		return im.info, nil
	}
	return r.decodeImage(im, dst[:r.maxImageBytes])
}
