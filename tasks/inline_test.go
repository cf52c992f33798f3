package tasks_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/homingdev/homing/internal/engine/dispatch"
	"github.com/homingdev/homing/internal/engine/webhook"
	"github.com/homingdev/homing/internal/testing/testenv"
	"github.com/homingdev/homing/internal/testing/testreceiver"
	"github.com/homingdev/homing/models"
	"github.com/homingdev/homing/tasks"
)

// pendingLog records what dispatch.HandleEvent asked to queue.
type pendingLog struct {
	mu  sync.Mutex
	ids []string
}

func (l *pendingLog) enqueue(_ context.Context, p dispatch.Pending) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ids = append(l.ids, p.WebhookName)
	return nil
}

func (l *pendingLog) got() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Sorted(slices.Values(l.ids))
}

// An inline claim is written with the row, before any request, and only the
// fan-out that inserted the row owns it: re-runs of the same event (asynq
// re-running a crashed task) while the first attempt is in flight send
// nothing and queue nothing, and no sweep takes the row.
func TestInlineClaimIsWrittenFirstAndOwnedOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t, pg)
	recv := testreceiver.New(t)
	release := recv.Hold()
	defer release()
	h.createWebhook("orders", recv.URL, nil)
	ctx := context.Background()
	ev := dispatchEvent("ev-owned")
	var queued pendingLog
	first := make(chan error, 1)
	go func() {
		first <- h.app.Dispatcher.HandleEvent(ctx, ev, dispatch.Inline{Queue: tasks.DefaultQueue, Enqueue: queued.enqueue})
	}()
	testenv.Eventually(t, "the inline request to reach the receiver", func() bool { return recv.Count() == 1 })
	d := h.delivery(ev.ID)
	if d.Status != models.StatusFailed || d.Attempts != 1 || d.NextRetry == nil || !d.NextRetry.After(h.clock.Now()) {
		t.Fatalf("during the request the row is %s, %d attempts, next_retry %v; want Failed, 1, a lease in the future", d.Status, d.Attempts, d.NextRetry)
	}
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			if err := h.app.Dispatcher.HandleEvent(ctx, ev, dispatch.Inline{Queue: tasks.DefaultQueue, Enqueue: queued.enqueue}); err != nil {
				t.Errorf("re-run: %v", err)
			}
		})
	}
	wg.Wait()
	if n := h.sweep(0); n != 0 {
		t.Fatalf("a sweep took the claimed row")
	}
	release()
	if err := <-first; err != nil {
		t.Fatalf("first run: %v", err)
	}
	d = h.waitAttempts(ev.ID, 1)
	if recv.Count() != 1 || d.Status != models.StatusDelivered || d.NextRetry != nil {
		t.Fatalf("receiver got %d, row %s next %v; want 1 request, Delivered", recv.Count(), d.Status, d.NextRetry)
	}
	if got := queued.got(); len(got) != 0 {
		t.Fatalf("queued %v; the re-runs must queue nothing", got)
	}
}

// When queueing the event's other deliveries fails, HandleEvent gives its
// inline claim back before any request: the row is due and unattempted, and
// the task's re-run queues it with the others. Nothing is sent twice and
// nothing is left claimed by a task that gave up.
func TestInlineClaimIsReleasedWhenQueueingFails(t *testing.T) {
	t.Parallel()
	h := newHarness(t, pg)
	here, slow := testreceiver.New(t), testreceiver.New(t)
	h.createWebhook("here", here.URL, nil)
	h.createWebhook("slow", slow.URL, func(in *webhook.Input) { in.Queue = ptr("slow") })
	ctx := context.Background()
	ev := dispatchEvent("ev-release")
	redisDown := errors.New("redis is down")
	err := h.app.Dispatcher.HandleEvent(ctx, ev, dispatch.Inline{Queue: tasks.DefaultQueue,
		Enqueue: func(context.Context, dispatch.Pending) error { return redisDown }})
	if !errors.Is(err, redisDown) {
		t.Fatalf("HandleEvent returned %v, want the enqueue error", err)
	}
	for _, d := range h.deliveries(ev.ID) {
		if d.Status != models.StatusFailed || d.Attempts != 0 {
			t.Errorf("delivery to %s is %s after %d attempts; want Failed, unattempted", d.WebhookName, d.Status, d.Attempts)
		}
		// The claimed row is due again at once; a planned one keeps its
		// first attempt's grace.
		if d.WebhookName == "here" && (d.NextRetry == nil || d.NextRetry.After(h.clock.Now())) {
			t.Errorf("the released row's next_retry is %v, want due (now %v)", d.NextRetry, h.clock.Now())
		}
	}
	if here.Count()+slow.Count() != 0 {
		t.Fatalf("receivers got %d and %d requests; nothing may be sent before the others are queued", here.Count(), slow.Count())
	}
	var queued pendingLog
	if err := h.app.Dispatcher.HandleEvent(ctx, ev, dispatch.Inline{Queue: tasks.DefaultQueue, Enqueue: queued.enqueue}); err != nil {
		t.Fatalf("re-run: %v", err)
	}
	if got := queued.got(); !slices.Equal(got, []string{"here", "slow"}) {
		t.Fatalf("the re-run queued %v, want both deliveries", got)
	}
	if here.Count()+slow.Count() != 0 {
		t.Fatalf("the re-run sent %d requests itself; the released row must go through its task", here.Count()+slow.Count())
	}
}
