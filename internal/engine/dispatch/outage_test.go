package dispatch

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/homingdev/homing/internal/engine/delivery/send"
	"github.com/homingdev/homing/internal/engine/ratelimit"
	"github.com/homingdev/homing/internal/lib/clock"
	"github.com/homingdev/homing/internal/testing/testenv"
	"github.com/homingdev/homing/models"
)

func readHealth(t *testing.T, db *gorm.DB, id string) models.WebhookHealth {
	t.Helper()
	var h models.WebhookHealth
	if err := db.Where("webhook_id = ?", id).Take(&h).Error; err != nil {
		t.Fatal(err)
	}
	return h
}

// countingReceiver answers status and counts what it got.
func countingReceiver(t *testing.T, status *atomic.Int32) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var got atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		got.Add(1)
		w.WriteHeader(int(status.Load()))
	}))
	t.Cleanup(srv.Close)
	return srv, &got
}

// outageBed is a dispatcher on db sending to a real receiver, with two due
// retries of one webhook.
func outageBed(t *testing.T, db *gorm.DB, limiter Limiter, rateLimit int) (*Dispatcher, *atomic.Int32, *atomic.Int32, *clock.Stub, [2]string) {
	t.Helper()
	status := &atomic.Int32{}
	status.Store(http.StatusOK)
	srv, got := countingReceiver(t, status)
	now := time.Now().UTC().Truncate(time.Second)
	w := models.Webhook{
		ID: "w", Name: "orders", DocType: "Sales Order", DocEvent: "on_submit", RequestURL: srv.URL,
		RequestMethod: "POST", RequestStructure: "json", Headers: models.StringMap{}, SignatureScheme: "none",
		Enabled: true, MaxRetries: 5, Queue: "default", TimeoutMS: 5000, RateLimit: rateLimit, CreatedAt: now, UpdatedAt: now,
	}
	if err := db.Create(&w).Error; err != nil {
		t.Fatal(err)
	}
	var ids [2]string
	for i := range ids {
		ids[i] = fmt.Sprintf("d%d", i)
		row := testenv.PlannedDelivery(ids[i], "ev-"+ids[i], "w", now.Add(-time.Hour))
		row.Attempts = 1
		row.NextRetry = new(now.Add(-time.Minute))
		if err := db.Create(&row).Error; err != nil {
			t.Fatal(err)
		}
	}
	clk := clock.NewStub(now)
	sender := send.NewSender(send.SenderConfig{UserAgent: "test"})
	t.Cleanup(sender.Close)
	d := New(db, sender, nil, Config{Clock: clk, Limiter: limiter})
	return d, status, got, clk, ids
}

func loadRow(t *testing.T, db *gorm.DB, id string) models.Delivery {
	t.Helper()
	var row models.Delivery
	if err := db.Where("id = ?", id).Take(&row).Error; err != nil {
		t.Fatal(err)
	}
	return row
}

// While its webhook is failing, a retry that is not the probe is refused
// before any request, keeps its attempt count and goes back to the sweep
// (queued_at cleared); the probe is sent, and its success releases the rest.
func TestRetryOfAFailingWebhookWaitsForTheProbe(t *testing.T) {
	t.Parallel()
	for name, open := range testenv.Backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := open(t)
			d, _, got, clk, ids := outageBed(t, db, nil, 0)
			ctx := context.Background()
			if err := db.Exec("UPDATE webhook_health SET failures = ?, failing_since = ?, probe_id = ? WHERE webhook_id = 'w'",
				models.FailingAfter, clk.Now().Add(-time.Hour), ids[0]).Error; err != nil {
				t.Fatal(err)
			}
			if err := db.Exec("UPDATE deliveries SET queued_at = ?", clk.Now()).Error; err != nil {
				t.Fatal(err)
			}
			_, err := d.Attempt(ctx, ids[1], Retry)
			if !errors.Is(err, ErrHeld) || !errors.Is(err, ErrNotClaimed) {
				t.Fatalf("retry of a failing webhook: %v, want ErrHeld", err)
			}
			if row := loadRow(t, db, ids[1]); got.Load() != 0 || row.Attempts != 1 || row.QueuedAt != nil || row.Status != models.StatusFailed {
				t.Fatalf("held retry: %d requests, row %+v; want none, 1 attempt, handed back", got.Load(), row)
			}
			out, err := d.Attempt(ctx, ids[0], Retry)
			if err != nil || out.Status != models.StatusDelivered || got.Load() != 1 {
				t.Fatalf("probe: %+v %v, %d requests", out, err, got.Load())
			}
			if h := readHealth(t, db, "w"); h.Failures != 0 || h.FailingSince != nil || h.ProbeID != nil {
				t.Fatalf("health after the probe's success %+v, want clear", h)
			}
			if out, err := d.Attempt(ctx, ids[1], Retry); err != nil || out.Status != models.StatusDelivered || got.Load() != 2 {
				t.Fatalf("released retry: %+v %v", out, err)
			}
		})
	}
}

// A request over its webhook's rate_limit is not made: the claim is given
// back with the row due when the budget allows, no attempt counted and no
// attempt recorded.
func TestRateLimitPostponesWithoutCountingAnAttempt(t *testing.T) {
	t.Parallel()
	for name, open := range testenv.Backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := open(t)
			_, rdb := testenv.Redis(t)
			limiter := ratelimit.New(rdb)
			d, _, got, clk, ids := outageBed(t, db, limiter, 1)
			ctx := context.Background()
			if out, err := d.Attempt(ctx, ids[0], Retry); err != nil || out.Status != models.StatusDelivered {
				t.Fatalf("first: %+v %v", out, err)
			}
			// The first spent the second's budget; on a loaded machine the
			// next attempt may come after it refilled, so spend it for an
			// hour (the limiter's clock is Redis's, not clk).
			if err := limiter.Spend(ctx, "w", time.Hour); err != nil { // the bed's webhook ID
				t.Fatal(err)
			}
			out, err := d.Attempt(ctx, ids[1], Retry)
			if err != nil || !out.Postponed || out.Status != models.StatusFailed {
				t.Fatalf("second with the budget spent: %+v %v, want postponed", out, err)
			}
			row := loadRow(t, db, ids[1])
			if got.Load() != 1 || row.Attempts != 1 || row.NextRetry == nil ||
				!row.NextRetry.After(clk.Now()) || row.NextRetry.After(clk.Now().Add(time.Hour)) {
				t.Fatalf("postponed: %d requests, attempts %d, next %v; want 1, 1, when the budget allows (within the hour)", got.Load(), row.Attempts, row.NextRetry)
			}
			var n int64
			db.Model(&models.Attempt{}).Where("delivery_id = ?", ids[1]).Count(&n)
			if n != 0 {
				t.Fatalf("%d attempts recorded for a postponed request", n)
			}
		})
	}
}
