package worker

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hibiken/asynq"

	"github.com/homingdev/homing/dispatch"
	"github.com/homingdev/homing/metrics"
	"github.com/homingdev/homing/tasks"
)

// TestEveryTaskFailureIsLoggedAndCounted: the worker's ErrorHandler logs a
// failed task at ERROR with its cause and counts it by type and reason in
// homing_task_failures_total, which a scrape then shows.
func TestEveryTaskFailureIsLoggedAndCounted(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	m := metrics.New(metrics.Options{})
	h := failureHandler(log, m, nil)
	secretErr := fmt.Errorf("delivery d-1: %w: webhook %q: open secret: cannot decrypt", dispatch.ErrSecretUnavailable, "orders")
	h.HandleError(context.Background(), asynq.NewTask(tasks.TypeDeliver, nil), secretErr)
	h.HandleError(context.Background(), asynq.NewTask(tasks.TypeDeliver, nil), secretErr)
	h.HandleError(context.Background(), asynq.NewTask(tasks.TypeEvent, nil), fmt.Errorf("%w: doc_name contains a NUL byte: %w", tasks.ErrBadPayload, asynq.SkipRetry))

	out := logs.String()
	if strings.Count(out, "level=ERROR") != 3 || !strings.Contains(out, "reason=secret") || !strings.Contains(out, "cannot decrypt") ||
		!strings.Contains(out, "reason=bad_payload") || !strings.Contains(out, "archived") {
		t.Errorf("log lines:\n%s", out)
	}
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{
		`homing_task_failures_total{reason="secret",type="webhook:deliver"} 2`,
		`homing_task_failures_total{reason="bad_payload",type="webhook:event"} 1`,
		`homing_task_failures_total{reason="database",type="webhook:retry"} 0`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("scrape lacks %s", want)
		}
	}
}
