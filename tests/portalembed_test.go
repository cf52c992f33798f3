package tests

import (
	"context"
	"fmt"
	"html/template"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"

	"github.com/homingdev/homing/internal/testing/testenv"
)

// siteOn listens on ip, a loopback address (another one than serve's
// 127.0.0.1 is another site to a browser), for a page server the test
// starts once it knows what to serve (serveSite).
func siteOn(t *testing.T, ip string) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		testenv.Require(t, fmt.Sprintf("no loopback address %s to serve another site from: %v", ip, err))
	}
	return ln
}

// serveSite serves h on ln and returns its origin.
func serveSite(t *testing.T, ln net.Listener, h http.Handler) string {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	_ = srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL
}

// embedPage is a SaaS's page that embeds a portal link: the snippet
// docs/tenants.md tells a SaaS to paste ("Embedding"), and, when Control is
// set, a frame of Control's /set, which checks that the browser blocks
// third-party cookies.
var embedPage = template.Must(template.New("").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Site}}: webhooks</title></head>
<body style="font: 14px system-ui; margin: 1rem">
<h1>{{.Site}} · Settings · Webhooks</h1>
<iframe id="portal" src="{{.Link}}" title="Webhooks" style="width: 100%; height: 640px; border: 1px solid #ccc"></iframe>
{{with .Control}}<iframe id="control" src="{{.}}/set" title="control" style="display: none"></iframe>{{end}}
</body></html>`))

// blockingBrowser starts a headless Chromium that blocks third-party
// cookies, as a user who chose so (and Safari and Firefox by default) does:
// the profile's cookie controls say "block third-party cookies".
func blockingBrowser(t *testing.T, base string) browser {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "Default"), 0o755); err != nil {
		t.Fatal(err)
	}
	prefs := `{"profile": {"cookie_controls_mode": 1, "block_third_party_cookies": true}}`
	if err := os.WriteFile(filepath.Join(dir, "Default", "Preferences"), []byte(prefs), 0o644); err != nil {
		t.Fatal(err)
	}
	return newBrowser(t, base, dir, chromedp.Flag("test-third-party-cookie-phaseout", true))
}

// frame is the browser context of the frame of the page whose document
// came from a URL starting with prefix: another site's frame runs in a
// process of its own, a target of its own (with the page as its parent) to
// drive.
func (b browser) frame(prefix string) browser {
	b.t.Helper()
	page := chromedp.FromContext(b.ctx).Target.TargetID
	var id target.ID
	eventually(b.t, "the page's frame of "+prefix, func() (bool, string) {
		ctx, cancel := context.WithTimeout(b.ctx, browserStep)
		infos, err := chromedp.Targets(ctx)
		cancel()
		if err != nil {
			b.t.Fatal(err)
		}
		var seen []string
		for _, in := range infos {
			seen = append(seen, fmt.Sprintf("%s %s (parent %s)", in.Type, in.URL, in.ParentID))
			if in.Type == "iframe" && in.ParentID == page && strings.HasPrefix(in.URL, prefix) {
				id = in.TargetID
			}
		}
		return id != "", strings.Join(seen, "\n")
	})
	ctx, cancel := chromedp.NewContext(b.ctx, chromedp.WithTargetID(id))
	b.t.Cleanup(cancel)
	// Attached here, without a deadline (as newBrowser starts the browser):
	// the steps on the frame are bounded one by one.
	if err := chromedp.Do(ctx); err != nil {
		b.t.Fatalf("browser: attach to the frame of %s: %v", prefix, err)
	}
	return browser{t: b.t, ctx: ctx, base: b.base}
}

// document is the frame's document once it has loaded: its URL and title
// (a frame the browser refused shows an error page, chrome-error://…).
func (b browser) document() string {
	b.t.Helper()
	var doc string
	eventually(b.t, "the frame's document", func() (bool, string) {
		got, err := do(b, chromedp.Evaluate[string](`document.readyState + " " + location.href + " " + document.title`))
		if err != nil {
			b.t.Fatalf("browser: %v", err)
		}
		doc = strings.TrimPrefix(got, "complete ")
		return doc != got && !strings.HasPrefix(doc, "about:blank"), got
	})
	return doc
}

// TestPortalEmbeddedInAnotherSite is issue 38's embedding in a real
// headless Chromium that blocks third-party cookies: a SaaS's page on
// another site (127.0.0.2, in acme's portal_origins) frames a portal link
// made with a token the SaaS's backend got over the API, and inside the
// frame the portal is signed in, navigates, and submits a form (Disable, a
// same-origin POST with its CSRF token). A cookie of Homing's site without
// Partitioned is not sent to such a frame, which is how the test knows the
// browser blocks third-party cookies. A page of a site not in
// portal_origins (127.0.0.3) is refused the frame. Once the link is
// revoked, the frame says so. Screenshots:
// portal-embedded*.png.
func TestPortalEmbeddedInAnotherSite(t *testing.T) {
	t.Parallel()
	requireChromium(t)
	s := newSystem(t)
	s.env = withEnv(s.env, "HOMING_API_ADDR", "127.0.0.1:0")
	op := s.startAPI(t)
	appLn, otherLn := siteOn(t, "127.0.0.2"), siteOn(t, "127.0.0.3")
	app := "http://" + appLn.Addr().String()

	// The SaaS's backend: the tenant, embeddable in its app; an admin
	// token of the tenant over the API; a webhook; a portal link.
	op.expect(t, http.StatusCreated, "POST", "/v1/tenants", fmt.Sprintf(`{"name": "acme", "portal_origins": [%q], "product_name": "Acme Hooks", "accent_color": "#0a7d5a"}`, app))
	made := op.expect(t, http.StatusCreated, "POST", "/v1/tokens", `{"name": "acme-admin", "scope": "admin", "tenant": "acme"}`)
	acme := op.withToken(made.body["token"].(string))
	acme.expect(t, http.StatusCreated, "POST", "/v1/webhooks", `{"name": "acme-orders", "doctype": "Sales Order", "event": "on_submit", "url": "https://acme.example/hook"}`)
	made = acme.expect(t, http.StatusCreated, "POST", "/v1/portal-links", "")
	link, _ := made.body["url"].(string)
	linkID, _ := made.body["id"].(string)
	// A live link of its own for the site not in portal_origins: what it
	// is refused is the portal itself.
	otherLink, _ := acme.expect(t, http.StatusCreated, "POST", "/v1/portal-links", "").body["url"].(string)

	// The control: a cookie of Homing's site (127.0.0.1) that is
	// SameSite=None and Secure but not Partitioned, set and read in a frame
	// of the app's page.
	controlSent := make(chan bool, 1)
	control := serveSite(t, siteOn(t, "127.0.0.1"), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/set":
			w.Header().Set("Set-Cookie", "homing_control=1; Path=/; SameSite=None; Secure; HttpOnly")
			http.Redirect(w, r, "/check", http.StatusSeeOther)
		case "/check":
			_, err := r.Cookie("homing_control")
			select {
			case controlSent <- err == nil:
			default:
			}
			_, _ = fmt.Fprint(w, "checked")
		}
	}))
	page := func(site, link, control string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			_ = embedPage.Execute(w, map[string]string{"Site": site, "Link": link, "Control": control})
		})
	}
	app = serveSite(t, appLn, page("Acme app", link, control))
	other := serveSite(t, otherLn, page("Another site (not in portal_origins)", otherLink, ""))

	b := blockingBrowser(t, op.base)
	b.run(chromedp.Navigate(app + "/"))
	select {
	case sent := <-controlSent:
		if sent {
			t.Fatal("the browser sent an unpartitioned SameSite=None cookie to a frame of another site: it does not block third-party cookies, so this test would prove nothing")
		}
	case <-time.After(browserStep):
		t.Fatal("the control frame never asked for /check")
	}

	// Inside the frame: signed in to acme's portal, it navigates and
	// submits a form.
	f := b.frame(op.base + "/portal/")
	if doc := f.document(); !strings.HasPrefix(doc, op.base+"/portal/deliveries ") {
		t.Fatalf("the app's frame of the portal link shows %q, want acme's deliveries", doc)
	}
	f.run(chromedp.WaitVisible(chromedp.CSS("#deliveries")))
	if got := f.text("#portal-tenant"); got != "acme" {
		t.Fatalf("the framed portal is of %q", got)
	}
	b.shot("portal-embedded")
	f.run(chromedp.Click(chromedp.CSS(`header a[href="/portal/webhooks"]`)), chromedp.WaitVisible(chromedp.CSS("#webhooks")),
		chromedp.Click(chromedp.CSS(`#webhooks a[href="/portal/webhooks/acme-orders"]`)), chromedp.WaitVisible(chromedp.CSS("#disable")),
		chromedp.Click(chromedp.CSS("#disable")), chromedp.WaitVisible(chromedp.CSS("#enable")))
	if got := acme.expect(t, http.StatusOK, "GET", "/v1/webhooks/acme-orders", ""); got.body["enabled"] != false {
		t.Fatalf("Disable in the framed portal: %s", got.raw)
	}
	b.shot("portal-embedded-form")

	// The link revoked, the frame's next page says the session ended, in
	// the frame and in acme's theme, not the browser's "refused to
	// connect".
	acme.expect(t, http.StatusNoContent, "DELETE", "/v1/portal-links/"+linkID, "")
	f.run(chromedp.Click(chromedp.CSS(`header a[href="/portal/deliveries"]`)), chromedp.WaitVisible(chromedp.CSS("#message")))
	if doc, msg := f.document(), f.text("#message"); !strings.HasPrefix(doc, op.base+"/portal/deliveries Session ended · Acme Hooks") || !strings.Contains(msg, "This portal session has ended") {
		t.Fatalf("the framed portal after its link was revoked: %q: %q", doc, msg)
	}
	b.shot("portal-embedded-ended")

	// A site not in acme's portal_origins is refused the frame.
	b.run(chromedp.Navigate(other + "/"))
	if doc := b.frame(op.base + "/portal/").document(); !strings.HasPrefix(doc, "chrome-error://") {
		t.Fatalf("a site not in portal_origins framed the portal: its frame shows %q", doc)
	}
	b.shot("portal-embedded-refused")
}
