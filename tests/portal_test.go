package tests

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/homingdev/homing/internal/engine/secretbox"
	"github.com/homingdev/homing/internal/engine/signing"
	"github.com/homingdev/homing/internal/lib/clock"
	"github.com/homingdev/homing/internal/ops/api"
	"github.com/homingdev/homing/internal/ops/portal"
	"github.com/homingdev/homing/internal/ops/token"
	"github.com/homingdev/homing/internal/testing/testreceiver"
)

// TestPortalInABrowser drives a tenant's portal in a real headless Chromium
// against real homing serve and worker processes: a portal link made with
// POST /v1/portal-links opens acme's deliveries, webhooks and overview (with
// its 24 h chart) and shows nothing of globex's; a Retry from the portal
// makes acme's Failed delivery due again; an expired link is refused with a
// page saying so; and the operator's console lists both tenants and shows
// acme's pages once acme is chosen. In the portal a webhook is created (its
// secret generated and shown once), its secret rotated, and a test send
// reaches a receiver signed with both secrets. Pages are saved as portal-*.png in
// screenshotDir.
func TestPortalInABrowser(t *testing.T) {
	t.Parallel()
	requireChromium(t)
	s := newSystem(t)
	// A failed delivery waits an hour, and no scheduler sweeps: only the
	// portal's Retry makes it due within the test.
	s.env = withEnv(s.env, "HOMING_RETRY_SCHEDULE", "1h")
	s.env = withEnv(s.env, "HOMING_API_ADDR", "127.0.0.1:0")
	s.start("worker", "worker started")
	op := s.startAPI(t)
	clients := map[string]apiClient{}
	for _, name := range []string{"acme", "globex"} {
		op.expect(t, http.StatusCreated, "POST", "/v1/tenants", fmt.Sprintf(`{"name": %q}`, name))
		var tok map[string]any
		s.ok(t, &tok, "homing", "token", "create", "--name", name+"-admin", "--scope", "admin", "--tenant", name, "--json")
		c := op.withToken(tok["token"].(string))
		clients[name] = c
		rc := testreceiver.Answering(t, http.StatusServiceUnavailable)
		c.expect(t, http.StatusCreated, "POST", "/v1/webhooks", fmt.Sprintf(
			`{"name": "%s-orders", "doctype": "Sales Order", "event": "on_submit", "url": %q}`, name, rc.URL+"/"+name))
		op.expect(t, http.StatusAccepted, "POST", "/v1/events", fmt.Sprintf(
			`{"tenant": %q, "id": "so-%s", "doc_type": "Sales Order", "doc_name": "SO-%s", "event": "on_submit", "doc": {"name": "SO-%s"}}`, name, name, name, name))
	}
	acme := clients["acme"]
	failed := func(c apiClient, event string) string {
		var id string
		eventually(t, "the failed delivery of "+event, func() (bool, string) {
			r := c.expect(t, http.StatusOK, "GET", "/v1/deliveries?event_id="+event, "")
			list, _ := r.body["deliveries"].([]any)
			if len(list) == 1 {
				d := list[0].(map[string]any)
				if d["status"] == "Failed" && d["last_error"] != "" && d["next_retry"] != nil {
					id, _ = d["id"].(string)
				}
			}
			return id != "", r.raw
		})
		return id
	}
	acmeID, globexID := failed(acme, "so-acme"), failed(clients["globex"], "so-globex")

	link := acme.expect(t, http.StatusCreated, "POST", "/v1/portal-links", `{"ttl": "2h"}`)
	linkURL, _ := link.body["url"].(string)
	if link.body["tenant"] != "acme" || !strings.HasPrefix(linkURL, op.base+api.PortalOpenPath) {
		t.Fatalf("acme's portal link: %s", link.raw)
	}

	b := newBrowser(t, op.base, t.TempDir())

	// The link opens acme's deliveries, and nothing of globex's.
	b.run(chromedp.Navigate(linkURL), chromedp.WaitVisible(chromedp.CSS("#deliveries")))
	if u := b.location(); !strings.HasSuffix(u, "/portal/deliveries") {
		t.Fatalf("the link went to %s, want the portal's deliveries", u)
	}
	if txt := b.text("body"); !strings.Contains(txt, "acme-orders") || strings.Contains(txt, "globex") || !strings.Contains(b.text("#portal-tenant"), "acme") {
		t.Fatalf("the portal's deliveries page:\n%s", txt)
	}
	if txt := b.text("#chart"); !strings.Contains(txt, "acme-orders") {
		t.Errorf("the portal's 24 h chart: %q", txt)
	}
	b.shot("portal-deliveries")
	b.keyboardFromTheTop("/portal/deliveries")
	b.run(chromedp.Navigate(op.base + "/portal/webhooks"))
	if txt := b.text("#webhooks"); !strings.Contains(txt, "acme-orders") || strings.Contains(txt, "globex") {
		t.Fatalf("the portal's webhooks: %q", txt)
	}
	b.shot("portal-webhooks")
	// Create a webhook in the portal, rotate its secret, test-send it to a
	// receiver that records what it got. acme's operator shows it the full
	// form (portal_advanced) and declares the event it picks.
	op.expect(t, http.StatusOK, "PATCH", "/v1/tenants/acme", `{"portal_advanced": true, "event_types": ["Sales Invoice:on_submit"]}`)
	rec := testreceiver.New(t)
	b.run(chromedp.Navigate(op.base+"/portal/webhooks"), chromedp.Click(chromedp.CSS("#new-webhook")), chromedp.WaitVisible(chromedp.CSS("#webhook-form")),
		chromedp.SetValue(chromedp.CSS("#name"), "acme-invoices"), chromedp.SetValue(chromedp.CSS("#event_type"), "Sales Invoice:on_submit"),
		chromedp.SetValue(chromedp.CSS("#url"), rec.URL+"/invoices"),
		chromedp.SetValue(chromedp.CSS("#template"), `{"invoice": "{{ doc.name }}", "total": {{ doc.grand_total }}}`),
		chromedp.SetValue(chromedp.CSS("#headers"), "X-Shop: acme"))
	b.shot("portal-webhook-new")
	// pre#secret: the form has an input #secret of its own, visible before
	// the click's page arrives.
	b.run(chromedp.Click(chromedp.CSS("#save")), chromedp.WaitVisible(chromedp.CSS("pre#secret")))
	first := strings.TrimSpace(b.text("pre#secret"))
	if !strings.HasPrefix(first, "whsec_") {
		t.Fatalf("the created webhook's secret page: %q", b.text("body"))
	}
	acme.expect(t, http.StatusOK, "GET", "/v1/webhooks/acme-invoices", "")
	clients["globex"].expect(t, http.StatusNotFound, "GET", "/v1/webhooks/acme-invoices", "")
	b.run(chromedp.Navigate(op.base+"/portal/webhooks/acme-invoices"), chromedp.Click(chromedp.CSS("#rotate-secret")), chromedp.WaitVisible(chromedp.CSS("#grace")))
	rotated := strings.TrimSpace(b.text("pre#secret"))
	if !strings.HasPrefix(rotated, "whsec_") || rotated == first {
		t.Fatalf("the rotated secret %q (was %q)", rotated, first)
	}
	b.shot("portal-webhook-secret")
	b.run(chromedp.Navigate(op.base+"/portal/webhooks/acme-invoices"), chromedp.SetValue(chromedp.CSS("#doc"), `{"name": "SINV-1", "grand_total": 1500}`),
		chromedp.Click(chromedp.CSS("#test-send")), chromedp.WaitVisible(chromedp.CSS("#test-result")))
	if txt := b.text("#test-status"); !strings.Contains(txt, "200") {
		t.Fatalf("the test send's result: %q", b.text("body"))
	}
	b.shot("portal-webhook-test")
	got := rec.Requests()
	if len(got) != 1 || string(got[0].Body) != `{"invoice": "SINV-1", "total": 1500}` || got[0].Header.Get("X-Shop") != "acme" {
		t.Fatalf("the receiver got %d requests: %+v", len(got), got)
	}
	for name, sec := range map[string]string{"rotated": rotated, "first (in its grace)": first} {
		if err := signing.Verify(signing.Secret(sec), got[0].Header, got[0].Body, 5*time.Minute); err != nil {
			t.Errorf("the %s secret does not verify the test send: %v", name, err)
		}
	}
	if r := acme.expect(t, http.StatusOK, "GET", "/v1/deliveries?webhook=acme-invoices", ""); len(r.body["deliveries"].([]any)) != 0 {
		t.Errorf("a test send made deliveries: %s", r.raw)
	}

	b.run(chromedp.Navigate(op.base+"/portal/deliveries/"+globexID), chromedp.WaitVisible(chromedp.CSS("#message")))
	if txt := b.text("#message"); !strings.Contains(txt, "No delivery") {
		t.Fatalf("globex's delivery in acme's portal: %q", txt)
	}

	// Retry from the portal: the Failed delivery is due again.
	b.run(chromedp.Navigate(op.base+"/portal/deliveries/"+acmeID), chromedp.Click(chromedp.CSS("#retry")), chromedp.WaitVisible(chromedp.CSS("#notice")))
	if txt := b.text("#notice"); !strings.Contains(txt, "Retry queued") {
		t.Fatalf("retry from the portal: %q", txt)
	}
	b.shot("portal-delivery")
	d := acme.expect(t, http.StatusOK, "GET", "/v1/deliveries/"+acmeID, "")
	next, _ := d.body["next_retry"].(string)
	due, err := time.Parse(time.RFC3339Nano, next)
	if d.body["status"] != "Failed" || err != nil || due.After(time.Now()) {
		t.Fatalf("after the portal's retry: %s", d.raw)
	}
	b.run(chromedp.Navigate(op.base + "/portal/"))
	if txt := b.text("#chart"); !strings.Contains(txt, "acme-orders") || strings.Contains(txt, "globex") {
		t.Errorf("the portal overview's chart: %q", txt)
	}
	b.shot("portal-overview")

	// An expired link is refused, saying so.
	db := s.openDB(t)
	box, err := secretbox.New(s.envValue("HOMING_SECRETS_KEY"))
	if err != nil {
		t.Fatal(err)
	}
	old, err := portal.New(db, box.Subkey(portal.KeyLabel), clock.NewStub(time.Now().Add(-3*time.Hour))).Create(context.Background(), "acme", time.Hour, token.Token{Name: "test"})
	if err != nil {
		t.Fatal(err)
	}
	b.run(chromedp.Navigate(op.base+api.PortalOpenPath+"?link="+old.Token), chromedp.WaitVisible(chromedp.CSS("#message")))
	if txt := b.text("#message"); !strings.Contains(txt, "expired") {
		t.Fatalf("expired link: %q", txt)
	}
	b.shot("portal-expired")

	// The operator's console: every tenant on the overview, and acme's
	// pages once chosen.
	b.login(op.token)
	b.run(chromedp.WaitVisible(chromedp.CSS("#tenants")))
	if txt := b.text("#tenants"); !strings.Contains(txt, "acme") || !strings.Contains(txt, "globex") {
		t.Fatalf("the operator's tenants: %q", txt)
	}
	b.run(chromedp.SetValue(chromedp.CSS("#tenant"), "acme"), chromedp.Click(chromedp.CSS("#choose-tenant")),
		// The page after the choice, not the one the click left.
		chromedp.WaitVisible(chromedp.CSS(`#session-tenant[data-tenant="acme"]`)))
	b.run(chromedp.Navigate(op.base+"/console/deliveries"), chromedp.WaitVisible(chromedp.CSS("#deliveries")))
	if txt := b.text("#deliveries"); !strings.Contains(txt, "acme-orders") || strings.Contains(txt, "globex") {
		t.Fatalf("the operator's deliveries in acme: %q", txt)
	}
	b.run(chromedp.Navigate(op.base + "/console/"))
	b.shot("portal-operator-tenants")
}
