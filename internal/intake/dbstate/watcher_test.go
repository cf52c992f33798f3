package dbstate_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/homingdev/homing/internal/intake/dbstate"
	"github.com/homingdev/homing/internal/intake/store"
	"github.com/homingdev/homing/internal/lib/clock"
	"github.com/homingdev/homing/internal/testing/testenv"
)

// TestWatcherOutageIsLoudOnceAndEndsOnItsOwn cuts a real PostgreSQL away
// behind a proxy: every failed statement is counted, the outage is logged
// once at ERROR however many fail, readiness fails meanwhile, and the first
// probe that gets through ends it with one INFO line saying how long it
// lasted.
func TestWatcherOutageIsLoudOnceAndEndsOnItsOwn(t *testing.T) {
	t.Parallel()
	proxy, dsn := testenv.PostgresProxy(t, testenv.PostgresDSN(t))
	db, err := store.OpenWith(dsn, store.Options{MaxOpenConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close(db) })
	logs, log := testenv.NewLogs()
	clk := clock.NewStub(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	w := dbstate.New(dbstate.Config{Probe: store.Probe(db), Clock: clk, Logger: log, Consequence: "publishes are answered 503"})
	ctx := context.Background()

	if err := w.Ready(ctx); err != nil {
		t.Fatalf("ready before the cut: %v", err)
	}
	proxy.Cut()
	for range 3 {
		err := db.WithContext(ctx).Exec("SELECT 1").Error
		if k := w.Observe(err); k != dbstate.Unavailable {
			t.Fatalf("a statement through the cut proxy: %v classified %q, want unavailable", err, k)
		}
	}
	err = w.Ready(ctx)
	var outage *dbstate.OutageError
	if !errors.As(err, &outage) || outage.Kind != dbstate.Unavailable || !outage.Since.Equal(clk.Now()) {
		t.Fatalf("ready during the cut = %v, want an unavailable OutageError since now", err)
	}
	if got := w.Errors()[dbstate.Unavailable]; got != 4 { // three statements and the probe
		t.Errorf("unavailable errors counted = %d, want 4", got)
	}
	if n := logs.Count("ERROR", "database unavailable: "); n != 1 {
		t.Errorf("ERROR lines = %d, want 1:\n%s", n, logs)
	}
	if n := logs.Count("ERROR", "; publishes are answered 503"); n != 1 {
		t.Errorf("the ERROR line does not say what the process does meanwhile:\n%s", logs)
	}

	clk.Advance(4200 * time.Millisecond)
	proxy.Restore()
	testenv.Eventually(t, "a probe through the restored proxy", func() bool { return w.RunOnce(ctx) == nil })
	if err := w.Err(); err != nil {
		t.Errorf("after the restore: %v", err)
	}
	if n := logs.Count("INFO", "database available again after 4.2s"); n != 1 {
		t.Errorf("INFO lines \"available again after 4.2s\" = %d, want 1:\n%s", n, logs)
	}
	if err := w.RunOnce(ctx); err != nil || logs.Count("INFO", "available again") != 1 || logs.Count("ERROR", "") != 1 {
		t.Errorf("a second good probe logged again (or failed: %v):\n%s", err, logs)
	}
}

// TestWatcherReadOnlyPrimary is a primary demoted under a connected Homing:
// a ping still passes, a write fails with 25006, and the probe says so.
func TestWatcherReadOnlyPrimary(t *testing.T) {
	t.Parallel()
	dsn := testenv.PostgresDSN(t)
	db, err := store.OpenWith(dsn, store.Options{MaxOpenConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close(db) })
	logs, log := testenv.NewLogs()
	w := dbstate.New(dbstate.Config{Probe: store.Probe(db), Logger: log})
	ctx := context.Background()

	testenv.SetReadOnly(t, dsn, true)
	testenv.Eventually(t, "the probe to see the read-only database", func() bool {
		return dbstate.Classify(w.RunOnce(ctx)) == dbstate.ReadOnly
	})
	err = db.WithContext(ctx).Exec("INSERT INTO tenants (name, created_at, updated_at) VALUES ('t1', now(), now())").Error
	if k := w.Observe(err); k != dbstate.ReadOnly {
		t.Fatalf("a write to the read-only database: %v classified %q, want read_only", err, k)
	}
	var outage *dbstate.OutageError
	if err := w.Ready(ctx); !errors.As(err, &outage) || outage.Kind != dbstate.ReadOnly {
		t.Fatalf("ready = %v, want a read_only OutageError", err)
	}
	// The sessions ended by the demotion may start the outage as
	// unavailable (57P01); it is one outage, one line.
	if n := logs.Count("ERROR", "database "); n != 1 {
		t.Errorf("ERROR lines = %d, want 1:\n%s", n, logs)
	}

	testenv.SetReadOnly(t, dsn, false)
	testenv.Eventually(t, "the probe to see the database writable", func() bool { return w.RunOnce(ctx) == nil })
	if n := logs.Count("INFO", "database available again"); n != 1 {
		t.Errorf("INFO lines = %d, want 1:\n%s", n, logs)
	}
}

// TestWatcherSlowProbes: a probe that times out once (a busy pool) does not
// start an outage; three in a row do, and the next good probe ends it.
func TestWatcherSlowProbes(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	logs, log := testenv.NewLogs()
	w := dbstate.New(dbstate.Config{Probe: store.Probe(db), Logger: log})
	expired, cancel := context.WithTimeout(context.Background(), -time.Second)
	defer cancel()
	for i := range 3 {
		if err := w.RunOnce(expired); dbstate.Classify(err) != dbstate.Timeout {
			t.Fatalf("a probe past its deadline = %v, want a timeout", err)
		}
		if down := w.Err() != nil; down != (i == 2) {
			t.Fatalf("after %d slow probes down = %v", i+1, down)
		}
		if i == 0 {
			// A good probe in between starts the count again.
			if err := w.RunOnce(context.Background()); err != nil {
				t.Fatal(err)
			}
			if err := w.RunOnce(expired); err == nil || w.Err() != nil {
				t.Fatalf("one slow probe after a good one: %v, down %v", err, w.Err())
			}
		}
	}
	if n := logs.Count("ERROR", "3 probes in a row failed"); n != 1 {
		t.Errorf("ERROR lines = %d, want 1:\n%s", n, logs)
	}
	if err := w.RunOnce(context.Background()); err != nil || w.Err() != nil {
		t.Fatalf("a good probe after the outage: %v, down %v", err, w.Err())
	}
}
