package inspect_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/homingdev/homing/internal/ops/inspect"
	"github.com/homingdev/homing/internal/testing/testenv"
	"github.com/homingdev/homing/models"
)

// TestWebhookLatency: over the deliveries of the last 24 h, the nearest-rank
// p50 and p99 of acceptance → final outcome (Failed rows have none) and of
// acceptance → first attempt; a row without accepted_at counts from its
// created_at; a row of another webhook, or older than the window, counts
// for nothing.
func TestWebhookLatency(t *testing.T) {
	t.Parallel()
	for name, open := range testenv.Backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := open(t)
			ctx := context.Background()
			now := t0.Add(48 * time.Hour)
			// 100 delivered deliveries of "ok": the i-th accepted 2 h ago,
			// created 10 ms later, first attempt i ms after acceptance,
			// delivered i s after it.
			for i := 1; i <= 100; i++ {
				acc := now.Add(-2 * time.Hour)
				id := addDelivery(t, db, "ok", acc.Add(10*time.Millisecond))
				if err := db.Model(&models.Delivery{}).Where("id = ?", id).
					Updates(map[string]any{"accepted_at": acc, "updated_at": acc.Add(time.Duration(i) * time.Second)}).Error; err != nil {
					t.Fatal(err)
				}
				if err := db.Create(&models.Attempt{DeliveryID: id, Attempt: 1, At: acc.Add(time.Duration(i) * time.Millisecond), Class: "2xx", Method: "POST", URL: "u"}).Error; err != nil {
					t.Fatal(err)
				}
			}
			// Failed, no attempt yet: neither latency.
			failed := addDelivery(t, db, "ok", now.Add(-time.Hour))
			if err := db.Model(&models.Delivery{}).Where("id = ?", failed).Updates(map[string]any{"status": models.StatusFailed, "next_retry": now}).Error; err != nil {
				t.Fatal(err)
			}
			addDelivery(t, db, "ok", now.Add(-30*time.Hour)) // outside the window
			addDelivery(t, db, "other", now.Add(-time.Hour))
			// Without accepted_at: from created_at, updated 5 s later.
			legacy := addDelivery(t, db, "legacy", now.Add(-time.Hour))
			if err := db.Model(&models.Delivery{}).Where("id = ?", legacy).Update("updated_at", now.Add(-time.Hour+5*time.Second)).Error; err != nil {
				t.Fatal(err)
			}

			l, err := inspect.WebhookLatency(ctx, db, "", "ok", now, 24*time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			got := fmt.Sprintf("%d %v %v %d %v %v %v", l.Final, *l.FinalP50, *l.FinalP99, l.First, *l.FirstP50, *l.FirstP99, l.Sampled)
			if want := "100 50s 1m39s 100 50ms 99ms false"; got != want {
				t.Errorf("ok: %s, want %s", got, want)
			}
			l, err = inspect.WebhookLatency(ctx, db, "", "legacy", now, 24*time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			if l.Final != 1 || *l.FinalP50 != 5*time.Second || l.First != 0 || l.FirstP50 != nil {
				t.Errorf("legacy: %+v, want one final latency of 5s from created_at, no first attempt", l)
			}
		})
	}
}
