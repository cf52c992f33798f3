package dispatch

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"time"

	"gorm.io/gorm"

	"github.com/homingdev/homing/models"
	"github.com/homingdev/homing/signing"
)

// claimed is a delivery whose first attempt this fan-out owns: fanOut
// inserted its row already claimed, so no other task can send it.
type claimed struct {
	row     models.Delivery
	hook    models.Webhook
	secrets []signing.Secret
	at      time.Time
}

// claimAtInsert turns a planned Failed row into one claimed for its first
// attempt, as Attempt's claim would leave it: one attempt counted and
// next_retry moved past the attempt's timeout (the lease). It reports nil,
// leaving the row as planned, when the webhook's secret cannot be opened:
// that row's webhook:deliver task then fails the way it always has.
func (d *Dispatcher) claimAtInsert(row *models.Delivery, w models.Webhook, now time.Time) *claimed {
	secrets, err := d.secrets(&w, now)
	if err != nil {
		return nil
	}
	lease := now.Add(w.Timeout() + claimMargin)
	row.Attempts = 1
	row.NextRetry = &lease
	return &claimed{row: *row, hook: w, secrets: secrets, at: now}
}

// claimColumns is what an attempt needs of the delivery and its webhook, in
// the order scanClaim reads them, and the due time the claim replaced.
const claimColumns = `d.id, d.webhook_id, d.webhook_name, d.event_id, d.headers, d.payload, d.status,
	d.attempts, d.max_retries, d.next_retry, d.created_at, d.url, d.url_doc,
	w.id, w.name, w.request_url, w.request_method, w.secret, w.previous_secrets, w.signature_scheme,
	w.enabled, w.disabled_reason, (SELECT failing_since FROM webhook_health WHERE webhook_id = w.id), w.rate_limit, w.headers,
	w.timeout_ms, w.queue, w.follow_redirects, w.url_template, w.compat, old.next_retry`

// notHeldSQL is the condition a retry's claim adds: its webhook is not
// failing (models.FailingAfter), or this delivery is the probe the sweep
// chose. A held retry stays Failed and due, with no attempt counted.
// Served by the primary key of webhook_health.
var notHeldSQL = `NOT EXISTS (SELECT 1 FROM webhook_health h
	WHERE h.webhook_id = d.webhook_id AND h.failures >= ` + failingAfter + ` AND h.probe_id IS DISTINCT FROM d.id)`

// failingAfter is models.FailingAfter as SQL text.
var failingAfter = strconv.Itoa(models.FailingAfter)

// claimJoinedSQL claims a due or fresh Failed delivery of an enabled webhook
// and reads both rows back in one round trip (PostgreSQL only: the lease is
// computed from the webhook's timeout in SQL). Served by the primary keys of
// both tables. %s is the mode's condition.
const claimJoinedSQL = `UPDATE deliveries AS d
SET attempts = d.attempts + 1, updated_at = ?, queued_at = NULL,
	next_retry = ?::timestamptz + (w.timeout_ms + ?) * interval '1 millisecond'
FROM webhooks AS w, (SELECT id, next_retry FROM deliveries WHERE id = ?) AS old
WHERE d.id = old.id AND w.id = d.webhook_id AND w.enabled AND d.status = 'Failed' AND %s
RETURNING ` + claimColumns

// joinedClaim is what claimJoined took.
type joinedClaim struct {
	row  models.Delivery
	hook models.Webhook
	// prevNext is next_retry before the claim, for unclaim.
	prevNext time.Time
}

// claimJoined is Attempt's one-round-trip claim on PostgreSQL: it claims the
// row only when the plain claim would have, and reports false (nothing
// changed) when it did not, so Attempt's load → claim path can say why: not
// claimable, or a disabled or deleted webhook to abandon. The conditional
// UPDATE is the same guard as claim's: of two racing tasks exactly one
// matches the row, the other then sees it claimed (attempts moved, next_retry
// in the future) and matches nothing.
func (d *Dispatcher) claimJoined(ctx context.Context, id string, mode Mode, now time.Time) (joinedClaim, bool, error) {
	var c joinedClaim
	if !d.postgres || mode == Sync {
		return c, false, nil
	}
	if d.batch != nil {
		// Concurrent attempts share one claim statement (runClaim).
		r, err := d.batch.claim.Do(ctx, claimIn{id: id, retry: mode == Retry, now: now})
		if err != nil {
			return c, false, fmt.Errorf("claim delivery %s: %w", id, err)
		}
		return r.claim, r.ok, nil
	}
	cond, args := "d.attempts = 0", []any{now, now, claimMargin.Milliseconds(), id}
	if mode == Retry {
		cond = "d.next_retry <= ? AND " + notHeldSQL
		args = append(args, now)
	}
	rows, err := d.db.WithContext(ctx).Raw(fmt.Sprintf(claimJoinedSQL, cond), args...).Rows()
	if err != nil {
		return c, false, fmt.Errorf("claim delivery %s: %w", id, err)
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return c, false, fmt.Errorf("claim delivery %s: %w", id, err)
		}
		return c, false, nil
	}
	if err := scanClaim(rows, &c); err != nil {
		return c, false, fmt.Errorf("claim delivery %s: %w", id, err)
	}
	return c, true, rows.Close()
}

func scanClaim(rows *sql.Rows, c *joinedClaim) error {
	row, hook := &c.row, &c.hook
	err := rows.Scan(&row.ID, &row.WebhookID, &row.WebhookName, &row.EventID, &row.Headers, &row.Payload, &row.Status,
		&row.Attempts, &row.MaxRetries, &row.NextRetry, &row.CreatedAt, &row.URL, &row.URLDoc,
		&hook.ID, &hook.Name, &hook.RequestURL, &hook.RequestMethod, &hook.Secret, &hook.PreviousSecrets, &hook.SignatureScheme,
		&hook.Enabled, &hook.DisabledReason, &hook.FailingSince, &hook.RateLimit, &hook.Headers, &hook.TimeoutMS, &hook.Queue,
		&hook.FollowRedirects, &hook.URLTemplate, &hook.Compat, &c.prevNext)
	if err != nil {
		return err
	}
	if row.NextRetry == nil {
		return errors.New("claimed row has no next_retry")
	}
	return nil
}

// unclaim undoes claimJoined when the attempt cannot go ahead because the
// webhook's secret does not open (this worker's secrets.key is wrong): the
// row gets back its attempt count and its due time, as if it had never been
// claimed, and the task fails to be re-run.
func (d *Dispatcher) unclaim(c joinedClaim) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := d.db.WithContext(ctx).Model(&models.Delivery{}).
		Where("id = ? AND status = ? AND attempts = ?", c.row.ID, models.StatusFailed, c.row.Attempts).
		Updates(map[string]any{"attempts": gorm.Expr("attempts - 1"), "next_retry": c.prevNext, "updated_at": d.now()}).Error
	if err != nil {
		return fmt.Errorf("release delivery %s: %w", c.row.ID, err)
	}
	return nil
}
