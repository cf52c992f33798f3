package api_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/homingdev/homing/models"
)

// webhookKeys are the fields of a webhook, exactly those of `homing webhook
// show --json`.
var webhookKeys = []string{"follow_redirects", "url_template", "compat", "condition_language", "description", "ordering",
	"name", "doctype", "event", "condition", "url", "method", "structure", "template",
	"fields", "headers", "has_secret", "signature", "enabled", "max_retries", "queue",
	"timeout", "rate_limit", "created_at", "updated_at",
}

func checkWebhookKeys(t *testing.T, what string, m map[string]any, extra ...string) {
	t.Helper()
	want := slices.Sorted(slices.Values(append(slices.Clone(webhookKeys), extra...)))
	if got := keys(m); !slices.Equal(got, want) {
		t.Errorf("%s: keys\n got %v\nwant %v", what, got, want)
	}
}

func TestWebhookLifecycle(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	const tmpl = `{"name": "{{ doc.name }}"}`
	r := s.expect(http.StatusCreated, "POST", "/v1/webhooks", s.admin, `{
		"name": "orders", "doctype": "Sales Order", "event": "on_submit", "url": "https://erp.example.com/hook",
		"method": "put", "template": "{\"name\": \"{{ doc.name }}\"}", "headers": {"X-Tenant": "acme", "X-Trace": "a, b"},
		"condition": "doc.status == \"Paid\"", "max_retries": 5, "timeout": "1500ms", "queue": "critical",
		"signature": "standard", "generate_secret": true}`)
	if loc := r.header.Get("Location"); loc != "/v1/webhooks/orders" {
		t.Errorf("Location = %q", loc)
	}
	created := r.object(t)
	checkWebhookKeys(t, "POST /v1/webhooks", created, "secret")
	secret, _ := created["secret"].(string)
	if !strings.HasPrefix(secret, "whsec_") || created["has_secret"] != true {
		t.Fatalf("generated secret = %q, has_secret %v", secret, created["has_secret"])
	}
	for k, v := range map[string]any{
		"name": "orders", "doctype": "Sales Order", "event": "on_submit", "url": "https://erp.example.com/hook", "method": "PUT",
		"structure": "json", "template": tmpl, "condition": `doc.status == "Paid"`, "max_retries": float64(5), "timeout": "1.5s",
		"queue": "critical", "signature": "standard", "enabled": true,
	} {
		if created[k] != v {
			t.Errorf("created %s = %#v, want %#v", k, created[k], v)
		}
	}
	if h, _ := created["headers"].(map[string]any); len(h) != 2 || h["X-Tenant"] != "acme" || h["X-Trace"] != "a, b" {
		t.Errorf("headers = %v", created["headers"])
	}

	// GET never shows the secret, and shows what POST returned.
	got := s.expect(http.StatusOK, "GET", "/v1/webhooks/orders", s.admin, "").object(t)
	checkWebhookKeys(t, "GET /v1/webhooks/orders", got, "health")
	if h, _ := got["health"].(map[string]any); h["state"] != "healthy" || h["held_back"] != float64(0) {
		t.Errorf("GET health = %v, want healthy", got["health"])
	}
	delete(got, "health")
	delete(created, "secret")
	if compactAny(t, got) != compactAny(t, created) {
		t.Errorf("GET = %v\nPOST = %v", got, created)
	}
	if strings.Contains(string(s.expect(http.StatusOK, "GET", "/v1/webhooks", s.admin, "").body), secret) {
		t.Error("GET /v1/webhooks shows the secret")
	}

	// PATCH changes only what it names.
	p := s.expect(http.StatusOK, "PATCH", "/v1/webhooks/orders", s.admin, `{"url": "https://erp.example.com/v2", "headers": {}, "max_retries": 0, "enabled": false}`).object(t)
	checkWebhookKeys(t, "PATCH", p)
	if p["url"] != "https://erp.example.com/v2" || len(p["headers"].(map[string]any)) != 0 || p["max_retries"] != float64(0) || p["enabled"] != false {
		t.Errorf("PATCH result = %v", p)
	}
	for _, k := range []string{"name", "doctype", "event", "method", "template", "condition", "timeout", "queue", "signature", "has_secret", "created_at"} {
		if p[k] != got[k] {
			t.Errorf("PATCH changed %s from %#v to %#v", k, got[k], p[k])
		}
	}
	// null counts as absent.
	p2 := s.expect(http.StatusOK, "PATCH", "/v1/webhooks/orders", s.admin, `{"template": null, "enabled": true}`).object(t)
	if p2["template"] != tmpl || p2["enabled"] != true {
		t.Errorf("PATCH with null template = %v", p2)
	}
	// Removing the secret, then renaming.
	if p := s.expect(http.StatusOK, "PATCH", "/v1/webhooks/orders", s.admin, `{"secret": ""}`).object(t); p["has_secret"] != false {
		t.Errorf("secret \"\" left has_secret %v", p["has_secret"])
	}
	r = s.expect(http.StatusOK, "PATCH", "/v1/webhooks/orders", s.admin, `{"name": "sales orders/EU"}`)
	if loc := r.header.Get("Location"); loc != "/v1/webhooks/sales%20orders%2FEU" {
		t.Errorf("Location after rename = %q", loc)
	}
	s.refused(http.StatusNotFound, "not_found", "", "GET", "/v1/webhooks/orders", s.admin, "")
	if got := s.expect(http.StatusOK, "GET", "/v1/webhooks/sales%20orders%2FEU", s.admin, "").object(t); got["name"] != "sales orders/EU" {
		t.Errorf("GET by escaped name = %v", got)
	}

	list := s.expect(http.StatusOK, "GET", "/v1/webhooks", s.admin, "").object(t)
	ws, _ := list["webhooks"].([]any)
	if len(list) != 1 || len(ws) != 1 {
		t.Fatalf("GET /v1/webhooks = %v", list)
	}
	checkWebhookKeys(t, "GET /v1/webhooks item", ws[0].(map[string]any))

	s.expect(http.StatusNoContent, "DELETE", "/v1/webhooks/sales%20orders%2FEU", s.admin, "")
	s.refused(http.StatusNotFound, "not_found", "", "DELETE", "/v1/webhooks/sales%20orders%2FEU", s.admin, "")
	if list := s.expect(http.StatusOK, "GET", "/v1/webhooks", s.admin, "").body; compact(t, string(list)) != `{"webhooks":[]}` {
		t.Errorf("GET /v1/webhooks after delete = %s", list)
	}
}

func compactAny(t *testing.T, v map[string]any) string {
	t.Helper()
	return compact(t, string(mustJSON(t, v)))
}

// TestWebhookRefusals: each refusal names the JSON field at fault.
func TestWebhookRefusals(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	const ok = `"name": "w", "doctype": "D", "event": "on_update", "url": "https://example.com/hook"`
	s.expect(http.StatusCreated, "POST", "/v1/webhooks", s.admin, `{`+ok+`}`)
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		code, field, message     string
	}{
		{"taken name", "POST", "/v1/webhooks", `{` + ok + `}`, 409, "conflict", "", `"w"`},
		{"missing url", "POST", "/v1/webhooks", `{"name": "x", "doctype": "D", "event": "on_update"}`, 422, "invalid_request", "url", "url is required"},
		{"bad url", "POST", "/v1/webhooks", `{"name": "x", "doctype": "D", "event": "on_update", "url": "ftp://x"}`, 422, "invalid_request", "url", "http(s)"},
		{"bad event", "POST", "/v1/webhooks", `{"name": "x", "doctype": "D", "event": "on_save", "url": "https://x.example"}`, 422, "invalid_request", "event", "on_submit"},
		{"max retries", "PATCH", "/v1/webhooks/w", `{"max_retries": 101}`, 422, "invalid_request", "max_retries", "max_retries: 101 must be between 0 and 100"},
		{"max retries type", "PATCH", "/v1/webhooks/w", `{"max_retries": "many"}`, 400, "invalid_json", "max_retries", "whole number"},
		{"timeout", "PATCH", "/v1/webhooks/w", `{"timeout": "5"}`, 422, "invalid_request", "timeout", "duration"},
		{"timeout range", "PATCH", "/v1/webhooks/w", `{"timeout": "1h"}`, 422, "invalid_request", "timeout", "between"},
		{"header", "PATCH", "/v1/webhooks/w", `{"headers": {"Host": "evil.example"}}`, 422, "invalid_request", "headers", "Host cannot be overridden"},
		{"header name with colon", "PATCH", "/v1/webhooks/w", `{"headers": {"A:B": "c"}}`, 422, "invalid_request", "headers", `"A:B"`},
		{"field", "PATCH", "/v1/webhooks/w", `{"fields": ["=x"]}`, 422, "invalid_request", "fields", "fields"},
		{"condition", "PATCH", "/v1/webhooks/w", `{"condition": "doc.("}`, 422, "invalid_request", "condition", "condition"},
		{"read-only", "PATCH", "/v1/webhooks/w", `{"has_secret": true}`, 422, "invalid_request", "has_secret", "read-only"},
		{"unknown field", "PATCH", "/v1/webhooks/w", `{"colour": "blue"}`, 400, "invalid_json", "colour", "known fields"},
		{"secret and generate", "PATCH", "/v1/webhooks/w", `{"secret": "an-operator-secret-1234", "generate_secret": true}`, 422, "invalid_request", "generate_secret", "not both"},
		{"bad secret", "PATCH", "/v1/webhooks/w", `{"secret": "two words"}`, 422, "invalid_request", "secret", "whitespace"},
		{"unknown webhook", "PATCH", "/v1/webhooks/nope", `{"enabled": true}`, 404, "not_found", "", `"nope"`},
		{"unknown query parameter", "GET", "/v1/webhooks?name=w", "", 422, "invalid_request", "name", "unknown query parameter"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := s.refused(tc.status, tc.code, tc.field, tc.method, tc.path, s.admin, tc.body)
			if !strings.Contains(e.Message, tc.message) {
				t.Errorf("message %q does not mention %q", e.Message, tc.message)
			}
		})
	}
	var n int64
	s.db.Model(&models.Webhook{}).Count(&n)
	if n != 1 {
		t.Errorf("%d webhooks after refusals, want 1", n)
	}
}

// TestWebhookSecretIsSealed: a given secret is stored sealed and works; it
// is never echoed.
func TestWebhookSecretIsSealed(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	r := s.expect(http.StatusCreated, "POST", "/v1/webhooks", s.admin, `{"name": "w", "doctype": "D", "event": "on_update", "url": "https://example.com/hook", "secret": "an-operator-secret-1234"}`)
	if strings.Contains(string(r.body), "an-operator-secret-1234") {
		t.Errorf("the given secret is echoed: %s", r.body)
	}
	if m := r.object(t); m["has_secret"] != true || m["secret"] != nil {
		t.Errorf("created = %v, want has_secret and no secret", m)
	}
	var w models.Webhook
	if err := s.db.Where("name = ?", "w").Take(&w).Error; err != nil {
		t.Fatal(err)
	}
	if plain, err := s.box.Open(w.Secret); err != nil || plain != "an-operator-secret-1234" || strings.Contains(w.Secret, plain) {
		t.Errorf("stored secret %q is not the given one sealed (%q, %v)", w.Secret, plain, err)
	}
}

// A preview shows the request as it would go out, credentials masked;
// creation with a sample document refuses a template that fails on it.
func TestWebhookPreviewAndSecretHeaders(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	s.expect(http.StatusCreated, "POST", "/v1/webhooks", s.admin, `{
		"name": "orders", "doctype": "Sales Order", "event": "on_submit", "url": "https://erp.example.com/hook",
		"template": "{\"name\": \"{{ doc.name }}\", \"total\": {{ doc.total }}}", "condition": "doc.total > 10",
		"headers": {"X-Api-Key": "k3y"}, "secret_headers": {"X-Token": "t0ken"}, "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
		"signature": "both", "sample_doc": {"name": "SO-1", "total": 20}}`)

	shown := s.expect(http.StatusOK, "GET", "/v1/webhooks/orders", s.admin, "").object(t)
	if h, _ := shown["headers"].(map[string]any); h["X-Api-Key"] != "****" || h["X-Token"] != "****" {
		t.Errorf("headers = %v, want both masked", shown["headers"])
	}

	p := s.expect(http.StatusOK, "POST", "/v1/webhooks/orders/preview", s.admin, `{"doc": {"name": "SO-1\", \"x\": \"", "total": 20}}`).object(t)
	h, _ := p["headers"].(map[string]any)
	if p["matched"] != true || p["method"] != "POST" || p["url"] != "https://erp.example.com/hook" ||
		h["X-Api-Key"] != "****" || h["Content-Type"] != "application/json" ||
		p["body"] != `{"name": "SO-1\", \"x\": \"", "total": 20}` {
		t.Errorf("preview = %v", p)
	}
	// Signed, but no signature shown: a preview is no signing oracle.
	if h["Webhook-Signature"] != "****" || h["X-Frappe-Webhook-Signature"] != "****" || h["Webhook-Id"] != "preview" || h["Webhook-Timestamp"] == nil {
		t.Errorf("preview's signature headers = %v, want present and masked", h)
	}
	if p := s.expect(http.StatusOK, "POST", "/v1/webhooks/orders/preview", s.admin, `{"doc": {"total": 1}}`).object(t); p["matched"] != false {
		t.Errorf("preview of a document the condition refuses = %v, want matched false", p)
	}

	e := s.refused(http.StatusUnprocessableEntity, "invalid_request", "template", "POST", "/v1/webhooks", s.admin, `{
		"name": "bomb", "doctype": "Sales Order", "event": "on_submit", "url": "https://erp.example.com/hook",
		"template": "\"{{ '#' * doc.width }}\"", "sample_doc": {"width": 100000000000}}`)
	if msg := e.Message; !strings.Contains(msg, "size limit") {
		t.Errorf("refusal = %q, want it to name the size limit", msg)
	}
}

// A compat frappe preview reads its document as the worker reads a
// published one: 3 stays an int and 1500.0 a float (issue 25), in the
// template, its filters and data rows; so does a sample document.
func TestFrappePreviewKeepsNumberTypes(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	doc := `{"name": "SO-7", "grand_total": 1500.0, "is_paid": 0, "items": [{"qty": 3, "rate": 500.0}]}`
	s.expect(http.StatusCreated, "POST", "/v1/webhooks", s.admin, `{
		"name": "so-template", "doctype": "Sales Order", "event": "on_submit", "url": "https://erp.example.com/hook", "compat": "frappe",
		"template": "{\"total\": {{ doc.grand_total }}, \"paid\": {%- if doc.is_paid %} 1{% else %} {{ doc.is_paid }}{% endif %}, \"lines\": [{% for i in doc['items'] %}{\"qty\": {{ i.qty }}, \"rate\": {{ i.rate }}}{% endfor %}], \"json\": {{ doc.grand_total | json }}}",
		"sample_doc": `+doc+`}`)
	s.expect(http.StatusCreated, "POST", "/v1/webhooks", s.admin, `{
		"name": "so-rows", "doctype": "Sales Order", "event": "on_submit", "url": "https://erp.example.com/hook", "compat": "frappe",
		"fields": ["name=id", "grand_total=amount", "is_paid=paid", "items=items"], "sample_doc": `+doc+`}`)
	for name, want := range map[string]string{
		"so-template": `{"total": 1500.0, "paid": 0, "lines": [{"qty": 3, "rate": 500.0}], "json": 1500.0}`,
		"so-rows":     `{"id": "SO-7", "amount": 1500.0, "paid": 0, "items": [{"qty": 3, "rate": 500.0}]}`,
	} {
		p := s.expect(http.StatusOK, "POST", "/v1/webhooks/"+name+"/preview", s.admin, `{"doc": `+doc+`}`).object(t)
		if p["body"] != want {
			t.Errorf("%s: preview body %v (error %v)\nwant %s", name, p["body"], p["error"], want)
		}
	}
}
