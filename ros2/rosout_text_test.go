package ros2

import (
	"errors"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

func TestRosoutText(t *testing.T) {
	for _, tc := range []struct {
		fields []zapcore.Field
		want   string
	}{
		{nil, "cmd_vel zeroed"},
		{[]zapcore.Field{zap.Duration("stale", 250*time.Millisecond), zap.Int("frames", 3), zap.Bool("gpu", false)},
			"cmd_vel zeroed stale=250ms frames=3 gpu=false"},
		{[]zapcore.Field{zap.String("topic", "/robot1/cmd_vel"), zap.String("why", "no frame"), zap.String("empty", "")},
			`cmd_vel zeroed topic=/robot1/cmd_vel why="no frame" empty=""`},
		{[]zapcore.Field{zap.Error(errors.New("x: y")), zap.Strings("hosts", []string{"a", "b"})},
			`cmd_vel zeroed error="x: y" hosts=[a b]`},
		{[]zapcore.Field{zap.Int("k", 1), zap.Int("k", 2)}, "cmd_vel zeroed k=2"}, // the last value of a key, once
		{[]zapcore.Field{zap.Skip(), zap.Float64("ms", 1.5)}, "cmd_vel zeroed ms=1.5"},
	} {
		if got := rosoutText("cmd_vel zeroed", tc.fields); got != tc.want {
			t.Errorf("rosoutText = %q, want %q", got, tc.want)
		}
	}
}

func TestRosoutLevelsAndLoggerName(t *testing.T) {
	for l, want := range map[zapcore.Level]uint8{zapcore.DebugLevel: 10, zapcore.InfoLevel: 20, zapcore.WarnLevel: 30,
		zapcore.ErrorLevel: 40, zapcore.DPanicLevel: 50, zapcore.FatalLevel: 50} {
		if got := rosoutLevel(l); got != want {
			t.Errorf("rosoutLevel(%v) = %d, want %d", l, got, want)
		}
	}
	for _, tc := range [][3]string{{"/", "zerohop_agent", "zerohop_agent"}, {"/robot1", "a", "robot1.a"}, {"/r/s/", "a", "r.s.a"}} {
		if got := loggerName(tc[0], tc[1]); got != tc[2] {
			t.Errorf("loggerName(%q, %q) = %q", tc[0], tc[1], got)
		}
	}
}
