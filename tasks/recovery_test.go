package tasks_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/homingdev/homing/inspect"
	"github.com/homingdev/homing/internal/testenv"
	"github.com/homingdev/homing/internal/testreceiver"
	"github.com/homingdev/homing/models"
	"github.com/homingdev/homing/recovery"
	"github.com/homingdev/homing/webhook"
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
	rec := recovery.New(h.db, h.clock)
	ctx := context.Background()

	// retry ID: one Exhausted delivery back on the road, budget renewed.
	one := h.delivery("ev-rec-0")
	if err := rec.Retry(ctx, one.ID); err != nil {
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
	if err := rec.Retry(ctx, one.ID); !errors.Is(err, recovery.ErrDelivered) {
		t.Fatalf("retry of a Delivered delivery: %v", err)
	}

	// recover: two at once requeue each of the other five exactly once.
	var wg sync.WaitGroup
	counts := make([]int64, 2)
	for i := range counts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := rec.Recover(ctx, recovery.Filter{Webhook: "orders", Since: 24 * time.Hour}, false, nil)
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
	if dry, _ := rec.Recover(ctx, recovery.Filter{Webhook: "orders"}, true, nil); dry != 0 {
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
	newID, err := rec.Resend(ctx, one.ID)
	if err != nil {
		t.Fatal(err)
	}
	before = recv.Count()
	h.sweep(0)
	testenv.Eventually(t, "resent delivery", func() bool {
		det, err := inspect.Show(ctx, h.db, newID)
		return err == nil && det.Status == models.StatusDelivered
	})
	det, _ := inspect.Show(ctx, h.db, newID)
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
