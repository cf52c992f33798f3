package api_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestWebhookDescriptionAndPortalSettings: a webhook keeps its description
// through the API (one past its bound refused naming the field); a
// tenant's portal_advanced and event_types are set and read through
// /v1/tenants, a bad event type refused naming the pair.
func TestWebhookDescriptionAndPortalSettings(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	created := s.expect(http.StatusCreated, "POST", "/v1/webhooks", s.admin,
		`{"name": "orders", "doctype": "Sales Order", "event": "on_submit", "url": "https://erp.example.com/hook", "description": "Orders into the ERP"}`).object(t)
	if created["description"] != "Orders into the ERP" {
		t.Errorf("created: %v", created)
	}
	if e := s.refused(http.StatusUnprocessableEntity, "invalid_request", "description", "PATCH", "/v1/webhooks/orders", s.admin, `{"description": "`+strings.Repeat("x", 501)+`"}`); !strings.Contains(e.Message, "at most 500") {
		t.Errorf("a long description: %+v", e)
	}
	if got := s.expect(http.StatusOK, "GET", "/v1/webhooks/orders", s.admin, "").object(t); got["description"] != "Orders into the ERP" {
		t.Errorf("after a refused patch: %v", got)
	}

	tenant := s.expect(http.StatusCreated, "POST", "/v1/tenants", s.admin, `{"name": "acme", "portal_advanced": true, "event_types": ["Invoice:on_submit"]}`).object(t)
	if tenant["portal_advanced"] != true || len(tenant["event_types"].([]any)) != 1 {
		t.Errorf("created tenant: %v", tenant)
	}
	if r := s.expect(http.StatusUnprocessableEntity, "PATCH", "/v1/tenants/acme", s.admin, `{"event_types": ["Invoice:paid"]}`); !strings.Contains(r.String(), `Invoice:paid`) || !strings.Contains(r.String(), "is not one of") {
		t.Errorf("a bad event type: %s", r)
	}
	tenant = s.expect(http.StatusOK, "PATCH", "/v1/tenants/acme", s.admin, `{"portal_advanced": false}`).object(t)
	if tenant["portal_advanced"] != false || len(tenant["event_types"].([]any)) != 1 {
		t.Errorf("patched tenant: %v", tenant)
	}
}
