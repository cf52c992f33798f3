package store

import (
	"context"
	"path/filepath"
	"testing"
)

// Migration 0015 moves an existing install into the tenant default without
// losing anything: on both databases every webhook, delivery, attempt,
// outbox row, published event and token belongs to default, and on SQLite,
// whose webhooks table is rebuilt, each webhook keeps its health row and its
// health triggers.
func TestTenantsMigrationKeepsAnInstall(t *testing.T) {
	t.Parallel()
	db, err := Open("sqlite://" + filepath.Join(t.TempDir(), "homing.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = Close(db) })
	all, err := loadMigrations(SQLite)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Exec(`CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at datetime NOT NULL)`).Error; err != nil {
		t.Fatal(err)
	}
	for _, m := range all {
		if m.version >= 15 {
			break
		}
		if err := db.Exec(m.sql).Error; err != nil {
			t.Fatalf("migration %s: %v", m.name, err)
		}
		if err := db.Exec("INSERT INTO schema_migrations VALUES (?, ?, CURRENT_TIMESTAMP)", m.version, m.name).Error; err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range []string{
		`INSERT INTO webhooks (id, name, doc_type, doc_event, request_url, max_retries, timeout_ms, created_at, updated_at)
			VALUES ('w1', 'orders', 'Sales Order', 'on_submit', 'https://x.example/h', 3, 1000, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)`,
		`UPDATE webhook_health SET failures = 7 WHERE webhook_id = 'w1'`,
		`INSERT INTO deliveries (id, webhook_id, webhook_name, event_id, doc_type, doc_event, method, url, payload, status, max_retries, created_at, updated_at)
			VALUES ('d1', 'w1', 'orders', 'ev-1', 'Sales Order', 'on_submit', 'POST', 'https://x.example/h', X'7b7d', 'Delivered', 3, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)`,
		`INSERT INTO delivery_attempts (delivery_id, attempt, at, method, url) VALUES ('d1', 1, CURRENT_TIMESTAMP, 'POST', 'https://x.example/h')`,
		`INSERT INTO published_events (event_id, created_at, body_hash) VALUES ('ev-1', CURRENT_TIMESTAMP, 'h')`,
		`INSERT INTO outbox_events (event_id, payload, created_at) VALUES ('ev-1', '{}', CURRENT_TIMESTAMP)`,
		`INSERT INTO api_tokens (id, name, scope, token_hash, created_at) VALUES ('t1', 'ops', 'admin', 'hash', CURRENT_TIMESTAMP)`,
	} {
		if err := db.Exec(q).Error; err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if _, err := Migrate(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"webhooks", "deliveries", "delivery_attempts", "published_events", "outbox_events", "api_tokens"} {
		var tenants []string
		if err := db.Raw("SELECT DISTINCT tenant FROM " + table).Scan(&tenants).Error; err != nil {
			t.Fatal(err)
		}
		if len(tenants) != 1 || tenants[0] != "default" {
			t.Errorf("%s: tenants %v, want every row in default", table, tenants)
		}
	}
	var failures int
	if err := db.Raw("SELECT failures FROM webhook_health WHERE webhook_id = 'w1'").Scan(&failures).Error; err != nil || failures != 7 {
		t.Errorf("w1's health: %d failures (%v), want the 7 it had", failures, err)
	}
	var operator bool
	if err := db.Raw("SELECT operator FROM api_tokens WHERE id = 't1'").Scan(&operator).Error; err != nil || !operator {
		t.Errorf("the existing token is operator = %v (%v), want an operator token", operator, err)
	}
	// The triggers came back with the table, and names are per tenant.
	for _, q := range []string{
		`INSERT INTO tenants (name, created_at, updated_at) VALUES ('acme', CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)`,
		`INSERT INTO webhooks (id, tenant, name, doc_type, doc_event, request_url, max_retries, timeout_ms, created_at, updated_at)
			VALUES ('w2', 'acme', 'orders', 'Sales Order', 'on_submit', 'https://x.example/h', 3, 1000, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)`,
		`INSERT INTO published_events (tenant, event_id, created_at) VALUES ('acme', 'ev-1', CURRENT_TIMESTAMP)`,
	} {
		if err := db.Exec(q).Error; err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	var n int64
	if err := db.Raw("SELECT count(*) FROM webhook_health WHERE webhook_id = 'w2'").Scan(&n).Error; err != nil || n != 1 {
		t.Errorf("a new webhook got %d health rows (%v): the trigger was lost", n, err)
	}
	if err := db.Exec(`INSERT INTO webhooks (id, tenant, name, doc_type, doc_event, request_url, max_retries, timeout_ms, created_at, updated_at)
			VALUES ('w3', 'acme', 'orders', 'Sales Order', 'on_submit', 'https://x.example/h', 3, 1000, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)`).Error; err == nil {
		t.Error("a second webhook named orders in acme was accepted")
	}
	if err := db.Exec(`INSERT INTO webhooks (id, tenant, name, doc_type, doc_event, request_url, max_retries, timeout_ms, created_at, updated_at)
			VALUES ('w4', 'nope', 'x', 'Sales Order', 'on_submit', 'https://x.example/h', 3, 1000, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)`).Error; err == nil {
		t.Error("a webhook of a tenant that does not exist was accepted")
	}
}
