package camera

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// serveMetricsOnLoopback runs serveMetricsHTTP on a loopback port until the
// test ends.
func serveMetricsOnLoopback(t *testing.T, h http.Handler, maxConns int, writeTimeout time.Duration, log *zap.Logger) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	stop := serveMetricsHTTP(ln, h, maxConns, writeTimeout, log)
	t.Cleanup(stop)
	return ln.Addr().String()
}

func dialLoopback(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// getOn sends one keep-alive GET on c and reads the answer, within 10 s.
func getOn(c net.Conn, path string) error {
	c.SetDeadline(time.Now().Add(10 * time.Second))
	defer c.SetDeadline(time.Time{})
	if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"); err != nil {
		return err
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if _, err := io.ReadAll(res.Body); err != nil {
		return err
	}
	if res.StatusCode != 200 {
		return fmt.Errorf("status %d", res.StatusCode)
	}
	return nil
}

// TestMetricsHTTPCutsOffAClientThatDoesNotRead: a scraper that sends its
// request and never reads held the handler's goroutine and the fd forever;
// the write timeout now ends the response.
func TestMetricsHTTPCutsOffAClientThatDoesNotRead(t *testing.T) {
	const writeTimeout = 300 * time.Millisecond
	ended := make(chan error, 1)
	flood := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		chunk := make([]byte, 64<<10)
		for range 1 << 14 { // 1 GiB: far more than any socket buffers
			if _, err := w.Write(chunk); err != nil {
				ended <- err
				return
			}
		}
		ended <- nil
	})
	addr := serveMetricsOnLoopback(t, flood, metricsMaxConns, writeTimeout, zap.NewNop())
	c := dialLoopback(t, addr)
	c.(*net.TCPConn).SetReadBuffer(4096)
	if _, err := io.WriteString(c, "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	select {
	case err := <-ended:
		if err == nil {
			t.Fatal("1 GiB written to a client that reads nothing")
		}
		t.Logf("write failed %v after the request", time.Since(start))
	case <-time.After(20 * time.Second): // only "ended" from "held forever": the buffers can take seconds to fill under load
		t.Fatalf("response to a client that does not read still blocked 20 s after the request")
	}
}

// TestMetricsHTTPConnectionCap: with metricsMaxConns connections open, more
// are closed at once and logged once, not per connection; after one of the
// others closes, a new one is served.
func TestMetricsHTTPConnectionCap(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	addr := serveMetricsOnLoopback(t, ok, metricsMaxConns, metricsWriteTimeout, zap.New(core))
	var open []net.Conn
	for i := range metricsMaxConns {
		c := dialLoopback(t, addr)
		if err := getOn(c, "/healthz"); err != nil {
			t.Fatalf("connection %d of %d: %v", i+1, metricsMaxConns, err)
		}
		open = append(open, c)
	}
	for i := range 3 {
		start := time.Now()
		err := getOn(dialLoopback(t, addr), "/healthz")
		if err == nil {
			t.Fatalf("connection %d served with the cap at %d", metricsMaxConns+1+i, metricsMaxConns)
		}
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatalf("connection over the cap left waiting (%v), want it closed at once", err)
		}
		t.Logf("connection over the cap closed after %v", time.Since(start))
	}
	if got := logs.FilterMessageSnippet("cap of open connections").Len(); got != 1 {
		t.Errorf("%d log lines for 3 refused connections, want 1 (at most one a minute)", got)
	}

	open[0].Close()
	deadline := time.Now().Add(10 * time.Second) // the server sees the close a moment later (seconds on a loaded CI machine)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		err = getOn(c, "/healthz")
		c.Close()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no connection served within 10 s of one closing: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
