package tests

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/homingdev/homing/internal/testing/testenv"
	"github.com/homingdev/homing/internal/testing/testreceiver"
	"github.com/homingdev/homing/models"
)

var metricsAddr = regexp.MustCompile(`msg="worker started".* metrics_addr=(\S+)`)

// TestOutcomesOfServeAndTheCommandLineReachAWorkersMetrics: homing serve
// and the command line serve no metrics, yet what they make final is in the
// worker's homing_deliveries_total at its next scrape (issue 25): a webhook
// deleted through the API, one disabled with homing webhook disable, and a
// workflow_transition serve delivered in its request, whose attempt is in
// the worker's homing_attempts_total and its duration in
// homing_attempt_duration_seconds.
func TestOutcomesOfServeAndTheCommandLineReachAWorkersMetrics(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test: builds the binaries and runs them against PostgreSQL and Redis")
	}
	s := newSystem(t)
	s.env = withEnv(s.env, "HOMING_API_ADDR", "127.0.0.1:0")
	s.env = withEnv(s.env, "HOMING_METRICS_ADDR", "127.0.0.1:0")
	w := s.start("worker", "worker started")
	m := metricsAddr.FindStringSubmatch(w.output.String())
	if m == nil {
		t.Fatalf("the worker did not log its metrics address:\n%s", w.output.String())
	}
	c := s.startAPI(t)
	db := s.openDB(t)
	rc := testreceiver.Answering(t, http.StatusOK)

	for _, name := range []string{"doomed", "paused"} {
		c.expect(t, http.StatusCreated, "POST", "/v1/webhooks", fmt.Sprintf(
			`{"name": %q, "doctype": "Sales Order", "event": "on_submit", "url": %q}`, name, rc.URL+"/"+name))
	}
	c.expect(t, http.StatusCreated, "POST", "/v1/webhooks", fmt.Sprintf(
		`{"name": "approvals", "doctype": "Leave Application", "event": "workflow_transition", "url": %q}`, rc.URL+"/approvals"))
	// Pending retries, due in a minute; no scheduler runs, so no sweep
	// sends them before they are made final.
	pending := map[string]int{"doomed": 4, "paused": 3}
	now := time.Now().UTC().Truncate(time.Microsecond)
	for name, n := range pending {
		var hook models.Webhook
		if err := db.Where("name = ?", name).Take(&hook).Error; err != nil {
			t.Fatal(err)
		}
		for i := range n {
			row := testenv.PlannedDelivery(fmt.Sprintf("%s-%d", name, i), fmt.Sprintf("ev-%s-%d", name, i), hook.ID, now)
			row.Tenant, row.WebhookName = models.DefaultTenant, name
			if err := db.Create(&row).Error; err != nil {
				t.Fatal(err)
			}
		}
	}

	c.expect(t, http.StatusNoContent, "DELETE", "/v1/webhooks/doomed", "")
	if r := s.run(t, "homing", "webhook", "disable", "paused"); r.code != 0 || r.stderr != "" {
		t.Fatalf("homing webhook disable paused: %s", r)
	}
	c.expect(t, http.StatusOK, "POST", "/v1/events",
		`{"id": "wf-handoff", "doc_type": "Leave Application", "doc_name": "LA-1", "event": "workflow_transition", "doc": {"name": "LA-1"}}`)
	if n := rc.Count(); n != 1 {
		t.Fatalf("the receiver got %d requests, want the transition's 1", n)
	}

	fam := scrapeWorker(t, m[1])
	want := map[string]float64{
		"doomed/Exhausted/webhook_deleted":  4,
		"paused/Exhausted/webhook_disabled": 3,
		"approvals/Delivered/accepted":      1,
	}
	got := map[string]float64{}
	for _, s := range fam["homing_deliveries_total"].GetMetric() {
		l := map[string]string{}
		for _, p := range s.GetLabel() {
			l[p.GetName()] = p.GetValue()
		}
		if v := s.GetCounter().GetValue(); v != 0 {
			got[l["webhook"]+"/"+l["status"]+"/"+l["reason"]] = v
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("the worker's homing_deliveries_total:\n got %v\nwant %v", got, want)
	}
	// The transition's attempt, made by serve, is the worker's
	// homing_attempts_total too: the worker made none.
	attempts := map[string]float64{}
	for _, s := range fam["homing_attempts_total"].GetMetric() {
		l := map[string]string{}
		for _, p := range s.GetLabel() {
			l[p.GetName()] = p.GetValue()
		}
		if v := s.GetCounter().GetValue(); v != 0 {
			attempts[l["webhook"]+"/"+l["class"]] = v
		}
	}
	if want := map[string]float64{"approvals/2xx": 1}; fmt.Sprint(attempts) != fmt.Sprint(want) {
		t.Errorf("the worker's homing_attempts_total:\n got %v\nwant %v", attempts, want)
	}
	// And its duration is in the worker's histogram.
	if h := fam["homing_attempt_duration_seconds"].GetMetric(); len(h) != 1 || h[0].GetHistogram().GetSampleCount() != 1 {
		t.Errorf("the worker's homing_attempt_duration_seconds: %v, want serve's one duration", h)
	}
	s.stop()
}

// scrapeWorker reads a worker's /metrics over HTTP, as Prometheus would.
func scrapeWorker(t *testing.T, addr string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + strings.TrimPrefix(addr, "http://") + "/metrics")
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: %s", resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fam, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse scrape: %v", err)
	}
	return fam
}
