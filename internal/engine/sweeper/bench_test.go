package sweeper_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/homingdev/homing/internal/engine/sweeper"
	"github.com/homingdev/homing/internal/testing/testenv"
	"github.com/homingdev/homing/models"
)

// BenchmarkSweepSelect runs a step's query on PostgreSQL over 40 webhooks in
// 4 tenants with 20,000 due rows: one tenant holds 30 webhooks and most of
// the backlog. It reads only, so every iteration sees the same rows.
func BenchmarkSweepSelect(b *testing.B) {
	db := testenv.Postgres(b)
	var rows []models.Delivery
	for i := range 40 {
		ten := "t" + fmt.Sprint(min(i/10, 3))
		if i < 30 {
			ten = "big"
		}
		id := fmt.Sprintf("w%02d", i)
		if err := db.Where(models.Tenant{Name: ten}).FirstOrCreate(&models.Tenant{Name: ten, Enabled: true, PortalOrigins: models.StringList{}, CreatedAt: t0, UpdatedAt: t0}).Error; err != nil {
			b.Fatal(err)
		}
		w := models.Webhook{ID: id, Tenant: ten, Name: id, DocType: "D", DocEvent: "on_submit", RequestURL: "http://127.0.0.1:1/",
			RequestMethod: "POST", RequestStructure: "json", Headers: models.StringMap{}, SignatureScheme: "none",
			Enabled: true, MaxRetries: 3, Queue: "default", TimeoutMS: 1000, CreatedAt: t0, UpdatedAt: t0}
		if err := db.Create(&w).Error; err != nil {
			b.Fatal(err)
		}
		n := 100
		if ten == "big" {
			n = 650
		}
		for j := range n {
			next := t0.Add(-time.Hour + time.Duration(j)*time.Millisecond)
			did := fmt.Sprintf("%s-%05d", id, j)
			rows = append(rows, models.Delivery{ID: did, Tenant: ten, WebhookID: id, WebhookName: id, EventID: did, DocType: "D", DocEvent: "on_submit",
				Method: "POST", URL: "http://127.0.0.1:1/", Headers: models.StringMap{}, Payload: []byte(`{}`),
				Status: models.StatusFailed, Attempts: 1, MaxRetries: 3, NextRetry: &next, CreatedAt: t0, UpdatedAt: t0})
		}
	}
	if err := db.CreateInBatches(rows, 1000).Error; err != nil {
		b.Fatal(err)
	}
	if err := db.Exec("ANALYZE").Error; err != nil {
		b.Fatal(err)
	}
	// The probe parameters as a step computes them, so that the benchmark
	// keeps up with the query (it failed on a renamed one).
	args := sweeper.ProbeArgs(sweeper.Config{ProbeInterval: time.Minute}, t0)
	for k, v := range map[string]any{"now": t0, "stale": t0.Add(-time.Minute), "failing": models.FailingAfter,
		"tick_seconds": 4, "batch": 500, "per": 32, "full": "{}", "spent": "{}"} {
		args[k] = v
	}
	b.ResetTimer()
	for b.Loop() {
		var out []map[string]any
		if err := db.Raw(sweeper.SelectDuePostgres, args).Scan(&out).Error; err != nil {
			b.Fatal(err)
		}
		if len(out) != 500 {
			b.Fatalf("%d rows, want 500", len(out))
		}
	}
}
