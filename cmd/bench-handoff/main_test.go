package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zerohop/zerohop/internal/childproc/childproctest"
)

// failChildEnv makes a re-executed subscriber (this test binary, see
// TestMain) print a line to stderr and exit 3 at once.
const failChildEnv = "BENCH_HANDOFF_TEST_CHILD_FAIL"

// TestMain runs the subscriber when the benchmark under test re-executes
// the test binary, as main does for the real one.
func TestMain(m *testing.M) {
	if spec, ok := os.LookupEnv(childEnv); ok {
		if _, fail := os.LookupEnv(failChildEnv); fail {
			fmt.Fprintln(os.Stderr, "test subscriber: failing as asked")
			os.Exit(3)
		}
		if err := runChild(spec); err != nil {
			fmt.Fprintln(os.Stderr, "bench-handoff subscriber:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestParseConfig(t *testing.T) {
	tests := []struct {
		args []string
		err  string // substring of the error; "" for none
	}{
		{args: nil},
		{args: []string{"--count", "1", "--warmup", "0", "--gap", "0", "--chunk", "1", "--slots", "2", "--sizes", "8"}},
		{args: []string{"--count", "10000000", "--warmup", "10000000", "--gap", "1s"}},
		{args: []string{"--slots", "4", "--sizes", "1K,1023MiB"}},
		{args: []string{"--count", "9223372036854775807"}, err: "--count 9223372036854775807: want 1 to 10000000"},
		{args: []string{"--count", "10000001"}, err: "--count 10000001:"},
		{args: []string{"--count", "0"}, err: "--count 0:"},
		{args: []string{"--count", "-5"}, err: "--count -5:"},
		{args: []string{"--count", "99999999999999999999"}, err: "-count"}, // the flag package's own parse error
		{args: []string{"--warmup", "9223372036854775807"}, err: "--warmup 9223372036854775807:"},
		{args: []string{"--warmup", "-1"}, err: "--warmup -1:"},
		{args: []string{"--gap", "-1ms"}, err: "--gap -1ms:"},
		{args: []string{"--gap", "1h"}, err: "--gap 1h0m0s: want 0 to 1s"},
		{args: []string{"--chunk", "0"}, err: "--chunk 0:"},
		{args: []string{"--slots", "1"}, err: "--slots 1:"},
		{args: []string{"--slots", "1025"}, err: "--slots 1025:"},
		{args: []string{"--slots", "1024", "--sizes", "16MiB"}, err: "--slots 1024 × --sizes 16 MiB: a zero-copy pool of 16384 MiB, want at most 4096 MiB"},
		{args: []string{"--sizes", "0"}, err: "--sizes"},
		{args: []string{"--pin-cpu", "-2"}, err: "--pin-cpu -2:"},
		{args: []string{"--pin-cpu", "100000"}, err: "--pin-cpu 100000:"},
		{args: []string{"--runs", "0"}, err: "--runs 0:"},
		{args: []string{"extra"}, err: "unexpected arguments"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			cfg, _, err := parseConfig(tt.args, io.Discard)
			if tt.err == "" {
				if err != nil {
					t.Fatalf("parseConfig(%q): %v", tt.args, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("parseConfig(%q) = %+v, %v; want an error containing %q", tt.args, cfg, err, tt.err)
			}
		})
	}
	if _, _, err := parseConfig([]string{"-h"}, io.Discard); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("parseConfig(-h) = %v, want flag.ErrHelp", err)
	}
}

// children lists the pids of this process's living children.
func children(t *testing.T) []string {
	t.Helper()
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", os.Getpid()))
	var pids []string
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		pids = append(pids, strings.Fields(string(b))...)
	}
	slices.Sort(pids)
	return pids
}

func TestRunSmall(t *testing.T) {
	checkTemp := childproctest.EmptyTempDir(t)
	args := []string{"--sizes", "1KiB", "--count", "20", "--warmup", "5", "--chunk", "10", "--gap", "0", "--out", ""}
	// The report goes to stdout: drop it.
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	stdout := os.Stdout
	os.Stdout = null
	defer func() { os.Stdout = stdout }()
	if err := run(context.Background(), args); err != nil {
		t.Fatal(err)
	}
	checkTemp()
	if c := children(t); len(c) != 0 {
		t.Errorf("children left: %v", c)
	}
}

func TestSubscriberExitingEarlyIsReported(t *testing.T) {
	checkTemp := childproctest.EmptyTempDir(t)
	t.Setenv(failChildEnv, "1")
	start := time.Now()
	err := run(context.Background(), []string{"--sizes", "1KiB", "--count", "20", "--out", ""})
	if err == nil {
		t.Fatal("run succeeded with subscribers that exit at once")
	}
	for _, want := range []string{"subscriber process exited (exit status 3)", "test subscriber: failing as asked"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("run took %v to notice the exit", d)
	}
	checkTemp()
	if c := children(t); len(c) != 0 {
		t.Errorf("children left: %v", c)
	}
}

func TestCancelStopsSubscribers(t *testing.T) {
	checkTemp := childproctest.EmptyTempDir(t)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	// 1000 messages at 1 ms apiece: still running when cancelled.
	start := time.Now()
	err := run(ctx, []string{"--sizes", "1KiB", "--count", "1000", "--warmup", "0", "--gap", "1ms", "--out", ""})
	if err == nil || !strings.Contains(err.Error(), "interrupted") {
		t.Fatalf("run after cancel = %v, want an interrupted error", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("run took %v to stop after cancel", d)
	}
	checkTemp()
	if c := children(t); len(c) != 0 {
		t.Errorf("children left: %v", c)
	}
}
