package tasks_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/homingdev/homing/internal/engine/webhook"
	"github.com/homingdev/homing/internal/ops/inspect"
	"github.com/homingdev/homing/internal/ops/recovery"
	"github.com/homingdev/homing/internal/testing/testenv"
	"github.com/homingdev/homing/internal/testing/testreceiver"
	"github.com/homingdev/homing/models"
)

func TestRetryRecoverResendGoThroughTheSweeper(t *testing.T) {
	t.Parallel()
	h := newHarness(t, pg)
	recv := testreceiver.New(t)
	recv.SetStatus(http.StatusInternalServerError)
	h.createWebhook("orders", recv.URL, func(in *webhook.Input) { in.MaxRetries = ptr(0) })
	const n = 6
	for i := 0; i < n; i++ {
		h.waitAttempts(h.publish(salesOrder(fmt.Sprintf("ev-rec-%d", i))), 1)
	}
	rec := recovery.New(h.db, h.clock, 0)
	ctx := context.Background()

	// retry ID: one Exhausted delivery back on the road, budget renewed.
	one := h.delivery("ev-rec-0")
	if err := rec.Retry(ctx, "", one.ID); err != nil {
		t.Fatal(err)
	}
	d := h.delivery("ev-rec-0")
	if d.Status != models.StatusFailed || d.NextRetry == nil || d.MaxRetries != 1 {
		t.Fatalf("after retry: %s next %v max %d", d.Status, d.NextRetry, d.MaxRetries)
	}
	recv.SetStatus(http.StatusOK)
	if got := h.sweep(0); got != 1 {
		t.Fatalf("swept %d", got)
	}
	if d = h.waitAttempts("ev-rec-0", 2); d.Status != models.StatusDelivered {
		t.Fatalf("retried delivery %s", d.Status)
	}
	if err := rec.Retry(ctx, "", one.ID); !errors.Is(err, recovery.ErrDelivered) {
		t.Fatalf("retry of a Delivered delivery: %v", err)
	}

	// recover: two at once requeue each of the other five exactly once.
	var wg sync.WaitGroup
	counts := make([]int64, 2)
	for i := range counts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := rec.Recover(ctx, "", recovery.Filter{Webhook: "orders", Since: 24 * time.Hour}, false, nil)
			if err != nil {
				t.Error(err)
			}
			counts[i] = c
		}()
	}
	wg.Wait()
	if counts[0]+counts[1] != n-1 {
		t.Fatalf("recover counts %v, want %d in total", counts, n-1)
	}
	if dry, _ := rec.Recover(ctx, "", recovery.Filter{Webhook: "orders"}, true, nil); dry != 0 {
		t.Fatalf("nothing left to recover, dry run says %d", dry)
	}
	before := recv.Count()
	h.sweep(0)
	h.sweep(0) // a second sweep finds nothing new to send
	testenv.Eventually(t, "recovered deliveries", func() bool {
		var c int64
		h.db.Model(&models.Delivery{}).Where("status = ?", models.StatusDelivered).Count(&c)
		return c == n
	})
	testenv.Eventually(t, "queues drained", func() bool { return queueEmpty(t, h) })
	if got := recv.Count() - before; got != n-1 {
		t.Fatalf("receiver got %d requests for %d recovered deliveries", got, n-1)
	}

	// resend: a new delivery of the same frozen payload, linked.
	newID, err := rec.Resend(ctx, "", one.ID)
	if err != nil {
		t.Fatal(err)
	}
	before = recv.Count()
	h.sweep(0)
	testenv.Eventually(t, "resent delivery", func() bool {
		det, err := inspect.Show(ctx, h.db, "", newID)
		return err == nil && det.Status == models.StatusDelivered
	})
	det, _ := inspect.Show(ctx, h.db, "", newID)
	if det.ResentFrom == nil || *det.ResentFrom != one.ID || det.Payload != string(one.Payload) {
		t.Fatalf("resend %+v", det)
	}
	reqs := recv.Requests()
	if recv.Count()-before != 1 || reqs[len(reqs)-1].Header.Get("Webhook-Id") != newID || string(reqs[len(reqs)-1].Body) != string(one.Payload) {
		t.Fatalf("resend reached the receiver as %+v", reqs[len(reqs)-1])
	}

	st, err := inspect.ComputeStats(ctx, h.db, h.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if st.ByStatus[models.StatusDelivered] != n+1 || st.FailedBacklog != 0 || len(st.Webhooks) != 1 || st.Webhooks[0].AttemptsLastHour != int64(2*n+1) {
		t.Fatalf("stats %+v %+v", st, st.Webhooks)
	}
	if r := st.Webhooks[0].SuccessRateLastHour; r == nil || *r < 0.53 || *r > 0.54 { // 7 of 13
		t.Fatalf("success rate %v", r)
	}
}

// A delivery whose body could not be built keeps its document: after the
// webhook is fixed, retry and resend build the body from it with the
// webhook's current definition, and until then they refuse. Nothing ever
// sends an empty body (issue 25).
func TestUnbuiltDeliveryIsBuiltByRetryAndResend(t *testing.T) {
	t.Parallel()
	for _, b := range []backend{pg, sqlite} {
		t.Run(string(b), func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, b)
			recv := testreceiver.New(t)
			h.createWebhook("orders", recv.URL, func(in *webhook.Input) { in.Template = ptr(`{"discount": {{ doc.discount }}}`) })
			ctx := context.Background()
			unbuilt := func(ev string) models.Delivery {
				t.Helper()
				h.publish(salesOrder(ev))
				var d models.Delivery
				testenv.Eventually(t, "delivery "+ev+" exhausted at build", func() bool {
					rows := h.deliveries(ev)
					if len(rows) == 1 {
						d = rows[0]
					}
					return len(rows) == 1 && d.Status == models.StatusExhausted
				})
				if len(d.Payload) != 0 || d.URLDoc == nil {
					t.Fatalf("unbuilt delivery payload %q doc %v", d.Payload, d.URLDoc)
				}
				return d
			}
			one, two := unbuilt("ev-unbuilt-1"), unbuilt("ev-unbuilt-2")
			rec := recovery.New(h.db, h.clock, 0)

			// Still broken: both refuse, saying why, and change nothing.
			if err := rec.Retry(ctx, "", one.ID); !errors.Is(err, recovery.ErrNotBuilt) || !strings.Contains(err.Error(), "discount") {
				t.Fatalf("retry with the template still broken: %v", err)
			}
			if _, err := rec.Resend(ctx, "", two.ID); !errors.Is(err, recovery.ErrNotBuilt) {
				t.Fatalf("resend with the template still broken: %v", err)
			}
			if d := h.delivery("ev-unbuilt-1"); d.Status != models.StatusExhausted {
				t.Fatalf("refused retry left %s", d.Status)
			}

			if _, err := h.hooks.Update(ctx, "", "orders", webhook.Input{Template: ptr(`{"name": "{{ doc.name }}", "total": {{ doc.grand_total }}}`)}); err != nil {
				t.Fatal(err)
			}
			// Two retries at once: one builds and requeues it, the other
			// requeues it too or says it lost; it is sent once either way.
			errs := make(chan error, 2)
			for range 2 {
				go func() { errs <- rec.Retry(ctx, "", one.ID) }()
			}
			ok := 0
			for range 2 {
				switch err := <-errs; {
				case err == nil:
					ok++
				case !errors.Is(err, recovery.ErrInFlight):
					t.Fatal(err)
				}
			}
			if ok == 0 {
				t.Fatal("neither of two retries requeued the delivery")
			}
			newID, err := rec.Resend(ctx, "", two.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got := h.sweep(0); got != 2 {
				t.Fatalf("swept %d, want 2", got)
			}
			testenv.Eventually(t, "both sent", func() bool { return recv.Count() == 2 })
			for _, r := range recv.Requests() {
				if string(r.Body) != `{"name": "SO-1", "total": 1500}` || r.Header.Get("Content-Type") != "application/json" {
					t.Fatalf("receiver got %q (Content-Type %q)", r.Body, r.Header.Get("Content-Type"))
				}
			}
			testenv.Eventually(t, "both delivered", func() bool {
				a, b := h.delivery("ev-unbuilt-1"), h.deliveries("ev-unbuilt-2/resend/"+newID)
				return a.Status == models.StatusDelivered && len(b) == 1 && b[0].Status == models.StatusDelivered
			})
			if got := h.sweep(time.Hour); got != 0 || recv.Count() != 2 {
				t.Fatalf("a later sweep enqueued %d; the receiver got %d requests, want 2", got, recv.Count())
			}
		})
	}
}

// The attempt itself refuses a delivery with no payload when its method
// carries a body: recorded Exhausted with the reason, never sent, never
// Delivered, whatever made it due (here, a row requeued as an older
// homing's retry left it).
func TestAttemptRefusesEmptyPayload(t *testing.T) {
	t.Parallel()
	for _, b := range []backend{pg, sqlite} {
		t.Run(string(b), func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, b)
			recv := testreceiver.New(t)
			h.createWebhook("orders", recv.URL, func(in *webhook.Input) { in.Template = ptr(`{"discount": {{ doc.discount }}}`) })
			h.publish(salesOrder("ev-empty"))
			testenv.Eventually(t, "exhausted at build", func() bool {
				rows := h.deliveries("ev-empty")
				return len(rows) == 1 && rows[0].Status == models.StatusExhausted
			})
			now := h.clock.Now()
			if err := h.db.Model(&models.Delivery{}).Where("event_id = ?", "ev-empty").
				Updates(map[string]any{"status": models.StatusFailed, "next_retry": now, "max_retries": 3}).Error; err != nil {
				t.Fatal(err)
			}
			if got := h.sweep(0); got != 1 {
				t.Fatalf("swept %d", got)
			}
			d := h.waitAttempts("ev-empty", 1)
			if d.Status != models.StatusExhausted || !strings.Contains(d.LastError, "no payload") {
				t.Fatalf("after the attempt: %s %q", d.Status, d.LastError)
			}
			if n := recv.Count(); n != 0 {
				t.Fatalf("receiver got %d requests, first body %q", n, recv.Bodies()[0])
			}
		})
	}
}
