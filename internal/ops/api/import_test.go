package api_test

import (
	"net/http"
	"os"
	"strings"
	"testing"
)

// POST /v1/webhooks/import takes Frappe's export ({"data": [...]} with
// "secrets" here), answers per webhook, stores nothing on a dry run, and is
// for admin tokens only.
func TestImportWebhooks(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	export, err := os.ReadFile("../../engine/webhook/testdata/frappe/webhooks.json")
	if err != nil {
		t.Fatal(err)
	}
	body := `{"data": ` + strings.ReplaceAll(string(export), "http://RECEIVER", "https://erp.example.com") + `, "secrets": {"so-submitted": "s3cr3t-orders"}}`
	s.refused(http.StatusForbidden, "forbidden", "", "POST", "/v1/webhooks/import", s.publish, body)
	r := s.expect(http.StatusOK, "POST", "/v1/webhooks/import?dry_run=true", s.admin, body).object(t)
	if r["dry_run"] != true {
		t.Fatalf("dry run answer: %v", r)
	}
	if list := s.expect(http.StatusOK, "GET", "/v1/webhooks", s.admin, "").object(t); len(list["webhooks"].([]any)) != 0 {
		t.Fatalf("a dry run stored webhooks: %v", list)
	}
	r = s.expect(http.StatusOK, "POST", "/v1/webhooks/import", s.admin, body).object(t)
	statuses := map[string]string{}
	for _, item := range r["webhooks"].([]any) {
		m := item.(map[string]any)
		statuses[m["name"].(string)] = m["status"].(string)
	}
	if statuses["so-submitted"] != "imported" || statuses["needs-database"] != "not_imported" || statuses["invoice-dynamic"] != "imported" {
		t.Fatalf("import: %v", statuses)
	}
	got := s.expect(http.StatusOK, "GET", "/v1/webhooks/invoice-dynamic", s.admin, "").object(t)
	if got["enabled"] != false || got["compat"] != "frappe" {
		t.Errorf("invoice-dynamic without its secret: %v, want imported disabled", got)
	}
	s.refused(http.StatusUnprocessableEntity, "invalid_request", "body", "POST", "/v1/webhooks/import", s.admin, `{"webhooks": []}`)
}
