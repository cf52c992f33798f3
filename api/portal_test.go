package api_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/homingdev/homing/api"
	"github.com/homingdev/homing/clock"
)

// POST /v1/portal-links answers a link into the request's tenant's portal:
// 1 h by default, the ttl asked for within 24 h, refused beyond; an operator
// token names the tenant in Homing-Tenant.
func TestPortalLinks(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	ts := newTenants(t, func(o *options) { o.portalClock = clock.NewStub(now) })
	s := ts.server
	// The links' clock stands still: an expiry is exactly now + ttl.
	expiresIn := func(o map[string]any) time.Duration {
		t.Helper()
		at, err := time.Parse(time.RFC3339, o["expires_at"].(string))
		if err != nil {
			t.Fatalf("expires_at %v: %v", o["expires_at"], err)
		}
		return at.Sub(now)
	}
	o := s.expect(http.StatusCreated, "POST", "/v1/portal-links", ts.acmeAdmin, "").object(t)
	if d := expiresIn(o); d != time.Hour {
		t.Errorf("default link expires in %s, want 1h", d)
	}
	url, _ := o["url"].(string)
	if o["tenant"] != "acme" || !strings.HasPrefix(url, s.srv.URL+api.PortalOpenPath+"?link=v1.acme.") {
		t.Errorf("acme's link: %v", o)
	}
	o = s.expect(http.StatusCreated, "POST", "/v1/portal-links", ts.acmeAdmin, `{"ttl": "2h"}`).object(t)
	if d := expiresIn(o); d != 2*time.Hour {
		t.Errorf("ttl 2h link expires in %s", d)
	}
	s.refused(http.StatusUnprocessableEntity, "invalid_request", "ttl", "POST", "/v1/portal-links", ts.acmeAdmin, `{"ttl": "25h"}`)
	s.refused(http.StatusUnprocessableEntity, "invalid_request", "ttl", "POST", "/v1/portal-links", ts.acmeAdmin, `{"ttl": "soon"}`)
	s.refused(http.StatusForbidden, "forbidden", "", "POST", "/v1/portal-links", ts.acmePublish, "")
	if o := s.expect(http.StatusCreated, "POST", "/v1/portal-links", s.admin, "", api.TenantHeader, "globex").object(t); o["tenant"] != "globex" {
		t.Errorf("operator's link with Homing-Tenant globex: %v", o)
	}
	if o := s.expect(http.StatusCreated, "POST", "/v1/portal-links", s.admin, "").object(t); o["tenant"] != "default" {
		t.Errorf("operator's link without Homing-Tenant: %v", o)
	}
	s.refused(http.StatusNotFound, "not_found", "", "DELETE", "/v1/portal-links/nope", ts.acmeAdmin, "")
}
