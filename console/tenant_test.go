package console_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/homingdev/homing/tenant"
	"github.com/homingdev/homing/token"
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
