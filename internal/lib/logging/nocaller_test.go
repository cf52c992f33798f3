package logging

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// NoCaller writes what LogAttrs writes, and nothing below the level.
func TestNoCallerWritesWhatLogAttrsWrites(t *testing.T) {
	at := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	attrs := []slog.Attr{slog.String("delivery", "d1"), slog.Int("attempt", 2), slog.Int64("duration_ms", 41)}
	var fast, std bytes.Buffer
	opts := &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			a.Value = slog.TimeValue(at)
		}
		return a
	}}
	NoCaller(context.Background(), slog.New(slog.NewTextHandler(&fast, opts)), slog.LevelInfo, at, "delivery attempt", attrs...)
	slog.New(slog.NewTextHandler(&std, opts)).LogAttrs(context.Background(), slog.LevelInfo, "delivery attempt", attrs...)
	if fast.String() != std.String() || !strings.Contains(fast.String(), "attempt=2") {
		t.Fatalf("NoCaller wrote %q, LogAttrs %q", fast.String(), std.String())
	}
	var quiet bytes.Buffer
	NoCaller(context.Background(), slog.New(slog.NewTextHandler(&quiet, &slog.HandlerOptions{Level: slog.LevelWarn})), slog.LevelInfo, at, "x")
	if quiet.Len() != 0 {
		t.Fatalf("wrote %q below the handler's level", quiet.String())
	}
}

// BenchmarkNoCaller is the attempt log line through NoCaller, beside
// slog.Info with the same attributes (the line Homing wrote before).
func BenchmarkNoCaller(b *testing.B) {
	l, err := New(io.Discard, "info", "json")
	if err != nil {
		b.Fatal(err)
	}
	ctx, at := context.Background(), time.Now()
	b.Run("NoCaller", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			NoCaller(ctx, l, slog.LevelInfo, at, "delivery attempt",
				slog.String("delivery", "0193a0e1-7c1d-7000-8000-000000000001"), slog.String("webhook", "orders"), slog.String("event_id", "so-1-submit"),
				slog.Int("attempt", 1), slog.String("status", "Delivered"), slog.String("class", "2xx"),
				slog.Int("status_code", 200), slog.Int64("duration_ms", 3), slog.String("error", ""))
		}
	})
	b.Run("slog.Info", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			l.Info("delivery attempt",
				"delivery", "0193a0e1-7c1d-7000-8000-000000000001", "webhook", "orders", "event_id", "so-1-submit",
				"attempt", 1, "status", "Delivered", "class", "2xx",
				"status_code", 200, "duration_ms", int64(3), "error", "")
		}
	})
}
