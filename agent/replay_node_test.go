package agent

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/zerohop/zerohop/camera"
)

// The agent's in-process replay (--camera replay:DIR) is paced by the
// recording's timestamps under --replay-timing auto or recorded, as the
// camera process's is: it used to play every recording at --rate. At
// --rate 0.01 (one frame per 100 s) ten clouds come only from the
// recorded times (about 100 ms apart in testdata's timestamps.txt, here
// played 10 times as fast).
func TestComposedReplayPlaysAtItsRecordedTiming(t *testing.T) {
	requireORT(t)
	mixed, err := filepath.Abs(filepath.Join("..", "sensor", "testdata", "replay", "mixed"))
	if err != nil {
		t.Fatal(err)
	}
	for _, timing := range []string{camera.ReplayTimingAuto, camera.ReplayTimingRecorded} {
		t.Run(timing, func(t *testing.T) {
			core, logs := observer.New(zapcore.InfoLevel)
			cfg := NodeConfig{Camera: "replay:" + mixed, ReplayTiming: timing, ReplaySpeed: 10, Rate: 0.01, LidarOnly: true,
				Sink: &recordingSink{}, Threads: 1, Providers: "cpu", Watchdog: slowStepWatchdog, Log: zap.New(core)}
			runNodeUntil(t, cfg, 30*time.Second, "10 clouds taken", func(base string) bool {
				_, counts := latencyInputs(t, base)
				return counts["handoff"] >= 10
			})
			lines := logs.FilterMessage("replay timing: recorded").All()
			if len(lines) != 1 {
				t.Fatalf("want one line saying the replay plays at its recorded timing, got %d: %v", len(lines), logs.All())
			}
			f := lines[0].ContextMap()
			if file, _ := f["file"].(string); !strings.HasSuffix(file, "timestamps.txt") || f["frames"] != int64(4) || f["speed"] != 10.0 {
				t.Errorf("replay timing line %v: want mixed/timestamps.txt, 4 frames, speed 10", f)
			}
		})
	}
}

// An in-process camera whose frames come further apart than the watchdog
// period (a slow --rate, a replay at a low --replay-speed: KITTI's 10 Hz
// at half speed is 206 ms) has its commands zeroed between frames; one
// line at start says so and what to raise. None at the usual rates.
func TestSlowInProcessCameraIsWarnedOf(t *testing.T) {
	requireORT(t)
	mixed, err := filepath.Abs(filepath.Join("..", "sensor", "testdata", "replay", "mixed"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		cfg  NodeConfig
		want string // the frame period logged; "" for no line
	}{
		{"synthetic at 2 Hz", NodeConfig{Camera: "synthetic", Rate: 2}, "500ms"},
		{"synthetic at 30 Hz", NodeConfig{Camera: "synthetic", Rate: 30}, ""},
		{"replay at half its recorded speed", NodeConfig{Camera: "replay:" + mixed, ReplayTiming: camera.ReplayTimingRecorded, ReplaySpeed: 0.5}, "213.08642ms"},
		{"replay at its recorded speed", NodeConfig{Camera: "replay:" + mixed, ReplayTiming: camera.ReplayTimingRecorded}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			core, logs := observer.New(zapcore.WarnLevel)
			cfg := tc.cfg
			cfg.Beams, cfg.AzimuthSteps, cfg.LidarOnly = 16, 300, true
			cfg.Sink, cfg.Threads, cfg.Providers, cfg.Log = &recordingSink{}, 1, "cpu", zap.New(core)
			cfg.Duration, cfg.HTTP = 300*time.Millisecond, "127.0.0.1:0"
			if err := RunNode(context.Background(), cfg); err != nil {
				t.Fatal(err)
			}
			lines := logs.FilterMessageSnippet("further apart than the watchdog period").All()
			switch {
			case tc.want == "" && len(lines) != 0:
				t.Errorf("warned at a usual rate: %v", lines)
			case tc.want != "" && len(lines) != 1:
				t.Errorf("want one warning, got %v", logs.All())
			case tc.want != "" && fmt.Sprint(lines[0].ContextMap()["frame_period"]) != tc.want:
				t.Errorf("warning %v: want frame_period %s", lines[0].ContextMap(), tc.want)
			}
		})
	}
}
