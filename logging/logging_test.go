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
			log, err := NewFor("info", zapcore.AddSync(&buf), tt.tty)
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
	log, err := NewFor("warn", zapcore.AddSync(&buf), false)
	if err != nil {
		t.Fatal(err)
	}
	log.Info("hidden")
	log.Warn("shown")
	if strings.Contains(buf.String(), "hidden") || !strings.Contains(buf.String(), "shown") {
		t.Fatalf("level warn wrote %q", buf.String())
	}
}

func TestBadLevelNamesValue(t *testing.T) {
	_, err := NewFor("loud", zapcore.AddSync(&bytes.Buffer{}), false)
	if err == nil || !strings.Contains(err.Error(), `"loud"`) {
		t.Fatalf("err = %v, want it to name the value", err)
	}
}
