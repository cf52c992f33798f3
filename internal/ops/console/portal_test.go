package console_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/homingdev/homing/internal/engine/tenant"
	"github.com/homingdev/homing/internal/engine/webhook"
	"github.com/homingdev/homing/internal/lib/clock"
	"github.com/homingdev/homing/internal/ops/console"
	"github.com/homingdev/homing/internal/ops/portal"
	"github.com/homingdev/homing/internal/ops/token"
	"github.com/homingdev/homing/models"
)

// withAcme adds the tenant acme, embeddable from https://acme.example, with
// a webhook "acme-orders" and a Failed delivery "a-1".
func (s *site) withAcme() {
	s.t.Helper()
	ctx := context.Background()
	origins := []string{"https://acme.example", "javascript:alert(1)", "https://x.example; script-src *"}
	if _, err := tenant.New(s.db, nil, nil).Create(ctx, "acme", tenant.Patch{PortalOrigins: &origins}); err != nil {
		s.t.Fatal(err)
	}
	w, err := s.hooks.Create(ctx, "acme", webhook.Input{Name: ptr("acme-orders"), DocType: ptr("Sales Order"), Event: ptr("on_submit"), URL: ptr("https://acme.example/hook")})
	if err != nil {
		s.t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	next := now.Add(time.Hour)
	if err := s.db.Create(&models.Delivery{ID: "a-1", Tenant: "acme", WebhookID: w.ID, WebhookName: "acme-orders", EventID: "ev-a", DocType: "Sales Order",
		DocName: "SO-A", DocEvent: "on_submit", Method: "POST", URL: "https://acme.example/hook", Payload: []byte(`{"name":"SO-A"}`),
		Status: models.StatusFailed, Attempts: 1, MaxRetries: 3, NextRetry: &next, LastError: "HTTP 500",
		CreatedAt: now.Add(-time.Minute), UpdatedAt: now}).Error; err != nil {
		s.t.Fatal(err)
	}
	code := 500
	if err := s.db.Create(&models.Attempt{DeliveryID: "a-1", Tenant: "acme", Attempt: 1, At: now.Add(-30 * time.Second), Method: "POST",
		URL: "https://acme.example/hook", StatusCode: &code, Class: "5xx", Error: "HTTP 500"}).Error; err != nil {
		s.t.Fatal(err)
	}
}

// open opens a portal link and returns the portal cookie it set.
func (s *site) open(tok string) *http.Cookie {
	s.t.Helper()
	res, body := s.do("GET", "/portal/open?link="+url.QueryEscape(tok), nil, nil, nil)
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/portal/deliveries" {
		s.t.Fatalf("open link: %d to %q: %s", res.StatusCode, res.Header.Get("Location"), body)
	}
	for _, c := range res.Cookies() {
		if c.Name == console.PortalCookieName {
			// The test's server is on 127.0.0.1: a loopback host, where a
			// browser keeps a Secure cookie without TLS.
			if !c.HttpOnly || c.SameSite != http.SameSiteNoneMode || !c.Secure || !c.Partitioned || c.Path != "/portal/" {
				s.t.Errorf("portal cookie %+v: want HttpOnly, SameSite=None, Secure, Partitioned, path /portal/", c)
			}
			return c
		}
	}
	s.t.Fatal("the link set no portal cookie")
	return nil
}

// A portal link opens its tenant's pages and nothing of another tenant's;
// the pages may be framed by the tenant's portal_origins only; a retry from
// the portal makes the delivery due; a tampered, expired or revoked link,
// and the sessions of a revoked one, are refused with a page that says so.
func TestPortalShowsOnlyItsTenant(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	s.withAcme()
	ctx := context.Background()
	link, err := s.links.Create(ctx, "acme", 0, token.Token{Name: "test"})
	if err != nil {
		t.Fatal(err)
	}
	ck := s.open(link.Token)
	res, body := s.do("GET", "/portal/deliveries", nil, ck, nil)
	if res.StatusCode != http.StatusOK || !strings.Contains(body, "a-1") || strings.Contains(body, "d-1") || strings.Contains(body, `"/console/deliveries`) {
		t.Fatalf("portal deliveries: %d, a-1 %v, d-1 %v: %s", res.StatusCode, strings.Contains(body, "a-1"), strings.Contains(body, "d-1"), body)
	}
	if !strings.Contains(body, `data-webhook="acme-orders"`) {
		t.Errorf("portal deliveries page has no 24 h chart of acme-orders")
	}
	if csp := res.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "frame-ancestors https://acme.example;") || res.Header.Get("X-Frame-Options") != "" {
		t.Errorf("portal CSP %q, X-Frame-Options %q: want frame-ancestors of acme's origins only and no X-Frame-Options", csp, res.Header.Get("X-Frame-Options"))
	}
	for _, path := range []string{"/portal/", "/portal/webhooks"} {
		if res, body := s.do("GET", path, nil, ck, nil); res.StatusCode != http.StatusOK || strings.Contains(body, `"orders"`) || strings.Contains(body, ">orders<") || !strings.Contains(body, "acme-orders") {
			t.Errorf("portal %s: %d, shows default's orders or not acme-orders: %s", path, res.StatusCode, body)
		}
	}
	for _, path := range []string{"/portal/deliveries/d-1", "/portal/webhooks/orders"} {
		if res, _ := s.do("GET", path, nil, ck, nil); res.StatusCode != http.StatusNotFound {
			t.Errorf("portal %s: %d, want 404", path, res.StatusCode)
		}
	}
	csrf := s.csrf(ck, "/portal/deliveries/a-1")
	if res, _ := s.do("POST", "/portal/deliveries/d-1/retry", url.Values{"csrf": {csrf}}, ck, nil); res.StatusCode != http.StatusNotFound {
		t.Errorf("portal retry of default's d-1: %d, want 404", res.StatusCode)
	}
	res, _ = s.do("POST", "/portal/deliveries/a-1/retry", url.Values{"csrf": {csrf}}, ck, nil)
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/portal/deliveries/a-1?notice=retried" {
		t.Fatalf("portal retry: %d to %q", res.StatusCode, res.Header.Get("Location"))
	}
	var d models.Delivery
	if err := s.db.Take(&d, "id = ?", "a-1").Error; err != nil || d.Status != models.StatusFailed || d.NextRetry == nil || d.NextRetry.After(time.Now()) {
		t.Fatalf("a-1 after the portal's retry: %s due %v (%v), want Failed and due", d.Status, d.NextRetry, err)
	}
	// The portal cookie is no console session.
	if res, _ := s.do("GET", "/console/deliveries", nil, &http.Cookie{Name: console.CookieName, Value: ck.Value}, nil); res.StatusCode != http.StatusSeeOther {
		t.Errorf("console with the portal's token: %d, want the login redirect", res.StatusCode)
	}
	// Refusals.
	// A link that is not Homing's may be framed by no one; an expired or
	// revoked one's page is its tenant's, framed by its portal_origins
	// (an embedded portal says why it ended, not "refused to connect").
	refused := func(tok string, status int, says, frameAncestors string) {
		t.Helper()
		res, body := s.do("GET", "/portal/open?link="+url.QueryEscape(tok), nil, nil, nil)
		if res.StatusCode != status || !strings.Contains(body, says) {
			t.Errorf("link %.20s…: %d, want %d saying %q: %s", tok, res.StatusCode, status, says, body)
		}
		if !strings.Contains(res.Header.Get("Content-Security-Policy"), "frame-ancestors "+frameAncestors+";") ||
			(frameAncestors == "'none'") != (res.Header.Get("X-Frame-Options") == "DENY") {
			t.Errorf("refusal of link %.20s…: %v, want frame-ancestors %s", tok, res.Header, frameAncestors)
		}
	}
	refused(strings.Replace(link.Token, "v1.acme.", "v1.default.", 1), http.StatusForbidden, "not valid", "'none'")
	old, err := portal.New(s.db, portalKey, clock.NewStub(time.Now().Add(-2*time.Hour))).Create(ctx, "acme", time.Hour, token.Token{Name: "test"})
	if err != nil {
		t.Fatal(err)
	}
	refused(old.Token, http.StatusGone, "expired", "https://acme.example")
	if err := s.links.Revoke(ctx, "acme", link.ID); err != nil {
		t.Fatal(err)
	}
	refused(link.Token, http.StatusGone, "revoked", "https://acme.example")
	if res, body := s.do("GET", "/portal/deliveries", nil, ck, nil); res.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "ended") ||
		!strings.Contains(res.Header.Get("Content-Security-Policy"), "frame-ancestors https://acme.example;") {
		t.Errorf("revoked link's session: %d %v: %s", res.StatusCode, res.Header, body)
	}
	// Without any cookie, or with one that is not Homing's, no one.
	for _, c := range []*http.Cookie{nil, {Name: console.PortalCookieName, Value: "v1.acme.x.1.y"}} {
		if res, _ := s.do("GET", "/portal/deliveries", nil, c, nil); res.StatusCode != http.StatusUnauthorized || res.Header.Get("X-Frame-Options") != "DENY" ||
			!strings.Contains(res.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'") {
			t.Errorf("a portal page without a session (cookie %v): %d %v", c, res.StatusCode, res.Header)
		}
	}
	// A tenant without portal_origins may be framed by no one.
	def, err := s.links.Create(ctx, "default", 0, token.Token{Name: "test"})
	if err != nil {
		t.Fatal(err)
	}
	res, _ = s.do("GET", "/portal/", nil, s.open(def.Token), nil)
	if res.Header.Get("X-Frame-Options") != "DENY" || !strings.Contains(res.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'") {
		t.Errorf("default's portal may be framed: %v", res.Header)
	}
}

// An operator's console session chooses the tenant it looks at (every
// page's tenant filter) and sees every tenant on the overview; a tenant
// token's session cannot choose.
func TestOperatorChoosesATenant(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	s.withAcme()
	op := s.login(s.admin)
	res, body := s.do("GET", "/console/", nil, op, nil)
	if res.StatusCode != http.StatusOK || !strings.Contains(body, `data-tenant="acme"`) || !strings.Contains(body, `id="tenant-filter"`) || !strings.Contains(body, `data-webhook="orders"`) {
		t.Fatalf("operator overview: %d, without the tenants, the filter or the chart: %s", res.StatusCode, body)
	}
	res, _ = s.do("POST", "/console/tenant", url.Values{"csrf": {s.csrf(op, "/console/")}, "tenant": {"acme"}}, op, nil)
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("choose acme: %d", res.StatusCode)
	}
	var chosen *http.Cookie
	for _, c := range res.Cookies() {
		if c.Name == console.TenantCookieName {
			chosen = c
		}
	}
	if chosen == nil {
		t.Fatal("choosing a tenant set no cookie")
	}
	req := func(path string) (*http.Response, string) {
		r, _ := http.NewRequest("GET", s.srv.URL+path, nil)
		r.AddCookie(op)
		r.AddCookie(chosen)
		res, err := http.DefaultTransport.RoundTrip(r)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var b strings.Builder
		b2, _ := io.ReadAll(res.Body)
		b.Write(b2)
		return res, b.String()
	}
	if res, body := req("/console/webhooks"); res.StatusCode != http.StatusOK || !strings.Contains(body, "acme-orders") || strings.Contains(body, ">orders<") {
		t.Errorf("operator's webhooks in acme: %d: %s", res.StatusCode, body)
	}
	if res, _ := req("/console/deliveries/a-1"); res.StatusCode != http.StatusOK {
		t.Errorf("operator's a-1 in acme: %d", res.StatusCode)
	}
	_, plain, err := token.New(s.db, nil, nil).Create(context.Background(), "acme-admin", token.ScopeAdmin, "acme")
	if err != nil {
		t.Fatal(err)
	}
	acme := s.login(plain)
	if res, body := s.do("GET", "/console/", nil, acme, nil); strings.Contains(body, `id="tenant-filter"`) || strings.Contains(body, `id="tenants"`) {
		t.Errorf("a tenant token's overview (%d) shows the tenant filter or the tenants", res.StatusCode)
	}
	if res, _ := s.do("POST", "/console/tenant", url.Values{"csrf": {s.csrf(acme, "/console/")}, "tenant": {"default"}}, acme, nil); res.StatusCode != http.StatusForbidden {
		t.Errorf("a tenant token's session chose a tenant: %d", res.StatusCode)
	}
}

// portalCookieOf is the portal cookie res sets, or nil.
func portalCookieOf(res *http.Response) *http.Cookie {
	for _, c := range res.Cookies() {
		if c.Name == console.PortalCookieName {
			return c
		}
	}
	return nil
}

// A link of another tenant, opened while a portal session is signed in,
// never replaces the session by itself (finding 5 of issue 35: a page of
// another site would sign its victim into the attacker's portal): it asks,
// on a page no one may frame, and switches only on a POST from that page
// with the session's CSRF value. A link with no session, or of the
// session's own tenant, opens as before.
func TestPortalLinkOfAnotherTenantAsksFirst(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	s.withAcme()
	ctx := context.Background()
	mint := func(tenant string) string {
		t.Helper()
		l, err := s.links.Create(ctx, tenant, 0, token.Token{Name: "test"})
		if err != nil {
			t.Fatal(err)
		}
		return l.Token
	}
	acme, other := s.open(mint("acme")), mint("default")
	crossSite := map[string]string{"Sec-Fetch-Site": "cross-site"}
	res, body := s.do("GET", "/portal/open?link="+url.QueryEscape(other), nil, acme, crossSite)
	if res.StatusCode != http.StatusOK || portalCookieOf(res) != nil ||
		!strings.Contains(body, `You are signed in to the portal of tenant <b id="switch-from">acme</b>`) ||
		!strings.Contains(body, `This link opens the portal of tenant <b id="switch-to">default</b>`) {
		t.Fatalf("another tenant's link over acme's session: %d, cookie %v:\n%s", res.StatusCode, portalCookieOf(res), body)
	}
	if res.Header.Get("X-Frame-Options") != "DENY" || !strings.Contains(res.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'") {
		t.Errorf("the confirmation may be framed (clickjacking its Switch button): %v", res.Header)
	}
	if p := res.Header.Get("Referrer-Policy"); p != "same-origin" {
		t.Errorf("the confirmation's Referrer-Policy %q: want same-origin, which keeps the link in Homing and lets its POST carry its Origin", p)
	}
	if res, _ := s.do("GET", "/portal/deliveries", nil, acme, nil); res.StatusCode != http.StatusOK {
		t.Fatalf("acme's session after the confirmation page: %d", res.StatusCode)
	}
	csrf := csrfInput.FindStringSubmatch(body)
	if csrf == nil {
		t.Fatalf("the confirmation has no CSRF field:\n%s", body)
	}
	for name, try := range map[string]struct {
		form   url.Values
		header map[string]string
	}{
		"without the CSRF value":  {url.Values{"link": {other}}, nil},
		"with a wrong CSRF value": {url.Values{"link": {other}, "csrf": {strings.Repeat("0", len(csrf[1]))}}, nil},
		"from another site":       {url.Values{"link": {other}, "csrf": {csrf[1]}}, crossSite},
	} {
		if res, _ := s.do("POST", "/portal/open", try.form, acme, try.header); res.StatusCode != http.StatusForbidden || portalCookieOf(res) != nil {
			t.Errorf("switch %s: %d, cookie %v; want 403 and none", name, res.StatusCode, portalCookieOf(res))
		}
	}
	res, _ = s.do("POST", "/portal/open", url.Values{"link": {other}, "csrf": {csrf[1]}}, acme, map[string]string{"Sec-Fetch-Site": "same-origin"})
	if ck := portalCookieOf(res); res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/portal/deliveries" || ck == nil || ck.Value != other {
		t.Fatalf("switch from the confirmation: %d to %q, cookie %v", res.StatusCode, res.Header.Get("Location"), ck)
	}
	// As before: no session, or a link of the session's own tenant.
	s.open(other)
	again := mint("acme")
	res, _ = s.do("GET", "/portal/open?link="+url.QueryEscape(again), nil, acme, crossSite)
	if ck := portalCookieOf(res); res.StatusCode != http.StatusSeeOther || ck == nil || ck.Value != again {
		t.Errorf("acme's link over acme's session: %d, cookie %v; want it opened", res.StatusCode, ck)
	}
}
