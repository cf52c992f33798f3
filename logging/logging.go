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
// "error") in format ("json" or "text").
func New(w io.Writer, level, format string) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log.level: %q is not one of debug, info, warn, error", level)
	}
	opts := &slog.HandlerOptions{Level: lvl}
	switch strings.ToLower(format) {
	case "json", "":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	default:
		return nil, fmt.Errorf("log.format: %q is not json or text", format)
	}
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
