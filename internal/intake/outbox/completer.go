package outbox

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/homingdev/homing/internal/lib/groupcommit"
	"github.com/homingdev/homing/models"
)

// Completer releases outbox rows once their events are fanned out (the
// worker's tasks.Intake). Concurrent fan-outs share one DELETE (group).
type Completer struct {
	g *groupcommit.Group[eventKey, struct{}]
}

// groupTimeout bounds one grouped statement of the outbox: it carries
// other callers' inputs too, so it does not follow any one caller's context.
const groupTimeout = 30 * time.Second

// NewCompleter builds a Completer over db's outbox.
func NewCompleter(db *gorm.DB) *Completer {
	return &Completer{g: groupcommit.New(func(ctx context.Context, ids []eventKey) ([]struct{}, error) {
		// Served by outbox_events_event (event_id).
		if err := db.WithContext(ctx).Where("(tenant, event_id) IN ?", tuples(ids)).Delete(&models.OutboxEvent{}).Error; err != nil {
			return nil, fmt.Errorf("release %d fanned-out events from the outbox: %w", len(ids), err)
		}
		return make([]struct{}, len(ids)), nil
	}, 1000, 1, groupTimeout)}
}

// FannedOut deletes the outbox row of tenant's eventID, whose deliveries
// are committed; an event without a row (published with client.Publish, or
// released before) is no error.
func (c *Completer) FannedOut(ctx context.Context, tenant, eventID string) error {
	_, err := c.g.Do(ctx, eventKey{models.TenantOr(tenant), eventID})
	return err
}

// eventKey is what names an event: its ID is unique within its tenant.
type eventKey struct{ tenant, id string }

// tuples is keys as GORM expands them after "(tenant, event_id) IN ?".
func tuples(keys []eventKey) [][]any {
	out := make([][]any, len(keys))
	for i, k := range keys {
		out[i] = []any{k.tenant, k.id}
	}
	return out
}
