package console_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/homingdev/homing/internal/engine/tenant"
	"github.com/homingdev/homing/internal/ops/console"
	"github.com/homingdev/homing/internal/ops/token"
)

// The portal cookie can reach a portal framed by another site where the
// browser can keep it Secure (TLS, or a loopback host): SameSite=None,
// Secure and Partitioned (CHIPS), so that it survives third-party-cookie
// blocking. Over plain HTTP on another host a browser would refuse
// SameSite=None, so it stays SameSite=Lax there. A session cookie of
// before (unpartitioned) does not shadow a valid one, and signing out
// clears both.
func TestPortalCookieIsPartitionedWhereItCanBeSecure(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	link, err := s.links.Create(context.Background(), "default", 0, token.Token{Name: "test"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, host, proto string
		embeddable        bool
	}{
		{"loopback", "127.0.0.1:8088", "", true},
		{"localhost", "localhost:8088", "", true},
		{"IPv6 loopback", "[::1]:8088", "", true},
		{"TLS at a proxy", "homing.example", "https", true},
		{"plain HTTP", "homing.example:8088", "", false},
	} {
		req, err := http.NewRequest("GET", s.srv.URL+"/portal/open?link="+link.Token, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = c.host
		if c.proto != "" {
			req.Header.Set("X-Forwarded-Proto", c.proto)
		}
		res, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		_ = res.Body.Close()
		var got []*http.Cookie
		for _, ck := range res.Cookies() {
			if ck.Name == console.PortalCookieName {
				got = append(got, ck)
			}
		}
		switch {
		case len(got) == 0 || got[0].Value != link.Token || !got[0].HttpOnly || got[0].Path != "/portal/":
			t.Errorf("%s: the session cookie: %v", c.name, got)
		case c.embeddable && (got[0].SameSite != http.SameSiteNoneMode || !got[0].Secure || !got[0].Partitioned):
			t.Errorf("%s: %s; want SameSite=None; Secure; Partitioned", c.name, got[0])
		case len(got) != 1:
			// A browser that ignores Partitioned would take a clear of the
			// old cookie beside it for a clear of this one.
			t.Errorf("%s: %v; want one cookie, and no clear of the cookie of before", c.name, got)
		case !c.embeddable && (got[0].SameSite != http.SameSiteLaxMode || got[0].Secure || got[0].Partitioned):
			t.Errorf("%s: %v; want one SameSite=Lax cookie, not Secure, not Partitioned", c.name, got)
		}
	}
	// A browser that sends the cleared cookie of before first, and the
	// session second, is signed in.
	req, _ := http.NewRequest("GET", s.srv.URL+"/portal/deliveries", nil)
	req.AddCookie(&http.Cookie{Name: console.PortalCookieName, Value: "v1.default.expired"})
	req.AddCookie(&http.Cookie{Name: console.PortalCookieName, Value: link.Token})
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Errorf("two portal cookies, the second valid: %d", res.StatusCode)
	}
	ck := &http.Cookie{Name: console.PortalCookieName, Value: link.Token}
	res, _ = s.do("POST", "/portal/logout", url.Values{"csrf": {s.csrf(ck, "/portal/deliveries")}}, ck, nil)
	var cleared []string
	for _, c := range res.Cookies() {
		if c.Name == console.PortalCookieName && c.MaxAge == -1 {
			cleared = append(cleared, fmt.Sprintf("partitioned=%v", c.Partitioned))
		}
	}
	if strings.Join(cleared, ",") != "partitioned=true,partitioned=false" {
		t.Errorf("Sign out cleared %v; want the partitioned cookie and the one of before", cleared)
	}
}

// A tenant's theme replaces Homing in its portal: the product name in the
// title and the header, the logo (whose origin, and no other, the CSP adds
// to img-src), the accent colour through a stylesheet of the portal's own
// origin (no inline style or script), and the support link. The console
// and an unthemed portal stay Homing's.
func TestThemedPortal(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	s.withAcme()
	str := func(v string) *string { return &v }
	if _, err := tenant.New(s.db, nil, nil).Update(context.Background(), "acme", tenant.Patch{ProductName: str("Acme Hooks"),
		LogoURL: str("https://cdn.acme.example/brand/logo.svg?v=2"), AccentColor: str("#FFD000"), SupportURL: str("https://acme.example/help")}); err != nil {
		t.Fatal(err)
	}
	link, err := s.links.Create(context.Background(), "acme", 0, token.Token{Name: "test"})
	if err != nil {
		t.Fatal(err)
	}
	res, body := s.do("GET", "/portal/deliveries", nil, s.open(link.Token), nil)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("themed portal: %d %s", res.StatusCode, body)
	}
	for _, want := range []string{"<title>Deliveries · Acme Hooks</title>", `<img src="https://cdn.acme.example/brand/logo.svg?v=2" alt="" id="brand-logo">Acme Hooks</a>`,
		`<link rel="stylesheet" href="/portal/theme/ffd000.css">`, `<a href="https://acme.example/help" id="support" target="_blank" rel="noopener noreferrer">Support</a>`} {
		if !strings.Contains(body, want) {
			t.Errorf("the themed page lacks %s:\n%s", want, body)
		}
	}
	if strings.Contains(body, "Homing") || strings.Contains(body, "<script") || strings.Contains(body, "style=") || strings.Contains(body, "<style") {
		t.Errorf("the themed page names Homing, or has inline script or style:\n%s", body)
	}
	if csp := res.Header.Get("Content-Security-Policy"); csp != "default-src 'self'; img-src 'self' https://cdn.acme.example; frame-ancestors https://acme.example; form-action 'self'" {
		t.Errorf("the themed portal's CSP: %q", csp)
	}
	// A logo without a product name stands alone, named for screen
	// readers; "Homing" does not come back beside it.
	if _, err := tenant.New(s.db, nil, nil).Update(context.Background(), "acme", tenant.Patch{ProductName: str("")}); err != nil {
		t.Fatal(err)
	}
	if _, body := s.do("GET", "/portal/deliveries", nil, s.open(link.Token), nil); !strings.Contains(body, `alt="Home" id="brand-logo"></a>`) || strings.Contains(body, ">Homing<") {
		t.Errorf("a logo without a product name:\n%s", body)
	}
	// The accent's stylesheet: a light accent gets dark text.
	res, css := s.do("GET", "/portal/theme/ffd000.css", nil, nil, nil)
	if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/css") ||
		css != ":root { --accent: #ffd000; --accent-text: #111111; --accent-link: #111111; --accent-muted: #111111; }\n" {
		t.Errorf("the accent's stylesheet: %d %q %q", res.StatusCode, res.Header.Get("Content-Type"), css)
	}
	if _, css := s.do("GET", "/portal/theme/0a2d5a.css", nil, nil, nil); !strings.Contains(css, "--accent-text: #ffffff") {
		t.Errorf("a dark accent's stylesheet: %q", css)
	}
	for _, bad := range []string{"FFD000.css", "ffd00.css", "ffd000", "ffd000;x.css", "zzzzzz.css"} {
		if res, _ := s.do("GET", "/portal/theme/"+bad, nil, nil, nil); res.StatusCode != http.StatusNotFound {
			t.Errorf("/portal/theme/%s: %d, want 404", bad, res.StatusCode)
		}
	}
	// The console, and the default tenant's unthemed portal, are Homing's.
	_, body = s.do("GET", "/console/deliveries", nil, s.login(s.admin), nil)
	if !strings.Contains(body, "· Homing console</title>") || strings.Contains(body, "Acme Hooks") || strings.Contains(body, "/portal/theme/") {
		t.Errorf("the console is themed:\n%s", body)
	}
	def, err := s.links.Create(context.Background(), "default", 0, token.Token{Name: "test"})
	if err != nil {
		t.Fatal(err)
	}
	res, body = s.do("GET", "/portal/deliveries", nil, s.open(def.Token), nil)
	if !strings.Contains(body, "· Homing portal</title>") || strings.Contains(body, "brand-logo") || strings.Contains(body, `id="support"`) ||
		strings.Contains(res.Header.Get("Content-Security-Policy"), "img-src") {
		t.Errorf("the unthemed portal: %v\n%s", res.Header, body)
	}
}
