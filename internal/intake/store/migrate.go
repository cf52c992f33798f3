package store

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
	"time"

	"gorm.io/gorm"
)

//go:embed migrations
var migrationFS embed.FS

// migration is one versioned SQL file.
type migration struct {
	version int
	name    string
	sql     string
}

// Migrate applies every migration the database has not seen yet, in order,
// inside one transaction. On PostgreSQL an advisory lock makes concurrent
// start-ups (several workers with auto_migrate) wait for each other instead of
// racing. It returns the versions it applied.
func Migrate(ctx context.Context, db *gorm.DB) ([]int, error) {
	dialect := DialectOf(db)
	all, err := loadMigrations(dialect)
	if err != nil {
		return nil, err
	}
	var applied []int
	err = db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if dialect == Postgres {
			// 0x686f6d696e67 = "homing"
			if err := tx.Exec("SELECT pg_advisory_xact_lock(114849763815015)").Error; err != nil {
				return fmt.Errorf("lock migrations: %w", err)
			}
		}
		if err := tx.Exec(`CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at ` + timestampType(dialect) + ` NOT NULL)`).Error; err != nil {
			return fmt.Errorf("create schema_migrations: %w", err)
		}
		var done []int
		if err := tx.Raw("SELECT version FROM schema_migrations").Scan(&done).Error; err != nil {
			return fmt.Errorf("read schema_migrations: %w", err)
		}
		seen := make(map[int]bool, len(done))
		for _, v := range done {
			seen[v] = true
		}
		for _, m := range all {
			if seen[m.version] {
				continue
			}
			if err := tx.Exec(m.sql).Error; err != nil {
				return fmt.Errorf("apply migration %s: %w", m.name, err)
			}
			if err := tx.Exec("INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)", m.version, m.name, time.Now().UTC()).Error; err != nil {
				return fmt.Errorf("record migration %s: %w", m.name, err)
			}
			applied = append(applied, m.version)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return applied, nil
}

func timestampType(d Dialect) string {
	if d == Postgres {
		return "timestamptz"
	}
	return "datetime"
}

func loadMigrations(d Dialect) ([]migration, error) {
	dir := "migrations/" + string(d)
	entries, err := fs.ReadDir(migrationFS, dir)
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	var out []migration
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".sql") {
			continue
		}
		prefix, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(prefix)
		if !ok || err != nil {
			return nil, fmt.Errorf("migration %s: name must start with a number and an underscore", e.Name())
		}
		b, err := fs.ReadFile(migrationFS, dir+"/"+e.Name())
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", e.Name(), err)
		}
		out = append(out, migration{version: v, name: e.Name(), sql: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	return out, nil
}
