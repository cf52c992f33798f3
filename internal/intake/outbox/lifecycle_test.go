package outbox_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/homingdev/homing/client"
	"github.com/homingdev/homing/config"
	"github.com/homingdev/homing/internal/engine/webhook"
	"github.com/homingdev/homing/internal/intake/event"
	"github.com/homingdev/homing/internal/intake/outbox"
	"github.com/homingdev/homing/internal/lib/asynqinfo"
	"github.com/homingdev/homing/internal/testing/testenv"
	"github.com/homingdev/homing/internal/testing/testreceiver"
	"github.com/homingdev/homing/internal/wiring/app"
	"github.com/homingdev/homing/internal/wiring/worker"
	"github.com/homingdev/homing/models"
	"github.com/homingdev/homing/tasks"
)

// system is a real worker on PostgreSQL and a private Redis DB, with two
// webhooks on Sales Order on_submit pointing at one receiver.
type system struct {
	app  *app.App
	cfg  config.Config
	recv *testreceiver.Receiver
	insp *asynq.Inspector
	// rdb is the system's own Redis DB index, which a test may flush.
	rdb *redis.Client
}

func newSystem(t *testing.T) *system {
	t.Helper()
	redisOpt, rdb := testenv.Redis(t)
	cfg := config.Default()
	cfg.Database.URL = testenv.PostgresDSN(t)
	cfg.Redis.URL = testenv.RedisURL(redisOpt)
	cfg.Metrics.Addr = ""
	cfg.Worker.Concurrency = 4
	cfg.Worker.ShutdownTimeout = 5 * time.Second
	cfg.Delivery.AllowPrivateNetworks = true // the receiver is on loopback
	a, err := app.Open(context.Background(), cfg, slog.New(slog.DiscardHandler), app.Options{})
	if err != nil {
		t.Fatal(err)
	}
	insp := asynq.NewInspector(redisOpt)
	t.Cleanup(func() {
		_ = insp.Close()
		_ = a.Close()
	})
	s := &system{app: a, cfg: cfg, recv: testreceiver.New(t), insp: insp, rdb: rdb}
	hooks := webhook.New(a.DB, a.Box, a.Clock, webhook.Defaults{MaxRetries: 3, Timeout: 2 * time.Second}, a.Log)
	for _, name := range []string{"erp", "crm"} {
		url := s.recv.URL + "/" + name
		in := webhook.Input{Name: &name, DocType: ptr("Sales Order"), Event: ptr("on_submit"), URL: &url}
		if _, err := hooks.Create(context.Background(), "", in); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func ptr[T any](v T) *T { return &v }

func (s *system) startWorker(t *testing.T) {
	t.Helper()
	w := worker.New(s.app)
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Stop(context.Background()) })
}

// idle reports whether the default queue has nothing pending or running.
func (s *system) idle(t *testing.T) bool {
	t.Helper()
	info, err := asynqinfo.QueueInfo(s.insp, tasks.DefaultQueue)
	if err != nil {
		t.Fatal(err)
	}
	if info == nil { // none yet, or flushed
		return true
	}
	return info.Pending == 0 && info.Active == 0 && info.Retry == 0 && info.Scheduled == 0
}

// waitDelivered waits until the event's deliveries to both webhooks are
// Delivered and the worker has nothing left to do.
func (s *system) waitDelivered(t *testing.T, eventID string) {
	t.Helper()
	testenv.Eventually(t, "event "+eventID+" delivered to both webhooks", func() bool {
		rows := s.deliveries(t, eventID)
		for _, d := range rows {
			if d.Status != models.StatusDelivered {
				return false
			}
		}
		return len(rows) == 2 && s.idle(t)
	})
}

// processed is how many tasks the default queue has finished today.
func (s *system) processed(t *testing.T) int {
	t.Helper()
	info, err := asynqinfo.QueueInfo(s.insp, tasks.DefaultQueue)
	if err != nil {
		t.Fatal(err)
	}
	if info == nil { // none yet, or flushed
		return 0
	}
	return info.Processed
}

func (s *system) deliveries(t *testing.T, eventID string) []models.Delivery {
	t.Helper()
	var rows []models.Delivery
	if err := s.app.DB.Where("event_id = ?", eventID).Order("webhook_name").Find(&rows).Error; err != nil {
		t.Fatal(err)
	}
	return rows
}

// assertOncePerWebhook checks that the event has one Delivered row per
// webhook and that the receiver got each exactly once.
func (s *system) assertOncePerWebhook(t *testing.T, eventID string) {
	t.Helper()
	rows := s.deliveries(t, eventID)
	if len(rows) != 2 {
		t.Fatalf("event %s has %d deliveries, want one per webhook (2)", eventID, len(rows))
	}
	got := s.recv.CountBy("webhook-id")
	for _, d := range rows {
		if d.Status != models.StatusDelivered || got[d.ID] != 1 {
			t.Errorf("delivery %s to %s: status %s, received %d times; want Delivered, once", d.ID, d.WebhookName, d.Status, got[d.ID])
		}
	}
}

func salesOrder(id string) client.Event {
	return client.Event{ID: id, DocType: "Sales Order", DocName: "SO-1", Event: "on_submit", Doc: map[string]any{"name": "SO-1"}}
}

// TestPublishTxDeliversIfAndOnlyIfCommitted: a rolled-back business write
// delivers nothing; a committed one is delivered exactly once per webhook.
func TestPublishTxDeliversIfAndOnlyIfCommitted(t *testing.T) {
	t.Parallel()
	s := newSystem(t)
	s.startWorker(t)
	queue := asynq.NewClient(s.app.Redis)
	t.Cleanup(func() { _ = queue.Close() })
	relay := s.app.Relay(queue, s.insp)
	ctx := context.Background()
	rolledBack := errors.New("the business write failed")
	err := s.app.DB.Transaction(func(tx *gorm.DB) error {
		if _, err := client.PublishTx(ctx, tx, salesOrder("so-1-rolled-back")); err != nil {
			t.Fatal(err)
		}
		return rolledBack
	})
	if !errors.Is(err, rolledBack) {
		t.Fatal(err)
	}
	err = s.app.DB.Transaction(func(tx *gorm.DB) error {
		_, err := client.PublishTx(ctx, tx, salesOrder("so-1-committed"))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := relay.Drain(ctx); err != nil || n != 1 {
		t.Fatalf("Drain = %d, %v; want the one committed event", n, err)
	}
	s.waitDelivered(t, "so-1-committed")
	s.assertOncePerWebhook(t, "so-1-committed")
	if rows := s.deliveries(t, "so-1-rolled-back"); len(rows) != 0 {
		t.Fatalf("the rolled-back event has %d deliveries", len(rows))
	}
	if n := s.recv.Count(); n != 2 {
		t.Fatalf("the receiver got %d requests, want 2", n)
	}
}

// TestRelayKilledAfterTheEventRan: the relay dies between enqueue and
// marking the row queued, and the worker runs the event meanwhile: its
// fan-out releases the row, so the next relay queues nothing. An event task
// queued once more all the same (a recovery racing the release) meets the
// (event, webhook) unique key: still one delivery per webhook.
func TestRelayKilledAfterTheEventRan(t *testing.T) {
	t.Parallel()
	s := newSystem(t)
	s.startWorker(t)
	ctx := context.Background()
	queue := asynq.NewClient(s.app.Redis)
	t.Cleanup(func() { _ = queue.Close() })
	if _, err := client.PublishTx(ctx, s.app.DB, salesOrder("so-2")); err != nil {
		t.Fatal(err)
	}
	dying := s.app.Relay(queue, s.insp)
	killed := errors.New("relay killed")
	outbox.SetAfterEnqueue(dying, func() error { return killed })
	if _, err := dying.RunOnce(ctx); !errors.Is(err, killed) {
		t.Fatalf("dying relay = %v", err)
	}
	s.waitDelivered(t, "so-2")
	testenv.Eventually(t, "the fan-out to release the outbox row", func() bool { return len(outboxRows(t, s.app.DB)) == 0 })
	if n, err := s.app.Relay(queue, s.insp).RunOnce(ctx); err != nil || n != 0 {
		t.Fatalf("next relay = %d, %v; want nothing, the event was fanned out", n, err)
	}
	before := s.processed(t)
	payload, err := event.Encode(sampleEvent("so-2"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := queue.Enqueue(event.OutboxTask("", "so-2", payload, time.Now(), 0, "")); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the second run of the event task", func() bool { return s.processed(t) > before && s.idle(t) })
	s.assertOncePerWebhook(t, "so-2")
	if n := s.recv.Count(); n != 2 {
		t.Fatalf("the receiver got %d requests, want 2", n)
	}
}

// TestWorkerDrainsTheOutboxAtStart: events committed while nothing relayed
// are delivered once a worker starts, without a scheduler.
func TestWorkerDrainsTheOutboxAtStart(t *testing.T) {
	t.Parallel()
	s := newSystem(t)
	if _, err := client.PublishTx(context.Background(), s.app.DB, salesOrder("so-3")); err != nil {
		t.Fatal(err)
	}
	s.startWorker(t)
	s.waitDelivered(t, "so-3")
	s.assertOncePerWebhook(t, "so-3")
	if rows := outboxRows(t, s.app.DB); len(rows) != 0 {
		t.Fatalf("%d rows left in the outbox", len(rows))
	}
}

// TestPublishTxRefusesWorkflowTransition: a synchronous event cannot wait
// for a commit, and nothing is written for it.
func TestPublishTxRefusesWorkflowTransition(t *testing.T) {
	t.Parallel()
	db := testenv.SQLite(t)
	ev := salesOrder("wf-1")
	ev.Event = models.EventWorkflowTransition
	_, err := client.PublishTx(context.Background(), db, ev)
	if !errors.Is(err, client.ErrSyncInTx) {
		t.Fatalf("PublishTx(workflow_transition) = %v, want ErrSyncInTx", err)
	}
	if rows := outboxRows(t, db); len(rows) != 0 {
		t.Fatalf("%d outbox rows written for a refused event", len(rows))
	}
	if _, err := client.PublishTx(context.Background(), nil, salesOrder("x")); err == nil {
		t.Fatal("PublishTx with a nil transaction succeeded")
	}
}
