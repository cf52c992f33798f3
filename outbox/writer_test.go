package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/homingdev/homing/event"
	"github.com/homingdev/homing/internal/testenv"
	"github.com/homingdev/homing/models"
	"github.com/homingdev/homing/outbox"
)

// TestWriterGroupsConcurrentAdds: many concurrent adds, some repeating one
// ID, share transactions and get exactly what Add alone would answer: each
// new ID Added once, its repeats Requeued (not fanned out yet); an invalid
// event fails alone.
func TestWriterGroupsConcurrentAdds(t *testing.T) {
	t.Parallel()
	for name, open := range testenv.Backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := open(t)
			w := outbox.NewWriter(db)
			const ids, repeats = 100, 3
			var (
				wg      sync.WaitGroup
				mu      sync.Mutex
				counts  = map[outbox.Outcome]int{}
				invalid error
			)
			for i := range ids * repeats {
				wg.Go(func() {
					got, err := w.AddJSON(context.Background(), sampleEvent(fmt.Sprintf("ev-%03d", i%ids)), []byte(`{"name": "SO-1", "grand_total": 1500}`), t0)
					mu.Lock()
					defer mu.Unlock()
					if err != nil {
						t.Errorf("Add: %v", err)
					}
					counts[got]++
				})
			}
			wg.Go(func() {
				bad := sampleEvent("ev-bad")
				bad.DocName = "SO\x00-1"
				_, err := w.AddJSON(context.Background(), bad, []byte(`{}`), t0)
				mu.Lock()
				invalid = err
				mu.Unlock()
			})
			wg.Wait()
			if counts[outbox.Added] != ids || counts[outbox.Requeued] != ids*(repeats-1) || counts[outbox.Repeated] != 0 {
				t.Errorf("outcomes %v, want %d Added and %d Requeued", counts, ids, ids*(repeats-1))
			}
			if !errors.Is(invalid, event.ErrInvalidEvent) {
				t.Errorf("an event with a NUL: %v, want ErrInvalidEvent", invalid)
			}
			rows := outboxRows(t, db)
			if len(rows) != ids {
				t.Fatalf("%d outbox rows, want %d", len(rows), ids)
			}
			if ev, err := event.Decode([]byte(rows[0].Payload)); err != nil || ev.ID != rows[0].EventID || ev.Doc["grand_total"] != int64(1500) {
				t.Errorf("stored payload decodes to %+v, %v", ev, err)
			}
			// Once fanned out, a repeat is the original; before, it is queued again.
			if err := outbox.NewCompleter(db).FannedOut(context.Background(), "", "ev-001"); err != nil {
				t.Fatal(err)
			}
			// With another document, a repeat is a Conflict, and is not queued again.
			// ev-003 as if the relay had queued it: a requeue would clear queued_at.
			if err := db.Model(&models.OutboxEvent{}).Where("event_id = ?", "ev-003").Update("queued_at", t0).Error; err != nil {
				t.Fatal(err)
			}
			same, other := []byte(`{"name":"SO-1","grand_total":1500}`), []byte(`{}`)
			for _, tc := range []struct {
				id   string
				doc  []byte
				want outbox.Outcome
			}{
				{"ev-001", same, outbox.Repeated}, {"ev-002", same, outbox.Requeued}, {"ev-new", other, outbox.Added},
				{"ev-003", other, outbox.Conflict}, {"ev-001", other, outbox.Conflict},
			} {
				if got, err := w.AddJSON(context.Background(), sampleEvent(tc.id), tc.doc, t0); err != nil || got != tc.want {
					t.Errorf("AddJSON(%s, %s) = %v, %v; want %v", tc.id, tc.doc, got, err, tc.want)
				}
			}
			var queued int64
			if err := db.Model(&models.OutboxEvent{}).Where("event_id = ? AND queued_at IS NULL", "ev-003").Count(&queued).Error; err != nil {
				t.Fatal(err)
			}
			if queued != 0 {
				t.Error("a conflicting repeat of ev-003 queued it again")
			}
		})
	}
}
