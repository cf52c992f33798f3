package storage

import (
	"context"
	"fmt"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/homingdev/homing/internal/testing/testenv"
	"github.com/homingdev/homing/models"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// implementations are the stores the conformance suite holds to one
// behaviour, each on a fresh database: the reference on both databases
// Homing runs on, and the PostgreSQL one.
var implementations = []struct {
	name string
	open func(testing.TB) (Store, *gorm.DB)
}{
	{"gorm-sqlite", func(t testing.TB) (Store, *gorm.DB) { db := testenv.SQLite(t); return NewGORM(db), db }},
	{"gorm-postgres", func(t testing.TB) (Store, *gorm.DB) { db := testenv.Postgres(t); return NewGORM(db), db }},
	{"postgres", func(t testing.TB) (Store, *gorm.DB) { s, db := postgresStore(t); return s, db }},
}

// postgresStore opens a fresh PostgreSQL database and its Postgres store.
func postgresStore(t testing.TB) (*Postgres, *gorm.DB) {
	t.Helper()
	db := testenv.Postgres(t)
	s, err := NewPostgres(db)
	if err != nil {
		t.Fatal(err)
	}
	return s, db
}

// eachStore runs test against every implementation, in parallel.
func eachStore(t *testing.T, test func(t *testing.T, s Store, db *gorm.DB)) {
	t.Helper()
	for _, impl := range implementations {
		t.Run(impl.name, func(t *testing.T) {
			t.Parallel()
			s, db := impl.open(t)
			test(t, s, db)
		})
	}
}

func insertWebhook(t testing.TB, db *gorm.DB, id, docType, event string, enabled bool) {
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

// planned is testenv.PlannedDelivery.
var planned = testenv.PlannedDelivery

func ptrTime(t time.Time) *time.Time { return &t }

// insertRows writes rows as they are.
func insertRows(t testing.TB, db *gorm.DB, rows ...models.Delivery) {
	t.Helper()
	for _, r := range rows {
		if err := db.Create(&r).Error; err != nil {
			t.Fatal(err)
		}
	}
}

func loadRow(t testing.TB, db *gorm.DB, id string) models.Delivery {
	t.Helper()
	var row models.Delivery
	if err := db.Where("id = ?", id).Take(&row).Error; err != nil {
		t.Fatal(err)
	}
	return row
}

func readHealth(t testing.TB, db *gorm.DB, id string) models.WebhookHealth {
	t.Helper()
	var h models.WebhookHealth
	if err := db.Where("webhook_id = ?", id).Take(&h).Error; err != nil {
		t.Fatal(err)
	}
	return h
}

func sameTime(a, b *time.Time) bool {
	return (a == nil) == (b == nil) && (a == nil || a.Equal(*b))
}

// planURLs is a plan that writes one row per webhook to its request_url,
// except for webhooks whose condition is "false" (a plan decides what
// conditions mean; the store only asks).
func planURLs(event string) Plan {
	seq := 0
	return func(hooks []models.Webhook) []models.Delivery {
		now := time.Now().UTC().Truncate(time.Microsecond)
		var rows []models.Delivery
		for _, w := range hooks {
			if w.Condition == "false" {
				continue
			}
			seq++
			row := planned(fmt.Sprintf("%s-%s-%d", event, w.ID, seq), event, w.ID, now)
			row.URL = w.RequestURL
			rows = append(rows, row)
		}
		return rows
	}
}

// fanOutURLs fans event out through s and answers the URLs its rows went to.
func fanOutURLs(t testing.TB, s Store, db *gorm.DB, event string) []string {
	t.Helper()
	if _, err := s.FanOut(context.Background(), EventKey{DocType: "Sales Order", Event: "on_submit"}, planURLs(event)); err != nil {
		t.Fatal(err)
	}
	var got []string
	if err := db.Model(&models.Delivery{}).Where("event_id = ?", event).Order("webhook_id").Pluck("url", &got).Error; err != nil {
		t.Fatal(err)
	}
	return got
}
