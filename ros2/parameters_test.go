//go:build ros2 && cgo

package ros2

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zerohop/zerohop/ros2/params"
	"github.com/zerohop/zerohop/ros2/rosargs"
)

// paramClientPath is testdata/paramclient, a stand-in for a `ros2 param`
// client as rmw_cyclonedds implements service clients (request header,
// clientid, waiting for the service), built by TestMain.
var paramClientPath string

// callParams runs the client against node in cfg's domain and returns its
// output lines before "done".
func callParams(t *testing.T, cfg Config, node string, args ...string) []string {
	t.Helper()
	return callParamsEnv(t, cfg, nil, node, args...)
}

// callParamsEnv is callParams with more environment variables.
func callParamsEnv(t *testing.T, cfg Config, env []string, node string, args ...string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, paramClientPath, append([]string{fmt.Sprint(cfg.Domain), node}, args...)...)
	cmd.Env = append(append(os.Environ(), "CYCLONEDDS_URI="+cfg.CycloneConfig()), env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("paramclient %q: %v\n%s", args, err, out)
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) < 2 || lines[0] != "available" || lines[len(lines)-1] != "done" {
		t.Fatalf("paramclient %q: output %q", args, lines)
	}
	return lines[1 : len(lines)-1]
}

func testParams(t *testing.T) *params.Set {
	t.Helper()
	s, err := params.NewSet([]params.Parameter{
		{Name: "watchdog", Value: params.Value{Type: params.Double, Double: 0.2}, Description: "stale-frame limit", Constraints: params.ReadAtStart, ReadOnly: true},
		{Name: "ros2", Value: params.Value{Type: params.Bool, Bool: true}, ReadOnly: true},
		{Name: "max_points", Value: params.Value{Type: params.Integer, Integer: -131072}, ReadOnly: true},
		{Name: "camera", Value: params.Value{Type: params.String, String: "synthetic ü"}, ReadOnly: true},
		{Name: "diagnostic_updater.period", Value: params.Value{Type: params.Double, Double: 1}, ReadOnly: true, Range: &params.Range{From: 0.01, To: 3600}},
		{Name: "mode", Value: params.Value{Type: params.String, String: "x"}, Constraints: params.ChangesWhileRunning, Apply: func(v params.Value) error {
			if v.String == "bad" {
				return errors.New("not a mode")
			}
			return nil
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// serveTestParams is a participant for node (in the root namespace, or in
// ns), in a fresh loopback domain, serving testParams; both are closed at
// cleanup.
func serveTestParams(t *testing.T, ns, node string) (Config, *Participant, *ParameterServer) {
	t.Helper()
	cfg := loopbackConfig(t)
	cfg.NodeName, cfg.Namespace = node, ns
	p, err := NewParticipant(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	srv, err := p.ServeParameters(testParams(t), ParameterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return cfg, p, srv
}

// Each service answers a client that behaves as rmw_cyclonedds's does,
// for a node in a namespace: the topics, the header echo, the values.
func TestParameterServicesAnswerARMWClient(t *testing.T) {
	cfg, _, srv := serveTestParams(t, "/robot1", "zerohop_agent")
	node := "/robot1/zerohop_agent"
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"list", "0"}, []string{"name\tcamera", "name\tdiagnostic_updater.period", "name\tmax_points", "name\tmode", "name\tros2", "name\twatchdog", "prefix\tdiagnostic_updater"}},
		{[]string{"list", "1", "diagnostic_updater"}, []string{"name\tdiagnostic_updater.period", "prefix\tdiagnostic_updater"}},
		{[]string{"get", "watchdog", "ros2", "max_points", "camera"}, []string{
			"value\t3\t0\t0\t0.20000000000000001\t\t0",
			"value\t1\t1\t0\t0\t\t0",
			"value\t2\t0\t-131072\t0\t\t0",
			"value\t4\t0\t0\t0\tsynthetic ü\t0",
		}},
		// A name not declared empties the answer, as in rclcpp and rclpy.
		{[]string{"get", "watchdog", "nope"}, nil},
		{[]string{"types", "camera", "watchdog"}, []string{"type\t4", "type\t3"}},
		{[]string{"types", "camera", "nope"}, nil},
		{[]string{"describe", "nope"}, nil},
		{[]string{"describe", "watchdog"}, []string{"descriptor\twatchdog\t3\t1\t0\tstale-frame limit\t" + params.ReadAtStart + "\t0\t0"}},
		// A range, for rqt_reconfigure's slider.
		{[]string{"describe", "diagnostic_updater.period"}, []string{"descriptor\tdiagnostic_updater.period\t3\t1\t0\t\t\t1\t0", "range\t0.01\t3600\t0"}},
		{[]string{"set", "watchdog=0.5", "mode=y", "nope=1"}, []string{
			"result\t0\tparameter 'watchdog' is read-only: this node reads its parameters at start; restart it with --ros-args -p watchdog:=0.5 (or set it in the launch file's parameters)",
			"result\t1\t",
			"result\t0\tparameter 'nope' is not declared by this node (ros2 param list shows the ones it has)",
		}},
		{[]string{"set_atomically", "mode=z", "camera=file"}, []string{"result\t0\tparameter 'camera' is read-only: this node reads its parameters at start; restart it with --ros-args -p camera:=file (or set it in the launch file's parameters)"}},
		{[]string{"set", "mode=bad"}, []string{`result	0	parameter 'mode' = "bad": not a mode`}},
		// The first set took; the atomic one and the refused one did not.
		{[]string{"get", "mode"}, []string{"value\t4\t0\t0\t0\ty\t0"}},
		{[]string{"describe", "mode"}, []string{"descriptor\tmode\t4\t0\t0\t\t" + params.ChangesWhileRunning + "\t0\t0"}},
	} {
		got := callParams(t, cfg, node, tc.args...)
		if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
			t.Errorf("%q:\n got %q\nwant %q", tc.args, got, tc.want)
		}
	}
	if n := srv.Served(); n != 14 {
		t.Errorf("Served() = %d after 14 calls", n)
	}
	if n := srv.Dropped(); n != 0 {
		t.Errorf("Dropped() = %d", n)
	}
}

// The node announces its parameters on /parameter_events as rclcpp's
// nodes do (rqt_reconfigure follows them there): all of them as new at
// start, then one event per parameter a set_parameters call changed, one
// for a whole atomic set, none for a refused set.
func TestParameterEvents(t *testing.T) {
	cfg, _, srv := serveTestParams(t, "/robot1", "zerohop_agent")
	sub := startPeer(t, cfg, "sub", "param_event", "rt/parameter_events", "reliable", "3")
	sub.expect("MATCHED")
	pub := fields(sub.expect("PUBLICATION"))
	if pub["type"] != "rcl_interfaces::msg::dds_::ParameterEvent_" || pub["userdata"] != "typehash="+hashParameterEvent+";" {
		t.Errorf("PUBLICATION %v", pub)
	}
	waitFor(t, "the event writer to match", func() bool { return srv.events.matched.Load() == 1 })
	hx := func(s string) string { return hex.EncodeToString([]byte(s)) }
	node := hx("/robot1/zerohop_agent")
	// The start's event went out before the subscriber matched (volatile,
	// as rclcpp's); the same again, now that it listens.
	if err := srv.announce([]string{"camera", "mode", "watchdog"}, true); err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	callParams(t, cfg, "/robot1/zerohop_agent", "set", "mode=y", "watchdog=0.5") // the second is read-only
	callParams(t, cfg, "/robot1/zerohop_agent", "set", "mode=bad")               // refused by Apply
	callParams(t, cfg, "/robot1/zerohop_agent", "set_atomically", "mode=z")
	for i, want := range []map[string]string{
		{"node": node, "new": "3", "changed": "0", "deleted": "0",
			"n0": hx("camera") + ",4,0,0,0," + hx("synthetic ü"), "n1": hx("mode") + ",4,0,0,0," + hx("x"), "n2": hx("watchdog") + ",3,0,0,0.20000000000000001,"},
		{"node": node, "new": "0", "changed": "1", "c0": hx("mode") + ",4,0,0,0," + hx("y")},
		{"node": node, "new": "0", "changed": "1", "c0": hx("mode") + ",4,0,0,0," + hx("z")},
	} {
		got := fields(sub.expect("SAMPLE"))
		for k, v := range want {
			if got[k] != v {
				t.Errorf("event %d: %s = %s, want %s (%v)", i, k, got[k], v, got)
			}
		}
		sec, _ := strconv.ParseInt(got["sec"], 10, 64)
		if d := time.Unix(sec, 0).Sub(before.Truncate(time.Second)); d < -5*time.Second || d > 5*time.Second {
			t.Errorf("event %d: stamp %s s, sets at %v", i, got["sec"], before)
		}
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if err := srv.announce([]string{"mode"}, false); err != ErrClosed {
		t.Errorf("announce after Close: %v, want ErrClosed", err)
	}
}

// Under a simulator's clock the events carry its time (ParameterOptions.
// Clock, SimClock.Now), and the node is named as the node, whatever
// remapping rules move topics ending in a service's name.
func TestParameterEventsUnderSimTime(t *testing.T) {
	cfg := loopbackConfig(t)
	cfg.NodeName, cfg.Namespace = "zerohop_camera", "/sim"
	args, err := rosargs.Parse([]string{"-r", "/sim/zerohop_camera/describe_parameters:=/elsewhere/describe_parameters"})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Remaps = args.Remaps
	p, err := NewParticipant(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	srv, err := p.ServeParameters(testParams(t), ParameterOptions{Clock: func() time.Time { return time.Unix(42, 7) }})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	sub := startPeer(t, cfg, "sub", "param_event", "rt/parameter_events", "reliable", "1")
	sub.expect("MATCHED")
	waitFor(t, "the event writer to match", func() bool { return srv.events.matched.Load() == 1 })
	if err := srv.announce([]string{"mode"}, false); err != nil {
		t.Fatal(err)
	}
	got := fields(sub.expect("SAMPLE"))
	if got["sec"] != "42" || got["nanosec"] != "7" || got["node"] != hex.EncodeToString([]byte("/sim/zerohop_camera")) || got["changed"] != "1" {
		t.Errorf("event %v: want stamp 42.000000007 (the clock's) from /sim/zerohop_camera", got)
	}
}

// The services' endpoints belong to the node on the ROS graph, so that
// `ros2 service list` and `ros2 param list` find them under it.
func TestParameterServicesOnTheGraph(t *testing.T) {
	_, p, srv := serveTestParams(t, "", "cam")
	p.mu.Lock()
	var topics []string
	for _, ep := range p.endpoints {
		topics = append(topics, fmt.Sprintf("%s %s %v", ep.ddsTopic, ep.typ.ddsName(), ep.writer))
	}
	p.mu.Unlock()
	for _, want := range []string{
		"rq/cam/get_parametersRequest rcl_interfaces::srv::dds_::GetParameters_Request_ false",
		"rr/cam/get_parametersReply rcl_interfaces::srv::dds_::GetParameters_Response_ true",
		"rq/cam/set_parameters_atomicallyRequest rcl_interfaces::srv::dds_::SetParametersAtomically_Request_ false",
		"rr/cam/describe_parametersReply rcl_interfaces::srv::dds_::DescribeParameters_Response_ true",
	} {
		if !strings.Contains(strings.Join(topics, "\n"), want) {
			t.Errorf("no endpoint %q among\n%s", want, strings.Join(topics, "\n"))
		}
	}
	if !strings.Contains(strings.Join(topics, "\n"), "rt/parameter_events rcl_interfaces::msg::dds_::ParameterEvent_ true") {
		t.Errorf("no /parameter_events writer among\n%s", strings.Join(topics, "\n"))
	}
	if len(topics) != 13 {
		t.Errorf("%d endpoints, want 13: six services' two and the event writer", len(topics))
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Close(); err != nil {
		t.Fatal("second Close:", err)
	}
	p.mu.Lock()
	left := len(p.endpoints)
	p.mu.Unlock()
	if left != 0 {
		t.Errorf("%d endpoints left after Close", left)
	}
}

// A client whose reply reader the server cannot match (its clientid
// differs from its request writer's) gets no reply: the server waits for
// it as rmw_cyclonedds's does, then counts the request as dropped instead
// of writing into the void, and keeps serving the next client.
func TestParameterServicesWaitForTheClientsReplyReader(t *testing.T) {
	cfg, _, srv := serveTestParams(t, "", "agent")
	if got := callParamsEnv(t, cfg, []string{"PARAMCLIENT_DEAF=1"}, "/agent", "get", "watchdog"); strings.Join(got, "|") != "no reply" {
		t.Errorf("deaf client got %q", got)
	}
	waitFor(t, "the request to be dropped", func() bool { return srv.Dropped() == 1 })
	if n := srv.Served(); n != 0 {
		t.Errorf("Served() = %d: a reply no client could match was written", n)
	}
	if got := callParams(t, cfg, "/agent", "types", "ros2"); strings.Join(got, "|") != "type\t1" {
		t.Errorf("next client got %q", got)
	}
}

// Closing the participant first closes its parameter server first: the
// goroutine stops before the endpoints it reads go, and the server's own
// Close afterwards is a no-op.
func TestParticipantClosesItsParameterServer(t *testing.T) {
	cfg, p, srv := serveTestParams(t, "", "n")
	if got := callParams(t, cfg, "/n", "types", "ros2"); strings.Join(got, "|") != "type\t1" {
		t.Errorf("got %q", got)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-srv.done:
	default:
		t.Fatal("the server's goroutine still runs after Participant.Close")
	}
	if err := srv.Close(); err != nil {
		t.Fatal("server Close after the participant's:", err)
	}
	if _, err := p.ServeParameters(testParams(t), ParameterOptions{}); err != ErrClosed {
		t.Errorf("ServeParameters on a closed participant: %v, want ErrClosed", err)
	}
}

// A reply is rmw_cyclonedds's header then the response, byte for byte.
func TestParameterRepliesOnTheWire(t *testing.T) {
	cfg, _, _ := serveTestParams(t, "", "wire")
	for _, tc := range []struct {
		args []string
		body func(c *cdr)
	}{
		{[]string{"get", "ros2", "camera"}, func(c *cdr) {
			c.u32(2)
			for _, v := range []params.Value{{Type: params.Bool, Bool: true}, {Type: params.String, String: "synthetic ü"}} {
				c.u8(uint8(v.Type))
				if v.Bool {
					c.u8(1)
				} else {
					c.u8(0)
				}
				c.u64(uint64(v.Integer))
				c.f64(v.Double)
				c.str(v.String)
				for range 5 { // the five arrays, empty
					c.u32(0)
				}
			}
		}},
		{[]string{"types", "camera", "watchdog"}, func(c *cdr) { c.u32(2); c.u8(4); c.u8(3) }},
		{[]string{"list", "0", "diagnostic_updater"}, func(c *cdr) {
			c.u32(1)
			c.str("diagnostic_updater.period")
			c.u32(1)
			c.str("diagnostic_updater")
		}},
		{[]string{"set_atomically", "mode=m"}, func(c *cdr) { c.u8(1); c.str("") }},
		{[]string{"describe", "diagnostic_updater.period"}, func(c *cdr) {
			c.u32(1)
			c.str("diagnostic_updater.period")
			c.u8(3)   // double
			c.str("") // description
			c.str("") // additional_constraints
			c.u8(1)   // read_only
			c.u8(0)   // dynamic_typing
			c.u32(1)  // floating_point_range
			c.f64(0.01)
			c.f64(3600)
			c.f64(0)
			c.u32(0) // integer_range
		}},
	} {
		lines := callParamsEnv(t, cfg, []string{"PARAMCLIENT_RAW=1"}, "/wire", tc.args...)
		if len(lines) != 2 || !strings.HasPrefix(lines[0], "guid\t") || !strings.HasPrefix(lines[1], "raw\t") {
			t.Fatalf("%q: %q", tc.args, lines)
		}
		guid, err := strconv.ParseUint(strings.TrimPrefix(lines[0], "guid\t"), 16, 64)
		if err != nil {
			t.Fatal(err)
		}
		want := newCDR()
		want.u64(guid) // the client's request writer, echoed
		want.u64(1)    // the request's sequence number
		tc.body(want)
		got := strings.TrimPrefix(lines[1], "raw\t")
		if w := hex.EncodeToString(want.done()); got != w {
			t.Errorf("%q:\n got %s\nwant %s (rmw_cyclonedds's header, then the response, by hand)", tc.args, got, w)
		}
	}
}

// A request asking for more names than maxRequestNames (any participant
// in the domain may send one; answered, 200k names cost tens of MiB that
// stayed, found in review) is taken, counted and not answered, and the
// server serves on; one at the limit is answered.
func TestParameterRequestTooLargeIsNotAnswered(t *testing.T) {
	cfg, _, srv := serveTestParams(t, "", "agent")
	over := []string{fmt.Sprintf("PARAMCLIENT_REPEAT=%d", maxRequestNames+1)}
	if got := callParamsEnv(t, cfg, over, "/agent", "types", "watchdog"); strings.Join(got, "|") != "no reply" {
		t.Fatalf("a request for %d names got %d lines, the first %q: want no reply", maxRequestNames+1, len(got), got[0])
	}
	waitFor(t, "the request to be dropped", func() bool { return srv.Dropped() == 1 })
	if n := srv.Served(); n != 0 {
		t.Errorf("Served() = %d after a request too large", n)
	}
	at := []string{fmt.Sprintf("PARAMCLIENT_REPEAT=%d", maxRequestNames)}
	got := callParamsEnv(t, cfg, at, "/agent", "types", "watchdog")
	if len(got) != maxRequestNames || got[0] != "type\t3" {
		t.Errorf("a request for %d names got %d lines, the first %q: want one type each", maxRequestNames, len(got), got[0])
	}
}
