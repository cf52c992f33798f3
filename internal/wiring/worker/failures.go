package worker

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"os"
	"slices"
	"time"

	"github.com/hibiken/asynq"

	"github.com/homingdev/homing/internal/intake/dbstate"
	"github.com/homingdev/homing/internal/ops/preflight"
	"github.com/homingdev/homing/internal/wiring/app"
	"github.com/homingdev/homing/tasks"
)

// failureCounter counts failed tasks (metrics.Metrics); nil when metrics are
// off.
type failureCounter interface {
	TaskFailed(typ, reason string)
}

// failureHandler is asynq's ErrorHandler: no task fails in silence. A
// handler returns an error only for a reason on Homing's side (a
// receiver's answer is recorded on its delivery), so each failure is
// logged at ERROR with the event or delivery it concerns, its cause, and
// whether asynq will run it again, and is counted in
// homing_task_failures_total{type,reason}. A failure that is a database
// outage is told to database (when not nil), which logs the outage once;
// its own line drops to DEBUG, so an outage is not one ERROR per task.
func failureHandler(log *slog.Logger, counter failureCounter, database *dbstate.Watcher) asynq.ErrorHandler {
	return asynq.ErrorHandlerFunc(func(ctx context.Context, t *asynq.Task, err error) {
		reason := tasks.FailureReason(err)
		outage := database != nil && database.Observe(err).Outage()
		if counter != nil {
			counter.TaskFailed(t.Type(), reason)
		}
		taskID, _ := asynq.GetTaskID(ctx)
		retried, _ := asynq.GetRetryCount(ctx)
		maxRetry, known := asynq.GetMaxRetry(ctx) // always known inside asynq
		queue, _ := asynq.GetQueueName(ctx)
		attrs := []any{"type", t.Type(), "reason", reason, "error", err.Error(), "queue", queue, "task_id", taskID,
			"retried", retried, "max_retry", maxRetry}
		if key, id := tasks.IDOf(taskID); key != "" {
			attrs = append(attrs, key, id)
		}
		msg, level := "task failed; asynq will run it again", slog.LevelError
		if outage {
			level = slog.LevelDebug
		}
		switch {
		case errors.Is(err, asynq.SkipRetry):
			msg, level = "task failed for good and is archived (asynq: homing monitor shows it); it would fail the same way again", slog.LevelError
		case known && retried >= maxRetry:
			msg, level = "task failed for the last time and is archived (homing monitor shows it; run it again there once the cause is fixed)", slog.LevelError
		}
		log.Log(ctx, level, msg, attrs...)
	})
}

// readyWarnings lists the start-up checks' problems on the worker's /readyz
// (which stays 200), checked at most once a minute.
func readyWarnings(a *app.App) func(ctx context.Context) []string {
	served := slices.Sorted(maps.Keys(a.Config.Worker.Queues))
	cached := preflight.NewCached(preflight.Inputs{Config: a.Config, DB: a.DB, Redis: a.Redis, Box: a.Box, Environ: os.Environ(), ServedHere: served},
		time.Minute, a.Clock.Now)
	return func(ctx context.Context) []string {
		var out []string
		for _, p := range cached.Problems(ctx) {
			out = append(out, p.String())
		}
		return out
	}
}
