package retention_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/homingdev/homing/internal/engine/retention"
	"github.com/homingdev/homing/internal/lib/clock"
	"github.com/homingdev/homing/internal/testing/testenv"
	"github.com/homingdev/homing/models"
)

func seed(t *testing.T, db *gorm.DB, id, status string, created time.Time) {
	t.Helper()
	d := models.Delivery{
		ID: id, WebhookID: "w", WebhookName: "orders", EventID: id, DocType: "D", DocEvent: "on_update",
		Method: "POST", URL: "http://x", Payload: []byte("{}"), Status: status, Attempts: 1, MaxRetries: 3,
		CreatedAt: created, UpdatedAt: created,
	}
	if status == models.StatusFailed {
		next := created.Add(time.Hour)
		d.NextRetry = &next
	}
	if err := db.Create(&d).Error; err != nil {
		t.Fatal(err)
	}
	code := 200
	if err := db.Create(&models.Attempt{DeliveryID: id, Attempt: 1, At: created, Method: "POST", URL: "http://x", StatusCode: &code}).Error; err != nil {
		t.Fatal(err)
	}
}

func TestRetentionDeletesOnlyExpiredFinalRows(t *testing.T) {
	t.Parallel()
	for name, open := range testenv.Backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := open(t)
			now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
			day := 24 * time.Hour
			seed(t, db, "delivered-old", models.StatusDelivered, now.Add(-31*day))
			seed(t, db, "delivered-new", models.StatusDelivered, now.Add(-29*day))
			seed(t, db, "exhausted-old", models.StatusExhausted, now.Add(-91*day))
			seed(t, db, "exhausted-mid", models.StatusExhausted, now.Add(-60*day))
			seed(t, db, "failed-ancient", models.StatusFailed, now.Add(-400*day))
			for i := 0; i < 7; i++ { // more than one batch
				seed(t, db, "delivered-batch-"+string(rune('a'+i)), models.StatusDelivered, now.Add(-40*day))
			}
			for i, age := range []int{91, 95, 100, 89, 1} {
				key := models.PublishedEvent{EventID: fmt.Sprintf("key-%d-%d", i, age), CreatedAt: now.Add(-time.Duration(age) * day)}
				if err := db.Create(&key).Error; err != nil {
					t.Fatal(err)
				}
			}
			r := retention.New(db, retention.Config{Clock: clock.NewStub(now), BatchSize: 3})
			res, err := r.RunOnce(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if res.Delivered != 8 || res.Exhausted != 1 || res.EventKeys != 3 {
				t.Fatalf("deleted %+v, want 8 delivered, 1 exhausted and the 3 event keys older than 90 days", res)
			}
			var keys []string
			db.Model(&models.PublishedEvent{}).Order("event_id").Pluck("event_id", &keys)
			if fmt.Sprint(keys) != "[key-3-89 key-4-1]" {
				t.Fatalf("event keys left: %v, want the two younger than the longer retention", keys)
			}
			var left []string
			db.Model(&models.Delivery{}).Order("id").Pluck("id", &left)
			want := []string{"delivered-new", "exhausted-mid", "failed-ancient"}
			if len(left) != len(want) {
				t.Fatalf("left %v, want %v", left, want)
			}
			for i := range want {
				if left[i] != want[i] {
					t.Fatalf("left %v, want %v", left, want)
				}
			}
			var hist int64
			db.Model(&models.Attempt{}).Count(&hist)
			if hist != 3 {
				t.Fatalf("%d attempt rows left, want the 3 of the kept deliveries", hist)
			}
			if res, err := r.RunOnce(context.Background()); err != nil || res.Delivered+res.Exhausted+res.EventKeys != 0 {
				t.Fatalf("second run %+v %v", res, err)
			}
		})
	}
}

// TestRetentionContinuesAcrossTiedCreationTimes: each batch continues from
// the creation time the last one ended at, so rows sharing that time (more
// of them than a batch holds, and the batch boundary falling among them)
// must still all be deleted, in one run, and a younger row kept.
func TestRetentionContinuesAcrossTiedCreationTimes(t *testing.T) {
	t.Parallel()
	for name, open := range testenv.Backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := open(t)
			now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
			day := 24 * time.Hour
			tied := now.Add(-45 * day)
			seed(t, db, "a-older", models.StatusDelivered, tied.Add(-time.Hour))
			for i := 0; i < 8; i++ {
				seed(t, db, fmt.Sprintf("b-tied-%d", i), models.StatusDelivered, tied)
			}
			seed(t, db, "c-later", models.StatusDelivered, tied.Add(time.Hour))
			seed(t, db, "d-young", models.StatusDelivered, now.Add(-day))
			res, err := retention.New(db, retention.Config{Clock: clock.NewStub(now), BatchSize: 3}).RunOnce(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			var left []string
			db.Model(&models.Delivery{}).Order("id").Pluck("id", &left)
			if res.Delivered != 10 || fmt.Sprint(left) != "[d-young]" {
				t.Fatalf("deleted %d, left %v: want the 10 expired rows deleted in one run and [d-young] left", res.Delivered, left)
			}
		})
	}
}

// TestRetentionPausesAfterEachFullBatch: retention.pause is waited after
// every full batch of deliveries (through the injected Wait, so the test
// takes no time), never after the last, short one, and not at all when
// turned off.
func TestRetentionPausesAfterEachFullBatch(t *testing.T) {
	t.Parallel()
	for name, open := range testenv.Backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := open(t)
			now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
			for i := 0; i < 7; i++ { // batches of 3, 3 and 1
				seed(t, db, fmt.Sprintf("old-%d", i), models.StatusDelivered, now.Add(-40*24*time.Hour).Add(time.Duration(i)*time.Minute))
			}
			var waits []time.Duration
			rec := func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil }
			res, err := retention.New(db, retention.Config{Clock: clock.NewStub(now), BatchSize: 3, Pause: 70 * time.Millisecond, Wait: rec}).
				RunOnce(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if res.Delivered != 7 || fmt.Sprint(waits) != "[70ms 70ms]" {
				t.Fatalf("deleted %d with waits %v, want 7 with a 70ms pause after each of the two full batches", res.Delivered, waits)
			}
			seed(t, db, "older-0", models.StatusDelivered, now.Add(-50*24*time.Hour))
			seed(t, db, "older-1", models.StatusDelivered, now.Add(-50*24*time.Hour))
			seed(t, db, "older-2", models.StatusDelivered, now.Add(-50*24*time.Hour))
			seed(t, db, "older-3", models.StatusDelivered, now.Add(-50*24*time.Hour))
			waits = nil
			res, err = retention.New(db, retention.Config{Clock: clock.NewStub(now), BatchSize: 3, Pause: -1, Wait: rec}).RunOnce(context.Background())
			if err != nil || res.Delivered != 4 || len(waits) != 0 {
				t.Fatalf("with the pause off: deleted %d, waits %v, err %v; want 4 and no wait", res.Delivered, waits, err)
			}
		})
	}
}

// TestRetentionPrunesExpiredPortalLinks: a portal link past its expiry
// opens nothing (its token says so), so its row is deleted, paced as
// deliveries are (a pause after each full batch); a live link's row stays,
// revoked or not, for it is what refuses the link until it expires.
func TestRetentionPrunesExpiredPortalLinks(t *testing.T) {
	t.Parallel()
	for name, open := range testenv.Backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := open(t)
			now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
			link := func(id string, expires time.Time, revoked bool) {
				t.Helper()
				l := models.PortalLink{ID: id, Tenant: models.DefaultTenant, CreatedBy: "ops", CreatedAt: expires.Add(-time.Hour), ExpiresAt: expires}
				if revoked {
					l.RevokedAt = &l.CreatedAt
				}
				if err := db.Create(&l).Error; err != nil {
					t.Fatal(err)
				}
			}
			for i := 0; i < 7; i++ { // batches of 3, 3 and 1
				link(fmt.Sprintf("expired-%d", i), now.Add(-time.Duration(i+1)*time.Hour), i%2 == 0)
			}
			link("live", now.Add(time.Hour), false)
			link("live-revoked", now.Add(time.Hour), true)
			var waits []time.Duration
			rec := func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil }
			res, err := retention.New(db, retention.Config{Clock: clock.NewStub(now), BatchSize: 3, Pause: 70 * time.Millisecond, Wait: rec}).
				RunOnce(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			var left []string
			db.Model(&models.PortalLink{}).Order("id").Pluck("id", &left)
			if res.PortalLinks != 7 || fmt.Sprint(left) != "[live live-revoked]" || fmt.Sprint(waits) != "[70ms 70ms]" {
				t.Fatalf("links left %v, waits %v (result %+v): want the 7 expired deleted with a pause after each of the two full batches", left, waits, res)
			}
		})
	}
}
