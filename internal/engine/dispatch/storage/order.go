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
//
// A wake is never lost to a hold decided on what was read before it: the
// wake always moves the woken row's updated_at, and the hold is fenced on
// the updated_at its claim read. A hold that comes after the wake finds
// the row changed and does nothing (the caller claims again); one that
// comes before it is overwritten by it (PostgreSQL's row lock orders the
// two UPDATEs, and the wake's condition, attempts = 0, is checked again on
// the held row). No advisory lock is needed, so the wake rides in the
// batched outcome statement (recordSQL).

// OrderRecheck is how long a held delivery waits for the sweep to look at
// it again when no wake comes first: the safety net for a wake lost with
// a crash between commit and enqueue (the woken row is due at once and
// needs no net), and for a hold by an outbox event that turned out to make
// no delivery of the webhook (its condition was false).
const OrderRecheck = time.Minute

// orderRecheckSQL is OrderRecheck as an SQL interval.
var orderRecheckSQL = fmt.Sprintf("interval '%d milliseconds'", OrderRecheck.Milliseconds())

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

// wake makes the next delivery of key, due by now, in tx (after the final
// update of delivery after): the first Failed row of the key after that
// one, if it has no attempt counted. It looks forward from the
// final row rather than from the key's start, which would walk every
// delivered row's index entry of a hot document until vacuum; a Failed
// row before it (a reopened one) still holds the woken row, whose claim
// checks the whole rule, so a wake is only ever a hint. A row with an attempt counted may be in flight
// under its claim's lease, and is never touched: only a row that was never
// claimed is woken (a reopened one waits for the sweep's recheck). Its
// updated_at always moves (the fence of Hold). It returns the woken row's
// ID ("" when none). Served by deliveries_order.
func wake(tx *gorm.DB, k OrderKey, after string, now time.Time) (string, error) {
	return wakeAfter(tx, k, `(SELECT accept_seq FROM deliveries WHERE id = ?)`, after, now)
}

// wakeAfter is wake of the first Failed row of key whose place is after
// the place afterSQL makes of arg.
func wakeAfter(tx *gorm.DB, k OrderKey, afterSQL string, arg any, now time.Time) (string, error) {
	var ids []string
	err := tx.Raw(`UPDATE deliveries SET next_retry = CASE WHEN next_retry > ? THEN ? ELSE next_retry END, queued_at = NULL, updated_at = ?
		WHERE id = (SELECT id FROM deliveries WHERE tenant = ? AND webhook_id = ? AND doc_type = ? AND doc_name = ?
			AND status = 'Failed' AND accept_seq > `+afterSQL+` ORDER BY accept_seq LIMIT 1)
		AND attempts = 0 RETURNING id`,
		now, now, now, k.Tenant, k.WebhookID, k.DocType, k.DocName, arg).Scan(&ids).Error
	if err != nil {
		return "", fmt.Errorf("wake the next delivery of %s %q: %w", k.DocType, k.DocName, err)
	}
	if len(ids) == 0 {
		return "", nil
	}
	return ids[0], nil
}

// Hold implements Store: one UPDATE, fenced on the row as its claim read
// it (status, attempts and updated_at, which every wake moves), checks the
// block again. Still held, the row is due OrderRecheck from now; no longer
// held, it is due now. Either way, and when the fence finds the row
// changed (a wake, a claim), Hold reports false unless it left the row
// held, for the caller to claim it again.
func (s *GORM) Hold(ctx context.Context, row models.Delivery, now time.Time) (bool, error) {
	if row.AcceptSeq == nil {
		return false, errors.New("hold an unordered delivery")
	}
	var due []time.Time
	err := s.db.WithContext(ctx).Raw(`UPDATE deliveries SET queued_at = NULL,
		next_retry = CASE WHEN `+orderBlocked("deliveries")+` THEN CAST(? AS timestamptz) ELSE CAST(? AS timestamptz) END
		WHERE id = ? AND status = ? AND attempts = ? AND updated_at = ? RETURNING next_retry`,
		now.Add(OrderRecheck), now, row.ID, models.StatusFailed, row.Attempts, row.UpdatedAt).Scan(&due).Error
	if err != nil {
		return false, fmt.Errorf("hold delivery %s: %w", row.ID, err)
	}
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

// HeldByOrder is which of ids the ordering rule holds now (orderBlocked),
// for the words of a page of deliveries: one statement, by deliveries'
// primary key and then the rule's indexes for the ordered rows alone.
func HeldByOrder(ctx context.Context, db *gorm.DB, ids []string) (map[string]bool, error) {
	held := map[string]bool{}
	if len(ids) == 0 {
		return held, nil
	}
	var out []string
	if err := db.WithContext(ctx).Raw(`SELECT d.id FROM deliveries d WHERE d.id IN ? AND d.status = 'Failed' AND `+orderBlocked("d"), ids).
		Scan(&out).Error; err != nil {
		return nil, fmt.Errorf("read which deliveries wait for an earlier one of their document: %w", err)
	}
	for _, id := range out {
		held[id] = true
	}
	return held, nil
}

// Unblocked implements Store. The nearest earlier delivery that holds each
// id is locked FOR SHARE: an outcome still committing on it (and its
// wake, which could not see the id's row before it was committed) is
// waited for, and the row read again as committed. An earlier event not fanned out yet is
// not asked about: an id released in spite of one is refused by its claim,
// which checks the whole rule. Served by deliveries' primary key and
// deliveries_order.
func (s *GORM) Unblocked(ctx context.Context, ids []string) ([]string, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	var free []string
	for _, id := range ids {
		// The nearest earlier one that is not final, locked: one row, and
		// when it turns final while waited for, the next one before it.
		var ahead []string
		err := s.db.WithContext(ctx).Raw(`SELECT p.id FROM deliveries d JOIN deliveries p ON p.tenant = d.tenant AND p.webhook_id = d.webhook_id
			AND p.doc_type = d.doc_type AND p.doc_name = d.doc_name
			WHERE d.id = ? AND p.status = 'Failed' AND p.accept_seq IS NOT NULL AND p.accept_seq < d.accept_seq
			ORDER BY p.accept_seq DESC LIMIT 1 FOR SHARE OF p`, id).Scan(&ahead).Error
		if err != nil {
			return nil, fmt.Errorf("read the order of delivery %s: %w", id, err)
		}
		if len(ahead) == 0 {
			free = append(free, id)
		}
	}
	return free, nil
}

// Wake implements Store: wake in a statement of its own.
func (s *GORM) Wake(ctx context.Context, k OrderKey, after string, now time.Time) (string, error) {
	return wake(s.db.WithContext(ctx), k, after, now)
}

// WakeAfterEvent implements Store. Served by deliveries_order.
func (s *GORM) WakeAfterEvent(ctx context.Context, k OrderKey, seq int64, now time.Time) (string, error) {
	return wakeAfter(s.db.WithContext(ctx), k, `?`, seq, now)
}
