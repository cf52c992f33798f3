// Package store opens Homing's database (PostgreSQL in production, embedded
// SQLite by default) and applies its versioned migrations.
package store

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/glebarez/sqlite"
	"github.com/jackc/pgx/v5/pgconn"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// Dialect names the SQL flavour behind a *gorm.DB.
type Dialect string

// Supported dialects.
const (
	Postgres Dialect = "postgres"
	SQLite   Dialect = "sqlite"
)

// ErrUnsupportedURL is returned for a database.url Homing cannot open.
var ErrUnsupportedURL = errors.New("unsupported database url")

// DefaultMaxOpenConns is database.max_open_conns's default.
const DefaultMaxOpenConns = 6

// Options tunes the connection pool; the zero value is the defaults.
type Options struct {
	// MaxOpenConns caps PostgreSQL connections (database.max_open_conns);
	// 0 means DefaultMaxOpenConns. SQLite always uses one.
	MaxOpenConns int
}

// Open connects to the database named by rawURL: sqlite://PATH (a file,
// created when missing) or postgres://… / postgresql://….
func Open(rawURL string) (*gorm.DB, error) { return OpenWith(rawURL, Options{}) }

// OpenWith is Open with pool options.
func OpenWith(rawURL string, opts Options) (*gorm.DB, error) {
	dialector, dialect, err := dialectorFor(rawURL)
	if err != nil {
		return nil, err
	}
	db, err := gorm.Open(dialector, &gorm.Config{
		Logger:                 logger.Discard,
		SkipDefaultTransaction: true,
		NowFunc:                func() time.Time { return time.Now().UTC() },
		TranslateError:         true,
	})
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", redact(rawURL), explainConnect(err))
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	if dialect == SQLite {
		// One writer at a time is SQLite's model; a single connection avoids
		// SQLITE_BUSY between our own goroutines.
		sqlDB.SetMaxOpenConns(1)
	} else {
		n := opts.MaxOpenConns
		if n <= 0 {
			n = DefaultMaxOpenConns
		}
		sqlDB.SetMaxOpenConns(n)
		sqlDB.SetMaxIdleConns(n)
		sqlDB.SetConnMaxIdleTime(5 * time.Minute)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := sqlDB.PingContext(ctx); err != nil {
		_ = sqlDB.Close()
		return nil, fmt.Errorf("connect to database %s: %w", redact(rawURL), explainConnect(err))
	}
	return db, nil
}

// missingDatabase is PostgreSQL's invalid_catalog_name: the server is there,
// the database named in the URL is not.
const missingDatabase = "3D000"

// explainConnect adds the fix to a connection error a first-time user
// meets: a database that was never created.
func explainConnect(err error) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != missingDatabase {
		return err
	}
	name := strings.TrimSuffix(strings.TrimPrefix(pgErr.Message, `database "`), `" does not exist`)
	return fmt.Errorf("%w: create it with `createdb %s` (or psql -c 'CREATE DATABASE %q')", err, name, name)
}

// DialectOf tells which SQL flavour db speaks.
func DialectOf(db *gorm.DB) Dialect {
	if db.Dialector.Name() == "postgres" {
		return Postgres
	}
	return SQLite
}

// Close closes the connection pool behind db.
func Close(db *gorm.DB) error {
	sqlDB, err := db.DB()
	if err != nil {
		return err
	}
	return sqlDB.Close()
}

func dialectorFor(rawURL string) (gorm.Dialector, Dialect, error) {
	switch {
	case strings.HasPrefix(rawURL, "postgres://"), strings.HasPrefix(rawURL, "postgresql://"):
		return postgres.New(postgres.Config{DSN: rawURL}), Postgres, nil
	case strings.HasPrefix(rawURL, "sqlite://"):
		path := strings.TrimPrefix(rawURL, "sqlite://")
		if path == "" {
			return nil, "", fmt.Errorf("%w: %q has no file path (use sqlite:///path/to/homing.db)", ErrUnsupportedURL, rawURL)
		}
		path, query, _ := strings.Cut(path, "?")
		q, err := url.ParseQuery(query)
		if err != nil {
			return nil, "", fmt.Errorf("%w: %q: %v", ErrUnsupportedURL, rawURL, err)
		}
		// The per-user default (config: $XDG_DATA_HOME/homing/homing.db)
		// usually starts without its directory.
		if dir := filepath.Dir(path); dir != "." && !strings.HasPrefix(path, ":") && !strings.HasPrefix(path, "file:") {
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return nil, "", fmt.Errorf("create the directory of SQLite database %s: %w", path, err)
			}
		}
		for _, p := range []string{"busy_timeout(10000)", "journal_mode(WAL)", "foreign_keys(1)", "synchronous(NORMAL)"} {
			q.Add("_pragma", p)
		}
		return sqlite.Open(path + "?" + q.Encode()), SQLite, nil
	default:
		return nil, "", fmt.Errorf("%w: %q (use sqlite://FILE or postgres://USER@HOST/DB)", ErrUnsupportedURL, redact(rawURL))
	}
}

// redact hides a password in a database URL so it can go into an error.
func redact(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil || u.User == nil {
		return rawURL
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}
