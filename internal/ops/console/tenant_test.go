package console_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/homingdev/homing/internal/engine/tenant"
	"github.com/homingdev/homing/internal/ops/console"
	"github.com/homingdev/homing/internal/ops/token"
)

// A session is scoped by its token's tenant: signed in with a tenant's
// admin token, the console shows none of the default tenant's webhooks or
// deliveries, and answers another tenant's with 404; the operator's
// session still sees them.
func TestSessionSeesOnlyItsTenant(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	ctx := context.Background()
	if _, err := tenant.New(s.db, nil, nil).Create(ctx, "acme", tenant.Patch{}); err != nil {
		t.Fatal(err)
	}
	_, plain, err := token.New(s.db, nil, nil).Create(ctx, "acme-admin", token.ScopeAdmin, "acme")
	if err != nil {
		t.Fatal(err)
	}
	acme := s.login(plain)
	for _, path := range []string{"/console/", "/console/webhooks", "/console/deliveries"} {
		res, body := s.do("GET", path, nil, acme, nil)
		if res.StatusCode != http.StatusOK || strings.Contains(body, "orders") || strings.Contains(body, "d-1") {
			t.Errorf("acme's %s: %d, shows the default tenant's webhook or delivery: %v", path, res.StatusCode, strings.Contains(body, "orders"))
		}
	}
	for _, path := range []string{"/console/webhooks/orders", "/console/deliveries/d-1"} {
		if res, _ := s.do("GET", path, nil, acme, nil); res.StatusCode != http.StatusNotFound {
			t.Errorf("acme's %s: %d, want 404", path, res.StatusCode)
		}
	}
	op := s.login(s.admin)
	if res, body := s.do("GET", "/console/webhooks", nil, op, nil); res.StatusCode != http.StatusOK || !strings.Contains(body, "orders") {
		t.Errorf("the operator's webhooks page: %d, without orders", res.StatusCode)
	}
}

// Sessions names whom serve charges a page request to (api.Admit): an
// operator's session the budget alone (""), a tenant token's session and
// a portal session their tenant, and a request without a valid admin
// session (none, a publish token's, an unknown value, a portal path
// without its cookie) no one, so that its body is held to a sign-in
// form's.
func TestSessionsNameWhomAPageIsChargedTo(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	s.withAcme()
	ctx := context.Background()
	_, acmeAdmin, err := token.New(s.db, nil, nil).Create(ctx, "acme-admin", token.ScopeAdmin, "acme")
	if err != nil {
		t.Fatal(err)
	}
	link, err := s.links.Create(ctx, "acme", 0, token.Token{Name: "test"})
	if err != nil {
		t.Fatal(err)
	}
	portalCk := s.open(link.Token)
	for _, c := range []struct {
		name   string
		path   string
		cookie *http.Cookie
		tenant string
		ok     bool
	}{
		{"none", "/console/webhooks", nil, "", false},
		{"operator", "/console/webhooks", s.login(s.admin), "", true},
		{"tenant admin", "/console/webhooks", s.login(acmeAdmin), "acme", true},
		{"publish token", "/console/webhooks", &http.Cookie{Name: console.CookieName, Value: s.publish}, "", false},
		{"unknown token", "/console/webhooks", &http.Cookie{Name: console.CookieName, Value: "hmg_nothing"}, "", false},
		{"portal", "/portal/webhooks", portalCk, "acme", true},
		{"portal open without a session", "/portal/open", nil, "", false},
		{"console cookie on a portal path", "/portal/webhooks", s.login(s.admin), "", false},
	} {
		r := httptest.NewRequest("POST", c.path, nil)
		if c.cookie != nil {
			r.AddCookie(&http.Cookie{Name: c.cookie.Name, Value: c.cookie.Value})
		}
		if tenant, ok := s.console.Sessions(r); tenant != c.tenant || ok != c.ok {
			t.Errorf("%s: Sessions = %q, %v; want %q, %v", c.name, tenant, ok, c.tenant, c.ok)
		}
	}
}
