package metrics_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/homingdev/homing/internal/intake/dbstate"
	"github.com/homingdev/homing/internal/intake/store"
	"github.com/homingdev/homing/internal/ops/metrics"
	"github.com/homingdev/homing/internal/testing/testenv"
)

// TestDatabaseOutageOnTheWorkersMetrics cuts a worker-like process's
// PostgreSQL away: /readyz turns 503 naming the database,
// homing_database_errors_total{kind="unavailable"} grows and
// homing_database_up is 0; once the database is back both recover on their
// own.
func TestDatabaseOutageOnTheWorkersMetrics(t *testing.T) {
	t.Parallel()
	proxy, dsn := testenv.PostgresProxy(t, testenv.PostgresDSN(t))
	db := testenv.Open(t, dsn)
	redisOpt, _ := testenv.Redis(t)
	logs, log := testenv.NewLogs()
	w := dbstate.New(dbstate.Config{Probe: store.Probe(db), Logger: log})
	srv := metrics.NewServer("127.0.0.1:0", metrics.New(metrics.Options{Database: w}), metrics.ReadyWith(w.Ready, redisOpt), nil)
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop(context.Background()) })

	if code, body := get(t, srv.Addr(), "/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz before the cut: %d %q", code, body)
	}
	families := scrape(t, srv.Addr())
	if v, ok := sample(families, "homing_database_errors_total", "kind=unavailable"); !ok || v != 0 {
		t.Fatalf("homing_database_errors_total{kind=unavailable} before the cut = %v (present %v), want 0", v, ok)
	}
	if v, _ := sample(families, "homing_database_up"); v != 1 {
		t.Fatalf("homing_database_up before the cut = %v, want 1", v)
	}

	proxy.Cut()
	// A task meets the outage before any probe does.
	w.Observe(db.Exec("SELECT 1").Error)
	code, body := get(t, srv.Addr(), "/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "database unavailable") || strings.Contains(body, "redis") {
		t.Errorf("/readyz during the cut: %d %q, want 503 naming only the database", code, body)
	}
	families = scrape(t, srv.Addr())
	if v, _ := sample(families, "homing_database_errors_total", "kind=unavailable"); v < 2 {
		t.Errorf("homing_database_errors_total{kind=unavailable} during the cut = %v, want at least 2 (a statement and a probe)", v)
	}
	if v, _ := sample(families, "homing_database_up"); v != 0 {
		t.Errorf("homing_database_up during the cut = %v, want 0", v)
	}

	proxy.Restore()
	testenv.Eventually(t, "/readyz after the restore", func() bool {
		code, _ := get(t, srv.Addr(), "/readyz")
		return code == http.StatusOK
	})
	if v, _ := sample(scrape(t, srv.Addr()), "homing_database_up"); v != 1 {
		t.Errorf("homing_database_up after the restore = %v, want 1", v)
	}
	if logs.Count("ERROR", "database unavailable") != 1 || logs.Count("INFO", "database available again") != 1 {
		t.Errorf("want one ERROR line and one INFO line:\n%s", logs)
	}
}
