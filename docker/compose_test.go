package docker

// What can be checked of docker/ without a Docker engine.
//
//   - TestCompose, TestDockerfiles, TestJetsonOverride, TestROS2Override:
//     the real files, with the binaries' flags read from their source;
//     TestComposeVariablesDocumented: docker/README.md names every
//     variable the compose files read.
//   - TestChecksFire: every check fails on a deliberately broken input.
//   - TestBinaries: builds camera and agent (-tags ros2 where libddsc is
//     installed; required when ZEROHOP_REQUIRE_ROS2=1), checks every
//     compose flag (compose.ros2.yaml's too) against their --help, then runs the compose commands
//     outside Docker, volumes mapped to temporary folders and ports to free
//     ones, and fetches the healthcheck URLs from the running binaries.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zerohop/zerohop/agent"
	"github.com/zerohop/zerohop/ros2"
	"github.com/zerohop/zerohop/telemetry"
)

type namedCheck struct {
	name  string
	check func(*project) error
}

func composeChecks() []namedCheck {
	return []namedCheck{
		{"commands run zerohop binaries with flags they accept", checkCommands},
		{"no ipc: host, pid: host or privileged", checkNoHostSharing},
		{"services run as a non-root uid:gid", checkUsers},
		{"camera and agent share the socket path and its volume", checkSocketShared},
		{"the camera admits the agent (same uid, or shared gid with --allow-gid)", checkSocketPeers},
		{"volumes with an owner let their services in", checkVolumeOwners},
		{"healthchecks fetch the binaries' loopback addresses with curl --fail", checkHealthchecks},
		{"the agent reserves NVIDIA GPUs", checkGPU},
		{"the agent is on the host network", checkHostNetwork},
		{"services restart", checkRestart},
		{"ROS 2 settings come from the environment and a mounted cyclonedds.xml", checkROSConfig},
		{"--mlock has a memlock ulimit", checkMemlock},
		{"the TensorRT cache is on a writable volume", checkWritablePaths},
		{"images are built, not pulled, and build inputs exist", checkImages},
		{"bind mount sources exist", checkBindSources},
		{"the camera's ROS 2 flags come with --source ros2", checkCameraSource},
	}
}

func repoRoot(t testing.TB) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("repository root %s: %v", root, err)
	}
	return root
}

// sourceFlagSets reads the binaries' flags from cmd/*/*.go, for the tests
// that do not build them.
func sourceFlagSets(t testing.TB, root string) map[string]flagSet {
	t.Helper()
	out := map[string]flagSet{}
	for bin, files := range map[string][]string{
		cameraBinary: {"cmd/camera/main.go", "cmd/camera/ros2_on.go"},
		agentBinary:  {"cmd/agent/main.go", "cmd/agent/ros2_on.go"},
	} {
		var sets []flagSet
		for _, f := range files {
			fs, err := sourceFlags(filepath.Join(root, f))
			if err != nil {
				t.Fatal(err)
			}
			sets = append(sets, fs)
		}
		if bin == agentBinary {
			sets = append(sets, plannerFlags())
		}
		out[bin] = mergeFlags(sets...)
	}
	return out
}

// plannerFlags are the agent's flags registered from agent's table of
// planner settings, which no fs.XxxVar line in cmd/agent names.
func plannerFlags() flagSet {
	fs := flagSet{}
	for _, s := range agent.PlannerSettings() {
		fs[s.Flag()] = flagSpec{Name: s.Flag(), Bool: s.Bool}
	}
	return fs
}

func loadProject(t testing.TB, root string, flags map[string]flagSet) *project {
	t.Helper()
	dir := filepath.Join(root, "docker")
	c, err := loadCompose(filepath.Join(dir, "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return &project{root: root, dir: dir, compose: c, flags: flags}
}

func TestCompose(t *testing.T) {
	root := repoRoot(t)
	p := loadProject(t, root, sourceFlagSets(t, root))
	for _, c := range composeChecks() {
		t.Run(c.name, func(t *testing.T) {
			if err := c.check(p); err != nil {
				t.Error(err)
			}
		})
	}
}

func goTool(t testing.TB) string {
	t.Helper()
	g, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list the build's inputs: %v", err)
	}
	return g
}

// goBuildInputs lists the repository files the Go build of the binaries
// reads (Go, cgo and embedded files of the module's packages), relative to
// root, with go.mod and go.sum.
func goBuildInputs(t testing.TB, root string) []string {
	t.Helper()
	cmd := exec.Command(goTool(t), "list", "-tags", "ros2", "-deps", "-json", "./cmd/camera", "./cmd/agent")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", errOutput(err))
	}
	files := []string{"go.mod", "go.sum"}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var pkg struct {
			Dir                                           string
			Module                                        *struct{ Path string }
			GoFiles, CgoFiles, CFiles, HFiles, EmbedFiles []string
		}
		if err := dec.Decode(&pkg); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		if pkg.Module == nil || pkg.Module.Path != "github.com/zerohop/zerohop" {
			continue
		}
		rel, err := filepath.Rel(root, pkg.Dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range [][]string{pkg.GoFiles, pkg.CgoFiles, pkg.CFiles, pkg.HFiles, pkg.EmbedFiles} {
			for _, f := range l {
				files = append(files, filepath.ToSlash(filepath.Join(rel, f)))
			}
		}
	}
	if len(files) < 10 {
		t.Fatalf("go list found only %v", files)
	}
	return files
}

var ortAPIRe = regexp.MustCompile(`(?m)^#define ORT_API_VERSION (\d+)`)

// ortAPIVersion is the ONNX Runtime C API version onnxruntime_go asks for
// (its onnxruntime_c_api.h).
func ortAPIVersion(t testing.TB, root string) int {
	t.Helper()
	cmd := exec.Command(goTool(t), "list", "-m", "-f", "{{.Path}}@{{.Version}}", "github.com/yalue/onnxruntime_go")
	cmd.Dir = root
	mod, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -m: %v", errOutput(err))
	}
	cmd = exec.Command(goTool(t), "mod", "download", "-json", strings.TrimSpace(string(mod)))
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go mod download %s: %v", mod, errOutput(err))
	}
	var info struct{ Dir string }
	if err := json.Unmarshal(out, &info); err != nil || info.Dir == "" {
		t.Fatalf("go mod download %s: no folder in %s", mod, out)
	}
	h, err := os.ReadFile(filepath.Join(info.Dir, "onnxruntime_c_api.h"))
	if err != nil {
		t.Fatal(err)
	}
	m := ortAPIRe.FindSubmatch(h)
	if m == nil {
		t.Fatalf("%s: no ORT_API_VERSION", info.Dir)
	}
	v, _ := strconv.Atoi(string(m[1]))
	return v
}

func errOutput(err error) error {
	var ee *exec.ExitError
	if errors.As(err, &ee) && len(ee.Stderr) > 0 {
		return fmt.Errorf("%w: %s", err, ee.Stderr)
	}
	return err
}

func TestDockerfiles(t *testing.T) {
	root := repoRoot(t)
	p := loadProject(t, root, sourceFlagSets(t, root))
	_, cam, camInv, err := p.invocation(cameraBinary)
	if err != nil {
		t.Fatal(err)
	}
	sock, _ := camInv.value("socket", p.flags[cameraBinary])
	_, _, agentInv, err := p.invocation(agentBinary)
	if err != nil {
		t.Fatal(err)
	}
	trtCache, _ := agentInv.value("trt-cache", p.flags[agentBinary])
	var commands [][]string
	for _, name := range sortedKeys(p.compose.Services) {
		commands = append(commands, p.compose.Services[name].Command)
	}
	ignore, err := loadDockerignore(filepath.Join(root, ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	inputs := goBuildInputs(t, root)
	api := ortAPIVersion(t, root)

	for _, tc := range []struct {
		file     string
		platform string // every stage's --platform ("" for none)
		cuda     bool   // GPU packages that must agree on CUDA
	}{
		{file: "Dockerfile", cuda: true},
		{file: "Dockerfile.jetson", platform: "linux/arm64"},
	} {
		df, err := loadDockerfile(filepath.Join(root, "docker", tc.file))
		if err != nil {
			t.Fatal(err)
		}
		checks := []struct {
			name  string
			check func() error
		}{
			{"COPY --from names earlier stages", func() error { return checkStageRefs(df) }},
			{"runs as the compose user, not root", func() error { return checkFinalUser(df, cam.User) }},
			{"CMD and compose commands run binaries built from cmd/", func() error { return checkImageCommand(df, root, commands) }},
			{"binaries built with cgo, -tags ros2 and -trimpath", func() error { return checkGoBuild(df) }},
			{"build context has what the build reads", func() error { return checkContextCopies(df, root, ignore, inputs) }},
			{fmt.Sprintf("ONNX Runtime pinned and serving ORT API %d", api), func() error { return checkPins(df, api) }},
			{"curl installed and ZEROHOP_ORT_LIB copied in", func() error { return checkRuntimeTools(df) }},
			{"socket folder and TensorRT cache owned by the user", func() error {
				return checkImageDirs(df, cam.User, path.Dir(sock), trtCache)
			}},
			{"every stage for the target platform", func() error { return checkPlatform(df, tc.platform) }},
		}
		if tc.cuda {
			checks = append(checks, struct {
				name  string
				check func() error
			}{"CUDA major agrees across image, ONNX Runtime and TensorRT", func() error { return checkCUDAMajor(df) }})
		}
		for _, c := range checks {
			t.Run(tc.file+": "+c.name, func(t *testing.T) {
				if err := c.check(); err != nil {
					t.Error(err)
				}
			})
		}
	}
}

func TestJetsonOverride(t *testing.T) {
	root := repoRoot(t)
	p := loadProject(t, root, sourceFlagSets(t, root))
	data, err := os.ReadFile(filepath.Join(p.dir, "compose.jetson.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := checkOverride(p.compose, data, p.dir); err != nil {
		t.Error(err)
	}
	over, err := parseCompose("compose.jetson.yaml", data, nil)
	if err != nil {
		t.Fatal(err)
	}
	name, _, err := p.serviceOf(agentBinary)
	if err != nil {
		t.Fatal(err)
	}
	if a := over.Services[name]; a == nil || a.Runtime != "nvidia" {
		t.Errorf("compose.jetson.yaml: service %s needs runtime: nvidia (JetPack's container runtime mounts the L4T driver)", name)
	}
	// L4T's GPU device nodes (/dev/nvmap, /dev/nvhost-*) are root:video
	// 0660, and an explicit `user: uid:gid` gets no supplementary groups
	// from the image's /etc/group (docker/cli#3058): without the group,
	// cuInit finds no device and the agent runs on the CPU.
	if a := over.Services[name]; a == nil || !slices.Contains(a.GroupAdd, "video") {
		t.Errorf("compose.jetson.yaml: service %s needs group_add: [video] to open L4T's GPU device nodes", name)
	}
	// JetPack 6 is Ubuntu 22.04: the host's ROS 2 is Humble, whose graph
	// GIDs are 24 bytes (Jazzy's 16 would hide our nodes from its
	// `ros2 node list`) and whose discovery reads only ROS_LOCALHOST_ONLY:
	// compose.yaml's discovery range would draw a warning at every start.
	for _, bin := range []string{cameraBinary, agentBinary} {
		name, _, err := p.serviceOf(bin)
		if err != nil {
			t.Fatal(err)
		}
		s := over.Services[name]
		if s == nil || s.Environment["ROS_DISTRO"] != "humble" {
			t.Errorf("compose.jetson.yaml: service %s needs ROS_DISTRO defaulting to humble (JetPack 6's ROS 2)", name)
			continue
		}
		if r, ok := s.Environment["ROS_AUTOMATIC_DISCOVERY_RANGE"]; !ok || r != "" {
			t.Errorf("compose.jetson.yaml: service %s: ROS_AUTOMATIC_DISCOVERY_RANGE defaults to %q (set: %v); Humble ignores it and the nodes would warn: want it empty", name, r, ok)
		}
	}
	images := map[string]bool{}
	for _, s := range over.Services {
		images[s.Image] = true
		if s.Platform != "linux/arm64" {
			t.Errorf("compose.jetson.yaml: platform %q, want linux/arm64", s.Platform)
		}
	}
	if len(images) != 1 {
		t.Errorf("compose.jetson.yaml: services use images %v, want one", sortedKeys(images))
	}
}

// namedProject is a merged stack of compose files.
type namedProject struct {
	name string
	p    *project
}

// ros2Stacks merges the file combinations docker/README.md gives for ROS 2
// drivers as input: compose.yaml + compose.ros2.yaml, and with
// compose.jetson.yaml between them. env is the environment Compose would
// read (nil: every variable takes its default).
func ros2Stacks(t testing.TB, p *project, env map[string]string) []namedProject {
	t.Helper()
	baseData, err := os.ReadFile(filepath.Join(p.dir, "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var out []namedProject
	for _, files := range [][]string{{"compose.ros2.yaml"}, {"compose.jetson.yaml", "compose.ros2.yaml"}} {
		c, err := parseCompose("compose.yaml", baseData, env)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			data, err := os.ReadFile(filepath.Join(p.dir, f))
			if err != nil {
				t.Fatal(err)
			}
			if c, err = mergeCompose(c, f, data, env); err != nil {
				t.Fatal(err)
			}
		}
		name := strings.Join(append([]string{"compose.yaml"}, files...), " + ")
		out = append(out, namedProject{name, &project{root: p.root, dir: p.dir, compose: c, flags: p.flags}})
	}
	return out
}

func TestROS2Override(t *testing.T) {
	root := repoRoot(t)
	p := loadProject(t, root, sourceFlagSets(t, root))
	baseData, err := os.ReadFile(filepath.Join(p.dir, "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(p.dir, "compose.ros2.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	t.Run("compose.ros2.yaml: compose.yaml's camera command with --source=ros2 and ROS 2 flags, the agent's namespace", func(t *testing.T) {
		if err := checkROS2Override(p, baseData, data); err != nil {
			t.Error(err)
		}
	})
	// The merged files keep everything the base file's checks enforce.
	for _, st := range ros2Stacks(t, p, nil) {
		for _, c := range composeChecks() {
			t.Run(st.name+": "+c.name, func(t *testing.T) {
				if err := c.check(st.p); err != nil {
					t.Error(err)
				}
			})
		}
	}
	// The variables reach the merged commands: the namespace both nodes',
	// and ZEROHOP_SOURCE none (a .env made for compose.yaml alone must not
	// turn the ROS 2 flags into the camera's refusal).
	env := map[string]string{"ZEROHOP_ROS2_NAMESPACE": "/robot1", "ZEROHOP_SOURCE": "replay:/data"}
	for _, st := range ros2Stacks(t, p, env) {
		t.Run(st.name+": ZEROHOP_ROS2_NAMESPACE reaches both nodes, ZEROHOP_SOURCE neither", func(t *testing.T) {
			for _, bin := range []string{cameraBinary, agentBinary} {
				name, _, inv, err := st.p.invocation(bin)
				if err != nil {
					t.Fatal(err)
				}
				if ns := inv.Values["ros2-namespace"]; ns != "/robot1" {
					t.Errorf("service %s: --ros2-namespace=%q with ZEROHOP_ROS2_NAMESPACE=/robot1", name, ns)
				}
				if bin == cameraBinary && inv.Values["source"] != "ros2" {
					t.Errorf("service %s: --source=%q with ZEROHOP_SOURCE=replay:/data, want ros2", name, inv.Values["source"])
				}
			}
		})
	}
	// Where both nodes read tf, resolved as the binaries resolve it: the
	// absolute /tf and /tf_static unless a namespaced robot's are asked for.
	for _, tc := range []struct {
		env          map[string]string
		tf, tfStatic string
	}{
		{map[string]string{"ZEROHOP_ROS2_NAMESPACE": "/robot1"}, "/tf", "/tf_static"},
		{map[string]string{"ZEROHOP_ROS2_NAMESPACE": "/robot1", "ZEROHOP_TF_TOPIC": "tf", "ZEROHOP_TF_STATIC_TOPIC": "tf_static"}, "/robot1/tf", "/robot1/tf_static"},
		{map[string]string{"ZEROHOP_TF_TOPIC": "/fleet/tf", "ZEROHOP_TF_STATIC_TOPIC": ""}, "/fleet/tf", "/tf_static"},
	} {
		for _, st := range ros2Stacks(t, p, tc.env) {
			t.Run(fmt.Sprintf("%s: tf topics with %v", st.name, tc.env), func(t *testing.T) {
				for _, bin := range []string{cameraBinary, agentBinary} {
					name, _, inv, err := st.p.invocation(bin)
					if err != nil {
						t.Fatal(err)
					}
					cfg := ros2.Config{Namespace: inv.Values["ros2-namespace"], NodeName: "n", Remaps: inv.ROS.Remaps}
					for topic, want := range map[string]string{"/tf": tc.tf, "/tf_static": tc.tfStatic} {
						if got, err := cfg.ResolveTopic(topic); err != nil || got != want {
							t.Errorf("service %s reads %s from %q (%v), want %q", name, topic, got, err, want)
						}
					}
				}
			})
		}
	}
}

var composeVarRe = regexp.MustCompile(`\$\{?([A-Za-z_][A-Za-z0-9_]*)`)

// TestComposeVariablesDocumented: every variable a compose file reads is
// named in docker/README.md.
func TestComposeVariablesDocumented(t *testing.T) {
	root := repoRoot(t)
	readme, err := os.ReadFile(filepath.Join(root, "docker", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"compose.yaml", "compose.jetson.yaml", "compose.ros2.yaml"} {
		data, err := os.ReadFile(filepath.Join(root, "docker", f))
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, line := range strings.Split(string(data), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "#") {
				continue
			}
			for _, m := range composeVarRe.FindAllStringSubmatch(line, -1) {
				if v := m[1]; !seen[v] {
					seen[v] = true
					if !bytes.Contains(readme, []byte("`"+v+"`")) && !bytes.Contains(readme, []byte(v+"=")) {
						t.Errorf("%s reads %s, which docker/README.md does not name", f, v)
					}
				}
			}
		}
	}
}

// ---- negative tests ----

func fixtureFlags(t testing.TB) map[string]flagSet {
	t.Helper()
	out := map[string]flagSet{}
	for _, bin := range []string{cameraBinary, agentBinary} {
		text, err := os.ReadFile(filepath.Join("testdata", bin+".help"))
		if err != nil {
			t.Fatal(err)
		}
		fs, err := parseHelp(string(text))
		if err != nil {
			t.Fatal(err)
		}
		out[bin] = fs
	}
	return out
}

// fixtureRoot lays out what the fixture compose file and Dockerfile refer
// to: docker/, cmd/camera, cmd/agent, ros2/cyclonedds.xml.
func fixtureRoot(t testing.TB) string {
	t.Helper()
	root := t.TempDir()
	for _, d := range []string{"docker", "cmd/camera", "cmd/agent", "ros2"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"ros2/cyclonedds.xml", "docker/Dockerfile", "go.mod"} {
		if err := os.WriteFile(filepath.Join(root, f), []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// mutate returns text with old replaced by new, failing if old is absent
// (a mutation that no longer applies would make its case test nothing).
func mutate(t testing.TB, text, old, new string) string {
	t.Helper()
	if !strings.Contains(text, old) {
		t.Fatalf("fixture has no %q to replace", old)
	}
	return strings.Replace(text, old, new, 1)
}

func TestChecksFire(t *testing.T) {
	validCompose, err := os.ReadFile(filepath.Join("testdata", "compose.valid.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	validDF, err := os.ReadFile(filepath.Join("testdata", "Dockerfile.valid"))
	if err != nil {
		t.Fatal(err)
	}
	flags := fixtureFlags(t)
	root := fixtureRoot(t)
	projectOf := func(t *testing.T, text string) *project {
		t.Helper()
		c, err := parseCompose("fixture", []byte(text), nil)
		if err != nil {
			t.Fatal(err)
		}
		return &project{root: root, dir: filepath.Join(root, "docker"), compose: c, flags: flags}
	}
	checksByName := map[string]func(*project) error{}
	for _, c := range composeChecks() {
		checksByName[c.name] = c.check
	}

	t.Run("the valid compose fixture passes every check", func(t *testing.T) {
		p := projectOf(t, string(validCompose))
		for _, c := range composeChecks() {
			if err := c.check(p); err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
		}
	})

	v := string(validCompose)
	composeCases := []struct {
		name, old, new string
		check          func(*project) error
		want           string // in the error
	}{
		{"a flag the camera does not have", "--mlock]", "--mlock, --no-such-flag]", checkCommands, "--no-such-flag"},
		{"a positional argument", "      - --ros2\n", "      - --ros2\n      - extra\n", checkCommands, "flags only"},
		{"a binary the image does not have", "command: [camera,", "command: [kamera,", checkCommands, "kamera"},
		{"an entrypoint", "command: [camera, --socket=/run/zh/camera.sock, --metrics=127.0.0.1:9091, --mlock]", "entrypoint: [camera]\n    command: [camera, --socket=/run/zh/camera.sock, --metrics=127.0.0.1:9091, --mlock]", checkCommands, "entrypoint"},
		{"ipc: host", "    network_mode: host\n    environment:", "    network_mode: host\n    ipc: host\n    environment:", checkNoHostSharing, "ipc: host"},
		{"privileged", "    restart: always", "    restart: always\n    privileged: true", checkNoHostSharing, "privileged"},
		{"a root user", "user: \"10001:10001\"\n    network_mode: host\n    environment:", "user: \"0:0\"\n    network_mode: host\n    environment:", checkUsers, "root"},
		{"no user", "    user: \"10001:10001\"\n    network_mode: host\n    volumes:", "    network_mode: host\n    volumes:", checkUsers, "no user"},
		{"a user by name", "user: \"10001:10001\"\n    network_mode: host\n    volumes:", "user: zerohop\n    network_mode: host\n    volumes:", checkUsers, "numeric"},
		{"sockets differ", "      - /run/zh/camera.sock", "      - /run/zh/other.sock", checkSocketShared, "dials"},
		{"the socket folder mounted elsewhere", "      - zh-run:/run/zh\n      - type", "      - zh-run:/run/zerohop\n      - type", checkSocketShared, "no volume mounted"},
		{"different volumes for the socket", "      - zh-run:/run/zh\n      - type", "      - zh-run2:/run/zh\n      - type", checkSocketShared, "share one named volume"},
		{"a read-only socket folder for the camera", "      - zh-run:/run/zh\n    ulimits", "      - zh-run:/run/zh:ro\n    ulimits", checkSocketShared, "read-only"},
		{"an undeclared volume", "volumes:\n  zh-run:\n", "volumes:\n  zh-run-gone:\n", checkSocketShared, "not declared"},
		{"another uid for the agent", "user: \"10001:10001\"\n    network_mode: host\n    environment:", "user: \"10002:10001\"\n    network_mode: host\n    environment:", checkSocketPeers, "refuse"},
		{"a volume owned by another uid", "uid=10001,gid=10001,mode=0750", "uid=10002,gid=10002,mode=0750", checkVolumeOwners, "cannot write"},
		{"a healthcheck on the wrong port", "http://127.0.0.1:9091/healthz", "http://127.0.0.1:9092/healthz", checkHealthchecks, "--metrics"},
		{"a healthcheck without --fail", "test: [CMD, curl, --fail,", "test: [CMD, curl,", checkHealthchecks, "--fail"},
		{"a healthcheck without a path", "http://localhost:9090/healthz", "http://localhost:9090", checkHealthchecks, "/healthz"},
		{"an agent listening beyond loopback", "--http=127.0.0.1:9090", "--http=0.0.0.0:9090", checkHealthchecks, "beyond loopback"},
		{"a healthcheck with wget", "test: [CMD, curl, -fsS,", "test: [CMD, wget, -q,", checkHealthchecks, "curl"},
		{"no GPU reservation", "            - driver: nvidia", "            - driver: amd", checkGPU, "nvidia"},
		{"the agent on a bridge network", "    network_mode: host\n    environment:", "    environment:", checkHostNetwork, "host"},
		{"no restart policy", "    restart: unless-stopped\n", "", checkRestart, "restart"},
		{"no ROS_DOMAIN_ID", "      - ROS_DOMAIN_ID=${ROS_DOMAIN_ID:-0}\n", "", checkROSConfig, "ROS_DOMAIN_ID"},
		{"CYCLONEDDS_URI on an unmounted file", "file:///etc/zh/cyclonedds.xml", "file:///etc/other.xml", checkROSConfig, "no volume mounts"},
		{"cyclonedds.xml missing on the host", "../ros2/cyclonedds.xml:", "../ros2/missing.xml:", checkROSConfig, "not a file"},
		{"--mlock without a memlock ulimit", "    ulimits:\n      memlock: -1\n", "", checkMemlock, "memlock"},
		{"--mlock with a small memlock ulimit", "memlock: -1", "memlock: 65536", checkMemlock, "memlock"},
		{"the TensorRT cache off the volumes", "--trt-cache=/var/cache/zh/trt", "--trt-cache=/tmp/trt", checkWritablePaths, "not on a writable volume"},
		{"a shared image without pull_policy", "    pull_policy: never\n", "", checkImages, "pull_policy"},
		{"a missing Dockerfile", "dockerfile: docker/Dockerfile", "dockerfile: docker/Dockerfile.nope", checkImages, "not found"},
		{"a missing bind source", "../ros2/cyclonedds.xml:", "../ros2/gone.xml:", checkBindSources, "gone.xml"},
	}
	for _, tc := range composeCases {
		t.Run("compose: "+tc.name, func(t *testing.T) {
			p := projectOf(t, mutate(t, v, tc.old, tc.new))
			err := tc.check(p)
			if err == nil {
				t.Fatalf("check passed on a broken file")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not mention %q", err, tc.want)
			}
		})
	}

	t.Run("the valid Dockerfile fixture passes every check", func(t *testing.T) {
		df, err := parseDockerfile("fixture", string(validDF))
		if err != nil {
			t.Fatal(err)
		}
		for _, err := range dockerfileFixtureChecks(df, root, nil) {
			if err != nil {
				t.Error(err)
			}
		}
	})
	d := string(validDF)
	dfCases := []struct {
		name, old, new string
		ignore         string // .dockerignore text
		want           string
	}{
		{"COPY from an unknown stage", "--from=ort", "--from=onnx", "", "no such stage"},
		{"COPY from a later stage", "FROM --platform=linux/arm64 golang:1.26-bookworm AS build", "FROM --platform=linux/arm64 golang:1.26-bookworm AS build\nCOPY --from=ort /x /x", "", "not before"},
		{"no USER", "USER 10001:10001\n", "", "", "no USER"},
		{"USER root", "USER 10001:10001", "USER 0", "", "root"},
		{"USER not the compose user", "USER 10001:10001", "USER 10002:10002", "", "compose runs"},
		{"CMD in shell form", `CMD ["agent"]`, "CMD agent", "", "exec form"},
		{"CMD of a binary not copied in", `CMD ["agent"]`, `CMD ["planner"]`, "", "does not copy"},
		{"a copied binary with no cmd/", "/out/agent /usr/local/bin/", "/out/agent /out/bench /usr/local/bin/", "", "no cmd/bench"},
		{"go build without the ros2 tag", "-tags ros2 ", "", "", "-tags ros2"},
		{"go build without -trimpath", "-trimpath ", "", "", "-trimpath"},
		{"go build without cgo", "ENV CGO_ENABLED=1\n", "", "", "CGO_ENABLED"},
		{"a context file that is missing", "COPY ros2/cyclonedds.xml", "COPY ros2/missing.xml", "", "no such file"},
		{"a context file left out by .dockerignore", "", "", "ros2\n", "leaves it out"},
		{"an embedded file left out by .dockerignore", "", "", "**/*.onnx\n", "models/reference.onnx"},
		{"an ONNX Runtime too old for the API", "ORT_VERSION=1.30.0", "ORT_VERSION=1.22.0", "", "does not serve ORT API"},
		{"an ONNX Runtime download without a checksum", "ARG ORT_SHA256=f9886932ee7bb0b4d3fcab736a392d4ff5efaa0672b47f19f0cec03437cf64f1", "ARG ORT_SHA256=", "", "must pin"},
		{"a checksum that is not sha256", "ORT_SHA256=f9886932", "ORT_SHA256=g9886932", "", "not a sha256"},
		{"a CUDA 13 runtime under CUDA 12 packages", "cuda:12.9.1", "cuda:13.0.1", "", "CUDA majors differ"},
		{"TensorRT for CUDA 13", "+cuda12.9", "+cuda13.0", "", "CUDA majors differ"},
		{"no curl for the healthchecks", "apt-get install -y curl ", "apt-get install -y ", "", "curl"},
		{"ZEROHOP_ORT_LIB outside what is copied in", "ENV ZEROHOP_ORT_LIB=/opt/onnxruntime/lib", "ENV ZEROHOP_ORT_LIB=/usr/lib/ort", "", "ZEROHOP_ORT_LIB"},
		{"a socket folder owned by root", "install -d -o 10001 -g 10001", "install -d", "", "install -d -o 10001"},
		{"a stage for another platform", "FROM --platform=linux/arm64 ubuntu:24.04 AS ort", "FROM ubuntu:24.04 AS ort", "", "want linux/arm64"},
		{"a heredoc", "RUN install -d", "RUN <<EOF\nEOF\nRUN install -d", "", "heredoc"},
	}
	for _, tc := range dfCases {
		t.Run("Dockerfile: "+tc.name, func(t *testing.T) {
			text := d
			if tc.old != "" {
				text = mutate(t, d, tc.old, tc.new)
			}
			var errs []error
			df, err := parseDockerfile("fixture", text)
			if err != nil {
				errs = append(errs, err)
			} else {
				var ignore dockerignore
				if tc.ignore != "" {
					if ignore, err = parseDockerignore(tc.ignore); err != nil {
						t.Fatal(err)
					}
				}
				errs = dockerfileFixtureChecks(df, root, ignore)
			}
			joined := errors.Join(errs...)
			if joined == nil {
				t.Fatalf("every check passed on a broken Dockerfile")
			}
			if !strings.Contains(joined.Error(), tc.want) {
				t.Errorf("errors %q do not mention %q", joined, tc.want)
			}
		})
	}

	// The ROS 2 input override, on the fixture with the agent given a
	// namespace as compose.yaml gives it.
	ros2Base := mutate(t, v, "      - --ros2\n", "      - --ros2\n      - --ros2-namespace=${NS:-/}\n      - --ros-args\n      - -r\n      - /tf:=${TF:-/tf}\n      - --\n")
	ros2Good := "services:\n  camera:\n    command: [camera, --socket=/run/zh/camera.sock, --metrics=127.0.0.1:9091, --source=ros2, --mlock, \"--ros2-namespace=${NS:-/}\", --ros2-points-topic=/ouster/points, --ros-args, -r, \"/tf:=${TF:-/tf}\"]\n"
	t.Run("override: the valid ROS 2 fixture passes, alone and merged", func(t *testing.T) {
		p := projectOf(t, ros2Base)
		if err := checkROS2Override(p, []byte(ros2Base), []byte(ros2Good)); err != nil {
			t.Fatalf("a valid override fails: %v", err)
		}
		merged, err := mergeCompose(p.compose, "fixture", []byte(ros2Good), nil)
		if err != nil {
			t.Fatal(err)
		}
		mp := &project{root: p.root, dir: p.dir, compose: merged, flags: p.flags}
		for _, c := range composeChecks() {
			if err := c.check(mp); err != nil {
				t.Errorf("merged: %s: %v", c.name, err)
			}
		}
	})
	ros2Cases := []struct {
		name      string
		base, ovr [2]string // old, new in the base fixture / the override ("" = as is)
		want      string
	}{
		{"the override drops a flag of compose.yaml's camera command", [2]string{}, [2]string{"--mlock, ", ""}, "has --mlock"},
		{"compose.yaml's camera command gains a flag the override lacks", [2]string{"--mlock]", "--mlock, \"--rate=${R:-30}\"]"}, [2]string{}, "has --rate=${R:-30}"},
		{"the override changes a value", [2]string{}, [2]string{"--metrics=127.0.0.1:9091", "--metrics=127.0.0.1:9092"}, "has --metrics=127.0.0.1:9091"},
		{"the override adds a non-ROS flag", [2]string{}, [2]string{"--mlock, ", "--mlock, --checksum, "}, "adds --checksum"},
		{"the override's --source from a variable", [2]string{}, [2]string{"--source=ros2", "\"--source=${S:-ros2}\""}, "--source"},
		{"the override without --source", [2]string{}, [2]string{"--source=ros2, ", ""}, "--source"},
		{"another binary", [2]string{}, [2]string{"[camera,", "[kamera,"}, "kamera"},
		{"the camera's namespace from another variable", [2]string{}, [2]string{"${NS:-/}", "${CAM_NS:-/}"}, "one variable for both"},
		{"no namespace for the camera", [2]string{}, [2]string{", \"--ros2-namespace=${NS:-/}\"", ""}, "no --ros2-namespace in the override"},
		{"no namespace for the agent", [2]string{"      - --ros2-namespace=${NS:-/}\n", ""}, [2]string{}, "no --ros2-namespace in compose.yaml"},
		{"a namespace written out", [2]string{"${NS:-/}", "/robot1"}, [2]string{"${NS:-/}", "/robot1"}, "from a variable"},
		{"the camera's tf topic from another variable", [2]string{}, [2]string{"${TF:-/tf}", "${CAM_TF:-/tf}"}, "are not the agent's"},
		{"no ROS arguments for the camera", [2]string{}, [2]string{", --ros-args, -r, \"/tf:=${TF:-/tf}\"", ""}, "are not the agent's"},
		{"ROS arguments for compose.yaml's camera", [2]string{"--mlock]", "--mlock, --ros-args, -r, \"/tf:=${TF:-/tf}\"]"}, [2]string{}, "compose.yaml's camera command has --ros-args"},
		{"the override sets more than the command", [2]string{}, [2]string{"    command:", "    user: \"0:0\"\n    command:"}, "sets user"},
		{"the override changes the agent", [2]string{}, [2]string{"services:\n", "services:\n  agent:\n    command: [agent]\n"}, "only the camera's service"},
	}
	for _, tc := range ros2Cases {
		t.Run("ROS 2 override: "+tc.name, func(t *testing.T) {
			base, ovr := ros2Base, ros2Good
			if tc.base[0] != "" {
				base = mutate(t, base, tc.base[0], tc.base[1])
			}
			if tc.ovr[0] != "" {
				ovr = mutate(t, ovr, tc.ovr[0], tc.ovr[1])
			}
			err := checkROS2Override(projectOf(t, base), []byte(base), []byte(ovr))
			if err == nil {
				t.Fatalf("check passed on a broken override")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not mention %q", err, tc.want)
			}
		})
	}
	t.Run("ROS 2 override: merged, a different socket fails the base's socket check", func(t *testing.T) {
		p := projectOf(t, ros2Base)
		merged, err := mergeCompose(p.compose, "fixture", []byte(mutate(t, ros2Good, "camera.sock", "other.sock")), nil)
		if err != nil {
			t.Fatal(err)
		}
		err = checkSocketShared(&project{root: p.root, dir: p.dir, compose: merged, flags: p.flags})
		if err == nil || !strings.Contains(err.Error(), "dials") {
			t.Errorf("checkSocketShared on the merged files: %v, want an error naming the agent's socket", err)
		}
	})
	t.Run("compose: a camera ROS 2 flag without --source ros2", func(t *testing.T) {
		err := checkCameraSource(projectOf(t, mutate(t, v, "--mlock]", "--mlock, --ros2-points-topic=/points]")))
		if err == nil || !strings.Contains(err.Error(), "only with --source ros2") {
			t.Errorf("checkCameraSource: %v, want an error saying the flags need --source ros2", err)
		}
	})
	t.Run("merge: keys it cannot merge are refused", func(t *testing.T) {
		base := projectOf(t, v).compose
		for _, bad := range []string{
			"services:\n  camera:\n    volumes: [/x:/x]\n",
			"services:\n  planner:\n    image: x\n",
			"services:\n  agent:\n    deploy: {}\n",
			"services:\n  agent:\n    image: x\nvolumes:\n  more:\n",
		} {
			if _, err := mergeCompose(base, "fixture", []byte(bad), nil); err == nil {
				t.Errorf("mergeCompose accepted %q", bad)
			}
		}
	})

	t.Run("override: a command in compose.jetson.yaml", func(t *testing.T) {
		base := projectOf(t, v).compose
		good := "services:\n  agent:\n    image: zh:jetson\n    runtime: nvidia\n"
		if err := checkOverride(base, []byte(good), filepath.Join(root, "docker")); err != nil {
			t.Fatalf("a valid override fails: %v", err)
		}
		// docker/README.md's advice where Docker refuses the GPU
		// reservation on a Jetson, with the device group.
		reset := good + "    group_add: [video]\n    deploy: !reset {}\n"
		if err := checkOverride(base, []byte(reset), filepath.Join(root, "docker")); err != nil {
			t.Fatalf("the override docker/README.md suggests fails: %v", err)
		}
		distro := good + "    environment:\n      ROS_DISTRO: humble\n"
		if err := checkOverride(base, []byte(distro), filepath.Join(root, "docker")); err != nil {
			t.Fatalf("an override of ROS_DISTRO fails: %v", err)
		}
		bad := good + "    environment:\n      ZEROHOP_GPU: \"off\"\n"
		if err := checkOverride(base, []byte(bad), filepath.Join(root, "docker")); err == nil || !strings.Contains(err.Error(), "ZEROHOP_GPU") {
			t.Errorf("override of another variable: %v, want an error naming it", err)
		}
		bad = good + "    command: [agent, --http=0.0.0.0:9090]\n"
		if err := checkOverride(base, []byte(bad), filepath.Join(root, "docker")); err == nil || !strings.Contains(err.Error(), "command") {
			t.Errorf("override with a command: %v, want an error naming command", err)
		}
		bad = "services:\n  planner:\n    image: x\n"
		if err := checkOverride(base, []byte(bad), filepath.Join(root, "docker")); err == nil || !strings.Contains(err.Error(), "planner") {
			t.Errorf("override of an unknown service: %v, want an error naming it", err)
		}
	})
}

// dockerfileFixtureChecks runs every Dockerfile check on the fixture, with
// what the real run takes from the repository replaced by fixed values.
func dockerfileFixtureChecks(df *dockerfile, root string, ignore dockerignore) []error {
	return []error{
		checkStageRefs(df),
		checkFinalUser(df, "10001:10001"),
		checkImageCommand(df, root, [][]string{{"camera"}, {"agent"}}),
		checkGoBuild(df),
		checkContextCopies(df, root, ignore, []string{"go.mod", "models/reference.onnx"}),
		checkPins(df, 24),
		checkCUDAMajor(df),
		checkRuntimeTools(df),
		checkImageDirs(df, "10001:10001", "/run/zh"),
		checkPlatform(df, "linux/arm64"),
	}
}

// ---- the binaries ----

type builtBinaries struct {
	dir  string
	ros2 bool
}

// buildBinaries builds camera and agent into a temporary folder, with the
// ros2 tag when pkg-config finds Cyclone DDS (required when
// ZEROHOP_REQUIRE_ROS2=1).
func buildBinaries(t *testing.T, root string) builtBinaries {
	t.Helper()
	b := builtBinaries{dir: t.TempDir()}
	b.ros2 = exec.Command("pkg-config", "--exists", "CycloneDDS").Run() == nil
	if !b.ros2 && os.Getenv("ZEROHOP_REQUIRE_ROS2") == "1" {
		t.Fatal("ZEROHOP_REQUIRE_ROS2=1 but pkg-config finds no CycloneDDS (apt-get install cyclonedds-dev pkg-config)")
	}
	args := []string{"build", "-o", b.dir + string(filepath.Separator)}
	if b.ros2 {
		args = append(args, "-tags", "ros2")
	}
	args = append(args, "./cmd/camera", "./cmd/agent")
	cmd := exec.Command(goTool(t), args...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return b
}

func helpOf(t *testing.T, b builtBinaries, bin string) flagSet {
	t.Helper()
	out, err := exec.Command(filepath.Join(b.dir, bin), "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("%s --help: %v\n%s", bin, err, out)
	}
	fs, err := parseHelp(string(out))
	if err != nil {
		t.Fatalf("%s --help: %v", bin, err)
	}
	return fs
}

func TestBinaries(t *testing.T) {
	root := repoRoot(t)
	bins := buildBinaries(t, root)
	help := map[string]flagSet{}
	for _, bin := range []string{cameraBinary, agentBinary} {
		help[bin] = helpOf(t, bins, bin)
	}
	// Without the ros2 build, --ros2 and its companions are known from the
	// source only; they are checked against a ros2 build's --help below.
	ros2Only := map[string]flagSet{}
	flags := map[string]flagSet{}
	for _, bin := range []string{cameraBinary, agentBinary} {
		fs, err := sourceFlags(filepath.Join(root, "cmd", bin, "ros2_on.go"))
		if err != nil {
			t.Fatal(err)
		}
		ros2Only[bin] = fs
		flags[bin] = help[bin]
		if !bins.ros2 {
			flags[bin] = mergeFlags(fs, help[bin])
		}
	}
	p := loadProject(t, root, flags)
	stacks := ros2Stacks(t, p, nil)

	t.Run("every flag in compose.yaml and compose.ros2.yaml is in the binary's --help", func(t *testing.T) {
		for _, st := range append([]namedProject{{"compose.yaml", p}}, stacks...) {
			for _, name := range sortedKeys(st.p.compose.Services) {
				cmd := st.p.compose.Services[name].Command
				if len(cmd) == 0 {
					t.Errorf("%s: service %s: no command", st.name, name)
					continue
				}
				bin := path.Base(cmd[0])
				for _, f := range unknownFlags(cmd, help[bin]) {
					if _, ros2 := ros2Only[bin][strings.TrimPrefix(f, "--")]; ros2 && !bins.ros2 {
						continue // the next subtest's business
					}
					t.Errorf("%s: service %s: %s is not in `%s --help`", st.name, name, f, bin)
				}
			}
		}
	})
	t.Run("the ros2 build's --help has every flag cmd/*/ros2_on.go registers", func(t *testing.T) {
		if !bins.ros2 {
			t.Skip("no ros2 build: pkg-config finds no CycloneDDS (install cyclonedds-dev; ZEROHOP_REQUIRE_ROS2=1 makes this a failure)")
		}
		for _, bin := range sortedKeys(ros2Only) {
			for name := range ros2Only[bin] {
				if _, ok := help[bin][name]; !ok {
					t.Errorf("%s --help (ros2 build) lacks --%s, which cmd/%s/ros2_on.go registers", bin, name, bin)
				}
			}
		}
	})
	// The ROS 2 flags' variables default to what the binaries would do
	// without the flag, so that an unset variable changes nothing.
	t.Run("the --ros2-* flags in the compose files default to the binaries' own defaults", func(t *testing.T) {
		if !bins.ros2 {
			t.Skip("no ros2 build (pkg-config finds no CycloneDDS): only its --help has the ROS 2 defaults; ZEROHOP_REQUIRE_ROS2=1, as make test sets, fails instead")
		}
		for _, st := range stacks {
			for _, bin := range []string{cameraBinary, agentBinary} {
				name, _, inv, err := st.p.invocation(bin)
				if err != nil {
					t.Fatal(err)
				}
				for _, f := range inv.Order {
					if d := help[bin][f].Default; strings.HasPrefix(f, "ros2-") && inv.Values[f] != d {
						t.Errorf("%s: service %s: --%s=%q with its variable unset, but `%s --help` says the default is %q", st.name, name, f, inv.Values[f], bin, d)
					}
				}
			}
		}
	})
	// The compose checks again, now with the flags (and defaults) the
	// binaries report, on compose.yaml alone and merged with the overrides.
	for _, st := range append([]namedProject{{"", p}}, stacks...) {
		prefix := "with --help: "
		if st.name != "" {
			prefix += st.name + ": "
		}
		for _, c := range composeChecks() {
			t.Run(prefix+c.name, func(t *testing.T) {
				if err := c.check(st.p); err != nil {
					t.Error(err)
				}
			})
		}
	}

	t.Run("the agent's healthcheck path is a telemetry route", func(t *testing.T) {
		_, s, err := p.serviceOf(agentBinary)
		if err != nil {
			t.Fatal(err)
		}
		u, err := healthURL(s.Healthcheck)
		if err != nil {
			t.Fatal(err)
		}
		rec, err := telemetry.New(telemetry.Options{})
		if err != nil {
			t.Fatal(err)
		}
		srv, err := telemetry.NewServer(rec, telemetry.ServerOptions{})
		if err != nil {
			t.Fatal(err)
		}
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, httptest.NewRequest(http.MethodGet, u.RequestURI(), nil))
		if w.Code != http.StatusOK {
			t.Errorf("GET %s on the agent's telemetry server: %d, want 200 (healthy server)", u.RequestURI(), w.Code)
		}
	})

	// Run the compose commands outside Docker.
	env := newLiveEnv(t, p)
	camera := env.start(t, cameraBinary, bins)
	t.Run("the camera, run with its compose command, answers its healthcheck", func(t *testing.T) {
		camera.waitHealthy(t, 20*time.Second)
	})
	t.Run("the agent, run with its compose command, connects and answers its healthcheck", func(t *testing.T) {
		if !bins.ros2 {
			t.Skip("no ros2 build: the agent's compose command uses --ros2")
		}
		if !ortAvailable(root) {
			if os.Getenv("ZEROHOP_REQUIRE_ORT") == "1" {
				t.Fatal("ZEROHOP_REQUIRE_ORT=1 but no ONNX Runtime library (make deps, or set ZEROHOP_ORT_LIB)")
			}
			t.Skip("no ONNX Runtime library (make deps fetches it; ZEROHOP_REQUIRE_ORT=1 makes this a failure)")
		}
		if camera.exited() {
			t.Fatalf("the camera stopped:\n%s", camera.out.String())
		}
		agent := env.start(t, agentBinary, bins)
		agent.waitHealthy(t, 60*time.Second)
		if testing.Verbose() {
			t.Logf("agent output so far:\n%s", agent.out.String())
		}
	})
	// The camera refuses --ros2-* flags with any other --source, and takes
	// some values (namespace, topics, --ros2-stamp) only at start: run
	// compose.ros2.yaml's merged command. Without drivers publishing it has
	// no frames, but it serves its healthcheck once it has started.
	t.Run("the camera, run with compose.ros2.yaml's command, answers its healthcheck", func(t *testing.T) {
		if !bins.ros2 {
			t.Skip("no ros2 build (pkg-config finds no CycloneDDS): the command uses --source=ros2; ZEROHOP_REQUIRE_ROS2=1, as make test sets, fails instead")
		}
		ros2Env := newLiveEnv(t, stacks[0].p)
		cam := ros2Env.start(t, cameraBinary, bins)
		cam.waitHealthy(t, 20*time.Second)
	})
}
