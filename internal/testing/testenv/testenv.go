// Package testenv gives each test its own real PostgreSQL database, SQLite
// file and Redis database index, so packages can run in parallel without
// stealing each other's rows or asynq tasks.
package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/homingdev/homing/internal/intake/store"
)

// DefaultPostgresURL is used when HOMING_TEST_DATABASE_URL is not set.
const DefaultPostgresURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// PostgresURL is the server tests create their databases on. Its own
// database is only connected to, to create and drop testenv's databases
// (homing_tmpl_* and homing_t_*); nothing else is made there.
func PostgresURL() string {
	if u := os.Getenv("HOMING_TEST_DATABASE_URL"); u != "" {
		return u
	}
	return DefaultPostgresURL
}

var (
	templateOnce sync.Once
	templateName string
	templateErr  error
)

// withDB returns rawURL with its database name replaced.
func withDB(rawURL, name string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		panic(err)
	}
	u.Path = "/" + name
	return u.String()
}

func randomSuffix() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// PostgresDSN creates a fresh, migrated PostgreSQL database for the test,
// cloned from a per-process template, and drops it when the test ends.
func PostgresDSN(t testing.TB) string {
	t.Helper()
	admin, err := store.Open(PostgresURL())
	if err != nil {
		t.Fatalf("testenv: PostgreSQL is required (set HOMING_TEST_DATABASE_URL or run scripts/services.sh): %v", err)
	}
	defer func() { _ = store.Close(admin) }()
	templateOnce.Do(func() { templateName, templateErr = makeTemplate(admin) })
	if templateErr != nil {
		t.Fatalf("testenv: template database: %v", templateErr)
	}
	name := fmt.Sprintf("homing_t_%d_%s", os.Getpid(), randomSuffix())
	if err := createFromTemplate(admin, name); err != nil {
		t.Fatalf("testenv: create database: %v", err)
	}
	t.Cleanup(func() {
		a, err := store.Open(PostgresURL())
		if err != nil {
			return
		}
		defer func() { _ = store.Close(a) }()
		_ = a.Exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)").Error
	})
	return withDB(PostgresURL(), name)
}

// Postgres opens a fresh, migrated PostgreSQL database for the test.
func Postgres(t testing.TB) *gorm.DB {
	t.Helper()
	db, err := store.Open(PostgresDSN(t))
	if err != nil {
		t.Fatalf("testenv: open test database: %v", err)
	}
	t.Cleanup(func() { _ = store.Close(db) })
	return db
}

// createFromTemplate retries briefly: PostgreSQL refuses to copy a template
// while another session is connected to it.
func createFromTemplate(admin *gorm.DB, name string) error {
	var err error
	for i := 0; i < 50; i++ {
		err = admin.Exec("CREATE DATABASE " + name + " TEMPLATE " + templateName).Error
		if err == nil || !strings.Contains(err.Error(), "being accessed by other users") {
			return err
		}
		time.Sleep(50 * time.Millisecond) // waiting on PostgreSQL, not on our own code
	}
	return err
}

func makeTemplate(admin *gorm.DB) (string, error) {
	if err := dropLeftovers(admin); err != nil {
		return "", err
	}
	name := fmt.Sprintf("homing_tmpl_%d_%s", os.Getpid(), randomSuffix())
	if err := admin.Exec("CREATE DATABASE " + name).Error; err != nil {
		return "", err
	}
	db, err := store.Open(withDB(PostgresURL(), name))
	if err != nil {
		return "", err
	}
	_, err = store.Migrate(context.Background(), db)
	_ = store.Close(db)
	if err != nil {
		return "", err
	}
	return name, nil
}

// SQLiteDSN returns the URL of a fresh, migrated SQLite file in the test's
// temporary directory.
func SQLiteDSN(t testing.TB) string {
	t.Helper()
	dsn := "sqlite://" + filepath.Join(t.TempDir(), "homing.db")
	db, err := store.Open(dsn)
	if err != nil {
		t.Fatalf("testenv: open sqlite: %v", err)
	}
	defer func() { _ = store.Close(db) }()
	if _, err := store.Migrate(context.Background(), db); err != nil {
		t.Fatalf("testenv: migrate sqlite: %v", err)
	}
	return dsn
}

// SQLite opens a fresh, migrated SQLite database for the test.
func SQLite(t testing.TB) *gorm.DB {
	t.Helper()
	db, err := store.Open(SQLiteDSN(t))
	if err != nil {
		t.Fatalf("testenv: open sqlite: %v", err)
	}
	t.Cleanup(func() { _ = store.Close(db) })
	return db
}

// Redis reserves one Redis database index for the test, empties it, and
// releases it when the test ends. The server is the tests' own (RedisAddr),
// unless HOMING_TEST_REDIS_URL names one; reservations are SET NX keys in
// its DB 0, so tests never share an index.
func Redis(t testing.TB) (asynq.RedisClientOpt, *redis.Client) {
	t.Helper()
	addr, err := RedisAddr()
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	opt, rdb, release, err := ReserveRedis(context.Background(), addr, 2*time.Minute)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(release)
	return opt, rdb
}

// reservationTTL is how long a reservation outlives a holder that died
// without releasing it.
const reservationTTL = 15 * time.Minute

// ReserveRedis is Redis for programs that are not tests (the benchmark
// harness): it reserves a free database index (1 to the server's last) on
// the server at addr, waiting up to wait for one, empties it, and returns a
// client on it and the function that empties and releases it again.
func ReserveRedis(ctx context.Context, addr string, wait time.Duration) (asynq.RedisClientOpt, *redis.Client, func(), error) {
	ctl := redis.NewClient(&redis.Options{Addr: addr, DB: 0})
	databases, err := databaseCount(ctx, ctl)
	if err != nil {
		_ = ctl.Close()
		return asynq.RedisClientOpt{}, nil, nil, fmt.Errorf("redis is required at %s (run scripts/services.sh, or set HOMING_TEST_REDIS_URL): %w", addr, err)
	}
	token := randomSuffix()
	deadline := time.Now().Add(wait)
	for {
		for idx := 1; idx < databases; idx++ {
			key := fmt.Sprintf("homing:testenv:db:%d", idx)
			ok, err := ctl.SetNX(ctx, key, token, reservationTTL).Result()
			if err != nil {
				_ = ctl.Close()
				return asynq.RedisClientOpt{}, nil, nil, fmt.Errorf("redis is required at %s (run scripts/services.sh, or set HOMING_TEST_REDIS_URL): %w", addr, err)
			}
			if !ok {
				continue
			}
			rdb := redis.NewClient(&redis.Options{Addr: addr, DB: idx})
			if err := rdb.FlushDB(ctx).Err(); err != nil {
				_ = rdb.Close()
				_ = ctl.Del(ctx, key).Err()
				_ = ctl.Close()
				return asynq.RedisClientOpt{}, nil, nil, fmt.Errorf("flush redis db %d: %w", idx, err)
			}
			// Keep the reservation alive while it is held: a benchmark may
			// hold an index far longer than the key's expiry, and an expired
			// key would hand the index to a second holder.
			stopRenew := make(chan struct{})
			renewed := make(chan struct{})
			go func() {
				defer close(renewed)
				tick := time.NewTicker(time.Minute)
				defer tick.Stop()
				for {
					select {
					case <-stopRenew:
						return
					case <-tick.C:
						_ = ctl.Expire(context.Background(), key, reservationTTL).Err()
					}
				}
			}()
			release := func() {
				close(stopRenew)
				<-renewed
				_ = rdb.FlushDB(context.Background()).Err()
				_ = rdb.Close()
				if v, _ := ctl.Get(context.Background(), key).Result(); v == token {
					_ = ctl.Del(context.Background(), key).Err()
				}
				_ = ctl.Close()
			}
			return asynq.RedisClientOpt{Addr: addr, DB: idx}, rdb, release, nil
		}
		if time.Now().After(deadline) {
			_ = ctl.Close()
			return asynq.RedisClientOpt{}, nil, nil, fmt.Errorf("no free redis database index in %s", wait)
		}
		time.Sleep(100 * time.Millisecond) // waiting for another test to release an index
	}
}

// RedisURL is the redis:// URL of a reserved database index.
func RedisURL(opt asynq.RedisClientOpt) string {
	return fmt.Sprintf("redis://%s/%d", opt.Addr, opt.DB)
}

// Backends names the two databases Homing runs on, each opened fresh and
// migrated for the test: for tests that must hold on both.
func Backends() map[string]func(testing.TB) *gorm.DB {
	return map[string]func(testing.TB) *gorm.DB{"postgres": Postgres, "sqlite": SQLite}
}

// WaitTimeout is how long Eventually waits: long enough for a loaded CI
// machine under -race, and only ever spent when a test is failing.
const WaitTimeout = 30 * time.Second

// Eventually polls cond until it holds, and fails the test if it does not
// within WaitTimeout: the one way tests wait for an effect outside their own
// goroutine (a worker's write, a receiver's request).
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(WaitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", WaitTimeout, what)
		}
		time.Sleep(10 * time.Millisecond) // a poll interval, with the deadline above
	}
}

// Open opens a pool of its own on the database at dsn (a test's database,
// such as PostgresDSN's, seen past a cut proxy), closed when the test ends.
func Open(t testing.TB, dsn string) *gorm.DB {
	t.Helper()
	db, err := store.OpenWith(dsn, store.Options{MaxOpenConns: 2})
	if err != nil {
		t.Fatalf("testenv: open %s: %v", dsn, err)
	}
	t.Cleanup(func() { _ = store.Close(db) })
	return db
}

// databaseCount is how many database indexes the server has (CONFIG GET
// databases); 16, Redis's default, when the server does not say.
func databaseCount(ctx context.Context, rdb *redis.Client) (int, error) {
	if err := rdb.Ping(ctx).Err(); err != nil {
		return 0, err
	}
	v, err := rdb.ConfigGet(ctx, "databases").Result()
	if err != nil {
		return 16, nil // CONFIG may be renamed away; the default then
	}
	n, err := strconv.Atoi(v["databases"])
	if err != nil || n < 2 {
		return 16, nil
	}
	return n, nil
}
