package console_test

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/homingdev/homing/internal/engine/signing"
	"github.com/homingdev/homing/internal/engine/tenant"
	"github.com/homingdev/homing/internal/engine/webhook"
	"github.com/homingdev/homing/internal/ops/console"
	"github.com/homingdev/homing/internal/ops/token"
	"github.com/homingdev/homing/internal/testing/testenv"
	"github.com/homingdev/homing/models"
)

// secretPre is the secret as a page shows it.
var secretPre = regexp.MustCompile(`<pre id="secret">([^<]*)</pre>`)

// acmePortal opens a portal session of acme (s.withAcme's tenant).
func (s *site) acmePortal() *http.Cookie {
	s.t.Helper()
	link, err := s.links.Create(context.Background(), "acme", 0, token.Token{Name: "test"})
	if err != nil {
		s.t.Fatal(err)
	}
	return s.open(link.Token)
}

// TestPortalFormShowsACustomersFieldsAndKeepsTheRest: without the
// tenant's portal_advanced the portal's form shows the URL, the event, a
// description, headers, the rate limit, enabled and the secret, and none of
// the operator's settings; an edit in it changes what it shows and leaves
// every hidden setting as it was, whatever the request posts for them.
// With portal_advanced the operator's settings show.
func TestPortalFormShowsACustomersFieldsAndKeepsTheRest(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	s.withAcme()
	ctx := context.Background()
	tenants := tenant.New(s.db, nil, nil)
	if _, err := tenants.Update(ctx, "acme", tenant.Patch{Queues: &[]string{"critical"}}); err != nil {
		t.Fatal(err)
	}
	in := webhook.Input{Queue: ptr("critical"), Compat: ptr("frappe"), ConditionLanguage: ptr("python"), Condition: ptr("doc.total > 10"),
		URLTemplate: ptr("https://acme.example/o/{{ doc.name }}"), FollowRedirects: ptr(3), Signature: ptr("frappe"),
		Template: ptr(`{"o": "{{ doc.name }}"}`), MaxRetries: ptr(7), Timeout: ptr(1500 * time.Millisecond), Method: ptr("PUT"),
		Secret: ptr("my-frappe-secret")}
	if _, err := s.hooks.Update(ctx, "acme", "acme-orders", in); err != nil {
		t.Fatal(err)
	}
	before, _ := s.hooks.Get(ctx, "acme", "acme-orders")
	ck := s.acmePortal()

	_, body := s.do("GET", "/portal/webhooks/acme-orders/edit", nil, ck, nil)
	for _, want := range []string{`id="url"`, `id="event_type"`, `id="description"`, `id="headers"`, `id="rate_limit"`, `id="enabled"`, `id="secret"`,
		`<option value="Sales Order:on_submit" selected>`} {
		if !strings.Contains(body, want) {
			t.Errorf("the simple form lacks %s", want)
		}
	}
	for _, hidden := range []string{`id="queue"`, `id="compat"`, `id="condition_language"`, `id="url_template"`, `id="follow_redirects"`,
		`id="signature"`, `id="template"`, `id="doctype"`, `id="max_retries"`, `id="timeout"`, `id="method"`} {
		if strings.Contains(body, hidden) {
			t.Errorf("the simple form shows %s", hidden)
		}
	}
	if _, page := s.do("GET", "/portal/webhooks/acme-orders", nil, ck, nil); strings.Contains(page, "critical") || strings.Contains(page, "url template") || strings.Contains(page, ">frappe<") {
		t.Errorf("the simple webhook page shows the operator's settings:\n%s", page)
	}

	csrf := s.csrf(ck, "/portal/webhooks/acme-orders/edit")
	// What a script might post for the hidden fields changes nothing.
	form := url.Values{"csrf": {csrf}, "name": {"acme-orders"}, "url": {"https://acme.example/new"}, "event_type": {"Sales Order:on_submit"},
		"description": {"Orders into our ERP"}, "rate_limit": {"5"}, "enabled": {"on"}, "headers": {""},
		"queue": {"default"}, "compat": {"homing"}, "condition_language": {"expr"}, "url_template": {""}, "follow_redirects": {"0"},
		"signature": {"none"}, "template": {""}, "max_retries": {"1"}, "timeout": {"9s"}, "method": {"POST"}, "condition": {""}}
	if res, body := s.do("POST", "/portal/webhooks/acme-orders", form, ck, nil); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("save: %d\n%s", res.StatusCode, body)
	}
	after, _ := s.hooks.Get(ctx, "acme", "acme-orders")
	if after.RequestURL != "https://acme.example/new" || after.Description != "Orders into our ERP" || after.RateLimit != 5 {
		t.Errorf("shown fields not saved: url %q description %q rate %d", after.RequestURL, after.Description, after.RateLimit)
	}
	if after.Queue != before.Queue || after.Compat != before.Compat || after.ConditionLanguage != before.ConditionLanguage ||
		after.Condition != before.Condition || after.URLTemplate != before.URLTemplate || after.FollowRedirects != before.FollowRedirects ||
		after.SignatureScheme != before.SignatureScheme || after.BodyTemplate != before.BodyTemplate || after.MaxRetries != before.MaxRetries ||
		after.TimeoutMS != before.TimeoutMS || after.RequestMethod != before.RequestMethod || after.Secret != before.Secret {
		t.Errorf("the simple form changed a hidden setting:\nbefore %+v\nafter  %+v", before, after)
	}

	// portal_advanced shows them.
	on := true
	if _, err := tenants.Update(ctx, "acme", tenant.Patch{PortalAdvanced: &on}); err != nil {
		t.Fatal(err)
	}
	_, body = s.do("GET", "/portal/webhooks/acme-orders/edit", nil, ck, nil)
	for _, want := range []string{`name="queue" id="queue" value="critical"`, `<option value="frappe" selected>`, `id="url_template"`, `id="follow_redirects"`, `id="signature"`, `id="event_type"`} {
		if !strings.Contains(body, want) {
			t.Errorf("the advanced portal form lacks %s", want)
		}
	}
}

// TestPortalPicksEventsFromItsCatalog: the event list holds the pairs the
// tenant's deliveries record and those its operator declared, none of
// another tenant's; a pair not in it, or none, is refused in the form
// saying what to do.
func TestPortalPicksEventsFromItsCatalog(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	s.withAcme()
	ctx := context.Background()
	var d1 models.Delivery
	if err := s.db.Take(&d1, "id = ?", "d-1").Error; err != nil {
		t.Fatal(err)
	}
	other := d1 // the default tenant's
	other.ID, other.EventID, other.DocType, other.DocEvent = "d-po", "ev-po", "Purchase Order", "on_cancel"
	if err := s.db.Create(&other).Error; err != nil {
		t.Fatal(err)
	}
	declared := []string{"Customer:after_insert"}
	if _, err := tenant.New(s.db, nil, nil).Update(ctx, "acme", tenant.Patch{EventTypes: &declared}); err != nil {
		t.Fatal(err)
	}
	ck := s.acmePortal()
	_, body := s.do("GET", "/portal/new-webhook", nil, ck, nil)
	for _, want := range []string{`<option value="Sales Order:on_submit">Sales Order · on_submit</option>`, `<option value="Customer:after_insert">Customer · after_insert</option>`} {
		if !strings.Contains(body, want) {
			t.Errorf("the event list lacks %s", want)
		}
	}
	if strings.Contains(body, "Purchase Order") {
		t.Errorf("acme's event list shows another tenant's event")
	}
	if !strings.Contains(body, `id="generate_secret" checked`) {
		t.Errorf("a new endpoint in the portal is not signed by default")
	}
	csrf := s.csrf(ck, "/portal/new-webhook")
	for pick, says := range map[string]string{
		"Purchase Order:on_cancel": `event &#34;Purchase Order:on_cancel&#34; is not one this account sends; pick one from the list`,
		"":                         "pick the event this endpoint receives from the list",
		"Customer":                 `event &#34;Customer&#34; is not one this account sends`,
	} {
		form := url.Values{"csrf": {csrf}, "name": {"acme-po"}, "url": {"https://acme.example/po"}, "event_type": {pick}, "enabled": {"on"},
			"doctype": {"Purchase Order"}, "event": {"on_cancel"}}
		res, body := s.do("POST", "/portal/webhooks", form, ck, nil)
		if res.StatusCode != http.StatusBadRequest || !strings.Contains(body, says) || !strings.Contains(body, `data-field="event_type"`) {
			t.Errorf("pick %q: %d, want 400 saying %s\n%s", pick, res.StatusCode, says, body)
		}
	}
	if _, err := s.hooks.Get(ctx, "acme", "acme-po"); err == nil {
		t.Errorf("a refused pick created the webhook")
	}
	form := url.Values{"csrf": {csrf}, "name": {"acme-customers"}, "url": {"https://acme.example/c"}, "event_type": {"Customer:after_insert"}, "enabled": {"on"}}
	if res, body := s.do("POST", "/portal/webhooks", form, ck, nil); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("create with a declared event: %d\n%s", res.StatusCode, body)
	}
	if w, err := s.hooks.Get(ctx, "acme", "acme-customers"); err != nil || w.DocType != "Customer" || w.DocEvent != "after_insert" {
		t.Errorf("created %+v, %v", w, err)
	}
}

// TestRevealSecret: a GET asks first and shows nothing secret; the secret
// is shown by a POST carrying the session's CSRF token, with the snippets
// of the webhook's schemes; another tenant's webhook is 404.
func TestRevealSecret(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	s.withAcme()
	ctx := context.Background()
	secret, err := signing.GenerateSecret()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.hooks.Update(ctx, "acme", "acme-orders", webhook.Input{Secret: ptr(string(secret)), Signature: ptr("standard")}); err != nil {
		t.Fatal(err)
	}
	ck := s.acmePortal()
	shows := func(body string) bool { return strings.Contains(html.UnescapeString(body), string(secret)) }
	res, body := s.do("GET", "/portal/webhooks/acme-orders/secret", nil, ck, nil)
	if res.StatusCode != http.StatusOK || shows(body) || !strings.Contains(body, `id="reveal-confirm"`) {
		t.Fatalf("the confirmation: %d\n%s", res.StatusCode, body)
	}
	if res, body := s.do("POST", "/portal/webhooks/acme-orders/secret", url.Values{"csrf": {"forged"}}, ck, nil); res.StatusCode != http.StatusForbidden || shows(body) {
		t.Fatalf("a reveal without the CSRF token: %d", res.StatusCode)
	}
	csrf := s.csrf(ck, "/portal/webhooks/acme-orders/secret")
	res, body = s.do("POST", "/portal/webhooks/acme-orders/secret", url.Values{"csrf": {csrf}}, ck, nil)
	if m := secretPre.FindStringSubmatch(body); res.StatusCode != http.StatusOK || m == nil || html.UnescapeString(m[1]) != string(secret) {
		t.Fatalf("the reveal: %d\n%s", res.StatusCode, body)
	}
	for _, want := range []string{`id="snippet-node"`, `id="snippet-python"`, `id="snippet-go"`, "npm install standardwebhooks", "pip install standardwebhooks",
		"go get github.com/standard-webhooks/standard-webhooks/libraries@v1.3.0"} {
		if !strings.Contains(body, want) {
			t.Errorf("the reveal lacks %s", want)
		}
	}
	if strings.Contains(body, `id="snippet-frappe"`) {
		t.Errorf("a standard-only webhook shows the Frappe snippet")
	}
	if res, _ := s.do("POST", "/portal/webhooks/orders/secret", url.Values{"csrf": {csrf}}, ck, nil); res.StatusCode != http.StatusNotFound {
		t.Errorf("another tenant's secret: %d, want 404", res.StatusCode)
	}
	if res, _ := s.do("GET", "/portal/webhooks/orders/secret", nil, ck, nil); res.StatusCode != http.StatusNotFound {
		t.Errorf("another tenant's reveal page: %d, want 404", res.StatusCode)
	}
}

// TestSnippetsFollowTheSchemeAndTheSecret: a whsec_ secret is read as
// base64 and a raw one (a Frappe user's) as its bytes, in every library's
// terms; Frappe's snippet shows with the Frappe scheme, and none without a
// signature.
func TestSnippetsFollowTheSchemeAndTheSecret(t *testing.T) {
	t.Parallel()
	ids := func(sn []console.Snippet) string {
		var out []string
		for _, s := range sn {
			out = append(out, s.ID)
		}
		return strings.Join(out, " ")
	}
	for scheme, want := range map[string]string{
		signing.SchemeBoth:     "snippet-node snippet-python snippet-go snippet-frappe",
		signing.SchemeStandard: "snippet-node snippet-python snippet-go",
		signing.SchemeFrappe:   "snippet-frappe",
		signing.SchemeNone:     "",
	} {
		if got := ids(console.Snippets(scheme, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")); got != want {
			t.Errorf("%s: %q, want %q", scheme, got, want)
		}
	}
	raw := map[string]string{}
	for _, sn := range console.Snippets(signing.SchemeStandard, "frappe-secret") {
		raw[sn.ID] = sn.Code
	}
	for id, want := range map[string]string{
		"snippet-node":   `{ format: "raw" }`,
		"snippet-python": `Webhook(os.environ["WEBHOOK_SECRET"].encode())`,
		"snippet-go":     `standardwebhooks.NewWebhookRaw([]byte(os.Getenv("WEBHOOK_SECRET")))`,
	} {
		if !strings.Contains(raw[id], want) {
			t.Errorf("%s for a raw secret lacks %s:\n%s", id, want, raw[id])
		}
	}
}

// TestFrappeSnippetVerifies runs the Frappe snippet, as the page shows it,
// in Python against signing.Frappe's header for a whsec_ and a raw secret:
// it accepts the signature, and refuses it for another body.
func TestFrappeSnippetVerifies(t *testing.T) {
	t.Parallel()
	py, err := exec.LookPath("python3")
	if err != nil {
		testenv.Require(t, "no python3 to run the Frappe snippet with (make test needs it for the Frappe app)")
	}
	var code string
	for _, sn := range console.Snippets(signing.SchemeFrappe, "raw") {
		if sn.ID == "snippet-frappe" {
			code = sn.Code
		}
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "snippet.py"), []byte(code), 0o644); err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"name": "SINV-1", "total": 1500.0}`)
	for _, secret := range []signing.Secret{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "a frappe-secret"} {
		sig := signing.Frappe(secret, body)
		check := `import sys; sys.path.insert(0, sys.argv[1]); from snippet import verified
print(verified(sys.argv[2].encode(), sys.argv[3]), verified(sys.argv[2].encode() + b" ", sys.argv[3]))`
		cmd := exec.Command(py, "-c", check, dir, string(body), sig)
		cmd.Env = append(os.Environ(), "WEBHOOK_SECRET="+string(secret))
		out, err := cmd.CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "True False" {
			t.Errorf("the Frappe snippet with %q: %v\n%s", secret, err, out)
		}
	}
}
