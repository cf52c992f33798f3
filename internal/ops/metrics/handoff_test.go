package metrics_test

import (
	"fmt"
	"math"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/homingdev/homing/internal/ops/handoff"
	"github.com/homingdev/homing/internal/ops/metrics"
	"github.com/homingdev/homing/internal/testing/testenv"
	"github.com/homingdev/homing/models"
)

// gather scrapes m through its handler, as Prometheus would, and sums
// homing_deliveries_total by "tenant/webhook/status/reason" (zero series
// left out).
func gather(t *testing.T, m *metrics.Metrics) map[string]float64 {
	t.Helper()
	return gatherFamily(t, m, "homing_deliveries_total", "tenant", "webhook", "status", "reason")
}

// gatherFamily scrapes m and sums family's series by their label values
// joined with "/" (zero series left out).
func gatherFamily(t *testing.T, m *metrics.Metrics, family string, names ...string) map[string]float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fam, err := parser.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Errorf("parse scrape: %v", err)
		return nil
	}
	out := map[string]float64{}
	for _, s := range fam[family].GetMetric() {
		l := map[string]string{}
		for _, p := range s.GetLabel() {
			l[p.GetName()] = p.GetValue()
		}
		if v := s.GetCounter().GetValue(); v != 0 {
			key := make([]string, len(names))
			for i, n := range names {
				key[i] = l[n]
			}
			out[strings.Join(key, "/")] += v
		}
	}
	return out
}

// Two workers scraped while outcomes are being handed off count each
// outcome once between them: a drain takes the counts it reads out of
// Redis in the same step (issue 25).
func TestTwoWorkersCountHandedOffOutcomesOnce(t *testing.T) {
	t.Parallel()
	_, rdb := testenv.Redis(t)
	hand := handoff.New(rdb, nil)
	workers := []*metrics.Metrics{
		metrics.New(metrics.Options{Handoff: hand.Drain, MaxWebhookLabels: 10, MaxTenantLabels: 10}),
		metrics.New(metrics.Options{Handoff: handoff.New(rdb, nil).Drain, MaxWebhookLabels: 10, MaxTenantLabels: 10}),
	}
	const writers, each = 4, 150
	done := make(chan struct{})
	var wg, scrapes sync.WaitGroup
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A name with the characters a separator would use.
			hook := fmt.Sprintf(`orders/"%d"|`, i%2)
			for range each {
				hand.Deliveries("", hook, models.StatusExhausted, models.ReasonWebhookDisabled, 1)
			}
		}()
	}
	for _, m := range workers {
		scrapes.Add(1)
		go func() {
			defer scrapes.Done()
			for {
				select {
				case <-done:
					return
				default:
					gather(t, m)
				}
			}
		}()
	}
	wg.Wait()
	hand.Flush() // a batch may still be on its way from a goroutine
	close(done)
	scrapes.Wait()

	total := map[string]float64{}
	for _, m := range workers {
		for k, v := range gather(t, m) { // the last scrape drains what is left
			total[k] += v
		}
	}
	want := map[string]float64{
		`default/orders/"0"|/Exhausted/webhook_disabled`: writers / 2 * each,
		`default/orders/"1"|/Exhausted/webhook_disabled`: writers / 2 * each,
	}
	if fmt.Sprint(total) != fmt.Sprint(want) {
		t.Errorf("homing_deliveries_total summed over both workers:\n got %v\nwant %v", total, want)
	}
	if n, err := rdb.Exists(t.Context(), handoff.Key).Result(); err != nil || n != 0 {
		t.Errorf("%s still exists after the last scrapes (%v)", handoff.Key, err)
	}
}

// Attempts handed off are in homing_attempts_total at the scrape that
// drains them, under the webhook's bounded labels, beside the outcomes
// drained with them.
func TestHandedOffAttemptsAreCountedAtTheScrape(t *testing.T) {
	t.Parallel()
	_, rdb := testenv.Redis(t)
	hand := handoff.New(rdb, nil)
	hand.Attempt("acme", "orders", "2xx", 0, models.StatusDelivered, models.ReasonAccepted)
	hand.Attempt("acme", "orders", "5xx", 0, "", "")
	hand.Attempt("acme", "orders", "5xx", 0, models.StatusExhausted, models.ReasonRetriesSpent)
	hand.Attempt("", "invoices", "timeout", 0, "", "")
	hand.Flush()
	m := metrics.New(metrics.Options{Handoff: handoff.New(rdb, nil).Drain, MaxWebhookLabels: 1, MaxTenantLabels: 10})
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("scrape: %d %s", rec.Code, rec.Body)
	}
	got := gatherFamily(t, m, "homing_attempts_total", "tenant", "webhook", "class")
	// One webhook label: invoices, seen second, is "other".
	want := map[string]float64{"acme/orders/2xx": 1, "acme/orders/5xx": 2, "default/other/timeout": 1}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("homing_attempts_total after one scrape:\n got %v\nwant %v", got, want)
	}
	if d := gather(t, m); d["acme/orders/Delivered/accepted"] != 1 || d["acme/orders/Exhausted/retries_spent"] != 1 {
		t.Errorf("homing_deliveries_total: %v", d)
	}
	if n, err := rdb.Exists(t.Context(), handoff.Key, handoff.AttemptsKey).Result(); err != nil || n != 0 {
		t.Errorf("%d of the hashes left after the scrape (%v)", n, err)
	}
}

// Durations handed off are in homing_attempt_duration_seconds at the scrape
// that drains them, in their buckets and sum, beside this process's own
// observations; an attempt that made no request (invalid) has no duration,
// as in the process that makes it. The scrape's attempts and durations
// agree in number.
func TestHandedOffDurationsAreInTheHistogram(t *testing.T) {
	t.Parallel()
	_, rdb := testenv.Redis(t)
	hand := handoff.New(rdb, nil)
	hand.Attempt("acme", "orders", "2xx", 20*time.Millisecond, models.StatusDelivered, models.ReasonAccepted) // le 0.025
	hand.Attempt("acme", "orders", "5xx", 700*time.Millisecond, "", "")                                       // le 1
	hand.Attempt("acme", "orders", "timeout", 400*time.Second, "", "")                                        // +Inf
	hand.Attempt("acme", "orders", "invalid", time.Second, models.StatusExhausted, models.ReasonUnbuildable)  // none
	hand.Flush()
	m := metrics.New(metrics.Options{Handoff: handoff.New(rdb, nil).Drain})
	m.Attempt("acme", "orders", "2xx", 30*time.Millisecond, models.StatusDelivered, models.ReasonAccepted) // le 0.05, this process's

	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fam, err := parser.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatal(err)
	}
	h := fam["homing_attempt_duration_seconds"].GetMetric()[0].GetHistogram()
	cumulative := map[float64]uint64{}
	for _, b := range h.GetBucket() {
		cumulative[b.GetUpperBound()] = b.GetCumulativeCount()
	}
	want := map[float64]uint64{0.01: 0, 0.025: 1, 0.05: 2, 0.5: 2, 1: 3, 300: 3}
	for le, n := range want {
		if cumulative[le] != n {
			t.Errorf("bucket le=%g holds %d, want %d (all: %v)", le, cumulative[le], n, cumulative)
		}
	}
	if h.GetSampleCount() != 4 || math.Abs(h.GetSampleSum()-400.75) > 1e-6 {
		t.Errorf("count %d, sum %g; want 4 and 400.75", h.GetSampleCount(), h.GetSampleSum())
	}
	attempts := 0.0
	for _, n := range gatherFamily(t, m, "homing_attempts_total", "class") {
		attempts += n
	}
	if attempts != 5 { // the four handed off and this process's one; the invalid one has no duration
		t.Errorf("%g attempts counted, want 5", attempts)
	}
	if n, err := rdb.Exists(t.Context(), handoff.DurationsKey).Result(); err != nil || n != 0 {
		t.Errorf("the durations' hash is left after the scrape (%v)", err)
	}
	// A second scrape counts them once: nothing more was handed off.
	rec = httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if !strings.Contains(rec.Body.String(), "homing_attempt_duration_seconds_count 4\n") {
		t.Errorf("second scrape:\n%s", grepLines(rec.Body.String(), "homing_attempt_duration_seconds_count"))
	}
}

// grepLines is the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
