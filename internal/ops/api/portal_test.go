package api_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/homingdev/homing/internal/lib/clock"
	"github.com/homingdev/homing/internal/ops/api"
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

// GET /v1/portal-links lists the request's tenant's live links (never their
// secret URL), and DELETE /v1/portal-links?all=true revokes every one of
// them, ending their sessions; another tenant's links are neither listed
// nor revoked, and an operator token names the tenant in Homing-Tenant.
func TestListAndRevokeAllPortalLinks(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	clk := clock.NewStub(now)
	ts := newTenants(t, func(o *options) { o.portalClock = clk })
	s := ts.server
	made := map[string]string{} // id: url
	link := func(tok, ttl string, header ...string) string {
		t.Helper()
		o := s.expect(http.StatusCreated, "POST", "/v1/portal-links", tok, `{"ttl": "`+ttl+`"}`, header...).object(t)
		made[o["id"].(string)] = o["url"].(string)
		return o["id"].(string)
	}
	short, long := link(ts.acmeAdmin, "1m", ""), link(ts.acmeAdmin, "2h")
	byOperator := link(s.admin, "3h", api.TenantHeader, "acme")
	revoked := link(ts.acmeAdmin, "1h")
	s.expect(http.StatusNoContent, "DELETE", "/v1/portal-links/"+revoked, ts.acmeAdmin, "")
	globex := link(ts.globexAdmin, "1h")
	clk.Advance(2 * time.Minute) // short has expired
	list := func(tok string, header ...string) []map[string]any {
		t.Helper()
		r := s.expect(http.StatusOK, "GET", "/v1/portal-links", tok, "", header...)
		for _, u := range made {
			if strings.Contains(string(r.body), u[strings.Index(u, "link=")+5:]) {
				t.Fatalf("the list shows a link's secret: %s", r.body)
			}
		}
		var out []map[string]any
		for _, o := range r.object(t)["portal_links"].([]any) {
			out = append(out, o.(map[string]any))
		}
		return out
	}
	got := list(ts.acmeAdmin)
	if len(got) != 2 || got[0]["id"] != long || got[1]["id"] != byOperator || got[0]["created_by"] != "acme-admin" || got[1]["created_by"] != "operator" ||
		got[0]["tenant"] != "acme" || strings.Join(keys(got[0]), ",") != "created_at,created_by,expires_at,id,tenant" {
		t.Fatalf("acme's live links: %v; want %s (acme-admin) and %s (operator), not the expired %s, the revoked %s or globex's %s, with id, tenant, created_at, expires_at and created_by only",
			got, long, byOperator, short, revoked, globex)
	}
	if got := list(s.admin, api.TenantHeader, "acme"); len(got) != 2 {
		t.Errorf("the operator's list of acme's links: %v", got)
	}
	if got := list(ts.globexAdmin); len(got) != 1 || got[0]["id"] != globex {
		t.Errorf("globex's links: %v", got)
	}
	s.refused(http.StatusForbidden, "forbidden", "", "GET", "/v1/portal-links", ts.acmePublish, "")
	s.refused(http.StatusUnprocessableEntity, "invalid_request", "all", "DELETE", "/v1/portal-links", ts.acmeAdmin, "")
	if n := s.expect(http.StatusOK, "DELETE", "/v1/portal-links?all=true", ts.acmeAdmin, "").object(t)["revoked"]; n != float64(2) {
		t.Errorf("revoke all of acme's: revoked %v, want 2", n)
	}
	if got := list(ts.acmeAdmin); len(got) != 0 {
		t.Errorf("acme's links after revoking all: %v", got)
	}
	if got := list(ts.globexAdmin); len(got) != 1 {
		t.Errorf("globex's links after acme revoked all of its: %v", got)
	}
}
