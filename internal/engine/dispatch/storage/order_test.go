package storage

import (
	"context"
	"slices"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/homingdev/homing/models"
)

// The ordering rule (order.go) on the stores that can hold ordered rows:
// the reference and the batched store, both on PostgreSQL (a webhook on
// SQLite cannot be ordered).
func eachOrderedStore(t *testing.T, test func(t *testing.T, s Store, db *gorm.DB)) {
	t.Helper()
	for _, impl := range implementations {
		if impl.name == "gorm-sqlite" {
			continue
		}
		t.Run(impl.name, func(t *testing.T) {
			t.Parallel()
			s, db := impl.open(t)
			test(t, s, db)
		})
	}
}

// orderedRow is a planned delivery of doc to webhook, at seq in its key.
func orderedRow(id, webhook, doc string, seq int64, now time.Time) models.Delivery {
	r := planned(id, "ev-"+id, webhook, now)
	r.DocName, r.AcceptSeq, r.Tenant = doc, &seq, models.DefaultTenant
	return r
}

func delivered(id string, attempt int, now time.Time, key *OrderKey) Outcome {
	code := 200
	return Outcome{
		Attempt: models.Attempt{DeliveryID: id, Attempt: attempt, At: now, Method: "POST", URL: "http://127.0.0.1:1/",
			RequestHeaders: models.StringMap{}, StatusCode: &code, Class: "2xx"},
		FromStatus: models.StatusFailed, Status: models.StatusDelivered, UpdatedAt: now, WebhookID: "wa", Health: HealthOK, Order: key,
	}
}

// A delivery is claimed only once every earlier delivery of its key is
// final; another document of the same webhook, and an unordered delivery
// of the same document, are not held. The head's final outcome wakes the
// next, due at once, in its own transaction.
func TestOrderedClaimWaitsForTheHeadOfItsKey(t *testing.T) {
	t.Parallel()
	eachOrderedStore(t, func(t *testing.T, s Store, db *gorm.DB) {
		insertWebhook(t, db, "wa", "Sales Order", "on_submit", true)
		ctx := context.Background()
		now := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
		v1 := orderedRow("v1", "wa", "SO-1", 10, now)
		v1.Attempts = 1 // in flight: its lease is in the future
		v2 := orderedRow("v2", "wa", "SO-1", 11, now)
		other := orderedRow("o1", "wa", "SO-2", 12, now)
		free := planned("u1", "ev-u1", "wa", now)
		free.DocName = "SO-1"
		insertRows(t, db, v1, v2, other, free)

		c, err := s.Claim(ctx, ClaimIn{ID: "v2", Mode: First, Now: now})
		if err != nil || c.Claimed || !c.Blocked || !c.Found {
			t.Fatalf("claim of v2 behind v1: claimed %v blocked %v (%v), want refused and blocked", c.Claimed, c.Blocked, err)
		}
		if id, _, err := WaitsFor(ctx, db, loadRow(t, db, "v2")); err != nil || id != "v1" {
			t.Fatalf("v2 waits for %q (%v), want v1", id, err)
		}
		for _, id := range []string{"o1", "u1"} {
			if c, err := s.Claim(ctx, ClaimIn{ID: id, Mode: First, Now: now}); err != nil || !c.Claimed {
				t.Fatalf("claim of %s: %+v, %v; another key or an unordered delivery is never held", id, c.Claimed, err)
			}
		}
		// The hand-back keeps Failed ⇔ next_retry: due at the recheck.
		if held, err := s.Hold(ctx, c.Row, now); err != nil || !held {
			t.Fatalf("hold v2: %v, %v", held, err)
		}
		if got := loadRow(t, db, "v2"); got.Status != models.StatusFailed || got.NextRetry == nil || !got.NextRetry.Equal(now.Add(OrderRecheck)) {
			t.Fatalf("v2 held: %s next_retry %v, want Failed due %v", got.Status, got.NextRetry, now.Add(OrderRecheck))
		}
		later := now.Add(time.Second)
		rec, err := s.Record(ctx, delivered("v1", 1, later, KeyOf(v1)))
		if err != nil || !rec.Applied || rec.Woken != "v2" {
			t.Fatalf("record v1 delivered: %+v, %v; want applied and v2 woken", rec, err)
		}
		if got := loadRow(t, db, "v2"); !got.NextRetry.Equal(later) {
			t.Fatalf("v2 woken due %v, want %v", got.NextRetry, later)
		}
		if id, _, _ := WaitsFor(ctx, db, loadRow(t, db, "v2")); id != "" {
			t.Fatalf("v2 still waits for %q", id)
		}
		if c, err := s.Claim(ctx, ClaimIn{ID: "v2", Mode: First, Now: later}); err != nil || !c.Claimed {
			t.Fatalf("claim of v2 after v1 delivered: %v, %v", c.Claimed, err)
		}
	})
}

// An Exhausted head releases its key too, and the wake never touches a
// row with an attempt counted (it may be in flight under its lease).
func TestExhaustedHeadWakesTheNextNeverOneInFlight(t *testing.T) {
	t.Parallel()
	eachOrderedStore(t, func(t *testing.T, s Store, db *gorm.DB) {
		insertWebhook(t, db, "wa", "Sales Order", "on_submit", true)
		ctx := context.Background()
		now := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
		v1, v2, v3 := orderedRow("v1", "wa", "SO-1", 1, now), orderedRow("v2", "wa", "SO-1", 2, now), orderedRow("v3", "wa", "SO-1", 3, now)
		v1.Attempts, v2.Attempts = 3, 1
		insertRows(t, db, v1, v2, v3)
		out := delivered("v1", 3, now, KeyOf(v1))
		out.Status, out.Health = models.StatusExhausted, HealthFailure
		rec, err := s.Record(ctx, out)
		if err != nil || !rec.Applied || rec.Woken != "" {
			t.Fatalf("record v1 exhausted: %+v, %v; want applied, v2 (attempted) not woken", rec, err)
		}
		if got := loadRow(t, db, "v2"); !got.NextRetry.Equal(*v2.NextRetry) {
			t.Fatalf("v2 (attempts 1) moved to %v", got.NextRetry)
		}
		out = delivered("v2", 1, now, KeyOf(v2))
		out.Status = models.StatusExhausted
		if rec, err := s.Record(ctx, out); err != nil || rec.Woken != "v3" {
			t.Fatalf("record v2 exhausted: %+v, %v; want v3 woken", rec, err)
		}
		// An abandoned head (webhook disabled) makes the next due too.
		v4 := orderedRow("v4", "wa", "SO-1", 4, now)
		insertRows(t, db, v4)
		if ok, err := s.Abandon(ctx, loadRow(t, db, "v3"), "webhook disabled", now); err != nil || !ok {
			t.Fatalf("abandon v3: %v, %v", ok, err)
		}
		if got := loadRow(t, db, "v4"); !got.NextRetry.Equal(now) {
			t.Fatalf("v4 after v3 abandoned due %v, want %v", got.NextRetry, now)
		}
	})
}

// Hold decides again under the key's lock: a row whose head became final
// after its claim was refused is due now, and Hold says so.
func TestHoldOfARowNoLongerHeldMakesItDue(t *testing.T) {
	t.Parallel()
	eachOrderedStore(t, func(t *testing.T, s Store, db *gorm.DB) {
		insertWebhook(t, db, "wa", "Sales Order", "on_submit", true)
		ctx := context.Background()
		now := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
		v1, v2 := orderedRow("v1", "wa", "SO-1", 1, now), orderedRow("v2", "wa", "SO-1", 2, now)
		insertRows(t, db, v1, v2)
		c, err := s.Claim(ctx, ClaimIn{ID: "v2", Mode: First, Now: now})
		if err != nil || c.Claimed || !c.Blocked {
			t.Fatalf("claim of v2: %+v, %v", c.Claimed, err)
		}
		// v1 is delivered between the refusal and the hand-back.
		if err := db.Model(&models.Delivery{}).Where("id = ?", "v1").Updates(map[string]any{"status": models.StatusDelivered, "next_retry": nil}).Error; err != nil {
			t.Fatal(err)
		}
		if held, err := s.Hold(ctx, c.Row, now); err != nil || held {
			t.Fatalf("hold v2 after v1 delivered: %v, %v; want not held", held, err)
		}
		if got := loadRow(t, db, "v2"); !got.NextRetry.Equal(now) {
			t.Fatalf("v2 due %v, want now", got.NextRetry)
		}
		// A wake that commits between a refusal and its hand-back: the
		// hand-back, fenced on the row as the claim read it, leaves the
		// woken row due.
		v3, v4 := orderedRow("v3", "wa", "SO-1", 3, now), orderedRow("v4", "wa", "SO-1", 4, now)
		v3.Attempts = 1
		insertRows(t, db, v3, v4)
		c, err = s.Claim(ctx, ClaimIn{ID: "v4", Mode: First, Now: now})
		if err != nil || c.Claimed || !c.Blocked {
			t.Fatalf("claim of v4 behind v3: %v, %v", c.Claimed, err)
		}
		// v2 is still Failed (attempts 0): make it final so that v3 heads.
		if err := db.Model(&models.Delivery{}).Where("id = ?", "v2").Updates(map[string]any{"status": models.StatusDelivered, "next_retry": nil}).Error; err != nil {
			t.Fatal(err)
		}
		later := now.Add(time.Second)
		if rec, err := s.Record(ctx, delivered("v3", 1, later, KeyOf(v3))); err != nil || rec.Woken != "v4" {
			t.Fatalf("record v3: %+v, %v; want v4 woken", rec, err)
		}
		if held, err := s.Hold(ctx, c.Row, now); err != nil || held {
			t.Fatalf("hold of v4 read before the wake: %v, %v; want not held", held, err)
		}
		if got := loadRow(t, db, "v4"); !got.NextRetry.Equal(later) {
			t.Fatalf("v4 due %v after a hold read before its wake, want %v (the wake's)", got.NextRetry, later)
		}
	})
}

// An event of the document accepted earlier (a lower outbox id) and not
// fanned out yet holds the later delivery, until its own delivery exists.
func TestAnEarlierEventNotFannedOutHoldsTheKey(t *testing.T) {
	t.Parallel()
	eachOrderedStore(t, func(t *testing.T, s Store, db *gorm.DB) {
		insertWebhook(t, db, "wa", "Sales Order", "on_submit", true)
		ctx := context.Background()
		now := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
		dt, dn, de := "Sales Order", "SO-1", "on_submit"
		early := models.OutboxEvent{Tenant: models.DefaultTenant, EventID: "ev-early", Payload: "{}", CreatedAt: now, DocType: &dt, DocName: &dn, DocEvent: &de}
		if err := db.Create(&early).Error; err != nil {
			t.Fatal(err)
		}
		v2 := orderedRow("v2", "wa", "SO-1", early.ID+1, now)
		insertRows(t, db, v2)
		c, err := s.Claim(ctx, ClaimIn{ID: "v2", Mode: First, Now: now})
		if err != nil || c.Claimed || !c.Blocked {
			t.Fatalf("claim of v2 behind an event not fanned out: claimed %v blocked %v (%v)", c.Claimed, c.Blocked, err)
		}
		if id, event, err := WaitsFor(ctx, db, loadRow(t, db, "v2")); err != nil || id != "ev-early" || !event {
			t.Fatalf("v2 waits for %q (event %v, %v), want event ev-early", id, event, err)
		}
		// Fanned out, delivered: its own row now says what holds.
		v1 := orderedRow("v1", "wa", "SO-1", early.ID, now)
		v1.EventID, v1.Status, v1.NextRetry = "ev-early", models.StatusDelivered, nil
		insertRows(t, db, v1)
		if c, err := s.Claim(ctx, ClaimIn{ID: "v2", Mode: First, Now: now}); err != nil || !c.Claimed {
			t.Fatalf("claim of v2 after the early event's delivery: %v, %v", c.Claimed, err)
		}
	})
}

// The fan-out writes an ordered row planned claimed unclaimed when an
// earlier delivery of its key is not final (Written.Blocked), draws a
// place for a row planned without one, and claims the head of a key.
func TestFanOutClaimsOnlyTheHeadOfAKey(t *testing.T) {
	t.Parallel()
	eachOrderedStore(t, func(t *testing.T, s Store, db *gorm.DB) {
		insertWebhook(t, db, "wa", "Sales Order", "on_submit", true)
		ctx := context.Background()
		now := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
		lease := now.Add(2 * time.Minute)
		claimedPlan := func(id, event, doc string, seq int64) Plan {
			return func(hooks []models.Webhook) []models.Delivery {
				r := orderedRow(id, "wa", doc, seq, now)
				r.EventID, r.Attempts, r.NextRetry = event, 1, &lease
				return []models.Delivery{r}
			}
		}
		key := EventKey{Tenant: models.DefaultTenant, DocType: "Sales Order", Event: "on_submit"}
		w, err := s.FanOut(ctx, key, claimedPlan("h1", "ev-1", "SO-1", 0))
		if err != nil || !w.Created || len(w.Blocked) != 0 {
			t.Fatalf("fan-out of the head: %+v, %v", w, err)
		}
		head := loadRow(t, db, "h1")
		if head.Attempts != 1 || head.AcceptSeq == nil || *head.AcceptSeq <= 0 {
			t.Fatalf("head: attempts %d seq %v, want claimed with a drawn place", head.Attempts, head.AcceptSeq)
		}
		w, err = s.FanOut(ctx, key, claimedPlan("h2", "ev-2", "SO-1", 0))
		if err != nil || !slices.Equal(w.Blocked, []string{"h2"}) || len(w.Held) != 0 {
			t.Fatalf("fan-out behind the head: %+v, %v; want h2 blocked", w, err)
		}
		if got := loadRow(t, db, "h2"); got.Attempts != 0 || got.NextRetry == nil || *got.AcceptSeq <= *head.AcceptSeq {
			t.Fatalf("h2: attempts %d next %v seq %v, want unclaimed, due, after the head", got.Attempts, got.NextRetry, got.AcceptSeq)
		}
		if got := loadRow(t, db, "h2"); !got.NextRetry.Equal(now.Add(OrderRecheck)) {
			t.Fatalf("h2 due %v, want the recheck %v", got.NextRetry, now.Add(OrderRecheck))
		}
		// Asked again once committed: still held while the head is not
		// final, released once it is.
		if free, err := s.Unblocked(ctx, []string{"h2"}); err != nil || len(free) != 0 {
			t.Fatalf("Unblocked(h2) behind a live head: %v, %v", free, err)
		}
		if err := db.Model(&models.Delivery{}).Where("id = ?", "h1").Updates(map[string]any{"status": models.StatusDelivered, "next_retry": nil}).Error; err != nil {
			t.Fatal(err)
		}
		if free, err := s.Unblocked(ctx, []string{"h2"}); err != nil || !slices.Equal(free, []string{"h2"}) {
			t.Fatalf("Unblocked(h2) after the head was delivered: %v, %v", free, err)
		}
		w, err = s.FanOut(ctx, key, claimedPlan("k1", "ev-3", "SO-2", 0))
		if err != nil || len(w.Blocked) != 0 || loadRow(t, db, "k1").Attempts != 1 {
			t.Fatalf("fan-out of another document: %+v, %v; want claimed", w, err)
		}
	})
}

// An event of a document that made no delivery of an ordered webhook (its
// condition was false) held the key's later deliveries while it waited in
// the outbox; once its outbox row is gone, WakeAfterEvent makes the first
// of them after its place due now, and only one never attempted.
func TestWakeAfterAnEventThatMadeNoDelivery(t *testing.T) {
	t.Parallel()
	eachOrderedStore(t, func(t *testing.T, s Store, db *gorm.DB) {
		insertWebhook(t, db, "wa", "Sales Order", "on_submit", true)
		ctx := context.Background()
		now := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
		dt, dn, de := "Sales Order", "SO-1", "on_submit"
		early := models.OutboxEvent{Tenant: models.DefaultTenant, EventID: "ev-early", Payload: "{}", CreatedAt: now, DocType: &dt, DocName: &dn, DocEvent: &de}
		if err := db.Create(&early).Error; err != nil {
			t.Fatal(err)
		}
		recheck := now.Add(OrderRecheck)
		v2 := orderedRow("v2", "wa", "SO-1", early.ID+1, now)
		v3 := orderedRow("v3", "wa", "SO-1", early.ID+2, now)
		other := orderedRow("o2", "wa", "SO-2", early.ID+1, now)
		for _, r := range []*models.Delivery{&v2, &v3, &other} {
			r.NextRetry = &recheck // as the fan-out writes a held row
		}
		insertRows(t, db, v2, v3, other)
		if c, err := s.Claim(ctx, ClaimIn{ID: "v2", Mode: First, Now: now}); err != nil || c.Claimed || !c.Blocked {
			t.Fatalf("claim of v2 while the early event waits: claimed %v blocked %v (%v)", c.Claimed, c.Blocked, err)
		}
		// Fanned out with no delivery of wa: its outbox row is released.
		if err := db.Delete(&models.OutboxEvent{}, early.ID).Error; err != nil {
			t.Fatal(err)
		}
		k := OrderKey{Tenant: models.DefaultTenant, WebhookID: "wa", DocType: "Sales Order", DocName: "SO-1"}
		at := now.Add(time.Second)
		id, err := s.WakeAfterEvent(ctx, k, early.ID, at)
		if err != nil || id != "v2" {
			t.Fatalf("WakeAfterEvent = %q, %v; want v2", id, err)
		}
		if got := loadRow(t, db, "v2"); !sameTime(got.NextRetry, &at) {
			t.Fatalf("v2 due %v, want now %v", got.NextRetry, at)
		}
		for _, id := range []string{"v3", "o2"} {
			if got := loadRow(t, db, id); !sameTime(got.NextRetry, &recheck) {
				t.Fatalf("%s due %v, want left at its recheck %v", id, got.NextRetry, recheck)
			}
		}
		if c, err := s.Claim(ctx, ClaimIn{ID: "v2", Mode: First, Now: at}); err != nil || !c.Claimed {
			t.Fatalf("claim of the woken v2: claimed %v (%v)", c.Claimed, err)
		}
		// v2 is in flight (an attempt counted): a wake after the same
		// place touches nothing.
		if id, err := s.WakeAfterEvent(ctx, k, early.ID, at); err != nil || id != "" {
			t.Fatalf("WakeAfterEvent with the next row in flight = %q, %v; want none", id, err)
		}
	})
}
