package storage

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/homingdev/homing/models"
)

// Ordered delivery (issue 39). A delivery of an ordered webhook
// (models.OrderingDocument) has an accept_seq, its place among the
// deliveries of its key: (tenant, webhook, doc_type, doc_name). The rule,
// written once (orderBlocked) and enforced by the statements that may
// start a request (the fan-out's claim at insert, every claim):
//
//	a delivery with seq S is held while a delivery of its key with a
//	lower seq is not final (status Failed), or while an event of its
//	document and doc_event with an outbox_events id lower than S has not
//	been fanned out to its webhook yet.
//
// A held delivery stays Failed with a next_retry (Failed ⇔ next_retry): the
// refused claim hands it back due OrderRecheck later (Hold), and the head
// of its key, once final, wakes the next (wake) in the same transaction.
// Hold and wake take the key's advisory lock (lockKey), so that a hold
// decided on what was read before a wake committed cannot undo the wake.

// OrderRecheck is how long a held delivery waits for the sweep to look at
// it again when no wake comes first: the safety net for a wake lost with
// a crash between commit and enqueue (the woken row is due at once and
// needs no net), and for a hold by an outbox event that turned out to make
// no delivery of the webhook (its condition was false).
const OrderRecheck = time.Minute

// OrderKey names the deliveries one ordered delivery waits among.
type OrderKey struct {
	Tenant, WebhookID, DocType, DocName string
}

// KeyOf is row's key, or nil when row is not ordered.
func KeyOf(row models.Delivery) *OrderKey {
	if row.AcceptSeq == nil {
		return nil
	}
	return &OrderKey{Tenant: models.TenantOr(row.Tenant), WebhookID: row.WebhookID, DocType: row.DocType, DocName: row.DocName}
}

// orderBlocked is the condition that the deliveries row (or planned row)
// named d is held by the ordering rule. An unordered row (accept_seq NULL)
// is never held, and pays one column test. Served by deliveries_order and
// outbox_events_doc, and deliveries_event_webhook for the fan-out check.
func orderBlocked(d string) string {
	return `(` + d + `.accept_seq IS NOT NULL AND (EXISTS (SELECT 1 FROM deliveries p
		WHERE p.tenant = ` + d + `.tenant AND p.webhook_id = ` + d + `.webhook_id AND p.doc_type = ` + d + `.doc_type
		AND p.doc_name = ` + d + `.doc_name AND p.status = 'Failed' AND p.accept_seq IS NOT NULL AND p.accept_seq < ` + d + `.accept_seq)
	OR EXISTS (SELECT 1 FROM outbox_events o
		WHERE o.tenant = ` + d + `.tenant AND o.doc_type = ` + d + `.doc_type AND o.doc_name = ` + d + `.doc_name
		AND o.doc_event = ` + d + `.doc_event AND o.id < ` + d + `.accept_seq
		AND NOT EXISTS (SELECT 1 FROM deliveries e WHERE e.event_id = o.event_id AND e.webhook_id = ` + d + `.webhook_id))))`
}

// lockKey takes key's transaction-scoped advisory lock in tx. Only ordered
// rows take it, and those exist on PostgreSQL alone (a webhook on SQLite
// cannot be ordered).
func lockKey(tx *gorm.DB, k OrderKey) error {
	if err := tx.Exec("SELECT pg_advisory_xact_lock(hashtextextended(? || chr(31) || ? || chr(31) || ? || chr(31) || ?, 39))",
		k.Tenant, k.WebhookID, k.DocType, k.DocName).Error; err != nil {
		return fmt.Errorf("lock the order of %s %q: %w", k.DocType, k.DocName, err)
	}
	return nil
}

// wake makes the next delivery of key, now its head, due at now, in tx
// (which holds the key's lock): the first Failed row of the key if it has
// no attempt counted and is due later. A row with an attempt counted may be
// in flight under its claim's lease, and is never touched: only a row that
// was never claimed is woken. It returns the woken row's ID ("" when none).
// Served by deliveries_order.
func wake(tx *gorm.DB, k OrderKey, now time.Time) (string, error) {
	var ids []string
	err := tx.Raw(`UPDATE deliveries SET next_retry = ?, queued_at = NULL
		WHERE id = (SELECT id FROM deliveries WHERE tenant = ? AND webhook_id = ? AND doc_type = ? AND doc_name = ?
			AND status = 'Failed' AND accept_seq IS NOT NULL ORDER BY accept_seq LIMIT 1)
		AND attempts = 0 AND next_retry > ? RETURNING id`,
		now, k.Tenant, k.WebhookID, k.DocType, k.DocName, now).Scan(&ids).Error
	if err != nil {
		return "", fmt.Errorf("wake the next delivery of %s %q: %w", k.DocType, k.DocName, err)
	}
	if len(ids) == 0 {
		return "", nil
	}
	return ids[0], nil
}

// Hold implements Store: under the key's lock, the row's block is checked
// again on what is committed now. Still held, it is due OrderRecheck from
// now; no longer held (the head became final in between and its wake
// read the row before this), it is due now and Hold reports false, for the
// caller to claim it again.
func (s *GORM) Hold(ctx context.Context, row models.Delivery, now time.Time) (bool, error) {
	k := KeyOf(row)
	if k == nil {
		return false, errors.New("hold an unordered delivery")
	}
	var due []time.Time
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := lockKey(tx, *k); err != nil {
			return err
		}
		return tx.Raw(`UPDATE deliveries SET queued_at = NULL,
			next_retry = CASE WHEN `+orderBlocked("deliveries")+` THEN CAST(? AS timestamptz) ELSE CAST(? AS timestamptz) END
			WHERE id = ? AND status = ? AND attempts = ? RETURNING next_retry`,
			now.Add(OrderRecheck), now, row.ID, models.StatusFailed, row.Attempts).Scan(&due).Error
	})
	if err != nil {
		return false, fmt.Errorf("hold delivery %s: %w", row.ID, err)
	}
	// A row that moved on (claimed since) is not held by this call.
	return len(due) == 1 && due[0].After(now), nil
}

// WaitsFor is the delivery row is held behind: the nearest delivery of its
// key before it that is not final, or, when none is and it is held all the
// same, the ID of the event before it not fanned out yet (outbox, true).
// "" when it waits for nothing. Served by deliveries_order and
// outbox_events_doc.
func WaitsFor(ctx context.Context, db *gorm.DB, row models.Delivery) (id string, event bool, err error) {
	if row.AcceptSeq == nil || row.Status != models.StatusFailed {
		return "", false, nil
	}
	var ids []string
	err = db.WithContext(ctx).Raw(`SELECT id FROM deliveries WHERE tenant = ? AND webhook_id = ? AND doc_type = ? AND doc_name = ?
		AND status = 'Failed' AND accept_seq IS NOT NULL AND accept_seq < ? ORDER BY accept_seq DESC LIMIT 1`,
		models.TenantOr(row.Tenant), row.WebhookID, row.DocType, row.DocName, *row.AcceptSeq).Scan(&ids).Error
	if err != nil {
		return "", false, fmt.Errorf("read what delivery %s waits for: %w", row.ID, err)
	}
	if len(ids) > 0 {
		return ids[0], false, nil
	}
	err = db.WithContext(ctx).Raw(`SELECT o.event_id FROM outbox_events o WHERE o.tenant = ? AND o.doc_type = ? AND o.doc_name = ?
		AND o.doc_event = ? AND o.id < ? AND NOT EXISTS (SELECT 1 FROM deliveries e WHERE e.event_id = o.event_id AND e.webhook_id = ?)
		ORDER BY o.id DESC LIMIT 1`,
		models.TenantOr(row.Tenant), row.DocType, row.DocName, row.DocEvent, *row.AcceptSeq, row.WebhookID).Scan(&ids).Error
	if err != nil {
		return "", false, fmt.Errorf("read what delivery %s waits for: %w", row.ID, err)
	}
	if len(ids) > 0 {
		return ids[0], true, nil
	}
	return "", false, nil
}
