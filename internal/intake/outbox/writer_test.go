package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/homingdev/homing/internal/intake/event"
	"github.com/homingdev/homing/internal/intake/outbox"
	"github.com/homingdev/homing/internal/testing/testenv"
	"github.com/homingdev/homing/models"
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
			w := outbox.NewWriter(db, outbox.WriterConfig{})
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

// TestWriterQueuesWhatItAdds: a Writer with a queue queues each new event's
// task itself after the commit and writes its row marked queued, so the
// relay has nothing to move and the task is queued once; a repeat queues
// nothing more.
func TestWriterQueuesWhatItAdds(t *testing.T) {
	t.Parallel()
	for name, open := range testenv.Backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := open(t)
			q := newQueue(t)
			w := outbox.NewWriter(db, outbox.WriterConfig{Queue: q.client})
			for _, id := range []string{"ev-1", "ev-2", "ev-1"} {
				if _, err := w.AddJSON(context.Background(), sampleEvent(id), []byte(`{"name": "SO-1"}`), t0); err != nil {
					t.Fatal(err)
				}
			}
			got := q.pending(t)
			for _, id := range []string{"ev-1", "ev-2"} {
				info, ok := got[event.TaskID("", id)]
				if !ok {
					t.Errorf("no task %s in Redis after AddJSON; have %v", event.TaskID("", id), keys(got))
					continue
				}
				if ev, err := event.Decode(info.Payload); err != nil || ev.ID != id {
					t.Errorf("task %s carries %+v, %v", info.ID, ev, err)
				}
				// Its place in the acceptance order is its outbox row's id,
				// and the row names its document (ordered delivery).
				var row models.OutboxEvent
				if err := db.Where("event_id = ?", id).Take(&row).Error; err != nil {
					t.Fatal(err)
				}
				if seq := event.AcceptSeq(info.Headers); seq != row.ID || row.DocName == nil || *row.DocName != sampleEvent(id).DocName {
					t.Errorf("task %s carries place %d, its outbox row has id %d and document %v", info.ID, seq, row.ID, row.DocName)
				}
			}
			if len(got) != 2 {
				t.Errorf("%d tasks queued, want 2", len(got))
			}
			// ev-1's repeat was not fanned out yet, so it is handed to the
			// relay again (Requeued), as without a queue; ev-2 is not.
			if rows := unqueued(t, db); len(rows) != 1 || rows[0].EventID != "ev-1" {
				t.Errorf("rows left to the relay: %+v, want only the repeated ev-1", rows)
			}
			n, err := outbox.NewRelay(db, q.client, outbox.RelayConfig{}).RunOnce(context.Background())
			if err != nil || n != 1 {
				t.Errorf("relay RunOnce = %d, %v; want the repeated ev-1 only", n, err)
			}
			if got := q.pending(t); len(got) != 2 {
				t.Errorf("%d tasks queued after the relay ran, want still 2 (TaskID)", len(got))
			}
		})
	}
}

// TestWriterHandsWhatItCannotQueueToTheRelay: when Redis refuses the
// Writer's enqueue, the event is accepted all the same and its row is left
// to the relay, which queues it once Redis answers.
func TestWriterHandsWhatItCannotQueueToTheRelay(t *testing.T) {
	t.Parallel()
	for name, open := range testenv.Backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := open(t)
			down := asynq.NewClient(asynq.RedisClientOpt{Addr: deadAddr(t), DialTimeout: 100 * time.Millisecond})
			t.Cleanup(func() { _ = down.Close() })
			w := outbox.NewWriter(db, outbox.WriterConfig{Queue: down})
			got, err := w.AddJSON(context.Background(), sampleEvent("ev-1"), []byte(`{"name": "SO-1"}`), t0)
			if err != nil || got != outbox.Added {
				t.Fatalf("AddJSON with Redis away = %v, %v; want Added (the outbox has it)", got, err)
			}
			if rows := unqueued(t, db); len(rows) != 1 || rows[0].EventID != "ev-1" {
				t.Fatalf("rows left to the relay: %+v, want ev-1", rows)
			}
			q := newQueue(t)
			if n, err := outbox.NewRelay(db, q.client, outbox.RelayConfig{}).RunOnce(context.Background()); err != nil || n != 1 {
				t.Fatalf("relay RunOnce = %d, %v; want 1", n, err)
			}
			if _, ok := q.pending(t)[event.TaskID("", "ev-1")]; !ok {
				t.Error("the relay did not queue the event the Writer could not")
			}
		})
	}
}

// deadAddr is a loopback address nothing listens on.
func deadAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
