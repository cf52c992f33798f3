// Package outbox is Homing's durable intake. A producer writes its event into
// the outbox_events table inside its own database transaction (Add: the
// HTTP API and client.PublishTx), so the event exists if and only if the
// business write committed. A Relay moves committed rows into asynq as
// webhook:event tasks, and the row stays until a worker's fan-out has
// committed the event's deliveries (Completer): PostgreSQL is the record of
// what was accepted, Redis only carries the work. A row queued longer ago
// than RelayConfig.RecoverAfter and never fanned out has its task's state
// looked up in Redis: a task that is missing (lost with Redis's data) or
// archived is queued again; one that still waits, retries or runs is left
// alone.
//
// What can happen twice, and why it does no harm: two relays never look at
// one row at once (its lock is held until it is marked, and the fan-out's
// release waits for it), and a task queued while another is in Redis is
// refused by its TaskID webhook_event::<event id>; should a fan-out run
// twice all the same, the second finds the (event, webhook) unique key and
// creates no delivery, and a first attempt is made only by the task that
// claims it. An event is therefore queued at least
// once and delivered once per webhook.
package outbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/homingdev/homing/internal/intake/event"
	"github.com/homingdev/homing/models"
)

// Channel is the PostgreSQL notification channel the outbox trigger
// signals on commit (internal/intake/store/migrations/postgres/0003_outbox.sql).
const Channel = "homing_outbox"

// Outcome is what Add did with an event.
type Outcome int

const (
	// Repeated: the ID was published and fanned out before; nothing was
	// written and nothing will be delivered again.
	Repeated Outcome = iota
	// Added: a new event, written to the outbox.
	Added
	// Requeued: the ID was accepted before but never fanned out (its task
	// may have been lost with Redis's data); the relay queues it again.
	Requeued
	// Conflict: the ID was accepted before with another body (Writer only);
	// nothing was written or queued again.
	Conflict
)

// ErrTenant is an event whose tenant does not exist or is disabled: it is
// refused, and nothing is written.
var ErrTenant = errors.New("tenant refuses events")

// usable refuses tenant when it does not exist or is disabled. The default
// tenant always exists and cannot be disabled, so its events (every event of
// an install that never names a tenant) pay nothing. Served by tenants'
// primary key.
func usable(ctx context.Context, tx *gorm.DB, tenant string) error {
	if tenant == models.DefaultTenant {
		return nil
	}
	var enabled []bool
	if err := tx.WithContext(ctx).Model(&models.Tenant{}).Where("name = ?", tenant).Pluck("enabled", &enabled).Error; err != nil {
		return fmt.Errorf("read tenant %q: %w", tenant, err)
	}
	switch {
	case len(enabled) == 0:
		return fmt.Errorf("%w: tenant %q does not exist (see homing tenant list)", ErrTenant, tenant)
	case !enabled[0]:
		return fmt.Errorf("%w: tenant %q is disabled (homing tenant update %s --enable)", ErrTenant, tenant, tenant)
	}
	return nil
}

// Add writes ev into the outbox through tx, the caller's transaction (or a
// plain *gorm.DB for a write of its own). An ID accepted before is not
// written again: if its event was fanned out the outcome is Repeated and the
// caller should answer with the original; if it is still waiting in the
// outbox, it is marked to be queued again (Requeued), so that a producer
// republishing after a Redis failure gets its event delivered. ev must be
// valid (event.Event.Validate); now is the time recorded with it.
//
// Add never aborts the caller's transaction on a repeated ID: the
// idempotency record is written with ON CONFLICT DO NOTHING.
func Add(ctx context.Context, tx *gorm.DB, ev event.Event, now time.Time) (Outcome, error) {
	if err := ev.Validate(); err != nil {
		return Repeated, err
	}
	payload, err := event.Encode(ev)
	if err != nil {
		return Repeated, err
	}
	now = now.UTC().Truncate(time.Microsecond)
	tenant := models.TenantOr(ev.Tenant)
	if err := usable(ctx, tx, tenant); err != nil {
		return Repeated, err
	}
	// Served by published_events' primary key (tenant, event_id). Only
	// homing serve's writes carry an accept_id (Writer): a producer built
	// with this version still publishes into a database not migrated to it.
	res := tx.WithContext(ctx).Clauses(clause.OnConflict{DoNothing: true}).Omit("accept_id").
		Create(&models.PublishedEvent{Tenant: tenant, EventID: ev.ID, CreatedAt: now})
	if res.Error != nil {
		return Repeated, fmt.Errorf("record event %s in the outbox: %w", ev.ID, res.Error)
	}
	if res.RowsAffected == 0 {
		// Served by outbox_events_event (event_id).
		res := tx.WithContext(ctx).Model(&models.OutboxEvent{}).Where("event_id = ? AND tenant = ?", ev.ID, tenant).Update("queued_at", nil)
		if res.Error != nil {
			return Repeated, fmt.Errorf("queue event %s again: %w", ev.ID, res.Error)
		}
		if res.RowsAffected > 0 {
			return Requeued, nil
		}
		return Repeated, nil
	}
	row := &models.OutboxEvent{Tenant: tenant, EventID: ev.ID, Payload: string(payload), CreatedAt: now, TraceContext: stored(ev.TraceContext),
		DocType: &ev.DocType, DocName: &ev.DocName, DocEvent: &ev.Event}
	q := tx.WithContext(ctx)
	if row.TraceContext == nil {
		// A producer built with this version still publishes into a
		// database not migrated to it (0026) when it traces nothing.
		q = q.Omit("trace_context")
	}
	if err := q.Create(row).Error; err != nil {
		return Repeated, fmt.Errorf("write event %s to the outbox: %w", ev.ID, err)
	}
	return Added, nil
}

// stored is how a trace context is written: NULL when there is none.
func stored(c string) *string {
	if c == "" {
		return nil
	}
	p := new(string) // allocated only here: an untraced event pays nothing
	*p = c
	return p
}
