package inspect_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/homingdev/homing/internal/ops/inspect"
	"github.com/homingdev/homing/internal/testing/testenv"
	"github.com/homingdev/homing/models"
)

// TestOverviewAndSuccessRate: the overview counts only recent rows by
// status, finds the due backlog and the troubled webhooks with their last
// error, and the success rate counts only the window's attempts of the
// webhook asked for, on both databases.
func TestOverviewAndSuccessRate(t *testing.T) {
	t.Parallel()
	for name, open := range testenv.Backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := open(t)
			ctx := context.Background()
			now := t0.Add(48 * time.Hour)
			hooks := []models.Webhook{
				{ID: "w-ok", Name: "ok", DocType: "Note", DocEvent: "on_update", RequestURL: "https://example.com", RequestMethod: "POST", RequestStructure: "json", SignatureScheme: "none", Queue: "default", Enabled: true, MaxRetries: 3, TimeoutMS: 1000, CreatedAt: t0, UpdatedAt: t0},
				{ID: "w-down", Name: "down", DocType: "Note", DocEvent: "on_update", RequestURL: "https://example.com", RequestMethod: "POST", RequestStructure: "json", SignatureScheme: "none", Queue: "default", Enabled: true, MaxRetries: 3, TimeoutMS: 1000, CreatedAt: t0, UpdatedAt: t0},
				{ID: "w-off", Name: "off", DocType: "Note", DocEvent: "on_update", RequestURL: "https://example.com", RequestMethod: "POST", RequestStructure: "json", SignatureScheme: "none", Queue: "default", Enabled: false, DisabledReason: "receiver answered 410 Gone", MaxRetries: 3, TimeoutMS: 1000, CreatedAt: t0, UpdatedAt: t0},
			}
			if err := db.Create(&hooks).Error; err != nil {
				t.Fatal(err)
			}
			since := now.Add(-3 * time.Hour)
			if err := db.Model(&models.WebhookHealth{}).Where("webhook_id = ?", "w-down").
				Updates(map[string]any{"failing_since": since, "failures": 2}).Error; err != nil {
				t.Fatal(err)
			}
			old := addDelivery(t, db, "ok", now.Add(-30*time.Hour))       // outside the day
			dayOld := addDelivery(t, db, "ok", now.Add(-5*time.Hour))     // in the day only
			due := addDelivery(t, db, "down", now.Add(-30*time.Minute))   // in the hour, Failed and due
			later := addDelivery(t, db, "down", now.Add(-10*time.Minute)) // in the hour, Failed, not due
			gone := addDelivery(t, db, "off", now.Add(-20*time.Hour))     // Exhausted
			set := func(id string, v map[string]any) {
				t.Helper()
				if err := db.Model(&models.Delivery{}).Where("id = ?", id).Updates(v).Error; err != nil {
					t.Fatal(err)
				}
			}
			set(due, map[string]any{"status": models.StatusFailed, "next_retry": now.Add(-time.Minute), "last_error": "old error"})
			set(later, map[string]any{"status": models.StatusFailed, "next_retry": now.Add(time.Hour), "last_error": "HTTP 503"})
			set(gone, map[string]any{"status": models.StatusExhausted, "last_error": "webhook disabled: receiver answered 410 Gone"})
			code := 200
			for _, a := range []models.Attempt{
				{DeliveryID: old, Attempt: 1, At: now.Add(-30 * time.Hour), Class: "2xx", StatusCode: &code, Method: "POST", URL: "u"}, // outside 24 h
				{DeliveryID: dayOld, Attempt: 1, At: now.Add(-5 * time.Hour), Class: "2xx", StatusCode: &code, Method: "POST", URL: "u"},
				{DeliveryID: due, Attempt: 1, At: now.Add(-30 * time.Minute), Class: "5xx", Method: "POST", URL: "u"},
				{DeliveryID: later, Attempt: 1, At: now.Add(-10 * time.Minute), Class: "5xx", Method: "POST", URL: "u"},
			} {
				if err := db.Create(&a).Error; err != nil {
					t.Fatal(err)
				}
			}

			o, err := inspect.ReadOverview(ctx, db, inspect.AllTenants, now)
			if err != nil {
				t.Fatal(err)
			}
			if o.LastHour[models.StatusFailed] != 2 || o.LastHour[models.StatusDelivered] != 0 || o.LastHour[models.StatusExhausted] != 0 {
				t.Errorf("last hour %v, want 2 Failed", o.LastHour)
			}
			if o.LastDay[models.StatusDelivered] != 1 || o.LastDay[models.StatusFailed] != 2 || o.LastDay[models.StatusExhausted] != 1 {
				t.Errorf("last day %v, want 1 Delivered, 2 Failed, 1 Exhausted", o.LastDay)
			}
			// Two are scheduled, one due: a retry waiting for its time counts.
			if o.Scheduled != 2 || o.NextRetry == nil || !o.NextRetry.Equal(now.Add(-time.Minute)) || o.Paused != 0 {
				t.Errorf("scheduled %d next %v paused %d, want 2, the due one's, 0", o.Scheduled, o.NextRetry, o.Paused)
			}
			if o.DueNow != 1 || o.OldestDue == nil || !o.OldestDue.Equal(now.Add(-time.Minute)) {
				t.Errorf("due %d oldest %v, want 1 due a minute ago", o.DueNow, o.OldestDue)
			}
			if len(o.Troubled) != 2 || o.Troubled[0].Webhook != "down" || o.Troubled[1].Webhook != "off" {
				t.Fatalf("troubled %+v, want down and off", o.Troubled)
			}
			if d := o.Troubled[0]; !d.Enabled || d.State != models.HealthDegraded || d.FailingSince == nil || !d.FailingSince.Equal(since) || d.Failures != 2 || d.LastError != "HTTP 503" {
				t.Errorf("down: %+v, want degraded (2 failures) since %s with its newest delivery's error", d, since)
			}
			if off := o.Troubled[1]; off.Enabled || off.State != "disabled" || off.DisabledReason != "receiver answered 410 Gone" || off.LastError == "" || off.DisabledAt == nil || !off.DisabledAt.Equal(t0) {
				t.Errorf("off: %+v", off)
			}

			for hook, want := range map[string]struct{ attempts, ok int64 }{"ok": {1, 1}, "down": {2, 0}, "off": {0, 0}} {
				r, err := inspect.WebhookSuccessRate(ctx, db, "", hook, now, 24*time.Hour)
				if err != nil {
					t.Fatal(err)
				}
				if r.Attempts != want.attempts || r.Succeeded != want.ok || (r.Attempts == 0) != (r.Rate == nil) {
					t.Errorf("%s: %+v, want %d attempts, %d ok", hook, r, want.attempts, want.ok)
				}
			}
		})
	}
}

// TestParseFilterNamesTheParameter: the API and the console point at the
// parameter at fault.
func TestParseFilterNamesTheParameter(t *testing.T) {
	t.Parallel()
	for param, q := range map[string]map[string]string{
		"status":   {"status": "Lost"},
		"doc_name": {"doc_name": "SO-1"},
		"since":    {"since": "yesterday"},
		"until":    {"since": "2026-12-03T00:00:00Z", "until": "2026-12-02T00:00:00Z"},
	} {
		_, err := inspect.ParseFilter(q)
		var pe *inspect.ParamError
		if !errors.As(err, &pe) || pe.Param != param {
			t.Errorf("%v: %v, want a ParamError naming %s", q, err, param)
		}
	}
	f, err := inspect.ParseFilter(map[string]string{"status": "failed", "webhook": "w", "since": "2026-12-03T00:00:00Z", "until": ""})
	if err != nil || f.Status != models.StatusFailed || f.Webhook != "w" || f.Since.IsZero() || !f.Until.IsZero() {
		t.Errorf("%+v, %v", f, err)
	}
}

// TestOverviewCountsScheduledRetries: six deliveries waiting minutes for
// their retry are six scheduled retries, none due, the soonest named; a
// disabled tenant's are counted as paused, not owed, and another tenant's
// not at all. On real PostgreSQL (issue 38: the overview read "due retries
// 0 / none due" while six events were waiting).
func TestOverviewCountsScheduledRetries(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	ctx := context.Background()
	now := t0.Add(48 * time.Hour)
	for _, name := range []string{"acme", "paused"} {
		if err := db.Create(&models.Tenant{Name: name, Enabled: name == "acme", CreatedAt: t0, UpdatedAt: t0}).Error; err != nil {
			t.Fatal(err)
		}
	}
	failed := func(tenant string, next time.Time) {
		t.Helper()
		id := addDelivery(t, db, "down", now.Add(-10*time.Minute))
		if err := db.Model(&models.Delivery{}).Where("id = ?", id).
			Updates(map[string]any{"tenant": tenant, "status": models.StatusFailed, "attempts": 1, "max_retries": 3, "next_retry": next}).Error; err != nil {
			t.Fatal(err)
		}
	}
	for i := range 6 {
		failed("acme", now.Add(time.Duration(4+i)*time.Minute))
	}
	failed("paused", now.Add(-time.Minute))
	failed(models.DefaultTenant, now.Add(-time.Minute))

	o, err := inspect.ReadOverview(ctx, db, "acme", now)
	if err != nil {
		t.Fatal(err)
	}
	if o.Scheduled != 6 || o.NextRetry == nil || !o.NextRetry.Equal(now.Add(4*time.Minute)) || o.DueNow != 0 || o.OldestDue != nil || o.Paused != 0 {
		t.Errorf("acme: scheduled %d next %v due %d oldest %v paused %d; want 6 scheduled, the soonest in 4 min, none due or paused",
			o.Scheduled, o.NextRetry, o.DueNow, o.OldestDue, o.Paused)
	}
	if o, err = inspect.ReadOverview(ctx, db, "paused", now); err != nil {
		t.Fatal(err)
	}
	if o.Scheduled != 0 || o.DueNow != 0 || o.Paused != 1 {
		t.Errorf("paused tenant: scheduled %d due %d paused %d; want 0, 0, 1", o.Scheduled, o.DueNow, o.Paused)
	}
	if o, err = inspect.ReadOverview(ctx, db, inspect.AllTenants, now); err != nil {
		t.Fatal(err)
	}
	if o.Scheduled != 7 || o.DueNow != 1 || o.Paused != 1 || !o.NextRetry.Equal(now.Add(-time.Minute)) {
		t.Errorf("every tenant: scheduled %d due %d paused %d next %v; want 7, 1, 1, a minute ago", o.Scheduled, o.DueNow, o.Paused, o.NextRetry)
	}
}
