// Package logging is the engine's debug log, written to a *slog.Logger.
//
// homing: upstream logged through logrus behind an on/off flag; this package
// keeps the shape of the logrus calls the engine makes (WithFields(Fields{…})
// .Trace, Trace, Errorf), so that upstream's call sites change only in their
// import, and sends them to log/slog. It is off until SetLogger is given a
// logger: every call site checks Enabled first, so an engine that logs
// nothing formats nothing.
package logging

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
)

// LevelTrace is the level of the parser's and lexer's step-by-step records,
// below slog.LevelDebug as logrus's Trace is below its Debug.
const LevelTrace = slog.LevelDebug - 4

var logger atomic.Pointer[slog.Logger]

// SetLogger sends the engine's log to l; nil turns it off.
func SetLogger(l *slog.Logger) {
	logger.Store(l)
}

// Enabled reports whether a logger is set.
func Enabled() bool {
	return logger.Load() != nil
}

// Fields are the attributes of one record.
type Fields map[string]any

// Entry is a record's attributes, waiting for its message.
type Entry struct {
	fields Fields
}

// WithFields starts a record with fields as its attributes.
func WithFields(fields Fields) Entry {
	return Entry{fields: fields}
}

// Trace logs msg at LevelTrace with the entry's fields, in key order.
func (e Entry) Trace(msg string) {
	keys := make([]string, 0, len(e.fields))
	for k := range e.fields {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	args := make([]any, 0, 2*len(keys))
	for _, k := range keys {
		args = append(args, k, e.fields[k])
	}
	log(LevelTrace, msg, args...)
}

// Trace logs msg at LevelTrace.
func Trace(msg string) {
	log(LevelTrace, msg)
}

// Errorf logs a formatted message at slog.LevelError.
func Errorf(format string, args ...any) {
	log(slog.LevelError, strings.TrimSuffix(fmt.Sprintf(format, args...), "\n"))
}

func log(level slog.Level, msg string, args ...any) {
	if l := logger.Load(); l != nil {
		l.Log(context.Background(), level, msg, args...)
	}
}
