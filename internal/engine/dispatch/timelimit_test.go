package dispatch

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/homingdev/homing/internal/engine/delivery/budget"
	"github.com/homingdev/homing/internal/engine/delivery/send"
	"github.com/homingdev/homing/internal/engine/webhook"
	"github.com/homingdev/homing/internal/intake/event"
	"github.com/homingdev/homing/internal/lib/clock"
	"github.com/homingdev/homing/internal/testing/testenv"
	"github.com/homingdev/homing/models"
)

func TestOnStop(t *testing.T) {
	t.Parallel()
	timeLimit := fmt.Errorf("template: line 1: rendering took longer than the time limit of 1s: %w", budget.ErrTimeLimit)
	overloaded := fmt.Errorf("template: %w", budget.ErrOverloaded)
	steps := fmt.Errorf("template: %w: %w", send.ErrUnbuildable, budget.ErrLimit)
	tests := []struct {
		name    string
		err     error
		retries int
		want    stopAction
	}{
		{"time limit on the first run", timeLimit, 0, stopRetryEvent},
		{"time limit on the last run taken for load", timeLimit, SlowFinalRetries - 1, stopRetryEvent},
		{"time limit from SlowFinalRetries is final", timeLimit, SlowFinalRetries, stopExhaust},
		{"time limit later still final", timeLimit, SlowFinalRetries + 10, stopExhaust},
		{"heap ceiling on the first run", overloaded, 0, stopRetryEvent},
		{"heap ceiling is never final", overloaded, SlowFinalRetries + 10, stopRetryEvent},
		{"steps limit is final at once", steps, 0, stopExhaust},
		{"a bad template is final at once", send.ErrUnbuildable, 0, stopExhaust},
		{"ErrLimit alone is final (never the time limit)", budget.ErrLimit, 0, stopExhaust},
	}
	for _, tt := range tests {
		if got := onStop(tt.err, tt.retries); got != tt.want {
			t.Errorf("%s: onStop = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// A webhook whose body template reaches its time limit at fan-out is no
// verdict on the definition on the event task's early runs (load on the
// worker can do it): nothing is written for the event, and HandleEvent
// fails so that asynq runs the task again. From SlowFinalRetries on, the
// stop is final for that webhook alone: its row is Exhausted with the
// reason and the event's other webhooks go ahead. A limit of 1ns reaches
// the deadline without load.
func TestFanOutPastTheTimeLimitIsRetriedThenFinal(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testenv.SQLite(t)
	box := testenv.SecretBox(t)
	clk := clock.NewStub(time.Now())
	hooks := webhook.New(db, box, clk, webhook.Defaults{MaxRetries: 3, Timeout: time.Second}, nil)
	d := New(db, send.NewSender(send.SenderConfig{}), box, Config{Clock: clk, RenderTimeLimit: time.Nanosecond})
	doctype, event, url := "Sales Order", "on_submit", "http://127.0.0.1:9/hook"
	slow, other := "slow", "other"
	tpl := `{"v": "{% for x in doc.a %}{% if x > 5 %}y{% endif %}{% endfor %}"}`
	for _, in := range []webhook.Input{
		{Name: &slow, DocType: &doctype, Event: &event, URL: &url, Template: &tpl},
		{Name: &other, DocType: &doctype, Event: &event, URL: &url},
	} {
		if _, err := hooks.Create(ctx, "", in); err != nil {
			t.Fatal(err)
		}
	}
	ev := Event{ID: "evt-slow", DocType: doctype, Event: event, Doc: map[string]any{"name": "SO-1", "a": []any{1, 1, 1}}}
	var queued []string
	in := Inline{Enqueue: func(_ context.Context, p Pending) error {
		queued = append(queued, p.WebhookName)
		return nil
	}}
	rows := func() []models.Delivery {
		t.Helper()
		var rows []models.Delivery
		if err := db.Where("event_id = ?", ev.ID).Order("webhook_name").Find(&rows).Error; err != nil {
			t.Fatal(err)
		}
		return rows
	}

	if _, err := d.FanOut(ctx, ev); !errors.Is(err, budget.ErrTimeLimit) || errors.Is(err, send.ErrUnbuildable) {
		t.Fatalf("FanOut past the time limit: %v, want an error wrapping ErrTimeLimit only", err)
	}
	for retries := range SlowFinalRetries {
		in.Retries = retries
		err := d.HandleEvent(ctx, ev, in)
		if !errors.Is(err, budget.ErrTimeLimit) || errors.Is(err, send.ErrUnbuildable) || !strings.Contains(err.Error(), `webhook "slow"`) {
			t.Fatalf("retry %d: HandleEvent = %v, want an error naming webhook \"slow\" and wrapping ErrTimeLimit only", retries, err)
		}
		if got := rows(); len(got) != 0 || len(queued) != 0 {
			t.Fatalf("retry %d: rows %+v, queued %v; want nothing written or queued", retries, got, queued)
		}
	}

	in.Retries = SlowFinalRetries
	if err := d.HandleEvent(ctx, ev, in); err != nil {
		t.Fatalf("retry %d: HandleEvent = %v, want the slow webhook Exhausted and no error", SlowFinalRetries, err)
	}
	got := rows()
	if len(got) != 2 {
		t.Fatalf("rows %+v, want one for each webhook", got)
	}
	if r := got[1]; r.WebhookName != slow || r.Status != models.StatusExhausted || !strings.Contains(r.LastError, "took longer than the time limit") {
		t.Errorf("slow webhook's row: %s %q, want Exhausted naming the time limit", r.Status, r.LastError)
	}
	if r := got[0]; r.WebhookName != other || r.Status != models.StatusFailed || r.Attempts != 0 {
		t.Errorf("other webhook's row: %s after %d attempts, want Failed and unattempted (its first attempt queued)", r.Status, r.Attempts)
	}
	if len(queued) != 1 || queued[0] != other {
		t.Errorf("queued first attempts %v, want only %q's", queued, other)
	}
}

// workflow_transition's path (DeliverNow) fails on a time-limit stop, to be
// published or run again, and from the event task's SlowFinalRetries on
// ends that webhook Exhausted instead, as fan-out does: failing forever
// would end with the task archived and the event lost for every webhook.
func TestDeliverNowPastTheTimeLimitIsRetriedThenFinal(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testenv.SQLite(t)
	box := testenv.SecretBox(t)
	clk := clock.NewStub(time.Now())
	hooks := webhook.New(db, box, clk, webhook.Defaults{MaxRetries: 3, Timeout: time.Second}, nil)
	d := New(db, send.NewSender(send.SenderConfig{}), box, Config{Clock: clk, RenderTimeLimit: time.Nanosecond})
	name, doctype, wf, url := "slow-wf", "Sales Order", models.EventWorkflowTransition, "http://127.0.0.1:9/hook"
	tpl := `{"v": "{% for x in doc.a %}{{ x }}{% endfor %}"}`
	if _, err := hooks.Create(ctx, "", webhook.Input{Name: &name, DocType: &doctype, Event: &wf, URL: &url, Template: &tpl}); err != nil {
		t.Fatal(err)
	}
	ev := Event{ID: "evt-slow-wf", DocType: doctype, Event: wf, Doc: map[string]any{"name": "SO-1", "a": []any{1}}}

	if _, err := d.DeliverNow(ctx, ev); !errors.Is(err, budget.ErrTimeLimit) || errors.Is(err, send.ErrUnbuildable) {
		t.Fatalf("DeliverNow past the time limit: %v, want an error wrapping ErrTimeLimit only", err)
	}
	if _, err := d.DeliverNowOnRetry(ctx, ev, SlowFinalRetries-1); !errors.Is(err, budget.ErrTimeLimit) {
		t.Fatalf("retry %d: %v, want an error wrapping ErrTimeLimit", SlowFinalRetries-1, err)
	}
	var n int64
	if err := db.Model(&models.Delivery{}).Where("event_id = ?", ev.ID).Count(&n).Error; err != nil || n != 0 {
		t.Fatalf("%d rows (%v) before the final retry, want none", n, err)
	}
	_, err := d.DeliverNowOnRetry(ctx, ev, SlowFinalRetries)
	var serr *event.SyncError
	if !errors.As(err, &serr) || len(serr.Failures) != 1 || serr.Failures[0].Webhook != name || !strings.Contains(serr.Failures[0].Error, "time limit") {
		t.Fatalf("retry %d: %v, want a sync error naming %q and its time limit", SlowFinalRetries, err, name)
	}
}
