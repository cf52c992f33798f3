package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/redis/go-redis/v9"

	"github.com/homingdev/homing/client"
	"github.com/homingdev/homing/config"
	"github.com/homingdev/homing/internal/engine/secretbox"
	"github.com/homingdev/homing/internal/engine/webhook"
	"github.com/homingdev/homing/internal/intake/event"
	"github.com/homingdev/homing/internal/intake/store"
	"github.com/homingdev/homing/internal/lib/clock"
	"github.com/homingdev/homing/internal/ops/metrics"
	"github.com/homingdev/homing/internal/testing/testenv"
	"github.com/homingdev/homing/internal/testing/testreceiver"
	"github.com/homingdev/homing/internal/wiring/app"
	"github.com/homingdev/homing/internal/wiring/worker"
	"github.com/homingdev/homing/models"
)

// env is a real worker serving metrics on a loopback port of its own, on a
// private PostgreSQL database and Redis index, with the clock stubbed.
type env struct {
	t      *testing.T
	cfg    config.Config
	clock  *clock.Stub
	app    *app.App
	worker *worker.Worker
	hooks  *webhook.Service
	pub    *client.Client
}

func testConfig(t *testing.T) config.Config {
	t.Helper()
	redisOpt, _ := testenv.Redis(t)
	key, err := secretbox.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.Delivery.AllowPrivateNetworks = true // the receivers are on loopback
	cfg.Database.URL = testenv.PostgresDSN(t)
	cfg.Redis.URL = testenv.RedisURL(redisOpt)
	cfg.Secrets.Key = key
	cfg.Worker.Concurrency = 5
	cfg.Worker.ShutdownTimeout = 5 * time.Second
	cfg.Metrics.Addr = "127.0.0.1:0"
	// These tests scrape right after what they count: every scrape
	// collects (server_test.go tests the cache).
	cfg.Metrics.ScrapeCache = 0
	return cfg
}

func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvOn(t, "")
}

// newEnvOn is newEnv on the database at dsn ("" is PostgreSQL's).
func newEnvOn(t *testing.T, dsn string) *env {
	t.Helper()
	cfg := testConfig(t)
	if dsn != "" {
		cfg.Database.URL = dsn
	}
	stub := clock.NewStub(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	a, err := app.Open(context.Background(), cfg, log, app.Options{Clock: stub})
	if err != nil {
		t.Fatalf("open app: %v", err)
	}
	w := worker.New(a)
	if err := w.Start(context.Background()); err != nil {
		_ = a.Close()
		t.Fatal(err)
	}
	pub, err := client.New(client.Config{RedisURL: cfg.Redis.URL})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = w.Stop(context.Background())
		_ = pub.Close()
		_ = a.Close()
	})
	return &env{
		t: t, cfg: cfg, clock: stub, app: a, worker: w, pub: pub,
		hooks: webhook.New(a.DB, a.Box, stub, webhook.Defaults{MaxRetries: 3, Timeout: 2 * time.Second}, log),
	}
}

func (e *env) createWebhook(name, url string, maxRetries int) {
	e.t.Helper()
	in := webhook.Input{
		Name: &name, DocType: ptr("Sales Order"), Event: ptr("on_submit"), URL: &url, MaxRetries: &maxRetries,
	}
	if _, err := e.hooks.Create(context.Background(), "", in); err != nil {
		e.t.Fatalf("create webhook %s: %v", name, err)
	}
}

func ptr[T any](v T) *T { return &v }

// scrape reads /metrics over HTTP, as Prometheus would.
func scrape(t *testing.T, addr string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: %s", resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse scrape: %v", err)
	}
	return families
}

// sample finds the series of name whose labels include want ("k=v" pairs);
// for a histogram it returns the sample count.
// hasLabels reports whether m carries every k=v of want.
func hasLabels(m *dto.Metric, want []string) bool {
	labels := map[string]string{}
	for _, l := range m.GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	for _, kv := range want {
		k, v, _ := strings.Cut(kv, "=")
		if labels[k] != v {
			return false
		}
	}
	return true
}

func sample(families map[string]*dto.MetricFamily, name string, want ...string) (float64, bool) {
	f, ok := families[name]
	if !ok {
		return 0, false
	}
	for _, m := range f.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		match := true
		for _, kv := range want {
			k, v, _ := strings.Cut(kv, "=")
			if labels[k] != v {
				match = false
			}
		}
		if !match {
			continue
		}
		switch {
		case m.Counter != nil:
			// Like a PromQL selector summed: the labels not named (the
			// webhook, say) are added up.
			sum, found := 0.0, false
			for _, m := range f.GetMetric() {
				if hasLabels(m, want) {
					sum, found = sum+m.GetCounter().GetValue(), true
				}
			}
			return sum, found
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		case m.Untyped != nil:
			return m.Untyped.GetValue(), true
		}
	}
	return 0, false
}

// expect compares every named series with its wanted value.
func expect(t *testing.T, families map[string]*dto.MetricFamily, want map[string]float64) {
	t.Helper()
	for series, v := range want {
		name, labels, _ := strings.Cut(series, "{")
		var kvs []string
		if labels = strings.TrimSuffix(labels, "}"); labels != "" {
			kvs = strings.Split(labels, ",")
		}
		got, ok := sample(families, name, kvs...)
		if !ok {
			t.Errorf("%s: missing from the scrape", series)
			continue
		}
		if got != v {
			t.Errorf("%s = %v, want %v", series, got, v)
		}
	}
}

func attemptsTotal(families map[string]*dto.MetricFamily) float64 {
	var sum float64
	for _, m := range families["homing_attempts_total"].GetMetric() {
		sum += m.GetCounter().GetValue()
	}
	return sum
}

func TestLifecycleMetrics(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ok := testreceiver.Answering(t, http.StatusOK)
	down := testreceiver.Answering(t, http.StatusServiceUnavailable)
	gone := testreceiver.Answering(t, http.StatusServiceUnavailable)
	e.createWebhook("ok", ok.URL, 3)
	e.createWebhook("down", down.URL, 3)
	e.createWebhook("gone", gone.URL, 0)
	addr := e.worker.MetricsAddr()
	if strings.HasSuffix(addr, ":0") {
		t.Fatalf("MetricsAddr %q is not the bound address", addr)
	}

	// Before anything happened every series is there, at zero.
	expect(t, scrape(t, addr), map[string]float64{
		"homing_deliveries_total{status=Delivered}": 0,
		"homing_attempts_total{class=timeout}":      0,
		"homing_due_backlog":                        0,
	})

	if _, err := e.pub.Publish(context.Background(), client.Event{
		ID: "ev-metrics", DocType: "Sales Order", DocName: "SO-1", Event: "on_submit", Doc: map[string]any{"name": "SO-1"},
	}); err != nil {
		t.Fatal(err)
	}
	var fam map[string]*dto.MetricFamily
	testenv.Eventually(t, "three attempts to be counted", func() bool {
		fam = scrape(t, addr)
		return attemptsTotal(fam) >= 3
	})
	expect(t, fam, map[string]float64{
		"homing_deliveries_total{status=Delivered}": 1,
		"homing_deliveries_total{status=Failed}":    1,
		"homing_deliveries_total{status=Exhausted}": 1,
		"homing_attempts_total{class=2xx}":          1,
		"homing_attempts_total{class=5xx}":          2,
		"homing_attempts_total{class=4xx}":          0,
		"homing_attempts_total{class=connection}":   0,
		"homing_attempt_duration_seconds":           3,
		// Each webhook has its own series, so an alert can name it.
		"homing_deliveries_total{webhook=ok,status=Delivered}":   1,
		"homing_deliveries_total{webhook=down,status=Failed}":    1,
		"homing_deliveries_total{webhook=gone,status=Exhausted}": 1,
		"homing_attempts_total{webhook=down,class=5xx}":          1,
		"homing_attempts_total{webhook=ok,class=2xx}":            1,
		"homing_due_backlog":            0,
		"homing_oldest_due_age_seconds": 0,
		"homing_sweep_enqueued_total":   0,
		"homing_sweep_duration_seconds": 0,
	})
	if got := []int{ok.Count(), down.Count(), gone.Count()}; got[0] != 1 || got[1] != 1 || got[2] != 1 {
		t.Errorf("receivers got %v requests, want one each", got)
	}
	for _, series := range []string{"asynq_queue_size", "asynq_tasks_enqueued_total", "asynq_queue_latency_seconds"} {
		if _, ok := sample(fam, series, "queue=default"); !ok {
			t.Errorf("%s{queue=default} missing: asynq's queue metrics are not registered", series)
		}
	}
	if _, ok := sample(fam, "go_goroutines"); !ok {
		t.Error("go_goroutines missing: the runtime collector is not registered")
	}

	// The 503 is retried 5 minutes later; a minute past that it is overdue.
	e.clock.Advance(6 * time.Minute)
	expect(t, scrape(t, addr), map[string]float64{
		"homing_due_backlog":            1,
		"homing_oldest_due_age_seconds": 60,
	})

	res, err := e.worker.Sweeper.RunOnce(context.Background())
	if err != nil || res.Enqueued != 1 {
		t.Fatalf("sweep: %+v, %v; want one enqueued", res, err)
	}
	testenv.Eventually(t, "the retry to be counted", func() bool {
		fam = scrape(t, addr)
		return attemptsTotal(fam) >= 4
	})
	expect(t, fam, map[string]float64{
		"homing_deliveries_total{status=Delivered}": 1,
		"homing_deliveries_total{status=Failed}":    2,
		"homing_deliveries_total{status=Exhausted}": 1,
		"homing_attempts_total{class=2xx}":          1,
		"homing_attempts_total{class=5xx}":          3,
		"homing_attempt_duration_seconds":           4,
		"homing_sweep_enqueued_total":               1,
		"homing_sweep_duration_seconds":             1,
		"homing_due_backlog":                        0,
		"homing_oldest_due_age_seconds":             0,
	})
	if n := down.Count(); n != 2 {
		t.Errorf("failing receiver got %d requests, want 2", n)
	}

	// Disabled before its next retry, the delivery is exhausted at once by
	// the webhook service (last_error "webhook disabled"), not by the worker:
	// the sweep finds nothing due, no request is made and the worker's
	// counters stay as they were (they count what the worker did).
	if _, err := e.hooks.Update(context.Background(), "", "down", webhook.Input{Enabled: ptr(false)}); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(31 * time.Minute)
	if res, err := e.worker.Sweeper.RunOnce(context.Background()); err != nil || res.Enqueued != 0 {
		t.Fatalf("second sweep: %+v, %v; want nothing enqueued", res, err)
	}
	expect(t, scrape(t, addr), map[string]float64{
		"homing_deliveries_total{status=Delivered}": 1,
		"homing_deliveries_total{status=Failed}":    2,
		"homing_deliveries_total{status=Exhausted}": 1,
		"homing_attempts_total{class=5xx}":          3,
		"homing_attempt_duration_seconds":           4,
		"homing_sweep_enqueued_total":               1,
		"homing_sweep_duration_seconds":             2,
		"homing_due_backlog":                        0,
	})
	if n := down.Count(); n != 2 {
		t.Errorf("disabled receiver got %d requests, want still 2", n)
	}

	// The database has the disabled webhook's row final too.
	var counts []struct {
		Status string
		N      int
	}
	if err := e.app.DB.Model(&models.Delivery{}).Select("status, count(*) AS n").Group("status").Scan(&counts).Error; err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, c := range counts {
		got[c.Status] = c.N
	}
	if got[models.StatusDelivered] != 1 || got[models.StatusExhausted] != 2 || len(got) != 2 {
		t.Errorf("deliveries by status %v, want 1 Delivered and 2 Exhausted", got)
	}
}

func TestWorkerServesHealthAndReadiness(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	code, body := get(t, e.worker.MetricsAddr(), "/healthz")
	if code != http.StatusOK || body != "ok\n" {
		t.Errorf("/healthz: %d %q", code, body)
	}
	code, body = get(t, e.worker.MetricsAddr(), "/readyz")
	// Ready; the start-up checks' warnings (the test Redis persists
	// nothing) follow on lines of their own and do not make it unready.
	if code != http.StatusOK || !strings.HasPrefix(body, "ok\n") {
		t.Errorf("/readyz with database and Redis up: %d %q", code, body)
	}
	for _, line := range strings.Split(strings.TrimSuffix(body, "\n"), "\n")[1:] {
		if !strings.HasPrefix(line, "warning: ") {
			t.Errorf("/readyz line %q is not a warning", line)
		}
	}
}

func get(t *testing.T, addr, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return resp.StatusCode, string(b)
}

func TestReadyzTurnsUnreadyWhenRedisStops(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	addr, stop := ownRedis(t)
	srv := metrics.NewServer("127.0.0.1:0", metrics.New(metrics.Options{}), metrics.Ready(db, asynq.RedisClientOpt{Addr: addr}), nil)
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop(context.Background()) })

	if code, body := get(t, srv.Addr(), "/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz with Redis up: %d %q", code, body)
	}
	stop()
	var code int
	var body string
	testenv.Eventually(t, "/readyz to turn unready", func() bool {
		code, body = get(t, srv.Addr(), "/readyz")
		return code != http.StatusOK
	})
	if code != http.StatusServiceUnavailable || !strings.HasPrefix(body, "redis: ") || !strings.Contains(body, addr) {
		t.Errorf("/readyz with Redis down: %d %q, want 503 naming redis at %s", code, body, addr)
	}
	if strings.Contains(body, "database") {
		t.Errorf("/readyz blames the database, which is up: %q", body)
	}
	if code, body := get(t, srv.Addr(), "/healthz"); code != http.StatusOK {
		t.Errorf("/healthz with Redis down: %d %q; the process is still up", code, body)
	}
}

func TestReadyzNamesTheDatabase(t *testing.T) {
	t.Parallel()
	db, err := store.Open(testenv.PostgresDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Close(db); err != nil {
		t.Fatal(err)
	}
	redisOpt, _ := testenv.Redis(t)
	ready := metrics.Ready(db, redisOpt)
	err = ready(context.Background())
	if err == nil || !strings.HasPrefix(err.Error(), "database: ") || strings.Contains(err.Error(), "redis") {
		t.Fatalf("readiness with the database closed: %v, want an error naming only the database", err)
	}
	srv := metrics.NewServer("127.0.0.1:0", metrics.New(metrics.Options{}), ready, nil)
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop(context.Background()) })
	if code, body := get(t, srv.Addr(), "/readyz"); code != http.StatusServiceUnavailable || body != err.Error()+"\n" {
		t.Errorf("/readyz: %d %q", code, body)
	}
}

func TestReadyzTimesOut(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	hung := func(context.Context) error { <-release; return nil }
	srv := metrics.NewServer("127.0.0.1:0", metrics.New(metrics.Options{}), hung, nil)
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop(context.Background()) })
	code, body := get(t, srv.Addr(), "/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "did not answer within 2s") {
		t.Errorf("/readyz with a hung check: %d %q", code, body)
	}
}

func TestBacklogErrorDropsOnlyBacklog(t *testing.T) {
	t.Parallel()
	m := metrics.New(metrics.Options{
		Backlog: func(context.Context) (int64, time.Time, error) { return 0, time.Time{}, errors.New("database is down") },
	})
	m.Attempt("", "orders", "2xx", time.Second, models.StatusDelivered, models.ReasonAccepted)
	srv := httptest.NewServer(m.Handler())
	t.Cleanup(srv.Close)
	fam := scrape(t, strings.TrimPrefix(srv.URL, "http://"))
	expect(t, fam, map[string]float64{
		"homing_attempts_total{class=2xx}":          1,
		"homing_deliveries_total{status=Delivered}": 1,
	})
	if _, ok := fam["homing_due_backlog"]; ok {
		t.Error("homing_due_backlog served although Backlog failed")
	}
}

func TestWorkerStartNamesMetricsAddrWhenPortIsTaken(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = taken.Close() })
	cfg := testConfig(t)
	cfg.Metrics.Addr = taken.Addr().String()
	a, err := app.Open(context.Background(), cfg, slog.New(slog.DiscardHandler), app.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	w := worker.New(a)
	err = w.Start(context.Background())
	if err == nil {
		_ = w.Stop(context.Background())
		t.Fatal("worker started with its metrics port taken")
	}
	if want := fmt.Sprintf("metrics.addr %q", cfg.Metrics.Addr); !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "address already in use") {
		t.Errorf("error %q, want it to name %s and say the address is in use", err, want)
	}
}

// ownRedis runs a redis-server of the test's own on a free loopback port, so
// the test can stop it; stop kills it and waits until it is gone.
func ownRedis(t *testing.T) (addr string, stop func()) {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server is not installed; it is needed to stop a Redis under test")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	if err := cmd.Start(); err != nil {
		t.Fatalf("start redis-server: %v", err)
	}
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
	t.Cleanup(stop)
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer func() { _ = rdb.Close() }()
	testenv.Eventually(t, "redis-server to answer", func() bool { return rdb.Ping(context.Background()).Err() == nil })
	return addr, stop
}

// TestWebhookLabelIsBounded: the first metrics.max_webhook_labels webhooks
// get a series of their own, every later one counts as webhook="other", and
// nothing is lost from the totals.
func TestWebhookLabelIsBounded(t *testing.T) {
	t.Parallel()
	m := metrics.New(metrics.Options{MaxWebhookLabels: 2, MaxTenantLabels: 1})
	for _, w := range []string{"a", "b", "c", "a", "d"} {
		m.Attempt("", w, "5xx", time.Second, models.StatusFailed, models.ReasonRetrying)
	}
	m.Deliveries("", "e", models.StatusExhausted, models.ReasonWebhookDisabled, 1)
	m.Deliveries("", "b", models.StatusExhausted, models.ReasonWebhookDeleted, 1)
	srv := httptest.NewServer(m.Handler())
	t.Cleanup(srv.Close)
	fam := scrape(t, strings.TrimPrefix(srv.URL, "http://"))
	expect(t, fam, map[string]float64{
		"homing_attempts_total{webhook=a,class=5xx}":              2,
		"homing_attempts_total{webhook=b,class=5xx}":              1,
		"homing_attempts_total{webhook=other,class=5xx}":          2, // c and d
		"homing_attempts_total{class=5xx}":                        5,
		"homing_deliveries_total{webhook=other,status=Failed}":    2,
		"homing_deliveries_total{webhook=other,status=Exhausted}": 1, // e
		"homing_deliveries_total{webhook=b,status=Exhausted}":     1,
		"homing_deliveries_total{status=Exhausted}":               2,
	})
	for _, w := range []string{"c", "d", "e"} {
		if _, ok := sample(fam, "homing_attempts_total", "webhook="+w); ok {
			t.Errorf("webhook %q has a series of its own beyond the bound of 2", w)
		}
	}
	if _, ok := sample(fam, "homing_deliveries_total", "webhook=e"); ok {
		t.Error(`webhook "e" has a series of its own beyond the bound of 2`)
	}
}

// TestTenantLabelIsBounded: the first metrics.max_tenant_labels tenants get
// a tenant label of their own, every later one (and its webhooks) counts as
// tenant="other"; two tenants' webhooks of one name stay apart.
func TestTenantLabelIsBounded(t *testing.T) {
	t.Parallel()
	m := metrics.New(metrics.Options{MaxWebhookLabels: 10, MaxTenantLabels: 2})
	for _, tw := range [][2]string{{"", "orders"}, {"acme", "orders"}, {"globex", "orders"}, {"acme", "orders"}, {"initech", "x"}} {
		m.Attempt(tw[0], tw[1], "2xx", time.Second, models.StatusDelivered, models.ReasonAccepted)
	}
	m.Deliveries("globex", "orders", models.StatusExhausted, models.ReasonWebhookDeleted, 3)
	srv := httptest.NewServer(m.Handler())
	t.Cleanup(srv.Close)
	fam := scrape(t, strings.TrimPrefix(srv.URL, "http://"))
	expect(t, fam, map[string]float64{
		"homing_attempts_total{tenant=default,webhook=orders,class=2xx}":       1,
		"homing_attempts_total{tenant=acme,webhook=orders,class=2xx}":          2,
		"homing_attempts_total{tenant=other,webhook=other,class=2xx}":          2, // globex and initech
		"homing_attempts_total{class=2xx}":                                     5,
		"homing_deliveries_total{tenant=acme,webhook=orders,status=Delivered}": 2,
		"homing_deliveries_total{tenant=other,webhook=other,status=Exhausted}": 3,
		"homing_deliveries_total{tenant=other,webhook=other,status=Delivered}": 2,
	})
	for _, ten := range []string{"globex", "initech"} {
		if _, ok := sample(fam, "homing_attempts_total", "tenant="+ten); ok {
			t.Errorf("tenant %q has a series of its own beyond the bound of 2", ten)
		}
	}
}

// Every way a delivery ends Exhausted is counted in homing_deliveries_total
// with its reason, by the process that makes it so: unbuildable at fan-out,
// 410 Gone (and the webhook's other retries it exhausts by disabling it),
// a webhook disabled or deleted through the webhook service (issue 25).
func TestEveryExhaustedDeliveryIsCounted(t *testing.T) {
	t.Parallel()
	for name, dsn := range map[string]func(testing.TB) string{"postgres": testenv.PostgresDSN, "sqlite": testenv.SQLiteDSN} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEnvOn(t, dsn(t))
			hooks := webhook.New(e.app.DB, e.app.Box, e.clock, webhook.Defaults{MaxRetries: 3, Timeout: 2 * time.Second}, nil)
			hooks.SetObserver(e.app.Dispatcher) // as webhookService does in every process
			down := testreceiver.Answering(t, http.StatusServiceUnavailable)
			gone := testreceiver.Answers(t, func(n int) int {
				if n == 1 {
					return http.StatusServiceUnavailable
				}
				return http.StatusGone
			})
			create := func(name, url string, mod func(*webhook.Input)) {
				t.Helper()
				in := webhook.Input{Name: ptr(name), DocType: ptr("Sales Order"), Event: ptr("on_submit"), URL: ptr(url)}
				if mod != nil {
					mod(&in)
				}
				if _, err := hooks.Create(context.Background(), "", in); err != nil {
					t.Fatalf("create webhook %s: %v", name, err)
				}
			}
			create("unbuildable", down.URL, func(in *webhook.Input) { in.Template = ptr(`{"d": {{ doc.discount }}}`) })
			create("disabled", down.URL, nil)
			create("deleted", down.URL, nil)
			create("gone", gone.URL, nil)
			addr := e.worker.MetricsAddr()
			publish := func(id string) {
				t.Helper()
				if _, err := e.pub.Publish(context.Background(), client.Event{
					ID: id, DocType: "Sales Order", DocName: "SO-1", Event: "on_submit", Doc: map[string]any{"name": "SO-1"},
				}); err != nil {
					t.Fatal(err)
				}
			}
			publish("ev-count-1")
			testenv.Eventually(t, "three attempts and the unbuildable delivery counted", func() bool {
				fam := scrape(t, addr)
				n, _ := sample(fam, "homing_deliveries_total", "status=Exhausted", "reason=unbuildable")
				return attemptsTotal(fam) >= 3 && n == 1
			})
			// The second event's 410 disables "gone", and with it the first
			// event's retry of it.
			publish("ev-count-2")
			testenv.Eventually(t, "six attempts and the 410 counted", func() bool {
				fam := scrape(t, addr)
				n, _ := sample(fam, "homing_deliveries_total", "status=Exhausted", "reason=gone")
				return attemptsTotal(fam) >= 6 && n == 2
			})
			if _, err := hooks.Update(context.Background(), "", "disabled", webhook.Input{Enabled: ptr(false)}); err != nil {
				t.Fatal(err)
			}
			if err := hooks.Delete(context.Background(), "", "deleted"); err != nil {
				t.Fatal(err)
			}
			fam := scrape(t, addr)
			expect(t, fam, map[string]float64{
				"homing_deliveries_total{webhook=unbuildable,status=Exhausted,reason=unbuildable}":   2,
				"homing_deliveries_total{webhook=gone,status=Exhausted,reason=gone}":                 2,
				"homing_deliveries_total{webhook=disabled,status=Exhausted,reason=webhook_disabled}": 2,
				"homing_deliveries_total{webhook=deleted,status=Exhausted,reason=webhook_deleted}":   2,
			})
			// What the metric counts is what the database holds.
			var exhausted int64
			if err := e.app.DB.Model(&models.Delivery{}).Where("status = ?", models.StatusExhausted).Count(&exhausted).Error; err != nil {
				t.Fatal(err)
			}
			if total, _ := sample(fam, "homing_deliveries_total", "status=Exhausted"); total != float64(exhausted) || exhausted != 8 {
				t.Errorf("homing_deliveries_total{status=Exhausted} = %v, the database holds %d Exhausted deliveries, want 8", total, exhausted)
			}
		})
	}
}

// TestWebhookLabelsAreSharedPerTenant: a tenant renaming its webhook over
// and over takes metrics.max_webhook_labels_per_tenant webhook labels, and
// the next tenant's webhook still gets one of its own (issue 35, finding
// 10: first come, first served, one tenant took them all).
func TestWebhookLabelsAreSharedPerTenant(t *testing.T) {
	t.Parallel()
	m := metrics.New(metrics.Options{MaxWebhookLabels: 10, MaxTenantLabels: 10, MaxWebhookLabelsPerTenant: 3})
	for i := range 40 {
		m.Attempt("noisy", fmt.Sprintf("renamed-%d", i), "2xx", time.Millisecond, models.StatusDelivered, models.ReasonAccepted)
	}
	m.Attempt("quiet", "orders", "2xx", time.Millisecond, models.StatusDelivered, models.ReasonAccepted)
	srv := httptest.NewServer(m.Handler())
	t.Cleanup(srv.Close)
	fam := scrape(t, strings.TrimPrefix(srv.URL, "http://"))
	expect(t, fam, map[string]float64{
		"homing_attempts_total{tenant=quiet,webhook=orders,class=2xx}": 1,
		"homing_attempts_total{tenant=noisy,webhook=other,class=2xx}":  37,
		"homing_attempts_total{tenant=noisy,class=2xx}":                40,
	})
}

// histogram is the count and sum of name's series with labels want.
func histogram(families map[string]*dto.MetricFamily, name string, want ...string) (count uint64, sum float64, ok bool) {
	for _, m := range families[name].GetMetric() {
		if hasLabels(m, want) && m.Histogram != nil {
			return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum(), true
		}
	}
	return 0, 0, false
}

// TestLatencyUsersFeel: an event accepted at T whose delivery fails, is
// retried 6 minutes later by the sweep and delivered, is observed in
// homing_delivery_latency_seconds as delivered, retried, 6 minutes after
// T (the dispatcher's clock, the acceptance the task carries); its first
// attempt in homing_delivery_first_attempt_seconds at once. A delivery
// exhausted at its first attempt is observed as exhausted, not retried.
func TestLatencyUsersFeel(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var calls atomic.Int32
	flaky := testreceiver.Answers(t, func(int) int {
		if calls.Add(1) == 1 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	gone := testreceiver.Answering(t, http.StatusServiceUnavailable)
	e.createWebhook("flaky", flaky.URL, 3)
	e.createWebhook("gone", gone.URL, 0)
	addr := e.worker.MetricsAddr()

	opt, perr := asynq.ParseRedisURI(e.cfg.Redis.URL)
	if perr != nil {
		t.Fatal(perr)
	}
	q := asynq.NewClient(opt)
	t.Cleanup(func() { _ = q.Close() })
	accepted := e.clock.Now()
	task, err := event.NewTaskJSON(event.Event{ID: "ev-latency", DocType: "Sales Order", DocName: "SO-1", Event: "on_submit", AcceptedAt: accepted},
		[]byte(`{"name": "SO-1"}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Enqueue(task); err != nil {
		t.Fatal(err)
	}
	var fam map[string]*dto.MetricFamily
	testenv.Eventually(t, "both first attempts", func() bool {
		fam = scrape(t, addr)
		n, _, _ := histogram(fam, "homing_delivery_first_attempt_seconds", "webhook=flaky")
		m, _, _ := histogram(fam, "homing_delivery_first_attempt_seconds", "webhook=gone")
		return n == 1 && m == 1
	})
	if n, sum, _ := histogram(fam, "homing_delivery_latency_seconds", "webhook=gone", "outcome=exhausted", "retried=false"); n != 1 || sum != 0 {
		t.Errorf("gone's latency: %d observations summing %vs, want one of 0s (the stub clock has not moved)", n, sum)
	}
	if n, _, ok := histogram(fam, "homing_delivery_latency_seconds", "webhook=flaky"); ok && n != 0 {
		t.Errorf("flaky's latency observed %d times before it was delivered", n)
	}
	var row models.Delivery
	if err := e.app.DB.Where("webhook_name = ?", "flaky").Take(&row).Error; err != nil {
		t.Fatal(err)
	}
	if row.AcceptedAt == nil || !row.AcceptedAt.Equal(accepted.UTC().Truncate(time.Microsecond)) {
		t.Errorf("flaky's delivery accepted_at %v, want the task's %v", row.AcceptedAt, accepted)
	}

	e.clock.Advance(6 * time.Minute)
	if res, err := e.worker.Sweeper.RunOnce(context.Background()); err != nil || res.Enqueued != 1 {
		t.Fatalf("sweep: %+v, %v; want the retry enqueued", res, err)
	}
	testenv.Eventually(t, "flaky delivered", func() bool {
		fam = scrape(t, addr)
		n, _, _ := histogram(fam, "homing_delivery_latency_seconds", "webhook=flaky", "outcome=delivered", "retried=true")
		return n == 1
	})
	if _, sum, _ := histogram(fam, "homing_delivery_latency_seconds", "webhook=flaky", "outcome=delivered", "retried=true"); sum != 360 {
		t.Errorf("flaky's latency %vs, want 360s: from its acceptance to the retry's success", sum)
	}
	if n, _, _ := histogram(fam, "homing_delivery_first_attempt_seconds", "webhook=flaky"); n != 1 {
		t.Errorf("flaky's first attempt observed %d times, want once (the retry is no first attempt)", n)
	}
}
