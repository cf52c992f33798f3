package cli_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/homingdev/homing/internal/intake/store"
	"github.com/homingdev/homing/models"
)

// deliveryKeys are the fields of `homing delivery list --json`, exactly.
var deliveryKeys = []string{
	"id", "webhook", "event_id", "doc_type", "doc_name", "doc_event", "status", "attempts",
	"max_retries", "next_retry", "method", "url", "last_status_code", "last_error",
	"created_at", "updated_at",
}

// seedDeliveries writes a Failed delivery with one attempt and a Delivered
// one, as the worker would have left them.
func (s *site) seedDeliveries() {
	s.t.Helper()
	db, err := store.Open(s.dsn)
	if err != nil {
		s.t.Fatal(err)
	}
	defer func() { _ = store.Close(db) }()
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	next := t0.Add(5 * time.Minute)
	code503, code200 := 503, 200
	rows := []models.Delivery{{
		ID: "dlv-failed", WebhookID: "wh-1", WebhookName: "orders", EventID: "evt-1", DocType: "Sales Order",
		DocName: "SO-1", DocEvent: "on_submit", Method: "POST", URL: "https://erp.example.com/hook",
		Headers: models.StringMap{"Content-Type": "application/json", "X-Tenant": "acme"},
		Payload: []byte(`{"name": "SO-1"}`), Status: models.StatusFailed, Attempts: 1, MaxRetries: 3,
		NextRetry: &next, LastStatusCode: &code503, LastError: "HTTP 503 Service Unavailable",
		LastResponse: `{"error": "maintenance"}` + strings.Repeat(" pad", 200) + " TAIL-NOT-SHOWN",
		CreatedAt:    t0, UpdatedAt: t0,
	}, {
		ID: "dlv-ok", WebhookID: "wh-2", WebhookName: "invoices", EventID: "evt-2", DocType: "Sales Invoice",
		DocName: "SINV-1", DocEvent: "on_submit", Method: "PUT", URL: "https://erp.example.com/inv",
		Headers: models.StringMap{}, Payload: []byte(`{}`), Status: models.StatusDelivered, Attempts: 1, MaxRetries: 3,
		LastStatusCode: &code200, CreatedAt: t0.Add(time.Minute), UpdatedAt: t0.Add(time.Minute),
	}}
	if err := db.Create(&rows).Error; err != nil {
		s.t.Fatal(err)
	}
	att := models.Attempt{DeliveryID: "dlv-failed", Attempt: 1, At: t0, Method: "POST", URL: "https://erp.example.com/hook",
		RequestHeaders: models.StringMap{"webhook-id": "evt-1", "webhook-timestamp": "1772366400",
			"webhook-signature": "v1,c2VjcmV0LXNpZy0x v1,c2VjcmV0LXNpZy0y", "X-Frappe-Webhook-Signature": "ZnJhcHBlLXNpZw==",
			"Content-Type": "application/json"},
		StatusCode: &code503, DurationMS: 42, Class: "http", Error: "HTTP 503 Service Unavailable"}
	if err := db.Create(&att).Error; err != nil {
		s.t.Fatal(err)
	}
}

func ids(list []map[string]any) []string {
	var out []string
	for _, d := range list {
		out = append(out, d["id"].(string))
	}
	return out
}

func TestDeliveryList(t *testing.T) {
	t.Parallel()
	s := newSite(t, "")
	if r := s.ok("delivery", "list", "--json"); strings.TrimSpace(r.stdout) != "[]" {
		t.Errorf("empty list --json = %q", r.stdout)
	}
	s.seedDeliveries()

	all := array(t, s.ok("delivery", "list", "--json").stdout)
	if got := strings.Join(ids(all), ","); got != "dlv-ok,dlv-failed" {
		t.Fatalf("list = %s, want newest first", got)
	}
	for _, d := range all {
		checkKeys(t, "delivery list --json", d, deliveryKeys)
	}
	failed := all[1]
	if failed["next_retry"] != "2026-03-01T12:05:00Z" || failed["last_status_code"] != float64(503) ||
		failed["status"] != "Failed" || failed["attempts"] != float64(1) || failed["webhook"] != "orders" {
		t.Errorf("failed delivery = %v", failed)
	}
	if all[0]["next_retry"] != nil {
		t.Errorf("delivered next_retry = %v, want null", all[0]["next_retry"])
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--status", "Failed"}, "dlv-failed"},
		{[]string{"--status", "delivered"}, "dlv-ok"},
		{[]string{"--status", "Exhausted"}, ""},
		{[]string{"--webhook", "orders"}, "dlv-failed"},
		{[]string{"--event-id", "evt-2"}, "dlv-ok"},
		{[]string{"--limit", "1"}, "dlv-ok"},
		{[]string{"--webhook", "orders", "--status", "Delivered"}, ""},
	} {
		got := array(t, s.ok(append([]string{"delivery", "list", "--json"}, tc.args...)...).stdout)
		if strings.Join(ids(got), ",") != tc.want {
			t.Errorf("delivery list %v = %v, want %q", tc.args, ids(got), tc.want)
		}
	}

	r := s.ok("delivery", "list")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "ID") || !strings.HasPrefix(lines[2], "dlv-failed") ||
		!strings.Contains(lines[2], "Failed") || !strings.Contains(lines[2], "503") || !strings.Contains(lines[2], " 1/4 ") {
		t.Errorf("plain list:\n%s", r.stdout)
	}
}

func TestDeliveryShow(t *testing.T) {
	t.Parallel()
	s := newSite(t, "")
	s.seedDeliveries()

	d := object(t, s.ok("delivery", "show", "dlv-failed", "--json").stdout)
	for _, k := range append(deliveryKeys, "headers", "payload", "history") {
		if _, ok := d[k]; !ok {
			t.Errorf("delivery show --json lacks %q", k)
		}
	}
	if h := d["headers"].(map[string]any); h["X-Tenant"] != "acme" || h["Content-Type"] != "application/json" {
		t.Errorf("headers = %v", h)
	}
	if d["payload"] != `{"name": "SO-1"}` {
		t.Errorf("payload = %#v", d["payload"])
	}
	history, _ := d["history"].([]any)
	if len(history) != 1 {
		t.Fatalf("history = %v", d["history"])
	}
	h := history[0].(map[string]any)
	for k, v := range map[string]any{"attempt": float64(1), "at": "2026-03-01T12:00:00Z", "status_code": float64(503),
		"duration_ms": float64(42), "error": "HTTP 503 Service Unavailable"} {
		if h[k] != v {
			t.Errorf("history[0].%s = %#v, want %#v", k, h[k], v)
		}
	}
	if got := object(t, s.ok("delivery", "show", "dlv-ok", "--json").stdout)["history"]; got == nil {
		t.Error("history of a delivery without attempts is null, want []")
	}

	r := s.ok("delivery", "show", "dlv-failed")
	for _, want := range []string{"dlv-failed", "orders", "Failed", "next retry 2026-03-01T12:05:00Z", "attempts:       1/4\n", "POST https://erp.example.com/hook",
		"X-Tenant: acme", `{"name": "SO-1"}`} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("plain show lacks %q:\n%s", want, r.stdout)
		}
	}
	// The signature headers sent, masked; the response, cut; relative times.
	for _, want := range []string{"webhook-signature: v1,**** v1,****", "X-Frappe-Webhook-Signature: ****", "webhook-id: evt-1",
		"webhook-timestamp: 1772366400", `last response:  {"error": "maintenance"} pad`, "more bytes; --json has it all",
		"created:        2026-03-01T12:00:00Z (", " ago)"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("plain show lacks %q:\n%s", want, r.stdout)
		}
	}
	for _, secret := range []string{"c2VjcmV0LXNpZy0x", "ZnJhcHBlLXNpZw==", "TAIL-NOT-SHOWN"} {
		if strings.Contains(r.stdout, secret) {
			t.Errorf("plain show prints %q:\n%s", secret, r.stdout)
		}
	}
	_, table, ok := strings.Cut(r.stdout, "\n\n")
	lines := strings.Split(strings.TrimSpace(table), "\n")
	if !ok || len(lines) != 2 || !strings.HasPrefix(lines[0], "ATTEMPT") || !strings.HasPrefix(lines[1], "1 ") ||
		!strings.Contains(lines[1], "503") || !strings.Contains(lines[1], "42ms") {
		t.Errorf("history table:\n%s", table)
	}

	s.fails(1, []string{"delivery", "show", "nope"}, "delivery not found", `"nope"`, "homing delivery list")
}

// TestDeliveryListDocAndTime filters by document and creation time, absolute
// or as a duration ago, and refuses what cannot be a filter.
func TestDeliveryListDocAndTime(t *testing.T) {
	t.Parallel()
	s := newSite(t, "")
	s.seedDeliveries() // dlv-failed at 2026-03-01T12:00Z, dlv-ok a minute later
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--doc-type", "Sales Order"}, "dlv-failed"},
		{[]string{"--doc-type", "Sales Invoice", "--doc-name", "SINV-1"}, "dlv-ok"},
		{[]string{"--doc-type", "Sales Invoice", "--doc-name", "SO-1"}, ""},
		{[]string{"--since", "2026-03-01T12:00:30Z"}, "dlv-ok"},
		{[]string{"--until", "2026-03-01T12:00:30Z"}, "dlv-failed"},
		{[]string{"--since", "2026-03-01T12:00:00Z", "--until", "2026-03-01T12:01:00Z"}, "dlv-failed"},
		{[]string{"--since", "24h"}, ""},                 // both were created long before the test ran
		{[]string{"--until", "1h"}, "dlv-ok,dlv-failed"}, // both were created more than an hour ago
	} {
		got := array(t, s.ok(append([]string{"delivery", "list", "--json"}, tc.args...)...).stdout)
		if strings.Join(ids(got), ",") != tc.want {
			t.Errorf("delivery list %v = %v, want %q", tc.args, ids(got), tc.want)
		}
	}
	s.fails(2, []string{"delivery", "list", "--doc-name", "SO-1"}, "--doc-name", "--doc-type")
	s.fails(2, []string{"delivery", "list", "--since", "yesterday"}, "--since", `"yesterday"`, "RFC 3339")
	s.fails(2, []string{"delivery", "list", "--since", "1h", "--until", "2h"}, "--until", "not after --since")
}

// TestDeliveryListUnknownWebhook: an empty listing for a name that is no
// webhook and never delivered is a typo to report, not an empty answer; a
// deleted webhook's deliveries still list.
func TestDeliveryListUnknownWebhook(t *testing.T) {
	t.Parallel()
	s := newSite(t, "")
	s.seedDeliveries() // webhook "orders" no longer exists, its delivery does
	s.fails(1, []string{"delivery", "list", "--webhook", "ordrs"}, `no webhook named "ordrs"`, "homing webhook list")
	if got := array(t, s.ok("delivery", "list", "--json", "--webhook", "orders", "--status", "Delivered").stdout); len(got) != 0 {
		t.Errorf("orders' Delivered = %v, want none", ids(got))
	}
}

// TestDeliveryRecoverSaysWhatItDid: recovering an unknown webhook is an error
// naming it, not "requeued 0"; a real recover's summary names its scope.
func TestDeliveryRecoverSaysWhatItDid(t *testing.T) {
	t.Parallel()
	s := newSite(t, "")
	s.seedDeliveries() // dlv-failed: webhook "orders", Failed, created 2026-03-01
	r := s.fails(1, []string{"delivery", "recover", "--webhook", "ordrs", "--status", "Failed"}, `no webhook named "ordrs"`, "nothing to recover")
	if r.stdout != "" {
		t.Errorf("stdout = %q, want nothing", r.stdout)
	}
	since := fmt.Sprintf("%dh", int(time.Since(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)).Hours())+24)
	// Without --status, the Failed row (an outage's) is found with the Exhausted ones.
	r = s.ok("delivery", "recover", "--webhook", "orders", "--since", since, "--dry-run")
	if !strings.HasPrefix(r.stdout, `would requeue 1 deliveries of webhook "orders" (Failed or Exhausted, created in the last `) {
		t.Errorf("dry run without --status printed %q", r.stdout)
	}
	r = s.ok("delivery", "recover", "--webhook", "orders", "--status", "Failed", "--since", since, "--dry-run")
	if !strings.HasPrefix(r.stdout, `would requeue 1 deliveries of webhook "orders" (Failed, created in the last `) {
		t.Errorf("dry run printed %q", r.stdout)
	}
	r = s.ok("delivery", "recover", "--webhook", "orders", "--status", "Failed", "--since", since)
	if !strings.HasPrefix(r.stdout, `requeued 1 deliveries of webhook "orders"`) || strings.Count(r.stdout, "\n") != 1 {
		t.Errorf("recover printed %q, want one summary line", r.stdout)
	}
}
