package tests

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// logoSVG is the logo a themed tenant's portal shows.
const logoSVG = `<svg xmlns="http://www.w3.org/2000/svg" width="96" height="24" viewBox="0 0 96 24">` +
	`<rect width="96" height="24" rx="5" fill="#ffffff"/><circle cx="12" cy="12" r="7" fill="#0a7d5a"/>` +
	`<text x="24" y="17" font-family="sans-serif" font-size="14" font-weight="bold" fill="#0a7d5a">ACME</text></svg>`

// TestThemedPortalInABrowser: a SaaS's backend themes its customer's tenant
// over the API (product name, logo, accent colour, support link), and the
// customer's portal, in a real headless Chromium against a real homing
// serve, shows them and never "Homing": in the title, the header (the logo
// loaded under the portal's CSP, whose img-src names its origin), the
// header's colour and the Support link. Screenshot: portal-themed.png.
func TestThemedPortalInABrowser(t *testing.T) {
	t.Parallel()
	requireChromium(t)
	s := newSystem(t)
	s.env = withEnv(s.env, "HOMING_API_ADDR", "127.0.0.1:0")
	op := s.startAPI(t)
	// The SaaS's CDN, on loopback: http is accepted there.
	cdn := serveSite(t, siteOn(t, "127.0.0.1"), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "image/svg+xml")
		_, _ = fmt.Fprint(w, logoSVG)
	}))
	op.expect(t, http.StatusCreated, "POST", "/v1/tenants", fmt.Sprintf(`{"name": "acme", "product_name": "Acme Hooks",
		"logo_url": %q, "accent_color": "#0A7D5A", "support_url": "https://acme.example/help"}`, cdn+"/logo.svg"))
	acme := op.withToken(op.expect(t, http.StatusCreated, "POST", "/v1/tokens", `{"name": "acme-admin", "scope": "admin", "tenant": "acme"}`).body["token"].(string))
	acme.expect(t, http.StatusCreated, "POST", "/v1/webhooks", `{"name": "acme-orders", "doctype": "Sales Order", "event": "on_submit", "url": "https://acme.example/hook"}`)
	link, _ := acme.expect(t, http.StatusCreated, "POST", "/v1/portal-links", "").body["url"].(string)

	b := newBrowser(t, op.base, t.TempDir())
	eval := func(js string) string {
		t.Helper()
		v, err := do(b, chromedp.Evaluate[string](js))
		if err != nil {
			t.Fatalf("browser: %s: %v", js, err)
		}
		return v
	}

	b.run(chromedp.Navigate(link), chromedp.WaitVisible(chromedp.CSS("#deliveries")))
	for _, path := range []string{"/portal/deliveries", "/portal/webhooks", "/portal/", "/portal/webhooks/acme-orders"} {
		b.run(chromedp.Navigate(op.base + path))
		title, text := eval(`document.title`), eval(`document.body.innerText`)
		if !strings.HasSuffix(title, " · Acme Hooks") || strings.Contains(title+text, "Homing") {
			t.Errorf("%s: title %q; the page names Homing or not Acme Hooks:\n%s", path, title, text)
		}
	}
	b.run(chromedp.Navigate(op.base + "/portal/deliveries"))
	if got := b.text("#brand"); got != "Acme Hooks" {
		t.Errorf("the header's name: %q", got)
	}
	if got := eval(`(() => { const i = document.getElementById("brand-logo"); return i.complete + " " + i.naturalWidth + "x" + i.naturalHeight })()`); got != "true 96x24" {
		t.Errorf("the logo (loaded under the CSP?): %s", got)
	}
	if got := eval(`getComputedStyle(document.querySelector("header")).backgroundColor`); got != "rgb(10, 125, 90)" {
		t.Errorf("the header's colour: %s, want the accent #0a7d5a", got)
	}
	if got := eval(`getComputedStyle(document.getElementById("brand")).color`); got != "rgb(255, 255, 255)" {
		t.Errorf("the header's text on the dark accent: %s, want white", got)
	}
	if got := eval(`document.getElementById("support").href + " " + document.getElementById("support").target`); got != "https://acme.example/help _blank" {
		t.Errorf("the Support link: %s", got)
	}
	b.shot("portal-themed")
}
