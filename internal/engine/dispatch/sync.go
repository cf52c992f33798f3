package dispatch

import (
	"context"
	"errors"
	"fmt"

	"github.com/homingdev/homing/internal/intake/event"
	"github.com/homingdev/homing/models"
)

// DeliverNow is workflow_transition's path: fan out, then one attempt per
// matching webhook in the caller, recorded as Delivered or Exhausted (never
// Failed). It returns an *event.SyncError naming each webhook that failed.
// Publishing the same event ID again sends nothing new, and reports the
// webhooks whose earlier delivery of it failed.
//
// A definition past its time limit fails the call (FanOut), to be tried
// again; DeliverNowOnRetry bounds that for an event's task.
func (d *Dispatcher) DeliverNow(ctx context.Context, ev Event) ([]Outcome, error) {
	return d.DeliverNowOnRetry(ctx, ev, 0)
}

// DeliverNowOnRetry is DeliverNow on an event task's retries-th re-run
// (asynq.GetRetryCount): from SlowFinalRetries on, a webhook whose
// definition is past its time limit is Exhausted for this event (onStop)
// instead of failing the task again, which would end with the task
// archived and the event lost for every webhook.
func (d *Dispatcher) DeliverNowOnRetry(ctx context.Context, ev Event, retries int) ([]Outcome, error) {
	if ev.Event != models.EventWorkflowTransition {
		return nil, fmt.Errorf("%w: only %s events are delivered synchronously, got %q", event.ErrInvalidEvent, models.EventWorkflowTransition, ev.Event)
	}
	pending, _, _, _, err := d.fanOut(ctx, ev, Inline{Retries: retries})
	if err != nil {
		return nil, err
	}
	var outcomes []Outcome
	for _, p := range pending {
		out, err := d.Attempt(ctx, p.ID, Sync)
		if err != nil && !errors.Is(err, ErrNotClaimed) {
			return outcomes, err
		}
		outcomes = append(outcomes, out)
	}
	// Report from the records, so a repeated publish and unbuildable
	// requests are answered the same way as fresh failures.
	rows, err := d.store.EventDeliveries(ctx, ev.Tenant, ev.ID)
	if err != nil {
		return outcomes, err
	}
	serr := &event.SyncError{EventID: ev.ID}
	for _, r := range rows {
		if r.Status != models.StatusDelivered {
			serr.Failures = append(serr.Failures, event.WebhookFailure{Webhook: r.WebhookName, DeliveryID: r.ID, Error: r.LastError})
		}
	}
	if len(serr.Failures) > 0 {
		return outcomes, serr
	}
	return outcomes, nil
}
