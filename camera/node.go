package camera

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"

	"github.com/zerohop/zerohop/handles"
	"github.com/zerohop/zerohop/handles/transport"
	"github.com/zerohop/zerohop/pinned"
	"github.com/zerohop/zerohop/sensor"
	"github.com/zerohop/zerohop/telemetry"
)

// NodeConfig is everything the camera process is configured with.
type NodeConfig struct {
	Source       string // "synthetic" or "replay:DIR"
	Loop         bool   // replay: loop
	Rate         float64
	Beams        int
	AzimuthSteps int
	ImageWidth   int
	ImageHeight  int
	NoImage      bool // synthetic and replay: no images, only clouds (--image-size none, for a LiDAR-only agent); only the points topic is served
	// PlanarLidar: the clouds are a planar (2D) LiDAR's scans, marked so
	// in their handles (for bin/agent --planar-lidar): the synthetic
	// scene's LiDAR becomes one level beam 0.3 m above the ground; a
	// replay folder's clouds are taken as recorded scans.
	PlanarLidar bool
	Socket      string
	AllowGID    int
	Slots       uint32
	// Subscribers is how many subscribers the pools are sized for
	// (--subscribers; 0 means 2): the slot count when Slots is 0, and each
	// subscriber's share of a pool (transport.ServerConfig.Subscribers).
	Subscribers int
	Lock        bool
	Checksum    bool
	Frames      uint64
	MetricsAddr string // "" disables
	// Transport is "unix" (zero-copy, default) or "copy": the benchmark
	// baseline that sends every payload through a stream socket per topic
	// (Socket + ".points", Socket + ".image").
	Transport string
	Log       *zap.Logger

	// ReplayTiming paces a replay: ReplayTimingAuto (the camera's
	// default: the recording's timestamps when it has a timestamps file,
	// else Rate), ReplayTimingRecorded or ReplayTimingRate ("" too).
	ReplayTiming string
	// ReplaySpeed scales recorded timing: 2 plays twice as fast as
	// recorded (0.01 to 100; 0 means 1).
	ReplaySpeed float64
}

// ReplayPreloadLimit is how much of a replay folder, decoded, is read into
// memory before it plays (no file reads and no allocation per frame); a
// larger recording is read as it plays, each frame's files then.
const ReplayPreloadLimit = 1 << 30

// OpenSource builds the source named by spec: "synthetic" or "replay:DIR"
// (read into memory up to ReplayPreloadLimit, until ctx is done). flag
// names the flag spec came from, for errors ("--source", or the agent's
// "--camera").
func OpenSource(ctx context.Context, flag, spec string, cfg NodeConfig) (sensor.Source, error) {
	if err := CheckSource(flag, spec); err != nil {
		return nil, err
	}
	if dir, ok := strings.CutPrefix(spec, "replay:"); ok {
		r, err := sensor.NewReplayContext(ctx, dir, sensor.ReplayConfig{Loop: cfg.Loop, Preload: true, PreloadLimit: ReplayPreloadLimit,
			NoImages: cfg.NoImage, Planar: cfg.PlanarLidar, NoTimestamps: !replayTimingReadsTimestamps(cfg.ReplayTiming)})
		if te := (*sensor.TimestampsError)(nil); errors.As(err, &te) {
			return nil, fmt.Errorf("%w (--replay-timing rate plays the frames at --rate without reading it)", err)
		}
		if err != nil {
			return nil, err
		}
		if log := cfg.Log; log != nil && !r.Preloaded() {
			log.Info("replay: the recording is read as it plays, each frame's files then (decoded, it is larger than what is read into memory first)",
				zap.String("dir", dir), zap.Int64("decoded_bytes", r.DecodedBytes()), zap.Int64("preload_limit_bytes", ReplayPreloadLimit))
		}
		return r, nil
	}
	return sensor.NewSynthetic(sensor.SyntheticConfig{
		Rate: cfg.Rate, Beams: cfg.Beams, AzimuthSteps: cfg.AzimuthSteps,
		ImageWidth: cfg.ImageWidth, ImageHeight: cfg.ImageHeight, NoImage: cfg.NoImage, Planar: cfg.PlanarLidar,
	})
}

// CheckSource reports whether spec names a source OpenSource can open
// ("" and "synthetic", or "replay:DIR" with DIR a folder), without reading
// it: a process checks its flags before it starts anything slow.
func CheckSource(flag, spec string) error {
	if spec == "" || spec == "synthetic" {
		return nil
	}
	dir, ok := strings.CutPrefix(spec, "replay:")
	switch {
	case !ok:
		return fmt.Errorf(`%s %q: want "synthetic" or "replay:DIR"`, flag, spec)
	case dir == "":
		return fmt.Errorf(`%s replay:DIR needs a directory, e.g. replay:/data/kitti/seq00`, flag)
	}
	if fi, err := os.Stat(dir); err != nil {
		return fmt.Errorf("%s %s: %w", flag, spec, err)
	} else if !fi.IsDir() {
		return fmt.Errorf("%s %s: not a directory", flag, spec)
	}
	return nil
}

// RunNode runs a camera process: source, shared pools, the unix socket
// server and a metrics endpoint, until ctx is done or the frames run out.
func RunNode(ctx context.Context, cfg NodeConfig) error {
	log := cfg.Log
	if log == nil {
		log = zap.NewNop()
	}
	// Every setting first: a replay is read into memory before it runs.
	if cfg.Transport != "" && cfg.Transport != "unix" && cfg.Transport != "copy" {
		return fmt.Errorf(`--transport %q: want "unix" or "copy"`, cfg.Transport)
	}
	if cfg.Rate != 0 {
		if err := CheckRate(cfg.Rate); err != nil {
			return fmt.Errorf("--rate: %w (0: the default, 30)", err)
		}
	}
	if err := CheckReplayTiming("--source", cfg.Source, cfg.ReplayTiming, cfg.ReplaySpeed); err != nil {
		return err
	}
	// The metrics port too: taken, it must fail the start, not after a
	// replay has been read into memory.
	metricsLn, err := listenMetrics(cfg.MetricsAddr)
	if err != nil {
		return err
	}
	defer closeListener(metricsLn)
	src, err := OpenSource(ctx, "--source", cfg.Source, cfg)
	if err != nil {
		return err
	}
	sched, err := ReplaySchedule(src, cfg, log)
	if err != nil {
		return err
	}
	cam, err := New(Config{
		Source: src, Schedule: sched, PlanarLidar: cfg.PlanarLidar, Rate: cfg.Rate, Slots: cfg.Slots, Subscribers: cfg.Subscribers, Shared: true, Lock: cfg.Lock,
		Checksum: cfg.Checksum, Frames: cfg.Frames, Log: log,
	})
	if err != nil {
		return err
	}
	defer cam.Close()
	topics := cam.Topics()
	if cfg.Transport == "copy" {
		return runCopy(ctx, cfg, cam, metricsLn, log)
	}
	srv, err := transport.NewServer(transport.ServerConfig{Path: cfg.Socket, AllowGID: cfg.AllowGID, Topics: topics,
		Absent: cam.AbsentTopics(), Subscribers: cfg.Subscribers, Log: log})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	served := make(chan error, 1)
	go func() { // a server that fails ends the node: the process exits and is restarted, rather than run on unreachable
		err := srv.Serve(ctx)
		if err != nil {
			cancel()
		}
		served <- err
	}()

	defer serveMetrics(ctx, metricsLn, nil, cam, srv, log)()
	log.Info("camera serving", zap.String("socket", srv.Path()), zap.String("source", cfg.Source))
	runErr := cam.Run(ctx, indexPublisher{srv, topics, cam})
	cancel()
	serveErr := <-served
	st := cam.Stats()
	log.Info("camera stopped", zap.Uint64("frames", st.Frames), zap.Uint64("late", st.Late),
		zap.Uint64s("exhausted", st.Exhausted[:]), zap.Uint64s("delivered", st.Delivered[:]))
	return errors.Join(runErr, serveErr)
}

// indexPublisher maps camera topic indices onto server topic indices (a
// source without images has only the points topic).
type indexPublisher struct {
	srv    *transport.Server
	topics []transport.Topic
	cam    *Camera
}

func (p indexPublisher) Publish(topic int, slot pinned.Slot, h *handles.Handle) (int, error) {
	for i, t := range p.topics {
		if t.Pool == p.cam.Pool(topic) {
			return p.srv.Publish(i, slot, h)
		}
	}
	return 0, fmt.Errorf("topic %d not served", topic)
}

// listenMetrics listens on --metrics addr; "" (disabled) is a nil
// listener.
func listenMetrics(addr string) (net.Listener, error) {
	if addr == "" {
		return nil, nil
	}
	ln, err := telemetry.Listen(context.Background(), addr) // refuses ":PORT", as the agent's --http does
	if err != nil {
		return nil, fmt.Errorf("--metrics %q: %w", addr, err)
	}
	return ln, nil
}

// closeListener closes ln, if any (a second Close after the server's is
// harmless).
func closeListener(ln net.Listener) {
	if ln != nil {
		ln.Close()
	}
}

// serveMetrics serves reg (nil: a new registry) with the camera's and the
// server's metrics added on ln (nil: nothing is served), until the
// returned stop is called; the caller may register more while it serves.
func serveMetrics(ctx context.Context, ln net.Listener, reg *prometheus.Registry, cam *Camera, srv *transport.Server, log *zap.Logger) (stop func()) {
	if ln == nil {
		return func() {}
	}
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	for i := range 2 {
		p := cam.Pool(i)
		if p == nil {
			continue
		}
		labels := prometheus.Labels{"topic": TopicName(i)}
		reg.MustRegister(
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "zerohop_camera_pool_in_use", Help: "Slots being written or held by subscribers.", ConstLabels: labels},
				func() float64 { return float64(p.Stats().InUse) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "zerohop_camera_published_total", Help: "Frames published.", ConstLabels: labels},
				func() float64 { return float64(cam.Stats().Published[i]) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "zerohop_camera_exhausted_total", Help: "Frames skipped for want of a free slot.", ConstLabels: labels},
				func() float64 { return float64(cam.Stats().Exhausted[i]) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "zerohop_camera_subscriber_drops_total", Help: "Frames a subscriber missed because it was at its in-flight limit, over all subscribers (those gone too); the camera's subscriber-disconnected log line gives each one's.", ConstLabels: labels},
				func() float64 { return float64(p.Stats().SubscriberDrops) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "zerohop_camera_rejected_releases_total", Help: "Releases rejected as stale or forged.", ConstLabels: labels},
				func() float64 { return float64(p.Stats().Rejected.Total()) }),
		)
	}
	reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "zerohop_camera_frames_late_total", Help: "Frame ticks missed: a frame overran its period, or the camera did not run (paused, starved)."},
			func() float64 { return float64(cam.Stats().Late) }),
	)
	if srv != nil {
		reg.MustRegister(
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "zerohop_camera_subscribers", Help: "Connected subscribers."},
				func() float64 { return float64(srv.Stats().Connected) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "zerohop_camera_send_drops_total", Help: "Handles not sent because a subscriber socket was full or dead."},
				func() float64 { return float64(srv.Stats().SendDrops) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "zerohop_camera_garbage_disconnects_total", Help: "Subscribers disconnected for protocol violations."},
				func() float64 { return float64(srv.Stats().Garbage) }),
		)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	log.Info("metrics endpoint", zap.String("url", "http://"+ln.Addr().String()+"/metrics"))
	return serveMetricsHTTP(ln, mux, metricsMaxConns, metricsWriteTimeout, log)
}

// Bounds on the metrics server, like the agent's endpoint (telemetry): a
// slow, idle or non-reading client must not hold a goroutine and an fd
// forever, and many must not use up the camera's fds (it creates memfds
// and accepts subscribers). A scraper or two and a health check need far
// fewer than metricsMaxConns connections.
const (
	metricsMaxConns     = 16
	metricsWriteTimeout = 10 * time.Second // per response
)

// serveMetricsHTTP serves h on ln, at most maxConns connections at once
// (more are closed at once; logged at most once a minute), until the
// returned stop is called.
func serveMetricsHTTP(ln net.Listener, h http.Handler, maxConns int, writeTimeout time.Duration, log *zap.Logger) (stop func()) {
	hs := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       60 * time.Second,
	}
	var refused atomic.Uint64
	var lastLog time.Time // Accept runs on one goroutine
	ln = telemetry.LimitConns(ln, maxConns, func() {
		n := refused.Add(1)
		if now := time.Now(); lastLog.IsZero() || now.Sub(lastLog) >= time.Minute {
			lastLog = now
			log.Warn("metrics endpoint: connection closed unserved, the cap of open connections is reached",
				zap.Int("max_conns", maxConns), zap.Uint64("refused_total", n))
		}
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("metrics server stopped", zap.Error(err))
		}
	}()
	return func() {
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if hs.Shutdown(sctx) != nil {
			hs.Close() // a response still blocked on its client after 1 s
		}
		<-done
	}
}

// runCopy serves the copy baseline: one stream socket per topic, every
// payload written through it; the slot is free again as soon as it is sent.
func runCopy(ctx context.Context, cfg NodeConfig, cam *Camera, metricsLn net.Listener, log *zap.Logger) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pub := copyPublisher{cam: cam}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range 2 {
		if cam.Pool(i) == nil {
			continue
		}
		srv, err := transport.NewCopyServer(transport.CopyServerConfig{Path: cfg.Socket + "." + TopicName(i), AllowGID: cfg.AllowGID, Log: log})
		if err != nil {
			cancel() // a server already serving the other topic stops
			wg.Wait()
			return err
		}
		pub.srv[i] = srv
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = srv.Serve(ctx) }()
	}
	log.Info("camera serving the copy baseline", zap.String("socket_prefix", cfg.Socket))
	defer serveMetrics(ctx, metricsLn, nil, cam, nil, log)()
	runErr := cam.Run(ctx, pub)
	if ctx.Err() != nil && errors.Is(runErr, transport.ErrClosed) {
		runErr = nil // the servers closed because we are stopping
	}
	cancel()
	wg.Wait()
	return errors.Join(append(errs, runErr)...)
}

type copyPublisher struct {
	cam *Camera
	srv [2]*transport.CopyServer
}

func (p copyPublisher) Publish(topic int, slot pinned.Slot, h *handles.Handle) (int, error) {
	n, err := p.srv[topic].Publish(h, slot.Bytes()[:h.Length])
	// The payload went through the socket; nobody holds the slot.
	if _, perr := p.cam.Pool(topic).Publish(slot, 0); perr != nil && err == nil {
		err = perr
	}
	return n, err
}
