package dispatch

import (
	"context"
	"fmt"
	"time"

	"github.com/homingdev/homing/internal/engine/dispatch/storage"
	"github.com/homingdev/homing/internal/engine/signing"
	"github.com/homingdev/homing/internal/engine/webhook"
	"github.com/homingdev/homing/models"
)

// claimed is a delivery this attempt owns: taken by the store's Claim, or
// inserted already claimed by fan-out (claimAtInsert), so that no other
// task can send it.
type claimed struct {
	row models.Delivery
	// prevNext is next_retry before the claim: a release gives it back.
	prevNext *time.Time
	hook     models.Webhook
	secrets  []signing.Secret
	at       time.Time
}

// claimAtInsert turns a planned Failed row into one claimed for its first
// attempt, as the store's Claim would leave it: one attempt counted and
// next_retry moved to the lease. It reports nil, leaving the row as
// planned, when the webhook's secret cannot be opened: that row's
// webhook:deliver task then fails the way it always has.
func (d *Dispatcher) claimAtInsert(row *models.Delivery, w models.Webhook, now time.Time) *claimed {
	secrets, err := webhook.LiveSecrets(d.box, &w, now)
	if err != nil {
		return nil
	}
	planned := row.NextRetry
	lease := storage.Lease(now, w)
	row.Attempts = 1
	row.NextRetry = &lease
	return &claimed{row: *row, prevNext: planned, hook: w, secrets: secrets, at: now}
}

// refused answers an attempt whose claim took nothing, by what the claim
// saw (refusal): not claimable, made final without a request because its
// webhook is disabled or deleted, held back while its webhook is failing,
// held while its tenant is disabled, or held behind an earlier delivery of
// its document (again: it may claim once more if that one just ended).
func (d *Dispatcher) refused(ctx context.Context, c storage.Claim, id string, mode Mode, now time.Time, again bool) (Outcome, error) {
	switch r := refusal(c, mode, now); r {
	case refusedMissing:
		return Outcome{}, fmt.Errorf("delivery %s does not exist: %w", id, ErrNotClaimed)
	case refusedState:
		return Outcome{}, fmt.Errorf("delivery %s (%s, %d attempts, next_retry %s) for a %s attempt at %s: %w",
			id, c.Row.Status, c.Row.Attempts, preciseTime(c.Row.NextRetry), mode, now.UTC().Format(time.RFC3339Nano), ErrNotClaimed)
	case refusedWebhookDeleted, refusedWebhookDisabled:
		reason, why := "webhook deleted", models.ReasonWebhookDeleted
		if r == refusedWebhookDisabled {
			reason, why = "webhook disabled", models.ReasonWebhookDisabled
			if c.Hook.DisabledReason != "" {
				reason += ": " + c.Hook.DisabledReason
			}
		}
		return d.abandon(ctx, c.Row, reason, why)
	case refusedHeld:
		// Handed back to the sweep at once (queued_at cleared), so that it
		// can be taken again as the next probe, or with the rest when the
		// webhook recovers.
		if err := d.store.HandBack(ctx, c.Row, now); err != nil {
			return Outcome{}, err
		}
		if d.observer != nil {
			d.observer.Postponed("held")
		}
		return Outcome{}, fmt.Errorf("delivery %s of webhook %q (failing since %s, %d failures): %w",
			id, c.Hook.Name, formatTime(c.Health.FailingSince), c.Health.Failures, ErrHeld)
	case refusedOrdered:
		return d.hold(ctx, c, id, mode, now, again)
	case refusedTenantDisabled:
		if mode == Sync {
			// workflow_transition is never deferred: its publisher is
			// told, through the row's last error, that nothing was sent.
			return d.abandon(ctx, c.Row, fmt.Sprintf("tenant %q is disabled: not sent", c.Row.Tenant), models.ReasonTenantDisabled)
		}
		// Kept, and handed back to the sweep due now: the sweep leaves a
		// disabled tenant's rows alone, and takes them at once when it is
		// enabled again. Fenced on the row as read, so a claim taken since
		// keeps its lease.
		if err := d.store.HandBack(ctx, c.Row, now); err != nil {
			return Outcome{}, err
		}
		if d.observer != nil {
			d.observer.Postponed("tenant_disabled")
		}
		return Outcome{}, fmt.Errorf("delivery %s of tenant %q: %w", id, c.Row.Tenant, ErrTenantDisabled)
	default:
		return Outcome{}, fmt.Errorf("delivery %s was taken by another attempt (as read: %s, %d attempts, next_retry %s): %w",
			id, c.Row.Status, c.Row.Attempts, preciseTime(c.Row.NextRetry), ErrNotClaimed)
	}
}

// hold answers a claim the ordering rule refused: the row goes back to the
// sweep due storage.OrderRecheck later (the head of its key wakes it
// before that once it is final). When the store finds, under the key's
// lock, that the row is no longer held (the head became final after the
// claim read it, and its wake may have read the row before the refusal's
// hand-back), the row is due now and this attempt claims it again, once:
// a wake racing with a refusal is never lost.
func (d *Dispatcher) hold(ctx context.Context, c storage.Claim, id string, mode Mode, now time.Time, again bool) (Outcome, error) {
	held, err := d.store.Hold(ctx, c.Row, now)
	if err != nil {
		return Outcome{}, err
	}
	if !held && again {
		return d.attempt(ctx, id, mode, false)
	}
	if d.observer != nil {
		d.observer.Postponed("ordered")
	}
	return Outcome{}, fmt.Errorf("delivery %s of %s %q (webhook %q): %w", id, c.Row.DocType, c.Row.DocName, c.Row.WebhookName, ErrOrdered)
}

// abandon makes a claimable delivery Exhausted without a request.
func (d *Dispatcher) abandon(ctx context.Context, row models.Delivery, reason, why string) (Outcome, error) {
	ok, err := d.store.Abandon(ctx, row, reason, d.now())
	if err != nil {
		return Outcome{}, err
	}
	if !ok {
		return Outcome{}, fmt.Errorf("delivery %s changed under us: %w", row.ID, ErrNotClaimed)
	}
	d.log.Info("delivery exhausted without a request", "delivery", row.ID, "webhook", row.WebhookName, "reason", reason)
	d.Deliveries(row.Tenant, row.WebhookName, models.StatusExhausted, why, 1)
	return Outcome{Status: models.StatusExhausted, Attempt: row.Attempts, Reason: reason}, nil
}

// release gives back a claim whose request was not made (interrupted by
// shutdown, postponed by the rate limit, a secret this worker cannot open,
// or the others of an event that could not be queued): the row is due
// again at due, with its attempt uncounted, so the requeued task (or a
// sweep) can claim it. It runs whatever ctx says: a shutdown must not leave
// the claim behind.
func (d *Dispatcher) release(ctx context.Context, row models.Delivery, due *time.Time) error {
	ctx, cancel := detached(ctx)
	defer cancel()
	return d.store.Release(ctx, row, due, d.now())
}

// detached is ctx without its cancellation, bounded on its own: for the
// writes that end a claim, which a shutdown must not leave undone.
func detached(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
}

// preciseTime is t to the nanosecond, for a refusal that a clock's last
// digits may explain; "-" when nil.
func preciseTime(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339Nano)
}
