package telemetry

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net"
	"net/http"
	"net/http/pprof" // its init also registers on http.DefaultServeMux, which zerohop never serves
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// DefaultAddr is where Serve listens when given "": loopback only.
const DefaultAddr = "127.0.0.1:9090"

// shutdownGrace bounds how long Serve waits for open requests after ctx is
// done; then it closes them (a pprof profile can run for its "seconds").
// Well under the agent's shutdown grace (agent.DefaultShutdownGrace, 5 s),
// so an open profile does not look like a hung stage at exit.
const shutdownGrace = time.Second

// Connection limits: an idle keep-alive connection, one that sends its
// request slowly, or one that never reads its response must not hold a
// goroutine and an fd forever, and many of them must not use up the
// process's fds (the agent needs some to reconnect to the camera, which
// sends memfds).
//
// The write timeout is http.Server.WriteTimeout, counted from the end of a
// request's headers, so it bounds each response. It does not cut off a
// pprof profile or trace: since Go 1.23 net/http/pprof extends the
// connection's write deadline to WriteTimeout plus the requested seconds
// (configureWriteDeadline in net/http/pprof/pprof.go, go.dev/issue/62358;
// before, it refused such a duration), for /debug/pprof/profile, /trace
// and the delta profiles (heap?seconds=N …), parsing "seconds" itself.
const (
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 10 * time.Second
	writeTimeout      = 10 * time.Second
	idleTimeout       = 60 * time.Second
	// DefaultMaxConns is how many connections a Server serves at once;
	// more are closed as soon as they are accepted (see LimitConns). A
	// browser tab holds up to 6, a Prometheus scraper 1.
	DefaultMaxConns = 64
	// maxRequestBody bounds what a request may send: no endpoint needs a
	// body, but /debug/pprof/symbol reads a POST's whole and answers each
	// address in it, in memory (a 31 MiB body made a 177 MiB reply).
	maxRequestBody = 64 << 10
)

// pageSource is the / page, an html/template; parsed per Server, never
// written.
//
//go:embed page.html
var pageSource string

// ServerOptions configure a Server; the zero value is valid.
type ServerOptions struct {
	// Health reports whether the agent is healthy: nil → /healthz answers
	// 200 "ok", an error → 503 with the error's text. Called per request,
	// concurrently. Default: always healthy.
	Health func() error
	// NoPprof leaves /debug/pprof/ out (404): for a listener reachable from
	// other machines, where anyone could read the command line and run CPU
	// profiles and traces.
	NoPprof bool
	// LoopbackHostsOnly refuses (403) requests whose Host header names
	// anything but localhost or a loopback address. Set it when the
	// listener is on loopback: a web page whose own name resolves to
	// 127.0.0.1 (DNS rebinding) could otherwise read the endpoints and
	// start pprof profiles and traces of any length from the browser.
	LoopbackHostsOnly bool
}

// Server serves a Recorder over HTTP:
//
//	/              live latency chart (self-contained HTML, polls /latency)
//	/latency       JSON Snapshot
//	/metrics       Prometheus text format, from the Recorder's own registry
//	/healthz       200 "ok" or 503 with the reason
//	/debug/pprof/  net/http/pprof, registered on this mux only
type Server struct {
	rec           *Recorder
	health        func() error
	mux           *http.ServeMux
	page          *template.Template
	loopbackHosts bool
	// writeTimeout bounds each response (http.Server.WriteTimeout);
	// maxConns caps open connections (LimitConns). NewServer sets them to
	// writeTimeout and DefaultMaxConns; tests shorten them.
	writeTimeout time.Duration
	maxConns     int
	refused      atomic.Uint64 // connections closed at the cap, all listeners
}

// NewServer returns a Server for rec.
func NewServer(rec *Recorder, opts ServerOptions) (*Server, error) {
	page, err := template.New("page").Parse(pageSource)
	if err != nil {
		return nil, fmt.Errorf("telemetry: page template: %w", err)
	}
	s := &Server{rec: rec, health: opts.Health, mux: http.NewServeMux(), page: page, loopbackHosts: opts.LoopbackHostsOnly,
		writeTimeout: writeTimeout, maxConns: DefaultMaxConns}
	s.mux.HandleFunc("GET /{$}", s.servePage)
	s.mux.HandleFunc("GET /latency", s.serveLatency)
	s.mux.HandleFunc("GET /latency/hdr", s.serveHistograms)
	s.mux.Handle("GET /metrics", promhttp.HandlerFor(rec.Registry(), promhttp.HandlerOpts{}))
	s.mux.HandleFunc("GET /healthz", s.serveHealth)
	if !opts.NoPprof {
		s.mux.HandleFunc("/debug/pprof/", pprof.Index) // also serves the named profiles (heap, goroutine, …)
		s.mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		s.mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		s.mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		s.mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return s, nil
}

// ServeHTTP makes a Server an http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.loopbackHosts && !loopbackHost(r.Host) {
		http.Error(w, fmt.Sprintf("Host %q: this endpoint listens on loopback and answers only requests for localhost or a loopback address", r.Host), http.StatusForbidden)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxRequestBody)
	s.mux.ServeHTTP(w, r)
}

// loopbackHost reports whether a Host header (host, or host:port) names
// localhost or a loopback IP address, or is empty (an HTTP/1.0 client; a
// browser always sends one).
func loopbackHost(hostport string) bool {
	if hostport == "" {
		return true
	}
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"), ".") // "localhost." is fully qualified
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (s *Server) servePage(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'")
	if err := s.page.Execute(w, struct{ Stages []string }{s.rec.Stages()}); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}

func (s *Server) serveLatency(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(s.rec.Snapshot())
}

// serveHistograms serves every stage's since-start histogram, encoded
// (Recorder.Histograms): {"unit": "us", "stages": {name: V2 base64}}.
func (s *Server) serveHistograms(w http.ResponseWriter, _ *http.Request) {
	h, err := s.rec.Histograms()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(struct {
		Unit   string            `json:"unit"`
		Stages map[string]string `json:"stages"`
	}{"us", h})
}

func (s *Server) serveHealth(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if s.health != nil {
		if err := s.health(); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, err)
			return
		}
	}
	fmt.Fprintln(w, "ok")
}

// Serve listens on addr (see Listen) and serves until ctx is done, then
// shuts down gracefully and returns nil. While serving it also runs the
// Recorder's flush loop (Recorder.Run).
func (s *Server) Serve(ctx context.Context, addr string) error {
	ln, err := Listen(ctx, addr)
	if err != nil {
		return err
	}
	return s.ServeListener(ctx, ln)
}

// Listen opens the TCP listener for addr: "" means DefaultAddr (loopback).
// An address without a host (":9090") is refused rather than silently
// listening on all interfaces: write "0.0.0.0:9090" (or "[::]:9090") to
// mean that. Use it to listen before start-up and hand the listener to
// ServeListener.
func Listen(ctx context.Context, addr string) (net.Listener, error) {
	if addr == "" {
		addr = DefaultAddr
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("telemetry: listen address %q: %w (want HOST:PORT, e.g. 127.0.0.1:9090)", addr, err)
	}
	if host == "" {
		return nil, fmt.Errorf("telemetry: listen address %q has no host, which would listen on all interfaces; "+
			"write 0.0.0.0%s to mean that, or 127.0.0.1%s for this machine only", addr, addr, addr)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("telemetry: listen on %q: %w", addr, err)
	}
	return ln, nil
}

// Loopback reports whether addr (a listener's) is reachable from this
// machine only.
func Loopback(addr net.Addr) bool {
	tcp, ok := addr.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}

// ServeListener is Serve on a listener the caller opened (it is closed on
// return). It serves at most DefaultMaxConns connections at once and
// closes more as they come (LimitConns); while it serves, the Recorder's
// /metrics count those in <namespace>_http_connections_refused_total.
func (s *Server) ServeListener(ctx context.Context, ln net.Listener) error {
	hs := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      s.writeTimeout,
		IdleTimeout:       idleTimeout,
	}
	refused := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Namespace: s.rec.namespace, Name: "http_connections_refused_total",
		Help: fmt.Sprintf("Connections to this endpoint closed unserved because %d were open.", s.maxConns),
	}, func() float64 { return float64(s.refused.Load()) })
	if s.rec.reg.Register(refused) == nil { // else a second Server or listener on this Recorder: the first one's count is exported
		defer s.rec.reg.Unregister(refused)
	}
	ln = LimitConns(ln, s.maxConns, func() { s.refused.Add(1) })
	runCtx, stopRun := context.WithCancel(ctx)
	flushDone := make(chan struct{})
	go func() { // owned here: stopped and awaited before return
		defer close(flushDone)
		s.rec.Run(runCtx)
	}()
	defer func() { stopRun(); <-flushDone }()

	serveErr := make(chan error, 1)
	go func() { serveErr <- hs.Serve(ln) }() // ends when hs shuts down, awaited below

	select {
	case err := <-serveErr:
		// Serve has stopped accepting; the connections it serves would
		// live on until their timeouts.
		return errors.Join(fmt.Errorf("telemetry: serve on %s: %w", ln.Addr(), err), hs.Close())
	case <-ctx.Done():
	}
	shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
	defer cancel()
	err := hs.Shutdown(shutCtx)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		// Requests still open after the grace (a running profile) are cut
		// off: that is the stop the caller asked for, not an error.
		err = hs.Close()
	case err != nil:
		err = errors.Join(fmt.Errorf("telemetry: shut down %s: %w", ln.Addr(), err), hs.Close())
	}
	if serr := <-serveErr; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, fmt.Errorf("telemetry: serve on %s: %w", ln.Addr(), serr))
	}
	return err
}

// LimitConns returns ln serving at most n connections at once (n > 0): a
// connection accepted while n are open is closed at once, unserved, and
// refused (if not nil) is called, on the goroutine calling Accept. A
// connection's slot is freed when it is closed.
//
// Unlike golang.org/x/net/netutil.LimitListener, which stops calling
// Accept at the cap, it does not queue: there, further clients wait in the
// kernel's accept backlog with no answer until a slot frees (a scraper or
// health check hangs to its own timeout, a slow-client flood keeps them
// waiting indefinitely) and are served later even if they gave up. Here
// they get a prompt close (EOF or reset); each costs an fd for
// microseconds.
func LimitConns(ln net.Listener, n int, refused func()) net.Listener {
	if n <= 0 {
		panic(fmt.Sprintf("telemetry: LimitConns(%d): want a positive cap", n))
	}
	return &limitListener{Listener: ln, slots: make(chan struct{}, n), refused: refused}
}

type limitListener struct {
	net.Listener
	slots   chan struct{} // one element per open connection
	refused func()
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.slots <- struct{}{}:
			return &limitConn{Conn: c, slots: l.slots}, nil
		default:
			if l.refused != nil {
				l.refused() // first: a client that sees the close finds it counted
			}
			c.Close()
		}
	}
}

type limitConn struct {
	net.Conn
	slots   chan struct{}
	release sync.Once
}

// CloseWrite half-closes the connection where the inner one can (a TCP
// connection): net/http does so before it closes one it answered early (a
// 431, a request body left unread), and embedding net.Conn hides it.
func (c *limitConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Conn.Close()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.release.Do(func() { <-c.slots })
	return err
}
