package tasks_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"gorm.io/gorm"

	"github.com/homingdev/homing/client"
	"github.com/homingdev/homing/config"
	"github.com/homingdev/homing/internal/engine/secretbox"
	"github.com/homingdev/homing/internal/engine/webhook"
	"github.com/homingdev/homing/internal/lib/clock"
	"github.com/homingdev/homing/internal/testing/testenv"
	"github.com/homingdev/homing/internal/wiring/app"
	"github.com/homingdev/homing/internal/wiring/worker"
	"github.com/homingdev/homing/models"
	"github.com/homingdev/homing/transition"
)

// harness is a real worker (asynq server on a private Redis DB) on a real
// database, with the clock stubbed so the schedule runs in milliseconds.
type harness struct {
	t      *testing.T
	clock  *clock.Stub
	app    *app.App
	worker *worker.Worker
	hooks  *webhook.Service
	pub    *client.Client
	redis  asynq.RedisClientOpt
	insp   *asynq.Inspector
	db     *gorm.DB
	dsn    string
	// logs holds everything the worker logged at debug level.
	logs *logBuffer
}

// logBuffer keeps what the worker's goroutines log. They may still be
// writing an attempt's line while a test reads, so both take the lock.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String is what was logged so far.
func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

type backend string

const (
	pg     backend = "postgres"
	sqlite backend = "sqlite"
)

func newHarness(t *testing.T, b backend) *harness {
	t.Helper()
	var dsn string
	if b == pg {
		dsn = testenv.PostgresDSN(t)
	} else {
		dsn = testenv.SQLiteDSN(t)
	}
	redisOpt, _ := testenv.Redis(t)
	key, err := secretbox.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.Database.URL = dsn
	cfg.Redis.URL = testenv.RedisURL(redisOpt)
	cfg.Secrets.Key = key
	cfg.Worker.Concurrency = 20
	cfg.Worker.ShutdownTimeout = 5 * time.Second
	cfg.Delivery.Timeout = 2 * time.Second
	cfg.Metrics.Addr = ""
	cfg.Delivery.AllowPrivateNetworks = true // the receivers are on loopback
	// Start at the real time so independent verifiers accept attempt 1's
	// timestamp; after that the test moves the clock itself.
	stub := clock.NewStub(time.Now().Truncate(time.Second))
	logs := &logBuffer{}
	log := slog.New(slog.NewTextHandler(io.MultiWriter(logs, warnOnly{t}), &slog.HandlerOptions{Level: slog.LevelDebug}))
	a, err := app.Open(context.Background(), cfg, log, app.Options{Clock: stub})
	if err != nil {
		t.Fatalf("open app: %v", err)
	}
	w := worker.New(a)
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	tr, err := transition.New(transition.FromConfig(cfg))
	if err != nil {
		t.Fatal(err)
	}
	cc := app.ClientConfig(cfg)
	cc.Transitions = tr
	pub, err := client.New(cc)
	if err != nil {
		t.Fatal(err)
	}
	insp := asynq.NewInspector(redisOpt)
	t.Cleanup(func() {
		_ = w.Stop(context.Background())
		_ = pub.Close()
		_ = tr.Close()
		_ = insp.Close()
		_ = a.Close()
	})
	return &harness{
		t: t, clock: stub, app: a, worker: w, pub: pub, redis: redisOpt, insp: insp, db: a.DB, dsn: dsn, logs: logs,
		hooks: webhook.New(a.DB, a.Box, stub, webhook.Defaults{MaxRetries: 3, Timeout: 2 * time.Second}, log),
	}
}

// warnOnly passes warnings and errors on to the test log.
type warnOnly struct{ t *testing.T }

func (w warnOnly) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte("level=WARN")) || bytes.Contains(p, []byte("level=ERROR")) {
		w.t.Log(strings.TrimSpace(string(p)))
	}
	return len(p), nil
}

func ptr[T any](v T) *T { return &v }

// createWebhook makes a Sales Order on_submit webhook pointing at url.
func (h *harness) createWebhook(name, url string, mod func(*webhook.Input)) models.Webhook {
	h.t.Helper()
	in := webhook.Input{
		Name: ptr(name), DocType: ptr("Sales Order"), Event: ptr("on_submit"), URL: ptr(url),
	}
	if mod != nil {
		mod(&in)
	}
	w, err := h.hooks.Create(context.Background(), "", in)
	if err != nil {
		h.t.Fatalf("create webhook: %v", err)
	}
	return w
}

func (h *harness) publish(ev client.Event) string {
	h.t.Helper()
	id, err := h.pub.Publish(context.Background(), ev)
	if err != nil {
		h.t.Fatalf("publish: %v", err)
	}
	return id
}

func salesOrder(id string) client.Event {
	return client.Event{
		ID: id, DocType: "Sales Order", DocName: "SO-1", Event: "on_submit",
		Doc: map[string]any{"name": "SO-1", "status": "Paid", "grand_total": 1500, "customer": "Acme"},
	}
}

// deliveries reads the event's delivery rows.
func (h *harness) deliveries(eventID string) []models.Delivery {
	h.t.Helper()
	var rows []models.Delivery
	if err := h.db.Where("event_id = ?", eventID).Order("webhook_name").Find(&rows).Error; err != nil {
		h.t.Fatal(err)
	}
	return rows
}

func (h *harness) delivery(eventID string) models.Delivery {
	h.t.Helper()
	rows := h.deliveries(eventID)
	if len(rows) != 1 {
		h.t.Fatalf("event %s has %d deliveries, want 1", eventID, len(rows))
	}
	return rows[0]
}

// waitAttempts waits until the event's only delivery has made n attempts and
// its outcome is recorded.
func (h *harness) waitAttempts(eventID string, n int) models.Delivery {
	h.t.Helper()
	var d models.Delivery
	testenv.Eventually(h.t, "attempt to be recorded", func() bool {
		// History first: it is written in the same transaction as the
		// outcome, so once it shows n attempts the row read after is final.
		var c int64
		h.db.Model(&models.Attempt{}).Joins("JOIN deliveries ON deliveries.id = delivery_attempts.delivery_id").
			Where("deliveries.event_id = ?", eventID).Count(&c)
		if int(c) != n {
			return false
		}
		rows := h.deliveries(eventID)
		if len(rows) != 1 {
			return false
		}
		d = rows[0]
		return d.Attempts == n
	})
	return d
}

// sweep advances the clock by d and runs one sweeper step, once no task
// is running: an attempt's task ends a moment after its outcome is
// recorded (what waitAttempts waits for), and a step rightly leaves a due
// row whose retry task is still active to a later step (busy), so a sweep
// run in that moment would enqueue nothing whatever the rule says.
func (h *harness) sweep(d time.Duration) int {
	h.t.Helper()
	testenv.Eventually(h.t, "every task to have ended", func() bool {
		queues, err := h.insp.Queues()
		if err != nil {
			return false
		}
		for _, q := range queues {
			if info, err := h.insp.GetQueueInfo(q); err != nil || info.Active > 0 {
				return false
			}
		}
		return true
	})
	h.clock.Advance(d)
	res, err := h.worker.Sweeper.RunOnce(context.Background())
	if err != nil {
		h.t.Fatalf("sweep: %v", err)
	}
	return res.Enqueued
}

func frappeSignature(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// health is webhook name's health as `homing webhook show` reads it.
func (h *harness) health(name string) webhook.Health {
	h.t.Helper()
	w, err := h.hooks.Get(context.Background(), "", name)
	if err != nil {
		h.t.Fatal(err)
	}
	hl, err := h.hooks.Health(context.Background(), w)
	if err != nil {
		h.t.Fatal(err)
	}
	return hl
}
