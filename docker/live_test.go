package docker

// Running compose services as local processes, for TestBinaries: named
// volumes become temporary folders shared by the services that mount them,
// bind mounts their host paths, loopback addresses free ports. What this
// cannot reproduce (the image's files, users, GPUs) the other tests check
// statically.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// ortAvailable reports whether the agent will find an ONNX Runtime
// library when started in root: $ZEROHOP_ORT_LIB or the fetch cache.
func ortAvailable(root string) bool {
	if p := os.Getenv("ZEROHOP_ORT_LIB"); p != "" {
		_, err := os.Stat(p)
		return err == nil
	}
	m, _ := filepath.Glob(filepath.Join(root, ".cache", "ort", "*", "libonnxruntime.so.1"))
	return len(m) > 0
}

// liveEnv runs compose services as local processes: named volumes become
// temporary folders (shared by the services that mount them), bind mounts
// their host paths, loopback addresses free ports.
type liveEnv struct {
	p       *project
	base    string
	volumes map[string]string
	addrs   map[string]string // compose address → local address
}

func newLiveEnv(t *testing.T, p *project) *liveEnv {
	// A short base path: the socket path must fit in sun_path (108 bytes).
	base, err := os.MkdirTemp("", "zh-docker-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	return &liveEnv{p: p, base: base, volumes: map[string]string{}, addrs: map[string]string{}}
}

func (e *liveEnv) volumeDir(t *testing.T, name string) string {
	if d, ok := e.volumes[name]; ok {
		return d
	}
	d := filepath.Join(e.base, strconv.Itoa(len(e.volumes)))
	mode := os.FileMode(0o755)
	if m, err := strconv.ParseUint(mountOptions(e.p.compose.Volumes[name])["mode"], 8, 32); err == nil {
		mode = os.FileMode(m)
	}
	if err := os.Mkdir(d, mode); err != nil {
		t.Fatal(err)
	}
	e.volumes[name] = d
	return d
}

// hostPath maps a path inside service s to the local file system.
func (e *liveEnv) hostPath(t *testing.T, s *service, p string) (string, bool) {
	p = path.Clean(p)
	m := mountUnder(s, p)
	if m == nil || m.Source == "" {
		return p, false
	}
	base := e.p.hostPath(m.Source)
	if m.Type != "bind" {
		base = e.volumeDir(t, m.Source)
	}
	return filepath.Join(base, filepath.FromSlash(strings.TrimPrefix(p, path.Clean(m.Target)))), true
}

func (e *liveEnv) address(t *testing.T, v string) (string, bool) {
	host, port, err := net.SplitHostPort(v)
	if err != nil || !isLoopback(host) {
		return "", false
	}
	if _, err := strconv.Atoi(port); err != nil {
		return "", false
	}
	if a, ok := e.addrs[v]; ok {
		return a, true
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := l.Addr().String()
	l.Close()
	e.addrs[v] = a
	return a, true
}

func (e *liveEnv) translate(t *testing.T, s *service, v string) string {
	if a, ok := e.address(t, v); ok {
		return a
	}
	if rest, ok := strings.CutPrefix(v, "file://"); ok {
		if h, ok := e.hostPath(t, s, rest); ok {
			return "file://" + h
		}
	}
	if path.IsAbs(v) {
		if h, ok := e.hostPath(t, s, v); ok {
			return h
		}
	}
	return v
}

// proc is a running binary and its output.
type proc struct {
	name   string
	cmd    *exec.Cmd
	out    *syncBuffer
	done   chan struct{}
	health string // the healthcheck URL, local address
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// start runs the service that runs bin with its compose command and
// environment, translated to this machine.
func (e *liveEnv) start(t *testing.T, bin string, b builtBinaries) *proc {
	name, s, inv, err := e.p.invocation(bin)
	if err != nil {
		t.Fatal(err)
	}
	fs := e.p.flags[bin]
	order := slices.Clone(inv.Order)
	values := map[string]string{}
	for k, v := range inv.Values {
		values[k] = v
	}
	// The healthcheck address must be remapped even when compose leaves it
	// to the default.
	if _, ok := values[healthFlag[bin]]; !ok {
		if v, ok := inv.value(healthFlag[bin], fs); ok {
			values[healthFlag[bin]] = v
			order = append(order, healthFlag[bin])
		}
	}
	var args []string
	for _, f := range order {
		v := values[f]
		if f == "mlock" && !canMlock() {
			t.Logf("service %s: dropping --mlock: this process may not lock memory (RLIMIT_MEMLOCK); the container gets memlock -1", name)
			continue
		}
		if !fs[f].Bool {
			v = e.translate(t, s, v)
		}
		args = append(args, "--"+f+"="+v)
	}
	for _, sec := range inv.ROSArgs {
		args = append(append(args, "--ros-args"), sec...)
	}
	env := []string{}
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "ROS_") || k == "CYCLONEDDS_URI" {
			continue
		}
		env = append(env, kv)
	}
	for _, k := range sortedKeys(s.Environment) {
		v := e.translate(t, s, s.Environment[k])
		switch k {
		case "ROS_DOMAIN_ID":
			// A domain (200..232) and a discovery tag of this test run
			// only: other tests of the repository use 100..199.
			v = strconv.Itoa(200 + os.Getpid()%33)
		case "CYCLONEDDS_URI":
			v += ",<CycloneDDS><Domain><Discovery><Tag>zerohop-docker-test-" + strconv.Itoa(os.Getpid()) + "</Tag></Discovery></Domain></CycloneDDS>"
		}
		env = append(env, k+"="+v)
	}
	u, err := healthURL(s.Healthcheck)
	if err != nil {
		t.Fatal(err)
	}
	listen := values[healthFlag[bin]]
	local, ok := e.addrs[listen]
	if !ok {
		t.Fatalf("service %s: --%s=%s was not remapped", name, healthFlag[bin], listen)
	}
	u.Host = local

	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, filepath.Join(b.dir, bin), args...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	cmd.Dir = e.p.root
	cmd.Env = env
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	t.Logf("service %s: %s %s", name, bin, strings.Join(args, " "))
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	pr := &proc{name: name, cmd: cmd, out: out, done: make(chan struct{}), health: u.String()}
	go func() {
		cmd.Wait()
		close(pr.done)
	}()
	t.Cleanup(func() {
		cancel()
		<-pr.done
		if t.Failed() {
			t.Logf("service %s output:\n%s", name, out.String())
		}
	})
	return pr
}

// waitHealthy polls the healthcheck URL until it answers 200.
func (p *proc) waitHealthy(t *testing.T, timeout time.Duration) {
	t.Helper()
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(timeout)
	last := "no answer"
	for time.Now().Before(deadline) {
		if p.exited() {
			t.Fatalf("service %s exited before it was healthy (%s):\n%s", p.name, p.cmd.ProcessState, p.out.String())
		}
		resp, err := client.Get(p.health)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			last = fmt.Sprintf("%d %s", resp.StatusCode, bytes.TrimSpace(body))
		} else {
			last = err.Error()
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("service %s: %s did not answer 200 within %v (last: %s):\n%s", p.name, p.health, timeout, last, p.out.String())
}

// canMlock reports whether this process may lock the camera's pools:
// CAP_IPC_LOCK (not root as such: a container's root often lacks it), or
// a memlock limit that holds them.
func canMlock() bool {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &rl); err != nil {
		return false
	}
	return hasIPCLock() || rl.Cur == unix.RLIM_INFINITY || rl.Cur >= minMemlock
}

// hasIPCLock reports whether CAP_IPC_LOCK is in this process's effective
// capabilities (/proc/self/status CapEff).
func hasIPCLock() bool {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && caps&(1<<unix.CAP_IPC_LOCK) != 0
		}
	}
	return false
}

// syncBuffer is a bytes.Buffer safe for the process's writers and the
// test's readers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
