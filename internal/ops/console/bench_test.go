package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/homingdev/homing/internal/engine/webhook"
)

// BenchmarkPages times every console page on PostgreSQL holding
// HOMING_BENCH_CONSOLE_ROWS deliveries (make bench sets 1,000,000), each
// with one attempt, spread over 30 days across 10 webhooks: 90 % Delivered,
// 5 % Failed, 5 % Exhausted. Without the variable it is skipped, so that a
// plain go test -bench . does not fill a million rows.
//
//	HOMING_BENCH_CONSOLE_ROWS=1000000 go test -run '^$' -bench Pages -benchtime 20x ./internal/ops/console/
func BenchmarkPages(b *testing.B) {
	n, _ := strconv.Atoi(os.Getenv("HOMING_BENCH_CONSOLE_ROWS"))
	if n <= 0 {
		b.Skip("set HOMING_BENCH_CONSOLE_ROWS (make bench sets 1000000) to time the console's pages on that many deliveries")
	}
	s := newSite(b)
	fill(b, s, n)
	c := s.login(s.admin)
	mid := fmt.Sprintf("b-%07d", n/2)
	tenDaysAgo := time.Now().UTC().Add(-10 * 24 * time.Hour)
	_, first := s.do("GET", "/console/deliveries", nil, c, nil)
	next := ""
	if i := strings.Index(first, `href="/console/deliveries?cursor=`); i >= 0 {
		next = strings.ReplaceAll(first[i+len(`href="`):i+strings.Index(first[i:], `" id=`)], "&amp;", "&")
	}
	pages := []struct{ name, path string }{
		{"overview", "/console/"},
		{"deliveries", "/console/deliveries"},
		{"deliveries_page2", next},
		{"deliveries_status", "/console/deliveries?status=Exhausted"},
		{"deliveries_webhook", "/console/deliveries?webhook=w3"},
		{"deliveries_webhook_status", "/console/deliveries?webhook=w3&status=Failed"},
		{"deliveries_doc", "/console/deliveries?doc_type=Sales+Order&doc_name=SO-123"},
		{"deliveries_event", "/console/deliveries?event_id=ev-" + strconv.Itoa(n/3)},
		{"deliveries_since_until", "/console/deliveries?since=" + url.QueryEscape(tenDaysAgo.Format(time.RFC3339)) +
			"&until=" + url.QueryEscape(tenDaysAgo.Add(time.Hour).Format(time.RFC3339))},
		{"delivery", "/console/deliveries/" + mid},
		{"webhooks", "/console/webhooks"},
		{"webhook", "/console/webhooks/w3"},
	}
	for _, p := range pages {
		b.Run(p.name, func(b *testing.B) {
			if p.path == "" {
				b.Skip("no second page")
			}
			for b.Loop() {
				if res, body := s.do("GET", p.path, nil, c, nil); res.StatusCode != http.StatusOK {
					b.Fatalf("GET %s: %d\n%s", p.path, res.StatusCode, body)
				}
			}
		})
	}
}

// fill writes n deliveries and their attempts with INSERT … SELECT
// generate_series, then VACUUM ANALYZE, so the planner sees the table as a
// running system's would be.
func fill(b *testing.B, s *site, n int) {
	b.Helper()
	ctx := context.Background()
	start := time.Now()
	for i := range 10 {
		if _, err := s.hooks.Create(ctx, "", webhook.Input{Name: ptr(fmt.Sprintf("w%d", i)), DocType: ptr("Sales Order"),
			Event: ptr("on_submit"), URL: ptr("https://example.com/hook")}); err != nil {
			b.Fatal(err)
		}
	}
	for _, q := range []string{
		`INSERT INTO deliveries (id, webhook_id, webhook_name, event_id, doc_type, doc_name, doc_event, method, url, payload,
			status, attempts, max_retries, next_retry, last_status_code, last_error, created_at, updated_at)
		SELECT 'b-' || lpad(g::text, 7, '0'), w.id, w.name, 'ev-' || g, 'Sales Order', 'SO-' || (g % 100000), 'on_submit', 'POST',
			'https://example.com/hook', convert_to('{"name": "SO-' || g || '", "grand_total": 1500}', 'UTF8'),
			CASE (g / 10) % 20 WHEN 0 THEN 'Failed' WHEN 1 THEN 'Exhausted' ELSE 'Delivered' END, 1, 3,
			CASE (g / 10) % 20 WHEN 0 THEN now() + ((g % 600) - 120) * interval '1 minute' END,
			CASE WHEN (g / 10) % 20 IN (0, 1) THEN 503 ELSE 200 END,
			CASE WHEN (g / 10) % 20 IN (0, 1) THEN 'HTTP 503' ELSE '' END,
			now() - g * interval '2592 milliseconds', now()
		FROM generate_series(1, ?) g
		JOIN (SELECT id, name, row_number() OVER (ORDER BY name) - 1 AS k FROM webhooks) w ON w.k = g % 10`,
		`INSERT INTO delivery_attempts (delivery_id, attempt, at, method, url, status_code, duration_ms, class, error, response)
		SELECT id, 1, created_at, method, url, last_status_code, 42, CASE WHEN status = 'Delivered' THEN '2xx' ELSE '5xx' END,
			last_error, 'ok' FROM deliveries WHERE id LIKE 'b-%'`,
		`VACUUM ANALYZE`,
	} {
		args := []any{}
		if strings.Contains(q, "?") {
			args = append(args, n)
		}
		if err := s.db.Exec(q, args...).Error; err != nil {
			b.Fatalf("fill: %v", err)
		}
	}
	b.Logf("filled %d deliveries and attempts in %s", n, time.Since(start).Round(time.Second))
	// The plans of the reads the new indexes (migration 0013) serve, for
	// docs/performance.md.
	for _, q := range []string{
		`SELECT id FROM deliveries WHERE webhook_name = 'w3' AND status = 'Failed' ORDER BY created_at DESC, id DESC LIMIT 51`,
		`SELECT last_error FROM deliveries WHERE webhook_name = 'w3' AND last_error <> '' ORDER BY created_at DESC LIMIT 1`,
		`SELECT COUNT(*) FROM delivery_attempts a JOIN deliveries d ON d.id = a.delivery_id
			WHERE a.at >= now() - interval '24 hours' AND a.at <= now() AND d.webhook_name = 'w3'`,
		`SELECT COUNT(*) FROM deliveries WHERE status = 'Delivered' AND created_at >= now() - interval '24 hours'`,
	} {
		var plan []string
		if err := s.db.Raw("EXPLAIN (ANALYZE, COSTS OFF) " + q).Scan(&plan).Error; err != nil {
			b.Fatalf("explain: %v", err)
		}
		b.Logf("%s\n  %s", strings.Join(strings.Fields(q), " "), strings.Join(plan, "\n  "))
	}
}
