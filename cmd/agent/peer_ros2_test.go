//go:build ros2

package main

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zerohop/zerohop/internal/childproc/childproctest"
)

// testPeer is ros2/testdata/peer (raw Cyclone, no zerohop code) run as a
// separate process; it ends when its stdin closes (at the test's end).
type testPeer struct {
	lines chan string
}

// buildTestPeer compiles the peer into the test's temporary folder.
func buildTestPeer(t *testing.T) string {
	t.Helper()
	peer := filepath.Join(t.TempDir(), "peer")
	flags, err := exec.Command("pkg-config", "--cflags", "--libs", "CycloneDDS").Output()
	if err != nil {
		t.Fatal("pkg-config CycloneDDS:", err)
	}
	args := []string{"-O1", "-I../../ros2", "-o", peer}
	for _, s := range []string{"testdata/peer/peer.c", "builtin_interfaces.c", "rosgraph_msgs.c", "std_msgs.c", "geometry_msgs.c",
		"tf2_msgs.c", "sensor_msgs.c", "zerohop_msgs.c", "diagnostic_msgs.c", "rcl_interfaces.c"} {
		args = append(args, "../../ros2/"+s)
	}
	if out, err := exec.Command("gcc", append(append(args, strings.Fields(string(flags))...), "-lm")...).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	return peer
}

// buildParamClient compiles ros2/testdata/paramclient (raw Cyclone, as
// ros2 param's client) into the test's temporary folder.
func buildParamClient(t *testing.T) string {
	t.Helper()
	client := filepath.Join(t.TempDir(), "paramclient")
	flags, err := exec.Command("pkg-config", "--cflags", "--libs", "CycloneDDS").Output()
	if err != nil {
		t.Fatal("pkg-config CycloneDDS:", err)
	}
	gcc := exec.Command("gcc", append([]string{"-O1", "-I../../ros2", "-o", client,
		"../../ros2/testdata/paramclient/paramclient.c", "../../ros2/rcl_interfaces.c"}, strings.Fields(string(flags))...)...)
	if out, err := gcc.CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	return client
}

// loopbackDomain puts the test on ros2/testdata/loopback.xml in a domain
// from base on, and returns it.
func loopbackDomain(t *testing.T, base int) string {
	t.Helper()
	loopback, err := filepath.Abs("../../ros2/testdata/loopback.xml")
	if err != nil {
		t.Fatal(err)
	}
	domain := fmt.Sprint(base + os.Getpid()%2)
	t.Setenv("CYCLONEDDS_URI", "file://"+loopback)
	t.Setenv("ROS_DOMAIN_ID", domain)
	return domain
}

// startTestPeer runs the peer at path with args in domain and waits for
// READY. Call it on the test's goroutine: the peer is killed should the
// test binary die.
func startTestPeer(t *testing.T, path, domain string, args ...string) *testPeer {
	t.Helper()
	cmd := exec.Command(path, append([]string{domain}, args...)...)
	childproctest.LockForPdeathsig(cmd)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &testPeer{lines: make(chan string, 256)}
	go func() { // ends when the peer's stdout closes
		defer close(p.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case p.lines <- sc.Text():
			default: // nobody reads: drop, never block the peer
			}
		}
	}()
	t.Cleanup(func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	p.expect(t, "READY")
	return p
}

// expect returns the rest of the next line starting with prefix, failing
// on an ERROR line, the peer's end, or after 20 s.
func (p *testPeer) expect(t *testing.T, prefix string) string {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				t.Fatalf("peer ended before %s", prefix)
			}
			if strings.HasPrefix(l, "ERROR") {
				t.Fatalf("peer: %s", l)
			}
			if rest, ok := strings.CutPrefix(l, prefix); ok {
				return strings.TrimSpace(rest)
			}
		case <-deadline:
			t.Fatalf("peer: no %s line in 20 s", prefix)
		}
	}
}

// requireORTCache points the agent at the repository's ONNX Runtime (make
// ort) and skips when it was not fetched, as make test fetches it.
func requireORTCache(t *testing.T) {
	t.Helper()
	cache, err := filepath.Abs("../../.cache")
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv("ZEROHOP_CACHE") == "" {
		t.Setenv("ZEROHOP_CACHE", cache)
	}
	if _, err := os.Stat(filepath.Join(os.Getenv("ZEROHOP_CACHE"), "ort")); err != nil && os.Getenv("ZEROHOP_REQUIRE_ORT") != "1" {
		t.Skip("ONNX Runtime library not fetched; run `make ort` (make test requires it)")
	}
}

// freeLoopbackAddr is a loopback address nothing listens on now.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// metric reads one sample from the agent's /metrics; 0 if it cannot.
func metric(addr, name string) float64 {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}
