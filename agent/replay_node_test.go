package agent

import (
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
