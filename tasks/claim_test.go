package tasks_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/homingdev/homing/internal/engine/dispatch"
	"github.com/homingdev/homing/internal/engine/secretbox"
	"github.com/homingdev/homing/internal/engine/webhook"
	"github.com/homingdev/homing/internal/testing/testenv"
	"github.com/homingdev/homing/internal/testing/testreceiver"
	"github.com/homingdev/homing/models"
	"github.com/homingdev/homing/tasks"
)

func dispatchEvent(id string) dispatch.Event {
	ev := salesOrder(id)
	return dispatch.Event{ID: ev.ID, DocType: ev.DocType, DocName: ev.DocName, Event: ev.Event, Doc: ev.Doc}
}

// Of several tasks making the same first attempt at once, exactly one
// sends, on PostgreSQL's one-statement claim and on SQLite's load → claim.
func TestRacingFirstAttemptsSendOnce(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(string(b), func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, b)
			recv := testreceiver.New(t)
			h.createWebhook("orders", recv.URL, nil)
			ctx := context.Background()
			pending, err := h.app.Dispatcher.FanOut(ctx, dispatchEvent("ev-race"))
			if err != nil || len(pending) != 1 {
				t.Fatalf("fan-out %v %v", pending, err)
			}
			var (
				wg               sync.WaitGroup
				mu               sync.Mutex
				sent, notClaimed int
			)
			for range 6 {
				wg.Go(func() {
					_, err := h.app.Dispatcher.Attempt(ctx, pending[0].ID, dispatch.First)
					mu.Lock()
					defer mu.Unlock()
					switch {
					case err == nil:
						sent++
					case errors.Is(err, dispatch.ErrNotClaimed):
						notClaimed++
					default:
						t.Error(err)
					}
				})
			}
			wg.Wait()
			if sent != 1 || notClaimed != 5 || recv.Count() != 1 {
				t.Fatalf("%d attempts sent, %d not claimed, receiver got %d; want 1, 5, 1", sent, notClaimed, recv.Count())
			}
		})
	}
}

// A worker whose secrets.key cannot open the webhook's secret fails the
// task and leaves the row exactly as it found it: not attempted, due when it
// was due.
func TestUnopenableSecretLeavesTheRowAsItWas(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(string(b), func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, b)
			recv := testreceiver.New(t)
			h.createWebhook("orders", recv.URL, func(in *webhook.Input) { in.Secret = ptr("s3cret") })
			ctx := context.Background()
			pending, err := h.app.Dispatcher.FanOut(ctx, dispatchEvent("ev-key"))
			if err != nil || len(pending) != 1 {
				t.Fatalf("fan-out %v %v", pending, err)
			}
			before := h.delivery("ev-key")
			other := testenv.SecretBox(t)
			wrong := dispatch.New(h.db, h.app.Sender, other, dispatch.Config{Clock: h.clock})
			for _, mode := range []dispatch.Mode{dispatch.First, dispatch.Retry} {
				if mode == dispatch.Retry {
					h.clock.Advance(5 * time.Minute) // now due for a retry
				}
				if _, err := wrong.Attempt(ctx, before.ID, mode); err == nil || errors.Is(err, dispatch.ErrNotClaimed) {
					t.Fatalf("%s attempt with the wrong key: %v, want a failure", mode, err)
				}
				after := h.delivery("ev-key")
				if after.Status != before.Status || after.Attempts != before.Attempts || !after.NextRetry.Equal(*before.NextRetry) {
					t.Fatalf("%s: row went from %s/%d/%v to %s/%d/%v", mode, before.Status, before.Attempts, before.NextRetry,
						after.Status, after.Attempts, after.NextRetry)
				}
			}
			if recv.Count() != 0 {
				t.Fatalf("receiver got %d requests", recv.Count())
			}
		})
	}
}

// A worker without secrets.key cannot open a webhook's secret however often
// it tries: the task is archived at once (asynq.SkipRetry) with the fix in
// its error, rather than retried 25 times, and the row stays due.
func TestMissingSecretsKeyIsPermanent(t *testing.T) {
	t.Parallel()
	h := newHarness(t, pg)
	recv := testreceiver.New(t)
	h.createWebhook("orders", recv.URL, func(in *webhook.Input) { in.Secret = ptr("s3cret") })
	ctx := context.Background()
	pending, err := h.app.Dispatcher.FanOut(ctx, dispatchEvent("ev-nokey"))
	if err != nil || len(pending) != 1 {
		t.Fatalf("fan-out %v %v", pending, err)
	}
	noKey := &tasks.Handlers{Dispatcher: dispatch.New(h.db, h.app.Sender, &secretbox.Box{}, dispatch.Config{Clock: h.clock})}
	err = noKey.HandleDeliver(ctx, tasks.NewDeliverTask(pending[0].ID, "orders", "default"))
	if !errors.Is(err, asynq.SkipRetry) || !strings.Contains(err.Error(), "secrets.key is not set") || !strings.Contains(err.Error(), "HOMING_SECRETS_KEY") {
		t.Fatalf("attempt without secrets.key: %v; want asynq.SkipRetry saying to set HOMING_SECRETS_KEY", err)
	}
	if d := h.delivery("ev-nokey"); d.Status != models.StatusFailed || d.Attempts != 0 || recv.Count() != 0 {
		t.Fatalf("row %s/%d, %d requests; want Failed, not attempted, nothing sent", d.Status, d.Attempts, recv.Count())
	}
}
