package sweeper_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/homingdev/homing/internal/engine/sweeper"
	"github.com/homingdev/homing/internal/testing/testenv"
	"github.com/homingdev/homing/models"
	"github.com/homingdev/homing/tasks"
)

// markedWithoutTask lists the rows marked queued that have no retry task in
// asynq: each would wait out the mark's lease (a minute) before a step
// takes it again.
func (b *bed) markedWithoutTask() []string {
	b.t.Helper()
	var marked []string
	if err := b.db.Model(&models.Delivery{}).Where("queued_at IS NOT NULL").Pluck("id", &marked).Error; err != nil {
		b.t.Fatal(err)
	}
	queued := b.queued()
	var lost []string
	for _, id := range marked {
		if !queued[id] {
			lost = append(lost, id)
		}
	}
	return lost
}

// The drain stall of issue 27: a tick's budget that ends while the step's
// mark (UPDATE … SET queued_at) is on its way must not leave rows marked
// with no retry task. pgx answers a context that ends by closing the
// connection, not by cancelling the statement, so the UPDATE still commits
// on the server while the step sees an error: before the fix the step then
// queued nothing and handed nothing back, and the batch (500 rows in the
// outage scenario) waited out the one-minute lease. Here a lock held on
// one row keeps the UPDATE waiting until the budget has ended.
func TestBudgetEndingDuringTheMarkLeavesNoRowMarkedWithoutATask(t *testing.T) {
	t.Parallel()
	b := newBed(t, testenv.Postgres, sweeper.Config{BatchSize: 50, Interval: time.Second})
	b.webhook("a", 0)
	ids := b.due("a", 5, t0.Add(-time.Minute))
	lock := b.db.Begin()
	t.Cleanup(func() { lock.Rollback() })
	if err := lock.Exec("SELECT id FROM deliveries WHERE id = ? FOR UPDATE", ids[0]).Error; err != nil {
		t.Fatal(err)
	}
	// The budget ends when the mark is seen waiting on the lock: an event,
	// not a 300 ms guess that a loaded machine could pass before the mark
	// was even sent. (pgx answers a cancelled context as it answers one
	// past its deadline: by closing the connection.)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := b.s.RunOnce(ctx)
		done <- err
	}()
	// marks is how many of the step's marks the server is running in the
	// state cond says.
	marks := func(cond string) int64 {
		var n int64
		if err := b.db.Raw(`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
			AND ` + cond + ` AND query LIKE 'UPDATE "deliveries" SET "queued_at"%'`).Scan(&n).Error; err != nil {
			t.Fatal(err)
		}
		return n
	}
	// The event is the mark waiting, or else the step ending without it,
	// which fails the test at once, saying why.
	var (
		stepErr   error
		stepEnded bool
	)
	testenv.Eventually(t, "the step's mark waiting on the lock", func() bool {
		select {
		case stepErr = <-done:
			stepEnded = true
			return true
		default:
			return marks("wait_event_type = 'Lock'") == 1
		}
	})
	if stepEnded {
		t.Fatalf("the step ended before its mark was seen waiting on the lock: %v", stepErr)
	}
	cancel() // the budget ends while the mark waits
	if err := lock.Commit().Error; err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Logf("step: %v", err)
	}
	// The mark may commit after the step returned (its connection was
	// closed, not its statement cancelled): wait for the server to finish it.
	testenv.Eventually(t, "the mark's statement to end", func() bool { return marks("state = 'active'") == 0 })
	if lost := b.markedWithoutTask(); len(lost) > 0 {
		t.Fatalf("%d of %d rows marked queued with no retry task (each waits out the lease): %v", len(lost), len(ids), lost)
	}
	// Whatever the step did, the next one leaves every row queued.
	b.step()
	if got := b.queued(); len(got) != len(ids) {
		t.Fatalf("%d retries in asynq after the next step, want %d", len(got), len(ids))
	}
}

// The other way a row could wait out the lease: its retry task is still
// active when the row is due again (the claim cleared the mark, then the
// attempt failed with a short retry.schedule, or its claim was refused
// while the webhook was failing and handed the row back, or its lease
// ended before the request). The step's enqueue then conflicts with that
// task, which will not claim the row again. Before the fix the step counted
// the row in hand and left it marked: no task ran it for a minute. Now it
// is handed back, and the step after the task ends queues it.
func TestRowDueAgainWhileItsTaskIsActiveIsQueuedOnceTheTaskEnds(t *testing.T) {
	t.Parallel()
	for name, open := range testenv.Backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := newBed(t, open, sweeper.Config{BatchSize: 50, Interval: time.Second})
			b.webhook("a", 0)
			ids := b.due("a", 1, t0.Add(-time.Minute))
			if res := b.step(); res.Enqueued != 1 {
				t.Fatalf("first step %+v", res)
			}
			handedBack, release := make(chan struct{}), make(chan struct{})
			var runs int
			var mu sync.Mutex
			srv := asynq.NewServer(b.opt, asynq.Config{Concurrency: 1, Queues: map[string]int{"default": 1}, LogLevel: asynq.FatalLevel})
			mux := asynq.NewServeMux()
			mux.HandleFunc(tasks.TypeRetry, func(ctx context.Context, t *asynq.Task) error {
				mu.Lock()
				runs++
				mu.Unlock()
				// What a claim and a failed attempt leave: the mark cleared,
				// the row due again at once.
				if err := b.db.Model(&models.Delivery{}).Where("id = ?", ids[0]).
					Updates(map[string]any{"queued_at": nil, "next_retry": t0.Add(-time.Second)}).Error; err != nil {
					return err
				}
				close(handedBack)
				<-release
				return nil
			})
			if err := srv.Start(mux); err != nil {
				t.Fatal(err)
			}
			<-handedBack
			res := b.step()
			if res.Enqueued != 0 || res.Due != 1 {
				t.Fatalf("step while the task is active: %+v", res)
			}
			close(release)
			srv.Shutdown()
			testenv.Eventually(t, "the active task to end", func() bool {
				_, err := b.insp.GetTaskInfo("default", tasks.RetryTaskID(ids[0]))
				return errors.Is(err, asynq.ErrTaskNotFound)
			})
			if res := b.step(); res.Enqueued != 1 {
				t.Fatalf("step after the task ended: %+v; the row waits out its mark's lease", res)
			}
			if got := b.queued(); !got[ids[0]] {
				t.Fatalf("retry not in asynq: %v", got)
			}
			mu.Lock()
			defer mu.Unlock()
			if runs != 1 {
				t.Fatalf("the task ran %d times, want 1", runs)
			}
		})
	}
}

// A retry that comes due while a tick runs is taken by that tick, not left
// to the next one up to sweeper.interval later: with a retry.schedule of
// 100ms (the failing-receiver benchmark) every round of retries waited for
// the next tick. The tick that finds nothing due yet sleeps, on its clock,
// exactly until the retry comes due (300 ms in), and takes it then; a row
// of a failing webhook is not waited for (its probe is), and a row due
// after the tick is not.
func TestTickTakesARetryThatComesDueWithinIt(t *testing.T) {
	t.Parallel()
	for name, open := range testenv.Backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := newBed(t, open, sweeper.Config{Interval: 3 * time.Second})
			b.webhook("a", 0)
			b.webhook("failing", 0)
			b.setHealth("failing", models.FailingAfter)
			ids := b.due("a", 1, t0.Add(300*time.Millisecond))
			failing := b.due("failing", 1, t0.Add(100*time.Millisecond)) // waits for its probe, not for the tick
			later := b.due("a", 1, t0.Add(time.Hour))                    // after the tick: not waited for
			run := b.startTick(b.s)
			if !run.sleeping() {
				t.Fatalf("tick ended (%+v) with a retry coming due within it", run.res)
			}
			if at, _ := b.clock.NextWake(); !at.Equal(t0.Add(300*time.Millisecond)) || len(b.queued()) != 0 {
				t.Fatalf("tick sleeps until +%s having queued %v, want until +300ms, nothing queued yet", at.Sub(t0), b.queued())
			}
			b.clock.Advance(300 * time.Millisecond)
			// Now due: a's row, and the failing webhook's first probe. The
			// tick then stays, probing, until its budget ends.
			if !run.sleeping() {
				t.Fatalf("tick ended (%+v) while probing, want it to stay to its budget's end", run.res)
			}
			if got := b.queued(); len(got) != 2 || !got[ids[0]] || !got[failing[0]] || got[later[0]] {
				t.Fatalf("queued %v after +300ms, want %s (due then) and %s (the probe)", got, ids[0], failing[0])
			}
			b.clock.Advance(b.s.TickBudget())
			if res := run.result(t); res.Enqueued != 2 || res.Probes != 1 || res.Steps != 2 {
				t.Fatalf("tick %+v, want 2 queued (one a probe) in 2 steps", res)
			}
		})
	}
}
