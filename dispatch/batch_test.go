package dispatch

import (
	"context"
	"slices"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/homingdev/homing/internal/testenv"
	"github.com/homingdev/homing/models"
)

// batchedFor opens a fresh PostgreSQL database and its batched statements.
func batchedFor(t *testing.T) (*gorm.DB, *batched) {
	t.Helper()
	db := testenv.Postgres(t)
	sqlDB, err := db.DB()
	if err != nil {
		t.Fatal(err)
	}
	return db, newBatched(sqlDB)
}

func insertWebhook(t *testing.T, db *gorm.DB, id, docType, event string, enabled bool) {
	t.Helper()
	now := time.Now().UTC()
	w := models.Webhook{
		ID: id, Name: "hook-" + id, DocType: docType, DocEvent: event, RequestURL: "http://127.0.0.1:1/" + id,
		RequestMethod: "POST", RequestStructure: "json", Headers: models.StringMap{}, SignatureScheme: "none",
		Enabled: enabled, MaxRetries: 3, Queue: "default", TimeoutMS: 1000, CreatedAt: now, UpdatedAt: now,
	}
	if err := db.Create(&w).Error; err != nil {
		t.Fatal(err)
	}
}

func planned(id, event, webhook string, now time.Time) models.Delivery {
	next := now.Add(time.Minute)
	return models.Delivery{
		ID: id, WebhookID: webhook, WebhookName: "hook-" + webhook, EventID: event, DocType: "Sales Order", DocEvent: "on_submit",
		Method: "POST", URL: "http://127.0.0.1:1/", Headers: models.StringMap{"Content-Type": "application/json"},
		Payload: []byte(`{"name":"` + event + `"}`), Status: models.StatusFailed, MaxRetries: 3, NextRetry: &next,
		CreatedAt: now, UpdatedAt: now,
	}
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
	keys := []matchKey{{"Sales Order", "on_submit"}, {"Customer", "on_submit"}, {"Item", "on_submit"}, {"Sales Order", "on_submit"}}
	got, err := b.runMatch(context.Background(), keys)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{{"w1", "w3"}, {"w5"}, nil, {"w1", "w3"}}
	for i, hooks := range got {
		var ids []string
		for _, w := range hooks {
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
	if n, err := b.runInsert(ctx, [][]models.Delivery{{planned("d0", "ev-old", "wa", now)}}); err != nil || n[0] != 1 {
		t.Fatalf("seed: %v %v", n, err)
	}
	sets := [][]models.Delivery{
		{planned("d1", "ev-1", "wa", now), planned("d2", "ev-1", "wb", now)},
		{planned("d3", "ev-old", "wa", now), planned("d4", "ev-old", "wb", now)}, // wa's row exists
		{planned("d5", "ev-1", "wa", now)},                                       // races d1 in the same statement
	}
	created, err := b.runInsert(ctx, sets)
	if err != nil {
		t.Fatal(err)
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
	want := sets[0][1]
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
	if _, err := b.runInsert(ctx, [][]models.Delivery{rows}); err != nil {
		t.Fatal(err)
	}
	code := 200
	in := func(id string, fromAttempts int) recordIn {
		return recordIn{
			attempt: models.Attempt{DeliveryID: id, Attempt: 1, At: now, Method: "POST", URL: "http://127.0.0.1:1/x",
				RequestHeaders: models.StringMap{"Webhook-Id": id}, StatusCode: &code, DurationMS: 3, Class: "2xx", Response: "ok"},
			outcome:    outcomeRow{status: models.StatusDelivered, code: &code, lastResponse: "ok", method: "POST", url: "http://127.0.0.1:1/x", at: now},
			fromStatus: models.StatusFailed, fromAttempts: fromAttempts,
		}
	}
	applied, err := b.runRecord(ctx, []recordIn{in("d2", 1), in("d1", 7)})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(applied, []bool{true, false}) {
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
