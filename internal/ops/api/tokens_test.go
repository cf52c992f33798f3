package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/homingdev/homing/internal/ops/api"
)

// tokenNames are the names of a GET /v1/tokens answer, which must carry no
// token itself: each entry has exactly the listed fields.
func tokenNames(t *testing.T, r reply) []string {
	t.Helper()
	var names []string
	for _, e := range r.object(t)["tokens"].([]any) {
		o := e.(map[string]any)
		if got := strings.Join(keys(o), ","); got != "created_at,last_used_at,name,operator,scope,tenant" {
			t.Fatalf("a listed token has the fields %s: %v", got, o)
		}
		names = append(names, o["name"].(string))
	}
	if strings.Contains(string(r.body), "hmg_") {
		t.Fatalf("GET /v1/tokens shows a token: %s", r.body)
	}
	return names
}

// POST /v1/tokens makes a token as homing token create does and shows it
// once; GET /v1/tokens lists tokens without them; DELETE /v1/tokens/{name}
// revokes one, which is refused from then on. An operator token manages
// every token and alone makes operator tokens or another tenant's; a tenant
// admin manages its own tenant's tokens only and cannot escalate.
func TestTokensOverTheAPI(t *testing.T) {
	t.Parallel()
	ts := newTenants(t)
	s := ts.server

	// The operator makes acme an admin token: shown once, working at once.
	made := s.expect(http.StatusCreated, "POST", "/v1/tokens", s.admin, `{"name": "cust-admin", "scope": "admin", "tenant": "acme"}`).object(t)
	plain, _ := made["token"].(string)
	if !strings.HasPrefix(plain, "hmg_") || made["tenant"] != "acme" || made["operator"] != false || made["scope"] != "admin" ||
		strings.Join(keys(made), ",") != "created_at,last_used_at,name,operator,scope,tenant,token" {
		t.Fatalf("POST /v1/tokens: %v", made)
	}
	if body := string(s.expect(http.StatusOK, "GET", "/v1/webhooks", plain, "").body); !strings.Contains(body, `"orders"`) {
		t.Fatalf("the new acme token does not see acme's webhook: %s", body)
	}
	if names := tokenNames(t, s.expect(http.StatusOK, "GET", "/v1/tokens", s.admin, "")); !strings.Contains(strings.Join(names, ","), "cust-admin") {
		t.Fatalf("the operator's list: %v", names)
	}

	// Without tenant, a token of the request's tenant: an operator's
	// request without Homing-Tenant acts in default, and gets a default
	// token, never an operator one; operator: true asks for that.
	if o := s.expect(http.StatusCreated, "POST", "/v1/tokens", s.admin, `{"name": "default-producer"}`).object(t); o["tenant"] != "default" || o["operator"] != false || o["scope"] != "publish" {
		t.Fatalf("the operator's token without tenant: %v", o)
	}
	if o := s.expect(http.StatusCreated, "POST", "/v1/tokens", s.admin, `{"name": "ops-2", "scope": "admin", "operator": true}`).object(t); o["operator"] != true {
		t.Fatalf("operator: true: %v", o)
	}
	if o := s.expect(http.StatusCreated, "POST", "/v1/tokens", s.admin, `{"name": "globex-bot"}`, api.TenantHeader, "globex").object(t); o["tenant"] != "globex" {
		t.Fatalf("the operator's token with Homing-Tenant globex: %v", o)
	}
	s.refused(http.StatusUnprocessableEntity, "invalid_request", "operator", "POST", "/v1/tokens", s.admin, `{"name": "x", "operator": true, "tenant": "acme"}`)
	s.refused(http.StatusUnprocessableEntity, "invalid_request", "operator", "POST", "/v1/tokens", s.admin, `{"name": "x", "operator": true}`, api.TenantHeader, "acme")

	// The service's checks and messages, each naming its field.
	for _, c := range []struct{ body, field, msg string }{
		{`{"name": ""}`, "name", `name "" must be 1 to 140 printable characters`},
		{`{"name": "x", "scope": "root"}`, "scope", `scope "root" is not one of publish, admin`},
		{`{"name": "x", "tenant": "nope"}`, "tenant", `tenant "nope" does not exist (see homing tenant list)`},
	} {
		if e := s.refused(http.StatusUnprocessableEntity, "invalid_request", c.field, "POST", "/v1/tokens", s.admin, c.body); !strings.Contains(e.Message, c.msg) {
			t.Errorf("POST /v1/tokens %s: %q, want %q", c.body, e.Message, c.msg)
		}
	}
	s.refused(http.StatusConflict, "conflict", "", "POST", "/v1/tokens", s.admin, `{"name": "cust-admin"}`)
	s.refused(http.StatusBadRequest, "invalid_json", "secret", "POST", "/v1/tokens", s.admin, `{"name": "x", "secret": "y"}`)

	// A tenant admin: its own tenant's tokens, any scope of it, and no
	// further.
	if o := s.expect(http.StatusCreated, "POST", "/v1/tokens", ts.acmeAdmin, `{"name": "acme-bot"}`).object(t); o["tenant"] != "acme" || o["operator"] != false {
		t.Fatalf("acme's admin's token: %v", o)
	}
	s.expect(http.StatusCreated, "POST", "/v1/tokens", ts.acmeAdmin, `{"name": "acme-admin-2", "scope": "admin", "tenant": "acme"}`)
	s.refused(http.StatusNotFound, "not_found", "", "POST", "/v1/tokens", ts.acmeAdmin, `{"name": "in-globex", "tenant": "globex"}`)
	s.refused(http.StatusNotFound, "not_found", "", "POST", "/v1/tokens", ts.acmeAdmin, `{"name": "in-nope", "tenant": "nope"}`)
	s.refused(http.StatusForbidden, "forbidden", "", "POST", "/v1/tokens", ts.acmeAdmin, `{"name": "root", "scope": "admin", "operator": true}`)
	for _, refused := range []string{"in-globex", "in-nope", "root"} {
		if names := tokenNames(t, s.expect(http.StatusOK, "GET", "/v1/tokens", s.admin, "")); strings.Contains(","+strings.Join(names, ",")+",", ","+refused+",") {
			t.Fatalf("a refused token %q was made: %v", refused, names)
		}
	}
	names := strings.Join(tokenNames(t, s.expect(http.StatusOK, "GET", "/v1/tokens", ts.acmeAdmin, "")), ",")
	if names != "acme-admin,acme-admin-2,acme-bot,acme-publish,cust-admin" {
		t.Fatalf("acme's admin lists %s; want acme's tokens only, no operator's, no other tenant's", names)
	}
	// Publish tokens manage nothing.
	s.refused(http.StatusForbidden, "forbidden", "", "GET", "/v1/tokens", ts.acmePublish, "")
	s.refused(http.StatusForbidden, "forbidden", "", "POST", "/v1/tokens", ts.acmePublish, `{"name": "p"}`)
	s.refused(http.StatusForbidden, "forbidden", "", "DELETE", "/v1/tokens/acme-bot", ts.acmePublish, "")

	// Revoking: another tenant's or an operator's token is not acme's to
	// revoke; its own is, and is refused from then on, with the portal
	// links it made.
	s.refused(http.StatusNotFound, "not_found", "", "DELETE", "/v1/tokens/globex-admin", ts.acmeAdmin, "")
	s.refused(http.StatusNotFound, "not_found", "", "DELETE", "/v1/tokens/operator", ts.acmeAdmin, "")
	s.refused(http.StatusNotFound, "not_found", "", "DELETE", "/v1/tokens/default-producer", ts.acmeAdmin, "")
	s.expect(http.StatusOK, "GET", "/v1/webhooks", ts.globexAdmin, "")
	link := s.expect(http.StatusCreated, "POST", "/v1/portal-links", plain, "").object(t)["id"].(string)
	s.expect(http.StatusNoContent, "DELETE", "/v1/tokens/cust-admin", ts.acmeAdmin, "")
	s.refused(http.StatusUnauthorized, "unauthorized", "", "GET", "/v1/webhooks", plain, "")
	if body := string(s.expect(http.StatusOK, "GET", "/v1/portal-links", ts.acmeAdmin, "").body); strings.Contains(body, link) {
		t.Fatalf("the revoked token's portal link is still live: %s", body)
	}
	s.refused(http.StatusNotFound, "not_found", "", "DELETE", "/v1/tokens/cust-admin", ts.acmeAdmin, "")
	// The operator revokes any token.
	s.expect(http.StatusNoContent, "DELETE", "/v1/tokens/globex-bot", s.admin, "")
	if names := strings.Join(tokenNames(t, s.expect(http.StatusOK, "GET", "/v1/tokens", s.admin, "", api.TenantHeader, "globex")), ","); names != "globex-admin,globex-publish" {
		t.Fatalf("globex's tokens, listed by the operator with Homing-Tenant: %s", names)
	}
	// With Homing-Tenant, an operator's request manages that tenant's
	// tokens only.
	s.refused(http.StatusNotFound, "not_found", "", "DELETE", "/v1/tokens/acme-bot", s.admin, "", api.TenantHeader, "globex")
	s.expect(http.StatusNoContent, "DELETE", "/v1/tokens/acme-bot", s.admin, "", api.TenantHeader, "acme")
}
