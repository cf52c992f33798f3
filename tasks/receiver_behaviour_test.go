package tasks_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/homingdev/homing/internal/engine/webhook"
	"github.com/homingdev/homing/internal/testing/testenv"
	"github.com/homingdev/homing/internal/testing/testreceiver"
	"github.com/homingdev/homing/models"
	"github.com/homingdev/homing/tasks"
)

func TestRetryAfterIsHonoured(t *testing.T) {
	t.Parallel()
	h := newHarness(t, pg)
	recv := testreceiver.New(t)
	recv.SetStatus(http.StatusServiceUnavailable)
	recv.SetHeader("Retry-After", "3600")
	h.createWebhook("orders", recv.URL, nil)
	id := h.publish(salesOrder("ev-retry-after"))
	d := h.waitAttempts(id, 1)
	if got := d.NextRetry.Sub(h.clock.Now()); got != time.Hour {
		t.Fatalf("next retry in %s, want the receiver's Retry-After of 1h (the schedule says 5m)", got)
	}
	if n := h.sweep(59 * time.Minute); n != 0 {
		t.Fatalf("retried %d before Retry-After", n)
	}
}

func TestGoneExhaustsAndDisablesTheWebhook(t *testing.T) {
	t.Parallel()
	h := newHarness(t, pg)
	recv := testreceiver.New(t)
	recv.SetStatus(http.StatusServiceUnavailable)
	h.createWebhook("orders", recv.URL, nil)
	pendingID := h.publish(salesOrder("ev-before-gone"))
	h.waitAttempts(pendingID, 1) // Failed, a retry scheduled
	recv.SetStatus(http.StatusGone)
	id := h.publish(salesOrder("ev-gone"))
	testenv.Eventually(t, "410 recorded", func() bool {
		rows := h.deliveries(id)
		return len(rows) == 1 && rows[0].Status == models.StatusExhausted
	})
	d := h.delivery(id)
	if d.NextRetry != nil || !strings.Contains(d.LastError, "410") {
		t.Fatalf("after 410: next %v error %q", d.NextRetry, d.LastError)
	}
	w, err := h.hooks.Get(context.Background(), "", "orders")
	if err != nil {
		t.Fatal(err)
	}
	if w.Enabled || !strings.Contains(w.DisabledReason, "410 Gone") {
		t.Fatalf("webhook enabled %v reason %q, want disabled with the reason", w.Enabled, w.DisabledReason)
	}
	// The earlier delivery's retry is exhausted without a request.
	before := recv.Count()
	h.sweep(5 * time.Minute)
	testenv.Eventually(t, "pending delivery exhausted", func() bool { return h.delivery(pendingID).Status == models.StatusExhausted })
	if p := h.delivery(pendingID); !strings.Contains(p.LastError, "webhook disabled: receiver answered 410 Gone") || recv.Count() != before {
		t.Fatalf("pending delivery %q, receiver got %d more", p.LastError, recv.Count()-before)
	}
}

func TestEndpointThatOnlyFailsIsDisabledAfterHealthWindow(t *testing.T) {
	t.Parallel()
	h := newHarness(t, pg)
	recv := testreceiver.New(t)
	recv.SetStatus(http.StatusInternalServerError)
	h.createWebhook("orders", recv.URL, func(in *webhook.Input) { in.MaxRetries = ptr(50) })
	// A failure starts the clock; a success in between resets it.
	h.waitAttempts(h.publish(salesOrder("ev-h-1")), 1)
	if hl := h.health("orders"); hl.FailingSince == nil || !hl.FailingSince.Equal(h.clock.Now()) || hl.Failures != 1 {
		t.Fatalf("health %+v after the first failure", hl)
	}
	recv.SetStatus(http.StatusOK)
	h.clock.Advance(4 * 24 * time.Hour)
	h.waitAttempts(h.publish(salesOrder("ev-h-2")), 1)
	if hl := h.health("orders"); hl.FailingSince != nil || hl.State != webhook.HealthHealthy {
		t.Fatalf("a success did not reset the clock: %+v", hl)
	}
	// Fail again, then keep failing past health.disable_after (5 days).
	recv.SetStatus(http.StatusInternalServerError)
	pending := h.publish(salesOrder("ev-h-3"))
	h.waitAttempts(pending, 1)
	h.clock.Advance(5*24*time.Hour + time.Second)
	last := h.publish(salesOrder("ev-h-4"))
	h.waitAttempts(last, 1)
	w, _ := h.hooks.Get(context.Background(), "", "orders")
	if w.Enabled || !strings.Contains(w.DisabledReason, "health.disable_after") {
		t.Fatalf("webhook enabled %v reason %q, want disabled by the health rule", w.Enabled, w.DisabledReason)
	}
	for _, ev := range []string{pending, last} {
		d := h.delivery(ev)
		if d.Status != models.StatusExhausted || d.NextRetry != nil || !strings.Contains(d.LastError, "webhook disabled") {
			t.Errorf("%s: %s next %v error %q, want Exhausted with the reason", ev, d.Status, d.NextRetry, d.LastError)
		}
	}
	if d := h.delivery("ev-h-1"); d.Status != models.StatusExhausted {
		t.Errorf("the oldest pending retry is %s, want Exhausted", d.Status)
	}
	// Enabling again starts with a clean record.
	if _, err := h.hooks.SetEnabled(context.Background(), "", "orders", true, ""); err != nil || h.health("orders").State != webhook.HealthHealthy {
		t.Fatalf("re-enable: %+v %v", h.health("orders"), err)
	}
}

func TestCorruptedTaskPayloadsAreArchivedWithoutRows(t *testing.T) {
	t.Parallel()
	h := newHarness(t, pg)
	recv := testreceiver.New(t)
	h.createWebhook("orders", recv.URL, nil)
	ac := asynq.NewClient(h.redis)
	defer ac.Close()
	bad := []struct{ typ, payload string }{
		{tasks.TypeEvent, `{`},
		{tasks.TypeEvent, `{"id":"x","doc_type":"Sales Order","event":"on_submit","doc":"not an object"}`},
		{tasks.TypeEvent, `{"id":"","doc_type":"Sales Order","event":"on_submit","doc":{}}`},
		{tasks.TypeEvent, `{"id":"x","doc_type":"Sales Order","event":"on_explode","doc":{}}`},
		{tasks.TypeDeliver, `[]`},
		{tasks.TypeDeliver, `{"delivery_id":""}`},
		{tasks.TypeRetry, `{"delivery_id":42}`},
		{tasks.TypeRetry, "\x00\xff"},
	}
	for _, b := range bad {
		if _, err := ac.Enqueue(asynq.NewTask(b.typ, []byte(b.payload)), asynq.Queue(tasks.DefaultQueue), asynq.MaxRetry(5)); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, "corrupted tasks archived", func() bool {
		info, err := h.insp.GetQueueInfo(tasks.DefaultQueue)
		return err == nil && info.Archived == len(bad)
	})
	var rows int64
	h.db.Model(&models.Delivery{}).Count(&rows)
	if rows != 0 || recv.Count() != 0 {
		t.Fatalf("corrupted payloads wrote %d rows and sent %d requests", rows, recv.Count())
	}
	// The worker is still healthy.
	h.waitAttempts(h.publish(salesOrder("ev-after-corrupt")), 1)
}

// A Failed row whose webhook is disabled is exhausted by its attempt,
// without a request. Disabling exhausts a webhook's pending rows in the same
// transaction, so only a race leaves one behind (a fan-out that read the
// webhook enabled and inserted after the disable committed); the state is
// written directly here.
func TestRowOfADisabledWebhookIsExhaustedWithoutARequest(t *testing.T) {
	t.Parallel()
	for name, db := range map[string]backend{"postgres": pg, "sqlite": sqlite} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, db)
			recv := testreceiver.Answering(t, http.StatusServiceUnavailable)
			h.createWebhook("orders", recv.URL, nil)
			id := h.publish(salesOrder("ev-raced-disable"))
			h.waitAttempts(id, 1)
			if err := h.db.Exec("UPDATE webhooks SET enabled = ?, disabled_reason = ? WHERE name = ?", false, "turned off by hand", "orders").Error; err != nil {
				t.Fatal(err)
			}
			before := recv.Count()
			h.sweep(5 * time.Minute)
			testenv.Eventually(t, "the row exhausted", func() bool { return h.delivery(id).Status == models.StatusExhausted })
			if d := h.delivery(id); d.LastError != "webhook disabled: turned off by hand" || d.Attempts != 1 || recv.Count() != before {
				t.Fatalf("row %q after %d attempts, receiver got %d more; want exhausted with the reason, no request", d.LastError, d.Attempts, recv.Count()-before)
			}
		})
	}
}
