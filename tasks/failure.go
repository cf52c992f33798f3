package tasks

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/hibiken/asynq"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/homingdev/homing/internal/engine/dispatch"
	"github.com/homingdev/homing/internal/engine/secretbox"
)

// Reasons a task failed, the reason label of homing_task_failures_total.
const (
	ReasonBadPayload = "bad_payload" // archived at once: it can never succeed
	ReasonBadInput   = "bad_input"   // the database refused the event's text: archived at once
	ReasonSecret     = "secret"      // the webhook's secret cannot be opened (secrets.key)
	ReasonWebhook    = "webhook"     // the webhook cannot make the request (its url_template fails)
	ReasonDatabase   = "database"
	ReasonRedis      = "redis"
	ReasonTimeout    = "timeout"
	ReasonCanceled   = "canceled" // the worker is stopping
	ReasonPanic      = "panic"
	ReasonOther      = "other"
)

// Reasons lists every reason, so a metric can start each at zero.
func Reasons() []string {
	return []string{ReasonBadPayload, ReasonBadInput, ReasonSecret, ReasonWebhook, ReasonDatabase, ReasonRedis, ReasonTimeout,
		ReasonCanceled, ReasonPanic, ReasonOther}
}

// FailureReason classifies the error a task handler returned.
func FailureReason(err error) string {
	var pgErr *pgconn.PgError
	switch {
	case asynq.IsPanicError(err):
		return ReasonPanic
	case errors.Is(err, ErrBadPayload):
		return ReasonBadPayload
	case errors.As(err, &pgErr) && isBadInput(pgErr):
		return ReasonBadInput
	case errors.Is(err, dispatch.ErrSecretUnavailable):
		return ReasonSecret
	case errors.Is(err, dispatch.ErrRequestUnbuildable):
		return ReasonWebhook
	case errors.Is(err, context.DeadlineExceeded):
		return ReasonTimeout
	case errors.Is(err, context.Canceled):
		return ReasonCanceled
	case errors.As(err, &pgErr), isConnError(err, "database", "sql", "postgres", "pgx", "gorm"):
		return ReasonDatabase
	case isConnError(err, "redis", "enqueue", "queue "):
		return ReasonRedis
	}
	return ReasonOther
}

// isConnError is a last resort for errors that carry no type: it looks for
// one of words in the message.
func isConnError(err error, words ...string) bool {
	msg := strings.ToLower(err.Error())
	for _, w := range words {
		if strings.Contains(msg, w) {
			return true
		}
	}
	return false
}

// isBadInput reports a PostgreSQL error that the same input will always
// meet: text with NUL or invalid UTF-8 (class 22, data exception, codes
// 22021 and 22P05).
func isBadInput(e *pgconn.PgError) bool {
	return e.Code == "22021" || e.Code == "22P05"
}

// permanent marks err, a task's failure, asynq.SkipRetry when retrying
// in this worker cannot help, so the task is archived at once with the
// reason instead of failing 25 times: the database refuses the event's
// text, or this worker has no secrets.key to open a webhook's secret with
// (config is read at start, so only a restart with the key set helps; the
// delivery stays Failed and due, and the sweeper queues it again, each
// failure logged at ERROR). nil stays nil.
func permanent(err error) error {
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && isBadInput(pgErr):
		return fmt.Errorf("%w: %w", err, asynq.SkipRetry)
	case errors.Is(err, secretbox.ErrNoKey):
		return fmt.Errorf("%w: %w", err, asynq.SkipRetry)
	}
	return err
}

// IDOf is the event or delivery ID a task is about, read from its TaskID
// (webhook_event::<id>, webhook_event:<tenant>:<id>, webhook_deliver::<id>,
// webhook_retry::<id>), and the log key naming it: "" for the periodic
// tasks.
func IDOf(taskID string) (key, id string) {
	if rest, ok := strings.CutPrefix(taskID, "webhook_event:"); ok && !strings.HasPrefix(rest, ":") {
		if _, id, ok := strings.Cut(rest, ":"); ok {
			return "event_id", id
		}
	}
	for prefix, key := range map[string]string{"webhook_event::": "event_id", "webhook_deliver::": "delivery_id", "webhook_retry::": "delivery_id"} {
		if id, ok := strings.CutPrefix(taskID, prefix); ok {
			return key, id
		}
	}
	return "", ""
}
