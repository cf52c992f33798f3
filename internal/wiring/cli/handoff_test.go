package cli_test

import (
	"fmt"
	"net"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/redis/go-redis/v9"

	"github.com/homingdev/homing/internal/intake/store"
	"github.com/homingdev/homing/internal/ops/handoff"
	"github.com/homingdev/homing/internal/ops/metrics"
	"github.com/homingdev/homing/internal/testing/testenv"
	"github.com/homingdev/homing/models"
)

// seedPending writes n Failed deliveries of tenant's webhook name, as
// fan-out plans them.
func (s *site) seedPending(tenant, name string, n int) {
	s.t.Helper()
	db, err := store.Open(s.dsn)
	if err != nil {
		s.t.Fatal(err)
	}
	defer func() { _ = store.Close(db) }()
	var hook models.Webhook
	if err := db.Where("tenant = ? AND name = ?", tenant, name).Take(&hook).Error; err != nil {
		s.t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	for i := range n {
		row := testenv.PlannedDelivery(fmt.Sprintf("%s-%s-%d", tenant, name, i), fmt.Sprintf("ev-%d", i), hook.ID, now)
		row.Tenant, row.WebhookName = tenant, name
		if err := db.Create(&row).Error; err != nil {
			s.t.Fatal(err)
		}
	}
}

// exhaustedCount is how many of tenant's deliveries are Exhausted.
func (s *site) exhaustedCount(tenant string) int64 {
	s.t.Helper()
	db, err := store.Open(s.dsn)
	if err != nil {
		s.t.Fatal(err)
	}
	defer func() { _ = store.Close(db) }()
	var n int64
	if err := db.Model(&models.Delivery{}).Where("tenant = ? AND status = ?", tenant, models.StatusExhausted).Count(&n).Error; err != nil {
		s.t.Fatal(err)
	}
	return n
}

// workerDeliveries scrapes a worker's metrics registry, draining what was
// handed off on rdb as a worker does, and reads
// homing_deliveries_total{status=Exhausted} of each tenant/webhook/reason
// ("tenant/webhook/reason" keys; the other series at 0 are left out).
func workerDeliveries(t *testing.T, m *metrics.Metrics) map[string]float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatalf("parse scrape: %v", err)
	}
	out := map[string]float64{}
	for _, s := range families["homing_deliveries_total"].GetMetric() {
		l := map[string]string{}
		for _, p := range s.GetLabel() {
			l[p.GetName()] = p.GetValue()
		}
		if v := s.GetCounter().GetValue(); v != 0 {
			out[l["tenant"]+"/"+l["webhook"]+"/"+l["status"]+"/"+l["reason"]] = v
		}
	}
	return out
}

func workerMetrics(rdb *redis.Client) *metrics.Metrics {
	return metrics.New(metrics.Options{Handoff: handoff.New(rdb, nil).Drain, MaxWebhookLabels: 10, MaxTenantLabels: 10})
}

// What the command line makes final is counted in homing_deliveries_total
// at the next scrape of a worker's metrics, though the command serves none
// (issue 25): webhook disable, webhook delete. A tenant disable makes
// nothing final (its deliveries are held, issue 35), so it counts nothing.
func TestCommandLineOutcomesAreCountedByAWorker(t *testing.T) {
	t.Parallel()
	opt, rdb := testenv.Redis(t)
	s := newSite(t, fmt.Sprintf("redis:\n  url: %q\n", testenv.RedisURL(opt)))
	s.ok("migrate")
	s.ok("tenant", "create", "globex")
	s.ok(create("orders")...)
	s.ok(create("invoices")...)
	s.ok(append(create("orders"), "--tenant", "globex")...)
	s.ok(append(create("quotes"), "--tenant", "globex")...)
	s.seedPending("default", "orders", 7)
	s.seedPending("default", "invoices", 2)
	s.seedPending("globex", "orders", 3)
	s.seedPending("globex", "quotes", 4)

	s.ok("webhook", "disable", "orders")
	s.ok("webhook", "delete", "invoices")
	s.ok("tenant", "disable", "globex")
	if n, held := s.exhaustedCount("default"), s.exhaustedCount("globex"); n != 9 || held != 0 {
		t.Fatalf("%d deliveries Exhausted in default, %d in globex; want 9 and none (globex's are held)", n, held)
	}

	want := map[string]float64{
		"default/orders/Exhausted/webhook_disabled":  7,
		"default/invoices/Exhausted/webhook_deleted": 2,
	}
	got := workerDeliveries(t, workerMetrics(rdb))
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("worker's homing_deliveries_total after the commands:\n got %v\nwant %v", got, want)
	}
	// Drained: another worker's scrape finds nothing more to count.
	if again := workerDeliveries(t, workerMetrics(rdb)); len(again) != 0 {
		t.Errorf("a second worker counted them again: %v", again)
	}
}

// A Redis that cannot take the counts does not undo the disable, and the
// command says how many outcomes went uncounted and why.
func TestCommandLineSaysWhatItCouldNotHandOff(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	_ = l.Close() // nothing listens there now
	s := newSite(t, fmt.Sprintf("redis:\n  url: %q\n", "redis://"+closed+"/0"))
	s.ok("migrate")
	s.ok(create("orders")...)
	s.seedPending("default", "orders", 5)

	r := s.homing("webhook", "disable", "orders")
	if r.code != 0 || r.stdout != "webhook \"orders\" disabled\n" {
		t.Fatalf("webhook disable with Redis away: want exit 0, got %s", r)
	}
	if n := s.exhaustedCount("default"); n != 5 {
		t.Errorf("%d deliveries Exhausted, want 5: the disable must stand without Redis", n)
	}
	for _, want := range []string{`"level":"ERROR"`, "not counted in homing_deliveries_total", `"not_counted":5`, "tenant=default webhook=orders status=Exhausted reason=webhook_disabled n=5", closed} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr does not mention %q:\n%s", want, r.stderr)
		}
	}
}
