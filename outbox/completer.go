package outbox

import (
	"context"
	"fmt"
	"sync"
	"time"

	"gorm.io/gorm"

	"github.com/homingdev/homing/models"
)

// completerBatch keeps one DELETE's parameters well under PostgreSQL's
// 65,535.
const completerBatch = 1000

// completerTimeout bounds one DELETE: it carries other callers' events too,
// so it does not follow any one caller's context.
const completerTimeout = 30 * time.Second

// Completer releases outbox rows once their events are fanned out (the
// worker's tasks.Intake). Concurrent fan-outs share one DELETE: group
// commit, as the dispatcher's hot path does. A caller that finds no DELETE
// in flight runs one at once with every event waiting then; events that
// arrive meanwhile wait for the next, which the first of them runs. A lone
// caller never waits for a timer, and batches grow with load.
type Completer struct {
	db *gorm.DB

	mu      sync.Mutex
	running bool
	pending []*completion
}

type completion struct {
	eventID string
	err     error
	// lead is set, before done is closed, when this caller is handed the
	// next DELETE instead of a result.
	lead bool
	done chan struct{}
}

// NewCompleter builds a Completer over db's outbox.
func NewCompleter(db *gorm.DB) *Completer { return &Completer{db: db} }

// FannedOut deletes the outbox row of eventID, whose deliveries are
// committed; an event without a row (published with client.Publish, or
// released before) is no error.
func (c *Completer) FannedOut(ctx context.Context, eventID string) error {
	me := &completion{eventID: eventID, done: make(chan struct{})}
	c.mu.Lock()
	if c.running {
		c.pending = append(c.pending, me)
		c.mu.Unlock()
		<-me.done
		if !me.lead {
			return me.err
		}
	} else {
		c.running = true
		c.mu.Unlock()
	}
	c.lead(ctx, me)
	return me.err
}

// lead runs one DELETE for first and what is pending, hands every caller
// its result, and passes the next DELETE to the oldest caller still
// waiting, or ends the run when none is.
func (c *Completer) lead(ctx context.Context, first *completion) {
	c.mu.Lock()
	n := min(len(c.pending), completerBatch-1)
	batch := append([]*completion{first}, c.pending[:n]...)
	c.pending = append(c.pending[:0], c.pending[n:]...)
	c.mu.Unlock()

	ids := make([]string, len(batch))
	for i, b := range batch {
		ids[i] = b.eventID
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), completerTimeout)
	// Served by outbox_events_event (event_id).
	err := c.db.WithContext(rctx).Where("event_id IN ?", ids).Delete(&models.OutboxEvent{}).Error
	cancel()
	if err != nil {
		err = fmt.Errorf("release %d fanned-out events from the outbox: %w", len(ids), err)
	}
	for _, b := range batch {
		b.err = err
	}
	for _, b := range batch[1:] {
		close(b.done)
	}

	c.mu.Lock()
	var next *completion
	if len(c.pending) > 0 {
		next = c.pending[0]
		c.pending = append(c.pending[:0], c.pending[1:]...)
		next.lead = true
	} else {
		c.running = false
	}
	c.mu.Unlock()
	if next != nil {
		close(next.done)
	}
}
