package storage

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/homingdev/homing/internal/engine/opsevent"
	"github.com/homingdev/homing/models"
)

// HealthSignal is what an attempt tells of its webhook's health.
type HealthSignal int32

// The values are spelled out because recordSQL compares them as numbers.
const (
	HealthSilent  HealthSignal = 0 // no answer worth counting: invalid request, shutdown
	HealthOK      HealthSignal = 1 // a success: the clock stops
	HealthFailure HealthSignal = 2 // a failure: the clock starts unless running
)

// The health rule. A success clears the webhook's health (failing_since,
// failures, the probe); a failure starts the failing_since clock unless it
// runs and counts one more failure; a silent attempt changes nothing. Only a
// row whose health changes is written, so a healthy webhook's successes
// write nothing. webhook_health has no trigger: moving it leaves
// webhooks_version, and every worker's webhook cache, alone.
//
// It is written twice, because each implementation must apply it inside the
// statement that records the outcome: here in Go, one attempt at a time
// (GORM's recordHealth), and as SQL over a batch of attempts (Postgres's
// recordSQL). TestHealthRule holds the SQL, fed one attempt per statement and
// all in one, to the Go.

// recordHealth applies the health rule for one attempt in tx and, with
// disable set, disables the webhook and exhausts its other pending
// deliveries, so nothing more is sent to an endpoint that is gone or has
// only failed for health.disable_after. It reports how many deliveries it
// exhausted.
//
// The disable is fenced on the webhook being enabled: the transaction that
// disables it publishes its operational event (opsevent.Disabled) through
// ops, with the deliveries it exhausted, so one disable is announced once.
func recordHealth(ctx context.Context, tx *gorm.DB, ops *opsevent.Publisher, webhookID, deliveryID string, sig HealthSignal, now time.Time, disable string) (int64, error) {
	var exhausted int64
	if disable != "" {
		res := tx.Model(&models.Webhook{}).Where("id = ? AND enabled", webhookID).
			Updates(map[string]any{"enabled": false, "disabled_reason": disable, "updated_at": now})
		if res.Error != nil {
			return 0, fmt.Errorf("disable webhook %s: %w", webhookID, res.Error)
		}
		disabled := res.RowsAffected == 1
		res = tx.Model(&models.Delivery{}).
			Where("webhook_id = ? AND status = ? AND id <> ?", webhookID, models.StatusFailed, deliveryID).
			Updates(map[string]any{"status": models.StatusExhausted, "next_retry": nil, "last_error": "webhook disabled: " + disable, "updated_at": now})
		if res.Error != nil {
			return 0, fmt.Errorf("exhaust pending deliveries of webhook %s: %w", webhookID, res.Error)
		}
		exhausted = res.RowsAffected
		if disabled {
			if err := ops.Disabled(ctx, tx, webhookID, disable, exhausted, now); err != nil {
				return 0, err
			}
		}
	}
	var err error
	switch sig {
	case HealthOK:
		err = tx.Model(&models.WebhookHealth{}).
			Where("webhook_id = ? AND (failures <> 0 OR failing_since IS NOT NULL OR probe_id IS NOT NULL)", webhookID).
			Updates(map[string]any{"failing_since": nil, "failures": 0, "probe_id": nil, "probe_at": nil}).Error
	case HealthFailure:
		err = tx.Model(&models.WebhookHealth{}).Where("webhook_id = ?", webhookID).
			Updates(map[string]any{"failing_since": gorm.Expr("COALESCE(failing_since, ?)", now), "failures": gorm.Expr("failures + 1")}).Error
	}
	if err != nil {
		return 0, fmt.Errorf("record health of webhook %s: %w", webhookID, err)
	}
	return exhausted, nil
}
