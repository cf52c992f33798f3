package tasks_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/homingdev/homing/internal/engine/dispatch"
	"github.com/homingdev/homing/internal/engine/webhook"
	"github.com/homingdev/homing/internal/testing/testenv"
	"github.com/homingdev/homing/internal/testing/testreceiver"
	"github.com/homingdev/homing/models"
	"github.com/homingdev/homing/tasks"
)

// Issue 27: one task per event. These tests hold the event task's inline
// first attempts (dispatch.HandleEvent) to the rules a single one had.

// receivers makes n webhooks hook-00 … on the default queue, each with a
// receiver of its own, in the order of the webhooks' names.
func (h *harness) receivers(n int) []*testreceiver.Receiver {
	h.t.Helper()
	out := make([]*testreceiver.Receiver, n)
	for i := range out {
		out[i] = testreceiver.New(h.t)
		h.createWebhook(fmt.Sprintf("hook-%02d", i), out[i].URL, func(in *webhook.Input) {
			// A receiver a test holds is released by the test, never by
			// its request timing out, however slow the machine.
			in.Timeout = ptr(webhook.MaxTimeout)
		})
	}
	return out
}

// counts is how many requests each receiver got.
func counts(rs []*testreceiver.Receiver) []int {
	out := make([]int, len(rs))
	for i, r := range rs {
		out[i] = r.Count()
	}
	return out
}

// each is n copies of v.
func each(n, v int) []int { return slices.Repeat([]int{v}, n) }

// statuses counts the event's deliveries by status.
func (h *harness) statuses(eventID string) map[string]int {
	h.t.Helper()
	out := map[string]int{}
	for _, d := range h.deliveries(eventID) {
		out[d.Status]++
	}
	return out
}

// An event with ten webhooks on the event's queue is one task: its task
// makes all ten first attempts and queues no webhook:deliver task; a
// webhook on another queue still gets a task of its own there.
func TestEventTaskSendsEveryFirstAttemptOnItsOwnQueue(t *testing.T) {
	t.Parallel()
	h := newHarness(t, pg)
	rs := h.receivers(10)
	other := testreceiver.New(t)
	h.createWebhook("other", other.URL, func(in *webhook.Input) { in.Queue = ptr("slow") }) // not served here
	id := h.publish(salesOrder("ev-ten"))
	testenv.Eventually(t, "ten deliveries Delivered", func() bool { return h.statuses(id)[models.StatusDelivered] == 10 })
	testenv.Eventually(t, "default queue drained", func() bool { return queueEmpty(t, h) })
	if got := counts(rs); !slices.Equal(got, each(10, 1)) {
		t.Fatalf("receivers got %v requests, want one each", got)
	}
	if other.Count() != 0 {
		t.Fatalf("the webhook on queue slow got %d requests from the default queue's worker", other.Count())
	}
	info, err := h.insp.GetQueueInfo(tasks.DefaultQueue)
	if err != nil {
		t.Fatal(err)
	}
	if info.ProcessedTotal != 1 {
		t.Errorf("default queue processed %d tasks, want 1: the event's, which sent all ten", info.ProcessedTotal)
	}
	slow, err := h.insp.ListPendingTasks("slow")
	if err != nil {
		t.Fatal(err)
	}
	if len(slow) != 1 || slow[0].Type != tasks.TypeDeliver {
		t.Fatalf("queue slow holds %v, want the one webhook:deliver task of webhook other", slow)
	}
	for _, d := range h.deliveries(id) {
		if d.WebhookName != "other" && d.Attempts != 1 {
			t.Errorf("delivery to %s made %d attempts, want 1", d.WebhookName, d.Attempts)
		}
	}
}

// A slow receiver among ten holds up its own request only: the other nine
// are sent and recorded while it still holds its request. "While" is
// asserted as an order of events, not a time: when the nine are
// Delivered, hook-00's request has arrived and its attempt has no outcome
// yet (its timeout, webhook.MaxTimeout, is never what ends it; the test
// releases it).
func TestSlowReceiverDoesNotDelayTheEventsOtherRequests(t *testing.T) {
	t.Parallel()
	h := newHarness(t, pg)
	rs := h.receivers(10)
	release := rs[0].Hold()
	defer release()
	id := h.publish(salesOrder("ev-slow-one"))
	testenv.Eventually(t, "the nine others Delivered while hook-00 holds its request", func() bool {
		return h.statuses(id)[models.StatusDelivered] == 9
	})
	testenv.Eventually(t, "hook-00's request, held", func() bool { return rs[0].Count() == 1 })
	if d := h.deliveries(id)[0]; d.WebhookName != "hook-00" || d.Status != models.StatusFailed || d.Attempts != 1 ||
		d.LastError != "" || d.LastStatusCode != nil {
		t.Fatalf("hook-00's delivery when the nine were Delivered: %s, %d attempts, last error %q, status code %v; want claimed for its one attempt, no outcome yet",
			d.Status, d.Attempts, d.LastError, d.LastStatusCode)
	}
	release()
	testenv.Eventually(t, "all ten Delivered", func() bool { return h.statuses(id)[models.StatusDelivered] == 10 })
	if got := counts(rs); !slices.Equal(got, each(10, 1)) {
		t.Fatalf("receivers got %v requests, want one each", got)
	}
}

// A worker that dies (here: stalls for good) after its fan-out committed
// and before its requests leaves every inline row claimed under its lease:
// asynq's re-runs of the event send and queue nothing, no sweep takes the
// rows before the lease ends, and after it the sweeper's retries send each
// once. When the stalled task wakes, its claims are past their lease: it
// sends nothing.
func TestStalledEventTaskLeavesItsRowsToTheSweeper(t *testing.T) {
	t.Parallel()
	h := newHarness(t, pg)
	rs := h.receivers(10)
	ctx := context.Background()
	ev := dispatchEvent("ev-stalled")
	var queued pendingLog
	committed, wake := make(chan struct{}), make(chan struct{})
	stalled := make(chan error, 1)
	go func() {
		stalled <- h.app.Dispatcher.HandleEvent(ctx, ev, dispatch.Inline{Queue: tasks.DefaultQueue, Enqueue: queued.enqueue,
			Committed: func(context.Context) { close(committed); <-wake }})
	}()
	<-committed
	var lease time.Time
	for _, d := range h.deliveries(ev.ID) {
		if d.Status != models.StatusFailed || d.Attempts != 1 || d.NextRetry == nil || !d.NextRetry.After(h.clock.Now()) {
			t.Fatalf("delivery to %s is %s, %d attempts, next_retry %v; want claimed at insert", d.WebhookName, d.Status, d.Attempts, d.NextRetry)
		}
		lease = *d.NextRetry
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
	if got := queued.got(); len(got) != 0 {
		t.Fatalf("re-runs queued %v; the rows are claimed by the first run", got)
	}
	if n := h.sweep(0); n != 0 {
		t.Fatalf("a sweep took %d claimed rows before their lease ended", n)
	}
	if got := counts(rs); !slices.Equal(got, each(10, 0)) {
		t.Fatalf("receivers got %v before the lease ended, want none", got)
	}
	if n := h.sweep(lease.Sub(h.clock.Now()) + time.Second); n != 10 {
		t.Fatalf("the sweep after the lease queued %d retries, want 10", n)
	}
	testenv.Eventually(t, "the retries Delivered", func() bool { return h.statuses(ev.ID)[models.StatusDelivered] == 10 })
	close(wake)
	if err := <-stalled; err != nil {
		t.Fatalf("the stalled run: %v", err)
	}
	if got := counts(rs); !slices.Equal(got, each(10, 1)) {
		t.Fatalf("receivers got %v, want one request each (the retry's)", got)
	}
	for _, d := range h.deliveries(ev.ID) {
		if d.Status != models.StatusDelivered || d.Attempts != 2 {
			t.Errorf("delivery to %s is %s after %d attempts, want Delivered by the retry (2)", d.WebhookName, d.Status, d.Attempts)
		}
	}
}

// A shutdown (the task's context cancelled) gives every inline claim back,
// whether it comes before the requests or during them: the rows are due
// and unattempted, nothing is recorded, and the task's re-run queues each
// row as a task of its own and sends nothing itself.
func TestCancelledEventTaskGivesEveryClaimBack(t *testing.T) {
	t.Parallel()
	for _, when := range []string{"before the requests", "during the requests"} {
		t.Run(when, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, pg)
			rs := h.receivers(10)
			ev := dispatchEvent("ev-cancel")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			in := dispatch.Inline{Queue: tasks.DefaultQueue, Enqueue: (&pendingLog{}).enqueue}
			want := each(10, 0)
			if when == "before the requests" {
				in.Committed = func(context.Context) { cancel() }
			} else {
				for _, r := range rs {
					defer r.Hold()()
				}
				go func() {
					testenv.Eventually(t, "ten requests in flight", func() bool { return slices.Equal(counts(rs), each(10, 1)) })
					cancel()
				}()
				want = each(10, 1)
			}
			err := h.app.Dispatcher.HandleEvent(ctx, ev, in)
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("HandleEvent returned %v, want the cancellation", err)
			}
			if got := counts(rs); !slices.Equal(got, want) {
				t.Fatalf("receivers got %v, want %v", got, want)
			}
			for _, d := range h.deliveries(ev.ID) {
				if d.Status != models.StatusFailed || d.Attempts != 0 || d.NextRetry == nil || d.NextRetry.After(h.clock.Now()) {
					t.Errorf("delivery to %s is %s, %d attempts, next_retry %v; want given back: Failed, unattempted, due", d.WebhookName, d.Status, d.Attempts, d.NextRetry)
				}
			}
			var requeued pendingLog
			if err := h.app.Dispatcher.HandleEvent(context.Background(), ev, dispatch.Inline{Queue: tasks.DefaultQueue, Enqueue: requeued.enqueue}); err != nil {
				t.Fatalf("re-run: %v", err)
			}
			if got := requeued.got(); len(got) != 10 {
				t.Fatalf("the re-run queued %v, want all ten", got)
			}
			if got := counts(rs); !slices.Equal(got, want) {
				t.Fatalf("the re-run sent requests itself: receivers got %v, want %v", got, want)
			}
		})
	}
}

// Each inline row checks its own lease before its request: when the
// event task was held up past the leases (here in Committed, while the
// sweeper's retries sent every row), none of its ten claims sends, each is
// given back fenced (the retries' outcomes stand) and queued, and every
// receiver gets the delivery once.
func TestInlineAttemptsDoNotSendOnExpiredLeases(t *testing.T) {
	t.Parallel()
	h := newHarness(t, pg)
	rs := h.receivers(10)
	ev := dispatchEvent("ev-late-ten")
	var queued pendingLog
	err := h.app.Dispatcher.HandleEvent(context.Background(), ev, dispatch.Inline{Queue: tasks.DefaultQueue, Enqueue: queued.enqueue,
		Committed: func(context.Context) {
			lease := *h.deliveries(ev.ID)[0].NextRetry
			if n := h.sweep(lease.Sub(h.clock.Now()) + time.Second); n != 10 {
				t.Fatalf("the sweep queued %d retries once the leases ended, want 10", n)
			}
			testenv.Eventually(t, "the retries recorded", func() bool { return h.statuses(ev.ID)[models.StatusDelivered] == 10 })
		}})
	if err != nil {
		t.Fatalf("HandleEvent: %v", err)
	}
	if got := counts(rs); !slices.Equal(got, each(10, 1)) {
		t.Fatalf("receivers got %v, want one request each: an inline attempt sent on a lease that had ended", got)
	}
	if got := queued.got(); len(got) != 10 {
		t.Fatalf("queued %v, want the ten claims given back", got)
	}
	for _, d := range h.deliveries(ev.ID) {
		if d.Status != models.StatusDelivered || d.Attempts != 2 {
			t.Errorf("delivery to %s is %s after %d attempts, want Delivered by the retry (2)", d.WebhookName, d.Status, d.Attempts)
		}
	}
}

// When queueing the event's other deliveries fails, every inline claim is
// given back unsent, and the re-run queues them all.
func TestEveryInlineClaimIsReleasedWhenQueueingFails(t *testing.T) {
	t.Parallel()
	h := newHarness(t, pg)
	rs := h.receivers(5)
	other := testreceiver.New(t)
	h.createWebhook("other", other.URL, func(in *webhook.Input) { in.Queue = ptr("slow") })
	ev := dispatchEvent("ev-release-five")
	redisDown := errors.New("redis is down")
	err := h.app.Dispatcher.HandleEvent(context.Background(), ev, dispatch.Inline{Queue: tasks.DefaultQueue,
		Enqueue: func(context.Context, dispatch.Pending) error { return redisDown }})
	if !errors.Is(err, redisDown) {
		t.Fatalf("HandleEvent returned %v, want the enqueue error", err)
	}
	if got := append(counts(rs), other.Count()); !slices.Equal(got, each(6, 0)) {
		t.Fatalf("receivers got %v; nothing may be sent before the others are queued", got)
	}
	for _, d := range h.deliveries(ev.ID) {
		if d.Status != models.StatusFailed || d.Attempts != 0 {
			t.Errorf("delivery to %s is %s after %d attempts; want Failed, unattempted", d.WebhookName, d.Status, d.Attempts)
		}
	}
	var queued pendingLog
	if err := h.app.Dispatcher.HandleEvent(context.Background(), ev, dispatch.Inline{Queue: tasks.DefaultQueue, Enqueue: queued.enqueue}); err != nil {
		t.Fatalf("re-run: %v", err)
	}
	if got := queued.got(); len(got) != 6 {
		t.Fatalf("the re-run queued %v, want all six", got)
	}
}

// An event claims at most dispatch.MaxInlinePerEvent rows at insert; the
// rest are queued as before.
func TestInlineAttemptsPerEventAreBounded(t *testing.T) {
	t.Parallel()
	h := newHarness(t, pg)
	recv := testreceiver.New(t)
	n := dispatch.MaxInlinePerEvent + 3
	for i := range n {
		h.createWebhook(fmt.Sprintf("hook-%02d", i), recv.URL, nil)
	}
	ev := dispatchEvent("ev-many")
	var queued pendingLog
	if err := h.app.Dispatcher.HandleEvent(context.Background(), ev, dispatch.Inline{Queue: tasks.DefaultQueue, Enqueue: queued.enqueue}); err != nil {
		t.Fatalf("HandleEvent: %v", err)
	}
	if got := queued.got(); len(got) != 3 {
		t.Fatalf("queued %d deliveries, want the 3 past the bound", len(got))
	}
	if got := recv.Count(); got != dispatch.MaxInlinePerEvent {
		t.Fatalf("the event task sent %d requests, want %d", got, dispatch.MaxInlinePerEvent)
	}
	if got := h.statuses(ev.ID); got[models.StatusDelivered] != dispatch.MaxInlinePerEvent || got[models.StatusFailed] != 3 {
		t.Fatalf("statuses %v, want %d Delivered and 3 Failed, queued", got, dispatch.MaxInlinePerEvent)
	}
}

// The process's inline slots (dispatch.Config.InlineRequests,
// worker.concurrency in the worker) bound the inline requests in flight,
// across events: two events of ten webhooks with two slots never have more
// than two requests at the receiver at once, and every delivery is made.
func TestInlineRequestsInFlightAreBounded(t *testing.T) {
	t.Parallel()
	h := newHarness(t, pg)
	var (
		mu               sync.Mutex
		inFlight, most   int
		arrived          int
		proceed          = make(chan struct{})
		received         = make(chan struct{}, 100)
		answered, wanted = 0, 20
	)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		inFlight++
		arrived++
		most = max(most, inFlight)
		mu.Unlock()
		received <- struct{}{}
		<-proceed
		mu.Lock()
		inFlight--
		mu.Unlock()
	}))
	t.Cleanup(recv.Close)
	for i := range 10 {
		h.createWebhook(fmt.Sprintf("hook-%02d", i), recv.URL, nil)
	}
	d := dispatch.New(h.db, h.app.Sender, h.app.Box, dispatch.Config{Clock: h.clock, InlineRequests: 2})
	errs := make(chan error, 2)
	for _, id := range []string{"ev-slots-a", "ev-slots-b"} {
		go func() {
			errs <- d.HandleEvent(context.Background(), dispatchEvent(id), dispatch.Inline{Queue: tasks.DefaultQueue, Enqueue: (&pendingLog{}).enqueue})
		}()
	}
	// Let one request through at a time, once two are waiting at the
	// receiver: a third in flight would be counted before it is let go.
	for answered < wanted {
		<-received
		if answered < wanted-1 {
			testenv.Eventually(t, "two requests in flight", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return inFlight == 2 || arrived == wanted
			})
		}
		proceed <- struct{}{}
		answered++
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatalf("HandleEvent: %v", err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if most != 2 || arrived != wanted {
		t.Fatalf("at most %d requests were in flight at once, of %d; want 2 with two slots, and all %d", most, arrived, wanted)
	}
}
