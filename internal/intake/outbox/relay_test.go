package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"gorm.io/gorm"

	"github.com/homingdev/homing/client"
	"github.com/homingdev/homing/internal/intake/event"
	"github.com/homingdev/homing/internal/intake/outbox"
	"github.com/homingdev/homing/internal/intake/store"
	"github.com/homingdev/homing/internal/testing/testenv"
	"github.com/homingdev/homing/tasks"
)

// queue is a private Redis DB with a client to enqueue and an inspector to
// see what was queued.
type queue struct {
	client *asynq.Client
	insp   *asynq.Inspector
}

func newQueue(t *testing.T) queue {
	t.Helper()
	opt, _ := testenv.Redis(t)
	q := queue{client: asynq.NewClient(opt), insp: asynq.NewInspector(opt)}
	t.Cleanup(func() {
		_ = q.client.Close()
		_ = q.insp.Close()
	})
	return q
}

// pending returns the webhook:event tasks waiting in the default queue, by
// task ID.
func (q queue) pending(t *testing.T) map[string]*asynq.TaskInfo {
	t.Helper()
	out := map[string]*asynq.TaskInfo{}
	for page := 1; ; page++ {
		infos, err := q.insp.ListPendingTasks(tasks.DefaultQueue, asynq.PageSize(1000), asynq.Page(page))
		if err != nil && !errors.Is(err, asynq.ErrQueueNotFound) {
			t.Fatal(err)
		}
		for _, info := range infos {
			if info.Type != tasks.TypeEvent {
				t.Errorf("task %s has type %s, want %s", info.ID, info.Type, tasks.TypeEvent)
			}
			out[info.ID] = info
		}
		if len(infos) < 1000 {
			return out
		}
	}
}

func publishTx(t *testing.T, db *gorm.DB, ids ...string) {
	t.Helper()
	err := db.Transaction(func(tx *gorm.DB) error {
		for _, id := range ids {
			if _, err := client.PublishTx(context.Background(), tx, client.Event{
				ID: id, DocType: "Sales Order", DocName: "SO-1", Event: "on_submit", Doc: map[string]any{"name": "SO-1"},
			}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("publish in a transaction: %v", err)
	}
}

// TestRelayMovesCommittedEvents: each committed event becomes one
// webhook:event task with TaskID webhook_event::<id> and its payload as
// published, and is marked queued; its row stays until it is fanned out.
func TestRelayMovesCommittedEvents(t *testing.T) {
	t.Parallel()
	for name, open := range testenv.Backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := open(t)
			q := newQueue(t)
			ids := make([]string, 25)
			for i := range ids {
				ids[i] = fmt.Sprintf("ev-%02d", i)
			}
			publishTx(t, db, ids...)
			relay := outbox.NewRelay(db, q.client, outbox.RelayConfig{BatchSize: 10})
			n, err := relay.RunOnce(context.Background())
			if err != nil || n != 10 {
				t.Fatalf("RunOnce = %d, %v; want one batch of 10", n, err)
			}
			if n, err := relay.Drain(context.Background()); err != nil || n != 15 {
				t.Fatalf("Drain = %d, %v; want the other 15", n, err)
			}
			if rows := unqueued(t, db); len(rows) != 0 {
				t.Fatalf("%d rows left unqueued after a drain", len(rows))
			}
			if rows := outboxRows(t, db); len(rows) != len(ids) {
				t.Fatalf("%d rows in the outbox after a drain, want all %d until they are fanned out", len(rows), len(ids))
			}
			got := q.pending(t)
			if len(got) != len(ids) {
				t.Fatalf("%d tasks queued, want %d", len(got), len(ids))
			}
			for _, id := range ids {
				info, ok := got[event.TaskID("", id)]
				if !ok {
					t.Fatalf("no task %s", event.TaskID("", id))
				}
				ev, err := event.Decode(info.Payload)
				if err != nil || ev.ID != id || ev.Doc["name"] != "SO-1" {
					t.Fatalf("task %s payload decodes to %+v, %v", info.ID, ev, err)
				}
			}
			if n, err := relay.RunOnce(context.Background()); err != nil || n != 0 {
				t.Fatalf("RunOnce on an empty outbox = %d, %v", n, err)
			}
		})
	}
}

// TestRelayKilledBetweenEnqueueAndDelete: a relay that dies after its
// enqueue leaves the rows unqueued; the next run finds the tasks already
// queued and only marks the rows, so each event is queued once.
func TestRelayKilledBetweenEnqueueAndDelete(t *testing.T) {
	t.Parallel()
	for name, open := range testenv.Backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := open(t)
			q := newQueue(t)
			publishTx(t, db, "ev-a", "ev-b", "ev-c")
			killed := errors.New("relay killed")
			dying := outbox.NewRelay(db, q.client, outbox.RelayConfig{})
			outbox.SetAfterEnqueue(dying, func() error { return killed })
			if _, err := dying.RunOnce(context.Background()); !errors.Is(err, killed) {
				t.Fatalf("RunOnce of the dying relay = %v, want it killed", err)
			}
			if rows := unqueued(t, db); len(rows) != 3 {
				t.Fatalf("after the kill the outbox holds %d unqueued rows, want all 3", len(rows))
			}
			if got := q.pending(t); len(got) != 3 {
				t.Fatalf("after the kill %d tasks are queued, want 3", len(got))
			}
			n, err := outbox.NewRelay(db, q.client, outbox.RelayConfig{}).RunOnce(context.Background())
			if err != nil || n != 3 {
				t.Fatalf("the next relay's RunOnce = %d, %v; want 3 rows marked queued", n, err)
			}
			if got := q.pending(t); len(got) != 3 {
				t.Fatalf("after the next run %d tasks are queued, want still 3", len(got))
			}
			if rows := unqueued(t, db); len(rows) != 0 {
				t.Fatalf("%d rows left unqueued", len(rows))
			}
		})
	}
}

// TestRelayKeepsWhatRedisRefused: when Redis cannot be reached nothing is
// marked queued, and a later run moves everything.
func TestRelayKeepsWhatRedisRefused(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	publishTx(t, db, "ev-1", "ev-2")
	down := asynq.NewClient(asynq.RedisClientOpt{Addr: "127.0.0.1:1", DialTimeout: time.Second})
	t.Cleanup(func() { _ = down.Close() })
	n, err := outbox.NewRelay(db, down, outbox.RelayConfig{}).RunOnce(context.Background())
	if err == nil || n != 0 {
		t.Fatalf("RunOnce with Redis down = %d, %v; want an error and nothing moved", n, err)
	}
	if rows := unqueued(t, db); len(rows) != 2 {
		t.Fatalf("the outbox holds %d unqueued rows after a failed relay, want 2", len(rows))
	}
	q := newQueue(t)
	if n, err := outbox.NewRelay(db, q.client, outbox.RelayConfig{}).Drain(context.Background()); err != nil || n != 2 {
		t.Fatalf("Drain with Redis back = %d, %v", n, err)
	}
	if got := q.pending(t); len(got) != 2 {
		t.Fatalf("%d tasks queued, want 2", len(got))
	}
}

// TestRelaysShareTheWork: relays draining at once (scheduler, homing serve
// and a starting worker) move every event once between them.
func TestRelaysShareTheWork(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	q := newQueue(t)
	const events = 600
	ids := make([]string, events)
	for i := range ids {
		ids[i] = fmt.Sprintf("ev-%03d", i)
	}
	publishTx(t, db, ids...)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		moved int
	)
	for range 4 {
		wg.Go(func() {
			n, err := outbox.NewRelay(db, q.client, outbox.RelayConfig{BatchSize: 25}).Drain(context.Background())
			if err != nil {
				t.Errorf("Drain: %v", err)
			}
			mu.Lock()
			moved += n
			mu.Unlock()
		})
	}
	wg.Wait()
	if moved != events {
		t.Fatalf("the relays deleted %d rows between them, want %d (each once)", moved, events)
	}
	if got := q.pending(t); len(got) != events {
		t.Fatalf("%d tasks queued, want %d", len(got), events)
	}
}

// waitPending waits until n event tasks are queued.
func waitPending(t *testing.T, q queue, n int, what string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for len(q.pending(t)) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d of %d tasks queued after 20s", what, len(q.pending(t)), n)
		}
		time.Sleep(10 * time.Millisecond) // polling Redis with a deadline
	}
}

// listenerPID waits until the relay's LISTEN connection is in place on db's
// database and returns its backend PID.
func listenerPID(t *testing.T, db *gorm.DB) int {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var pids []int
		if err := db.Raw(`SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND query = ?`,
			"LISTEN "+outbox.Channel).Scan(&pids).Error; err != nil {
			t.Fatal(err)
		}
		if len(pids) == 1 {
			return pids[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d LISTEN connections after 20s, want 1", len(pids))
		}
		time.Sleep(10 * time.Millisecond) // polling PostgreSQL with a deadline
	}
}

// TestRelayWakesOnNotify: on PostgreSQL a commit reaches the queue through
// NOTIFY, long before the (here one hour) poll would find it, also after
// the LISTEN connection was cut and came back.
func TestRelayWakesOnNotify(t *testing.T) {
	t.Parallel()
	dsn := testenv.PostgresDSN(t)
	db, err := store.Open(dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close(db) })
	q := newQueue(t)
	relay := outbox.NewRelay(db, q.client, outbox.RelayConfig{PollInterval: time.Hour, ListenURL: dsn})
	if err := relay.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = relay.Stop(context.Background()) })
	pid := listenerPID(t, db)
	for i := range 3 {
		publishTx(t, db, fmt.Sprintf("ev-%d", i))
		waitPending(t, q, i+1, "an event committed while the relay listens")
	}
	if err := db.Exec("SELECT pg_terminate_backend(?)", pid).Error; err != nil {
		t.Fatal(err)
	}
	for listenerPID(t, db) == pid {
		time.Sleep(10 * time.Millisecond) // waiting for the old backend to go, with listenerPID's deadline
	}
	publishTx(t, db, "ev-after-reconnect")
	waitPending(t, q, 4, "an event committed after the LISTEN connection came back")
	_ = relay.Stop(context.Background())
	_ = relay.Stop(context.Background()) // a second Stop is harmless
}

// TestRelayPollsOnSQLite: without NOTIFY, the poll finds committed events.
func TestRelayPollsOnSQLite(t *testing.T) {
	t.Parallel()
	db := testenv.SQLite(t)
	q := newQueue(t)
	relay := outbox.NewRelay(db, q.client, outbox.RelayConfig{PollInterval: 20 * time.Millisecond})
	if err := relay.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = relay.Stop(context.Background()) })
	if err := relay.Start(context.Background()); err == nil {
		t.Fatal("a second Start succeeded")
	}
	publishTx(t, db, "ev-1", "ev-2")
	waitPending(t, q, 2, "events committed on SQLite")
}
