package api_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/homingdev/homing/client"
	"github.com/homingdev/homing/internal/intake/dbstate"
	"github.com/homingdev/homing/internal/intake/event"
	"github.com/homingdev/homing/internal/ops/api"
	"github.com/homingdev/homing/internal/testing/testenv"
	"github.com/homingdev/homing/models"
)

// noteEvent is a publish body with its own event ID.
func noteEvent(id string) string {
	return fmt.Sprintf(`{"id": %q, "doc_type": "Note", "event": "after_insert", "doc": {"title": "hi"}}`, id)
}

// outboxRows counts the outbox rows of event id, read past the proxy.
func outboxRows(t *testing.T, dsn, id string) int64 {
	t.Helper()
	db := testenv.Open(t, dsn)
	var n int64
	if err := db.Model(&models.OutboxEvent{}).Where("event_id = ?", id).Count(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}

// TestDatabaseCutIs503WithRetryAfter cuts the API's PostgreSQL away (a
// failed primary's host): every route answers 503 database_unavailable with
// Retry-After, never 500 and never a 202 for an event that is not stored;
// /readyz is 503; the outage is one ERROR line however many requests fail,
// and is counted; the Go client's ViaServe gets a retryable error carrying
// Retry-After. Once the database is back, the same event ID is accepted
// with 202 and one INFO line says the database is available again.
func TestDatabaseCutIs503WithRetryAfter(t *testing.T) {
	t.Parallel()
	dsn := testenv.PostgresDSN(t)
	proxy, viaProxy := testenv.PostgresProxy(t, dsn)
	logs, log := testenv.NewLogs()
	s := newServer(t, func(o *options) { o.dsn, o.logger = viaProxy, log })
	s.expect(http.StatusAccepted, "POST", "/v1/events", s.publish, noteEvent("before-cut"))
	s.expect(http.StatusOK, "GET", "/readyz", "", "")

	proxy.Cut()
	for i := range 3 {
		id := fmt.Sprintf("during-cut-%d", i)
		r := s.request("POST", "/v1/events", s.publish, noteEvent(id))
		if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") != "2" {
			t.Fatalf("publish during the cut: %s, Retry-After %q; want 503 with Retry-After: 2", r, r.header.Get("Retry-After"))
		}
		e := s.refused(http.StatusServiceUnavailable, api.CodeDatabaseUnavailable, "", "POST", "/v1/events", s.publish, noteEvent(id))
		if !strings.Contains(e.Message, "database is unavailable") || !strings.Contains(e.Message, "Retry-After") {
			t.Errorf("publish during the cut: message %q does not say the database is unavailable and to retry", e.Message)
		}
	}
	// Every route, not only publishing: the admin token was never used, so
	// this one fails reading it.
	if r := s.request("GET", "/v1/webhooks", s.admin, ""); r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") != "2" {
		t.Errorf("GET /v1/webhooks during the cut: %s, Retry-After %q; want 503 with Retry-After", r, r.header.Get("Retry-After"))
	}
	if r := s.request("GET", "/readyz", "", ""); r.status != http.StatusServiceUnavailable || !strings.Contains(string(r.body), "database unavailable") {
		t.Errorf("/readyz during the cut: %s; want 503 naming the database", r)
	}

	// The Go client through serve: a workflow_transition needs the database.
	err := client.ViaServe{URL: s.srv.URL, Token: s.publish}.DeliverNow(context.Background(),
		event.Event{ID: "wf-during-cut", DocType: "Sales Order", DocName: "SO-1", Event: models.EventWorkflowTransition, Doc: map[string]any{"name": "SO-1"}})
	if after, ok := client.RetryAfter(err); !client.IsRetryable(err) || !ok || after != 2*time.Second {
		t.Errorf("ViaServe during the cut: %v (retryable %v, Retry-After %s); want retryable with Retry-After 2s", err, client.IsRetryable(err), after)
	}

	if n := logs.Count("ERROR", "database unavailable: "); n != 1 {
		t.Errorf("ERROR lines about the database = %d, want 1:\n%s", n, logs)
	}
	if n := logs.Count("ERROR", ""); n != 1 {
		t.Errorf("ERROR lines = %d, want only the outage's:\n%s", n, logs)
	}
	if n := s.watcher.Errors()[dbstate.Unavailable]; n < 8 { // 6 publishes, the webhooks list, the ViaServe, the readiness probe
		t.Errorf("unavailable database errors counted: %d, want at least 8", n)
	}

	proxy.Restore()
	var r reply
	testenv.Eventually(t, "a publish after the restore", func() bool {
		r = s.request("POST", "/v1/events", s.publish, noteEvent("during-cut-0"))
		return r.status != http.StatusServiceUnavailable
	})
	if r.status != http.StatusAccepted {
		t.Fatalf("the event refused during the cut, published again: %s; want 202 (nothing of it was stored)", r)
	}
	if n := outboxRows(t, dsn, "during-cut-0"); n != 1 {
		t.Errorf("outbox rows of during-cut-0 = %d, want 1", n)
	}
	if n := outboxRows(t, dsn, "during-cut-1"); n != 0 {
		t.Errorf("outbox rows of during-cut-1, refused with 503 = %d, want 0", n)
	}
	s.expect(http.StatusOK, "GET", "/readyz", "", "")
	if n := logs.Count("INFO", "database available again after "); n != 1 {
		t.Errorf("INFO lines \"database available again\" = %d, want 1:\n%s", n, logs)
	}
}

// TestDatabaseReadOnlyIs503 is a primary demoted under the API: it still
// answers reads and pings, and refuses writes (25006). A publish is 503
// saying the database is read-only, /readyz is 503, and when it takes
// writes again the publish is accepted.
func TestDatabaseReadOnlyIs503(t *testing.T) {
	t.Parallel()
	dsn := testenv.PostgresDSN(t)
	logs, log := testenv.NewLogs()
	s := newServer(t, func(o *options) { o.dsn, o.logger = dsn, log })
	s.expect(http.StatusAccepted, "POST", "/v1/events", s.publish, noteEvent("before-demotion"))

	testenv.SetReadOnly(t, dsn, true)
	var r reply
	testenv.Eventually(t, "a publish refused as read-only", func() bool {
		r = s.request("POST", "/v1/events", s.publish, noteEvent("during-demotion"))
		return strings.Contains(string(r.body), "read-only")
	})
	if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") != "2" || !strings.Contains(string(r.body), `"code":"database_unavailable"`) {
		t.Fatalf("publish to a read-only primary: %s, Retry-After %q; want 503 database_unavailable with Retry-After: 2", r, r.header.Get("Retry-After"))
	}
	if r := s.request("GET", "/readyz", "", ""); r.status != http.StatusServiceUnavailable || !strings.Contains(string(r.body), "read-only") {
		t.Errorf("/readyz on a read-only primary: %s; want 503 saying read-only", r)
	}
	if n := s.watcher.Errors()[dbstate.ReadOnly]; n == 0 {
		t.Error("read_only database errors counted: 0")
	}

	testenv.SetReadOnly(t, dsn, false)
	testenv.Eventually(t, "a publish after the database takes writes again", func() bool {
		r = s.request("POST", "/v1/events", s.publish, noteEvent("during-demotion"))
		return r.status != http.StatusServiceUnavailable
	})
	if r.status != http.StatusAccepted {
		t.Fatalf("publish after the demotion ended: %s; want 202", r)
	}
	s.expect(http.StatusOK, "GET", "/readyz", "", "")
	if logs.Count("ERROR", "database ") != 1 || logs.Count("INFO", "database available again") != 1 {
		t.Errorf("want one ERROR line for the outage and one INFO line for its end:\n%s", logs)
	}
}
