// Package logging builds Homing's *slog.Logger from configuration and adapts
// it, once, to asynq's Logger interface; NoCaller is the hot path's cheaper
// way to write one record.
package logging

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
)

// New returns a logger writing to w at level ("debug", "info", "warn",
// "error") in format: "json", "text", or "auto" (also "") for text with the
// time of day when w is a terminal (a person reads it) and JSON otherwise
// (a file, a pipe, a container's log: a program reads it).
func New(w io.Writer, level, format string) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log.level: %q is not one of debug, info, warn, error", level)
	}
	opts := &slog.HandlerOptions{Level: lvl}
	switch strings.ToLower(format) {
	case "auto", "":
		if !IsTerminal(w) {
			return slog.New(slog.NewJSONHandler(w, opts)), nil
		}
		opts.ReplaceAttr = timeOfDay
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	default:
		return nil, fmt.Errorf("log.format: %q is not auto, json or text", format)
	}
}

// timeOfDay writes a record's time as the local time of day to the
// millisecond: on a terminal the date and zone of every line are noise.
func timeOfDay(groups []string, a slog.Attr) slog.Attr {
	if len(groups) == 0 && a.Key == slog.TimeKey && a.Value.Kind() == slog.KindTime {
		a.Value = slog.StringValue(a.Value.Time().Local().Format("15:04:05.000"))
	}
	return a
}

// IsTerminal reports whether w is a terminal (a character device), where
// output is read by a person: logs in text, a progress bar redrawn in place.
func IsTerminal(w any) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// Asynq adapts l to asynq's Logger interface.
func Asynq(l *slog.Logger) AsynqLogger { return AsynqLogger{l: l.With("component", "asynq")} }

// AsynqLogger implements asynq.Logger on top of slog.
type AsynqLogger struct{ l *slog.Logger }

// Debug implements asynq.Logger.
func (a AsynqLogger) Debug(args ...any) { a.l.Debug(fmt.Sprint(args...)) }

// Info implements asynq.Logger.
func (a AsynqLogger) Info(args ...any) { a.l.Info(fmt.Sprint(args...)) }

// Warn implements asynq.Logger.
func (a AsynqLogger) Warn(args ...any) { a.l.Warn(fmt.Sprint(args...)) }

// Error implements asynq.Logger.
func (a AsynqLogger) Error(args ...any) { a.l.Error(fmt.Sprint(args...)) }

// Fatal implements asynq.Logger.
func (a AsynqLogger) Fatal(args ...any) {
	a.l.Error(fmt.Sprint(args...))
	os.Exit(1)
}
