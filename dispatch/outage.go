package dispatch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/homingdev/homing/models"
)

// ErrHeld means a retry was not made because its webhook is failing
// (models.WebhookHealth.Failing) and the delivery is not the probe the
// sweep chose: the row stays Failed and due, with no attempt counted, until
// the probe succeeds. It is an ErrNotClaimed: the task is dropped.
var ErrHeld = fmt.Errorf("%w: held back while its webhook is failing", ErrNotClaimed)

// Limiter spaces the requests to webhooks that have a rate_limit, across
// every worker (package ratelimit keeps the budget in Redis).
type Limiter interface {
	// Allow takes one request from webhook id's budget of perSecond
	// requests a second, and answers 0; or, when the budget is spent,
	// takes nothing and answers how long until a request is free.
	Allow(ctx context.Context, webhookID string, perSecond int) (time.Duration, error)
}

// health reads webhook id's health; a webhook without a row is healthy.
// Served by the primary key of webhook_health.
func (d *Dispatcher) health(ctx context.Context, webhookID string) (models.WebhookHealth, error) {
	var h models.WebhookHealth
	err := d.db.WithContext(ctx).Where("webhook_id = ?", webhookID).Take(&h).Error
	if err != nil && !errors.Is(err, gorm.ErrRecordNotFound) {
		return h, fmt.Errorf("read health of webhook %s: %w", webhookID, err)
	}
	return h, nil
}

// holdIfFailing is the held-back rule of a retry on the path that claims
// with a plain UPDATE (notHeldSQL is the same rule inside the joined
// claims): while the webhook is failing, only its probe is sent. A held row
// is handed back to the sweep at once (queued_at cleared), so that it can
// be taken again as the next probe, or with the rest when the webhook
// recovers. It also fills in hook.FailingSince for health.disable_after.
func (d *Dispatcher) holdIfFailing(ctx context.Context, row models.Delivery, mode Mode, hook *models.Webhook) error {
	h, err := d.health(ctx, hook.ID)
	if err != nil {
		return err
	}
	hook.FailingSince = h.FailingSince
	if mode != Retry || !h.Failing() || (h.ProbeID != nil && *h.ProbeID == row.ID) {
		return nil
	}
	if err := d.db.WithContext(ctx).Model(&models.Delivery{}).
		Where("id = ? AND status = ?", row.ID, models.StatusFailed).
		Update("queued_at", nil).Error; err != nil {
		return fmt.Errorf("hand back held delivery %s: %w", row.ID, err)
	}
	if d.observer != nil {
		d.observer.Postponed("held")
	}
	return fmt.Errorf("delivery %s of webhook %q (failing since %s, %d failures): %w",
		row.ID, hook.Name, formatTime(h.FailingSince), h.Failures, ErrHeld)
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
		if rerr := d.release(claimed, d.now()); rerr != nil {
			err = errors.Join(err, rerr)
		}
		return Outcome{}, true, err
	}
	if wait <= 0 {
		return Outcome{}, false, nil
	}
	at := now.Add(wait)
	if err := d.release(claimed, at); err != nil {
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
