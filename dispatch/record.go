package dispatch

import (
	"context"
	"fmt"
	"time"

	"github.com/homingdev/homing/models"
)

// outcomeRow is the delivery's new state after an attempt.
type outcomeRow struct {
	status       string
	next         *time.Time
	code         *int
	lastError    string
	lastResponse string
	method, url  string
	at           time.Time
}

// recordOne is recordSent's write on PostgreSQL in one statement, so one
// round trip and one commit: the attempt row is inserted, the webhook's
// failing_since clock moved when change says so, and the delivery updated
// fenced on the attempt count, all atomically (a data-modifying WITH runs
// entirely or not at all). Disabling a webhook touches its other deliveries
// too and keeps the transaction. It reports whether the delivery row took
// the outcome.
func (d *Dispatcher) recordOne(ctx context.Context, a models.Attempt, o outcomeRow, row models.Delivery, fromStatus string, hook *models.Webhook, change healthChange) (bool, error) {
	headers, err := a.RequestHeaders.Value()
	if err != nil {
		return false, fmt.Errorf("record attempt %d of delivery %s: %w", a.Attempt, row.ID, err)
	}
	sql := `WITH attempt AS (
	INSERT INTO delivery_attempts (delivery_id, attempt, at, method, url, request_headers, status_code, duration_ms, class, error, response)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
)`
	args := []any{a.DeliveryID, a.Attempt, a.At, a.Method, a.URL, headers, a.StatusCode, a.DurationMS, a.Class, a.Error, a.Response}
	switch change {
	case healthReset:
		sql += `, health AS (UPDATE webhooks SET failing_since = NULL WHERE id = ?)`
		args = append(args, hook.ID)
	case healthFailing:
		sql += `, health AS (UPDATE webhooks SET failing_since = ? WHERE id = ? AND failing_since IS NULL)`
		args = append(args, o.at, hook.ID)
	}
	// Served by the primary key of deliveries.
	sql += `
UPDATE deliveries SET status = ?, next_retry = ?, last_status_code = ?, last_error = ?, last_response = ?, method = ?, url = ?, updated_at = ?
WHERE id = ? AND status = ? AND attempts = ?`
	args = append(args, o.status, o.next, o.code, o.lastError, o.lastResponse, o.method, o.url, o.at, row.ID, fromStatus, row.Attempts)
	r := d.db.WithContext(ctx).Exec(sql, args...)
	if r.Error != nil {
		return false, fmt.Errorf("record attempt %d of delivery %s: %w", a.Attempt, row.ID, r.Error)
	}
	return r.RowsAffected == 1, nil
}
