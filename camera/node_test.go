package camera

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/zerohop/zerohop/handles"
	"github.com/zerohop/zerohop/handles/transport"
	"github.com/zerohop/zerohop/internal/childproc/childproctest"
	"github.com/zerohop/zerohop/internal/sockdir"
	"github.com/zerohop/zerohop/ros2"
)

// The test binary doubles as the camera process and as a subscriber
// process, chosen by environment, so that every test here crosses a real
// process boundary.
const (
	envRole    = "ZEROHOP_CAMERA_TEST_ROLE"
	envSocket  = "ZEROHOP_CAMERA_TEST_SOCKET"
	envMetrics = "ZEROHOP_CAMERA_TEST_METRICS"
)

func TestMain(m *testing.M) {
	switch os.Getenv(envRole) {
	case "camera":
		err := RunNode(signalContext(), NodeConfig{
			Source: "synthetic", Rate: 100, Beams: 16, AzimuthSteps: 360, ImageWidth: 160, ImageHeight: 90,
			Socket: os.Getenv(envSocket), AllowGID: -1, Checksum: true, MetricsAddr: os.Getenv(envMetrics),
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	case "holder":
		os.Exit(runHolder())
	}
	os.Exit(m.Run())
}

func signalContext() context.Context {
	ctx, _ := signalNotify()
	return ctx
}

// runHolder subscribes and never releases: it reports each lease it holds
// on stdout until killed.
func runHolder() int {
	sub, err := transport.NewSubscriber(transport.SubscriberConfig{
		Path: os.Getenv(envSocket), Name: "holder", Topics: []string{PointsTopicName, ImageTopicName}, Depth: 4,
		OnLease: func(l transport.Lease) { fmt.Printf("holding %d\n", l.Handle.Seq) },
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	sub.Run(context.Background())
	return 0
}

type cameraProc struct {
	cmd     *exec.Cmd
	socket  string
	metrics string
}

func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func startCamera(t *testing.T, socket, metrics string) *cameraProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envRole+"=camera", envSocket+"="+socket, envMetrics+"="+metrics)
	cmd.Stderr = io.Discard
	if testing.Verbose() {
		cmd.Stderr = os.Stderr
	}
	childproctest.LockForPdeathsig(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &cameraProc{cmd: cmd, socket: socket, metrics: metrics}
	t.Cleanup(func() { c.stop() })
	// Ready when the metrics endpoint answers.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := c.metric("zerohop_camera_subscribers"); err == nil {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatal("camera process did not come up")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (c *cameraProc) stop() {
	if c.cmd.ProcessState == nil {
		c.cmd.Process.Signal(syscall.SIGTERM)
		c.cmd.Wait()
	}
}

// metric reads one metric from the camera: name{labels} exactly as
// exposed, or a bare name summed over its label sets.
func (c *cameraProc) metric(name string) (float64, error) {
	resp, err := http.Get("http://" + c.metrics + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	pattern := `^` + name + `(\{[^}]*\})? (\S+)$`
	if strings.Contains(name, "{") {
		pattern = `^` + regexp.QuoteMeta(name) + `() (\S+)$`
	}
	re := regexp.MustCompile(pattern)
	sum, found := 0.0, false
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			v, err := strconv.ParseFloat(m[2], 64)
			if err != nil {
				return 0, err
			}
			sum += v
			found = true
		}
	}
	if !found {
		return 0, fmt.Errorf("metric %s not found", name)
	}
	return sum, nil
}

func (c *cameraProc) waitMetric(t *testing.T, name string, want float64, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		v, err := c.metric(name)
		if err == nil && v == want {
			return time.Since(start)
		}
		if time.Since(start) > within {
			t.Fatalf("%s = %v (err %v) after %v, want %v", name, v, err, within, want)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func subscribe(t *testing.T, socket string, onLease func(transport.Lease)) (*transport.Subscriber, func()) {
	t.Helper()
	sub, err := transport.NewSubscriber(transport.SubscriberConfig{
		Path: socket, Name: "test", Topics: []string{PointsTopicName, ImageTopicName},
		MinBackoff: 5 * time.Millisecond, MaxBackoff: 50 * time.Millisecond, OnLease: onLease,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { sub.Run(ctx); close(done) }()
	stop := func() { cancel(); <-done }
	t.Cleanup(stop)
	return sub, stop
}

func socketPath(t *testing.T) string { return filepath.Join(sockdir.Short(t), "zh", "camera.sock") }

func TestTwoProcessesIntegritySequenceNoLeak(t *testing.T) {
	cam := startCamera(t, socketPath(t), freeAddr(t))
	type check struct {
		seq   uint64
		topic int
		err   string
	}
	results := make(chan check, 1024)
	validator, _ := handles.NewValidator()
	sub, stopSub := subscribe(t, cam.socket, func(l transport.Lease) {
		c := check{seq: l.Handle.Seq, topic: l.Topic}
		if err := validator.VerifyPayload(&l.Handle, l.Bytes()); err != nil {
			c.err = err.Error()
		}
		l.Release()
		select {
		case results <- c:
		default:
		}
	})
	last := [2]uint64{}
	seen := [2]int{}
	missing := 0.0
	deadline := time.After(20 * time.Second)
	for seen[0] < 60 || seen[1] < 60 {
		select {
		case c := <-results:
			if c.err != "" {
				t.Fatalf("frame %d topic %d: %s", c.seq, c.topic, c.err)
			}
			if seen[c.topic] > 0 {
				if c.seq <= last[c.topic] {
					t.Fatalf("topic %d: frame %d after %d: out of order", c.topic, c.seq, last[c.topic])
				}
				missing += float64(c.seq - last[c.topic] - 1)
			}
			last[c.topic] = c.seq
			seen[c.topic]++
		case <-deadline:
			t.Fatalf("only %v frames in 20 s", seen)
		}
	}
	if st := sub.Stats(); st.Invalid != 0 {
		t.Fatalf("subscriber saw %d invalid handles", st.Invalid)
	}
	// Nothing is lost silently: every frame this subscriber missed is one
	// the camera counted as a drop for it (on a loaded machine a starved
	// subscriber hits its in-flight limit; that is allowed, not silent).
	drops, err1 := cam.metric("zerohop_camera_subscriber_drops_total")
	sendDrops, err2 := cam.metric("zerohop_camera_send_drops_total")
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	if missing > drops+sendDrops {
		t.Fatalf("subscriber missed %v frames, camera counted %v drops", missing, drops+sendDrops)
	}
	t.Logf("received %v frames, missed %v, camera drops %v", seen, missing, drops+sendDrops)
	if rejected, _ := cam.metric("zerohop_camera_rejected_releases_total"); rejected != 0 {
		t.Fatalf("camera rejected %v releases", rejected)
	}
	// No leaked slot: once the subscriber leaves, every slot is free.
	stopSub()
	cam.waitMetric(t, "zerohop_camera_pool_in_use", 0, time.Second)
}

func TestSubscriberKilledWhileHoldingLeases(t *testing.T) {
	cam := startCamera(t, socketPath(t), freeAddr(t))
	holder := exec.Command(os.Args[0], "-test.run=^$")
	holder.Env = append(os.Environ(), envRole+"=holder", envSocket+"="+cam.socket)
	childproctest.LockForPdeathsig(holder)
	out, err := holder.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer holder.Process.Kill()
	// Wait until it holds leases (it never releases).
	sc := bufio.NewScanner(out)
	for held := 0; held < 6 && sc.Scan(); {
		if strings.HasPrefix(sc.Text(), "holding") {
			held++
		}
	}
	go io.Copy(io.Discard, out)
	inUse, _ := cam.metric("zerohop_camera_pool_in_use")
	if inUse < 2 {
		t.Fatalf("pool in use = %v while the holder holds leases", inUse)
	}
	// The camera's rate just before the kill, on this machine under this
	// load, is the yardstick for its rate through the kill.
	rate := func(from float64, since time.Time) float64 {
		now, _ := cam.metric("zerohop_camera_published_total")
		return (now - from) / 2 / time.Since(since).Seconds()
	}
	p0, _ := cam.metric("zerohop_camera_published_total")
	t0 := time.Now()
	time.Sleep(300 * time.Millisecond)
	rateBefore := rate(p0, t0)
	before, _ := cam.metric("zerohop_camera_published_total")
	start := time.Now()
	holder.Process.Signal(syscall.SIGKILL)
	holder.Wait()
	took := cam.waitMetric(t, "zerohop_camera_pool_in_use", 0, time.Second)
	if took > 100*time.Millisecond {
		t.Fatalf("slots reclaimed %v after SIGKILL, want ≤ 100 ms", took)
	}
	// The camera kept its rate through all of it.
	time.Sleep(300 * time.Millisecond)
	if r := rate(before, start); r < 0.7*rateBefore {
		t.Fatalf("camera published at %.0f Hz around the kill, %.0f Hz before it", r, rateBefore)
	}
	t.Logf("slots reclaimed %v after SIGKILL", took)
}

func TestCameraRestartSubscriberResumes(t *testing.T) {
	socket, metrics := socketPath(t), freeAddr(t)
	cam := startCamera(t, socket, metrics)
	got := make(chan uint64, 64)
	sub, _ := subscribe(t, socket, func(l transport.Lease) {
		l.Release()
		select {
		case got <- l.Handle.Seq:
		default:
		}
	})
	waitFrames := func(n int) {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for i := 0; i < n; i++ {
			select {
			case <-got:
			case <-deadline:
				t.Fatalf("no frames: connected=%v", sub.Connected())
			}
		}
	}
	waitFrames(5)
	cam.stop()
	startCamera(t, socket, metrics)
	// Drain what arrived before the restart, then require new frames.
	for len(got) > 0 {
		<-got
	}
	waitFrames(5)
	if c := sub.Stats().Connects; c < 2 {
		t.Fatalf("connects = %d, want ≥ 2", c)
	}
}

// TestRunNodeRefusesBadStartupValues: each names its flag.
func TestRunNodeRefusesBadStartupValues(t *testing.T) {
	dir := t.TempDir()
	long := filepath.Join(dir, strings.Repeat("s", 120), "camera.sock")
	missing, file := filepath.Join(dir, "missing"), filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	for _, tc := range []struct {
		name string
		cfg  NodeConfig
		want []string
	}{
		// ":PORT" listened on every interface, unlike the agent's --http.
		{"metrics address without a host", NodeConfig{Socket: filepath.Join(dir, "a.sock"), MetricsAddr: ":0"}, []string{"--metrics", "all interfaces"}},
		{"socket path longer than sun_path", NodeConfig{Socket: long}, []string{"at most 107"}},
		{"unknown source", NodeConfig{Source: "bogus", Socket: filepath.Join(dir, "b.sock")}, []string{`--source "bogus"`}},
		{"replay without a folder", NodeConfig{Source: "replay:", Socket: filepath.Join(dir, "c.sock")}, []string{"--source replay:DIR needs a directory"}},
		{"replay of a missing folder", NodeConfig{Source: "replay:" + missing, Socket: filepath.Join(dir, "d.sock")}, []string{"--source", missing, "no such file"}},
		{"replay of a file", NodeConfig{Source: "replay:" + file, Socket: filepath.Join(dir, "e.sock")}, []string{"--source", file, "not a directory"}},
		// Checked before the source, which a replay reads into memory first.
		{"unknown transport", NodeConfig{Source: "replay:" + missing, Transport: "udp", Socket: filepath.Join(dir, "f.sock")}, []string{`--transport "udp"`}},
		{"rate out of range", NodeConfig{Source: "replay:" + missing, Rate: 20000, Socket: filepath.Join(dir, "g.sock")}, []string{"--rate", "20000 Hz"}},
		{"taken metrics port", NodeConfig{Source: "replay:" + missing, MetricsAddr: taken.Addr().String(), Socket: filepath.Join(dir, "h.sock")}, []string{"--metrics", taken.Addr().String()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			tc.cfg.Beams, tc.cfg.AzimuthSteps, tc.cfg.ImageWidth, tc.cfg.ImageHeight = 4, 36, 32, 16
			err := RunNode(ctx, tc.cfg)
			for _, w := range tc.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("RunNode: %v, want an error saying %q", err, w)
				}
			}
		})
	}
}

// TestRunNodeEndsWhenItsServerFails: a listener that breaks (here: shut
// down behind the server's back, so accept fails with EINVAL) ends
// RunNode with the server's error. The camera used to go on rendering
// with no socket, unreachable and "ok" on /healthz, until stopped.
func TestRunNodeEndsWhenItsServerFails(t *testing.T) {
	sock := socketPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- RunNode(ctx, NodeConfig{Socket: sock, Beams: 4, AzimuthSteps: 36, ImageWidth: 32, ImageHeight: 16, Rate: 30})
	}()
	var lfd int
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if fd, ok := listeningFD(t, sock); ok {
			lfd = fd
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the camera's listening socket did not show up")
		}
	}
	if err := unix.Shutdown(lfd, unix.SHUT_RDWR); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "accept") {
			t.Fatalf("RunNode = %v, want the accept error", err)
		}
		if ctx.Err() != nil {
			t.Fatal("RunNode ended only with its context")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("RunNode still running 5 s after its server failed")
	}
}

// listeningFD finds this process's fd of the unix socket bound at path
// (/proc/net/unix names the inode, /proc/self/fd links to it).
func listeningFD(t *testing.T, path string) (int, bool) {
	t.Helper()
	table, err := os.ReadFile("/proc/net/unix")
	if err != nil {
		t.Fatal(err)
	}
	var inode string
	for _, line := range strings.Split(string(table), "\n") {
		if f := strings.Fields(line); len(f) >= 8 && f[len(f)-1] == path {
			inode = f[6]
		}
	}
	if inode == "" {
		return 0, false
	}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range fds {
		if link, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && link == "socket:["+inode+"]" {
			fd, _ := strconv.Atoi(e.Name())
			return fd, true
		}
	}
	return 0, false
}

// TestRunROS2NodeRefusesAMirrorOnItsInput: a mirror on a topic the camera
// reads would feed the camera its own frames without end (its reader is
// the mirror's matched subscriber); refused before anything opens. Names
// are compared as resolved against the node: "points" in /robot1 is
// /robot1/points, not /points.
func TestRunROS2NodeRefusesAMirrorOnItsInput(t *testing.T) {
	robot1 := ros2.Config{NodeName: "cam", Namespace: "/robot1"}
	for _, rc := range []ROS2NodeConfig{
		{PointsTopics: []string{"/points"}, PointsMirrorTopic: "points"},
		{PointsTopics: []string{"/points"}, ImageTopic: "/image_raw", ImageMirrorTopic: "/image_raw"},
		{ImageTopic: "/camera/image", PointsMirrorTopic: "/camera/image"},
		{DDS: robot1, PointsTopics: []string{"/robot1/points"}, PointsMirrorTopic: "points"},
		{DDS: robot1, PointsTopics: []string{"points"}, PointsMirrorTopic: "/robot1/points"},
		{DDS: robot1, ImageTopic: "~/image", ImageMirrorTopic: "/robot1/cam/image"},
		{DDS: robot1, ImageTopic: "{node}/image", PointsMirrorTopic: "~/image"},
	} {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second) // a node that starts ends by then
		err := RunROS2Node(ctx, NodeConfig{Socket: filepath.Join(t.TempDir(), "c.sock"), MetricsAddr: ""}, rc)
		cancel()
		if err == nil || !strings.Contains(err.Error(), "mirror-topic") || !strings.Contains(err.Error(), "its own mirror") {
			t.Errorf("%+v: %v, want the mirror refused", rc, err)
		}
	}
	// The same names in different namespaces are different topics: these
	// get past the check, to fail on the --metrics address (":PORT" is
	// refused) before the node joins DDS.
	for _, rc := range []ROS2NodeConfig{
		{DDS: robot1, PointsTopics: []string{"/points"}, PointsMirrorTopic: "points"},
		{DDS: robot1, ImageTopic: "image", ImageMirrorTopic: "~/image"},
	} {
		rc.MaxPoints, rc.MaxImageBytes = 16, 64
		err := RunROS2Node(t.Context(), NodeConfig{Socket: filepath.Join(t.TempDir(), "c.sock"), MetricsAddr: ":1"}, rc)
		if err == nil || !strings.Contains(err.Error(), "--metrics") {
			t.Errorf("%+v: %v, want the mirror allowed (and the --metrics address refused)", rc, err)
		}
	}
	// A topic ROS would reject is refused, naming the flag.
	err := RunROS2Node(t.Context(), NodeConfig{Socket: filepath.Join(t.TempDir(), "c.sock")},
		ROS2NodeConfig{DDS: robot1, PointsTopics: []string{"points"}, ImageMirrorTopic: "~image"})
	if err == nil || !strings.Contains(err.Error(), "--ros2-image-mirror-topic") || !strings.Contains(err.Error(), `"~image"`) {
		t.Errorf("mirror topic ~image: %v, want it refused naming the flag", err)
	}
}

// TestRunNodeWithoutImages: a LiDAR-only camera (NoImage: --image-size
// none) serves the points topic over its socket; a subscriber asking for
// points alone gets valid clouds, and one that also asks for images (an
// agent that needs them) is refused, told that this camera has no image
// stream and what to do.
func TestRunNodeWithoutImages(t *testing.T) {
	sock := socketPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- RunNode(ctx, NodeConfig{Socket: sock, AllowGID: -1, Source: "synthetic", NoImage: true,
			Beams: 4, AzimuthSteps: 36, Rate: 100, Checksum: true})
	}()
	stopNode := func() {
		t.Helper()
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("RunNode: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("RunNode still running 5 s after its context ended")
		}
	}
	defer func() {
		if ctx.Err() == nil {
			stopNode()
		}
	}()

	for _, tc := range []struct {
		name   string
		topics []string
		// refused: the refusal must say each of these; nil: clouds arrive.
		refused []string
	}{
		{"points only", []string{PointsTopicName}, nil},
		{"points and images", []string{PointsTopicName, ImageTopicName},
			[]string{`"image"`, "no image stream", "give the camera images", "--lidar-only"}},
		{"images only", []string{ImageTopicName}, []string{"no image stream", "--lidar-only"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			validator, _ := handles.NewValidator()
			got := make(chan error, 64)
			sub, err := transport.NewSubscriber(transport.SubscriberConfig{
				Path: sock, Name: "test", Topics: tc.topics, MinBackoff: 5 * time.Millisecond, MaxBackoff: 50 * time.Millisecond,
				OnLease: func(l transport.Lease) {
					err := validator.VerifyPayload(&l.Handle, l.Bytes())
					if err == nil && (l.Topic != 0 || l.Handle.Kind != handles.KindPoints || l.Handle.Points.Count == 0) {
						err = fmt.Errorf("topic %d kind %v with %d points, want clouds on topic 0", l.Topic, l.Handle.Kind, l.Handle.Points.Count)
					}
					l.Release()
					select {
					case got <- err:
					default:
					}
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			subCtx, subCancel := context.WithTimeout(ctx, 10*time.Second)
			defer subCancel()
			runErr := make(chan error, 1)
			go func() { runErr <- sub.Run(subCtx) }()
			if tc.refused != nil {
				err := <-runErr // ErrRefused at once, or subCtx's end
				if !errors.Is(err, transport.ErrRefused) {
					t.Fatalf("Run = %v, want ErrRefused", err)
				}
				for _, w := range tc.refused {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("refusal %q does not say %q", err, w)
					}
				}
				return
			}
			for n := 0; n < 10; n++ {
				select {
				case err := <-got:
					if err != nil {
						t.Fatal(err)
					}
				case err := <-runErr:
					t.Fatalf("subscriber ended after %d clouds: %v", n, err)
				case <-subCtx.Done():
					t.Fatalf("only %d clouds in 10 s (connected %t)", n, sub.Connected())
				}
			}
			subCancel()
			<-runErr
		})
	}
	stopNode()
}
