package tasks_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/homingdev/homing/client"
	"github.com/homingdev/homing/internal/engine/webhook"
	"github.com/homingdev/homing/internal/intake/event"
	"github.com/homingdev/homing/internal/testing/testenv"
	"github.com/homingdev/homing/internal/testing/testreceiver"
	"github.com/homingdev/homing/models"
	"github.com/homingdev/homing/tasks"
)

var backends = []backend{pg, sqlite}

func TestHappyPath(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(string(b), func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, b)
			recv := testreceiver.New(t)
			h.createWebhook("orders", recv.URL+"/hook", func(in *webhook.Input) {
				in.Template = ptr(`{"name": "{{ doc.name }}", "total": {{ doc.grand_total }}}`)
				in.Headers = ptr([]string{"X-Tenant: acme"})
			})
			id := h.publish(salesOrder("ev-happy"))
			d := h.waitAttempts(id, 1)
			if d.Status != models.StatusDelivered || d.NextRetry != nil {
				t.Fatalf("status %s next_retry %v, want Delivered and none", d.Status, d.NextRetry)
			}
			reqs := recv.Requests()
			if len(reqs) != 1 {
				t.Fatalf("receiver got %d requests, want 1", len(reqs))
			}
			r := reqs[0]
			if want := `{"name": "SO-1", "total": 1500}`; string(r.Body) != want {
				t.Errorf("body %q, want %q", r.Body, want)
			}
			if !bytes.Equal(r.Body, d.Payload) {
				t.Errorf("stored payload %q differs from what was sent %q", d.Payload, r.Body)
			}
			if r.Method != http.MethodPost || r.Path != "/hook" {
				t.Errorf("request %s %s", r.Method, r.Path)
			}
			for k, want := range map[string]string{
				"Content-Type": "application/json", "X-Tenant": "acme", "Webhook-Id": d.ID,
			} {
				if got := r.Header.Get(k); got != want {
					t.Errorf("header %s = %q, want %q", k, got, want)
				}
			}
			if ua := r.Header.Get("User-Agent"); !strings.HasPrefix(ua, "Homing/") {
				t.Errorf("User-Agent %q", ua)
			}
			if d.LastStatusCode == nil || *d.LastStatusCode != 200 {
				t.Errorf("last_status_code %v", d.LastStatusCode)
			}
		})
	}
}

func TestOutageThenRecoveryReplaysFrozenPayloadAndSignsEveryAttempt(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(string(b), func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, b)
			recv := testreceiver.New(t)
			recv.SetStatus(http.StatusServiceUnavailable)
			const secret = "frappe-style-secret"
			h.createWebhook("orders", recv.URL, func(in *webhook.Input) {
				in.Template = ptr(`{"name": "{{ doc.name }}"}`)
				in.Secret = ptr(secret)
			})
			id := h.publish(salesOrder("ev-outage"))
			d := h.waitAttempts(id, 1)
			if d.Status != models.StatusFailed {
				t.Fatalf("after a 503: %s, want Failed", d.Status)
			}
			if got := d.NextRetry.Sub(h.clock.Now()); got != 5*time.Minute {
				t.Fatalf("next retry in %s, want 5m", got)
			}
			// An operator edits the template and the document changes during
			// the outage: the receiver must still get the event as it was.
			if _, err := h.hooks.Update(context.Background(), "", "orders", webhook.Input{Template: ptr(`{"edited": true}`)}); err != nil {
				t.Fatal(err)
			}
			if n := h.sweep(4 * time.Minute); n != 0 {
				t.Fatalf("sweep before due enqueued %d", n)
			}
			if n := h.sweep(time.Minute); n != 1 {
				t.Fatalf("sweep when due enqueued %d, want 1", n)
			}
			d = h.waitAttempts(id, 2)
			if d.Status != models.StatusFailed {
				t.Fatalf("after second 503: %s", d.Status)
			}
			recv.SetStatus(http.StatusOK)
			if n := h.sweep(30 * time.Minute); n != 1 {
				t.Fatalf("second retry enqueued %d, want 1", n)
			}
			d = h.waitAttempts(id, 3)
			if d.Status != models.StatusDelivered || d.NextRetry != nil {
				t.Fatalf("after recovery: %s, next %v", d.Status, d.NextRetry)
			}
			reqs := recv.Requests()
			if len(reqs) != 3 {
				t.Fatalf("receiver got %d requests, want 3", len(reqs))
			}
			for i, r := range reqs {
				if string(r.Body) != `{"name": "SO-1"}` {
					t.Errorf("attempt %d body %q: the retry did not replay the stored payload", i+1, r.Body)
				}
				if got, want := r.Header.Get("X-Frappe-Webhook-Signature"), frappeSignature(secret, r.Body); got != want {
					t.Errorf("attempt %d signature %q does not verify (want %q)", i+1, got, want)
				}
				if r.Header.Get("Webhook-Id") != d.ID {
					t.Errorf("attempt %d webhook-id %q, want %q", i+1, r.Header.Get("Webhook-Id"), d.ID)
				}
			}
			// The signature stored in the history is text that verifies.
			var hist []models.Attempt
			h.db.Where("delivery_id = ?", d.ID).Order("attempt").Find(&hist)
			for _, a := range hist {
				if got := a.RequestHeaders["X-Frappe-Webhook-Signature"]; got != frappeSignature(secret, d.Payload) {
					t.Errorf("stored signature of attempt %d = %q", a.Attempt, got)
				}
			}
		})
	}
}

func TestExhaustAfterMaxRetriesFollowsTheSchedule(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(string(b), func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, b)
			recv := testreceiver.New(t)
			recv.SetStatus(http.StatusInternalServerError)
			h.createWebhook("orders", recv.URL, nil)
			start := h.clock.Now()
			id := h.publish(salesOrder("ev-exhaust"))
			d := h.waitAttempts(id, 1)
			wantAt := []time.Duration{5 * time.Minute, 35 * time.Minute, 2*time.Hour + 35*time.Minute}
			for i, at := range wantAt {
				if d.Status != models.StatusFailed || d.NextRetry == nil {
					t.Fatalf("after attempt %d: %s", i+1, d.Status)
				}
				if got := d.NextRetry.Sub(start); got != at {
					t.Fatalf("attempt %d due at +%s, want +%s", i+2, got, at)
				}
				if n := h.sweep(d.NextRetry.Sub(h.clock.Now()) - time.Second); n != 0 {
					t.Fatalf("a sweep a second early enqueued %d", n)
				}
				if n := h.sweep(time.Second); n != 1 {
					t.Fatalf("due sweep enqueued %d", n)
				}
				d = h.waitAttempts(id, i+2)
			}
			if d.Status != models.StatusExhausted || d.NextRetry != nil {
				t.Fatalf("after 4 attempts: %s next %v, want Exhausted", d.Status, d.NextRetry)
			}
			if !strings.Contains(d.LastError, "500") {
				t.Errorf("last_error %q does not name the status", d.LastError)
			}
			if n := h.sweep(24 * time.Hour); n != 0 {
				t.Fatalf("exhausted delivery swept again (%d)", n)
			}
			if recv.Count() != 4 {
				t.Fatalf("receiver got %d requests, want 4", recv.Count())
			}
		})
	}
}

func TestMaxRetriesZeroIsOneFinalAttempt(t *testing.T) {
	t.Parallel()
	h := newHarness(t, pg)
	recv := testreceiver.New(t)
	recv.SetStatus(http.StatusBadGateway)
	h.createWebhook("orders", recv.URL, func(in *webhook.Input) { in.MaxRetries = ptr(0) })
	id := h.publish(salesOrder("ev-zero"))
	d := h.waitAttempts(id, 1)
	if d.Status != models.StatusExhausted || d.NextRetry != nil || d.MaxRetries != 0 {
		t.Fatalf("got %s next %v max %d, want Exhausted", d.Status, d.NextRetry, d.MaxRetries)
	}
	if n := h.sweep(time.Hour); n != 0 {
		t.Fatalf("swept %d", n)
	}
}

func TestDisabledDuringRetriesIsExhaustedWithoutARequest(t *testing.T) {
	t.Parallel()
	h := newHarness(t, pg)
	recv := testreceiver.New(t)
	recv.SetStatus(http.StatusServiceUnavailable)
	h.createWebhook("orders", recv.URL, nil)
	id := h.publish(salesOrder("ev-disabled"))
	h.waitAttempts(id, 1)
	if _, err := h.hooks.SetEnabled(context.Background(), "", "orders", false, ""); err != nil {
		t.Fatal(err)
	}
	// Exhausted by the disable itself, not when the retry next comes due.
	d := h.delivery(id)
	if d.Status != models.StatusExhausted {
		t.Fatalf("status %s right after disable, want Exhausted", d.Status)
	}
	recv.SetStatus(http.StatusOK)
	if n := h.sweep(5 * time.Minute); n != 0 {
		t.Fatalf("swept %d, want nothing due", n)
	}
	if d.LastError != "webhook disabled" || d.Attempts != 1 || d.NextRetry != nil {
		t.Fatalf("got error %q attempts %d next %v", d.LastError, d.Attempts, d.NextRetry)
	}
	if recv.Count() != 1 {
		t.Fatalf("receiver got %d requests after disable, want only the first", recv.Count())
	}
}

func TestDeletedWebhookExhaustsItsRetries(t *testing.T) {
	t.Parallel()
	h := newHarness(t, sqlite)
	recv := testreceiver.New(t)
	recv.SetStatus(http.StatusServiceUnavailable)
	h.createWebhook("orders", recv.URL, nil)
	id := h.publish(salesOrder("ev-deleted"))
	h.waitAttempts(id, 1)
	if err := h.hooks.Delete(context.Background(), "", "orders"); err != nil {
		t.Fatal(err)
	}
	h.sweep(5 * time.Minute)
	testenv.Eventually(t, "exhausted", func() bool { return h.delivery(id).Status == models.StatusExhausted })
	if d := h.delivery(id); d.LastError != "webhook deleted" {
		t.Fatalf("last_error %q", d.LastError)
	}
}

func TestHangingReceiverTimesOutThenBacksOff(t *testing.T) {
	t.Parallel()
	h := newHarness(t, pg)
	recv := testreceiver.New(t)
	release := recv.Hold()
	defer release()
	h.createWebhook("orders", recv.URL, func(in *webhook.Input) { in.Timeout = ptr(200 * time.Millisecond) })
	id := h.publish(salesOrder("ev-hang"))
	d := h.waitAttempts(id, 1)
	if d.Status != models.StatusFailed || !strings.Contains(d.LastError, "timed out") {
		t.Fatalf("got %s %q, want Failed with a timeout", d.Status, d.LastError)
	}
	if got := d.NextRetry.Sub(h.clock.Now()); got != 5*time.Minute {
		t.Fatalf("a timeout was rescheduled in %s, want the schedule's 5m", got)
	}
	// Nothing tries again before the gap: no back-to-back attempts.
	if n := h.sweep(4 * time.Minute); n != 0 {
		t.Fatalf("swept %d before due", n)
	}
	if recv.Count() != 1 {
		t.Fatalf("receiver got %d requests, want 1", recv.Count())
	}
	var hist []models.Attempt
	h.db.Where("delivery_id = ?", d.ID).Find(&hist)
	if len(hist) != 1 || hist[0].Class != "timeout" {
		t.Fatalf("history %+v", hist)
	}
}

func TestUnbuildableRequestIsExhaustedWithoutARequest(t *testing.T) {
	t.Parallel()
	h := newHarness(t, pg)
	recv := testreceiver.New(t)
	h.createWebhook("missing-field", recv.URL, func(in *webhook.Input) {
		in.Template = ptr(`{"x": "{{ doc.no_such_field }}"}`)
	})
	h.createWebhook("not-json", recv.URL, nil)
	// A trailing comma: not JSON for any document. Creation refuses it
	// now; a webhook stored by an older Homing can still have it.
	if err := h.db.Model(&models.Webhook{}).Where("name = ?", "not-json").Update("body_template", `{"name": "{{ doc.name }}",}`).Error; err != nil {
		t.Fatal(err)
	}
	id := h.publish(salesOrder("ev-unbuildable"))
	testenv.Eventually(t, "two deliveries", func() bool { return len(h.deliveries(id)) == 2 })
	for _, d := range h.deliveries(id) {
		if d.Status != models.StatusExhausted || d.Attempts != 0 || !strings.Contains(d.LastError, "cannot build request") {
			t.Errorf("%s: %s attempts %d error %q", d.WebhookName, d.Status, d.Attempts, d.LastError)
		}
	}
	if recv.Count() != 0 {
		t.Fatalf("receiver got %d requests for unbuildable deliveries", recv.Count())
	}
}

func TestConditionFalseCreatesNoDelivery(t *testing.T) {
	t.Parallel()
	h := newHarness(t, sqlite)
	recv := testreceiver.New(t)
	h.createWebhook("big", recv.URL, func(in *webhook.Input) { in.Condition = ptr(`doc.grand_total > 10000`) })
	h.createWebhook("paid", recv.URL, func(in *webhook.Input) {
		in.Condition = ptr(`doc.status == "Paid" && doc.grand_total > 100`)
	})
	id := h.publish(salesOrder("ev-cond"))
	testenv.Eventually(t, "delivered", func() bool {
		rows := h.deliveries(id)
		return len(rows) == 1 && rows[0].Status == models.StatusDelivered
	})
	if rows := h.deliveries(id); rows[0].WebhookName != "paid" {
		t.Fatalf("delivered to %s", rows[0].WebhookName)
	}
	if recv.Count() != 1 {
		t.Fatalf("receiver got %d", recv.Count())
	}
}

func TestDuplicateEventIDDeliversOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t, pg)
	recv := testreceiver.New(t)
	h.createWebhook("orders", recv.URL, nil)
	h.publish(salesOrder("ev-dup"))
	h.waitAttempts("ev-dup", 1)
	// Again after the first fan-out completed, and twice at once.
	var wg sync.WaitGroup
	for i := 0; i < 3; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := h.pub.Publish(context.Background(), salesOrder("ev-dup")); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	testenv.Eventually(t, "queues drained", func() bool { return queueEmpty(t, h) })
	if recv.Count() != 1 || len(h.deliveries("ev-dup")) != 1 {
		t.Fatalf("receiver got %d requests, %d rows; want 1 and 1", recv.Count(), len(h.deliveries("ev-dup")))
	}
}

func queueEmpty(t *testing.T, h *harness) bool {
	t.Helper()
	info, err := h.insp.GetQueueInfo(tasks.DefaultQueue)
	if err != nil {
		return false
	}
	return info.Pending == 0 && info.Active == 0 && info.Scheduled == 0 && info.Retry == 0
}

func TestSweepReturnsBeforeAnyRetryIsSent(t *testing.T) {
	t.Parallel()
	h := newHarness(t, pg)
	recv := testreceiver.New(t)
	recv.SetStatus(http.StatusServiceUnavailable)
	h.createWebhook("orders", recv.URL, nil)
	// Fewer failures than make the webhook failing, whose retries would go
	// out one probe at a time.
	const n = models.FailingAfter - 1
	for i := 0; i < n; i++ {
		id := h.publish(salesOrder(fmt.Sprintf("ev-block-%d", i)))
		h.waitAttempts(id, 1)
	}
	release := recv.Hold()
	defer release()
	before := recv.Count()
	if got := h.sweep(5 * time.Minute); got != n {
		t.Fatalf("sweep enqueued %d, want %d", got, n)
	}
	// The sweep has returned; the receiver is blocking every request, so
	// any retry that started is still in flight and none has completed.
	var hist int64
	h.db.Model(&models.Attempt{}).Count(&hist)
	if hist != n {
		t.Fatalf("%d attempts recorded while the receiver blocks; the sweep must not deliver", hist)
	}
	// Every retry reaches the receiver before any answer: the first 503
	// would make the webhook failing and hold back the retries not yet
	// claimed.
	testenv.Eventually(t, "retries in flight", func() bool { return recv.Count() == before+n })
	release()
	testenv.Eventually(t, "retries recorded", func() bool {
		var c int64
		h.db.Model(&models.Attempt{}).Count(&c)
		return c == 2*n
	})
	if recv.Count() != before+n {
		t.Fatalf("receiver got %d retries, want %d", recv.Count()-before, n)
	}
}

func TestTwoConcurrentSweepsWithSlowReceiverDeliverEachOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t, pg)
	recv := testreceiver.New(t)
	recv.SetStatus(http.StatusServiceUnavailable)
	// A timeout longer than the sweeps below take on a loaded machine: a held
	// retry that timed out would be rescheduled, not delivered.
	h.createWebhook("orders", recv.URL, func(in *webhook.Input) { in.Timeout = ptr(time.Minute) })
	const n = 100
	// Seed 100 due Failed rows through the real fan-out and first attempt.
	for i := 0; i < n; i++ {
		h.publish(salesOrder(fmt.Sprintf("ev-two-%03d", i)))
	}
	testenv.Eventually(t, "first attempts recorded", func() bool {
		var c int64
		h.db.Model(&models.Attempt{}).Count(&c)
		return c == n
	})
	// As if a success had come in since: a healthy webhook, whose due rows
	// all go out at once (a failing one's would go one probe at a time).
	if err := h.db.Exec("UPDATE webhook_health SET failures = 0, failing_since = NULL").Error; err != nil {
		t.Fatal(err)
	}
	recv.SetStatus(http.StatusOK)
	release := recv.Hold() // slow receiver: retries hang while we sweep again
	h.clock.Advance(5 * time.Minute)
	var wg sync.WaitGroup
	for s := 0; s < 2; s++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for tick := 0; tick < 3; tick++ {
				if _, err := h.worker.Sweeper.RunOnce(context.Background()); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	release()
	testenv.Eventually(t, "all delivered", func() bool {
		var c int64
		h.db.Model(&models.Delivery{}).Where("status = ?", models.StatusDelivered).Count(&c)
		return c == n
	})
	testenv.Eventually(t, "queues drained", func() bool { return queueEmpty(t, h) })
	counts := map[string]int{}
	for _, r := range recv.Requests() {
		counts[r.Header.Get("Webhook-Id")]++
	}
	if len(counts) != n {
		t.Fatalf("receiver saw %d deliveries, want %d", len(counts), n)
	}
	for id, c := range counts {
		if c != 2 { // the failed first attempt and one retry
			t.Errorf("delivery %s received %d times, want 2", id, c)
		}
	}
}

func TestArchivedRetryTaskDoesNotBlockItsDelivery(t *testing.T) {
	t.Parallel()
	h := newHarness(t, pg)
	recv := testreceiver.New(t)
	recv.SetStatus(http.StatusServiceUnavailable)
	hook := h.createWebhook("orders", recv.URL, nil)
	id := h.publish(salesOrder("ev-archived"))
	d := h.waitAttempts(id, 1)
	// A dead retry task holding the TaskID: plant one scheduled far ahead (so
	// no worker runs it) and archive it, as asynq does with a task that ran
	// out of retries.
	ac := asynq.NewClient(h.redis)
	defer ac.Close()
	if _, err := ac.Enqueue(tasks.NewRetryTask(d.ID, "orders", hook.Queue), asynq.ProcessIn(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := h.insp.ArchiveTask(hook.Queue, tasks.RetryTaskID(d.ID)); err != nil {
		t.Fatalf("archive: %v", err)
	}
	if _, err := ac.Enqueue(tasks.NewRetryTask(d.ID, "orders", hook.Queue)); !errors.Is(err, asynq.ErrTaskIDConflict) {
		t.Fatalf("an archived task should hold its TaskID, got %v", err)
	}
	recv.SetStatus(http.StatusOK)
	h.clock.Advance(5 * time.Minute)
	res, err := h.worker.Sweeper.RunOnce(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Revived != 1 || res.Enqueued != 1 {
		t.Fatalf("sweep result %+v, want the dead task replaced", res)
	}
	d = h.waitAttempts(id, 2)
	if d.Status != models.StatusDelivered || recv.Count() != 2 {
		t.Fatalf("after the revived retry: %s, receiver got %d", d.Status, recv.Count())
	}
}

func TestWorkflowTransitionIsSynchronous(t *testing.T) {
	t.Parallel()
	h := newHarness(t, pg)
	ok := testreceiver.New(t)
	bad := testreceiver.New(t)
	bad.SetStatus(http.StatusInternalServerError)
	for name, url := range map[string]string{"approvals-ok": ok.URL, "approvals-bad": bad.URL} {
		h.createWebhook(name, url, func(in *webhook.Input) { in.Event = ptr("workflow_transition") })
	}
	ev := client.Event{ID: "ev-wf", DocType: "Sales Order", DocName: "SO-1", Event: "workflow_transition", Doc: map[string]any{"name": "SO-1"}}
	_, err := h.pub.Publish(context.Background(), ev)
	var serr *client.SyncError
	if !errors.As(err, &serr) {
		t.Fatalf("publish returned %v, want a SyncError", err)
	}
	if len(serr.Failures) != 1 || serr.Failures[0].Webhook != "approvals-bad" || !strings.Contains(err.Error(), "approvals-bad") {
		t.Fatalf("failures %+v", serr.Failures)
	}
	// Delivered when Publish returned: no worker involved.
	if ok.Count() != 1 || bad.Count() != 1 {
		t.Fatalf("receivers got %d and %d, want 1 each", ok.Count(), bad.Count())
	}
	for _, d := range h.deliveries("ev-wf") {
		want := models.StatusDelivered
		if d.WebhookName == "approvals-bad" {
			want = models.StatusExhausted
		}
		if d.Status != want || d.NextRetry != nil || d.Attempts != 1 {
			t.Errorf("%s: %s next %v attempts %d, want %s", d.WebhookName, d.Status, d.NextRetry, d.Attempts, want)
		}
	}
	if n := h.sweep(24 * time.Hour); n != 0 {
		t.Fatalf("a workflow_transition delivery was swept for retry")
	}
	// Publishing the same event again sends nothing and reports the failure.
	_, err = h.pub.Publish(context.Background(), ev)
	if !errors.As(err, &serr) || ok.Count() != 1 || bad.Count() != 1 {
		t.Fatalf("republish: %v, receivers %d %d", err, ok.Count(), bad.Count())
	}
	// A webhook added since gets the republished transition, once; the
	// webhooks that had it get nothing more.
	late := testreceiver.New(t)
	h.createWebhook("approvals-late", late.URL, func(in *webhook.Input) { in.Event = ptr("workflow_transition") })
	for range 2 {
		_, err = h.pub.Publish(context.Background(), ev)
		if !errors.As(err, &serr) || len(serr.Failures) != 1 {
			t.Fatalf("republish after a new webhook: %v", err)
		}
	}
	if late.Count() != 1 || ok.Count() != 1 || bad.Count() != 1 {
		t.Fatalf("receivers got late=%d ok=%d bad=%d, want 1 each", late.Count(), ok.Count(), bad.Count())
	}
}

func TestLostFirstAttemptTaskIsPickedUpBySweeper(t *testing.T) {
	t.Parallel()
	h := newHarness(t, pg)
	recv := testreceiver.New(t)
	h.createWebhook("orders", recv.URL, nil)
	// Fan out directly, as a worker that crashed before enqueuing would.
	ev := salesOrder("ev-lost")
	doc, _ := json.Marshal(ev.Doc)
	task, err := event.Decode(mustJSON(t, event.Payload{ID: ev.ID, DocType: ev.DocType, Event: ev.Event, Doc: doc}))
	if err != nil {
		t.Fatal(err)
	}
	pending, err := h.app.Dispatcher.FanOut(context.Background(), task)
	if err != nil || len(pending) != 1 {
		t.Fatalf("fan-out %v %v", pending, err)
	}
	// A second fan-out (asynq re-running the crashed task) creates nothing new
	// and hands back the unattempted row.
	again, err := h.app.Dispatcher.FanOut(context.Background(), task)
	if err != nil || len(again) != 1 || again[0].ID != pending[0].ID {
		t.Fatalf("re-run fan-out %v %v", again, err)
	}
	if n := h.sweep(4 * time.Minute); n != 0 {
		t.Fatalf("swept a fresh row early")
	}
	if n := h.sweep(time.Minute); n != 1 {
		t.Fatalf("lost first attempt not swept")
	}
	d := h.waitAttempts(ev.ID, 1)
	if d.Status != models.StatusDelivered || recv.Count() != 1 {
		t.Fatalf("got %s, receiver %d", d.Status, recv.Count())
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestPendingRetryTaskIsInHand(t *testing.T) {
	t.Parallel()
	h := newHarness(t, pg)
	recv := testreceiver.New(t)
	recv.SetStatus(http.StatusServiceUnavailable)
	hook := h.createWebhook("orders", recv.URL, nil)
	id := h.publish(salesOrder("ev-inhand"))
	d := h.waitAttempts(id, 1)
	ac := asynq.NewClient(h.redis)
	defer ac.Close()
	// A retry already queued (scheduled, so it stays put) is in hand.
	if _, err := ac.Enqueue(tasks.NewRetryTask(d.ID, "orders", hook.Queue), asynq.ProcessIn(time.Hour)); err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(5 * time.Minute)
	res, err := h.worker.Sweeper.RunOnce(context.Background())
	if err != nil || res.InHand != 1 || res.Enqueued != 0 {
		t.Fatalf("sweep %+v %v, want the queued retry left alone", res, err)
	}
}
