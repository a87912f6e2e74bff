// Package logging builds zerohop's zap loggers: a human-readable console
// encoder when stderr is a terminal, JSON otherwise (containers, journald).
package logging

import (
	"fmt"
	"os"

	"github.com/mattn/go-isatty"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// New returns a logger writing to stderr at the named level ("debug",
// "info", "warn", "error"). The encoder is console when stderr is a TTY and
// JSON otherwise.
func New(level string) (*zap.Logger, error) {
	return NewFor(level, os.Stderr, isatty.IsTerminal(os.Stderr.Fd()))
}

// NewFor is New with the sink and the TTY decision made by the caller.
func NewFor(level string, sink zapcore.WriteSyncer, tty bool) (*zap.Logger, error) {
	var lvl zapcore.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	var enc zapcore.Encoder
	if tty {
		cfg := zap.NewDevelopmentEncoderConfig()
		cfg.EncodeLevel = zapcore.CapitalColorLevelEncoder
		enc = zapcore.NewConsoleEncoder(cfg)
	} else {
		cfg := zap.NewProductionEncoderConfig()
		cfg.EncodeTime = zapcore.ISO8601TimeEncoder
		enc = zapcore.NewJSONEncoder(cfg)
	}
	return zap.New(zapcore.NewCore(enc, sink, lvl)), nil
}
