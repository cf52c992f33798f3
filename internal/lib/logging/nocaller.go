package logging

import (
	"context"
	"log/slog"
	"time"
)

// NoCaller logs msg with attrs through l's handler the way l.LogAttrs would,
// minus the caller lookup (runtime.Callers, for a source that Homing's
// handlers never print) and with the time given instead of read. It is for
// the busiest log line only, one per delivery attempt: BenchmarkNoCaller,
// beside it, measured 1.03 µs against slog.Info's 1.32 µs for that line
// (JSON to io.Discard, 2 cores), a fifth less.
func NoCaller(ctx context.Context, l *slog.Logger, level slog.Level, at time.Time, msg string, attrs ...slog.Attr) {
	h := l.Handler()
	if !h.Enabled(ctx, level) {
		return
	}
	r := slog.NewRecord(at, level, msg, 0)
	r.AddAttrs(attrs...)
	_ = h.Handle(ctx, r)
}
