package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/homingdev/homing/internal/engine/tenant"
	"github.com/homingdev/homing/internal/ops/api"
	"github.com/homingdev/homing/internal/ops/token"
	"github.com/homingdev/homing/internal/testing/testenv"
	"github.com/homingdev/homing/models"
)

// tenants is a server with the tenants acme and globex, an admin and a
// publish token of each, and in acme a webhook "orders", a delivery and a
// published event "ev-1".
type tenants struct {
	*server
	acmeAdmin, acmePublish, globexAdmin, globexPublish string
	delivery                                           string
}

func newTenants(t *testing.T, opts ...func(*options)) *tenants {
	t.Helper()
	s := newServer(t, opts...)
	ctx := context.Background()
	ts := &tenants{server: s}
	for _, name := range []string{"acme", "globex"} {
		if _, err := tenant.New(s.db, nil, nil).Create(ctx, name, tenant.Patch{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tk := range []struct {
		plain               *string
		name, scope, tenant string
	}{
		{&ts.acmeAdmin, "acme-admin", token.ScopeAdmin, "acme"},
		{&ts.acmePublish, "acme-publish", token.ScopePublish, "acme"},
		{&ts.globexAdmin, "globex-admin", token.ScopeAdmin, "globex"},
		{&ts.globexPublish, "globex-publish", token.ScopePublish, "globex"},
	} {
		tok, plain, err := s.tokens.Create(ctx, tk.name, tk.scope, tk.tenant)
		if err != nil {
			t.Fatal(err)
		}
		if tok.Operator || tok.Tenant != tk.tenant {
			t.Fatalf("token %s: %+v, want a token of tenant %s", tk.name, tok, tk.tenant)
		}
		*tk.plain = plain
	}
	r := s.expect(http.StatusCreated, "POST", "/v1/webhooks", ts.acmeAdmin, ordersHook).object(t)
	var hook models.Webhook
	if err := s.db.Where("name = ? AND tenant = ?", "orders", "acme").Take(&hook).Error; err != nil {
		t.Fatalf("acme's webhook: %v (created %v)", err, r)
	}
	d := testenv.PlannedDelivery("acme-delivery-1", "ev-1", hook.ID, time.Now().UTC().Truncate(time.Microsecond))
	d.Tenant, d.WebhookName = "acme", "orders"
	if err := s.db.Create(&d).Error; err != nil {
		t.Fatal(err)
	}
	ts.delivery = d.ID
	s.expect(http.StatusAccepted, "POST", "/v1/events", ts.acmePublish, eventBody("ev-1", ""))
	return ts
}

const ordersHook = `{"name": "orders", "doctype": "Sales Order", "event": "on_submit", "url": "https://erp.example.com/hook"}`

func eventBody(id, tenant string) string {
	t := ""
	if tenant != "" {
		t = `"tenant": "` + tenant + `", `
	}
	return `{` + t + `"id": "` + id + `", "doc_type": "Sales Order", "event": "on_submit", "doc": {"name": "SO-1"}}`
}

// Every route of the API keeps tenants apart: each route that addresses a
// webhook, a delivery or an event answers another tenant's with 404, a
// listing shows only the token's tenant, and the tenants' routes are for
// operator tokens only. A route this test has no case for fails it: a new
// route must say how it keeps tenants apart.
func TestEveryRouteKeepsTenantsApart(t *testing.T) {
	t.Parallel()
	ts := newTenants(t)
	s := ts.server
	notFound := func(method, path, body string) func(t *testing.T) {
		return func(t *testing.T) {
			s.refused(http.StatusNotFound, "not_found", "", method, path, ts.globexAdmin, body)
		}
	}
	operatorOnly := func(method, path, body string) func(t *testing.T) {
		return func(t *testing.T) {
			s.refused(http.StatusForbidden, "forbidden", "", method, path, ts.globexAdmin, body)
			s.refused(http.StatusForbidden, "forbidden", "", method, path, ts.acmeAdmin, body)
		}
	}
	noObject := func(t *testing.T) {} // serves no tenant's object
	cases := map[string]func(t *testing.T){
		"POST /v1/events": func(t *testing.T) {
			// Naming another tenant is 404; the same event ID in one's own
			// tenant is a new event, not acme's repeat.
			s.refused(http.StatusNotFound, "not_found", "", "POST", "/v1/events", ts.globexPublish, eventBody("ev-2", "acme"))
			s.refused(http.StatusNotFound, "not_found", "", "POST", "/v1/events", ts.globexPublish, eventBody("ev-2", ""), api.TenantHeader, "acme")
			s.expect(http.StatusAccepted, "POST", "/v1/events", ts.globexPublish, eventBody("ev-1", ""))
			s.expect(http.StatusAccepted, "POST", "/v1/events", ts.globexPublish, eventBody("ev-3", "globex"))
			var tenants []string
			if err := s.db.Model(&models.PublishedEvent{}).Where("event_id = ?", "ev-1").Order("tenant").Pluck("tenant", &tenants).Error; err != nil || strings.Join(tenants, ",") != "acme,globex" {
				t.Fatalf("ev-1 published in %v (%v), want acme and globex", tenants, err)
			}
		},
		"GET /v1/webhooks": func(t *testing.T) {
			if body := string(s.expect(http.StatusOK, "GET", "/v1/webhooks", ts.globexAdmin, "").body); strings.Contains(body, "orders") {
				t.Fatalf("globex lists acme's webhook: %s", body)
			}
			if body := string(s.expect(http.StatusOK, "GET", "/v1/webhooks", ts.acmeAdmin, "").body); !strings.Contains(body, `"orders"`) {
				t.Fatalf("acme does not list its webhook: %s", body)
			}
		},
		"POST /v1/webhooks": func(t *testing.T) {
			// Names are per tenant: globex may have its own "orders".
			s.expect(http.StatusCreated, "POST", "/v1/webhooks", ts.globexAdmin, ordersHook)
			s.expect(http.StatusNoContent, "DELETE", "/v1/webhooks/orders", ts.globexAdmin, "")
			s.expect(http.StatusOK, "GET", "/v1/webhooks/orders", ts.acmeAdmin, "")
		},
		"GET /v1/webhooks/{name}":          notFound("GET", "/v1/webhooks/orders", ""),
		"PATCH /v1/webhooks/{name}":        notFound("PATCH", "/v1/webhooks/orders", `{"max_retries": 1}`),
		"DELETE /v1/webhooks/{name}":       notFound("DELETE", "/v1/webhooks/orders", ""),
		"POST /v1/webhooks/{name}/preview": notFound("POST", "/v1/webhooks/orders/preview", `{"doc": {"name": "SO-1"}}`),
		"POST /v1/webhooks/{name}/test":    notFound("POST", "/v1/webhooks/orders/test", `{"doc": {"name": "SO-1"}}`),
		"POST /v1/webhooks/import": func(t *testing.T) {
			body := `[{"name": "orders", "webhook_doctype": "Sales Order", "webhook_docevent": "on_submit", "request_url": "https://erp.example.com/x", "request_structure": "Form URL-Encoded"}]`
			r := s.expect(http.StatusOK, "POST", "/v1/webhooks/import?dry_run=true", ts.globexAdmin, body)
			if !strings.Contains(string(r.body), `"status":"imported"`) {
				t.Fatalf("globex's import of orders: %s; want it imported as new, not acme's updated", r.body)
			}
		},
		"GET /v1/deliveries": func(t *testing.T) {
			if body := string(s.expect(http.StatusOK, "GET", "/v1/deliveries", ts.globexAdmin, "").body); strings.Contains(body, ts.delivery) {
				t.Fatalf("globex lists acme's delivery: %s", body)
			}
			if body := string(s.expect(http.StatusOK, "GET", "/v1/deliveries?event_id=ev-1", ts.globexAdmin, "").body); strings.Contains(body, ts.delivery) {
				t.Fatalf("globex lists acme's delivery by event: %s", body)
			}
			if body := string(s.expect(http.StatusOK, "GET", "/v1/deliveries", ts.acmeAdmin, "").body); !strings.Contains(body, ts.delivery) {
				t.Fatalf("acme does not list its delivery: %s", body)
			}
		},
		"GET /v1/deliveries/{id}":         notFound("GET", "/v1/deliveries/"+ts.delivery, ""),
		"POST /v1/deliveries/{id}/retry":  notFound("POST", "/v1/deliveries/"+ts.delivery+"/retry", ""),
		"POST /v1/deliveries/{id}/resend": notFound("POST", "/v1/deliveries/"+ts.delivery+"/resend", ""),

		"POST /v1/portal-links": func(t *testing.T) {
			// A link is of the token's own tenant; naming another is 404.
			s.refused(http.StatusNotFound, "not_found", "", "POST", "/v1/portal-links", ts.globexAdmin, "", api.TenantHeader, "acme")
			if got := s.expect(http.StatusCreated, "POST", "/v1/portal-links", ts.globexAdmin, "").object(t)["tenant"]; got != "globex" {
				t.Fatalf("globex's link is of tenant %v", got)
			}
		},
		"GET /v1/portal-links": func(t *testing.T) {
			id := s.expect(http.StatusCreated, "POST", "/v1/portal-links", ts.acmeAdmin, "").object(t)["id"].(string)
			if body := string(s.expect(http.StatusOK, "GET", "/v1/portal-links", ts.globexAdmin, "").body); strings.Contains(body, id) {
				t.Fatalf("globex lists acme's link: %s", body)
			}
			s.refused(http.StatusNotFound, "not_found", "", "GET", "/v1/portal-links", ts.globexAdmin, "", api.TenantHeader, "acme")
		},
		"DELETE /v1/portal-links": func(t *testing.T) {
			id := s.expect(http.StatusCreated, "POST", "/v1/portal-links", ts.acmeAdmin, "").object(t)["id"].(string)
			s.expect(http.StatusOK, "DELETE", "/v1/portal-links?all=true", ts.globexAdmin, "")
			s.refused(http.StatusNotFound, "not_found", "", "DELETE", "/v1/portal-links?all=true", ts.globexAdmin, "", api.TenantHeader, "acme")
			if body := string(s.expect(http.StatusOK, "GET", "/v1/portal-links", ts.acmeAdmin, "").body); !strings.Contains(body, id) {
				t.Fatalf("globex's revoke-all revoked acme's link: %s", body)
			}
		},
		"DELETE /v1/portal-links/{id}": func(t *testing.T) {
			id := s.expect(http.StatusCreated, "POST", "/v1/portal-links", ts.acmeAdmin, "").object(t)["id"].(string)
			notFound("DELETE", "/v1/portal-links/"+id, "")(t)
			s.expect(http.StatusNoContent, "DELETE", "/v1/portal-links/"+id, ts.acmeAdmin, "")
		},

		"GET /v1/tokens": func(t *testing.T) {
			// A tenant's admin lists its tenant's tokens, never another's.
			if body := string(s.expect(http.StatusOK, "GET", "/v1/tokens", ts.globexAdmin, "").body); strings.Contains(body, "acme-") || !strings.Contains(body, "globex-admin") {
				t.Fatalf("globex's tokens: %s", body)
			}
			s.refused(http.StatusNotFound, "not_found", "", "GET", "/v1/tokens", ts.globexAdmin, "", api.TenantHeader, "acme")
		},
		"POST /v1/tokens": func(t *testing.T) {
			// A token of another tenant, or of none, is not globex's to make.
			s.refused(http.StatusNotFound, "not_found", "", "POST", "/v1/tokens", ts.globexAdmin, `{"name": "into-acme", "scope": "admin", "tenant": "acme"}`)
			s.refused(http.StatusNotFound, "not_found", "", "POST", "/v1/tokens", ts.globexAdmin, `{"name": "into-acme"}`, api.TenantHeader, "acme")
			s.refused(http.StatusForbidden, "forbidden", "", "POST", "/v1/tokens", ts.globexAdmin, `{"name": "into-all", "operator": true}`)
			if o := s.expect(http.StatusCreated, "POST", "/v1/tokens", ts.globexAdmin, `{"name": "globex-bot"}`).object(t); o["tenant"] != "globex" || o["operator"] != false {
				t.Fatalf("globex's admin's token: %v", o)
			}
		},
		"DELETE /v1/tokens/{name}": func(t *testing.T) {
			notFound("DELETE", "/v1/tokens/acme-admin", "")(t)
			notFound("DELETE", "/v1/tokens/operator", "")(t)
			s.expect(http.StatusOK, "GET", "/v1/webhooks", ts.acmeAdmin, "")
		},

		"GET /v1/tenants":           operatorOnly("GET", "/v1/tenants", ""),
		"POST /v1/tenants":          operatorOnly("POST", "/v1/tenants", `{"name": "initech"}`),
		"GET /v1/tenants/{name}":    operatorOnly("GET", "/v1/tenants/acme", ""),
		"PATCH /v1/tenants/{name}":  operatorOnly("PATCH", "/v1/tenants/acme", `{"enabled": false}`),
		"DELETE /v1/tenants/{name}": operatorOnly("DELETE", "/v1/tenants/acme", ""),

		"GET /v1/openapi.json": noObject,
		"GET /healthz":         noObject,
		"GET /readyz":          noObject,
	}
	for _, rt := range api.New(api.Config{}).Routes() {
		key := rt.Method + " " + rt.Path
		check, ok := cases[key]
		if !ok {
			t.Errorf("route %s has no tenancy case in this test: add one saying how it answers another tenant's objects", key)
			continue
		}
		t.Run(key, check)
	}
	// Nothing of acme's was changed by globex.
	s.expect(http.StatusOK, "GET", "/v1/webhooks/orders", ts.acmeAdmin, "")
	s.expect(http.StatusOK, "GET", "/v1/deliveries/"+ts.delivery, ts.acmeAdmin, "")
}

// A tenant token's Homing-Tenant must name its own tenant; an operator
// token acts in the default tenant or the one it names, which must exist.
func TestTenantHeader(t *testing.T) {
	t.Parallel()
	ts := newTenants(t)
	s := ts.server
	s.refused(http.StatusNotFound, "not_found", "", "GET", "/v1/webhooks", ts.globexAdmin, "", api.TenantHeader, "acme")
	s.expect(http.StatusOK, "GET", "/v1/webhooks", ts.acmeAdmin, "", api.TenantHeader, "acme")
	if body := string(s.expect(http.StatusOK, "GET", "/v1/webhooks", s.admin, "").body); strings.Contains(body, "orders") {
		t.Fatalf("the operator token without Homing-Tenant lists acme's webhook: %s", body)
	}
	s.expect(http.StatusOK, "GET", "/v1/webhooks/orders", s.admin, "", api.TenantHeader, "acme")
	s.refused(http.StatusNotFound, "not_found", "", "GET", "/v1/webhooks", s.admin, "", api.TenantHeader, "nope")
	// An operator token may publish into any tenant by the body too.
	s.expect(http.StatusAccepted, "POST", "/v1/events", s.admin, eventBody("ev-op", "globex"))
	var n int64
	if err := s.db.Model(&models.OutboxEvent{}).Where("event_id = ? AND tenant = ?", "ev-op", "globex").Count(&n).Error; err != nil || n != 1 {
		t.Fatalf("ev-op in globex's outbox: %d (%v)", n, err)
	}
	// A disabled tenant's events are refused.
	s.expect(http.StatusOK, "PATCH", "/v1/tenants/globex", s.admin, `{"enabled": false}`)
	e := s.refused(http.StatusConflict, "tenant_disabled", "", "POST", "/v1/events", ts.globexPublish, eventBody("ev-off", ""))
	if !strings.Contains(e.Message, "globex") {
		t.Errorf("refusal %q does not name the tenant", e.Message)
	}
	// Tenants: operator only; default cannot be deleted; one with webhooks
	// only with force.
	s.expect(http.StatusCreated, "POST", "/v1/tenants", s.admin, `{"name": "initech", "max_webhooks": 3}`)
	s.refused(http.StatusConflict, "conflict", "", "DELETE", "/v1/tenants/acme", s.admin, "")
	s.refused(http.StatusUnprocessableEntity, "invalid_request", "name", "DELETE", "/v1/tenants/default", s.admin, "")
	s.expect(http.StatusNoContent, "DELETE", "/v1/tenants/acme?force=true", s.admin, "")
	s.refused(http.StatusUnauthorized, "unauthorized", "", "GET", "/v1/webhooks", ts.acmeAdmin, "")
	var left int64
	if err := s.db.Model(&models.Webhook{}).Where("tenant = ?", "acme").Count(&left).Error; err != nil || left != 0 {
		t.Fatalf("acme's webhooks left after delete --force: %d (%v)", left, err)
	}
}

// A tenant's theme is set over the API as on the command line, each value
// checked with a message naming its field; "" unsets one.
func TestTenantTheme(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	created := s.expect(http.StatusCreated, "POST", "/v1/tenants", s.admin, `{"name": "acme", "product_name": " Acme Hooks ",
		"logo_url": "https://cdn.acme.example/logo.svg", "accent_color": "#0A7D5A", "support_url": "http://127.0.0.1:8080/help"}`).object(t)
	if created["product_name"] != "Acme Hooks" || created["logo_url"] != "https://cdn.acme.example/logo.svg" || created["accent_color"] != "#0a7d5a" || created["support_url"] != "http://127.0.0.1:8080/help" {
		t.Fatalf("the themed tenant: %v", created)
	}
	for _, c := range []struct{ body, field, msg string }{
		{`{"accent_color": "teal"}`, "accent_color", `accent_color "teal" is not a colour #rrggbb`},
		{`{"accent_color": "#0a7d5"}`, "accent_color", "#rrggbb"},
		{`{"logo_url": "http://cdn.acme.example/logo.svg"}`, "logo_url", "must be https (http only on a loopback address"},
		{`{"logo_url": "javascript:alert(1)"}`, "logo_url", "is not an absolute URL"},
		{`{"logo_url": "https://a.example;img-src *"}`, "logo_url", "is not an absolute URL"},
		{`{"support_url": "https://user:pw@acme.example/help"}`, "support_url", "user name or password"},
		{`{"support_url": "https://acme.example/` + strings.Repeat("a", 2048) + `"}`, "support_url", "longer than 2048 bytes"},
		{`{"product_name": "` + strings.Repeat("x", 61) + `"}`, "product_name", "at most 60 printable characters"},
		{`{"product_name": "Acme\u0007"}`, "product_name", "printable"},
	} {
		if e := s.refused(http.StatusUnprocessableEntity, "invalid_request", c.field, "PATCH", "/v1/tenants/acme", s.admin, c.body); !strings.Contains(e.Message, c.msg) {
			t.Errorf("PATCH %s: %q, want %q", c.body, e.Message, c.msg)
		}
	}
	got := s.expect(http.StatusOK, "PATCH", "/v1/tenants/acme", s.admin, `{"logo_url": "", "product_name": "Acme Webhooks"}`).object(t)
	if got["logo_url"] != "" || got["product_name"] != "Acme Webhooks" || got["accent_color"] != "#0a7d5a" {
		t.Fatalf("after unsetting the logo: %v", got)
	}
}
