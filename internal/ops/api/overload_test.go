package api_test

import (
	"net/http"
	"runtime/debug"
	"strings"
	"testing"
)

// A definition checked while the server is past its memory ceiling is
// neither refused nor accepted: the evaluation says nothing about the
// definition, so creation and preview answer 503 with Retry-After, and the
// same request succeeds once there is room. Not parallel: the memory limit
// is the whole process's.
func TestDefinitionCheckedPastTheCeilingIs503(t *testing.T) {
	s := newServer(t)
	def := `{"name": "orders", "doctype": "Sales Order", "event": "on_submit", "url": "https://erp.example.com/hook",
		"template": "{\"a\": \"{{ doc.s * 100 }}\"}", "sample_doc": {"s": "` + strings.Repeat("x", 1024) + `"}}`
	s.expect(http.StatusCreated, "POST", "/v1/webhooks", s.admin, strings.Replace(def, `"orders"`, `"existing"`, 1))

	ballast := make([]byte, 64<<20)
	for i := range ballast {
		ballast[i] = 1
	}
	old := debug.SetMemoryLimit(48 << 20)
	t.Cleanup(func() { debug.SetMemoryLimit(old) })
	created := s.request("POST", "/v1/webhooks", s.admin, def)
	previewed := s.request("POST", "/v1/webhooks/existing/preview", s.admin, `{"doc": {"s": "`+strings.Repeat("x", 1024)+`"}}`)
	debug.SetMemoryLimit(old)
	ballast[len(ballast)-1] = 0 // held until here

	for what, r := range map[string]reply{"create": created, "preview": previewed} {
		if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" || !strings.Contains(string(r.body), `"unavailable"`) {
			t.Errorf("%s past the ceiling: %s (Retry-After %q), want 503 unavailable with Retry-After", what, r, r.header.Get("Retry-After"))
		}
	}
	s.expect(http.StatusCreated, "POST", "/v1/webhooks", s.admin, def)
}
