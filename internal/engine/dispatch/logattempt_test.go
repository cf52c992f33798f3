package dispatch

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/homingdev/homing/internal/engine/delivery/send"
	"github.com/homingdev/homing/models"
)

// The per-attempt line carries every field operators filter on, at the
// attempt's time, and nothing is written below the handler's level.
func TestLogAttemptWritesOneLinePerAttempt(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	d := &Dispatcher{log: slog.New(slog.NewJSONHandler(&buf, nil))}
	now := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	row := models.Delivery{ID: "d1", WebhookName: "orders", EventID: "ev-1", Attempts: 2}
	out := Outcome{Status: models.StatusFailed, Reason: "receiver answered 503"}
	res := send.Result{Class: send.Class("5xx"), StatusCode: 503, Duration: 42 * time.Millisecond}
	d.logAttempt(context.Background(), row, out, res, now)
	var got map[string]any
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatalf("%v: %s", err, buf.Bytes())
	}
	want := map[string]any{"time": "2026-12-03T10:00:00Z", "level": "INFO", "msg": "delivery attempt", "delivery": "d1", "webhook": "orders",
		"event_id": "ev-1", "attempt": 2.0, "status": "Failed", "class": "5xx", "status_code": 503.0, "duration_ms": 42.0, "error": "receiver answered 503"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %#v, want %#v (line %s)", k, got[k], v, buf.Bytes())
		}
	}
	buf.Reset()
	d.log = slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))
	d.logAttempt(context.Background(), row, out, res, now)
	if buf.Len() != 0 {
		t.Fatalf("wrote %s at level warn", buf.Bytes())
	}
}
