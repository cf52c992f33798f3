// Package outbox is Homing's transactional outbox. A producer writes its
// event into the outbox_events table inside its own database transaction
// (Add), so the event exists if and only if the business write committed; a
// Relay moves committed rows into asynq as webhook:event tasks and deletes
// them once the enqueue succeeded.
//
// What can happen twice, and why it does no harm: a relay that dies between
// its enqueue and its delete leaves the row, which is enqueued again. While
// the first task is still queued the TaskID webhook_event::<event id>
// refuses the second; after it ran, the second fan-out finds the (event,
// webhook) unique key and creates no delivery. An event is therefore queued
// at least once and delivered once per webhook.
package outbox

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/homingdev/homing/dispatch"
	"github.com/homingdev/homing/models"
	"github.com/homingdev/homing/tasks"
)

// Channel is the PostgreSQL notification channel the outbox trigger
// signals on commit (store/migrations/postgres/0003_outbox.sql).
const Channel = "homing_outbox"

// Add writes ev into the outbox through tx, the caller's transaction (or a
// plain *gorm.DB for a write of its own). It reports false when ev.ID was
// published through the outbox before: the event is then not written again,
// and the caller should answer with the original. ev must be valid
// (dispatch.Event.Validate); now is the time recorded with it.
//
// Add never aborts the caller's transaction on a repeated ID: the
// idempotency record is written with ON CONFLICT DO NOTHING.
func Add(ctx context.Context, tx *gorm.DB, ev dispatch.Event, now time.Time) (bool, error) {
	if err := ev.Validate(); err != nil {
		return false, err
	}
	payload, err := tasks.EncodeEvent(ev)
	if err != nil {
		return false, err
	}
	now = now.UTC().Truncate(time.Microsecond)
	// Served by published_events' primary key.
	res := tx.WithContext(ctx).Clauses(clause.OnConflict{DoNothing: true}).
		Create(&models.PublishedEvent{EventID: ev.ID, CreatedAt: now})
	if res.Error != nil {
		return false, fmt.Errorf("record event %s in the outbox: %w", ev.ID, res.Error)
	}
	if res.RowsAffected == 0 {
		return false, nil
	}
	if err := tx.WithContext(ctx).Create(&models.OutboxEvent{EventID: ev.ID, Payload: string(payload), CreatedAt: now}).Error; err != nil {
		return false, fmt.Errorf("write event %s to the outbox: %w", ev.ID, err)
	}
	return true, nil
}
