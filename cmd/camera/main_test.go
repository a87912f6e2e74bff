package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zerohop/zerohop/camera"
	"github.com/zerohop/zerohop/internal/sockdir"
)

// Flag values out of range are refused before anything starts, naming the
// flag and the value.
func TestRunRefusesBadSizingFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--subscribers", "0"}, "--subscribers 0: want 1..31"},
		{[]string{"--subscribers", "32"}, "--subscribers 32: want 1..31"},
		{[]string{"--slots", "2000000"}, "--slots 2000000: at most 1048576"},
		{[]string{"--slots", "1"}, "--slots 1: at least 2"},
		// camera.CheckSource's list lacked ros2, which --help offers.
		{[]string{"--source", "bogus"}, `--source "bogus": want "synthetic", "replay:DIR" or "ros2"`},
	} {
		err := run(append(tc.args, "--socket", t.TempDir()+"/c.sock", "--metrics", "", "--frames", "1"))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("run(%q) = %v, want an error with %q", tc.args, err, tc.want)
		}
	}
}

// --image-size is WIDTHxHEIGHT or "none" (no images: a LiDAR-only
// camera); anything else is refused, naming the flag and the value.
func TestSetImageSize(t *testing.T) {
	for _, tc := range []struct {
		in             string
		wantW, wantH   int
		wantNoImage    bool
		wantErrContain string
	}{
		{in: "1280x720", wantW: 1280, wantH: 720},
		{in: "32x16", wantW: 32, wantH: 16},
		{in: "none", wantNoImage: true},
		{in: "", wantErrContain: `--image-size ""`},
		{in: "None", wantErrContain: `--image-size "None"`},
		{in: "no", wantErrContain: `--image-size "no"`},
		{in: "0x0", wantErrContain: `--image-size "0x0"`},
		{in: "0x720", wantErrContain: `--image-size "0x720"`},
		{in: "-1x720", wantErrContain: `--image-size "-1x720"`},
		{in: "1280x", wantErrContain: `--image-size "1280x"`},
		{in: "1280", wantErrContain: `--image-size "1280"`},
		{in: "1280*720", wantErrContain: `--image-size "1280*720"`},
		{in: "1280x720x3", wantErrContain: `--image-size "1280x720x3"`},
	} {
		// A value from an earlier flag must not survive: start from the
		// opposite of what is wanted.
		cfg := camera.NodeConfig{ImageWidth: 7, ImageHeight: 7, NoImage: !tc.wantNoImage}
		err := setImageSize(&cfg, tc.in)
		if tc.wantErrContain != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErrContain) || !strings.Contains(err.Error(), `"none"`) {
				t.Errorf("setImageSize(%q) = %v, want an error with %q offering \"none\"", tc.in, err, tc.wantErrContain)
			}
			continue
		}
		if err != nil {
			t.Errorf("setImageSize(%q): %v", tc.in, err)
			continue
		}
		if cfg.ImageWidth != tc.wantW || cfg.ImageHeight != tc.wantH || cfg.NoImage != tc.wantNoImage {
			t.Errorf("setImageSize(%q): %dx%d NoImage %t, want %dx%d NoImage %t",
				tc.in, cfg.ImageWidth, cfg.ImageHeight, cfg.NoImage, tc.wantW, tc.wantH, tc.wantNoImage)
		}
	}
}

// run takes --image-size none through to a camera that renders clouds and
// stops after --frames; a bad value stops it before anything starts.
func TestRunImageSize(t *testing.T) {
	for _, tc := range []struct {
		size   string
		source string // "" for synthetic
		want   string // "" for no error
	}{
		{"none", "", ""},
		{"nopes", "", `--image-size "nopes": want WIDTHxHEIGHT`},
		{"64x", "", `--image-size "64x": want WIDTHxHEIGHT`},
		// The ROS 2 source's images are its topic's: say which flag.
		{"none", "ros2", `with --source ros2 give --ros2-image-topic ""`},
	} {
		t.Run(tc.size+tc.source, func(t *testing.T) {
			args := []string{"--image-size", tc.size, "--beams", "4", "--azimuth-steps", "36", "--frames", "2",
				"--socket", filepath.Join(sockdir.Short(t), "c.sock"), "--metrics", "", "--log-level", "error"}
			if tc.source != "" {
				args = append(args, "--source", tc.source)
			}
			err := run(args)
			if tc.want == "" && err != nil {
				t.Fatalf("run(%q): %v", args, err)
			}
			if tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("run(%q) = %v, want an error with %q", args, err, tc.want)
			}
		})
	}
}

// --replay-timing and --replay-speed: bad values and combinations are
// refused naming the flag; a replay with a timestamps file plays by it, and
// a defective one stops the start naming its file, line and value.
func TestRunReplayTiming(t *testing.T) {
	mixed, err := filepath.Abs("../../sensor/testdata/replay/mixed") // four frames and their timestamps.txt
	if err != nil {
		t.Fatal(err)
	}
	broken := t.TempDir()
	for _, name := range []string{"000000.bin", "000001.pcd"} {
		b, err := os.ReadFile(filepath.Join(mixed, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(broken, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(broken, "times.txt"), []byte("0.0\n-0.1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want []string // nil: no error
	}{
		{"unknown timing", []string{"--replay-timing", "sometimes"}, []string{`--replay-timing "sometimes": want "auto", "recorded" or "rate"`}},
		{"recorded timing of the synthetic scene", []string{"--replay-timing", "recorded"}, []string{"--replay-timing recorded: only a replay"}},
		{"speed out of range", []string{"--source", "replay:" + mixed, "--replay-speed", "1000"}, []string{"--replay-speed 1000: want 0.01 to 100"}},
		{"speed at a fixed rate", []string{"--source", "replay:" + mixed, "--replay-timing", "rate", "--replay-speed", "2"}, []string{"--replay-speed 2: only with recorded timing"}},
		{"recorded, 100 times as fast", []string{"--source", "replay:" + mixed, "--replay-timing", "recorded", "--replay-speed", "100", "--frames", "4"}, nil},
		{"auto, looping", []string{"--source", "replay:" + mixed, "--loop", "--replay-speed", "100", "--frames", "6"}, nil},
		{"decreasing timestamps", []string{"--source", "replay:" + broken}, []string{filepath.Join(broken, "times.txt"), "timestamps line 2", `"-0.1" is before line 1's "0.0"`, "--replay-timing rate"}},
		{"decreasing timestamps, not read at a fixed rate", []string{"--source", "replay:" + broken, "--replay-timing", "rate", "--frames", "2", "--rate", "1000"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append(tc.args, "--image-size", "none", "--beams", "4", "--azimuth-steps", "36",
				"--socket", filepath.Join(sockdir.Short(t), "c.sock"), "--metrics", "", "--log-level", "error")
			err := run(args)
			if tc.want == nil && err != nil {
				t.Fatalf("run(%q): %v", args, err)
			}
			for _, w := range tc.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("run(%q) = %v, want an error with %q", args, err, w)
				}
			}
		})
	}
}
