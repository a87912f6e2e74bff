package agent

import (
	"math"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/zerohop/zerohop/camera"
	"github.com/zerohop/zerohop/gpu"
	"github.com/zerohop/zerohop/handles"
	"github.com/zerohop/zerohop/handles/transport"
	"github.com/zerohop/zerohop/infer"
	"github.com/zerohop/zerohop/models"
	"github.com/zerohop/zerohop/pinned"
	"github.com/zerohop/zerohop/planner"
	"github.com/zerohop/zerohop/sensor"
	"github.com/zerohop/zerohop/telemetry"
	"github.com/zerohop/zerohop/voxel"
)

// composed builds a pipeline on an in-process camera with the synthetic
// scene; frames are produced by hand with cam.Frame.
type composed struct {
	cam    *camera.Camera
	src    *sensor.Synthetic
	inproc *transport.Inproc
	pipe   *Pipeline
	sess   *infer.Session
	sink   *recordingSink
	rec    *telemetry.Recorder
	rt     *infer.Runtime
}

// composedOptions vary newComposedWith's pipeline; the zero value is
// newComposed's.
type composedOptions struct {
	leaf float32 // default 0.2 m
	// gpu and gpuBEV go to Config.GPU/GPUBEV; gpuBEV is also the session's
	// BEV input (viewed as float32), as in RunNode.
	gpu    GPUFilter
	gpuBEV []byte
	// rt shares another pipeline's runtime (one per process).
	rt *infer.Runtime
	// allocator supplies the camera's pools (the GPU's pinned memory).
	allocator pinned.HostAllocator
	// synth is the scene; zero: the defaults (115k points, 1280×720).
	synth sensor.SyntheticConfig
	// watchdog is the watchdog period; zero: the default 200 ms.
	watchdog time.Duration // 0: planner's default, 200 ms
	// wrap, if set, wraps the scene as the camera's source.
	wrap func(sensor.Source) sensor.Source
	// bev is the raster, as bevConfig gives it; zero: the reference
	// model's, ground at z = 0.
	bev voxel.BEVConfig
	// lidarOnly runs the LiDAR-only reference model on a scene without a
	// camera: no image pool, no preprocessor, one topic.
	lidarOnly bool
	// planar runs the planar-LiDAR reference model on the scene's planar
	// LiDAR (synth.Planar; no camera): Config.PlanarLidar.
	planar bool
	// log is the pipeline's logger; nil: none.
	log *zap.Logger
	// onIncident is the watchdog's OnIncident; nil: none.
	onIncident func(planner.Incident)
}

func newComposed(t *testing.T) *composed { return newComposedWith(t, composedOptions{}) }

func newComposedWith(t *testing.T, o composedOptions) *composed {
	t.Helper()
	if o.leaf == 0 {
		o.leaf = 0.2
	}
	var bevInput []float32
	if o.gpuBEV != nil {
		var err error
		if bevInput, err = gpu.Float32View(o.gpuBEV); err != nil {
			t.Fatal(err)
		}
	}
	requireORT(t)
	rt := o.rt
	if rt == nil {
		lib, err := infer.FindLibrary("")
		if err != nil {
			t.Fatal(err)
		}
		if rt, err = infer.OpenRuntime(lib); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rt.Close() })
	}
	model, mcfg := models.ReferenceONNX(), infer.ReferenceConfig()
	if o.lidarOnly {
		model, mcfg = models.ReferenceLidarONNX(), infer.ReferenceLidarConfig()
		o.synth.NoImage = true
	}
	if o.planar {
		model, mcfg = models.ReferenceScanONNX(), infer.ReferenceScanConfig()
		o.lidarOnly, o.synth.NoImage, o.synth.Planar = true, true, true
	}
	sess, err := infer.NewSessionFromBytes(rt, "reference.onnx", model, mcfg,
		infer.SessionOptions{Providers: []string{"cpu"}, IntraOpThreads: 1, BEV: bevInput})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.Close() })
	var prep *infer.Preprocessor
	if !o.lidarOnly {
		pp, _ := infer.ReferenceConfig().PreprocessParams()
		if prep, err = infer.NewPreprocessor(pp, 2); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(prep.Close)
	}
	bev, err := voxel.NewBEV(o.bev)
	if err != nil {
		t.Fatal(err)
	}
	fcfg, err := filterConfig(NodeConfig{Leaf: o.leaf}, o.bev) // as RunNode's
	if err != nil {
		t.Fatal(err)
	}
	filter, err := voxel.NewFilter(fcfg, 200_000)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { filter.Close() })
	plan, _ := planner.New(planner.Config{})
	wd, _ := planner.NewWatchdog(planner.WatchdogConfig{Timeout: o.watchdog, OnIncident: o.onIncident})
	rec, _ := telemetry.New(telemetry.Options{NoRuntimeMetrics: true})
	src, err := sensor.NewSynthetic(o.synth)
	if err != nil {
		t.Fatal(err)
	}
	var source sensor.Source = src
	if o.wrap != nil {
		source = o.wrap(src)
	}
	cam, err := camera.New(camera.Config{Source: source, Slots: 6, Allocator: o.allocator})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cam.Close() })
	var topics []transport.Topic
	for i := range streams(!o.lidarOnly) {
		topics = append(topics, transport.Topic{Name: camera.TopicName(i), Kind: camera.Kind(i), Pool: cam.Pool(i)})
	}
	inproc, err := transport.NewInproc(transport.InprocConfig{Topics: topics})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { inproc.Close() })
	sink := &recordingSink{}
	pipe, err := New(Config{Source: inproc, Filter: filter, BEV: bev, Session: sess, Prep: prep, Planner: plan,
		Watchdog: wd, Recorder: rec, Sink: sink, MaxPoints: 200_000, GPU: o.gpu, GPUBEV: o.gpuBEV, PlanarLidar: o.planar, Log: o.log})
	if err != nil {
		t.Fatal(err)
	}
	return &composed{cam: cam, src: src, inproc: inproc, pipe: pipe, sess: sess, sink: sink, rec: rec, rt: rt}
}

// step publishes frame seq and runs the pipeline on it.
func (c *composed) step(t testing.TB, seq uint64, h *handles.Handle) {
	if err := c.cam.Frame(seq, c.inproc, h); err != nil {
		t.Fatal(err)
	}
	c.pipe.frame(<-c.inproc.C(TopicPoints))
}

func TestPipelineFrameAllocatesNothing(t *testing.T) {
	c := newComposed(t)
	var h handles.Handle
	for seq := uint64(0); seq < 5; seq++ { // warm up
		c.step(t, seq, &h)
	}
	seq := uint64(5)
	allocs := testing.AllocsPerRun(20, func() {
		c.step(t, seq, &h)
		seq++
	})
	if allocs != 0 {
		t.Fatalf("camera frame + agent frame (voxel, BEV, preprocess, infer, plan) allocate %.1f times per frame, want 0", allocs)
	}
	if c.cam.Pool(0).InUse() != 0 || c.cam.Pool(1).InUse() != 0 {
		t.Fatal("the pipeline leaked slots")
	}
}

// TestModelReactsToTheScene checks the model card's promises on the real
// rendered scene: the obstacle lowers the clearance of the sectors it is
// in, and the hazard marking (invisible to the LiDAR) lowers its sectors'
// scores without touching their clearance.
func TestModelReactsToTheScene(t *testing.T) {
	c := newComposed(t)
	var h handles.Handle
	const rate = 30.0
	sectorOf := func(y, x float64) int { // heading → sector, −40°…+40° in 10° steps
		deg := 57.29577951308232 * atan2(y, x)
		k := int((deg+40)/10 + 0.5)
		return min(max(k, 0), 8)
	}
	// t = 1.5 s: obstacle at y = +3 (left), hazard at y = +1 (left, 2.8 m).
	// t = 4.5 s: obstacle at y = −3 (right), hazard at y = −1 (right).
	for _, tc := range []struct {
		name string
		sec  float64
	}{{"left", 1.5}, {"right", 4.5}} {
		seq := uint64(tc.sec * rate)
		c.step(t, seq, &h)
		truth := c.src.Truth(seq)
		scores := append([]float32(nil), c.sess.Scores()...)
		clear := append([]float32(nil), c.sess.Clearance()...)
		obs := sectorOf(truth.Obstacle.Center.Y, truth.Obstacle.Center.X)
		mirror := 8 - obs
		if !(clear[obs] < clear[mirror]) {
			t.Errorf("%s: obstacle in sector %d: clearance %v there, %v in mirror sector %d; want lower", tc.name, obs, clear[obs], clear[mirror], mirror)
		}
		hz := sectorOf(truth.Hazard.CenterY, truth.Hazard.CenterX)
		hm := 8 - hz
		if !(scores[hz] < scores[hm]) {
			t.Errorf("%s: hazard in sector %d: score %v, mirror sector %d %v; want lower", tc.name, hz, scores[hz], hm, scores[hm])
		}
		t.Logf("%s: obstacle sector %d, hazard sector %d, scores %.2f, clearance %.1f", tc.name, obs, hz, scores, clear)
	}
}

func atan2(y, x float64) float64 { return math.Atan2(y, x) }

// TestPairingWaitAllocatesNothing drives the path where a cloud's image
// has not arrived: the pipeline waits up to the pairing tolerance, drops
// the cloud and counts it, without allocating a timer per frame.
// A frame dropped after pairing (here: too old to act on) gives its image
// back at once, as a processed one does, and allocates nothing doing so.
func TestStaleFrameReleasesItsImageAndAllocatesNothing(t *testing.T) {
	c := newComposed(t)
	var h handles.Handle
	seq := uint64(0)
	var late camera.Publisher = skewedPublisher{c.inproc, -time.Second}
	stale := func() {
		if err := c.cam.Frame(seq, late, &h); err != nil {
			t.Fatal(err)
		}
		seq++
		c.pipe.frame(<-c.inproc.C(TopicPoints))
		if c.pipe.hasImg || c.cam.Pool(TopicImage).InUse() != 0 {
			t.Fatalf("frame %d dropped as stale still holds its image (%d image slots in use)", seq-1, c.cam.Pool(TopicImage).InUse())
		}
	}
	stale() // warm up: the first drop logs
	before := c.rec.Count(telemetry.FramesDropped)
	if allocs := testing.AllocsPerRun(20, stale); allocs != 0 {
		t.Fatalf("a stale frame allocates %.1f times, want 0", allocs)
	}
	if got := c.rec.Count(telemetry.FramesDropped) - before; got != 21 {
		t.Fatalf("dropped %d stale frames, want 21", got)
	}
}

// A held image older than the cloud being paired is given back before the
// wait for a newer one (no later cloud can pair with it), counted as
// superseded, without allocating.
func TestOlderHeldImageIsGivenBackAndAllocatesNothing(t *testing.T) {
	c := newComposed(t)
	c.pipe.cfg.PairTolerance = time.Millisecond
	var h handles.Handle
	seq := uint64(0)
	frame := func() {
		if err := c.cam.Frame(seq, c.inproc, &h); err != nil {
			t.Fatal(err)
		}
		seq++
	}
	olderImage := func() {
		frame()
		c.pipe.keepImage(<-c.inproc.C(TopicImage)) // held, its cloud lost
		l := <-c.inproc.C(TopicPoints)
		l.Release()
		time.Sleep(2 * time.Millisecond) // the next capture more than the tolerance later
		frame()
		l = <-c.inproc.C(TopicImage) // this image goes missing
		l.Release()
		c.pipe.frame(<-c.inproc.C(TopicPoints))
		if c.pipe.hasImg || c.cam.Pool(TopicImage).InUse() != 0 {
			t.Fatalf("the older image is still held (%d image slots in use)", c.cam.Pool(TopicImage).InUse())
		}
	}
	olderImage()
	superseded := c.rec.Count(telemetry.FramesSuperseded)
	if allocs := testing.AllocsPerRun(20, olderImage); allocs != 0 {
		t.Fatalf("giving back an older image allocates %.1f times, want 0", allocs)
	}
	if got := c.rec.Count(telemetry.FramesSuperseded) - superseded; got != 21 {
		t.Fatalf("%d images counted superseded, want 21 (one per round)", got)
	}
}

func TestPairingWaitAllocatesNothing(t *testing.T) {
	c := newComposed(t)
	c.pipe.cfg.PairTolerance = time.Millisecond
	var h handles.Handle
	seq := uint64(0)
	noImage := func() {
		if err := c.cam.Frame(seq, c.inproc, &h); err != nil {
			t.Fatal(err)
		}
		seq++
		img := <-c.inproc.C(TopicImage) // the image goes missing
		img.Release()
		c.pipe.frame(<-c.inproc.C(TopicPoints))
	}
	for range 3 {
		noImage() // warm up
	}
	before := c.pipe.cfg.Recorder.Count(telemetry.FramesDropped)
	if allocs := testing.AllocsPerRun(20, noImage); allocs != 0 {
		t.Fatalf("a cloud waiting for its image allocates %.1f times, want 0", allocs)
	}
	if got := c.pipe.cfg.Recorder.Count(telemetry.FramesDropped) - before; got != 21 {
		t.Fatalf("dropped %d clouds without an image, want 21", got)
	}
}

// Clouds that find no image are dropped; a run of unpairedWarnAfter or
// more is one warning, saying how far the last image's stamp lay from the
// cloud's (or that no image ever came), and its end one info line. Single
// lost images say nothing above debug.
func TestUnpairedCloudsAreWarnedOncePerRun(t *testing.T) {
	c := newComposed(t)
	c.pipe.cfg.PairTolerance = time.Millisecond
	core, logs := observer.New(zap.InfoLevel)
	c.pipe.log = zap.New(core)
	var h handles.Handle
	seq := uint64(0)
	cloud := func(withImage bool) {
		if err := c.cam.Frame(seq, c.inproc, &h); err != nil {
			t.Fatal(err)
		}
		seq++
		if !withImage {
			l := <-c.inproc.C(TopicImage)
			l.Release()
		}
		c.pipe.frame(<-c.inproc.C(TopicPoints))
	}
	for range 3 {
		cloud(false) // no image ever
	}
	if n := logs.FilterMessageSnippet("no image has arrived").Len(); n != 1 {
		t.Fatalf("%d warnings for three clouds without any image, want 1: %v", n, logs.All())
	}
	cloud(true)
	for range 5 {
		cloud(false)
	}
	cloud(true)
	cloud(false) // one lost image: no warning
	cloud(true)
	warned := logs.FilterMessageSnippet("no image within the pairing tolerance").All()
	if len(warned) != 1 {
		t.Fatalf("%d warnings for one run of five unpaired clouds and one lone one, want 1: %v", len(warned), logs.All())
	}
	if off, ok := warned[0].ContextMap()["last_image_minus_cloud"].(time.Duration); !ok || off >= 0 {
		t.Fatalf("warning without the last image's offset before the cloud: %v", warned[0].ContextMap())
	}
	resumed := logs.FilterMessageSnippet("pairing resumed").All()
	if len(resumed) != 2 || resumed[1].ContextMap()["clouds_dropped_unpaired"] != int64(5) {
		t.Fatalf("want two 'pairing resumed' lines, the second after 5 clouds: %v", resumed)
	}
}

// slowStepWatchdog is the watchdog of tests about something other than
// timing: one step under -race on a busy 2-core CI machine can outlast the
// default 200 ms, and its frame then goes stale (Health, Watchdog.Check
// say so) before the test looks.
const slowStepWatchdog = 10 * time.Second

// TestEveryHandleEncodingHasAPixelFormat: every image encoding a handle
// may carry (the camera publishes a ROS driver's rgba8 and bgra8 as they
// are) preprocesses as its own pixel format, with its size and name. The
// agent took rgba8 and bgra8 for no format and failed every frame.
func TestEveryHandleEncodingHasAPixelFormat(t *testing.T) {
	for e := handles.EncodingRGB8; e <= handles.EncodingBGRA8; e++ {
		f := pixelFormat(e)
		if f.BytesPerPixel() != int(e.BytesPerPixel()) || f.String() != e.String() {
			t.Errorf("encoding %v (%d bytes a pixel): pixel format %v (%d bytes)", e, e.BytesPerPixel(), f, f.BytesPerPixel())
		}
	}
	if f := pixelFormat(handles.EncodingBGRA8 + 1); f.BytesPerPixel() != 0 {
		t.Errorf("an unknown encoding maps to %v", f)
	}
}

// TestStretchedImagesAreSaidOnce: a 4:3 camera's images are stretched to
// the reference model's 16:9 input, and a hazard then lands in another
// sector than where it is: said once, at the first image; a 16:9 camera
// gets no line.
func TestStretchedImagesAreSaidOnce(t *testing.T) {
	for _, tc := range []struct {
		name  string
		synth sensor.SyntheticConfig
		lines int
	}{{"16:9", sensor.SyntheticConfig{}, 0}, {"4:3", sensor.SyntheticConfig{ImageWidth: 640, ImageHeight: 480}, 1}} {
		t.Run(tc.name, func(t *testing.T) {
			g := newComposedWith(t, composedOptions{synth: tc.synth})
			core, logs := observer.New(zap.InfoLevel)
			g.pipe.log = zap.New(core)
			var h handles.Handle
			for seq := range uint64(3) {
				g.step(t, seq, &h)
			}
			if n := logs.FilterMessageSnippet("another aspect ratio").Len(); n != tc.lines {
				t.Fatalf("%d lines about the aspect ratio after 3 frames, want %d", n, tc.lines)
			}
			if n := logs.FilterMessageSnippet("grey").Len(); n != 0 {
				t.Fatalf("%d lines about grey images from a colour camera", n)
			}
			// A grey camera's image (KITTI's image_0, a mono camera).
			g.pipe.noteImage(infer.ImageView{Width: 1280, Height: 720, Format: infer.PixelMono8})
			if n := logs.FilterMessageSnippet("images are grey").Len(); n != 1 {
				t.Fatalf("%d lines about a grey image, want 1", n)
			}
		})
	}
}
