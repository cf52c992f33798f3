package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/homingdev/homing/internal/intake/event"
	"github.com/homingdev/homing/internal/intake/outbox"
	"github.com/homingdev/homing/internal/lib/clock"
	"github.com/homingdev/homing/internal/testing/testenv"
	"github.com/homingdev/homing/tasks"
)

// startRelay starts a relay as homing serve and the scheduler each run
// one, with intervals scaled down for a test, and stops it at cleanup.
func startRelay(t *testing.T, s *system, queue *asynq.Client, recoverAfter time.Duration) *outbox.Relay {
	t.Helper()
	r := outbox.NewRelay(s.app.DB, queue, outbox.RelayConfig{
		PollInterval: 20 * time.Millisecond,
		RecoverAfter: recoverAfter,
		Inspector:    s.insp,
	})
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Stop(context.Background()) })
	return r
}

// TestTwoRelaysRecoverAFlushedRedisOnce: events accepted while no worker
// ran are lost from Redis (FLUSHDB), then a worker starts while two relays
// (homing serve's and the scheduler's) look for lost tasks. Nothing was in
// flight when Redis lost its data, so the receiver gets each delivery
// exactly once.
func TestTwoRelaysRecoverAFlushedRedisOnce(t *testing.T) {
	t.Parallel()
	s := newSystem(t)
	ctx := context.Background()
	queue := asynq.NewClient(s.app.Redis)
	t.Cleanup(func() { _ = queue.Close() })
	const events = 300
	ids := make([]string, events)
	for i := range ids {
		ids[i] = fmt.Sprintf("flushed-%03d", i)
	}
	publishTx(t, s.app.DB, ids...)
	if n, err := outbox.NewRelay(s.app.DB, queue, outbox.RelayConfig{}).Drain(ctx); err != nil || n != events {
		t.Fatalf("Drain = %d, %v; want %d", n, err, events)
	}
	if err := s.rdb.FlushDB(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	s.startWorker(t)
	startRelay(t, s, queue, 200*time.Millisecond)
	startRelay(t, s, queue, 200*time.Millisecond)
	for _, id := range ids {
		s.waitDelivered(t, id)
	}
	for _, id := range ids {
		s.assertOncePerWebhook(t, id)
	}
	if n := s.recv.Count(); n != 2*events {
		t.Fatalf("the receiver got %d requests, want %d", n, 2*events)
	}
}

// TestRecoverRequeuesAnArchivedEventOnce: an event task archived before its
// fan-out (from the monitor, or by asynq after its retries) holds its
// TaskID, so queueing it again used to be refused for ever. The relay
// deletes the archived task and queues the event afresh, and the event is
// delivered exactly once per webhook.
func TestRecoverRequeuesAnArchivedEventOnce(t *testing.T) {
	t.Parallel()
	s := newSystem(t)
	ctx := context.Background()
	queue := asynq.NewClient(s.app.Redis)
	t.Cleanup(func() { _ = queue.Close() })
	publishTx(t, s.app.DB, "archived-1", "kept-1")
	stub := clock.NewStub(time.Now())
	relay := outbox.NewRelay(s.app.DB, queue, outbox.RelayConfig{Clock: stub, RecoverAfter: time.Minute, Inspector: s.insp})
	if n, err := relay.Drain(ctx); err != nil || n != 2 {
		t.Fatalf("Drain = %d, %v; want 2", n, err)
	}
	if err := s.insp.ArchiveTask(tasks.DefaultQueue, event.TaskID("", "archived-1")); err != nil {
		t.Fatal(err)
	}
	stub.Advance(2 * time.Minute)
	if n, err := relay.RecoverAll(ctx); err != nil || n != 1 {
		t.Fatalf("Recover with one task archived = %d, %v; want that one queued again", n, err)
	}
	info, err := s.insp.GetTaskInfo(tasks.DefaultQueue, event.TaskID("", "archived-1"))
	if err != nil || info.State != asynq.TaskStatePending {
		t.Fatalf("the archived event's task after Recover: %v, %v; want pending", info, err)
	}
	s.startWorker(t)
	for _, id := range []string{"archived-1", "kept-1"} {
		s.waitDelivered(t, id)
		s.assertOncePerWebhook(t, id)
	}
	if n := s.recv.Count(); n != 4 {
		t.Fatalf("the receiver got %d requests, want 4", n)
	}
}

// TestDefaultRecoveryWithinAMinute: with the task's state checked instead
// of a blind lease, an event whose task Redis lost moves within a minute
// at the defaults (recover_after, plus the quarter of it between looks).
func TestDefaultRecoveryWithinAMinute(t *testing.T) {
	t.Parallel()
	if worst := outbox.DefaultRecoverAfter + outbox.DefaultRecoverAfter/4; worst > time.Minute {
		t.Fatalf("a lost event waits up to %s at the defaults, want at most 1m", worst)
	}
}

// TestRecoverHoldsNoLockAcrossRedis (issue 25): a fan-out's release of its
// outbox row (Completer) must not wait while a relay looks up a batch's
// tasks in Redis; it used to wait for the whole batch's round trips, which
// held each event task (and its inline first attempt) behind them. An
// event released while its task is being looked up is not queued again.
func TestRecoverHoldsNoLockAcrossRedis(t *testing.T) {
	t.Parallel()
	s := newSystem(t)
	ctx := context.Background()
	publishTx(t, s.app.DB, "lost-1", "released-1", "lost-2")
	stub := clock.NewStub(time.Now())
	first := asynq.NewClient(s.app.Redis)
	t.Cleanup(func() { _ = first.Close() })
	if n, err := outbox.NewRelay(s.app.DB, first, outbox.RelayConfig{Clock: stub}).Drain(ctx); err != nil || n != 3 {
		t.Fatalf("Drain = %d, %v; want 3", n, err)
	}
	if err := s.rdb.FlushDB(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	// A relay started after the flush (a fresh client registers the queue
	// again; asynq's client remembers it did so once).
	queue := asynq.NewClient(s.app.Redis)
	t.Cleanup(func() { _ = queue.Close() })
	relay := outbox.NewRelay(s.app.DB, queue, outbox.RelayConfig{Clock: stub, RecoverAfter: time.Minute, Inspector: s.insp})
	completer := outbox.NewCompleter(s.app.DB)
	var releaseErr error
	outbox.SetOnLookup(relay, func(eventID string) {
		if eventID != "released-1" {
			return
		}
		// As a worker whose fan-out of the event just committed. Were the
		// relay holding the row across its Redis look-ups, the release
		// would wait on its lock (seen as an event, not after a timeout).
		var err error
		if !testenv.ReturnsWithoutLockWait(t, s.app.DB, func() { err = completer.FannedOut(ctx, "", eventID) }) {
			releaseErr = errors.New("it waited on a lock the relay holds")
			return
		}
		releaseErr = err
	})
	stub.Advance(2 * time.Minute)
	n, err := relay.RecoverAll(ctx)
	if releaseErr != nil {
		t.Fatalf("the fan-out's release waited on the relay's Redis look-ups: %v", releaseErr)
	}
	if err != nil || n != 2 {
		t.Fatalf("RecoverAll = %d, %v; want the 2 events still lost", n, err)
	}
	for id, want := range map[string]bool{"lost-1": true, "lost-2": true, "released-1": false} {
		_, err := s.insp.GetTaskInfo(tasks.DefaultQueue, event.TaskID("", id))
		if got := err == nil; got != want {
			t.Errorf("event %s queued again: %v, want %v (%v)", id, got, want, err)
		}
	}
}
