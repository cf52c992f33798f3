package outbox

import (
	"context"
	"time"

	"gorm.io/gorm"

	"github.com/homingdev/homing/dispatch"
)

// Writer adds events to the outbox for homing serve: concurrent requests
// share one transaction and its commit (group commit), which is most of
// what a one-event transaction costs PostgreSQL (the WAL flush). Each event
// is still written by Add, so a repeated ID (even twice in one batch) gets
// the same Outcome as alone.
type Writer struct {
	g *group[writeIn, Outcome]
}

type writeIn struct {
	ev  dispatch.Event
	now time.Time
}

// writerBatch bounds one transaction: a few hundred events of up to
// delivery.max_payload_bytes each.
const writerBatch = 200

// NewWriter builds a Writer over db's outbox.
func NewWriter(db *gorm.DB) *Writer {
	return &Writer{g: &group[writeIn, Outcome]{maxBatch: writerBatch, run: func(ctx context.Context, ins []writeIn) ([]Outcome, error) {
		outs := make([]Outcome, len(ins))
		err := db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
			for i, in := range ins {
				var err error
				if outs[i], err = Add(ctx, tx, in.ev, in.now); err != nil {
					return err
				}
			}
			return nil
		})
		return outs, err
	}}}
}

// Add is Add in a transaction of its own, shared with concurrent callers.
// An invalid event is refused before it joins one.
func (w *Writer) Add(ctx context.Context, ev dispatch.Event, now time.Time) (Outcome, error) {
	if err := ev.Validate(); err != nil {
		return Repeated, err
	}
	return w.g.do(ctx, writeIn{ev: ev, now: now})
}
