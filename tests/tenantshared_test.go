package tests

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/homingdev/homing/internal/ops/handoff"
	"github.com/homingdev/homing/internal/testing/testenv"
	"github.com/homingdev/homing/internal/testing/testreceiver"
)

// A tenant's own admin cannot move its webhook onto a queue the operator
// did not give the tenant (issue 35, finding 11: it could move it onto any
// queue, one no worker serves included); once the operator lists the
// queue with homing tenant update --queues, it can, and the tenant shows
// its queues.
func TestTenantAdminKeepsToTheQueuesItIsGiven(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test: builds the binaries and runs them against PostgreSQL and Redis")
	}
	rc := testreceiver.Answering(t, http.StatusOK)
	ts := newTenantSystem(t, rc)

	r := ts.acme.expect(t, http.StatusUnprocessableEntity, "PATCH", "/v1/webhooks/orders", `{"queue": "nobody-serves-this"}`)
	if !strings.Contains(r.raw, "homing tenant update acme --queues") {
		t.Fatalf("the refusal does not say how a queue is given: %s", r.raw)
	}
	ts.acme.expect(t, http.StatusUnprocessableEntity, "POST", "/v1/webhooks", fmt.Sprintf(
		`{"name": "bulk-orders", "doctype": "Sales Order", "event": "on_submit", "url": %q, "queue": "bulk"}`, rc.URL+"/bulk"))
	if r := ts.run(t, "homing", "tenant", "update", "acme", "--queues", "bulk"); r.code != 0 {
		t.Fatalf("homing tenant update acme --queues bulk: %s", r)
	}
	if r := ts.run(t, "homing", "tenant", "show", "acme"); !strings.Contains(r.stdout, "queues:         default, bulk") {
		t.Fatalf("homing tenant show acme does not show its queues: %s", r)
	}
	got := ts.acme.expect(t, http.StatusOK, "PATCH", "/v1/webhooks/orders", `{"queue": "bulk"}`)
	if got.body["queue"] != "bulk" {
		t.Fatalf("the webhook's queue after the move: %s", got.raw)
	}
	// Operator-only: a tenant's token cannot give itself queues.
	ts.acme.expect(t, http.StatusForbidden, "PATCH", "/v1/tenants/acme", `{"queues": ["anything"]}`)
	ts.stop()
}

// A tenant renaming its webhook over and over keeps to its share of the
// webhook labels, in the fields homing serve hands off through Redis and
// in the worker's series, and another tenant's webhook keeps a label of
// its own (issue 35, finding 10: the slots went first come, first served,
// and the handoff hashes grew with every name).
func TestOneTenantsRenamesLeaveOthersTheirLabels(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test: builds the binaries and runs them against PostgreSQL and Redis")
	}
	rc := testreceiver.Answering(t, http.StatusOK)
	s := newSystem(t)
	s.env = withEnv(s.env, "HOMING_API_ADDR", "127.0.0.1:0")
	s.env = withEnv(s.env, "HOMING_METRICS_MAX_WEBHOOK_LABELS_PER_TENANT", "2")
	op := s.startAPI(t)
	client := func(tenant string) apiClient {
		op.expect(t, http.StatusCreated, "POST", "/v1/tenants", fmt.Sprintf(`{"name": %q}`, tenant))
		var tok map[string]any
		s.ok(t, &tok, "homing", "token", "create", "--name", tenant+"-admin", "--scope", "admin", "--tenant", tenant, "--json")
		c := op.withToken(tok["token"].(string))
		// workflow_transition: homing serve delivers it in the request and
		// hands its outcome and attempt off to the workers' metrics.
		c.expect(t, http.StatusCreated, "POST", "/v1/webhooks", fmt.Sprintf(
			`{"name": "hook-0", "doctype": "Leave Application", "event": "workflow_transition", "url": %q}`, rc.URL+"/"+tenant))
		return c
	}
	publish := func(c apiClient, id string) {
		c.expect(t, http.StatusOK, "POST", "/v1/events", fmt.Sprintf(
			`{"id": %q, "doc_type": "Leave Application", "doc_name": %q, "event": "workflow_transition", "doc": {"name": %q}}`, id, id, id))
	}
	noisy, quiet := client("noisy"), client("quiet")
	const renames = 8
	for i := range renames {
		if i > 0 {
			noisy.expect(t, http.StatusOK, "PATCH", fmt.Sprintf("/v1/webhooks/hook-%d", i-1), fmt.Sprintf(`{"name": "hook-%d"}`, i))
		}
		publish(noisy, fmt.Sprintf("noisy-%d", i))
	}
	publish(quiet, "quiet-0")
	if n := rc.Count(); n != renames+1 {
		t.Fatalf("the receiver got %d requests, want %d", n, renames+1)
	}

	// No worker has drained them yet: the fields serve added are bounded.
	rdb := redis.NewClient(mustRedisOptions(t, envValue(s.env, "HOMING_REDIS_URL")))
	t.Cleanup(func() { _ = rdb.Close() })
	fields, err := rdb.HKeys(context.Background(), handoff.AttemptsKey).Result()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, f := range fields {
		if strings.Contains(f, "noisy") {
			names[f] = true
		}
	}
	// Two names of its own and other, each of class 2xx.
	if len(names) != 3 {
		t.Fatalf("serve handed off %d attempt fields of the renaming tenant, want 3 (2 names and other): %v", len(names), fields)
	}

	s.env = withEnv(s.env, "HOMING_METRICS_ADDR", "127.0.0.1:0")
	w := s.start("worker", "worker started")
	m := metricsAddr.FindStringSubmatch(w.output.String())
	if m == nil {
		t.Fatalf("the worker did not log its metrics address:\n%s", w.output.String())
	}
	attempts := map[string]float64{}
	for _, series := range scrapeWorker(t, m[1])["homing_attempts_total"].GetMetric() {
		l := map[string]string{}
		for _, p := range series.GetLabel() {
			l[p.GetName()] = p.GetValue()
		}
		if v := series.GetCounter().GetValue(); v != 0 {
			attempts[l["tenant"]+"/"+l["webhook"]] = v
		}
	}
	want := map[string]float64{"noisy/hook-0": 1, "noisy/hook-1": 1, "noisy/other": renames - 2, "quiet/hook-0": 1}
	if fmt.Sprint(attempts) != fmt.Sprint(want) {
		t.Errorf("the worker's homing_attempts_total by tenant/webhook:\n got %v\nwant %v", attempts, want)
	}
	s.stop()
}

// mustRedisOptions parses a redis:// URL.
func mustRedisOptions(t *testing.T, url string) *redis.Options {
	t.Helper()
	opt, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	return opt
}

// A tenant whose receiver never answers cannot hold the last share of a
// worker (worker.tenant_share of worker.concurrency: here one request of
// four), so another tenant's event on the same queue is delivered at once,
// while the first tenant's requests (at most three) still hang; the first tenant's other events
// wait, and each is delivered once after its receiver answers. (Red team
// of issue 35: one tenant's never-answering receivers, with a timeout of
// up to 5 minutes, held every slot of the shared default queue, and another
// tenant's first attempt waited 164 s.)
func TestOneTenantsSilentReceiverLeavesOthersTheWorker(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test: builds the binaries and runs them against PostgreSQL and Redis")
	}
	silent := testreceiver.New(t)
	release := silent.Hold()
	t.Cleanup(release)
	ts := newTenantSystem(t, silent)
	ts.acme.expect(t, http.StatusOK, "PATCH", "/v1/webhooks/orders", `{"timeout": "5m"}`)
	ts.env = withEnv(ts.env, "HOMING_WORKER_CONCURRENCY", "4")
	ts.env = withEnv(ts.env, "HOMING_WORKER_TENANT_SHARE", "0.25")

	answering := testreceiver.Answering(t, http.StatusOK)
	ts.op.expect(t, http.StatusCreated, "POST", "/v1/tenants", `{"name": "initech"}`)
	var tok map[string]any
	ts.ok(t, &tok, "homing", "token", "create", "--name", "initech-admin", "--scope", "admin", "--tenant", "initech", "--json")
	initech := ts.op.withToken(tok["token"].(string))
	initech.expect(t, http.StatusCreated, "POST", "/v1/webhooks", fmt.Sprintf(
		`{"name": "orders", "doctype": "Sales Order", "event": "on_submit", "url": %q}`, answering.URL))

	const held = 12
	for i := range held {
		ts.publish(t, http.StatusAccepted, fmt.Sprintf("acme-%02d", i))
	}
	ts.start("worker", "worker started")
	ts.start("scheduler", "scheduler started")
	testenv.Eventually(t, "acme's first request to hang at its receiver", func() bool { return silent.Count() >= 1 })

	initech.expect(t, http.StatusAccepted, "POST", "/v1/events",
		`{"id": "initech-1", "doc_type": "Sales Order", "doc_name": "SO-1", "event": "on_submit", "doc": {"name": "SO-1"}}`)
	testenv.Eventually(t, "initech's event to be delivered while acme's receiver hangs", func() bool { return answering.Count() == 1 })
	if n := silent.Count(); n > 3 {
		t.Fatalf("acme's receiver got %d requests while they hung, want at most 3: a worker of 4 keeps a share of 1 free", n)
	}

	release()
	testenv.Eventually(t, "every acme event to be delivered once its receiver answers", func() bool {
		return len(silent.CountBy("webhook-id")) == held
	})
	ts.stop()
	for id, n := range silent.CountBy("webhook-id") {
		if n != 1 {
			t.Errorf("acme's delivery %s reached its receiver %d times, want once", id, n)
		}
	}
	if n := answering.Count(); n != 1 {
		t.Errorf("initech's receiver got %d requests, want 1", n)
	}
}
