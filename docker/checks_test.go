package docker

// The checks, as functions over the parsed files. Each returns nil or one
// error listing every problem it found; compose_test.go runs them on the
// real files and feeds each one a deliberately broken input to show that it
// fires.

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/zerohop/zerohop/ros2/rosargs"
)

// project is what the compose checks read.
type project struct {
	root    string // repository root
	dir     string // the compose file's folder: relative paths start here
	compose *composeFile
	flags   map[string]flagSet // binary name → flags it accepts
}

// The binaries and the flag each serves its healthcheck on.
const (
	cameraBinary = "camera"
	agentBinary  = "agent"
)

var healthFlag = map[string]string{cameraBinary: "metrics", agentBinary: "http"}

// serviceOf returns the name and service whose command runs binary.
func (p *project) serviceOf(binary string) (string, *service, error) {
	var found []string
	for _, name := range sortedKeys(p.compose.Services) {
		if c := p.compose.Services[name].Command; len(c) > 0 && path.Base(c[0]) == binary {
			found = append(found, name)
		}
	}
	if len(found) != 1 {
		return "", nil, fmt.Errorf("want exactly one service running %s, found %d %v", binary, len(found), found)
	}
	return found[0], p.compose.Services[found[0]], nil
}

// invocation parses the command of the service running binary.
func (p *project) invocation(binary string) (string, *service, invocation, error) {
	name, s, err := p.serviceOf(binary)
	if err != nil {
		return "", nil, invocation{}, err
	}
	fs, ok := p.flags[binary]
	if !ok {
		return name, s, invocation{}, fmt.Errorf("no flags known for %s", binary)
	}
	inv, err := parseCommand(s.Command, fs)
	if err != nil {
		return name, s, inv, fmt.Errorf("service %s: %w", name, err)
	}
	return name, s, inv, nil
}

// checkCommands: every service runs a known binary in exec form, with
// flags the binary accepts.
func checkCommands(p *project) error {
	var errs []error
	for _, name := range sortedKeys(p.compose.Services) {
		s := p.compose.Services[name]
		if len(s.Entrypoint) > 0 {
			errs = append(errs, fmt.Errorf("service %s: entrypoint is set; the image runs the binary named first in command", name))
		}
		if len(s.Command) == 0 {
			errs = append(errs, fmt.Errorf("service %s: no command", name))
			continue
		}
		bin := path.Base(s.Command[0])
		fs, ok := p.flags[bin]
		if !ok {
			errs = append(errs, fmt.Errorf("service %s: command runs %q, not one of the zerohop binaries %v", name, s.Command[0], sortedKeys(p.flags)))
			continue
		}
		if unknown := unknownFlags(s.Command, fs); len(unknown) > 0 {
			errs = append(errs, fmt.Errorf("service %s: %s does not have %s", name, bin, strings.Join(unknown, ", ")))
			continue
		}
		if _, err := parseCommand(s.Command, fs); err != nil {
			errs = append(errs, fmt.Errorf("service %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// checkNoHostSharing: no service shares the host's IPC or PID namespace
// or runs privileged. The slots travel as memfds over the socket, so
// nothing needs /dev/shm or `ipc: host`.
func checkNoHostSharing(p *project) error {
	var errs []error
	for _, name := range sortedKeys(p.compose.Services) {
		s := p.compose.Services[name]
		if s.IPC == "host" || strings.HasPrefix(s.IPC, "container:") {
			errs = append(errs, fmt.Errorf("service %s: ipc: %s (not needed: pools are memfds passed over the socket)", name, s.IPC))
		}
		if s.PID == "host" {
			errs = append(errs, fmt.Errorf("service %s: pid: host", name))
		}
		if s.Privileged {
			errs = append(errs, fmt.Errorf("service %s: privileged: true", name))
		}
		for _, c := range s.CapAdd {
			if c == "ALL" || c == "SYS_ADMIN" || c == "CAP_SYS_ADMIN" {
				errs = append(errs, fmt.Errorf("service %s: cap_add: %s", name, c))
			}
		}
	}
	return errors.Join(errs...)
}

type userSpec struct{ uid, gid int }

// parseUser reads a numeric "uid[:gid]"; names cannot be resolved
// without the image.
func parseUser(s string) (userSpec, error) {
	us, gs, hasGID := strings.Cut(strings.TrimSpace(s), ":")
	uid, err := strconv.Atoi(us)
	if err != nil {
		return userSpec{}, fmt.Errorf("user %q: want a numeric uid:gid", s)
	}
	gid := uid
	if hasGID {
		if gid, err = strconv.Atoi(gs); err != nil {
			return userSpec{}, fmt.Errorf("user %q: want a numeric uid:gid", s)
		}
	}
	return userSpec{uid, gid}, nil
}

// checkUsers: every service runs as an explicit, non-root uid:gid.
func checkUsers(p *project) error {
	var errs []error
	for _, name := range sortedKeys(p.compose.Services) {
		s := p.compose.Services[name]
		if s.User == "" {
			errs = append(errs, fmt.Errorf("service %s: no user: it would run as the image's USER; name it so that the socket volume's owner is visible here", name))
			continue
		}
		u, err := parseUser(s.User)
		if err != nil {
			errs = append(errs, fmt.Errorf("service %s: %w", name, err))
			continue
		}
		if u.uid == 0 || u.gid == 0 {
			errs = append(errs, fmt.Errorf("service %s: user %q is root", name, s.User))
		}
	}
	return errors.Join(errs...)
}

// mountFor returns the service's mount whose target is dir, or nil.
func mountFor(s *service, dir string) *mount {
	for i := range s.Volumes {
		if path.Clean(s.Volumes[i].Target) == path.Clean(dir) {
			return &s.Volumes[i]
		}
	}
	return nil
}

// mountUnder returns the service's mount that holds p (longest target).
func mountUnder(s *service, p string) *mount {
	var best *mount
	for i := range s.Volumes {
		m := &s.Volumes[i]
		t := path.Clean(m.Target)
		if p == t || strings.HasPrefix(p, t+"/") {
			if best == nil || len(t) > len(path.Clean(best.Target)) {
				best = m
			}
		}
	}
	return best
}

// checkSocketShared: camera and agent use the same --socket, and its
// folder is the same volume, mounted at the same place, in both.
func checkSocketShared(p *project) error {
	cname, cs, cinv, err := p.invocation(cameraBinary)
	if err != nil {
		return err
	}
	aname, as, ainv, err := p.invocation(agentBinary)
	if err != nil {
		return err
	}
	csock, _ := cinv.value("socket", p.flags[cameraBinary])
	asock, _ := ainv.value("socket", p.flags[agentBinary])
	if csock == "" || asock == "" {
		return fmt.Errorf("camera --socket %q, agent --socket %q: both must be set", csock, asock)
	}
	if csock != asock {
		return fmt.Errorf("camera serves %q but agent dials %q", csock, asock)
	}
	dir := path.Dir(csock)
	var errs []error
	cm, am := mountFor(cs, dir), mountFor(as, dir)
	if cm == nil {
		errs = append(errs, fmt.Errorf("service %s: no volume mounted at the socket folder %s", cname, dir))
	}
	if am == nil {
		errs = append(errs, fmt.Errorf("service %s: no volume mounted at the socket folder %s", aname, dir))
	}
	if cm != nil && am != nil {
		if cm.Source == "" || cm.Source != am.Source || cm.Type != am.Type {
			errs = append(errs, fmt.Errorf("socket folder %s: %s mounts %s %q, %s mounts %s %q: they must share one named volume", dir, cname, cm.Type, cm.Source, aname, am.Type, am.Source))
		}
		if cm.ReadOnly {
			errs = append(errs, fmt.Errorf("service %s: socket folder %s is read-only; the camera creates the socket there", cname, dir))
		}
		if cm.Type == "volume" && cm.Source != "" {
			if _, ok := p.compose.Volumes[cm.Source]; !ok {
				errs = append(errs, fmt.Errorf("volume %q is not declared under the top-level volumes:", cm.Source))
			}
		}
	}
	return errors.Join(errs...)
}

// checkSocketPeers: the camera admits the agent. It accepts peers with its
// own uid, or with the primary gid given by --allow-gid; it creates the
// folder 0750 and the socket 0660, so a peer of another uid also needs the
// camera's gid.
func checkSocketPeers(p *project) error {
	cname, cs, cinv, err := p.invocation(cameraBinary)
	if err != nil {
		return err
	}
	aname, as, _, err := p.invocation(agentBinary)
	if err != nil {
		return err
	}
	cu, err := parseUser(cs.User)
	if err != nil {
		return fmt.Errorf("service %s: %w", cname, err)
	}
	au, err := parseUser(as.User)
	if err != nil {
		return fmt.Errorf("service %s: %w", aname, err)
	}
	if cu.uid == au.uid {
		return nil
	}
	allow, _ := cinv.value("allow-gid", p.flags[cameraBinary])
	if allow == strconv.Itoa(au.gid) && cu.gid == au.gid {
		return nil
	}
	return fmt.Errorf("%s runs as %s and %s as %s: the camera would refuse the agent; use one uid, or one gid and --allow-gid=%d on the camera", cname, cs.User, aname, as.User, au.gid)
}

// mountOptions reads a local volume's driver_opts "o" list.
func mountOptions(v *volume) map[string]string {
	out := map[string]string{}
	if v == nil {
		return out
	}
	for _, kv := range strings.Split(v.DriverOpts["o"], ",") {
		if k, val, ok := strings.Cut(strings.TrimSpace(kv), "="); ok {
			out[k] = val
		}
	}
	return out
}

// checkVolumeOwners: a volume whose mount options set uid/gid/mode lets
// each service that mounts it in: same uid with owner rwx, or same gid with
// group rwx.
func checkVolumeOwners(p *project) error {
	var errs []error
	for _, vname := range sortedKeys(p.compose.Volumes) {
		opts := mountOptions(p.compose.Volumes[vname])
		if opts["uid"] == "" && opts["gid"] == "" && opts["mode"] == "" {
			continue
		}
		mode, err := strconv.ParseUint(orString(opts["mode"], "0755"), 8, 32)
		if err != nil {
			errs = append(errs, fmt.Errorf("volume %s: mode %q: %w", vname, opts["mode"], err))
			continue
		}
		for _, sname := range sortedKeys(p.compose.Services) {
			s := p.compose.Services[sname]
			if !slices.ContainsFunc(s.Volumes, func(m mount) bool { return m.Type == "volume" && m.Source == vname }) {
				continue
			}
			u, err := parseUser(s.User)
			if err != nil {
				errs = append(errs, fmt.Errorf("service %s: %w", sname, err))
				continue
			}
			ownerOK := opts["uid"] == strconv.Itoa(u.uid) && mode&0o700 == 0o700
			groupOK := opts["gid"] == strconv.Itoa(u.gid) && mode&0o070 == 0o070
			if !ownerOK && !groupOK {
				errs = append(errs, fmt.Errorf("volume %s (uid=%s gid=%s mode=%s): service %s runs as %s and cannot write it", vname, orString(opts["uid"], "0"), orString(opts["gid"], "0"), orString(opts["mode"], "0755"), sname, s.User))
			}
		}
	}
	return errors.Join(errs...)
}

var loopbackHosts = []string{"127.0.0.1", "localhost", "::1"}

func isLoopback(host string) bool {
	if slices.Contains(loopbackHosts, host) {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// healthURL returns the URL a healthcheck's curl fetches, after checking
// that it is curl in exec form and that it fails on an HTTP error status
// (without --fail a 503 from /healthz would count as healthy).
func healthURL(h *healthcheck) (*url.URL, error) {
	if h == nil || h.Disable || len(h.Test) == 0 {
		return nil, errors.New("no healthcheck")
	}
	words := h.Test[1:]
	switch h.Test[0] {
	case "CMD":
	case "CMD-SHELL":
		if len(words) != 1 {
			return nil, fmt.Errorf("healthcheck %q: CMD-SHELL takes one string", h.Test)
		}
		words = strings.Fields(words[0])
	default:
		return nil, fmt.Errorf("healthcheck %q: want [CMD, curl, ...]", h.Test)
	}
	if len(words) == 0 || path.Base(words[0]) != "curl" {
		return nil, fmt.Errorf("healthcheck %q: want curl (the image installs it)", h.Test)
	}
	fail := false
	var target *url.URL
	for _, w := range words[1:] {
		switch {
		case w == "--fail" || w == "--fail-with-body":
			fail = true
		case strings.HasPrefix(w, "-") && !strings.HasPrefix(w, "--") && strings.Contains(w, "f"):
			fail = true
		case strings.HasPrefix(w, "http://") || strings.HasPrefix(w, "https://"):
			u, err := url.Parse(w)
			if err != nil {
				return nil, fmt.Errorf("healthcheck URL %q: %w", w, err)
			}
			target = u
		}
	}
	if !fail {
		return nil, fmt.Errorf("healthcheck %q: curl without --fail treats an HTTP error as healthy", h.Test)
	}
	if target == nil {
		return nil, fmt.Errorf("healthcheck %q: no http:// URL", h.Test)
	}
	return target, nil
}

// checkHealthchecks: the camera's and agent's healthchecks fetch, over
// loopback, the address the binary listens on (--metrics, --http), which is
// itself on loopback (with network_mode: host, anything else is on the
// robot's network).
func checkHealthchecks(p *project) error {
	var errs []error
	for _, bin := range []string{cameraBinary, agentBinary} {
		name, s, inv, err := p.invocation(bin)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		flag := healthFlag[bin]
		listen, ok := inv.value(flag, p.flags[bin])
		if !ok || listen == "" {
			errs = append(errs, fmt.Errorf("service %s: --%s is empty: %s serves no /healthz", name, flag, bin))
			continue
		}
		lhost, lport, err := net.SplitHostPort(listen)
		if err != nil {
			errs = append(errs, fmt.Errorf("service %s: --%s=%q: %w", name, flag, listen, err))
			continue
		}
		if !isLoopback(lhost) {
			errs = append(errs, fmt.Errorf("service %s: --%s=%q listens beyond loopback", name, flag, listen))
		}
		u, err := healthURL(s.Healthcheck)
		if err != nil {
			errs = append(errs, fmt.Errorf("service %s: %w", name, err))
			continue
		}
		if !isLoopback(u.Hostname()) {
			errs = append(errs, fmt.Errorf("service %s: healthcheck %s is not on loopback", name, u))
		}
		if u.Port() != lport {
			errs = append(errs, fmt.Errorf("service %s: healthcheck %s, but --%s=%s", name, u, flag, listen))
		}
		if u.Path == "" || u.Path == "/" {
			errs = append(errs, fmt.Errorf("service %s: healthcheck %s: want the /healthz route", name, u))
		}
	}
	return errors.Join(errs...)
}

// checkGPU: the agent's service reserves NVIDIA GPUs.
func checkGPU(p *project) error {
	name, s, err := p.serviceOf(agentBinary)
	if err != nil {
		return err
	}
	if s.Deploy != nil {
		for _, d := range s.Deploy.Resources.Reservations.Devices {
			if d.Driver == "nvidia" && slices.Contains(d.Capabilities, "gpu") {
				return nil
			}
		}
	}
	return fmt.Errorf("service %s: no deploy.resources.reservations.devices entry with driver nvidia and capabilities [gpu]", name)
}

// checkHostNetwork: the agent is on the host's network, where DDS reaches
// the robot's ROS 2 graph.
func checkHostNetwork(p *project) error {
	name, s, err := p.serviceOf(agentBinary)
	if err != nil {
		return err
	}
	if s.NetworkMode != "host" {
		return fmt.Errorf("service %s: network_mode %q, want host (DDS discovery and traffic)", name, s.NetworkMode)
	}
	return nil
}

// checkRestart: every service comes back after a crash or a reboot.
func checkRestart(p *project) error {
	var errs []error
	for _, name := range sortedKeys(p.compose.Services) {
		switch r := p.compose.Services[name].Restart; {
		case r == "unless-stopped", r == "always", strings.HasPrefix(r, "on-failure"):
		default:
			errs = append(errs, fmt.Errorf("service %s: restart %q, want unless-stopped", name, r))
		}
	}
	return errors.Join(errs...)
}

// hostPath resolves a bind mount's source against the compose folder.
func (p *project) hostPath(src string) string {
	if filepath.IsAbs(src) {
		return src
	}
	return filepath.Join(p.dir, filepath.FromSlash(src))
}

// checkROSConfig: the camera and the agent take their ROS 2 settings from
// the environment, and CYCLONEDDS_URI names a file mounted from the host.
func checkROSConfig(p *project) error {
	var errs []error
	for _, bin := range []string{cameraBinary, agentBinary} {
		errs = append(errs, checkROSConfigOf(p, bin))
	}
	return errors.Join(errs...)
}

// checkROSConfigOf is checkROSConfig for the service running bin: both
// speak ROS 2 (the camera with ZEROHOP_SOURCE=ros2), so both need the
// domain, the discovery variables (ROS_LOCALHOST_ONLY: the only one
// Humble reads) and the Cyclone settings.
func checkROSConfigOf(p *project, bin string) error {
	name, s, err := p.serviceOf(bin)
	if err != nil {
		return err
	}
	var errs []error
	for _, k := range []string{"ROS_DOMAIN_ID", "ROS_AUTOMATIC_DISCOVERY_RANGE", "ROS_LOCALHOST_ONLY", "ROS_DISTRO"} {
		if _, ok := s.Environment[k]; !ok {
			errs = append(errs, fmt.Errorf("service %s: environment has no %s", name, k))
		}
	}
	uri := s.Environment["CYCLONEDDS_URI"]
	file, ok := strings.CutPrefix(uri, "file://")
	if !ok {
		return errors.Join(append(errs, fmt.Errorf("service %s: CYCLONEDDS_URI %q: want file:///path of the mounted cyclonedds.xml", name, uri))...)
	}
	m := mountFor(s, file)
	switch {
	case m == nil:
		errs = append(errs, fmt.Errorf("service %s: CYCLONEDDS_URI names %s, which no volume mounts", name, file))
	case m.Type != "bind":
		errs = append(errs, fmt.Errorf("service %s: %s is mounted from volume %q; mount the host's cyclonedds.xml", name, file, m.Source))
	default:
		if st, err := os.Stat(p.hostPath(m.Source)); err != nil || st.IsDir() {
			errs = append(errs, fmt.Errorf("service %s: %s is mounted from %s, which is not a file here", name, file, m.Source))
		}
	}
	return errors.Join(errs...)
}

const minMemlock = 256 << 20

// checkMemlock: a service whose binary runs with --mlock has a memlock
// ulimit that can hold the pools.
func checkMemlock(p *project) error {
	var errs []error
	for _, bin := range []string{cameraBinary, agentBinary} {
		name, s, inv, err := p.invocation(bin)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if v, _ := inv.value("mlock", p.flags[bin]); v != "true" {
			continue
		}
		l, ok := s.Ulimits["memlock"]
		enough := func(v int64) bool { return v == -1 || v >= minMemlock }
		if !ok || !enough(l.Soft) || !enough(l.Hard) {
			errs = append(errs, fmt.Errorf("service %s: --mlock needs ulimits: memlock: -1 (or at least %d bytes); have %+v", name, minMemlock, l))
		}
	}
	return errors.Join(errs...)
}

// checkWritablePaths: the TensorRT engine cache is on a writable volume, so
// engines survive a restart and the user can write them.
func checkWritablePaths(p *project) error {
	name, s, inv, err := p.invocation(agentBinary)
	if err != nil {
		return err
	}
	dir, _ := inv.value("trt-cache", p.flags[agentBinary])
	if !path.IsAbs(dir) {
		return fmt.Errorf("service %s: --trt-cache %q: want an absolute path on a volume", name, dir)
	}
	m := mountUnder(s, path.Clean(dir))
	if m == nil || m.ReadOnly {
		return fmt.Errorf("service %s: --trt-cache %s is not on a writable volume", name, dir)
	}
	return nil
}

// checkImages: services that share an image built by another service never
// try to pull it, and build contexts and Dockerfiles exist.
func checkImages(p *project) error {
	var errs []error
	built := map[string]string{}
	for _, name := range sortedKeys(p.compose.Services) {
		s := p.compose.Services[name]
		if s.Image == "" {
			errs = append(errs, fmt.Errorf("service %s: no image name", name))
		}
		if s.Build == nil {
			continue
		}
		built[s.Image] = name
		ctx := p.hostPath(s.Build.Context)
		if st, err := os.Stat(ctx); err != nil || !st.IsDir() {
			errs = append(errs, fmt.Errorf("service %s: build context %s is not a folder", name, s.Build.Context))
		}
		df := orString(s.Build.Dockerfile, "Dockerfile")
		if _, err := os.Stat(filepath.Join(ctx, filepath.FromSlash(df))); err != nil {
			errs = append(errs, fmt.Errorf("service %s: dockerfile %s not found in %s", name, df, s.Build.Context))
		}
	}
	for _, name := range sortedKeys(p.compose.Services) {
		s := p.compose.Services[name]
		if b, ok := built[s.Image]; ok && s.Build == nil && s.PullPolicy != "never" && s.PullPolicy != "build" {
			errs = append(errs, fmt.Errorf("service %s: image %s is built by service %s; set pull_policy: never so that compose does not try to pull it", name, s.Image, b))
		}
	}
	return errors.Join(errs...)
}

// checkBindSources: every host path mounted into a service exists.
func checkBindSources(p *project) error {
	var errs []error
	for _, name := range sortedKeys(p.compose.Services) {
		for _, m := range p.compose.Services[name].Volumes {
			if m.Type != "bind" {
				continue
			}
			if _, err := os.Stat(p.hostPath(m.Source)); err != nil {
				errs = append(errs, fmt.Errorf("service %s: bind mount source %s: %w", name, m.Source, err))
			}
		}
	}
	return errors.Join(errs...)
}

// ---- Dockerfile checks ----

// checkStageRefs: every COPY --from names an earlier stage or an image.
func checkStageRefs(df *dockerfile) error {
	var errs []error
	for _, st := range df.Stages {
		cs, err := st.copies()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", df.Path, err))
			continue
		}
		for _, c := range cs {
			if c.From == "" {
				continue
			}
			ref := df.stage(c.From)
			switch {
			case ref == nil && !strings.ContainsAny(c.From, ":/"):
				errs = append(errs, fmt.Errorf("%s:%d: COPY --from=%s: no such stage", df.Path, c.Line, c.From))
			case ref != nil && ref.Index >= st.Index:
				errs = append(errs, fmt.Errorf("%s:%d: COPY --from=%s: stage %d is not before stage %d", df.Path, c.Line, c.From, ref.Index, st.Index))
			}
		}
	}
	return errors.Join(errs...)
}

// checkFinalUser: the image runs as a non-root numeric user, the one
// compose.yaml names (if want is not "").
func checkFinalUser(df *dockerfile, want string) error {
	users := df.final().each("USER")
	if len(users) == 0 {
		return fmt.Errorf("%s: the final stage has no USER: it would run as root", df.Path)
	}
	got := strings.TrimSpace(users[len(users)-1].Args)
	u, err := parseUser(got)
	if err != nil {
		return fmt.Errorf("%s: USER %s: %w", df.Path, got, err)
	}
	if u.uid == 0 || u.gid == 0 {
		return fmt.Errorf("%s: USER %s is root", df.Path, got)
	}
	if want != "" {
		w, err := parseUser(want)
		if err != nil {
			return err
		}
		if w != u {
			return fmt.Errorf("%s: USER %s, but compose runs the services as %s (the volumes are owned by the image's user)", df.Path, got, want)
		}
	}
	return nil
}

// imageBinaries returns the binaries the final stage copies into
// /usr/local/bin, by name, with the stage they come from.
func imageBinaries(df *dockerfile) (map[string]string, error) {
	cs, err := df.final().copies()
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, c := range cs {
		if c.From == "" || path.Clean(c.Dest) != "/usr/local/bin" {
			continue
		}
		for _, s := range c.Srcs {
			out[path.Base(s)] = c.From
		}
	}
	return out, nil
}

// checkImageCommand: the image's CMD is in exec form and runs a binary the
// image carries, built from cmd/<name>; the compose commands run binaries
// the image carries.
func checkImageCommand(df *dockerfile, root string, commands [][]string) error {
	bins, err := imageBinaries(df)
	if err != nil {
		return err
	}
	var errs []error
	for name := range bins {
		if st, err := os.Stat(filepath.Join(root, "cmd", name)); err != nil || !st.IsDir() {
			errs = append(errs, fmt.Errorf("%s: copies %s into /usr/local/bin, but there is no cmd/%s", df.Path, name, name))
		}
	}
	ep, _, err := df.final().execForm("ENTRYPOINT")
	if err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", df.Path, err))
	}
	if len(ep) > 0 {
		errs = append(errs, fmt.Errorf("%s: ENTRYPOINT %q: compose runs the binary named first in command, so the image has none", df.Path, ep))
	}
	cmd, _, err := df.final().execForm("CMD")
	switch {
	case err != nil:
		errs = append(errs, fmt.Errorf("%s: %w", df.Path, err))
	case len(cmd) == 0:
		errs = append(errs, fmt.Errorf("%s: no CMD", df.Path))
	default:
		commands = append(commands, cmd)
	}
	for _, c := range commands {
		if len(c) == 0 {
			continue
		}
		if _, ok := bins[path.Base(c[0])]; !ok {
			errs = append(errs, fmt.Errorf("%s: runs %q, which the image does not copy into /usr/local/bin (it has %v)", df.Path, c[0], sortedKeys(bins)))
		}
	}
	return errors.Join(errs...)
}

var (
	tagsROS2 = regexp.MustCompile(`-tags[= ](\S*,)?ros2\b`)
	goBuild  = regexp.MustCompile(`\bgo build\b`)
)

// checkGoBuild: the binaries the image carries come from a stage that
// builds ./cmd/<name> with cgo, the ros2 tag and -trimpath.
func checkGoBuild(df *dockerfile) error {
	bins, err := imageBinaries(df)
	if err != nil {
		return err
	}
	if len(bins) == 0 {
		return fmt.Errorf("%s: the final stage copies no binaries into /usr/local/bin", df.Path)
	}
	var errs []error
	for _, name := range sortedKeys(bins) {
		st := df.stage(bins[name])
		if st == nil {
			errs = append(errs, fmt.Errorf("%s: %s comes from %q, not a stage of this file", df.Path, name, bins[name]))
			continue
		}
		built := false
		for _, in := range st.each("RUN") {
			if !goBuild.MatchString(in.Args) || !strings.Contains(in.Args, "./cmd/"+name) {
				continue
			}
			built = true
			if !tagsROS2.MatchString(in.Args) {
				errs = append(errs, fmt.Errorf("%s:%d: go build of %s without -tags ros2 (the agent would have no --ros2)", df.Path, in.Line, name))
			}
			if !strings.Contains(in.Args, "-trimpath") {
				errs = append(errs, fmt.Errorf("%s:%d: go build of %s without -trimpath", df.Path, in.Line, name))
			}
			if st.env()["CGO_ENABLED"] != "1" && !strings.Contains(in.Args, "CGO_ENABLED=1") {
				errs = append(errs, fmt.Errorf("%s:%d: go build of %s without CGO_ENABLED=1 (the ros2 tag needs cgo)", df.Path, in.Line, name))
			}
		}
		if !built {
			errs = append(errs, fmt.Errorf("%s: stage %s does not go build ./cmd/%s", df.Path, bins[name], name))
		}
	}
	return errors.Join(errs...)
}

// checkContextCopies: what the Dockerfile copies from the build context
// exists and is not left out by .dockerignore, and neither is anything the
// Go build reads (embedded files included: go list's EmbedFiles).
func checkContextCopies(df *dockerfile, root string, ignore dockerignore, needed []string) error {
	var errs []error
	for _, st := range df.Stages {
		cs, err := st.copies()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, c := range cs {
			if c.From != "" {
				continue
			}
			for _, src := range c.Srcs {
				if src == "." {
					continue
				}
				if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(src))); err != nil {
					errs = append(errs, fmt.Errorf("%s:%d: COPY %s: %w", df.Path, c.Line, src, err))
				}
				if ignore.excluded(src) {
					errs = append(errs, fmt.Errorf("%s:%d: COPY %s: .dockerignore leaves it out of the build context", df.Path, c.Line, src))
				}
			}
		}
	}
	for _, n := range needed {
		if ignore.excluded(n) {
			errs = append(errs, fmt.Errorf(".dockerignore leaves out %s, which the Go build of the binaries reads", n))
		}
	}
	return errors.Join(errs...)
}

// argDefault returns the default of the first ARG name in any stage (or
// global), expanded.
func argDefault(df *dockerfile, name string) (string, bool) {
	for _, st := range df.Stages {
		if v, ok := st.args(df.GlobalArgs)[name]; ok {
			return v, true
		}
	}
	v, ok := df.GlobalArgs[name]
	return v, ok
}

var (
	hexSHA256   = regexp.MustCompile(`^[0-9a-f]{64}$`)
	versionRe   = regexp.MustCompile(`^(\d+)\.(\d+)\.(\d+)$`)
	cudaImageRe = regexp.MustCompile(`(?:^|[:/-])cuda:(\d+)\.\d+`)
	ortCUDARe   = regexp.MustCompile(`gpu_cuda(\d+)`)
	trtCUDARe   = regexp.MustCompile(`\+cuda(\d+)\.\d+$`)
)

// checkPins: pinned checksums look like sha256 digests, and the ONNX
// Runtime version serves the C API version onnxruntime_go asks for
// (ORT_API_VERSION N is served from ONNX Runtime 1.N on).
func checkPins(df *dockerfile, ortAPI int) error {
	var errs []error
	for _, st := range df.Stages {
		for k, v := range st.args(df.GlobalArgs) {
			if strings.HasSuffix(k, "_SHA256") && v != "" && !hexSHA256.MatchString(v) {
				errs = append(errs, fmt.Errorf("%s: ARG %s=%q is not a sha256 digest", df.Path, k, v))
			}
		}
	}
	v, ok := argDefault(df, "ORT_VERSION")
	if !ok {
		return errors.Join(append(errs, fmt.Errorf("%s: no ARG ORT_VERSION", df.Path))...)
	}
	m := versionRe.FindStringSubmatch(v)
	if m == nil {
		return errors.Join(append(errs, fmt.Errorf("%s: ORT_VERSION %q: want MAJOR.MINOR.PATCH", df.Path, v))...)
	}
	major, _ := strconv.Atoi(m[1])
	minor, _ := strconv.Atoi(m[2])
	if major != 1 || minor < ortAPI {
		errs = append(errs, fmt.Errorf("%s: ONNX Runtime %s does not serve ORT API %d, which onnxruntime_go requests (needs 1.%d or newer)", df.Path, v, ortAPI, ortAPI))
	}
	if sum, _ := argDefault(df, "ORT_SHA256"); !hexSHA256.MatchString(sum) {
		errs = append(errs, fmt.Errorf("%s: ORT_SHA256 %q must pin the ONNX Runtime download", df.Path, sum))
	}
	return errors.Join(errs...)
}

// checkCUDAMajor: the ONNX Runtime GPU package, the TensorRT build and the
// CUDA runtime image are built for the same CUDA major version (a CUDA 12
// provider does not load next to CUDA 13 libraries).
func checkCUDAMajor(df *dockerfile) error {
	img := df.final().Base
	im := cudaImageRe.FindStringSubmatch(img)
	pkg, _ := argDefault(df, "ORT_PACKAGE")
	om := ortCUDARe.FindStringSubmatch(pkg)
	trt, _ := argDefault(df, "TRT_VERSION")
	tm := trtCUDARe.FindStringSubmatch(trt)
	if im == nil || om == nil || tm == nil {
		return fmt.Errorf("%s: cannot read the CUDA major of the runtime image %q, ORT_PACKAGE %q and TRT_VERSION %q", df.Path, img, pkg, trt)
	}
	if im[1] != om[1] || im[1] != tm[1] {
		return fmt.Errorf("%s: CUDA majors differ: runtime image %s (CUDA %s), ONNX Runtime %s (CUDA %s), TensorRT %s (CUDA %s)", df.Path, img, im[1], pkg, om[1], trt, tm[1])
	}
	return nil
}

var (
	aptInstallCurl = regexp.MustCompile(`apt-get install[^;&|]*\scurl(\s|$)`)
	installDir     = regexp.MustCompile(`install -d[^;&|]*`)
)

// checkRuntimeTools: the final stage installs curl (the healthchecks run it)
// and points ZEROHOP_ORT_LIB at a library it copies in.
func checkRuntimeTools(df *dockerfile) error {
	st := df.final()
	var errs []error
	curl := false
	for _, in := range st.each("RUN") {
		if aptInstallCurl.MatchString(in.Args) {
			curl = true
		}
	}
	if !curl {
		errs = append(errs, fmt.Errorf("%s: the final stage does not apt-get install curl, which the healthchecks run", df.Path))
	}
	lib := st.env()["ZEROHOP_ORT_LIB"]
	cs, err := st.copies()
	if err != nil {
		return err
	}
	copied := slices.ContainsFunc(cs, func(c copySpec) bool {
		d := path.Clean(c.Dest)
		return lib != "" && strings.HasPrefix(lib, d+"/")
	})
	if !copied {
		errs = append(errs, fmt.Errorf("%s: ZEROHOP_ORT_LIB %q is not under a folder the final stage copies in", df.Path, lib))
	}
	return errors.Join(errs...)
}

// checkImageDirs: the final stage creates dir owned by user (the socket
// folder: a named volume starts as a copy of it, ownership included).
func checkImageDirs(df *dockerfile, user string, dirs ...string) error {
	u, err := parseUser(user)
	if err != nil {
		return err
	}
	var errs []error
	for _, dir := range dirs {
		ok := false
		for _, in := range df.final().each("RUN") {
			for _, cmd := range installDir.FindAllString(in.Args, -1) {
				f := strings.Fields(cmd)
				if slices.Contains(f, dir) && flagValue(f, "-o") == strconv.Itoa(u.uid) && flagValue(f, "-g") == strconv.Itoa(u.gid) {
					ok = true
				}
			}
		}
		if !ok {
			errs = append(errs, fmt.Errorf("%s: the final stage does not `install -d -o %d -g %d ... %s`", df.Path, u.uid, u.gid, dir))
		}
	}
	return errors.Join(errs...)
}

func flagValue(fields []string, flag string) string {
	for i, f := range fields {
		if f == flag && i+1 < len(fields) {
			return fields[i+1]
		}
	}
	return ""
}

// checkPlatform: every stage is built for platform (the Jetson file: cgo
// rules out cross-compiling, so every stage runs as arm64).
func checkPlatform(df *dockerfile, platform string) error {
	var errs []error
	for _, st := range df.Stages {
		if st.Platform != platform {
			errs = append(errs, fmt.Errorf("%s: stage %d (%s) is FROM --platform=%q, want %s", df.Path, st.Index, orString(st.Name, st.Base), st.Platform, platform))
		}
	}
	return errors.Join(errs...)
}

// checkOverride: a compose override (compose.jetson.yaml) only changes how
// the image is built and how the GPU is reached (the runtime, the device
// groups, a GPU reservation Docker refuses: docker/README.md), and the
// ROS distribution the host's nodes run, for services the base file has,
// so that the checks of the base file hold for the merged one.
func checkOverride(base *composeFile, data []byte, dir string) error {
	var raw struct {
		Services map[string]map[string]yaml.Node `yaml:"services"`
	}
	if err := yaml.Unmarshal(data, &raw); err != nil {
		return err
	}
	over, err := parseCompose("override", data, nil)
	if err != nil {
		return err
	}
	allowed := []string{"build", "deploy", "environment", "group_add", "image", "platform", "runtime"}
	allowedEnv := []string{"ROS_AUTOMATIC_DISCOVERY_RANGE", "ROS_DISTRO"}
	var errs []error
	for _, name := range sortedKeys(raw.Services) {
		bs, ok := base.Services[name]
		if !ok {
			errs = append(errs, fmt.Errorf("service %s is not in compose.yaml", name))
			continue
		}
		for _, k := range sortedKeys(raw.Services[name]) {
			if !slices.Contains(allowed, k) {
				errs = append(errs, fmt.Errorf("service %s: the override sets %s; it may set only %v", name, k, allowed))
			}
		}
		ov := over.Services[name]
		for _, k := range sortedKeys(ov.Environment) {
			if !slices.Contains(allowedEnv, k) {
				errs = append(errs, fmt.Errorf("service %s: the override sets environment %s; it may set only %v", name, k, allowedEnv))
			}
		}
		if ov.Build != nil {
			if bs.Build == nil {
				errs = append(errs, fmt.Errorf("service %s: the override builds a service that compose.yaml does not build", name))
				continue
			}
			ctx := orString(ov.Build.Context, bs.Build.Context)
			if _, err := os.Stat(filepath.Join(dir, ctx, ov.Build.Dockerfile)); err != nil {
				errs = append(errs, fmt.Errorf("service %s: dockerfile %s: %w", name, ov.Build.Dockerfile, err))
			}
		}
	}
	return errors.Join(errs...)
}

// cameraROS2Only reports whether the camera takes flag name only with
// --source ros2 (cmd/camera/ros2_on.go refuses it with any other source).
func cameraROS2Only(name string) bool {
	return strings.HasPrefix(name, "ros2-") || name == "ros-domain"
}

// checkCameraSource: the camera's ROS 2 flags come with --source ros2; with
// any other source the camera refuses them and exits, which no flag check
// against --help sees.
func checkCameraSource(p *project) error {
	name, _, inv, err := p.invocation(cameraBinary)
	if err != nil {
		return err
	}
	var stray []string
	for _, f := range inv.Order {
		if cameraROS2Only(f) {
			stray = append(stray, "--"+f)
		}
	}
	if len(stray) == 0 {
		return nil
	}
	if src, _ := inv.value("source", p.flags[cameraBinary]); src != "ros2" {
		return fmt.Errorf("service %s: %s with --source=%q: the camera takes them only with --source ros2 (compose.ros2.yaml)", name, strings.Join(stray, ", "), src)
	}
	return nil
}

// rawCommands reads each service's command from a compose file's text as
// written, ${VAR:-default} not interpolated.
func rawCommands(data []byte) (map[string][]string, error) {
	var raw struct {
		Services map[string]struct {
			Command execForm `yaml:"command"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(data, &raw); err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for name, s := range raw.Services {
		out[name] = s.Command
	}
	return out, nil
}

// commandFlag splits a command word -name[=value] or --name[=value]; ok is
// false for a word that is not a flag.
func commandFlag(word string) (name, value string, hasValue, ok bool) {
	if word == "--" || !strings.HasPrefix(word, "-") {
		return "", "", false, false
	}
	name, value, hasValue = strings.Cut(strings.TrimPrefix(strings.TrimPrefix(word, "-"), "-"), "=")
	return name, value, hasValue, true
}

// rawFlagValue returns the value of the flag name in args as written
// (--name=value, or --name value).
func rawFlagValue(args []string, name string) (string, bool) {
	for i := 1; i < len(args); i++ {
		n, v, hasValue, ok := commandFlag(args[i])
		if !ok || n != name {
			continue
		}
		if !hasValue && i+1 < len(args) {
			v = args[i+1]
		}
		return v, true
	}
	return "", false
}

// withoutFlag returns args[1:] without the flag name and, when it is given
// as --name value, its value.
func withoutFlag(args []string, name string) []string {
	var out []string
	for i := 1; i < len(args); i++ {
		if n, _, hasValue, ok := commandFlag(args[i]); ok && n == name {
			if !hasValue {
				i++
			}
			continue
		}
		out = append(out, args[i])
	}
	return out
}

// checkROS2Override: the ROS 2 input override (compose.ros2.yaml) sets
// only the camera's command, because Compose replaces a command list
// rather than merging it. The command is compose.yaml's camera command,
// word for word as written (variables included) except for --source, which
// is ros2 written out (a variable would let ZEROHOP_SOURCE turn the ROS 2
// flags into the camera's refusal), plus ROS 2 flags only; so a flag added
// to or changed in compose.yaml's camera command and not here, or one added
// here that compose.yaml lacks, fails. The camera's --ros2-namespace is the
// agent's in compose.yaml, from one variable, so that both nodes live in
// one namespace, and its --ros-args (the tf topics) are the agent's.
func checkROS2Override(base *project, baseData, data []byte) error {
	var raw struct {
		Services map[string]map[string]yaml.Node `yaml:"services"`
	}
	if err := yaml.Unmarshal(data, &raw); err != nil {
		return err
	}
	cname, _, err := base.serviceOf(cameraBinary)
	if err != nil {
		return err
	}
	aname, _, err := base.serviceOf(agentBinary)
	if err != nil {
		return err
	}
	var errs []error
	for _, name := range sortedKeys(raw.Services) {
		if name != cname {
			errs = append(errs, fmt.Errorf("service %s: the override may change only the camera's service, %s", name, cname))
			continue
		}
		for _, k := range sortedKeys(raw.Services[name]) {
			if k != "command" {
				errs = append(errs, fmt.Errorf("service %s: the override sets %s; it may set only command", name, k))
			}
		}
	}
	baseCmds, err := rawCommands(baseData)
	if err != nil {
		return err
	}
	overCmds, err := rawCommands(data)
	if err != nil {
		return err
	}
	bc, oc := baseCmds[cname], overCmds[cname]
	if len(bc) == 0 || len(oc) == 0 {
		return errors.Join(append(errs, fmt.Errorf("service %s: no command in compose.yaml (%d words) or in the override (%d words)", cname, len(bc), len(oc)))...)
	}
	if oc[0] != bc[0] {
		errs = append(errs, fmt.Errorf("service %s: the override runs %q, compose.yaml %q", cname, oc[0], bc[0]))
	}
	if src, ok := rawFlagValue(oc, "source"); src != "ros2" {
		errs = append(errs, fmt.Errorf("service %s: the override's --source is %q (given: %v); want ros2 written out", cname, src, ok))
	}
	// The ROS arguments (the tf topics) are the agent's, word for word:
	// both nodes read tf from the same topics. compose.yaml's camera
	// (no ROS 2 source) has none.
	bc, bros := rosargs.Split(bc)
	oc, oros := rosargs.Split(oc)
	_, aros := rosargs.Split(baseCmds[aname])
	if len(bros) > 0 {
		errs = append(errs, fmt.Errorf("service %s: compose.yaml's camera command has --ros-args %q: it joins ROS 2 only with compose.ros2.yaml, which gives it the agent's", cname, bros))
	}
	if !slices.EqualFunc(oros, aros, slices.Equal) {
		errs = append(errs, fmt.Errorf("service %s: the override's --ros-args %q are not the agent's %q in compose.yaml: want both nodes' tf topics from the same variables", cname, oros, aros))
	}
	baseWords, overWords := withoutFlag(bc, "source"), withoutFlag(oc, "source")
	for _, w := range baseWords {
		if !slices.Contains(overWords, w) {
			errs = append(errs, fmt.Errorf("service %s: compose.yaml's camera command has %s, the override's does not: Compose replaces the whole list, so it would be lost", cname, w))
		}
	}
	for _, w := range overWords {
		if slices.Contains(baseWords, w) {
			continue
		}
		if n, _, _, ok := commandFlag(w); ok && !cameraROS2Only(n) {
			errs = append(errs, fmt.Errorf("service %s: the override adds %s, which compose.yaml's camera command lacks: put it there too (only --ros2-* flags belong here alone)", cname, w))
		}
	}
	ans, aok := rawFlagValue(baseCmds[aname], "ros2-namespace")
	cns, cok := rawFlagValue(oc, "ros2-namespace")
	switch {
	case !aok:
		errs = append(errs, fmt.Errorf("service %s: no --ros2-namespace in compose.yaml", aname))
	case !cok:
		errs = append(errs, fmt.Errorf("service %s: no --ros2-namespace in the override", cname))
	case ans != cns:
		errs = append(errs, fmt.Errorf("--ros2-namespace: %s %q, %s %q: want one variable for both nodes", cname, cns, aname, ans))
	case !strings.Contains(ans, "${"):
		errs = append(errs, fmt.Errorf("--ros2-namespace %q: want it from a variable (ZEROHOP_ROS2_NAMESPACE)", ans))
	}
	return errors.Join(errs...)
}

// ---- helpers ----

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func orString(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
