package outbox

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/homingdev/homing/internal/groupcommit"
	"github.com/homingdev/homing/models"
)

// Completer releases outbox rows once their events are fanned out (the
// worker's tasks.Intake). Concurrent fan-outs share one DELETE (group).
type Completer struct {
	g *groupcommit.Group[string, struct{}]
}

// groupTimeout bounds one grouped statement of the outbox: it carries
// other callers' inputs too, so it does not follow any one caller's context.
const groupTimeout = 30 * time.Second

// NewCompleter builds a Completer over db's outbox.
func NewCompleter(db *gorm.DB) *Completer {
	return &Completer{g: groupcommit.New(func(ctx context.Context, ids []string) ([]struct{}, error) {
		// Served by outbox_events_event (event_id).
		if err := db.WithContext(ctx).Where("event_id IN ?", ids).Delete(&models.OutboxEvent{}).Error; err != nil {
			return nil, fmt.Errorf("release %d fanned-out events from the outbox: %w", len(ids), err)
		}
		return make([]struct{}, len(ids)), nil
	}, 1000, 1, groupTimeout)}
}

// FannedOut deletes the outbox row of eventID, whose deliveries are
// committed; an event without a row (published with client.Publish, or
// released before) is no error.
func (c *Completer) FannedOut(ctx context.Context, eventID string) error {
	_, err := c.g.Do(ctx, eventID)
	return err
}
