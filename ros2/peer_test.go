//go:build ros2 && cgo

package ros2

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
)

// The tests talk to testdata/peer/peer.c, a separate process built from
// the raw Cyclone C API and the idlc-generated types, over UDP on
// loopback (testdata/loopback.xml: interface 127.0.0.1, multicast off,
// peer 127.0.0.1). Each test uses its own domain so concurrent runs do not
// cross-talk.

// peerPath and graphPath are the peer binaries (testdata/peer,
// testdata/graph), built once by TestMain.
var peerPath, graphPath string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "zerohop-ros2-peer")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	peerPath, graphPath, paramClientPath = filepath.Join(dir, "peer"), filepath.Join(dir, "graph"), filepath.Join(dir, "paramclient")
	if err := buildPeer(peerPath, graphPath, paramClientPath); err != nil {
		fmt.Fprintln(os.Stderr, "build test peer:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func buildPeer(peer, graph, paramClient string) error {
	flags, err := exec.Command("pkg-config", "--cflags", "--libs", "CycloneDDS").Output()
	if err != nil {
		return fmt.Errorf("pkg-config CycloneDDS: %w", err)
	}
	for _, args := range [][]string{
		{"-o", peer, "testdata/peer/peer.c", "builtin_interfaces.c", "std_msgs.c", "geometry_msgs.c", "tf2_msgs.c", "rosgraph_msgs.c", "sensor_msgs.c", "zerohop_msgs.c", "diagnostic_msgs.c", "rcl_interfaces.c"},
		{"-o", graph, "testdata/graph/graph.c", "rmw_dds_common.c", "rmw_dds_common_humble.c"},
		{"-o", paramClient, "testdata/paramclient/paramclient.c", "rcl_interfaces.c"},
	} {
		args = append(append(append([]string{"-O1", "-Wall", "-I."}, args...), strings.Fields(string(flags))...), "-lm")
		cmd := exec.Command("gcc", args...)
		cmd.Stderr = os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("gcc %s: %w", args[4], err)
		}
	}
	return nil
}

// domainSeq numbers the domains of one test run.
var domainSeq atomic.Uint32

// testDomain returns a domain id no other test of this run uses and that
// concurrent runs (other pids) are unlikely to use: 100..199.
func testDomain() uint32 {
	return 100 + (uint32(os.Getpid())*7+domainSeq.Add(1))%100
}

// runTag is a Cyclone domain tag unique to this test process: participants
// with different tags ignore each other, so concurrent test runs that
// happen to pick the same domain cannot cross-talk.
func runTag() string {
	return "<CycloneDDS><Domain><Discovery><Tag>zerohop-ros2-test-" + strconv.Itoa(os.Getpid()) +
		"</Tag></Discovery></Domain></CycloneDDS>"
}

// loopbackConfig is testdata/loopback.xml, as CYCLONEDDS_URI would name
// it, in a fresh domain.
func loopbackConfig(t testing.TB) Config {
	abs, err := filepath.Abs("testdata/loopback.xml")
	if err != nil {
		t.Fatal(err)
	}
	return Config{Domain: testDomain(), CycloneURI: "file://" + abs, XML: runTag()}
}

type peer struct {
	t     testing.TB
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
}

// startPeer runs the peer in cfg's domain with cfg's Cyclone configuration.
func startPeer(t testing.TB, cfg Config, args ...string) *peer {
	t.Helper()
	return startProgram(t, peerPath, cfg, args...)
}

// startProgram runs one of the peer binaries like startPeer.
func startProgram(t testing.TB, path string, cfg Config, args ...string) *peer {
	t.Helper()
	cmd := exec.Command(path, append([]string{fmt.Sprint(cfg.Domain)}, args...)...)
	cmd.Env = append(os.Environ(), "CYCLONEDDS_URI="+cfg.CycloneConfig())
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
	p := &peer{t: t, cmd: cmd, stdin: stdin, lines: make(chan string, 64)}
	go func() { // owned by the peer process: ends when its stdout closes
		defer close(p.lines)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 8<<20)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		stdin.Close() // a publishing peer stops when stdin closes
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		for range p.lines { // drain so the reader goroutine ends
		}
	})
	p.expect("READY")
	return p
}

// stop closes the peer's stdin, which ends it.
func (p *peer) stop() { p.stdin.Close() }

// expect returns the next line that starts with prefix (rest after the
// prefix and a space), failing on an ERROR line or after 20 s.
func (p *peer) expect(prefix string) string {
	p.t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				p.t.Fatalf("peer exited while waiting for %s", prefix)
			}
			if strings.HasPrefix(l, "ERROR") {
				p.t.Fatalf("peer: %s", l)
			}
			if l == prefix || strings.HasPrefix(l, prefix+" ") {
				return strings.TrimPrefix(strings.TrimPrefix(l, prefix), " ")
			}
		case <-deadline:
			p.t.Fatalf("peer: no %s line within 20 s", prefix)
		}
	}
}

// expectAny returns the next line, failing on an ERROR line or after 20 s.
func (p *peer) expectAny() string {
	p.t.Helper()
	select {
	case l, ok := <-p.lines:
		if !ok {
			p.t.Fatal("peer exited")
		}
		if strings.HasPrefix(l, "ERROR") {
			p.t.Fatalf("peer: %s", l)
		}
		return l
	case <-time.After(20 * time.Second):
		p.t.Fatal("peer: no line within 20 s")
	}
	return ""
}

// fields parses "k=v k=v" (values without spaces).
func fields(s string) map[string]string {
	m := map[string]string{}
	for _, kv := range strings.Fields(s) {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}

// waitFor polls cond until it holds or 20 s pass.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// newTwistSink is a participant with cfg and log, closed at cleanup, and
// its cmd_vel publisher with the default options.
func newTwistSink(t *testing.T, cfg Config, log *zap.Logger) *TwistSink {
	t.Helper()
	p, err := NewParticipant(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	sink, err := p.NewTwistSink(TwistOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return sink
}

// pause stops the peer process with SIGSTOP and returns once every one of
// its threads is stopped: kill returns before they are, and a receive
// thread still running could take and acknowledge the next sample (CI saw
// that once). The peer runs again (SIGCONT) at cleanup, before startPeer's
// cleanup, which needs it running to end.
func (p *peer) pause() {
	p.t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		p.t.Fatal(err)
	}
	p.t.Cleanup(func() { p.cmd.Process.Signal(syscall.SIGCONT) })
	waitFor(p.t, "every thread of the peer stopped", func() bool { return allThreadsStopped(p.t, p.cmd.Process.Pid) })
}

// allThreadsStopped reports whether every thread of process pid is in the
// stopped state (T in /proc/PID/task/TID/stat, t under a debugger or
// strace); threads that end meanwhile are left out.
func allThreadsStopped(t testing.TB, pid int) bool {
	t.Helper()
	stats, err := filepath.Glob(filepath.Join("/proc", fmt.Sprint(pid), "task", "*", "stat"))
	if err != nil || len(stats) == 0 {
		t.Fatalf("threads of process %d: %v (found %d)", pid, err, len(stats))
	}
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue // the thread ended
		}
		if err != nil {
			t.Fatal(err)
		}
		// The state follows the command name, which is in parentheses and
		// may itself hold spaces or parentheses.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) {
			t.Fatalf("%s: no state in %q", path, b)
		}
		if b[i+2] != 'T' && b[i+2] != 't' { // t: stopped under a tracer
			return false
		}
	}
	return true
}
