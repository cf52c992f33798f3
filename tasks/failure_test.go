package tasks

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/hibiken/asynq"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/homingdev/homing/internal/engine/dispatch"
	"github.com/homingdev/homing/internal/intake/event"
)

// TestABadEventPayloadIsArchivedAtOnce: a webhook:event task whose event
// PostgreSQL could never store (a NUL: a producer that skipped the client's
// checks; invalid UTF-8 is decoded as U+FFFD) fails with asynq.SkipRetry, so it is archived with
// the reason instead of retried 25 times. The handler never reaches the
// database.
func TestABadEventPayloadIsArchivedAtOnce(t *testing.T) {
	t.Parallel()
	h := &Handlers{}
	for _, payload := range []string{
		`{"id":"e1","doc_type":"Sales Order","doc_name":"SO\u0000-1","event":"on_submit","doc":{}}`,
		`{"id":"e\u0000","doc_type":"Sales Order","event":"on_submit","doc":{}}`,
		`{"id":"e1","doc_type":"Sales Order","event":"on_submit","doc":[]}`,
	} {
		err := h.HandleEvent(context.Background(), asynq.NewTask(TypeEvent, []byte(payload)))
		if !errors.Is(err, asynq.SkipRetry) || !errors.Is(err, ErrBadPayload) {
			t.Errorf("payload %q: %v, want ErrBadPayload and asynq.SkipRetry", payload, err)
		}
		if got := FailureReason(err); got != ReasonBadPayload {
			t.Errorf("payload %q: reason %q, want %q", payload, got, ReasonBadPayload)
		}
	}
}

func TestFailureReason(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("fan out event e1: %w", permanent(&pgconn.PgError{Code: "22021", Message: "invalid byte sequence"})), ReasonBadInput},
		{fmt.Errorf("delivery d1: %w: %w", dispatch.ErrSecretUnavailable, errors.New("cannot decrypt secret")), ReasonSecret},
		{fmt.Errorf("delivery d1: %w: %w", dispatch.ErrRequestUnbuildable, errors.New(`webhook "dyn": url template rendered ""`)), ReasonWebhook},
		{fmt.Errorf("fan out event e1: %w", &pgconn.PgError{Code: "40P01"}), ReasonDatabase},
		{fmt.Errorf("enqueue first attempt of delivery d1: %w", errors.New("dial tcp: connection refused")), ReasonRedis},
		{fmt.Errorf("x: %w", context.DeadlineExceeded), ReasonTimeout},
		{errors.New("something else"), ReasonOther},
	} {
		if got := FailureReason(tc.err); got != tc.want {
			t.Errorf("FailureReason(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
	if err := permanent(&pgconn.PgError{Code: "22021"}); !errors.Is(err, asynq.SkipRetry) {
		t.Errorf("a NUL refused by PostgreSQL is retried: %v", err)
	}
	if err := permanent(&pgconn.PgError{Code: "40P01"}); errors.Is(err, asynq.SkipRetry) {
		t.Errorf("a deadlock is not retried: %v", err)
	}
	for taskID, want := range map[string][2]string{
		event.TaskID("", "e1"):      {"event_id", "e1"},
		event.TaskID("acme", "e1"):  {"event_id", "e1"},
		event.TaskID("", "acme:e1"): {"event_id", "acme:e1"},
		DeliverTaskID("d1"):         {"delivery_id", "d1"},
		RetryTaskID("d2"):           {"delivery_id", "d2"},
		"random-uuid":               {"", ""},
	} {
		if k, id := IDOf(taskID); k != want[0] || id != want[1] {
			t.Errorf("IDOf(%q) = %q, %q; want %q, %q", taskID, k, id, want[0], want[1])
		}
	}
}
