package tests

import (
	"fmt"
	"html/template"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/homingdev/homing/internal/testing/testenv"
)

// attackerPages serves another site's pages on 127.0.0.2 (another site to
// a browser than serve's 127.0.0.1): /link navigates to a portal link,
// /post posts one to /portal/open from a form that submits itself.
func attackerPages(t *testing.T, portal, link string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		testenv.Require(t, fmt.Sprintf("no second loopback address 127.0.0.2 to serve another site from: %v", err))
	}
	page := template.Must(template.New("").Parse(`<!doctype html><title>A prize for you</title>
{{if .Post}}<form id="f" method="post" action="{{.Portal}}/portal/open"><input type="hidden" name="link" value="{{.Link}}"></form>
<script>document.getElementById("f").submit()</script>
{{else}}<script>location.href = {{.URL}}</script>{{end}}`))
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_ = page.Execute(w, map[string]any{"Post": r.URL.Path == "/post", "Portal": portal, "Link": link, "URL": link})
	}))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestPortalLinkFromAnotherSiteAsksFirst is finding 5 of issue 35 in a real
// headless Chromium against a real homing serve: a victim signed in to
// acme's portal visits a page of another site (127.0.0.2) that navigates to
// a portal link of globex, the attacker's tenant. The victim's session is
// not replaced: a page says whose portal they are in and whose the link
// opens, and asks. A form of that site posting the link to /portal/open is
// refused. "Stay in acme" keeps acme; "Switch to globex", clicked on
// Homing's own page, switches. Screenshots: portal-switch*.png.
func TestPortalLinkFromAnotherSiteAsksFirst(t *testing.T) {
	t.Parallel()
	requireChromium(t)
	s := newSystem(t)
	s.env = withEnv(s.env, "HOMING_API_ADDR", "127.0.0.1:0")
	op := s.startAPI(t)
	links := map[string]string{}
	for _, name := range []string{"acme", "globex"} {
		op.expect(t, http.StatusCreated, "POST", "/v1/tenants", fmt.Sprintf(`{"name": %q}`, name))
		var tok map[string]any
		s.ok(t, &tok, "homing", "token", "create", "--name", name+"-admin", "--scope", "admin", "--tenant", name, "--json")
		c := op.withToken(tok["token"].(string))
		c.expect(t, http.StatusCreated, "POST", "/v1/webhooks", fmt.Sprintf(
			`{"name": "%s-orders", "doctype": "Sales Order", "event": "on_submit", "url": "https://%s.example/hook"}`, name, name))
		links[name], _ = c.expect(t, http.StatusCreated, "POST", "/v1/portal-links", "").body["url"].(string)
	}
	evil := attackerPages(t, op.base, links["globex"])

	b := newBrowser(t, op.base, t.TempDir())
	// inPortal is the tenant whose portal the session shows.
	inPortal := func() string {
		t.Helper()
		b.run(chromedp.Navigate(op.base+"/portal/deliveries"), chromedp.WaitVisible(chromedp.CSS("#deliveries")))
		return b.text("#portal-tenant")
	}

	b.run(chromedp.Navigate(links["acme"]), chromedp.WaitVisible(chromedp.CSS("#deliveries")))
	if got := b.text("#portal-tenant"); got != "acme" {
		t.Fatalf("acme's link opened the portal of %q", got)
	}

	// The other site navigates to globex's link: Homing asks, on its own
	// page, and the session stays acme's.
	b.run(chromedp.Navigate(evil+"/link"), chromedp.WaitVisible(chromedp.CSS("#switch, #deliveries")))
	if u := b.location(); !strings.HasPrefix(u, op.base+"/portal/open?") {
		t.Fatalf("the other site's navigation ended at %s, in the portal of %q, want the portal's confirmation", u, b.text("#portal-tenant"))
	}
	from, to := b.text("#switch-from"), b.text("#switch-to")
	if from != "acme" || to != "globex" || !strings.Contains(b.text("#switch"), "You are signed in to the portal of tenant acme. This link opens the portal of tenant globex.") {
		t.Fatalf("the confirmation: from %q to %q:\n%s", from, to, b.text("body"))
	}
	b.shot("portal-switch")
	if got := inPortal(); got != "acme" {
		t.Fatalf("a link opened from another site replaced acme's session with %q's", got)
	}

	// A form of the other site posting the link is refused.
	b.run(chromedp.Navigate(evil+"/post"), chromedp.WaitVisible(chromedp.CSS("#message")))
	if txt := b.text("#message"); !strings.Contains(txt, "another site") {
		t.Errorf("the other site's POST of the link: %q, want a refusal naming another site", txt)
	}
	if got := inPortal(); got != "acme" {
		t.Fatalf("the other site's POST replaced acme's session with %q's", got)
	}

	// Stay keeps acme's session; Switch, clicked on Homing's page, opens
	// globex's portal.
	b.run(chromedp.Navigate(evil+"/link"), chromedp.WaitVisible(chromedp.CSS("#switch")), chromedp.Click(chromedp.CSS("#stay")),
		chromedp.WaitVisible(chromedp.CSS("#deliveries")))
	if got := b.text("#portal-tenant"); got != "acme" {
		t.Fatalf("after Stay: the portal of %q", got)
	}
	b.run(chromedp.Navigate(evil+"/link"), chromedp.WaitVisible(chromedp.CSS("#switch")), chromedp.Click(chromedp.CSS("#switch-button")),
		chromedp.WaitVisible(chromedp.CSS(`#deliveries`)))
	if got := b.text("#portal-tenant"); got != "globex" {
		t.Fatalf("after Switch: the portal of %q, want globex", got)
	}
	b.shot("portal-switched")
}
