package outbox_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/homingdev/homing/internal/engine/dispatch"
	"github.com/homingdev/homing/internal/intake/event"
	"github.com/homingdev/homing/internal/intake/outbox"
	"github.com/homingdev/homing/internal/ops/inspect"
	"github.com/homingdev/homing/internal/testing/testenv"
	"github.com/homingdev/homing/models"
)

var t0 = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

func sampleEvent(id string) dispatch.Event {
	return dispatch.Event{ID: id, DocType: "Sales Order", DocName: "SO-1", Event: "on_submit", Doc: map[string]any{"name": "SO-1", "grand_total": int64(1500)}}
}

func outboxRows(t *testing.T, db *gorm.DB) []models.OutboxEvent {
	t.Helper()
	var rows []models.OutboxEvent
	if err := db.Order("id").Find(&rows).Error; err != nil {
		t.Fatal(err)
	}
	return rows
}

// unqueued returns the outbox rows no relay has queued yet.
func unqueued(t *testing.T, db *gorm.DB) []models.OutboxEvent {
	t.Helper()
	var rows []models.OutboxEvent
	if err := db.Where("queued_at IS NULL").Order("id").Find(&rows).Error; err != nil {
		t.Fatal(err)
	}
	return rows
}

// TestAddFollowsTheTransaction: the event exists if and only if the caller's
// transaction commits, and an ID is accepted once.
func TestAddFollowsTheTransaction(t *testing.T) {
	t.Parallel()
	for name, open := range testenv.Backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := open(t)
			ctx := context.Background()
			rollback := errors.New("business write failed")
			err := db.Transaction(func(tx *gorm.DB) error {
				if got, err := outbox.Add(ctx, tx, sampleEvent("ev-rolled-back"), t0); err != nil || got != outbox.Added {
					t.Fatalf("Add in a transaction = %v, %v", got, err)
				}
				return rollback
			})
			if !errors.Is(err, rollback) {
				t.Fatalf("transaction = %v", err)
			}
			if rows := outboxRows(t, db); len(rows) != 0 {
				t.Fatalf("a rolled-back transaction left %d outbox rows", len(rows))
			}

			err = db.Transaction(func(tx *gorm.DB) error {
				got, err := outbox.Add(ctx, tx, sampleEvent("ev-1"), t0)
				if err != nil || got != outbox.Added {
					t.Fatalf("Add = %v, %v", got, err)
				}
				// A repeat in the same transaction is recognised and does not
				// abort it; the event is not fanned out yet, so it is
				// (still) to be queued.
				got, err = outbox.Add(ctx, tx, sampleEvent("ev-1"), t0)
				if err != nil || got != outbox.Requeued {
					t.Fatalf("second Add of ev-1 = %v, %v; want Requeued, nil", got, err)
				}
				return tx.Exec("SELECT 1").Error
			})
			if err != nil {
				t.Fatal(err)
			}
			got, err := outbox.Add(ctx, db, sampleEvent("ev-1"), t0)
			if err != nil || got != outbox.Requeued {
				t.Fatalf("Add of ev-1 after commit, before its fan-out = %v, %v; want Requeued, nil", got, err)
			}
			rows := outboxRows(t, db)
			if len(rows) != 1 || rows[0].EventID != "ev-1" || !rows[0].CreatedAt.Equal(t0) {
				t.Fatalf("outbox rows = %+v, want one for ev-1 at %s", rows, t0)
			}
			ev, err := event.Decode([]byte(rows[0].Payload))
			if err != nil {
				t.Fatalf("stored payload does not decode as a webhook:event task: %v", err)
			}
			if ev.ID != "ev-1" || ev.DocName != "SO-1" || ev.Doc["grand_total"] != int64(1500) {
				t.Fatalf("stored payload decodes to %+v", ev)
			}
		})
	}
}

func TestAddRefusesAnInvalidEvent(t *testing.T) {
	t.Parallel()
	db := testenv.SQLite(t)
	ev := sampleEvent("ev-bad")
	ev.Event = "on_explode"
	_, err := outbox.Add(context.Background(), db, ev, t0)
	if !errors.Is(err, event.ErrInvalidEvent) {
		t.Fatalf("Add of an unknown event = %v, want ErrInvalidEvent", err)
	}
	if rows := outboxRows(t, db); len(rows) != 0 {
		t.Fatalf("an invalid event left %d outbox rows", len(rows))
	}
}

// TestStatsShowTheOutboxBacklog: homing stats tells how many committed
// events wait for a relay, and since when.
func TestStatsShowTheOutboxBacklog(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	ctx := context.Background()
	st, err := inspect.ComputeStats(ctx, db, t0)
	if err != nil || st.OutboxPending != 0 || st.OutboxOldest != nil {
		t.Fatalf("stats of an empty outbox: %d pending, oldest %v, %v", st.OutboxPending, st.OutboxOldest, err)
	}
	for i, id := range []string{"ev-1", "ev-2", "ev-3"} {
		if _, err := outbox.Add(ctx, db, sampleEvent(id), t0.Add(time.Duration(i)*time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	st, err = inspect.ComputeStats(ctx, db, t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if st.OutboxPending != 3 || st.OutboxOldest == nil || !st.OutboxOldest.Equal(t0) {
		t.Fatalf("stats: %d pending, oldest %v; want 3 since %s", st.OutboxPending, st.OutboxOldest, t0)
	}
}
