package storage

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/homingdev/homing/internal/testing/testenv"
	"github.com/homingdev/homing/models"
)

// batchedFor opens a fresh PostgreSQL database and its batched statements.
func batchedFor(t testing.TB) (*gorm.DB, *batch) {
	t.Helper()
	db := testenv.Postgres(t)
	sqlDB, err := db.DB()
	if err != nil {
		t.Fatal(err)
	}
	return db, &batch{db: sqlDB}
}

// One SELECT answers every key with its own enabled webhooks, in ID order,
// and a key asked twice gets the same answer twice.
func TestRunMatchAnswersEachKey(t *testing.T) {
	t.Parallel()
	db, b := batchedFor(t)
	insertWebhook(t, db, "w3", "Sales Order", "on_submit", true)
	insertWebhook(t, db, "w1", "Sales Order", "on_submit", true)
	insertWebhook(t, db, "w2", "Sales Order", "on_submit", false)
	insertWebhook(t, db, "w4", "Sales Order", "on_cancel", true)
	insertWebhook(t, db, "w5", "Customer", "on_submit", true)
	keys := []matchKey{{"default", "Sales Order", "on_submit"}, {"default", "Customer", "on_submit"}, {"default", "Item", "on_submit"}, {"default", "Sales Order", "on_submit"}}
	got, err := b.runMatch(context.Background(), keys)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{{"w1", "w3"}, {"w5"}, nil, {"w1", "w3"}}
	for i, r := range got {
		if (r.version == 0) != (want[i] == nil) {
			t.Errorf("key %v: version %d", keys[i], r.version)
		}
		var ids []string
		for _, w := range r.hooks {
			ids = append(ids, w.ID)
		}
		if !slices.Equal(ids, want[i]) {
			t.Errorf("key %v: webhooks %v, want %v", keys[i], ids, want[i])
		}
	}
}

// One INSERT for several fan-outs tells each how many of its rows it
// created: a row that existed already, or that another caller in the same
// statement holds for the same event and webhook, is not created twice.
func TestRunInsertCountsEachCallersRows(t *testing.T) {
	t.Parallel()
	db, b := batchedFor(t)
	insertWebhook(t, db, "wa", "Sales Order", "on_submit", true)
	insertWebhook(t, db, "wb", "Sales Order", "on_submit", true)
	now := time.Now().UTC().Truncate(time.Microsecond)
	ctx := context.Background()
	if n, err := b.runInsert(ctx, []insertSet{{rows: []models.Delivery{planned("d0", "ev-old", "wa", now)}}}); err != nil || n[0].created != 1 {
		t.Fatalf("seed: %v %v", n, err)
	}
	sets := []insertSet{
		{rows: []models.Delivery{planned("d1", "ev-1", "wa", now), planned("d2", "ev-1", "wb", now)}},
		{rows: []models.Delivery{planned("d3", "ev-old", "wa", now), planned("d4", "ev-old", "wb", now)}}, // wa's row exists
		{rows: []models.Delivery{planned("d5", "ev-1", "wa", now)}},                                       // races d1 in the same statement
	}
	res, err := b.runInsert(ctx, sets)
	if err != nil {
		t.Fatal(err)
	}
	created := make([]int, len(res))
	for i, r := range res {
		created[i] = r.created
	}
	var ids []string
	if err := db.Model(&models.Delivery{}).Order("id").Pluck("id", &ids).Error; err != nil {
		t.Fatal(err)
	}
	if created[0]+created[2] != 2 || created[1] != 1 || len(ids) != 4 {
		t.Fatalf("created %v, rows %v; want ev-1's two rows once, ev-old's wb row, 4 rows in all", created, ids)
	}
	var row models.Delivery
	if err := db.Where("id = ?", "d2").Take(&row).Error; err != nil {
		t.Fatal(err)
	}
	want := sets[0].rows[1]
	if row.Status != want.Status || !row.NextRetry.Equal(*want.NextRetry) || string(row.Payload) != string(want.Payload) ||
		row.Headers["Content-Type"] != "application/json" || row.MaxRetries != 3 || !row.CreatedAt.Equal(now) {
		t.Fatalf("row d2 reads %+v, want it as planned", row)
	}
}

// One statement records several outcomes: every attempt goes into the
// history, and each delivery takes its outcome only when its fence (status
// and attempt count) still holds.
func TestRunRecordFencesEachDelivery(t *testing.T) {
	t.Parallel()
	db, b := batchedFor(t)
	insertWebhook(t, db, "wa", "Sales Order", "on_submit", true)
	now := time.Now().UTC().Truncate(time.Microsecond)
	ctx := context.Background()
	rows := []models.Delivery{planned("d1", "ev-1", "wa", now), planned("d2", "ev-2", "wa", now)}
	for i := range rows {
		rows[i].Attempts = 1
	}
	if _, err := b.runInsert(ctx, []insertSet{{rows: rows}}); err != nil {
		t.Fatal(err)
	}
	code := 200
	in := func(id string, fromAttempts int) Outcome {
		return Outcome{
			Attempt: models.Attempt{DeliveryID: id, Attempt: fromAttempts, At: now, Method: "POST", URL: "http://127.0.0.1:1/x",
				RequestHeaders: models.StringMap{"Webhook-Id": id}, StatusCode: &code, DurationMS: 3, Class: "2xx", Response: "ok"},
			FromStatus: models.StatusFailed, Status: models.StatusDelivered, LastResponse: "ok", UpdatedAt: now,
		}
	}
	out, err := b.runRecord(ctx, []Outcome{in("d2", 1), in("d1", 7)})
	if err != nil {
		t.Fatal(err)
	}
	if applied := []bool{out[0].applied, out[1].applied}; !slices.Equal(applied, []bool{true, false}) {
		t.Fatalf("applied %v, want d2 true and d1 (fenced out) false", applied)
	}
	var d1, d2 models.Delivery
	if err := db.Where("id = ?", "d1").Take(&d1).Error; err != nil {
		t.Fatal(err)
	}
	if err := db.Where("id = ?", "d2").Take(&d2).Error; err != nil {
		t.Fatal(err)
	}
	if d1.Status != models.StatusFailed || d2.Status != models.StatusDelivered || d2.NextRetry != nil ||
		d2.LastStatusCode == nil || *d2.LastStatusCode != 200 || d2.URL != "http://127.0.0.1:1/x" {
		t.Fatalf("d1 %s, d2 %s next %v code %v url %s", d1.Status, d2.Status, d2.NextRetry, d2.LastStatusCode, d2.URL)
	}
	var history []models.Attempt
	if err := db.Order("delivery_id").Find(&history).Error; err != nil {
		t.Fatal(err)
	}
	if len(history) != 2 || history[0].RequestHeaders["Webhook-Id"] != "d1" || history[1].Class != "2xx" || history[1].DurationMS != 3 {
		t.Fatalf("history %+v, want both attempts", history)
	}
}

// The batched record moves each webhook's health (webhook_health) by what
// the database holds: the last success of a batch clears it, the first
// failure after it starts the failing_since clock, a clock already running
// keeps its start, failures count up, and no health change moves
// webhooks_version (the workers' webhook caches stay).
func TestRunRecordMovesTheFailingClockByTheDatabase(t *testing.T) {
	t.Parallel()
	db, b := batchedFor(t)
	ctx := context.Background()
	t0 := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	at := func(min int) time.Time { return t0.Add(time.Duration(min) * time.Minute) }
	insertWebhook(t, db, "wa", "Sales Order", "on_submit", true)
	insertWebhook(t, db, "wb", "Sales Order", "on_submit", true)
	if err := db.Exec("UPDATE webhook_health SET failing_since = ?, failures = 1 WHERE webhook_id = 'wb'", t0).Error; err != nil {
		t.Fatal(err)
	}
	seq := 0
	in := func(webhook string, health HealthSignal, min int) Outcome {
		seq++
		id := fmt.Sprintf("d%d", seq)
		row := planned(id, "ev-"+id, webhook, t0)
		row.Attempts = 1
		if _, err := b.runInsert(ctx, []insertSet{{rows: []models.Delivery{row}}}); err != nil {
			t.Fatal(err)
		}
		return Outcome{
			Attempt:    models.Attempt{DeliveryID: id, Attempt: 1, At: at(min), Method: "POST", URL: row.URL, RequestHeaders: models.StringMap{}, Class: "5xx"},
			FromStatus: models.StatusFailed, Status: models.StatusFailed, NextRetry: ptrTime(at(60)), UpdatedAt: at(min),
			WebhookID: webhook, Health: health,
		}
	}
	health := func(id string) models.WebhookHealth {
		t.Helper()
		var h models.WebhookHealth
		if err := db.Where("webhook_id = ?", id).Take(&h).Error; err != nil {
			t.Fatal(err)
		}
		return h
	}
	clock := func(id string) *time.Time { return health(id).FailingSince }
	failures := func(id string, want int) {
		t.Helper()
		if got := health(id).Failures; got != want {
			t.Fatalf("webhook %s: %d failures, want %d", id, got, want)
		}
	}
	version := func() int64 {
		t.Helper()
		var n int64
		if err := db.Raw("SELECT n FROM webhooks_version").Scan(&n).Error; err != nil {
			t.Fatal(err)
		}
		return n
	}
	record := func(ins ...Outcome) {
		t.Helper()
		if _, err := b.runRecord(ctx, ins); err != nil {
			t.Fatal(err)
		}
	}
	same := func(what string, got *time.Time, want *time.Time) {
		t.Helper()
		if (got == nil) != (want == nil) || (got != nil && !got.Equal(*want)) {
			t.Fatalf("%s: failing_since %v, want %v", what, got, want)
		}
	}

	// Failures: wa's clock starts at its first; wb's keeps running from t0.
	record(in("wa", HealthFailure, 2), in("wa", HealthFailure, 1), in("wb", HealthFailure, 1))
	same("wa after two failures", clock("wa"), ptrTime(at(1)))
	same("wb already failing", clock("wb"), &t0)
	failures("wa", 2)
	failures("wb", 2)

	// More failures keep the clocks and count; no answer counts nothing;
	// none of it moves webhooks_version.
	v := version()
	record(in("wa", HealthFailure, 3), in("wb", HealthFailure, 3), in("wa", HealthSilent, 4))
	same("wa still failing", clock("wa"), ptrTime(at(1)))
	failures("wa", 3)
	failures("wb", 3)
	if got := version(); got != v {
		t.Fatalf("webhooks_version moved %d → %d for a health change", v, got)
	}

	// A success then failures restarts wa's clock at the first failure
	// after the success; a failure then a success stops wb's.
	record(in("wa", HealthFailure, 5), in("wa", HealthOK, 6), in("wa", HealthFailure, 8), in("wa", HealthFailure, 7),
		in("wb", HealthFailure, 5), in("wb", HealthOK, 6))
	same("wa restarted", clock("wa"), ptrTime(at(7)))
	same("wb healed", clock("wb"), nil)
	failures("wa", 2)
	failures("wb", 0)

	// Successes of a healthy webhook write nothing.
	v = version()
	record(in("wb", HealthOK, 9), in("wb", HealthOK, 10))
	same("wb healthy", clock("wb"), nil)
	if got := version(); got != v {
		t.Fatalf("webhooks_version moved %d → %d for successes of a healthy webhook", v, got)
	}
}

// Rows planned from webhooks read at an older webhooks_version are not
// written, and their caller learns the version that stopped them; rows of
// the current version, or unchecked, in the same statement are. A stale
// set's outbox row is not released with it; a written set's is.
func TestRunInsertWritesOnlyCurrentPlans(t *testing.T) {
	t.Parallel()
	db, b := batchedFor(t)
	insertWebhook(t, db, "wa", "Sales Order", "on_submit", true)
	ctx := context.Background()
	got, err := b.runMatch(ctx, []matchKey{{"default", "Sales Order", "on_submit"}})
	if err != nil || got[0].version == 0 {
		t.Fatalf("match: %+v %v", got, err)
	}
	old := got[0].version
	if err := db.Model(&models.Webhook{}).Where("id = ?", "wa").Update("request_url", "http://127.0.0.1:2/").Error; err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	for _, id := range []string{"ev-1", "ev-3"} {
		if err := db.Create(&models.OutboxEvent{EventID: id, Tenant: "default", Payload: "{}", CreatedAt: now}).Error; err != nil {
			t.Fatal(err)
		}
	}
	res, err := b.runInsert(ctx, []insertSet{
		{rows: []models.Delivery{planned("d1", "ev-1", "wa", now)}, version: old, release: &eventKey{"default", "ev-1"}},
		{rows: []models.Delivery{planned("d2", "ev-2", "wa", now)}, version: old + 1},
		{rows: []models.Delivery{planned("d3", "ev-3", "wa", now)}, release: &eventKey{"default", "ev-3"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].created != 0 || res[1].created != 1 || res[2].created != 1 || res[0].version != old+1 {
		t.Fatalf("results %+v; want the stale set refused with version %d, the others written", res, old+1)
	}
	var left []string
	if err := db.Model(&models.OutboxEvent{}).Order("event_id").Pluck("event_id", &left).Error; err != nil {
		t.Fatal(err)
	}
	if res[0].released || !res[2].released || !slices.Equal(left, []string{"ev-1"}) {
		t.Fatalf("released %v / %v, outbox holds %v; want the stale set's row kept, the written one's released", res[0].released, res[2].released, left)
	}
	// An UPDATE that changes nothing moves nothing.
	if err := db.Model(&models.Webhook{}).Where("id = ?", "wa").Update("request_url", "http://127.0.0.1:2/").Error; err != nil {
		t.Fatal(err)
	}
	if got, err := b.runMatch(ctx, []matchKey{{"default", "Sales Order", "on_submit"}}); err != nil || got[0].version != old+1 {
		t.Fatalf("after a no-op update: %+v %v, want version %d", got, err, old+1)
	}
}

// Fan-out serves an event's webhooks from its cache while webhooks_version
// holds still: a cache hit reads nothing, so a cached copy that says
// something the table does not shows in the next event, until a change
// moves webhooks_version (TestFanOutSeesEveryWebhookChange holds every
// store to seeing each change).
func TestFanOutServesTheCacheUntilAWebhookChanges(t *testing.T) {
	t.Parallel()
	s, db := postgresStore(t)
	insertWebhook(t, db, "wa", "Sales Order", "on_submit", true)
	if got := fanOutURLs(t, s, db, "ev-1"); !slices.Equal(got, []string{"http://127.0.0.1:1/wa"}) {
		t.Fatalf("ev-1 went to %v", got)
	}
	key := matchKey{"default", "Sales Order", "on_submit"}
	s.hooks.mu.Lock()
	cached := slices.Clone(s.hooks.byKey[key])
	cached[0].RequestURL = "http://127.0.0.1:9/cached"
	s.hooks.byKey[key] = cached
	s.hooks.mu.Unlock()
	if got := fanOutURLs(t, s, db, "ev-2"); !slices.Equal(got, []string{"http://127.0.0.1:9/cached"}) {
		t.Fatalf("ev-2 went to %v, want the cached copy's URL", got)
	}
	if err := db.Model(&models.Webhook{}).Where("id = ?", "wa").Update("request_url", "http://127.0.0.1:2/wa").Error; err != nil {
		t.Fatal(err)
	}
	if got := fanOutURLs(t, s, db, "ev-3"); !slices.Equal(got, []string{"http://127.0.0.1:2/wa"}) {
		t.Fatalf("ev-3 went to %v after the webhook changed", got)
	}
}

// One claim statement takes each delivery under its own mode: a fresh row
// for a first attempt, a due row for a retry, never a row of a disabled
// webhook or one not due; and of two claims of one row in the same
// statement exactly one wins.
func TestRunClaimTakesEachRowOnce(t *testing.T) {
	t.Parallel()
	db, b := batchedFor(t)
	insertWebhook(t, db, "wa", "Sales Order", "on_submit", true)
	insertWebhook(t, db, "wd", "Sales Order", "on_submit", false)
	now := time.Now().UTC().Truncate(time.Microsecond)
	ctx := context.Background()
	fresh := planned("fresh", "ev-1", "wa", now)
	due := planned("due", "ev-2", "wa", now)
	due.Attempts, due.NextRetry = 1, &now
	notDue := planned("notdue", "ev-3", "wa", now)
	notDue.Attempts = 1
	off := planned("off", "ev-4", "wd", now)
	if _, err := b.runInsert(ctx, []insertSet{{rows: []models.Delivery{fresh, due, notDue, off}}}); err != nil {
		t.Fatal(err)
	}
	ins := []ClaimIn{
		{ID: "fresh", Now: now}, {ID: "due", Mode: Retry, Now: now}, {ID: "notdue", Mode: Retry, Now: now},
		{ID: "off", Now: now}, {ID: "fresh", Now: now}, {ID: "missing", Now: now},
	}
	got, err := b.runClaim(ctx, ins)
	if err != nil {
		t.Fatal(err)
	}
	var ok []bool
	for _, g := range got {
		ok = append(ok, g.ok)
	}
	if want := []bool{true, true, false, false, false, false}; !slices.Equal(ok, want) {
		t.Fatalf("claimed %v, want %v", ok, want)
	}
	c := got[1].claim
	if c.Row.Attempts != 2 || !c.PrevNext.Equal(now) || !c.Row.NextRetry.Equal(now.Add(time.Second+LeaseMargin)) || c.Hook.ID != "wa" {
		t.Fatalf("due's claim: attempts %d, was due %v, lease %v, hook %s", c.Row.Attempts, c.PrevNext, c.Row.NextRetry, c.Hook.ID)
	}
	var attempts []int
	if err := db.Model(&models.Delivery{}).Order("id").Pluck("attempts", &attempts).Error; err != nil {
		t.Fatal(err)
	}
	// due, fresh, notdue, off
	if !slices.Equal(attempts, []int{2, 1, 1, 0}) {
		t.Fatalf("attempts by id %v, want [2 1 1 0]", attempts)
	}
}

// The fan-out's INSERT releases its event's outbox row in the commit that
// writes its rows (EventKey.Outbox): only the row of that tenant's event,
// not when another transaction holds it (a relay queueing it: left, without
// waiting, for the caller's own release), and never for an event that plans
// no row (a stale plan's: TestRunInsertWritesOnlyCurrentPlans).
func TestFanOutReleasesTheOutboxRowWithItsRows(t *testing.T) {
	t.Parallel()
	s, db := postgresStore(t)
	insertWebhook(t, db, "wa", "Sales Order", "on_submit", true)
	outboxRow := func(tenant, id string) {
		t.Helper()
		if err := db.Create(&models.OutboxEvent{EventID: id, Tenant: tenant, Payload: "{}", CreatedAt: time.Now()}).Error; err != nil {
			t.Fatal(err)
		}
	}
	outboxed := func(tenant, id string) bool {
		t.Helper()
		var n int64
		if err := db.Model(&models.OutboxEvent{}).Where("tenant = ? AND event_id = ?", tenant, id).Count(&n).Error; err != nil {
			t.Fatal(err)
		}
		return n > 0
	}
	ctx := context.Background()
	fanOut := func(event string, key EventKey) Written {
		t.Helper()
		w, err := s.FanOut(ctx, key, planURLs(event))
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	so := EventKey{DocType: "Sales Order", Event: "on_submit"}

	// Released with its rows; the same event ID of another tenant stays.
	outboxRow("default", "ev-1")
	outboxRow("globex", "ev-1")
	key := so
	key.Outbox = "ev-1"
	if w := fanOut("ev-1", key); !w.Released || !w.Created || outboxed("default", "ev-1") {
		t.Fatalf("ev-1: released %v, created %v, still in the outbox %v; want released with its rows", w.Released, w.Created, outboxed("default", "ev-1"))
	}
	if !outboxed("globex", "ev-1") {
		t.Fatal("globex's ev-1 was released by default's fan-out")
	}
	// Without Outbox nothing is released.
	outboxRow("default", "ev-2")
	if w := fanOut("ev-2", so); w.Released || !outboxed("default", "ev-2") {
		t.Fatalf("ev-2 without Outbox: released %v", w.Released)
	}
	// A repeated fan-out (its rows exist) releases a row left behind.
	key.Outbox = "ev-2"
	if w := fanOut("ev-2", key); !w.Released || w.Created || outboxed("default", "ev-2") {
		t.Fatalf("ev-2 again: released %v, created %v", w.Released, w.Created)
	}
	// An event without an outbox row (client.Publish) releases nothing.
	key.Outbox = "ev-3"
	if w := fanOut("ev-3", key); w.Released {
		t.Fatal("ev-3 had no outbox row and says it was released")
	}
	// A row another transaction holds is left, and the fan-out does not wait.
	outboxRow("default", "ev-4")
	tx := db.Begin()
	defer tx.Rollback()
	if err := tx.Exec("SELECT 1 FROM outbox_events WHERE event_id = 'ev-4' FOR UPDATE").Error; err != nil {
		t.Fatal(err)
	}
	key.Outbox = "ev-4"
	var (
		w   Written
		err error
	)
	if !testenv.ReturnsWithoutLockWait(t, db, func() { w, err = s.FanOut(ctx, key, planURLs("ev-4")) }) {
		t.Fatal("the fan-out waits for ev-4's outbox row, which a relay holds")
	}
	if err != nil || w.Released || !w.Created {
		t.Fatalf("ev-4 held by a relay: %+v %v; want its rows written and the row left", w, err)
	}
	tx.Rollback()
	if !outboxed("default", "ev-4") {
		t.Fatal("ev-4's held row is gone")
	}
	// An event that plans no row leaves its outbox row to the caller.
	outboxRow("default", "ev-5")
	key.Outbox = "ev-5"
	w, err = s.FanOut(ctx, key, func([]models.Webhook) []models.Delivery { return nil })
	if err != nil || w.Released || !outboxed("default", "ev-5") {
		t.Fatalf("ev-5 planned nothing: %+v %v", w, err)
	}
}
