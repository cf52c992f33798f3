package store

import (
	"context"
	"fmt"

	"gorm.io/gorm"

	"github.com/homingdev/homing/internal/intake/dbstate"
)

// Probe is the check a dbstate.Watcher makes of db: nil when the database
// answers and takes writes. A PostgreSQL server that answers but is
// read-only (a primary demoted by a failover, a standby the URL's
// target_session_attrs did not rule out) fails with dbstate.ErrReadOnly: a
// ping would pass it, and every write would fail.
func Probe(db *gorm.DB) func(ctx context.Context) error {
	if DialectOf(db) == SQLite {
		return func(ctx context.Context) error {
			sqlDB, err := db.DB()
			if err != nil {
				return err
			}
			return sqlDB.PingContext(ctx)
		}
	}
	return func(ctx context.Context) error {
		sqlDB, err := db.DB()
		if err != nil {
			return err
		}
		var readOnly string
		if err := sqlDB.QueryRowContext(ctx, "SHOW transaction_read_only").Scan(&readOnly); err != nil {
			return err
		}
		if readOnly == "on" {
			return fmt.Errorf("SHOW transaction_read_only: %w", dbstate.ErrReadOnly)
		}
		return nil
	}
}
