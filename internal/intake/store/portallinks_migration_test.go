package store

import (
	"context"
	"path/filepath"
	"testing"
)

// Migration 0021 gives each portal link its token: a link whose maker is a
// live token is tied to it (and goes when it is revoked), a link whose
// maker is already gone is revoked (its row deleted) by the migration.
func TestPortalLinksTokenMigration(t *testing.T) {
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
		if m.version >= 21 {
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
		`INSERT INTO api_tokens (id, name, scope, token_hash, created_at) VALUES ('t1', 'ops', 'admin', 'hash', CURRENT_TIMESTAMP)`,
		`INSERT INTO portal_links (id, tenant, created_by, created_at, expires_at) VALUES ('by-ops', 'default', 'ops', CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)`,
		`INSERT INTO portal_links (id, tenant, created_by, created_at, expires_at) VALUES ('by-gone', 'default', 'gone', CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)`,
	} {
		if err := db.Exec(q).Error; err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if _, err := Migrate(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	var rows []struct{ ID, TokenID string }
	if err := db.Raw("SELECT id, token_id FROM portal_links ORDER BY id").Scan(&rows).Error; err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].ID != "by-ops" || rows[0].TokenID != "t1" {
		t.Fatalf("links after 0021: %+v, want only by-ops, tied to t1", rows)
	}
	if err := db.Exec("DELETE FROM api_tokens WHERE id = 't1'").Error; err != nil {
		t.Fatal(err)
	}
	var n int64
	if err := db.Raw("SELECT count(*) FROM portal_links").Scan(&n).Error; err != nil || n != 0 {
		t.Fatalf("%d links after their token was deleted (%v), want 0", n, err)
	}
}
