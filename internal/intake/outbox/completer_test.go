package outbox_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/homingdev/homing/internal/intake/outbox"
	"github.com/homingdev/homing/internal/testing/testenv"
)

// TestCompleterReleasesEveryFannedOutEvent: concurrent fan-outs share
// DELETEs, and each releases exactly its own event; an event without a row
// (client.Publish) is no error.
func TestCompleterReleasesEveryFannedOutEvent(t *testing.T) {
	t.Parallel()
	for name, open := range testenv.Backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := open(t)
			const events = 300
			ids := make([]string, events)
			for i := range ids {
				ids[i] = fmt.Sprintf("ev-%03d", i)
			}
			publishTx(t, db, ids...)
			c := outbox.NewCompleter(db)
			var wg sync.WaitGroup
			for _, id := range ids[:events-50] {
				wg.Go(func() {
					if err := c.FannedOut(context.Background(), "", id); err != nil {
						t.Errorf("FannedOut(%s): %v", id, err)
					}
				})
			}
			wg.Go(func() {
				if err := c.FannedOut(context.Background(), "", "published-without-the-outbox"); err != nil {
					t.Errorf("FannedOut of an event without a row: %v", err)
				}
			})
			wg.Wait()
			rows := outboxRows(t, db)
			if len(rows) != 50 {
				t.Fatalf("%d rows left, want the 50 not fanned out", len(rows))
			}
			for i, r := range rows {
				if r.EventID != ids[events-50+i] {
					t.Fatalf("row %d is %s, want %s", i, r.EventID, ids[events-50+i])
				}
			}
		})
	}
}
