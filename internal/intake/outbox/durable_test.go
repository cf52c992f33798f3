package outbox_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/homingdev/homing/internal/intake/outbox"
	"github.com/homingdev/homing/internal/lib/clock"
	"github.com/homingdev/homing/internal/testing/testenv"
)

// TestEventsSurviveTheLossOfRedisData: events committed through the outbox
// and queued in Redis are lost from Redis (FLUSHDB of the system's own
// index, as a restart without persistence does) before any worker ran. The
// outbox still holds them: a republished ID is queued again at once, the
// rest once outbox.recover_after has passed, and every event reaches each
// webhook exactly once. The outbox is empty once they are fanned out.
func TestEventsSurviveTheLossOfRedisData(t *testing.T) {
	t.Parallel()
	s := newSystem(t)
	ctx := context.Background()
	queue := asynq.NewClient(s.app.Redis)
	t.Cleanup(func() { _ = queue.Close() })
	const events = 40
	ids := make([]string, events)
	for i := range ids {
		ids[i] = fmt.Sprintf("lost-%02d", i)
	}
	publishTx(t, s.app.DB, ids...)
	stub := clock.NewStub(time.Now())
	relay := outbox.NewRelay(s.app.DB, queue, outbox.RelayConfig{Clock: stub, RecoverAfter: time.Minute, Inspector: s.insp})
	if n, err := relay.Drain(ctx); err != nil || n != events {
		t.Fatalf("Drain = %d, %v; want %d", n, err, events)
	}
	if err := s.rdb.FlushDB(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := relay.RecoverAll(ctx); err != nil || n != 0 {
		t.Fatalf("Recover before recover_after = %d, %v; want nothing yet", n, err)
	}

	// A producer republishes one of the lost IDs: it is queued again now,
	// not answered "already published".
	got, err := outbox.Add(ctx, s.app.DB, sampleEvent(ids[7]), stub.Now())
	if err != nil || got != outbox.Requeued {
		t.Fatalf("republish of an event never fanned out = %v, %v; want Requeued", got, err)
	}
	if n, err := relay.RunOnce(ctx); err != nil || n != 1 {
		t.Fatalf("RunOnce after the republish = %d, %v; want the one event", n, err)
	}

	stub.Advance(2 * time.Minute)
	if n, err := relay.RecoverAll(ctx); err != nil || n != events-1 {
		t.Fatalf("Recover after recover_after = %d, %v; want the %d events lost from Redis (the republished one is queued)", n, err, events-1)
	}
	s.startWorker(t)
	for _, id := range ids {
		s.waitDelivered(t, id)
	}
	for _, id := range ids {
		s.assertOncePerWebhook(t, id)
	}
	if n := s.recv.Count(); n != 2*events {
		t.Fatalf("the receiver got %d requests, want %d", n, 2*events)
	}
	if rows := outboxRows(t, s.app.DB); len(rows) != 0 {
		t.Fatalf("%d rows left in the outbox after every event was fanned out", len(rows))
	}
	// Once fanned out, a republish is the original: nothing is queued.
	got, err = outbox.Add(ctx, s.app.DB, sampleEvent(ids[0]), stub.Now())
	if err != nil || got != outbox.Repeated {
		t.Fatalf("republish of a fanned-out event = %v, %v; want Repeated", got, err)
	}
	stub.Advance(time.Hour)
	if n, err := relay.RecoverAll(ctx); err != nil || n != 0 {
		t.Fatalf("Recover with everything fanned out = %d, %v; want 0", n, err)
	}
}

// TestRecoverLeavesTasksStillInRedis: an event whose task still waits in
// Redis after recover_after (a backlog) is left to it, however often the
// relay looks: nothing is queued twice, and the row is looked at again
// only after another recover_after.
func TestRecoverLeavesTasksStillInRedis(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	q := newQueue(t)
	publishTx(t, db, "ev-a", "ev-b")
	stub := clock.NewStub(time.Now())
	relay := outbox.NewRelay(db, q.client, outbox.RelayConfig{Clock: stub, RecoverAfter: time.Minute, Inspector: q.insp})
	if n, err := relay.Drain(context.Background()); err != nil || n != 2 {
		t.Fatalf("Drain = %d, %v", n, err)
	}
	before := q.pending(t)
	for range 3 {
		stub.Advance(2 * time.Minute)
		if n, err := relay.RecoverAll(context.Background()); err != nil || n != 0 {
			t.Fatalf("Recover with both tasks still queued = %d, %v; want 0", n, err)
		}
		// Looked at now: not again before another recover_after.
		if looked, n, err := relay.Recover(context.Background()); err != nil || looked != 0 || n != 0 {
			t.Fatalf("Recover right after = looked at %d, queued %d, %v; want nothing", looked, n, err)
		}
	}
	got := q.pending(t)
	if len(got) != 2 {
		t.Fatalf("%d tasks queued, want 2", len(got))
	}
	for id, info := range got {
		if before[id] == nil || info.Retried != before[id].Retried {
			t.Fatalf("task %s is not the one first queued", id)
		}
	}
	if rows := unqueued(t, db); len(rows) != 0 {
		t.Fatalf("%d rows unqueued after Recover, want 0", len(rows))
	}
}
