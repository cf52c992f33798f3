package tasks_test

import (
	"context"
	"sync"
	"testing"

	"github.com/homingdev/homing/internal/testenv"
	"github.com/homingdev/homing/internal/testreceiver"
	"github.com/homingdev/homing/models"
	"github.com/homingdev/homing/tasks"
	"github.com/homingdev/homing/webhook"
)

// The event task sends one delivery on its own queue itself; the others
// still get a webhook:deliver task each, and a webhook on another queue is
// never sent from the event's queue.
func TestEventTaskSendsOneFirstAttemptOnItsOwnQueue(t *testing.T) {
	t.Parallel()
	h := newHarness(t, pg)
	a, b, c := testreceiver.New(t), testreceiver.New(t), testreceiver.New(t)
	h.createWebhook("a", a.URL, nil)
	h.createWebhook("b", b.URL, nil)
	h.createWebhook("c", c.URL, func(in *webhook.Input) { in.Queue = ptr("slow") }) // not served here
	id := h.publish(salesOrder("ev-inline"))
	testenv.Eventually(t, "a and b delivered", func() bool {
		n := 0
		for _, d := range h.deliveries(id) {
			if d.Status == models.StatusDelivered {
				n++
			}
		}
		return n == 2
	})
	testenv.Eventually(t, "default queue drained", func() bool { return queueEmpty(t, h) })
	if a.Count() != 1 || b.Count() != 1 || c.Count() != 0 {
		t.Fatalf("receivers got a=%d b=%d c=%d requests, want 1, 1, 0", a.Count(), b.Count(), c.Count())
	}
	info, err := h.insp.GetQueueInfo(tasks.DefaultQueue)
	if err != nil {
		t.Fatal(err)
	}
	// The event task and one webhook:deliver task; the other first attempt
	// was made by the event task.
	if info.ProcessedTotal != 2 {
		t.Errorf("default queue processed %d tasks, want 2 (event + one deliver)", info.ProcessedTotal)
	}
	slow, err := h.insp.ListPendingTasks("slow")
	if err != nil {
		t.Fatal(err)
	}
	if len(slow) != 1 || slow[0].Type != tasks.TypeDeliver {
		t.Fatalf("queue slow holds %v, want the one webhook:deliver task of webhook c", slow)
	}
}

// An inline claim is written with the row, before any request, and only the
// fan-out that inserted the row owns it: a re-run of the same event (asynq
// re-running a crashed task) gets neither the claim nor a pending row.
func TestFanOutInlineClaimIsWrittenFirstAndOwnedOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t, pg)
	recv := testreceiver.New(t)
	h.createWebhook("orders", recv.URL, nil)
	ctx := context.Background()
	ev := dispatchEvent("ev-owned")
	pending, claimed, err := h.app.Dispatcher.FanOutInline(ctx, ev, tasks.DefaultQueue)
	if err != nil || len(pending) != 0 || claimed == nil {
		t.Fatalf("fan-out: pending %v, claimed %v, %v; want the one row claimed", pending, claimed, err)
	}
	d := h.delivery(ev.ID)
	if d.Status != models.StatusFailed || d.Attempts != 1 || d.NextRetry == nil || !d.NextRetry.After(h.clock.Now()) {
		t.Fatalf("before the request the row is %s, %d attempts, next_retry %v; want Failed, 1, a lease in the future", d.Status, d.Attempts, d.NextRetry)
	}
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			p, c, err := h.app.Dispatcher.FanOutInline(ctx, ev, tasks.DefaultQueue)
			if err != nil || len(p) != 0 || c != nil {
				t.Errorf("re-run fan-out: pending %v, claimed %v, %v; want nothing", p, c, err)
			}
		})
	}
	wg.Wait()
	if n := h.sweep(0); n != 0 {
		t.Fatalf("a sweep took the claimed row")
	}
	out, err := h.app.Dispatcher.AttemptClaimed(ctx, claimed)
	if err != nil || out.Status != models.StatusDelivered {
		t.Fatalf("attempt: %+v %v", out, err)
	}
	d = h.waitAttempts(ev.ID, 1)
	if recv.Count() != 1 || d.Status != models.StatusDelivered || d.NextRetry != nil {
		t.Fatalf("receiver got %d, row %s next %v", recv.Count(), d.Status, d.NextRetry)
	}
}
