// Package logging builds zerohop's zap loggers: a human-readable console
// encoder when stderr is a terminal, JSON otherwise (containers, journald).
package logging

import (
	"fmt"
	"os"
	"strings"

	"github.com/mattn/go-isatty"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// New returns a logger writing to stderr at the named level ("debug",
// "info", "warn", "error"), and that level, which may be changed while
// the logger is in use (ros2 param set NODE log_level debug). The encoder
// is console when stderr is a TTY and JSON otherwise.
func New(level string) (*zap.Logger, zap.AtomicLevel, error) {
	return NewFor(level, os.Stderr, isatty.IsTerminal(os.Stderr.Fd()))
}

// NewFor is New with the sink and the TTY decision made by the caller.
func NewFor(level string, sink zapcore.WriteSyncer, tty bool) (*zap.Logger, zap.AtomicLevel, error) {
	lvl, err := ParseLevel(level)
	if err != nil {
		return nil, zap.AtomicLevel{}, fmt.Errorf("--log-level %w", err)
	}
	atomic := zap.NewAtomicLevelAt(lvl)
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
	return zap.New(zapcore.NewCore(enc, sink, atomic)), atomic, nil
}

// ParseLevel reads a level name: debug, info, warn or error, in any case.
func ParseLevel(s string) (zapcore.Level, error) {
	switch lvl, err := zapcore.ParseLevel(strings.ToLower(s)); {
	case err == nil && s != "" && lvl >= zapcore.DebugLevel && lvl <= zapcore.ErrorLevel:
		return lvl, nil
	}
	return 0, fmt.Errorf("%q: want debug, info, warn or error", s)
}

// Setter returns a function that sets level from a level name
// (ParseLevel), for a level changed while the node runs.
func Setter(level zap.AtomicLevel) func(name string) error {
	return func(name string) error {
		lvl, err := ParseLevel(name)
		if err != nil {
			return err
		}
		level.SetLevel(lvl)
		return nil
	}
}
