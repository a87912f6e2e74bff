package logging

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"go.uber.org/zap/zapcore"
)

func TestEncoderFollowsTTY(t *testing.T) {
	tests := []struct {
		name     string
		tty      bool
		wantJSON bool
	}{
		{"a terminal gets the console encoder", true, false},
		{"a pipe gets JSON", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			log, _, err := NewFor("info", zapcore.AddSync(&buf), tt.tty)
			if err != nil {
				t.Fatal(err)
			}
			log.Info("hello")
			var m map[string]any
			isJSON := json.Unmarshal(buf.Bytes(), &m) == nil
			if isJSON != tt.wantJSON {
				t.Fatalf("output %q: JSON=%v, want %v", buf.String(), isJSON, tt.wantJSON)
			}
		})
	}
}

func TestLevelFilters(t *testing.T) {
	var buf bytes.Buffer
	log, level, err := NewFor("warn", zapcore.AddSync(&buf), false)
	if err != nil {
		t.Fatal(err)
	}
	log.Info("hidden")
	log.Warn("shown")
	if strings.Contains(buf.String(), "hidden") || !strings.Contains(buf.String(), "shown") {
		t.Fatalf("level warn wrote %q", buf.String())
	}
	// The level changes while the logger is in use.
	level.SetLevel(zapcore.DebugLevel)
	log.Debug("now shown")
	if !strings.Contains(buf.String(), "now shown") {
		t.Fatalf("after SetLevel(debug): %q", buf.String())
	}
}

func TestBadLevelNamesValue(t *testing.T) {
	_, _, err := NewFor("loud", zapcore.AddSync(&bytes.Buffer{}), false)
	if err == nil || !strings.Contains(err.Error(), `"loud"`) {
		t.Fatalf("err = %v, want it to name the value", err)
	}
}

func TestParseLevel(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want zapcore.Level
		ok   bool
	}{
		{"debug", zapcore.DebugLevel, true}, {"INFO", zapcore.InfoLevel, true}, {"Warn", zapcore.WarnLevel, true},
		{"error", zapcore.ErrorLevel, true}, {"fatal", 0, false}, {"dpanic", 0, false}, {"", 0, false}, {"verbose", 0, false},
	} {
		got, err := ParseLevel(tc.in)
		if (err == nil) != tc.ok || (tc.ok && got != tc.want) {
			t.Errorf("ParseLevel(%q) = %v, %v", tc.in, got, err)
		}
	}
}

func TestSetter(t *testing.T) {
	var buf bytes.Buffer
	log, level, err := NewFor("info", zapcore.AddSync(&buf), false)
	if err != nil {
		t.Fatal(err)
	}
	set := Setter(level)
	if err := set("verbose"); err == nil || level.Level() != zapcore.InfoLevel {
		t.Errorf("set(verbose) = %v, level %v", err, level.Level())
	}
	if err := set("ERROR"); err != nil {
		t.Fatal(err)
	}
	log.Warn("hidden")
	if buf.Len() != 0 || level.Level() != zapcore.ErrorLevel {
		t.Errorf("after set(ERROR): level %v, wrote %q", level.Level(), buf.String())
	}
}
