package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/homingdev/homing/dispatch"
	"github.com/homingdev/homing/internal/testenv"
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
					got, err := w.Add(context.Background(), event(fmt.Sprintf("ev-%03d", i%ids)), t0)
					mu.Lock()
					defer mu.Unlock()
					if err != nil {
						t.Errorf("Add: %v", err)
					}
					counts[got]++
				})
			}
			wg.Go(func() {
				bad := event("ev-bad")
				bad.DocName = "SO\x00-1"
				_, err := w.Add(context.Background(), bad, t0)
				mu.Lock()
				invalid = err
				mu.Unlock()
			})
			wg.Wait()
			if counts[outbox.Added] != ids || counts[outbox.Requeued] != ids*(repeats-1) || counts[outbox.Repeated] != 0 {
				t.Errorf("outcomes %v, want %d Added and %d Requeued", counts, ids, ids*(repeats-1))
			}
			if !errors.Is(invalid, dispatch.ErrInvalidEvent) {
				t.Errorf("an event with a NUL: %v, want ErrInvalidEvent", invalid)
			}
			if rows := outboxRows(t, db); len(rows) != ids {
				t.Errorf("%d outbox rows, want %d", len(rows), ids)
			}
		})
	}
}
