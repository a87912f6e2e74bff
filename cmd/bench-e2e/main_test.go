package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zerohop/zerohop/internal/childproc/childproctest"
)

func TestParseOptions(t *testing.T) {
	tests := []struct {
		args       []string
		seconds    int
		segments   int
		rate       float64
		transports []string
		err        string // substring of the error; "" for none
	}{
		{args: nil, seconds: 60, segments: 4, rate: 30, transports: []string{"unix", "copy"}},
		{args: []string{"--long"}, seconds: 180, segments: 4, rate: 30, transports: []string{"unix", "copy"}},
		{args: []string{"--seconds", "10", "--segments", "2", "--rate", "0.1", "--transports", "copy, unix+spin"}, seconds: 10, segments: 2, rate: 0.1, transports: []string{"copy", "unix+spin"}},
		{args: []string{"--rate", "10000", "--transports", "unix"}, seconds: 60, segments: 1, rate: 10000, transports: []string{"unix"}},
		{args: []string{"--seconds", "5", "--transports", "unix"}, seconds: 5, segments: 1, rate: 30, transports: []string{"unix"}},
		{args: []string{"--seconds", "15", "--segments", "3", "--transports", "unix"}, seconds: 15, segments: 3, rate: 30, transports: []string{"unix"}},
		{args: []string{"--transports", "unix,unix+lidar"}, seconds: 60, segments: 4, rate: 30, transports: []string{"unix", "unix+lidar"}},
		{args: []string{"--transports", "unix+lidar,unix+scan"}, seconds: 60, segments: 4, rate: 30, transports: []string{"unix+lidar", "unix+scan"}},
		{args: []string{"--seconds", "20", "--segments", "4"}, seconds: 20, segments: 4, rate: 30, transports: []string{"unix", "copy"}},
		{args: []string{"--segments", "12"}, seconds: 60, segments: 12, rate: 30, transports: []string{"unix", "copy"}},
		{args: []string{"--transports", "unix,copy,unix+spin", "--segments", "2"}, seconds: 60, segments: 2, rate: 30, transports: []string{"unix", "copy", "unix+spin"}},
		{args: []string{"--segments", "3"}, err: "--segments 3: want an even number (2, 4, ...) with 2 transports"},
		{args: []string{"--segments", "1"}, err: "--segments 1: want an even number"},
		{args: []string{"--transports", "unix,copy,unix+spin", "--segments", "5"}, err: "--segments 5: want an even number (2, 4, ...) with 3 transports"},
		{args: []string{"--segments", "0"}, err: "--segments 0: want 1 or more"},
		{args: []string{"--segments", "-2", "--transports", "unix"}, err: "--segments -2: want 1 or more"},
		{args: []string{"--seconds", "5"}, err: "--seconds 5 with 2 transports: want 10 or more"},
		{args: []string{"--seconds", "7", "--segments", "2"}, err: "--seconds 7 with 2 transports: want 10 or more"},
		// Fewer default segments for a short run: 2 at 10 to 19 s, 4 from 20 s.
		{args: []string{"--seconds", "10"}, seconds: 10, segments: 2, rate: 30, transports: []string{"unix", "copy"}},
		{args: []string{"--seconds", "19"}, seconds: 19, segments: 2, rate: 30, transports: []string{"unix", "copy"}},
		{args: []string{"--seconds", "20"}, seconds: 20, segments: 4, rate: 30, transports: []string{"unix", "copy"}},
		{args: []string{"--seconds", "19", "--segments", "4"}, err: "--seconds 19 over --segments 4 gives 4.75s per segment"},
		{args: []string{"--segments", "14"}, err: "--seconds 60 over --segments 14"},
		{args: []string{"--seconds", "9", "--segments", "2", "--transports", "unix"}, err: "--seconds 9 over --segments 2 gives 4.5s"},
		{args: []string{"--segments", "9223372036854775807", "--transports", "unix"}, err: "--seconds 60 over --segments 9223372036854775807 gives 0s"},
		{args: []string{"--transports", "copy+lidar"}, err: `unknown transport "copy+lidar"`},
		{args: []string{"--transports", "bogus"}, err: `--transports "bogus": unknown transport "bogus"`},
		{args: []string{"--transports", "unix,"}, err: `unknown transport ""`},
		{args: []string{"--transports", ""}, err: `--transports ""`},
		{args: []string{"--transports", "copy+spin"}, err: `unknown transport "copy+spin"`},
		{args: []string{"--transports", "unix,copy,unix"}, err: "unix given twice"},
		{args: []string{"--rate", "0.0001"}, err: "--rate 0.0001: want 0.1 to 10000 Hz"},
		{args: []string{"--rate", "0"}, err: "--rate 0:"},
		{args: []string{"--rate", "-30"}, err: "--rate -30:"},
		{args: []string{"--rate", "NaN"}, err: "--rate NaN:"},
		{args: []string{"--rate", "+Inf"}, err: "--rate +Inf:"},
		{args: []string{"--rate", "20000"}, err: "--rate 20000:"},
		{args: []string{"--seconds", "4"}, err: "--seconds 4: want 5 to 86400"},
		{args: []string{"--seconds", "-1"}, err: "--seconds -1:"},
		{args: []string{"--seconds", "9223372036854775807"}, err: "--seconds 9223372036854775807:"},
		{args: []string{"--bin", ""}, err: `--bin ""`},
		{args: []string{"10"}, err: "unexpected arguments"},
		{args: []string{"--nope"}, err: "flag provided but not defined: -nope"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			o, err := parseOptions(tt.args, io.Discard)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("parseOptions(%q) = %+v, %v; want an error containing %q", tt.args, o, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseOptions(%q): %v", tt.args, err)
			}
			if o.seconds != tt.seconds || o.segments != tt.segments || o.rate != tt.rate || !slices.Equal(o.transports, tt.transports) {
				t.Fatalf("parseOptions(%q) = %+v, want seconds %d, segments %d, rate %g, transports %q", tt.args, o, tt.seconds, tt.segments, tt.rate, tt.transports)
			}
		})
	}
	if _, err := parseOptions([]string{"-h"}, io.Discard); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("parseOptions(-h) = %v, want flag.ErrHelp", err)
	}
}

// fakeBin writes camera and agent shell scripts into a new directory.
func fakeBin(t *testing.T, camera, agent string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range map[string]string{"camera": camera, "agent": agent} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestChildExitingBeforeHealthyIsReported(t *testing.T) {
	checkTemp := childproctest.EmptyTempDir(t)
	bin := fakeBin(t,
		`echo "camera: something is wrong" >&2; exit 3`,
		`sleep 0.1; echo "agent: no camera" >&2; exit 4`)
	start := time.Now()
	err := run(context.Background(), []string{"--bin", bin, "--seconds", "5", "--out", "", "--transports", "copy"})
	if err == nil {
		t.Fatal("run succeeded with children that exit at once")
	}
	for _, want := range []string{"copy transport, segment 1 of 1: before the agent became healthy", "camera exited (exit status 3)", "camera: something is wrong", "agent exited (exit status 4)", "agent: no camera"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("run took %v to notice the exits", d)
	}
	checkTemp()
}

func TestCancelStopsChildren(t *testing.T) {
	checkTemp := childproctest.EmptyTempDir(t)
	pids := filepath.Join(t.TempDir(), "pids")
	// Children that never become healthy; each records
	// its pid and then execs sleep, which SIGTERM ends.
	body := `echo $$ >>` + pids + `; exec sleep 60`
	bin := fakeBin(t, body, body)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(500*time.Millisecond, cancel)
	start := time.Now()
	err := run(ctx, []string{"--bin", bin, "--seconds", "20", "--out", ""})
	if err == nil || !strings.Contains(err.Error(), "interrupted") {
		t.Fatalf("run after cancel = %v, want an interrupted error", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("run took %v to stop after cancel", d)
	}
	b, _ := os.ReadFile(pids)
	ps := strings.Fields(string(b))
	if len(ps) != 2 {
		t.Fatalf("pids recorded: %q, want 2", ps)
	}
	for _, pid := range ps {
		if _, err := os.Stat("/proc/" + pid); err == nil {
			t.Errorf("child %s still exists", pid)
		}
	}
	checkTemp()
}

// Children that run and never get the agent healthy (a hang: in one run in
// about 30 the copy baseline's agent got no frame in 30 s) are reported
// with how far the frames got, then stopped with SIGQUIT, on which a Go
// program writes its goroutines to stderr; each child's stderr is kept in
// a file the error names.
func TestNeverHealthyKeepsTheChildrensLogs(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	body := func(name string) string {
		return `echo "` + name + ` up" >&2; trap 'echo "` + name + `: SIGQUIT" >&2; kill $!; exit 2' QUIT; sleep 60 & wait`
	}
	bin := fakeBin(t, body("camera"), body("agent"))
	o := options{rate: 30, bin: bin, healthTimeout: time.Second}
	start := time.Now()
	_, err := measure(context.Background(), o, "copy", 5*time.Second)
	if err == nil {
		t.Fatal("measure succeeded with an agent that never answers")
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("measure took %v", d)
	}
	for _, want := range []string{"agent never became healthy within 1s", "camera clouds published: ", "camera frames late: ", "agent counters: ", "agent.stderr", "camera.stderr"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
	for _, name := range []string{"agent", "camera"} {
		logs, _ := filepath.Glob(filepath.Join(tmp, "zerohop-bench*", name+".stderr"))
		if len(logs) != 1 {
			t.Fatalf("%s's stderr: %d files kept in %s, want 1", name, len(logs), tmp)
		}
		if !strings.Contains(err.Error(), logs[0]) {
			t.Errorf("error %q does not name %s", err, logs[0])
		}
		b, rerr := os.ReadFile(logs[0])
		if rerr != nil || !strings.Contains(string(b), name+" up") || !strings.Contains(string(b), name+": SIGQUIT") {
			t.Errorf("%s: %q (%v), want its start line and its SIGQUIT line", logs[0], b, rerr)
		}
	}
}
