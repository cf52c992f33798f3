package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/homingdev/homing/internal/engine/opsevent"
	"github.com/homingdev/homing/models"
)

// GORM is the reference Store: each method one plain statement (or one
// transaction) at a time, in SQL every database Homing runs on accepts.
type GORM struct {
	db *gorm.DB
	// ops publishes the operational events of what Record and Abandon
	// change, in their transactions (package opsevent); nil publishes none.
	ops *opsevent.Publisher
}

// NewGORM is the reference Store on db, publishing operational events with
// opsevent.Default.
func NewGORM(db *gorm.DB) *GORM { return &GORM{db: db, ops: opsevent.Default} }

// webhookColumns is what fan-out and the first attempt need of a webhook, in
// the order scanWebhook reads them.
const webhookColumns = `id, tenant, name, doc_type, doc_event, condition, request_url, request_method, request_structure,
	body_template, fields, headers, secret, previous_secrets, signature_scheme, enabled, disabled_reason,
	rate_limit, max_retries, queue, timeout_ms, follow_redirects, url_template, compat, condition_language, ordering`

// scanWebhook reads one row of webhookColumns, after the columns of first.
// Fan-out scans by hand: it runs once per event, and GORM's reflection was
// a tenth of the worker's CPU.
func scanWebhook(rows *sql.Rows, w *models.Webhook, first ...any) error {
	return rows.Scan(append(first, &w.ID, &w.Tenant, &w.Name, &w.DocType, &w.DocEvent, &w.Condition, &w.RequestURL, &w.RequestMethod,
		&w.RequestStructure, &w.BodyTemplate, &w.Fields, &w.Headers, &w.Secret, &w.PreviousSecrets, &w.SignatureScheme,
		&w.Enabled, &w.DisabledReason, &w.RateLimit, &w.MaxRetries, &w.Queue, &w.TimeoutMS,
		&w.FollowRedirects, &w.URLTemplate, &w.Compat, &w.ConditionLanguage, &w.Ordering)...)
}

// FanOut implements Store. It leaves the event's outbox row to the caller
// (Written.Released is never set).
func (s *GORM) FanOut(ctx context.Context, ev EventKey, plan Plan) (Written, error) {
	hooks, err := s.match(ctx, ev.Tenant, ev.DocType, ev.Event)
	if err != nil {
		return Written{}, fmt.Errorf("load webhooks: %w", err)
	}
	if len(hooks) == 0 {
		return Written{Created: true}, nil
	}
	rows := plan(hooks)
	if len(rows) == 0 {
		return Written{Created: true}, nil
	}
	var (
		created int
		held    []string
		blocked []string
	)
	err = s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var err error
		if err = drawSeqs(tx, rows); err != nil {
			return err
		}
		if created, err = insert(tx, rows); err != nil {
			return err
		}
		if held, err = holdClaims(tx, rows); err != nil {
			return err
		}
		blocked, err = blockClaims(tx, rows)
		return err
	})
	if err != nil {
		return Written{}, fmt.Errorf("create deliveries: %w", err)
	}
	w, err := s.written(ctx, rows, created)
	w.Held, w.Blocked = held, blocked
	return w, err
}

// match loads the enabled webhooks of tenant, docType and event, in ID
// order (so two fan-outs of one event insert in the same order), whether
// the tenant is enabled or not: a disabled tenant's events are kept, and
// its deliveries held by the claim. Served by webhooks_match (tenant,
// doc_type, doc_event) WHERE enabled.
func (s *GORM) match(ctx context.Context, tenant, docType, event string) ([]models.Webhook, error) {
	rows, err := s.db.WithContext(ctx).Raw("SELECT "+webhookColumns+
		" FROM webhooks WHERE tenant = ? AND doc_type = ? AND doc_event = ? AND enabled = ? ORDER BY id",
		models.TenantOr(tenant), docType, event, true).Rows()
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var hooks []models.Webhook
	for rows.Next() {
		var w models.Webhook
		if err := scanWebhook(rows, &w); err != nil {
			return nil, err
		}
		hooks = append(hooks, w)
	}
	return hooks, rows.Err()
}

// tenantEnabled is the condition every claim adds for the row named d (a
// deliveries row, or fan-out's planned one): its tenant is enabled. It sits
// in the claim's own statement, so that no claim is taken after a disable
// has committed. Served by tenants' primary key.
func tenantEnabled(d string) string {
	return `EXISTS (SELECT 1 FROM tenants t WHERE t.name = ` + d + `.tenant AND t.enabled)`
}

// deliveryColumnsBase are the columns fan-out writes, in insert's order,
// but accept_seq, which the Postgres INSERT computes (drawn for a 0).
const deliveryColumnsBase = `id, webhook_id, webhook_name, event_id, doc_type, doc_name, doc_event, method, url, headers,
	payload, status, attempts, max_retries, next_retry, last_error, created_at, updated_at, url_doc, tenant, accepted_at, trace_context`

// deliveryColumns are the columns fan-out writes, in insert's order.
const deliveryColumns = deliveryColumnsBase + `, accept_seq`

// insertBatch keeps one INSERT's parameters (23 per row) well under
// PostgreSQL's 65,535.
const insertBatch = 200

// insert writes rows with INSERT … ON CONFLICT (event_id, webhook_id) DO
// NOTHING, one statement per batch, and reports how many it created.
func insert(db *gorm.DB, rows []models.Delivery) (int, error) {
	inserted := 0
	for start := 0; start < len(rows); start += insertBatch {
		batch := rows[start:min(start+insertBatch, len(rows))]
		var q strings.Builder
		q.WriteString("INSERT INTO deliveries (" + deliveryColumns + ") VALUES ")
		args := make([]any, 0, 23*len(batch))
		for i, r := range batch {
			if i > 0 {
				q.WriteString(", ")
			}
			q.WriteString("(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
			headers, err := r.Headers.Value()
			if err != nil {
				return inserted, err
			}
			args = append(args, r.ID, r.WebhookID, r.WebhookName, r.EventID, r.DocType, r.DocName, r.DocEvent, r.Method, r.URL,
				headers, r.Payload, r.Status, r.Attempts, r.MaxRetries, r.NextRetry, r.LastError, r.CreatedAt, r.UpdatedAt, r.URLDoc, models.TenantOr(r.Tenant), r.AcceptedAt, r.TraceContext, r.AcceptSeq)
		}
		q.WriteString(" ON CONFLICT (event_id, webhook_id) DO NOTHING")
		res := db.Exec(q.String(), args...)
		if res.Error != nil {
			return inserted, res.Error
		}
		inserted += int(res.RowsAffected)
	}
	return inserted, nil
}

// holdClaims is the claim check of the rows insert wrote claimed (planned
// with an attempt counted), run after it in the same transaction, before
// any of them can be seen: those whose tenant is disabled are written
// unclaimed instead, attempts 0 and due at their created_at, and their IDs
// returned. A row that existed already has another ID than the plan's and
// is left alone. Served by deliveries' primary key.
func holdClaims(tx *gorm.DB, rows []models.Delivery) ([]string, error) {
	var claimed []string
	for _, r := range rows {
		if r.Status == models.StatusFailed && r.Attempts > 0 {
			claimed = append(claimed, r.ID)
		}
	}
	if len(claimed) == 0 {
		return nil, nil
	}
	res, err := tx.Raw(`UPDATE deliveries SET attempts = 0, next_retry = created_at
		WHERE id IN ? AND status = ? AND attempts > 0 AND NOT `+tenantEnabled("deliveries")+` RETURNING id`,
		claimed, models.StatusFailed).Rows()
	if err != nil {
		return nil, fmt.Errorf("hold claims of a disabled tenant: %w", err)
	}
	defer res.Close()
	var held []string
	for res.Next() {
		var id string
		if err := res.Scan(&id); err != nil {
			return nil, err
		}
		held = append(held, id)
	}
	slices.Sort(held)
	return held, res.Err()
}

// drawSeqs gives each ordered row planned without a place (AcceptSeq 0:
// its event came straight into Redis) one from the outbox's sequence, so
// that such events are ordered by their fan-out among those the outbox
// numbered. Only ordered rows have an AcceptSeq, and those exist on
// PostgreSQL alone.
func drawSeqs(tx *gorm.DB, rows []models.Delivery) error {
	for i := range rows {
		if rows[i].AcceptSeq == nil || *rows[i].AcceptSeq != 0 {
			continue
		}
		var seq int64
		if err := tx.Raw("SELECT nextval('outbox_events_id_seq')").Scan(&seq).Error; err != nil {
			return fmt.Errorf("draw a place in the order of delivery %s: %w", rows[i].ID, err)
		}
		rows[i].AcceptSeq = &seq
	}
	return nil
}

// blockClaims is the ordering rule's check of the rows insert wrote
// claimed, run after holdClaims in the same transaction: an ordered row
// held behind an earlier one of its key (orderBlocked, which sees this
// transaction's other rows too) is written unclaimed instead, attempts 0,
// due OrderRecheck after its creation, and its ID returned
// (Written.Blocked). Served by deliveries' primary key
// and deliveries_order.
func blockClaims(tx *gorm.DB, rows []models.Delivery) ([]string, error) {
	var claimed []string
	for _, r := range rows {
		if r.Status == models.StatusFailed && r.Attempts > 0 && r.AcceptSeq != nil {
			claimed = append(claimed, r.ID)
		}
	}
	if len(claimed) == 0 {
		return nil, nil
	}
	var blocked []string
	if err := tx.Raw(`UPDATE deliveries SET attempts = 0, next_retry = created_at + `+orderRecheckSQL+`
		WHERE id IN ? AND status = ? AND attempts > 0 AND `+orderBlocked("deliveries")+` RETURNING id`,
		claimed, models.StatusFailed).Scan(&blocked).Error; err != nil {
		return nil, fmt.Errorf("hold claims behind earlier deliveries: %w", err)
	}
	slices.Sort(blocked)
	return blocked, nil
}

// written answers FanOut once rows are inserted, created of them by this
// call: when some existed already (an earlier or a concurrent fan-out of
// the same event), what exists now, ours or theirs. Served by
// deliveries_event_webhook (event_id, webhook_id).
func (s *GORM) written(ctx context.Context, rows []models.Delivery, created int) (Written, error) {
	w := Written{Rows: rows, Created: created == len(rows)}
	if w.Created {
		return w, nil
	}
	ids := make([]string, len(rows))
	for i, r := range rows {
		ids[i] = r.WebhookID
	}
	if err := s.db.WithContext(ctx).
		Select("id", "webhook_id", "webhook_name", "status", "attempts").
		Where("event_id = ? AND webhook_id IN ?", rows[0].EventID, ids).
		Find(&w.Existing).Error; err != nil {
		return Written{}, fmt.Errorf("read deliveries: %w", err)
	}
	return w, nil
}

// notHeld is the condition a retry's claim adds, for the deliveries row
// named d: its webhook is not failing (models.FailingAfter), or this
// delivery is the probe the sweep chose (Held). Served by the primary key
// of webhook_health.
func notHeld(d string) string {
	return `NOT EXISTS (SELECT 1 FROM webhook_health h WHERE h.webhook_id = ` + d + `.webhook_id AND h.failures >= ` +
		strconv.Itoa(models.FailingAfter) + ` AND (h.probe_id IS NULL OR h.probe_id <> ` + d + `.id))`
}

// Claim implements Store: it reads the delivery, its webhook and the
// webhook's health, and claims with one conditional UPDATE that repeats
// every condition it checked, so that of two tasks racing for the same row
// exactly one sends.
func (s *GORM) Claim(ctx context.Context, in ClaimIn) (Claim, error) {
	var c Claim
	err := s.db.WithContext(ctx).Where("id = ?", in.ID).Take(&c.Row).Error
	switch {
	case errors.Is(err, gorm.ErrRecordNotFound):
		return c, nil
	case err != nil:
		return c, fmt.Errorf("load delivery %s: %w", in.ID, err)
	}
	c.Found = true
	var hook models.Webhook
	err = s.db.WithContext(ctx).Where("id = ?", c.Row.WebhookID).Take(&hook).Error
	switch {
	case errors.Is(err, gorm.ErrRecordNotFound):
		return c, nil
	case err != nil:
		return c, fmt.Errorf("load webhook of delivery %s: %w", in.ID, err)
	}
	if hook.Headers == nil {
		hook.Headers = models.StringMap{}
	}
	c.Hook = &hook
	if c.Health, err = s.Health(ctx, hook.ID); err != nil {
		return c, err
	}
	hook.FailingSince = c.Health.FailingSince
	var ten models.Tenant
	err = s.db.WithContext(ctx).Select("enabled").Where("name = ?", models.TenantOr(c.Row.Tenant)).Take(&ten).Error
	switch {
	case errors.Is(err, gorm.ErrRecordNotFound):
	case err != nil:
		return c, fmt.Errorf("read tenant of delivery %s: %w", in.ID, err)
	}
	c.TenantDisabled = !ten.Enabled
	if !Claimable(c.Row, in.Mode, in.Now) || !hook.Enabled || c.TenantDisabled || Held(c.Health, c.Row.ID, in.Mode) {
		return c, nil
	}
	if c.Row.AcceptSeq != nil && in.Mode != Sync {
		if c.Blocked, err = s.blocked(ctx, c.Row.ID); err != nil || c.Blocked {
			return c, err
		}
	}
	updates := map[string]any{"attempts": gorm.Expr("attempts + 1"), "updated_at": in.Now, "queued_at": nil}
	lease := Lease(in.Now, hook)
	if in.Mode != Sync {
		updates["next_retry"] = lease
	}
	q := s.db.WithContext(ctx).Model(&models.Delivery{}).
		Where("id = ? AND status = ? AND attempts = ?", c.Row.ID, c.Row.Status, c.Row.Attempts).
		Where("EXISTS (SELECT 1 FROM webhooks w WHERE w.id = deliveries.webhook_id AND w.enabled)").
		Where(tenantEnabled("deliveries"))
	if in.Mode != Sync {
		q = q.Where("NOT " + orderBlocked("deliveries"))
	}
	if in.Mode == Retry {
		q = q.Where("next_retry <= ? AND "+notHeld("deliveries"), in.Now)
	}
	res := q.Updates(updates)
	if res.Error != nil {
		return c, fmt.Errorf("claim delivery %s: %w", in.ID, res.Error)
	}
	if res.RowsAffected != 1 {
		return c, nil // taken by another attempt since it was read
	}
	c.Claimed, c.PrevNext = true, c.Row.NextRetry
	c.Row.Attempts++
	c.Row.UpdatedAt, c.Row.QueuedAt = in.Now, nil
	if in.Mode != Sync {
		c.Row.NextRetry = &lease
	}
	return c, nil
}

// blocked reports whether the ordering rule holds delivery id now. Served
// by deliveries' primary key and deliveries_order.
func (s *GORM) blocked(ctx context.Context, id string) (bool, error) {
	var n int64
	if err := s.db.WithContext(ctx).Raw(`SELECT count(*) FROM deliveries WHERE id = ? AND `+orderBlocked("deliveries"), id).Scan(&n).Error; err != nil {
		return false, fmt.Errorf("read the order of delivery %s: %w", id, err)
	}
	return n > 0, nil
}

// Record implements Store in one transaction: the history row, the
// delivery's fenced update, then the health rule. A final outcome of an
// ordered delivery (o.Order) wakes the next delivery of its key last.
func (s *GORM) Record(ctx context.Context, o Outcome) (Recorded, error) {
	a := o.Attempt
	var rec Recorded
	final := o.Status == models.StatusDelivered || o.Status == models.StatusExhausted
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Create(&a).Error; err != nil {
			return fmt.Errorf("record attempt %d of delivery %s: %w", a.Attempt, a.DeliveryID, err)
		}
		r := tx.Model(&models.Delivery{}).
			Where("id = ? AND status = ? AND attempts = ?", a.DeliveryID, o.FromStatus, a.Attempt).
			Updates(map[string]any{
				"status":           o.Status,
				"next_retry":       o.NextRetry,
				"last_status_code": a.StatusCode,
				"last_error":       o.LastError,
				"last_response":    o.LastResponse,
				"method":           a.Method,
				"url":              a.URL,
				"updated_at":       o.UpdatedAt,
			})
		if r.Error != nil {
			return fmt.Errorf("record outcome of delivery %s: %w", a.DeliveryID, r.Error)
		}
		rec.Applied = r.RowsAffected == 1
		if rec.Applied && o.Status == models.StatusExhausted {
			if err := s.ops.DeliveryExhausted(ctx, tx, a.DeliveryID, o.UpdatedAt); err != nil {
				return err
			}
		}
		var err error
		rec.Exhausted, err = recordHealth(ctx, tx, s.ops, o.WebhookID, a.DeliveryID, o.Health, o.UpdatedAt, o.Disable)
		if err != nil || !rec.Applied || o.Order == nil || !final {
			return err
		}
		rec.Woken, err = wake(tx, *o.Order, a.DeliveryID, o.UpdatedAt)
		return err
	})
	if err != nil {
		return Recorded{}, err
	}
	return rec, nil
}

// Release implements Store. Served by deliveries' primary key.
func (s *GORM) Release(ctx context.Context, claimed models.Delivery, due *time.Time, now time.Time) error {
	err := s.db.WithContext(ctx).Model(&models.Delivery{}).
		Where("id = ? AND status = ? AND attempts = ?", claimed.ID, claimed.Status, claimed.Attempts).
		Updates(map[string]any{"attempts": gorm.Expr("attempts - 1"), "next_retry": due, "updated_at": now}).Error
	if err != nil {
		return fmt.Errorf("release delivery %s: %w", claimed.ID, err)
	}
	return nil
}

// Park implements Store. Served by deliveries' primary key.
func (s *GORM) Park(ctx context.Context, claimed models.Delivery, now time.Time) error {
	err := s.db.WithContext(ctx).Model(&models.Delivery{}).
		Where("id = ? AND status = ? AND attempts = ?", claimed.ID, claimed.Status, claimed.Attempts).
		Updates(map[string]any{"attempts": gorm.Expr("attempts - 1"), "next_retry": now, "queued_at": now, "updated_at": now}).Error
	if err != nil {
		return fmt.Errorf("park delivery %s: %w", claimed.ID, err)
	}
	return nil
}

// Abandon implements Store. Served by deliveries' primary key.
// The delivery's operational event (opsevent.Exhausted) is published in the
// same transaction.
func (s *GORM) Abandon(ctx context.Context, row models.Delivery, reason string, now time.Time) (bool, error) {
	ok := false
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		k := KeyOf(row)
		res := tx.Model(&models.Delivery{}).
			Where("id = ? AND status = ? AND attempts = ?", row.ID, row.Status, row.Attempts).
			Updates(map[string]any{"status": models.StatusExhausted, "next_retry": nil, "last_error": reason, "updated_at": now})
		if res.Error != nil {
			return fmt.Errorf("exhaust delivery %s: %w", row.ID, res.Error)
		}
		if ok = res.RowsAffected == 1; !ok {
			return nil
		}
		if k != nil {
			// Due now for the sweep: no task is queued from here.
			if _, err := wake(tx, *k, row.ID, now); err != nil {
				return err
			}
		}
		return s.ops.DeliveryExhausted(ctx, tx, row.ID, now)
	})
	return ok, err
}

// Announce implements Store.
func (s *GORM) Announce(ctx context.Context, webhookID, lastError string, now time.Time) error {
	return s.ops.Announce(ctx, s.db, webhookID, lastError, now)
}

// HandBack implements Store. Served by deliveries' primary key.
func (s *GORM) HandBack(ctx context.Context, row models.Delivery, now time.Time) error {
	if err := s.db.WithContext(ctx).Model(&models.Delivery{}).
		Where("id = ? AND status = ? AND attempts = ?", row.ID, models.StatusFailed, row.Attempts).
		Updates(map[string]any{
			"queued_at":  nil,
			"next_retry": gorm.Expr("CASE WHEN next_retry > ? THEN ? ELSE next_retry END", now, now),
		}).Error; err != nil {
		return fmt.Errorf("hand back delivery %s: %w", row.ID, err)
	}
	return nil
}

// NotSent implements Store. Served by deliveries' primary key.
func (s *GORM) NotSent(ctx context.Context, id, reason string) error {
	if err := s.db.WithContext(ctx).Model(&models.Delivery{}).
		Where("id = ? AND status = ?", id, models.StatusFailed).
		Update("last_error", reason).Error; err != nil {
		return fmt.Errorf("record the cause in delivery %s: %w", id, err)
	}
	return nil
}

// Health implements Store. Served by the primary key of webhook_health.
func (s *GORM) Health(ctx context.Context, webhookID string) (models.WebhookHealth, error) {
	var h models.WebhookHealth
	err := s.db.WithContext(ctx).Where("webhook_id = ?", webhookID).Take(&h).Error
	if err != nil && !errors.Is(err, gorm.ErrRecordNotFound) {
		return h, fmt.Errorf("read health of webhook %s: %w", webhookID, err)
	}
	return h, nil
}

// EventDeliveries implements Store. Served by deliveries_event_webhook.
func (s *GORM) EventDeliveries(ctx context.Context, tenant, eventID string) ([]models.Delivery, error) {
	var rows []models.Delivery
	if err := s.db.WithContext(ctx).
		Select("id", "webhook_name", "status", "last_error").
		Where("event_id = ? AND tenant = ?", eventID, models.TenantOr(tenant)).Order("webhook_name").
		Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("read deliveries of event %s: %w", eventID, err)
	}
	return rows, nil
}
