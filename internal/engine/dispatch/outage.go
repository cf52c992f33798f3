package dispatch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/homingdev/homing/models"
)

// ErrHeld means a retry was not made because its webhook is failing
// (models.WebhookHealth.Failing) and the delivery is not the probe the
// sweep chose: the row stays Failed and due, with no attempt counted, until
// the probe succeeds. It is an ErrNotClaimed: the task is dropped.
var ErrHeld = fmt.Errorf("%w: held back while its webhook is failing", ErrNotClaimed)

// ErrOrdered means an attempt was not made because an earlier delivery of
// its document to its ordered webhook is not final yet (storage.Hold): the
// delivery waits, handed back to the sweep, until that one's outcome wakes
// it. The caller drops its task; nothing was sent.
var ErrOrdered = fmt.Errorf("%w: held behind an earlier delivery of its document", ErrNotClaimed)

// ErrTenantDisabled means an attempt was not made because the delivery's
// tenant is disabled: the row stays Failed, due by the time of the refusal,
// with no attempt counted, and the sweep takes it once the tenant is
// enabled again. It is an ErrNotClaimed: the task is dropped.
var ErrTenantDisabled = fmt.Errorf("%w: held while its tenant is disabled", ErrNotClaimed)

// Limiter spaces the requests to webhooks that have a rate_limit, across
// every worker (package ratelimit keeps the budget in Redis).
type Limiter interface {
	// Allow takes one request from webhook id's budget of perSecond
	// requests a second, and answers 0; or, when the budget is spent,
	// takes nothing and answers how long until a request is free.
	Allow(ctx context.Context, webhookID string, perSecond int) (time.Duration, error)
}

// limit takes the attempt's request from its webhook's rate_limit. When the
// budget is spent, the claim is given back with the row due when a request
// is free (no attempt counted, no worker slot held while it waits: a sweep
// queues it again), and done is set. A limiter that cannot answer (Redis
// down) fails the task after giving the claim back, as a lost database
// would.
func (d *Dispatcher) limit(ctx context.Context, claimed models.Delivery, hook *models.Webhook, now time.Time) (Outcome, bool, error) {
	wait, err := d.limiter.Allow(ctx, hook.ID, hook.RateLimit)
	if err != nil {
		err = fmt.Errorf("rate limit of webhook %q: %w", hook.Name, err)
		now := d.now()
		if rerr := d.release(ctx, claimed, &now); rerr != nil {
			err = errors.Join(err, rerr)
		}
		return Outcome{}, true, err
	}
	if wait <= 0 {
		return Outcome{}, false, nil
	}
	at := now.Add(wait)
	if err := d.release(ctx, claimed, &at); err != nil {
		return Outcome{}, true, err
	}
	if d.observer != nil {
		d.observer.Postponed("rate_limit")
	}
	d.log.Debug("delivery postponed by its webhook's rate limit", "delivery", claimed.ID, "webhook", hook.Name, "wait", wait.String())
	return Outcome{Status: models.StatusFailed, Postponed: true, Attempt: claimed.Attempts - 1, NextRetry: &at}, true, nil
}

func formatTime(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}
