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
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/homingdev/homing/internal/engine/dispatch"
	"github.com/homingdev/homing/internal/intake/dbstate"
	"github.com/homingdev/homing/internal/ops/metrics"
	"github.com/homingdev/homing/internal/testing/testenv"
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

// TestDatabaseOutageIsOneErrorNotOnePerTask: while the database is away,
// every task that meets it fails, and asynq runs it again; the outage is
// one ERROR line (the watcher's), each task's own line is DEBUG, and each
// is still counted in homing_task_failures_total and
// homing_database_errors_total. A failure of another kind stays at ERROR.
func TestDatabaseOutageIsOneErrorNotOnePerTask(t *testing.T) {
	t.Parallel()
	logs, log := testenv.NewLogs()
	watcher := dbstate.New(dbstate.Config{Probe: func(context.Context) error { return nil }, Logger: log})
	m := metrics.New(metrics.Options{Database: watcher})
	h := failureHandler(log, m, watcher)
	for i := range 5 {
		err := fmt.Errorf("fan out event e-%d: %w", i, &pgconn.PgError{Severity: "FATAL", Code: "57P01", Message: "terminating connection due to administrator command"})
		h.HandleError(context.Background(), asynq.NewTask(tasks.TypeEvent, nil), err)
	}
	h.HandleError(context.Background(), asynq.NewTask(tasks.TypeDeliver, nil), fmt.Errorf("delivery d-1: %w: cannot decrypt", dispatch.ErrSecretUnavailable))

	if n := logs.Count("ERROR", ""); n != 2 {
		t.Errorf("ERROR lines = %d, want 2 (the outage, the secret):\n%s", n, logs)
	}
	if logs.Count("ERROR", "database unavailable: ") != 1 || logs.Count("DEBUG", "reason=database") != 5 {
		t.Errorf("want one ERROR line for the outage and one DEBUG line per task:\n%s", logs)
	}
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{
		`homing_task_failures_total{reason="database",type="webhook:event"} 5`,
		`homing_database_errors_total{kind="unavailable"} 5`,
		`homing_database_up 0`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("scrape lacks %s", want)
		}
	}
}
