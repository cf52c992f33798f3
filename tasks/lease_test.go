package tasks_test

import (
	"context"
	"testing"
	"time"

	"github.com/homingdev/homing/internal/engine/dispatch"
	"github.com/homingdev/homing/internal/testing/testenv"
	"github.com/homingdev/homing/internal/testing/testreceiver"
	"github.com/homingdev/homing/models"
	"github.com/homingdev/homing/tasks"
)

// Issue 25: an inline first attempt whose claim outlives its lease before
// the request goes out (the outbox release in Committed waited on a
// relay's locks, or the worker stalled) must not send: by then the sweeper
// has found the row due and its retry has claimed and sent it. The inline
// attempt gives its claim back, fenced on its attempt count, so the retry's
// claim stands, and the receiver gets the delivery once.
func TestInlineAttemptDoesNotSendOnAnExpiredLease(t *testing.T) {
	t.Parallel()
	h := newHarness(t, pg)
	recv := testreceiver.New(t)
	h.createWebhook("orders", recv.URL, nil)
	ctx := context.Background()
	ev := dispatchEvent("ev-late-inline")
	var queued pendingLog
	err := h.app.Dispatcher.HandleEvent(ctx, ev, dispatch.Inline{Queue: tasks.DefaultQueue, Enqueue: queued.enqueue,
		Committed: func(context.Context) {
			d := h.delivery(ev.ID)
			if d.Attempts != 1 || d.NextRetry == nil {
				t.Fatalf("the inline row is %s with %d attempts, next_retry %v; want claimed", d.Status, d.Attempts, d.NextRetry)
			}
			// The lease runs out while the event task waits here: the
			// sweeper finds the row due and the worker's retry sends it.
			if n := h.sweep(d.NextRetry.Sub(h.clock.Now()) + time.Second); n != 1 {
				t.Fatalf("the sweep queued %d retries once the lease ended, want 1", n)
			}
			testenv.Eventually(t, "the retry to be recorded", func() bool {
				d := h.delivery(ev.ID)
				return d.Attempts == 2 && d.Status == models.StatusDelivered
			})
		}})
	if err != nil {
		t.Fatalf("HandleEvent: %v", err)
	}
	if n := recv.Count(); n != 1 {
		t.Fatalf("the receiver got %d requests, want 1: the inline attempt sent on a lease that had ended", n)
	}
	if d := h.delivery(ev.ID); d.Status != models.StatusDelivered || d.Attempts != 2 {
		t.Fatalf("the row is %s after %d attempts, want Delivered by the retry (2)", d.Status, d.Attempts)
	}
}
