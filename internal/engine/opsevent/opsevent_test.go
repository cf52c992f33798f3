package opsevent

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/homingdev/homing/internal/testing/testenv"
	"github.com/homingdev/homing/models"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// TestChanges is the announcement rule: which events a webhook_health row
// owes, given the episode it last announced.
func TestChanges(t *testing.T) {
	t.Parallel()
	t1 := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	t2 := t1.Add(time.Hour)
	for _, c := range []struct {
		name                       string
		h                          models.WebhookHealth
		wantRecovered, wantFailing bool
	}{
		{"healthy, nothing announced", models.WebhookHealth{}, false, false},
		{"failing below the threshold", models.WebhookHealth{FailingSince: &t1, Failures: models.FailingAfter - 1}, false, false},
		{"failing at the threshold", models.WebhookHealth{FailingSince: &t1, Failures: models.FailingAfter}, false, true},
		{"failing, announced", models.WebhookHealth{FailingSince: &t1, Failures: 40, AnnouncedSince: &t1}, false, false},
		{"recovered after an announced episode", models.WebhookHealth{AnnouncedSince: &t1}, true, false},
		{"a new episode below the threshold after an announced one", models.WebhookHealth{FailingSince: &t2, Failures: 1, AnnouncedSince: &t1}, true, false},
		{"a new episode at the threshold after an announced one", models.WebhookHealth{FailingSince: &t2, Failures: 7, AnnouncedSince: &t1}, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			recovered, failing := changes(c.h)
			if recovered != c.wantRecovered || failing != c.wantFailing {
				t.Errorf("changes(%+v) = recovered %v, failing %v; want %v, %v", c.h, recovered, failing, c.wantRecovered, c.wantFailing)
			}
		})
	}
}

func createHook(t *testing.T, db *gorm.DB, id, tenant, doctype, event string) {
	t.Helper()
	now := time.Now().UTC()
	if tenant != models.DefaultTenant {
		if err := db.Create(&models.Tenant{Name: tenant, Enabled: true, CreatedAt: now, UpdatedAt: now}).Error; err != nil {
			t.Fatal(err)
		}
	}
	w := models.Webhook{ID: id, Tenant: tenant, Name: "hook-" + id, DocType: doctype, DocEvent: event, RequestURL: "http://127.0.0.1:1/",
		RequestMethod: "POST", Enabled: true, MaxRetries: 3, Queue: "default", TimeoutMS: 1000, CreatedAt: now, UpdatedAt: now,
		SignatureScheme: "both", RequestStructure: "json", ConditionLanguage: models.ConditionExpr}
	if err := db.Create(&w).Error; err != nil {
		t.Fatal(err)
	}
}

func setHealth(t *testing.T, db *gorm.DB, id string, since *time.Time, failures int) {
	t.Helper()
	if err := db.Model(&models.WebhookHealth{}).Where("webhook_id = ?", id).
		Updates(map[string]any{"failing_since": since, "failures": failures}).Error; err != nil {
		t.Fatal(err)
	}
}

func outboxIDs(t *testing.T, db *gorm.DB) map[string]string {
	t.Helper()
	var rows []models.OutboxEvent
	if err := db.Find(&rows).Error; err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, r := range rows {
		out[r.Tenant+" "+r.EventID] = r.Payload
	}
	return out
}

// race runs fn from eight goroutines at once, as eight workers and sweeps
// announcing one change would.
func race(t *testing.T, fn func() error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() { errs <- fn() })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

// TestEachChangeIsAnnouncedOnce: eight announcers racing over one failing
// episode publish one `failing` event, and over its end one `recovered`;
// a copy goes to CopyTo with the source named; a webhook of operational
// events announces nothing; a delivery exhausted twice over (a repeated
// call) is one event.
func TestEachChangeIsAnnouncedOnce(t *testing.T) {
	t.Parallel()
	for name, open := range testenv.Backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := open(t)
			ctx := context.Background()
			createHook(t, db, "w1", "acme", "Order", "on_submit")
			createHook(t, db, "alerts", "ops", models.OpsDocType, "failing")
			p := New(Config{CopyTo: "ops", ConsoleURL: "https://h.example.com"}, nil)
			since := time.Now().UTC().Add(-time.Minute).Truncate(time.Microsecond)

			setHealth(t, db, "w1", &since, models.FailingAfter-1)
			setHealth(t, db, "alerts", &since, 50)
			race(t, func() error { return p.Announce(ctx, db, "w1", "503", since) })
			race(t, func() error { _, err := p.Reconcile(ctx, db, since); return err })
			if got := outboxIDs(t, db); len(got) != 0 {
				t.Fatalf("below the threshold: %v, want nothing (and the subscriber of operational events announces nothing)", got)
			}

			setHealth(t, db, "w1", &since, models.FailingAfter)
			race(t, func() error { return p.Announce(ctx, db, "w1", "503 Service Unavailable", since) })
			race(t, func() error { _, err := p.Reconcile(ctx, db, since); return err })
			failing := "homing:failing:w1:" + micros(since)
			got := outboxIDs(t, db)
			if len(got) != 2 || got["acme "+failing] == "" || got["ops acme/"+failing] == "" {
				t.Fatalf("failing: %v, want %s in acme and its copy in ops", keys(got), failing)
			}
			for _, want := range []string{`"state":"failing"`, `"last_error":"503 Service Unavailable"`, `"link":"https://h.example.com/console/webhooks/hook-w1"`, `"tenant":"acme"`} {
				if !strings.Contains(got["acme "+failing], want) {
					t.Errorf("failing event %s lacks %s", got["acme "+failing], want)
				}
			}
			if !strings.Contains(got["ops acme/"+failing], `"source_tenant":"acme"`) {
				t.Errorf("the copy %s does not name its source tenant", got["ops acme/"+failing])
			}

			setHealth(t, db, "w1", nil, 0)
			race(t, func() error { _, err := p.Reconcile(ctx, db, since.Add(time.Minute)); return err })
			race(t, func() error { return p.Announce(ctx, db, "w1", "", since.Add(time.Minute)) })
			got = outboxIDs(t, db)
			recovered := "homing:recovered:w1:" + micros(since)
			if len(got) != 4 || got["acme "+recovered] == "" || got["ops acme/"+recovered] == "" {
				t.Fatalf("recovered: %v, want %s in acme and ops besides the failing ones", keys(got), recovered)
			}

			// Exhausted, for a delivery of w1 and one of the subscriber.
			now := time.Now().UTC()
			for _, d := range []models.Delivery{
				{ID: "d1", Tenant: "acme", WebhookID: "w1", WebhookName: "hook-w1", EventID: "e1", DocType: "Order", DocName: "SO-1", DocEvent: "on_submit"},
				{ID: "d2", Tenant: "ops", WebhookID: "alerts", WebhookName: "hook-alerts", EventID: "e2", DocType: models.OpsDocType, DocName: "hook-w1", DocEvent: "failing"},
			} {
				d.Status, d.Attempts, d.LastError, d.Method, d.URL, d.CreatedAt, d.UpdatedAt, d.MaxRetries = models.StatusExhausted, 4, "500 after 4 attempts", "POST", "http://127.0.0.1:1/", now, now, 3
				d.Payload, d.Headers = []byte("{}"), models.StringMap{}
				if err := db.Create(&d).Error; err != nil {
					t.Fatal(err)
				}
				for range 2 {
					if err := db.Transaction(func(tx *gorm.DB) error { return p.DeliveryExhausted(ctx, tx, d.ID, now) }); err != nil {
						t.Fatal(err)
					}
				}
			}
			got = outboxIDs(t, db)
			if len(got) != 6 || !strings.Contains(got["acme homing:exhausted:d1"], `"delivery_id":"d1"`) || !strings.Contains(got["acme homing:exhausted:d1"], `"attempts":4`) {
				t.Fatalf("exhausted: %v, want one event for d1 (and its copy) and none for the subscriber's d2", keys(got))
			}
		})
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
