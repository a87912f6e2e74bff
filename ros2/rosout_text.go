package ros2

import (
	"fmt"
	"sort"
	"strings"

	"go.uber.org/zap/zapcore"
)

// rcl_interfaces/msg/Log levels.
const (
	logDebug uint8 = 10
	logInfo  uint8 = 20
	logWarn  uint8 = 30
	logError uint8 = 40
	logFatal uint8 = 50
)

// rosoutLevel maps a zap level to a Log level; zap's panic levels are
// FATAL.
func rosoutLevel(l zapcore.Level) uint8 {
	switch {
	case l <= zapcore.DebugLevel:
		return logDebug
	case l == zapcore.InfoLevel:
		return logInfo
	case l == zapcore.WarnLevel:
		return logWarn
	case l == zapcore.ErrorLevel:
		return logError
	}
	return logFatal
}

// rosoutText is a log line as rqt_console shows it: the message, then
// each field as key=value in the order given (a value with a space or a
// quote quoted; nested objects as zap's map encoder renders them).
func rosoutText(msg string, fields []zapcore.Field) string {
	if len(fields) == 0 {
		return msg
	}
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range fields {
		f.AddTo(enc)
	}
	var b strings.Builder
	b.WriteString(msg)
	seen := map[string]bool{}
	for _, f := range fields {
		if seen[f.Key] {
			continue
		}
		seen[f.Key] = true
		v, ok := enc.Fields[f.Key]
		if !ok {
			continue // zap.Skip and the like
		}
		b.WriteString(" " + f.Key + "=" + rosoutValue(v))
	}
	return b.String()
}

func rosoutValue(v any) string {
	switch v := v.(type) {
	case string:
		if v == "" || strings.ContainsAny(v, " \t\n\"=") {
			return fmt.Sprintf("%q", v)
		}
		return v
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = k + "=" + rosoutValue(v[k])
		}
		return "{" + strings.Join(parts, " ") + "}"
	}
	return fmt.Sprint(v)
}

// loggerName is rcl's name for a node's logger: the namespace's parts and
// the name joined by '.' ("robot1.zerohop_agent").
func loggerName(namespace, name string) string {
	ns := strings.Trim(namespace, "/")
	if ns == "" {
		return name
	}
	return strings.ReplaceAll(ns, "/", ".") + "." + name
}
