package api_test

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// A definition whose check reaches its time limit is neither refused nor
// accepted: time is not the definition's alone (a cheap template passes
// the limit on a loaded server), so creation and preview answer 503 with
// Retry-After, saying to try again. A limit of 1ns reaches the deadline
// without load.
func TestDefinitionCheckedPastTheTimeLimitIs503(t *testing.T) {
	t.Parallel()
	s := newServer(t, func(o *options) { o.renderTimeLimit = time.Nanosecond })
	def := `{"name": "orders", "doctype": "Sales Order", "event": "on_submit", "url": "https://erp.example.com/hook",
		"template": "{\"v\": \"{% for x in doc.a %}{% if x > 5 %}y{% endif %}{% endfor %}\"}", "sample_doc": {"a": [1, 1, 1]}}`
	created := s.request("POST", "/v1/webhooks", s.admin, def)
	if created.status != http.StatusServiceUnavailable || created.header.Get("Retry-After") == "" || !strings.Contains(string(created.body), `"unavailable"`) ||
		!strings.Contains(string(created.body), "time limit") || !strings.Contains(string(created.body), "try again") {
		t.Errorf("create past the time limit: %s (Retry-After %q), want 503 unavailable with Retry-After naming the time limit", created, created.header.Get("Retry-After"))
	}
	s.expect(http.StatusNotFound, "GET", "/v1/webhooks/orders", s.admin, "")

	// A webhook whose body is not templated is created, then previewed
	// with a template set by a direct write: the preview is no verdict.
	plain := `{"name": "existing", "doctype": "Sales Order", "event": "on_submit", "url": "https://erp.example.com/hook"}`
	s.expect(http.StatusCreated, "POST", "/v1/webhooks", s.admin, plain)
	if err := s.db.Exec(`UPDATE webhooks SET body_template = ? WHERE name = 'existing'`, `{"v": "{% for x in doc.a %}{{ x }}{% endfor %}"}`).Error; err != nil {
		t.Fatal(err)
	}
	previewed := s.request("POST", "/v1/webhooks/existing/preview", s.admin, `{"doc": {"a": [1, 1, 1]}}`)
	if previewed.status != http.StatusServiceUnavailable || previewed.header.Get("Retry-After") == "" || !strings.Contains(string(previewed.body), "time limit") {
		t.Errorf("preview past the time limit: %s (Retry-After %q), want 503 unavailable with Retry-After naming the time limit", previewed, previewed.header.Get("Retry-After"))
	}
}
