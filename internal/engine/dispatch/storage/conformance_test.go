package storage

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/homingdev/homing/internal/testing/testenv"
	"github.com/homingdev/homing/models"
)

// The conformance suite: every behaviour of Store, held against each
// implementation (eachStore).

// FanOut asks the plan with the enabled webhooks of the event, in ID
// order, writes the planned rows as planned, and a second fan-out of the
// same event creates nothing and reports what exists.
func TestFanOutWritesEachPlannedRowOnce(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s Store, db *gorm.DB) {
		insertWebhook(t, db, "w3", "Sales Order", "on_submit", true)
		insertWebhook(t, db, "w1", "Sales Order", "on_submit", true)
		insertWebhook(t, db, "w2", "Sales Order", "on_submit", false)
		insertWebhook(t, db, "w4", "Sales Order", "on_cancel", true)
		ctx := context.Background()
		now := time.Now().UTC().Truncate(time.Microsecond)
		doc := `{"name":"SO-1"}`
		plan := func(prefix string, asked *[]string) Plan {
			return func(hooks []models.Webhook) []models.Delivery {
				*asked = nil
				var rows []models.Delivery
				for _, w := range hooks {
					*asked = append(*asked, w.ID)
					row := planned(prefix+w.ID, "ev-1", w.ID, now)
					row.URLDoc = &doc
					rows = append(rows, row)
				}
				return rows
			}
		}
		var asked []string
		w, err := s.FanOut(ctx, EventKey{DocType: "Sales Order", Event: "on_submit"}, plan("a-", &asked))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(asked, []string{"w1", "w3"}) || !w.Created || len(w.Rows) != 2 || w.Existing != nil {
			t.Fatalf("asked with %v; written %+v; want w1, w3 created", asked, w)
		}
		got := loadRow(t, db, "a-w3")
		want := w.Rows[1]
		if got.Status != models.StatusFailed || !got.NextRetry.Equal(*want.NextRetry) || string(got.Payload) != string(want.Payload) ||
			got.Headers["Content-Type"] != "application/json" || got.MaxRetries != 3 || !got.CreatedAt.Equal(now) ||
			got.URLDoc == nil || *got.URLDoc != doc || got.EventID != "ev-1" || got.WebhookName != "hook-w3" {
			t.Fatalf("row a-w3 reads %+v, want it as planned", got)
		}
		// Once more, with fresh IDs: nothing new, and what exists.
		if err := db.Model(&models.Delivery{}).Where("id = ?", "a-w1").Update("attempts", 1).Error; err != nil {
			t.Fatal(err)
		}
		w, err = s.FanOut(ctx, EventKey{DocType: "Sales Order", Event: "on_submit"}, plan("b-", &asked))
		if err != nil {
			t.Fatal(err)
		}
		var existing []string
		for _, r := range w.Existing {
			existing = append(existing, fmt.Sprintf("%s:%s:%s:%d", r.ID, r.WebhookID, r.Status, r.Attempts))
		}
		slices.Sort(existing)
		if w.Created || !slices.Equal(existing, []string{"a-w1:w1:Failed:1", "a-w3:w3:Failed:0"}) {
			t.Fatalf("second fan-out: created %v, existing %v", w.Created, existing)
		}
		var n int64
		if err := db.Model(&models.Delivery{}).Count(&n).Error; err != nil || n != 2 {
			t.Fatalf("%d rows (%v), want 2", n, err)
		}
		// An event no webhook takes asks nothing.
		called := false
		w, err = s.FanOut(ctx, EventKey{DocType: "Item", Event: "on_submit"}, func([]models.Webhook) []models.Delivery { called = true; return nil })
		if err != nil || called || len(w.Rows) != 0 {
			t.Fatalf("no webhooks: plan called %v, written %+v, %v", called, w, err)
		}
	})
}

// Every change to a webhook shows in the very next event: an edit, a new
// webhook, a disabled one, and a plan that takes nothing (whatever a store
// caches).
func TestFanOutSeesEveryWebhookChange(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s Store, db *gorm.DB) {
		insertWebhook(t, db, "wa", "Sales Order", "on_submit", true)
		if got := fanOutURLs(t, s, db, "ev-0"); !slices.Equal(got, []string{"http://127.0.0.1:1/wa"}) {
			t.Fatalf("ev-0 went to %v", got)
		}
		update := func(id, column string, value any) func() {
			return func() {
				if err := db.Model(&models.Webhook{}).Where("id = ?", id).Update(column, value).Error; err != nil {
					t.Fatal(err)
				}
			}
		}
		steps := []struct {
			change func()
			want   []string
		}{
			{update("wa", "request_url", "http://127.0.0.1:2/wa"), []string{"http://127.0.0.1:2/wa"}},
			{func() { insertWebhook(t, db, "wb", "Sales Order", "on_submit", true) }, []string{"http://127.0.0.1:2/wa", "http://127.0.0.1:1/wb"}},
			{update("wa", "enabled", false), []string{"http://127.0.0.1:1/wb"}},
			{update("wb", "condition", "false"), nil},
			{update("wb", "condition", ""), []string{"http://127.0.0.1:1/wb"}},
		}
		for i, st := range steps {
			st.change()
			event := fmt.Sprintf("ev-%d", i+1)
			if got := fanOutURLs(t, s, db, event); !slices.Equal(got, st.want) {
				t.Fatalf("step %d: %s went to %v, want %v", i, event, got, st.want)
			}
		}
	})
}

// A claim counts the attempt, sets the lease from the webhook's timeout,
// clears queued_at, and hands back the row, its webhook (headers and
// failing_since included) and the due time it replaced. A second claim of
// the same row takes nothing.
func TestClaimTakesAFreshRowOnce(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s Store, db *gorm.DB) {
		insertWebhook(t, db, "wa", "Sales Order", "on_submit", true)
		now := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
		if err := db.Model(&models.Webhook{}).Where("id = ?", "wa").Update("headers", models.StringMap{"X-Team": "sales"}).Error; err != nil {
			t.Fatal(err)
		}
		if err := db.Model(&models.WebhookHealth{}).Where("webhook_id = ?", "wa").Updates(map[string]any{"failing_since": now.Add(-time.Hour), "failures": 2}).Error; err != nil {
			t.Fatal(err)
		}
		row := planned("d1", "ev-1", "wa", now)
		row.QueuedAt = ptrTime(now)
		insertRows(t, db, row)
		ctx := context.Background()
		c, err := s.Claim(ctx, ClaimIn{ID: "d1", Mode: First, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		lease := now.Add(time.Second + LeaseMargin)
		if !c.Claimed || !c.Found || c.Row.Attempts != 1 || !c.Row.NextRetry.Equal(lease) || !sameTime(c.PrevNext, row.NextRetry) ||
			c.Row.Status != models.StatusFailed || string(c.Row.Payload) != string(row.Payload) || c.Row.Headers["Content-Type"] != "application/json" {
			t.Fatalf("claim: %+v", c)
		}
		if c.Hook == nil || c.Hook.ID != "wa" || c.Hook.Headers["X-Team"] != "sales" || !sameTime(c.Hook.FailingSince, ptrTime(now.Add(-time.Hour))) ||
			c.Hook.TimeoutMS != 1000 || c.Hook.RequestURL != "http://127.0.0.1:1/wa" || !c.Hook.Enabled {
			t.Fatalf("claimed webhook: %+v", c.Hook)
		}
		got := loadRow(t, db, "d1")
		if got.Attempts != 1 || !got.NextRetry.Equal(lease) || got.QueuedAt != nil || !got.UpdatedAt.Equal(now) {
			t.Fatalf("claimed row reads attempts %d next %v queued %v updated %v", got.Attempts, got.NextRetry, got.QueuedAt, got.UpdatedAt)
		}
		c, err = s.Claim(ctx, ClaimIn{ID: "d1", Mode: First, Now: now})
		if err != nil || c.Claimed || !c.Found || c.Row.Attempts != 1 {
			t.Fatalf("second claim: %+v, %v", c, err)
		}
	})
}

// Of many claims of one row at once, exactly one takes it.
func TestConcurrentClaimsTakeARowOnce(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s Store, db *gorm.DB) {
		insertWebhook(t, db, "wa", "Sales Order", "on_submit", true)
		now := time.Now().UTC().Truncate(time.Microsecond)
		due := planned("d1", "ev-1", "wa", now)
		due.Attempts, due.NextRetry = 2, ptrTime(now.Add(-time.Second))
		insertRows(t, db, due)
		var (
			wg    sync.WaitGroup
			mu    sync.Mutex
			taken int
			errs  []error
		)
		for range 8 {
			wg.Go(func() {
				c, err := s.Claim(context.Background(), ClaimIn{ID: "d1", Mode: Retry, Now: now})
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errs = append(errs, err)
				}
				if c.Claimed {
					taken++
				}
			})
		}
		wg.Wait()
		if len(errs) > 0 || taken != 1 {
			t.Fatalf("%d claims took the row (errors %v), want 1", taken, errs)
		}
		if got := loadRow(t, db, "d1"); got.Attempts != 3 {
			t.Fatalf("attempts %d, want 3", got.Attempts)
		}
	})
}

// A claim takes nothing it may not, changes nothing then, and says what it
// saw, for the caller to tell why.
func TestClaimRefusesWhatItMayNotTake(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s Store, db *gorm.DB) {
		now := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
		insertWebhook(t, db, "on", "Sales Order", "on_submit", true)
		insertWebhook(t, db, "off", "Sales Order", "on_submit", false)
		insertWebhook(t, db, "sick", "Sales Order", "on_submit", true)
		insertWebhook(t, db, "gone", "Sales Order", "on_submit", true)
		if err := db.Model(&models.Webhook{}).Where("id = ?", "off").Update("disabled_reason", "by hand").Error; err != nil {
			t.Fatal(err)
		}
		if err := db.Model(&models.WebhookHealth{}).Where("webhook_id = ?", "sick").
			Updates(map[string]any{"failing_since": now.Add(-time.Hour), "failures": models.FailingAfter, "probe_id": "probe"}).Error; err != nil {
			t.Fatal(err)
		}
		retry := func(id, webhook string, due time.Time) models.Delivery {
			r := planned(id, "ev-"+id, webhook, now.Add(-time.Hour))
			r.Attempts, r.NextRetry = 1, &due
			return r
		}
		insertRows(t, db,
			retry("notdue", "on", now.Add(time.Second)),
			retry("attempted", "on", now.Add(-time.Second)),
			retry("disabled", "off", now.Add(-time.Second)),
			retry("orphan", "gone", now.Add(-time.Second)),
			retry("held", "sick", now.Add(-time.Second)),
			retry("probe", "sick", now.Add(-time.Second)),
		)
		if err := db.Where("id = ?", "gone").Delete(&models.Webhook{}).Error; err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		claim := func(id string, mode Mode) Claim {
			t.Helper()
			c, err := s.Claim(ctx, ClaimIn{ID: id, Mode: mode, Now: now})
			if err != nil {
				t.Fatal(err)
			}
			return c
		}
		if c := claim("missing", First); c.Claimed || c.Found {
			t.Errorf("missing: %+v", c)
		}
		if c := claim("notdue", Retry); c.Claimed || !c.Found || c.Row.Attempts != 1 || c.Hook == nil || !c.Hook.Enabled {
			t.Errorf("not due: %+v", c)
		}
		if c := claim("attempted", First); c.Claimed || !c.Found || c.Row.Attempts != 1 {
			t.Errorf("a first attempt of a row attempted: %+v", c)
		}
		if c := claim("disabled", Retry); c.Claimed || c.Hook == nil || c.Hook.Enabled || c.Hook.DisabledReason != "by hand" {
			t.Errorf("disabled webhook: claimed %v, hook %+v", c.Claimed, c.Hook)
		}
		if c := claim("orphan", Retry); c.Claimed || !c.Found || c.Hook != nil {
			t.Errorf("deleted webhook: claimed %v, hook %+v", c.Claimed, c.Hook)
		}
		if c := claim("held", Retry); c.Claimed || c.Health.Failures != models.FailingAfter || c.Health.ProbeID == nil || c.Hook.FailingSince == nil {
			t.Errorf("held: claimed %v, health %+v", c.Claimed, c.Health)
		}
		for _, id := range []string{"notdue", "attempted", "disabled", "orphan", "held"} {
			if got := loadRow(t, db, id); got.Attempts != 1 {
				t.Errorf("%s: attempts %d after a refused claim", id, got.Attempts)
			}
		}
		if c := claim("probe", Retry); !c.Claimed || c.Row.Attempts != 2 {
			t.Errorf("the probe of a failing webhook: %+v", c)
		}
	})
}

// A Sync claim takes an unattempted Exhausted row: it counts the attempt
// and sets no lease (the row stays final until its outcome is recorded).
func TestClaimSyncTakesAFinalRow(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s Store, db *gorm.DB) {
		insertWebhook(t, db, "wa", "Sales Order", "on_submit", true)
		now := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
		row := planned("d1", "ev-1", "wa", now)
		row.Status, row.NextRetry, row.LastError = models.StatusExhausted, nil, "pending"
		insertRows(t, db, row)
		c, err := s.Claim(context.Background(), ClaimIn{ID: "d1", Mode: Sync, Now: now})
		if err != nil || !c.Claimed || c.Row.Attempts != 1 || c.Row.NextRetry != nil || c.Row.Status != models.StatusExhausted {
			t.Fatalf("sync claim: %+v, %v", c, err)
		}
		if got := loadRow(t, db, "d1"); got.Attempts != 1 || got.NextRetry != nil {
			t.Fatalf("row: attempts %d next %v", got.Attempts, got.NextRetry)
		}
		if c, err := s.Claim(context.Background(), ClaimIn{ID: "d1", Mode: Sync, Now: now}); err != nil || c.Claimed {
			t.Fatalf("second sync claim: %+v, %v", c, err)
		}
	})
}

// Release gives a claim back as if it had never been taken, once: the row
// is due again with its attempt uncounted, and a release of a row that has
// moved on changes nothing.
func TestReleaseGivesTheClaimBack(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s Store, db *gorm.DB) {
		insertWebhook(t, db, "wa", "Sales Order", "on_submit", true)
		now := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
		row := planned("d1", "ev-1", "wa", now)
		row.Attempts, row.NextRetry = 1, ptrTime(now.Add(-time.Minute))
		insertRows(t, db, row)
		ctx := context.Background()
		c, err := s.Claim(ctx, ClaimIn{ID: "d1", Mode: Retry, Now: now})
		if err != nil || !c.Claimed {
			t.Fatalf("claim: %+v, %v", c, err)
		}
		if err := s.Release(ctx, c.Row, c.PrevNext, now.Add(time.Second)); err != nil {
			t.Fatal(err)
		}
		got := loadRow(t, db, "d1")
		if got.Attempts != 1 || !sameTime(got.NextRetry, row.NextRetry) || !got.UpdatedAt.Equal(now.Add(time.Second)) {
			t.Fatalf("released row: attempts %d next %v updated %v", got.Attempts, got.NextRetry, got.UpdatedAt)
		}
		if err := s.Release(ctx, c.Row, ptrTime(now.Add(time.Hour)), now); err != nil {
			t.Fatal(err)
		}
		if again := loadRow(t, db, "d1"); again.Attempts != 1 || !sameTime(again.NextRetry, row.NextRetry) {
			t.Fatalf("a second release moved the row: attempts %d next %v", again.Attempts, again.NextRetry)
		}
	})
}

// Park gives a claim back due now with its attempt uncounted and the row
// marked queued now, so that no sweep takes it while the process that
// parked it resumes it; a park of a row that has moved on changes nothing.
func TestParkGivesTheClaimBackMarkedQueued(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s Store, db *gorm.DB) {
		insertWebhook(t, db, "wa", "Sales Order", "on_submit", true)
		now := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
		row := planned("d1", "ev-1", "wa", now)
		row.Attempts, row.NextRetry = 1, ptrTime(now.Add(-time.Minute))
		insertRows(t, db, row)
		ctx := context.Background()
		c, err := s.Claim(ctx, ClaimIn{ID: "d1", Mode: Retry, Now: now})
		if err != nil || !c.Claimed {
			t.Fatalf("claim: %+v, %v", c, err)
		}
		at := now.Add(time.Second)
		if err := s.Park(ctx, c.Row, at); err != nil {
			t.Fatal(err)
		}
		got := loadRow(t, db, "d1")
		if got.Status != models.StatusFailed || got.Attempts != 1 || !sameTime(got.NextRetry, &at) || !sameTime(got.QueuedAt, &at) || !got.UpdatedAt.Equal(at) {
			t.Fatalf("parked row: %s, attempts %d, next %v, queued %v, updated %v; want Failed, 1, all %v", got.Status, got.Attempts, got.NextRetry, got.QueuedAt, got.UpdatedAt, at)
		}
		if err := s.Park(ctx, c.Row, at.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		if again := loadRow(t, db, "d1"); again.Attempts != 1 || !sameTime(again.NextRetry, &at) {
			t.Fatalf("a second park moved the row: attempts %d next %v", again.Attempts, again.NextRetry)
		}
	})
}

// Record writes the history row whatever happens, and the delivery's new
// state only while its fence (status and attempt count) holds.
func TestRecordFencesTheDelivery(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s Store, db *gorm.DB) {
		insertWebhook(t, db, "wa", "Sales Order", "on_submit", true)
		now := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
		rows := []models.Delivery{planned("d1", "ev-1", "wa", now), planned("d2", "ev-2", "wa", now)}
		rows[0].Attempts, rows[1].Attempts = 1, 1
		insertRows(t, db, rows...)
		code := 200
		outcome := func(id string, attempt int) Outcome {
			return Outcome{
				Attempt: models.Attempt{DeliveryID: id, Attempt: attempt, At: now, Method: "PUT", URL: "http://127.0.0.1:1/x",
					RequestHeaders: models.StringMap{"Webhook-Id": id}, StatusCode: &code, DurationMS: 3, Class: "2xx", Response: "ok"},
				FromStatus: models.StatusFailed, Status: models.StatusDelivered, LastResponse: "ok body", UpdatedAt: now.Add(time.Second),
				WebhookID: "wa", Health: HealthOK,
			}
		}
		ctx := context.Background()
		if rec, err := s.Record(ctx, outcome("d1", 1)); err != nil || !rec.Applied {
			t.Fatalf("record d1: %+v, %v", rec, err)
		}
		if rec, err := s.Record(ctx, outcome("d2", 7)); err != nil || rec.Applied {
			t.Fatalf("record d2 past its fence: %+v, %v", rec, err)
		}
		d1, d2 := loadRow(t, db, "d1"), loadRow(t, db, "d2")
		if d1.Status != models.StatusDelivered || d1.NextRetry != nil || d1.LastStatusCode == nil || *d1.LastStatusCode != 200 ||
			d1.URL != "http://127.0.0.1:1/x" || d1.Method != "PUT" || d1.LastResponse != "ok body" || !d1.UpdatedAt.Equal(now.Add(time.Second)) {
			t.Fatalf("d1 reads %+v", d1)
		}
		if d2.Status != models.StatusFailed || d2.Attempts != 1 || d2.LastStatusCode != nil {
			t.Fatalf("d2 moved past its fence: %+v", d2)
		}
		var history []models.Attempt
		if err := db.Order("delivery_id").Find(&history).Error; err != nil {
			t.Fatal(err)
		}
		if len(history) != 2 || history[0].RequestHeaders["Webhook-Id"] != "d1" || history[0].Class != "2xx" ||
			history[0].DurationMS != 3 || !history[0].At.Equal(now) || history[1].Attempt != 7 {
			t.Fatalf("history %+v, want both attempts", history)
		}
	})
}

// An outcome that disables its webhook does so in the same transaction,
// and exhausts the webhook's other pending deliveries.
func TestRecordDisablesTheWebhook(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s Store, db *gorm.DB) {
		insertWebhook(t, db, "wa", "Sales Order", "on_submit", true)
		insertWebhook(t, db, "wb", "Sales Order", "on_submit", true)
		now := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
		rows := []models.Delivery{planned("d1", "ev-1", "wa", now), planned("d2", "ev-2", "wa", now), planned("d3", "ev-3", "wb", now)}
		rows[0].Attempts = 1
		insertRows(t, db, rows...)
		code := 410
		rec, err := s.Record(context.Background(), Outcome{
			Attempt:    models.Attempt{DeliveryID: "d1", Attempt: 1, At: now, Method: "POST", URL: "http://127.0.0.1:1/wa", RequestHeaders: models.StringMap{}, StatusCode: &code, Class: "4xx"},
			FromStatus: models.StatusFailed, Status: models.StatusExhausted, LastError: "gone", UpdatedAt: now,
			WebhookID: "wa", Health: HealthFailure, Disable: "receiver answered 410 Gone",
		})
		if err != nil || !rec.Applied || rec.Exhausted != 1 {
			t.Fatalf("record: %+v, %v; want applied and d2 exhausted", rec, err)
		}
		var w models.Webhook
		if err := db.Where("id = ?", "wa").Take(&w).Error; err != nil {
			t.Fatal(err)
		}
		if w.Enabled || w.DisabledReason != "receiver answered 410 Gone" {
			t.Fatalf("webhook: enabled %v reason %q", w.Enabled, w.DisabledReason)
		}
		if d1 := loadRow(t, db, "d1"); d1.Status != models.StatusExhausted || d1.LastError != "gone" {
			t.Fatalf("d1: %s %q", d1.Status, d1.LastError)
		}
		if d2 := loadRow(t, db, "d2"); d2.Status != models.StatusExhausted || d2.NextRetry != nil || d2.LastError != "webhook disabled: receiver answered 410 Gone" {
			t.Fatalf("d2: %s %v %q", d2.Status, d2.NextRetry, d2.LastError)
		}
		if d3 := loadRow(t, db, "d3"); d3.Status != models.StatusFailed {
			t.Fatalf("another webhook's delivery: %s", d3.Status)
		}
	})
}

// The health rule (health.go): the same attempts leave the same
// failing_since and failures in every store, and the PostgreSQL statement
// leaves the same whether it gets them one at a time or in one batch. The
// reference is GORM's Go, one attempt per transaction.
func TestHealthRule(t *testing.T) {
	t.Parallel()
	const (
		F = HealthFailure
		K = HealthOK
		S = HealthSilent
	)
	cases := [][]HealthSignal{
		{F},
		{K},
		{F, F, F, F, F, F},
		{F, F, K},
		{F, K, F, F},
		{K, F, S, F},
		{F, F, F, F, F, K, F},
		{S, S},
	}
	t0 := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Minute) }
	outcomes := func(t *testing.T, db *gorm.DB, signals []HealthSignal) []Outcome {
		t.Helper()
		insertWebhook(t, db, "w", "Sales Order", "on_submit", true)
		// A probe, to see a success clear it.
		if err := db.Model(&models.WebhookHealth{}).Where("webhook_id = ?", "w").Updates(map[string]any{"probe_id": "p", "probe_at": t0}).Error; err != nil {
			t.Fatal(err)
		}
		var outs []Outcome
		for j, sig := range signals {
			id := fmt.Sprintf("d%d", j)
			row := planned(id, "ev-"+id, "w", t0)
			row.Attempts = 1
			insertRows(t, db, row)
			outs = append(outs, Outcome{
				Attempt:    models.Attempt{DeliveryID: id, Attempt: 1, At: at(j), Method: "POST", URL: row.URL, RequestHeaders: models.StringMap{}},
				FromStatus: models.StatusFailed, Status: models.StatusFailed, NextRetry: ptrTime(at(60)), UpdatedAt: at(j),
				WebhookID: "w", Health: sig,
			})
		}
		return outs
	}
	for _, signals := range cases {
		t.Run(fmt.Sprint(signals), func(t *testing.T) {
			t.Parallel()
			ref := testenv.SQLite(t)
			for _, o := range outcomes(t, ref, signals) {
				if _, err := NewGORM(ref).Record(context.Background(), o); err != nil {
					t.Fatal(err)
				}
			}
			want := readHealth(t, ref, "w")
			check := func(name string, got models.WebhookHealth) {
				t.Helper()
				if got.Failures != want.Failures || !sameTime(got.FailingSince, want.FailingSince) || (got.ProbeID == nil) != (want.ProbeID == nil) {
					t.Errorf("%s left failures %d since %v probe %v; the reference left %d since %v probe %v",
						name, got.Failures, got.FailingSince, got.ProbeID, want.Failures, want.FailingSince, want.ProbeID)
				}
			}
			for _, impl := range implementations[1:] {
				s, db := impl.open(t)
				for _, o := range outcomes(t, db, signals) {
					if _, err := s.Record(context.Background(), o); err != nil {
						t.Fatal(err)
					}
				}
				check(impl.name, readHealth(t, db, "w"))
			}
			db, b := batchedFor(t)
			if _, err := b.runRecord(context.Background(), outcomes(t, db, signals)); err != nil {
				t.Fatal(err)
			}
			check("postgres, one batch", readHealth(t, db, "w"))
		})
	}
}

// The statements that end a claim without a request, and the reads.
func TestAbandonHandBackNotSentAndReads(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s Store, db *gorm.DB) {
		insertWebhook(t, db, "wa", "Sales Order", "on_submit", true)
		now := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
		a, b, c := planned("d1", "ev-1", "wa", now), planned("d2", "ev-1", "wb", now), planned("d3", "ev-2", "wa", now)
		b.WebhookName = "a-first"
		c.Status, c.NextRetry, c.LastError = models.StatusDelivered, nil, ""
		a.QueuedAt, c.QueuedAt = ptrTime(now), ptrTime(now)
		insertRows(t, db, a, b, c)
		ctx := context.Background()

		if ok, err := s.Abandon(ctx, b, "webhook deleted", now.Add(time.Second)); err != nil || !ok {
			t.Fatalf("abandon: %v, %v", ok, err)
		}
		if got := loadRow(t, db, "d2"); got.Status != models.StatusExhausted || got.NextRetry != nil || got.LastError != "webhook deleted" {
			t.Fatalf("abandoned row: %+v", got)
		}
		if ok, err := s.Abandon(ctx, b, "again", now); err != nil || ok {
			t.Fatalf("abandon of a row that moved on: %v, %v", ok, err)
		}

		// HandBack is fenced on the row as read: a stale one (a claim
		// counted an attempt since) changes nothing, so that the claim
		// keeps its lease; the row as it is is made due by now and
		// unqueued.
		stale := a
		stale.Attempts = 1
		if err := s.HandBack(ctx, stale, now.Add(-time.Hour)); err != nil {
			t.Fatal(err)
		}
		if got := loadRow(t, db, "d1"); got.QueuedAt == nil || !got.NextRetry.Equal(*a.NextRetry) {
			t.Fatalf("HandBack of a row that moved on changed it: queued %v, due %v", got.QueuedAt, got.NextRetry)
		}
		if err := s.HandBack(ctx, a, now); err != nil {
			t.Fatal(err)
		}
		if err := s.HandBack(ctx, c, now); err != nil {
			t.Fatal(err)
		}
		if got := loadRow(t, db, "d1"); got.QueuedAt != nil || !got.NextRetry.Equal(now) {
			t.Fatalf("handed back: queued %v, due %v; want unqueued and due by %v", got.QueuedAt, got.NextRetry, now)
		}
		if loadRow(t, db, "d3").QueuedAt == nil {
			t.Fatal("HandBack must clear queued_at of a Failed row, and only of one")
		}
		// A row due already keeps its due time.
		if err := s.HandBack(ctx, loadRow(t, db, "d1"), now.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		if got := loadRow(t, db, "d1"); !got.NextRetry.Equal(now) {
			t.Fatalf("HandBack moved a due row's next_retry to %v, want it kept at %v", got.NextRetry, now)
		}

		if err := s.NotSent(ctx, "d1", "not sent: key"); err != nil {
			t.Fatal(err)
		}
		if err := s.NotSent(ctx, "d3", "not sent: key"); err != nil {
			t.Fatal(err)
		}
		if got := loadRow(t, db, "d1"); got.LastError != "not sent: key" || got.Attempts != 0 || got.Status != models.StatusFailed {
			t.Fatalf("not sent: %+v", got)
		}
		if got := loadRow(t, db, "d3"); got.LastError != "" {
			t.Fatalf("NotSent wrote into a Delivered row: %q", got.LastError)
		}

		rows, err := s.EventDeliveries(ctx, "", "ev-1")
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, r := range rows {
			names = append(names, r.WebhookName+":"+r.Status+":"+r.LastError)
		}
		if !slices.Equal(names, []string{"a-first:Exhausted:webhook deleted", "hook-wa:Failed:not sent: key"}) {
			t.Fatalf("deliveries of ev-1: %v", names)
		}

		if h, err := s.Health(ctx, "wa"); err != nil || h.Failures != 0 || h.FailingSince != nil {
			t.Fatalf("health of a healthy webhook: %+v, %v", h, err)
		}
		if h, err := s.Health(ctx, "nope"); err != nil || h.Failures != 0 {
			t.Fatalf("health of no webhook: %+v, %v", h, err)
		}
	})
}

// Fan-outs of one event racing each other create each row once: between
// them, every planned row is created by exactly one, and the others report
// it as existing.
func TestConcurrentFanOutsCreateEachRowOnce(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s Store, db *gorm.DB) {
		for _, id := range []string{"wa", "wb", "wc"} {
			insertWebhook(t, db, id, "Sales Order", "on_submit", true)
		}
		const racers = 6
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			created = map[string]int{} // row ID → how many fan-outs say they created it
			errs    []error
		)
		for r := range racers {
			wg.Go(func() {
				w, err := s.FanOut(context.Background(), EventKey{DocType: "Sales Order", Event: "on_submit"}, func(hooks []models.Webhook) []models.Delivery {
					now := time.Now().UTC().Truncate(time.Microsecond)
					var rows []models.Delivery
					for _, h := range hooks {
						rows = append(rows, planned(fmt.Sprintf("r%d-%s", r, h.ID), "ev-1", h.ID, now))
					}
					return rows
				})
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errs = append(errs, err)
					return
				}
				if w.Created {
					for _, row := range w.Rows {
						created[row.ID]++
					}
					return
				}
				mine := map[string]bool{}
				for _, row := range w.Rows {
					mine[row.ID] = true
				}
				for _, e := range w.Existing {
					if mine[e.ID] {
						created[e.ID]++ // this fan-out's own row, among others'
					}
				}
			})
		}
		wg.Wait()
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		var ids []string
		if err := db.Model(&models.Delivery{}).Order("webhook_id").Pluck("id", &ids).Error; err != nil {
			t.Fatal(err)
		}
		if len(ids) != 3 {
			t.Fatalf("%d rows for one event and three webhooks: %v", len(ids), ids)
		}
		for _, id := range ids {
			if created[id] != 1 {
				t.Errorf("row %s was reported created by %d fan-outs, want 1 (%v)", id, created[id], created)
			}
		}
		if len(created) != 3 {
			t.Errorf("fan-outs reported rows that do not exist as theirs: %v", created)
		}
	})
}
