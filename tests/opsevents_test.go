package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/homingdev/homing/client"
	"github.com/homingdev/homing/internal/testing/testreceiver"
	"github.com/homingdev/homing/models"
)

// TestOperationalEvents runs two workers, two schedulers and homing serve
// over three tenants (issue 37):
//   - acme's webhook "orders" fails six first attempts (failing), has each
//     delivery's one retry fail behind the probe (six exhausted), then
//     succeeds for a new event (recovered, by the sweep: a first attempt's
//     success);
//   - globex's webhook "gone" is answered 410 (disabled, and its delivery
//     exhausted);
//   - tenant ops receives a copy of every other tenant's events
//     (ops_events.copy_to), each naming its source tenant.
//
// Every event reaches each subscribing webhook exactly once, a tenant's
// subscribers see only its own webhooks' events, and acme's "broken"
// subscriber (a receiver that always fails, no retries) has each of its
// deliveries exhausted and its failures pass models.FailingAfter without one
// operational event of its own (no loops).
func TestOperationalEvents(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	s := newSystem(t)
	s.env = append(s.env, "HOMING_RETRY_SCHEDULE=1s", "HOMING_SWEEPER_INTERVAL=1s", "HOMING_OPS_EVENTS_COPY_TO=ops",
		"HOMING_OPS_EVENTS_CONSOLE_URL=https://homing.example.com", "HOMING_API_ADDR=127.0.0.1:0")
	var ordersUp atomic.Bool
	orders := testreceiver.Answers(t, func(int) int {
		if ordersUp.Load() {
			return http.StatusOK
		}
		return http.StatusServiceUnavailable
	})
	gone := testreceiver.Answering(t, http.StatusGone)
	alerts := testreceiver.Answering(t, http.StatusOK)
	broken := testreceiver.Answering(t, http.StatusInternalServerError)

	for _, ten := range []string{"acme", "globex", "ops"} {
		s.ok(t, nil, "homing", "tenant", "create", ten)
	}
	s.ok(t, nil, "homing", "webhook", "create", "--tenant", "acme", "--name", "orders", "--doctype", "Order", "--event", "on_submit",
		"--url", orders.URL, "--max-retries", "1")
	s.ok(t, nil, "homing", "webhook", "create", "--tenant", "globex", "--name", "gone", "--doctype", "Order", "--event", "on_submit",
		"--url", gone.URL)
	fields := []string{"--field", "name=webhook", "--field", "tenant=tenant", "--field", "state=state", "--field", "failures=failures",
		"--field", "delivery_id=delivery_id", "--field", "doc_name=doc_name", "--field", "source_tenant=source_tenant",
		"--field", "reason=reason", "--field", "link=link"}
	for _, ten := range []string{"acme", "globex", "ops"} {
		for _, ev := range []string{"failing", "recovered", "disabled", "exhausted"} {
			s.ok(t, nil, "homing", append([]string{"webhook", "create", "--tenant", ten, "--name", ten + "-" + ev,
				"--doctype", "Homing Webhook", "--event", ev, "--url", alerts.URL + "/" + ten + "/" + ev}, fields...)...)
		}
	}
	// docs/operations.md's Slack recipe, as written there.
	slack := filepath.Join(t.TempDir(), "slack.json.j2")
	if err := os.WriteFile(slack, []byte(slackRecipe(t)), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, ev := range []string{"failing", "recovered"} {
		s.ok(t, nil, "homing", "webhook", "create", "--tenant", "acme", "--name", "slack-"+ev, "--doctype", "Homing Webhook", "--event", ev,
			"--url", alerts.URL+"/slack/"+ev, "--signature", "none", "--max-retries", "5", "--template", "@"+slack)
	}
	s.ok(t, nil, "homing", "webhook", "create", "--tenant", "acme", "--name", "broken", "--doctype", "Homing Webhook", "--event", "exhausted",
		"--url", broken.URL, "--max-retries", "0")

	for range 2 {
		s.start("worker", "worker started")
		s.start("scheduler", "scheduler started")
	}
	s.startAPI(t)
	c := s.publisher(t)
	publish := func(tenant, id string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		if _, err := c.Publish(ctx, client.Event{Tenant: tenant, ID: id, DocType: "Order", DocName: id, Event: "on_submit",
			Doc: map[string]any{"name": id}}); err != nil {
			t.Fatalf("publish %s: %v", id, err)
		}
	}
	for i := range 6 {
		publish("acme", fmt.Sprintf("SO-%d", i))
	}
	publish("globex", "SO-G")

	db := s.openDB(t)
	final := func(webhook string) (bool, string) {
		st, err := statusCounts(db, webhook)
		if err != nil {
			return false, err.Error()
		}
		return st[models.StatusFailed] == 0, countStatus(st)
	}
	eventually(t, "every delivery of orders exhausted", func() (bool, string) {
		st, err := statusCounts(db, "orders")
		if err != nil {
			return false, err.Error()
		}
		return st[models.StatusExhausted] == 6, countStatus(st)
	})
	ordersUp.Store(true)
	publish("acme", "SO-after")
	eventually(t, "the recovered event's delivery", func() (bool, string) {
		n := len(at(alerts, "/acme/recovered"))
		return n > 0, fmt.Sprintf("%d requests to /acme/recovered", n)
	})
	// Everything that follows from the events is final: then no event can
	// still be on its way, and every count below is the whole count.
	for _, w := range [][2]string{{"acme", "orders"}, {"globex", "gone"}, {"acme", "broken"},
		{"acme", "acme-exhausted"}, {"ops", "ops-exhausted"}} {
		eventually(t, w[0]+"'s "+w[1]+" final", func() (bool, string) { return final(w[1]) })
	}
	eventually(t, "the outbox empty", func() (bool, string) {
		var n int64
		db.Model(&models.OutboxEvent{}).Count(&n)
		return n == 0, fmt.Sprintf("%d outbox rows", n)
	})

	type alert struct {
		Webhook, Tenant, State, DeliveryID, DocName, SourceTenant, Reason, Link string
		Failures                                                                int
	}
	read := func(path string) []alert {
		var out []alert
		for _, r := range at(alerts, path) {
			var b struct {
				Webhook      string `json:"webhook"`
				Tenant       string `json:"tenant"`
				State        string `json:"state"`
				Failures     int    `json:"failures"`
				DeliveryID   string `json:"delivery_id"`
				DocName      string `json:"doc_name"`
				SourceTenant string `json:"source_tenant"`
				Reason       string `json:"reason"`
				Link         string `json:"link"`
			}
			if err := json.Unmarshal(r.Body, &b); err != nil {
				t.Fatalf("%s: body is not JSON: %v\n%s", path, err, r.Body)
			}
			out = append(out, alert{b.Webhook, b.Tenant, b.State, b.DeliveryID, b.DocName, b.SourceTenant, b.Reason, b.Link, b.Failures})
		}
		return out
	}
	ids := func(tenant, webhook string) []string {
		var out []string
		if err := db.Model(&models.Delivery{}).Where("tenant = ? AND webhook_name = ?", tenant, webhook).Order("id").Pluck("id", &out).Error; err != nil {
			t.Fatal(err)
		}
		return out
	}
	exhaustedIDs := func(as []alert) []string {
		var out []string
		for _, a := range as {
			out = append(out, a.DeliveryID)
		}
		slices.Sort(out)
		return out
	}

	// acme: one failing, six exhausted (one per delivery), one recovered;
	// nothing of globex's.
	failing := read("/acme/failing")
	if len(failing) != 1 || failing[0].Webhook != "orders" || failing[0].Tenant != "acme" || failing[0].State != "failing" ||
		failing[0].Failures < models.FailingAfter || failing[0].Link != "https://homing.example.com/console/webhooks/orders" {
		t.Errorf("acme's failing events: %+v, want one for orders, failing with at least %d failures, linked to its page", failing, models.FailingAfter)
	}
	if rec := read("/acme/recovered"); len(rec) != 1 || rec[0].Webhook != "orders" || rec[0].State != "healthy" {
		t.Errorf("acme's recovered events: %+v, want one for orders, healthy", rec)
	}
	if got, want := exhaustedIDs(read("/acme/exhausted")), ids("acme", "orders")[:0]; true {
		for _, id := range ids("acme", "orders") {
			var st string
			db.Model(&models.Delivery{}).Where("id = ?", id).Pluck("status", &st)
			if st == models.StatusExhausted {
				want = append(want, id)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("acme's exhausted events name deliveries %v, want each exhausted delivery of orders once: %v", got, want)
		}
	}
	if d := read("/acme/disabled"); len(d) != 0 {
		t.Errorf("acme's disabled events: %+v, want none (only globex's webhook was disabled)", d)
	}

	// globex: its webhook disabled, and its one delivery exhausted.
	disabled := read("/globex/disabled")
	if len(disabled) != 1 || disabled[0].Webhook != "gone" || disabled[0].State != "disabled" || !strings.Contains(disabled[0].Reason, "410") {
		t.Errorf("globex's disabled events: %+v, want one for gone naming the 410", disabled)
	}
	if got, want := exhaustedIDs(read("/globex/exhausted")), ids("globex", "gone"); !slices.Equal(got, want) {
		t.Errorf("globex's exhausted events name %v, want %v", got, want)
	}
	for _, p := range []string{"/globex/failing", "/globex/recovered"} {
		if n := len(at(alerts, p)); n != 0 {
			t.Errorf("%s: %d requests, want none", p, n)
		}
	}

	// ops: a copy of each, naming its source tenant.
	for _, ev := range []struct {
		path string
		want map[string]int
	}{
		{"/ops/failing", map[string]int{"acme": 1}},
		{"/ops/recovered", map[string]int{"acme": 1}},
		{"/ops/disabled", map[string]int{"globex": 1}},
		{"/ops/exhausted", map[string]int{"acme": 6, "globex": 1}},
	} {
		got := map[string]int{}
		for _, a := range read(ev.path) {
			got[a.SourceTenant]++
			if a.Tenant != a.SourceTenant {
				t.Errorf("%s: a copy says tenant %q and source_tenant %q; the tenant is the source's", ev.path, a.Tenant, a.SourceTenant)
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(ev.want) {
			t.Errorf("%s: copies by source tenant %v, want %v", ev.path, got, ev.want)
		}
	}

	// The Slack recipe's bodies.
	for _, c := range []struct{ path, want string }{
		{"/slack/failing", ":red_circle: orders is failing since "},
		{"/slack/recovered", ":large_green_circle: orders recovered <https://homing.example.com/console/webhooks/orders|open in the console>"},
	} {
		reqs := at(alerts, c.path)
		var b struct{ Text string }
		if len(reqs) != 1 || json.Unmarshal(reqs[0].Body, &b) != nil || !strings.Contains(b.Text, c.want) {
			var bodies []string
			for _, r := range reqs {
				bodies = append(bodies, string(r.Body))
			}
			t.Errorf("%s: %v, want one JSON body whose text holds %q", c.path, bodies, c.want)
		}
	}

	// No loops: broken's deliveries were each tried once and exhausted, its
	// failures passed FailingAfter, and none of it became an event.
	if n := broken.Count(); n != 6 {
		t.Errorf("broken got %d requests, want one per orders delivery exhausted (6)", n)
	}
	var brokenHook string
	if err := db.Model(&models.Webhook{}).Where("name = ?", "broken").Pluck("id", &brokenHook).Error; err != nil {
		t.Fatal(err)
	}
	var events []string
	if err := db.Model(&models.PublishedEvent{}).Where("event_id LIKE ?", "%homing:%").Pluck("event_id", &events).Error; err != nil {
		t.Fatal(err)
	}
	for _, id := range append(ids("acme", "broken"), brokenHook) {
		for _, ev := range events {
			if strings.Contains(ev, id) {
				t.Errorf("operational event %s is about broken (%s), a subscriber of operational events", ev, id)
			}
		}
	}
	var published []string
	if err := db.Model(&models.PublishedEvent{}).Where("tenant = ? AND event_id LIKE ?", "acme", "homing:%").Pluck("event_id", &published).Error; err != nil {
		t.Fatal(err)
	}
	if len(published) != 8 {
		t.Errorf("acme holds %d operational events, want 8 (failing, six exhausted, recovered): %v", len(published), published)
	}
	s.stop()
}

// at is the requests rc received on path.
func at(rc *testreceiver.Receiver, path string) []testreceiver.Request {
	var out []testreceiver.Request
	for _, r := range rc.Requests() {
		if r.Path == path {
			out = append(out, r)
		}
	}
	return out
}

// slackRecipe is the body template of docs/operations.md's "Alerts in
// Slack", read from the page so that the recipe is the one tested.
func slackRecipe(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	const open = "cat > slack.json.j2 <<'EOF'\n"
	page := string(b)
	i := strings.Index(page, open)
	j := strings.Index(page[i+len(open):], "\nEOF\n")
	if i < 0 || j < 0 {
		t.Fatal("docs/operations.md has no slack.json.j2 heredoc")
	}
	return page[i+len(open) : i+len(open)+j]
}
