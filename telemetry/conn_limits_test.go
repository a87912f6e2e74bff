package telemetry

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// serveConfigured runs a Server on a loopback port, set up by config before
// it serves, until the test ends. closed gets a value each time the server
// closes a connection it accepted.
func serveConfigured(t *testing.T, config func(*Server)) (addr string, closed <-chan struct{}) {
	t.Helper()
	r, _ := newRecorder(t, Options{})
	s, err := NewServer(r, ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	config(s)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := make(chan struct{}, 100)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.ServeListener(ctx, &closeSignalListener{Listener: ln, closed: c}) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("ServeListener still running 10 s after cancel")
		}
	})
	return ln.Addr().String(), c
}

// closeSignalListener reports on closed when the server closes a
// connection.
type closeSignalListener struct {
	net.Listener
	closed chan struct{}
}

func (l *closeSignalListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &closeSignalConn{Conn: c, closed: l.closed}, nil
}

type closeSignalConn struct {
	net.Conn
	once   sync.Once
	closed chan struct{}
}

func (c *closeSignalConn) Close() error {
	c.once.Do(func() { c.closed <- struct{}{} })
	return c.Conn.Close()
}

// dialNoRead connects with a small receive buffer, so that the server's
// writes block soon once the client stops reading.
func dialNoRead(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.(*net.TCPConn).SetReadBuffer(4096); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestWriteTimeoutCutsOffAClientThatDoesNotRead: a client that sends
// requests and never reads the answers held its connection, its goroutine
// and its fd forever; the write timeout now closes it.
func TestWriteTimeoutCutsOffAClientThatDoesNotRead(t *testing.T) {
	const writeTimeout = 300 * time.Millisecond
	for _, tc := range []struct {
		name     string
		path     string
		requests int // pipelined, none read
	}{
		{"a handler that writes without end", "/test/flood", 1},
		{"pipelined /metrics requests", "/metrics", 5000},
		{"pipelined /latency requests", "/latency", 5000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, closed := serveConfigured(t, func(s *Server) {
				s.writeTimeout = writeTimeout
				s.mux.HandleFunc("GET /test/flood", func(w http.ResponseWriter, _ *http.Request) {
					chunk := make([]byte, 64<<10)
					for range 1 << 14 { // 1 GiB: far more than any socket buffers
						if _, err := w.Write(chunk); err != nil {
							return
						}
					}
				})
			})
			c := dialNoRead(t, addr)
			req := "GET " + tc.path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
			go func() { // blocks once the server stops reading; ends when c is closed
				w := bufio.NewWriter(c)
				for range tc.requests {
					if _, err := w.WriteString(req); err != nil {
						return
					}
				}
				w.Flush()
			}()
			// Closed about writeTimeout after the socket buffers fill;
			// filling them (5000 /metrics answers under -race on a busy
			// 2-core machine) can take seconds, so the bound only tells
			// "closed" from "held forever", as it was without the timeout.
			const bound = 20 * time.Second
			start := time.Now()
			select {
			case <-closed:
				t.Logf("closed %v after the first request", time.Since(start))
			case <-time.After(bound):
				t.Fatalf("the connection of a client that does not read is still open %v after its request", bound)
			}
		})
	}
}

// TestConnectionCap: with maxConns connections open, one more is closed at
// once (not left waiting), counted in /metrics, and once one of the others
// closes a new connection is served.
func TestConnectionCap(t *testing.T) {
	const maxConns = 3
	addr, _ := serveConfigured(t, func(s *Server) { s.maxConns = maxConns })
	var open []net.Conn
	for range maxConns {
		c := dialNoRead(t, addr)
		if err := roundTrip(c, "/healthz"); err != nil {
			t.Fatalf("connection %d of %d: %v", len(open)+1, maxConns, err)
		}
		open = append(open, c)
	}

	extra := dialNoRead(t, addr)
	start := time.Now()
	err := roundTrip(extra, "/healthz")
	if err == nil {
		t.Fatalf("connection %d served with the cap at %d", maxConns+1, maxConns)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("connection %d left waiting (%v), want it closed at once", maxConns+1, err)
	}
	t.Logf("connection %d closed after %v", maxConns+1, time.Since(start))

	open[0].Close()
	var body string
	deadline := time.Now().Add(10 * time.Second) // the server sees the close a moment later (seconds on a loaded CI machine)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		body, err = get1(c, "/metrics")
		c.Close()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no connection served within 10 s of one closing: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(body, "zerohop_http_connections_refused_total ") || strings.Contains(body, "zerohop_http_connections_refused_total 0\n") {
		t.Errorf("/metrics does not count the refused connection:\n%s", grepLines(body, "refused"))
	}
}

// TestLimitConns: table over caps; the (n+1)th connection is closed and
// reported, a freed slot is reused, and a second Close frees nothing more.
func TestLimitConns(t *testing.T) {
	for _, n := range []int{1, 2, 5} {
		t.Run(fmt.Sprintf("cap %d", n), func(t *testing.T) {
			inner, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			var refused atomic.Int32
			ln := LimitConns(inner, n, func() { refused.Add(1) })
			defer ln.Close()
			accepted := make(chan net.Conn, 2*n+2)
			go func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					accepted <- c
				}
			}()
			next := func() net.Conn {
				t.Helper()
				select {
				case c := <-accepted:
					return c
				case <-time.After(10 * time.Second):
					t.Fatal("no connection accepted within 10 s")
					return nil
				}
			}
			var server []net.Conn
			for range n {
				dialNoRead(t, inner.Addr().String())
				server = append(server, next())
			}
			over := dialNoRead(t, inner.Addr().String())
			over.SetReadDeadline(time.Now().Add(10 * time.Second))
			if _, err := over.Read(make([]byte, 1)); err == nil || isTimeout(err) {
				t.Fatalf("connection over the cap: read %v, want it closed at once", err)
			}
			if got := waitCount(&refused, 1); got != 1 {
				t.Errorf("refused called %d times, want 1", got)
			}
			server[0].Close()
			server[0].Close() // a second Close must not free another slot
			dialNoRead(t, inner.Addr().String())
			server[0] = next()
			over = dialNoRead(t, inner.Addr().String()) // n open again: this one is refused
			over.SetReadDeadline(time.Now().Add(10 * time.Second))
			if _, err := over.Read(make([]byte, 1)); err == nil || isTimeout(err) {
				t.Fatalf("connection over the cap after a double Close: read %v, want it closed", err)
			}
			select {
			case c := <-accepted:
				t.Fatalf("connection %v accepted over the cap", c.RemoteAddr())
			default:
			}
			if got := waitCount(&refused, 2); got != 2 {
				t.Errorf("refused called %d times, want 2", got)
			}
			for _, c := range server {
				c.Close()
			}
		})
	}
}

// TestPprofOutlastsTheWriteTimeout: /debug/pprof/profile, /trace and the
// delta profiles answer after their "seconds", longer than the write
// timeout (net/http/pprof extends the deadline by them).
func TestPprofOutlastsTheWriteTimeout(t *testing.T) {
	addr, _ := serveConfigured(t, func(s *Server) { s.writeTimeout = 300 * time.Millisecond })
	client := &http.Client{Timeout: 15 * time.Second}
	for _, path := range []string{
		"/debug/pprof/profile?seconds=1",
		"/debug/pprof/trace?seconds=1",
		"/debug/pprof/heap?seconds=1",
	} {
		t.Run(path, func(t *testing.T) {
			start := time.Now()
			res, err := client.Get("http://" + addr + path)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			body, err := io.ReadAll(res.Body)
			if err != nil {
				t.Fatalf("after %v: %v", time.Since(start), err)
			}
			if res.StatusCode != 200 || len(body) == 0 {
				t.Fatalf("status %d, %d bytes: %.200s", res.StatusCode, len(body), body)
			}
			if d := time.Since(start); d < time.Second {
				t.Errorf("answered after %v, before its 1 s", d)
			}
		})
	}
}

// roundTrip sends one keep-alive GET on c and reads the answer, with a 10 s
// deadline.
func roundTrip(c net.Conn, path string) error {
	_, err := get1(c, path)
	return err
}

func get1(c net.Conn, path string) (string, error) {
	c.SetDeadline(time.Now().Add(10 * time.Second))
	defer c.SetDeadline(time.Time{})
	if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"); err != nil {
		return "", err
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return "", err
	}
	if res.StatusCode != 200 {
		return "", fmt.Errorf("GET %s: status %d", path, res.StatusCode)
	}
	return string(body), nil
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// A connection under the cap still half-closes: net/http calls CloseWrite
// before closing a connection it answered early (a 431), so that the
// client reads the answer instead of a reset; embedding net.Conn hid it.
func TestLimitConnsKeepsCloseWrite(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lim := LimitConns(ln, 1, nil)
	defer lim.Close()
	client, err := net.DialTimeout("tcp", ln.Addr().String(), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server, err := lim.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	cw, ok := server.(interface{ CloseWrite() error })
	if !ok {
		t.Fatalf("%T has no CloseWrite", server)
	}
	if err := cw.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	client.SetDeadline(time.Now().Add(10 * time.Second))
	if n, err := client.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Fatalf("client read after the server's CloseWrite: %d, %v; want EOF", n, err)
	}
	// Only the write side is closed: the server still reads.
	if _, err := client.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	server.SetDeadline(time.Now().Add(10 * time.Second))
	if n, err := server.Read(make([]byte, 1)); n != 1 || err != nil {
		t.Fatalf("server read after its CloseWrite: %d, %v; want the byte", n, err)
	}
}

// waitCount waits up to 10 s for c to reach want and returns its value.
func waitCount(c *atomic.Int32, want int32) int32 {
	deadline := time.Now().Add(10 * time.Second)
	for c.Load() < want && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	return c.Load()
}
