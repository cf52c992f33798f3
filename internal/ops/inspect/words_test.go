package inspect_test

import (
	"testing"
	"time"

	"github.com/homingdev/homing/internal/ops/inspect"
	"github.com/homingdev/homing/models"
)

// TestWords holds every state a person reads in words, on a stopped clock.
func TestWords(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { t := now.Add(d); return &t }
	code := func(c int) *int { return &c }
	for _, tc := range []struct {
		name string
		s    inspect.Standing
		want string
	}{
		{"delivered first time", inspect.Standing{Status: models.StatusDelivered, Attempts: 1, MaxRetries: 3}, "Delivered"},
		{"delivered on a retry", inspect.Standing{Status: models.StatusDelivered, Attempts: 3, MaxRetries: 3}, "Delivered"},
		{"retrying in minutes", inspect.Standing{Status: models.StatusFailed, Attempts: 1, MaxRetries: 3, NextRetry: at(4 * time.Minute)}, "Retrying: attempt 2 of 4 in 4 min"},
		{"whole minutes, rounded down", inspect.Standing{Status: models.StatusFailed, Attempts: 1, MaxRetries: 3, NextRetry: at(4*time.Minute + 59*time.Second)}, "Retrying: attempt 2 of 4 in 4 min"},
		{"under a second is a second", inspect.Standing{Status: models.StatusFailed, Attempts: 1, MaxRetries: 3, NextRetry: at(300 * time.Millisecond)}, "Retrying: attempt 2 of 4 in 1 s"},
		{"retrying in seconds", inspect.Standing{Status: models.StatusFailed, Attempts: 2, MaxRetries: 3, NextRetry: at(30 * time.Second)}, "Retrying: attempt 3 of 4 in 30 s"},
		{"retrying in hours", inspect.Standing{Status: models.StatusFailed, Attempts: 3, MaxRetries: 3, NextRetry: at(2*time.Hour + 5*time.Minute + 30*time.Second)}, "Retrying: attempt 4 of 4 in 2 h 5 min"},
		{"retrying in whole hours", inspect.Standing{Status: models.StatusFailed, Attempts: 4, MaxRetries: 5, NextRetry: at(10 * time.Hour)}, "Retrying: attempt 5 of 6 in 10 h"},
		{"retrying in days", inspect.Standing{Status: models.StatusFailed, Attempts: 1, MaxRetries: 3, NextRetry: at(27 * time.Hour)}, "Retrying: attempt 2 of 4 in 1 day 3 h"},
		{"retry due", inspect.Standing{Status: models.StatusFailed, Attempts: 1, MaxRetries: 3, NextRetry: at(-time.Minute)}, "Retrying: attempt 2 of 4 now"},
		{"retry due this instant", inspect.Standing{Status: models.StatusFailed, Attempts: 1, MaxRetries: 3, NextRetry: at(0)}, "Retrying: attempt 2 of 4 now"},
		{"first attempt queued", inspect.Standing{Status: models.StatusFailed, Attempts: 0, MaxRetries: 3, NextRetry: at(0)}, "Sending: first attempt now"},
		{"first attempt held by the rate limit", inspect.Standing{Status: models.StatusFailed, Attempts: 0, MaxRetries: 3, NextRetry: at(5 * time.Second)}, "Sending: first attempt in 5 s"},
		{"recovered past its budget", inspect.Standing{Status: models.StatusFailed, Attempts: 4, MaxRetries: 2, NextRetry: at(0)}, "Retrying: attempt 5 of 5 now"},
		{"held by a disabled tenant", inspect.Standing{Status: models.StatusFailed, Attempts: 1, MaxRetries: 3, NextRetry: at(-time.Hour), Held: inspect.HeldTenant}, "Paused: attempt 2 of 4 waits until sending is resumed for this account"},
		{"held behind the probe", inspect.Standing{Status: models.StatusFailed, Attempts: 2, MaxRetries: 3, NextRetry: at(-time.Minute), Held: inspect.HeldProbe}, "Waiting: the endpoint keeps failing; attempt 3 of 4 goes out once a test request to it succeeds"},
		{"held behind its document's earlier delivery", inspect.Standing{Status: models.StatusFailed, Attempts: 0, MaxRetries: 3, NextRetry: at(time.Minute), Held: inspect.HeldOrder}, "Waiting: the first attempt goes out once the delivery before it of this document is delivered or given up"},
		{"a retry held behind its document's earlier delivery", inspect.Standing{Status: models.StatusFailed, Attempts: 2, MaxRetries: 3, NextRetry: at(-time.Minute), Held: inspect.HeldOrder}, "Waiting: attempt 3 goes out once the delivery before it of this document is delivered or given up"},
		{"failing but not yet due", inspect.Standing{Status: models.StatusFailed, Attempts: 2, MaxRetries: 3, NextRetry: at(time.Hour), Held: inspect.HeldProbe}, "Retrying: attempt 3 of 4 in 1 h"},
		{"gave up", inspect.Standing{Status: models.StatusExhausted, Attempts: 4, MaxRetries: 3, LastStatusCode: code(503)}, "Gave up after 4 attempts"},
		{"gave up after one", inspect.Standing{Status: models.StatusExhausted, Attempts: 1, MaxRetries: 0, LastError: "connection refused"}, "Gave up after 1 attempt"},
		{"gone", inspect.Standing{Status: models.StatusExhausted, Attempts: 1, MaxRetries: 3, LastStatusCode: code(410)}, "Gave up: the endpoint answered 410 Gone"},
		{"endpoint disabled", inspect.Standing{Status: models.StatusExhausted, Attempts: 2, MaxRetries: 3, LastError: "webhook disabled: disabled in the console by token t"}, "Stopped: the endpoint was disabled"},
		{"endpoint deleted", inspect.Standing{Status: models.StatusExhausted, Attempts: 0, MaxRetries: 3, LastError: "webhook deleted"}, "Stopped: the endpoint was deleted"},
		{"never built", inspect.Standing{Status: models.StatusExhausted, Attempts: 0, MaxRetries: 3, LastError: "template: step limit"}, "Not sent: the request could not be made"},
	} {
		if got := inspect.Words(tc.s, now); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
