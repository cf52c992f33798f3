package console_test

import (
	"context"
	"errors"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/homingdev/homing/internal/engine/signing"
	"github.com/homingdev/homing/internal/engine/tenant"
	"github.com/homingdev/homing/internal/engine/webhook"
	"github.com/homingdev/homing/internal/ops/token"
	"github.com/homingdev/homing/internal/testing/testreceiver"
	"github.com/homingdev/homing/models"
)

// shownSecret is the secret a secret page shows.
var shownSecret = regexp.MustCompile(`<pre id="secret">([^<]+)</pre>`)

// newForm is a valid create form.
func newForm(csrf, name, target string) url.Values {
	// event_type is the portal's picked event; the console reads doctype
	// and event.
	return url.Values{"csrf": {csrf}, "name": {name}, "doctype": {"Sales Order"}, "event": {"on_submit"}, "event_type": {"Sales Order:on_submit"}, "method": {"POST"},
		"url": {target}, "condition_language": {"expr"}, "structure": {"json"}, "enabled": {"on"},
		"template": {`{"order": "{{ doc.name }}"}`}, "headers": {"X-Shop: acme\nAuthorization: Bearer s3cret"}}
}

// Create from the console: the form, a refusal shown in it with what was
// typed kept and nothing stored, a generated secret shown once, and the
// CSRF check.
func TestCreateWebhookFromTheForm(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	c := s.login(s.admin)
	ctx := context.Background()
	res, body := s.do("GET", "/console/webhooks", nil, c, nil)
	if res.StatusCode != http.StatusOK || !strings.Contains(body, `href="/console/new-webhook"`) {
		t.Fatalf("webhooks page has no New webhook link: %d", res.StatusCode)
	}
	csrf := s.csrf(c, "/console/new-webhook")

	bad := newForm(csrf, "invoices", "ftp://example.com/x")
	res, body = s.do("POST", "/console/webhooks", bad, c, nil)
	if res.StatusCode != http.StatusBadRequest || !strings.Contains(body, `id="form-error" data-field="url"`) || !strings.Contains(html.UnescapeString(body), `"ftp://example.com/x" is not http(s)`) ||
		!strings.Contains(body, `value="invoices"`) || !strings.Contains(body, `value="ftp://example.com/x"`) {
		t.Fatalf("invalid url: %d\n%s", res.StatusCode, body)
	}
	if _, err := s.hooks.Get(ctx, "", "invoices"); !errors.Is(err, webhook.ErrNotFound) {
		t.Fatalf("a refused create stored the webhook: %v", err)
	}
	if res, body := s.do("POST", "/console/webhooks", newForm(csrf, "orders", "https://example.com/x"), c, nil); res.StatusCode != http.StatusConflict || !strings.Contains(body, "already exists") {
		t.Errorf("a name taken: %d\n%s", res.StatusCode, body)
	}
	if res, _ := s.do("POST", "/console/webhooks", newForm("", "invoices", "https://example.com/x"), c, nil); res.StatusCode != http.StatusForbidden {
		t.Errorf("without CSRF: %d, want 403", res.StatusCode)
	}

	good := newForm(csrf, "invoices", "https://example.com/invoices")
	good.Set("generate_secret", "on")
	res, body = s.do("POST", "/console/webhooks", good, c, nil)
	m := shownSecret.FindStringSubmatch(body)
	if res.StatusCode != http.StatusOK || m == nil || !strings.HasPrefix(m[1], "whsec_") {
		t.Fatalf("create with a generated secret: %d\n%s", res.StatusCode, body)
	}
	w, err := s.hooks.Get(ctx, "", "invoices")
	if err != nil || w.Secret == "" || w.Tenant != models.DefaultTenant || w.BodyTemplate != `{"order": "{{ doc.name }}"}` || w.Headers["X-Shop"] != "acme" {
		t.Fatalf("created webhook %+v, %v", w, err)
	}
	if sealed, ok := webhook.SealedHeader(w.Headers["Authorization"]); !ok || sealed == "" {
		t.Errorf("the Authorization header is stored %q, want sealed", w.Headers["Authorization"])
	}
	// Every name opens its own page, "new" too: the create form lives
	// outside webhooks/.
	if res, body := s.do("POST", "/console/webhooks", newForm(csrf, "new", "https://example.com/new"), c, nil); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("create a webhook named new: %d\n%s", res.StatusCode, body)
	}
	if res, body := s.do("GET", "/console/webhooks/new", nil, c, nil); res.StatusCode != http.StatusOK || !strings.Contains(body, "https://example.com/new") ||
		strings.Contains(body, `id="webhook-form"`) {
		t.Errorf("GET /console/webhooks/new is not the webhook named new: %d\n%s", res.StatusCode, body)
	}
	for _, path := range []string{"/console/webhooks/invoices", "/console/webhooks/invoices/edit", "/console/webhooks"} {
		if _, body := s.do("GET", path, nil, c, nil); strings.Contains(body, m[1]) || strings.Contains(body, "s3cret") {
			t.Errorf("%s shows the secret or the sealed header", path)
		}
	}
}

// The tenant's max_webhooks refuses a create from the portal with 409 in the
// form; the portal creates in its session's tenant, whatever the form says.
func TestPortalCreatesInItsTenantUpToItsLimit(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	s.withAcme()
	ctx := context.Background()
	if _, err := tenant.New(s.db, nil, nil).Update(ctx, "acme", tenant.Patch{MaxWebhooks: ptr(2)}); err != nil {
		t.Fatal(err)
	}
	link, err := s.links.Create(ctx, "acme", 0, token.Token{Name: "test"})
	if err != nil {
		t.Fatal(err)
	}
	ck := s.open(link.Token)
	csrf := s.csrf(ck, "/portal/new-webhook")
	form := newForm(csrf, "acme-invoices", "https://acme.example/invoices")
	form.Set("tenant", "default")
	res, _ := s.do("POST", "/portal/webhooks", form, ck, nil)
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/portal/webhooks/acme-invoices?notice=created" {
		t.Fatalf("portal create: %d to %q", res.StatusCode, res.Header.Get("Location"))
	}
	if _, err := s.hooks.Get(ctx, "acme", "acme-invoices"); err != nil {
		t.Fatalf("the portal's webhook is not acme's: %v", err)
	}
	res, body := s.do("POST", "/portal/webhooks", newForm(csrf, "acme-third", "https://acme.example/3"), ck, nil)
	if res.StatusCode != http.StatusConflict || !strings.Contains(body, "max_webhooks 2") || !strings.Contains(body, `value="acme-third"`) {
		t.Fatalf("past max_webhooks: %d\n%s", res.StatusCode, body)
	}
}

// Edit changes what was changed; a sealed header shown as **** is kept
// when the headers are left alone, and refused when sent back as ****; a
// refusal keeps the form.
func TestEditWebhook(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	c := s.login(s.admin)
	ctx := context.Background()
	if _, err := s.hooks.Update(ctx, "", "orders", webhook.Input{Headers: &[]string{"Authorization: Bearer s3cret", "X-Shop: acme"}}); err != nil {
		t.Fatal(err)
	}
	before, _ := s.hooks.Get(ctx, "", "orders")
	res, body := s.do("GET", "/console/webhooks/orders/edit", nil, c, nil)
	if res.StatusCode != http.StatusOK || !strings.Contains(body, "Authorization: ****") || strings.Contains(body, "s3cret") || !strings.Contains(body, `value="https://example.com/hook"`) {
		t.Fatalf("edit form: %d\n%s", res.StatusCode, body)
	}
	csrf := s.csrf(c, "/console/webhooks/orders/edit")
	form := url.Values{"csrf": {csrf}, "name": {"orders"}, "doctype": {"Sales Order"}, "event": {"on_submit"}, "method": {"POST"},
		"url": {"https://example.com/v2"}, "condition": {"doc.total > 1"}, "condition_language": {"expr"}, "structure": {"json"}, "enabled": {"on"},
		"headers": {"Authorization: ****\nX-Shop: acme\n"}, "headers_shown": {"Authorization: ****\nX-Shop: acme\n"}}
	res, _ = s.do("POST", "/console/webhooks/orders", form, c, nil)
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/console/webhooks/orders?notice=updated" {
		t.Fatalf("save: %d to %q", res.StatusCode, res.Header.Get("Location"))
	}
	after, _ := s.hooks.Get(ctx, "", "orders")
	if after.RequestURL != "https://example.com/v2" || after.Condition != "doc.total > 1" || after.Headers["Authorization"] != before.Headers["Authorization"] {
		t.Fatalf("after the edit: url %q condition %q, Authorization kept %v", after.RequestURL, after.Condition, after.Headers["Authorization"] == before.Headers["Authorization"])
	}
	form.Set("headers", "Authorization: ****\nX-Shop: globex")
	res, body = s.do("POST", "/console/webhooks/orders", form, c, nil)
	if res.StatusCode != http.StatusBadRequest || !strings.Contains(body, "type the value again") || !strings.Contains(body, "X-Shop: globex") {
		t.Fatalf("headers sent back masked: %d\n%s", res.StatusCode, body)
	}
	form.Set("headers", form.Get("headers_shown"))
	form.Set("condition", "doc.total >")
	res, body = s.do("POST", "/console/webhooks/orders", form, c, nil)
	if res.StatusCode != http.StatusBadRequest || !strings.Contains(body, `data-field="condition"`) || !strings.Contains(body, `value="doc.total &gt;"`) {
		t.Fatalf("bad condition: %d\n%s", res.StatusCode, body)
	}
	if w, _ := s.hooks.Get(ctx, "", "orders"); w.Condition != "doc.total > 1" {
		t.Errorf("a refused edit changed the condition to %q", w.Condition)
	}
	if res, _ := s.do("POST", "/console/webhooks/orders", url.Values{"name": {"x"}}, c, nil); res.StatusCode != http.StatusForbidden {
		t.Errorf("edit without CSRF: %d, want 403", res.StatusCode)
	}
}

// The delivery settings are in the form: shown as stored, changed by an
// edit, a bad number refused in the form with what was typed and nothing
// changed.
func TestEditDeliverySettings(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	c := s.login(s.admin)
	ctx := context.Background()
	was, _ := s.hooks.Get(ctx, "", "orders")
	_, body := s.do("GET", "/console/webhooks/orders/edit", nil, c, nil)
	for _, want := range []string{`name="max_retries" id="max_retries" value="` + strconv.Itoa(was.MaxRetries) + `"`, `name="timeout"`, `name="rate_limit"`,
		`name="follow_redirects"`, `name="queue" id="queue" value="default"`,
		`<option selected>` + webhook.ViewOf(was).Signature + `</option>`, `<option value="homing" selected>homing</option>`} {
		if !strings.Contains(body, want) {
			t.Errorf("edit form lacks %s", want)
		}
	}
	csrf := s.csrf(c, "/console/webhooks/orders/edit")
	form := url.Values{"csrf": {csrf}, "name": {"orders"}, "doctype": {"Sales Order"}, "event": {"on_submit"}, "method": {"POST"},
		"url": {"https://example.com/hook"}, "condition_language": {"expr"}, "structure": {"json"}, "enabled": {"on"},
		"max_retries": {"7"}, "timeout": {"1500ms"}, "rate_limit": {"20"}, "follow_redirects": {"2"}, "queue": {"critical"},
		"signature": {"standard"}, "compat": {"frappe"}}
	if res, body := s.do("POST", "/console/webhooks/orders", form, c, nil); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("save: %d\n%s", res.StatusCode, body)
	}
	w, _ := s.hooks.Get(ctx, "", "orders")
	if w.MaxRetries != 7 || w.Timeout() != 1500*time.Millisecond || w.RateLimit != 20 || w.FollowRedirects != 2 || w.Queue != "critical" ||
		w.SignatureScheme != "standard" || w.Compat != "frappe" {
		t.Fatalf("after the edit: retries %d timeout %s rate %d redirects %d queue %q signature %q compat %q",
			w.MaxRetries, w.Timeout(), w.RateLimit, w.FollowRedirects, w.Queue, w.SignatureScheme, w.Compat)
	}
	form.Set("compat", "homing")
	form.Set("max_retries", "seven")
	res, body := s.do("POST", "/console/webhooks/orders", form, c, nil)
	if res.StatusCode != http.StatusBadRequest || !strings.Contains(body, `data-field="max_retries"`) || !strings.Contains(body, `value="seven"`) {
		t.Fatalf("a bad number: %d\n%s", res.StatusCode, body)
	}
	form.Set("max_retries", "7")
	form.Set("timeout", "soon")
	if res, body := s.do("POST", "/console/webhooks/orders", form, c, nil); res.StatusCode != http.StatusBadRequest || !strings.Contains(body, `data-field="timeout"`) {
		t.Fatalf("a bad timeout: %d\n%s", res.StatusCode, body)
	}
	if w, _ := s.hooks.Get(ctx, "", "orders"); w.Compat != "frappe" {
		t.Errorf("a refused edit changed compat to %q", w.Compat)
	}
	form.Set("timeout", "1500ms")
	if res, body := s.do("POST", "/console/webhooks/orders", form, c, nil); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("save: %d\n%s", res.StatusCode, body)
	}
	if w, _ := s.hooks.Get(ctx, "", "orders"); w.Compat != "" || w.MaxRetries != 7 {
		t.Errorf("compat homing stored %q (want \"\"), retries %d", w.Compat, w.MaxRetries)
	}
}

// Rotate shows the new secret once; the old one stays valid for the CLI's
// default grace; later pages never show it.
func TestRotateSecretShowsItOnce(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	c := s.login(s.admin)
	ctx := context.Background()
	if _, err := s.hooks.RotateSecret(ctx, "", "orders", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", 0); err != nil {
		t.Fatal(err)
	}
	csrf := s.csrf(c, "/console/webhooks/orders")
	if res, _ := s.do("POST", "/console/webhooks/orders/rotate-secret", url.Values{}, c, nil); res.StatusCode != http.StatusForbidden {
		t.Errorf("rotate without CSRF: %d, want 403", res.StatusCode)
	}
	res, body := s.do("POST", "/console/webhooks/orders/rotate-secret", url.Values{"csrf": {csrf}}, c, nil)
	m := shownSecret.FindStringSubmatch(body)
	if res.StatusCode != http.StatusOK || m == nil || !strings.Contains(body, "valid for 24h0m0s") {
		t.Fatalf("rotate: %d\n%s", res.StatusCode, body)
	}
	w, err := s.hooks.Get(ctx, "", "orders")
	if err != nil || len(w.PreviousSecrets) != 1 {
		t.Fatalf("after rotation: %d previous secrets, %v", len(w.PreviousSecrets), err)
	}
	if _, err := signing.ParseSecret(html.UnescapeString(m[1])); err != nil {
		t.Errorf("shown secret %q: %v", m[1], err)
	}
	if _, body := s.do("GET", "/console/webhooks/orders", nil, c, nil); strings.Contains(html.UnescapeString(body), html.UnescapeString(m[1])) {
		t.Errorf("the webhook page shows the rotated secret")
	}
}

// Preview shows the request without sending it; Send test sends it once to
// the receiver and shows its answer, writing no delivery; one more with the
// webhook's test budget spent is refused; a document that is no JSON is refused with the
// text kept.
func TestPreviewAndTestSend(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	c := s.login(s.admin)
	ctx := context.Background()
	rc := testreceiver.New(t)
	hook, err := s.hooks.Create(ctx, "", webhook.Input{Name: ptr("try"), DocType: ptr("Sales Order"), Event: ptr("on_submit"), URL: ptr(rc.URL + "/try"),
		Template: ptr(`{"order": "{{ doc.name }}"}`), Headers: &[]string{"Authorization: Bearer s3cret"}, Secret: ptr("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")})
	if err != nil {
		t.Fatal(err)
	}
	page := func(body string) string { return html.UnescapeString(body) }
	csrf := s.csrf(c, "/console/webhooks/try")
	doc := `{"name": "SO-9"}`
	res, body := s.do("POST", "/console/webhooks/try/preview", url.Values{"csrf": {csrf}, "doc": {doc}}, c, nil)
	if res.StatusCode != http.StatusOK || !strings.Contains(page(body), `"order": "SO-9"`) || !strings.Contains(body, `<dd id="sendable">yes</dd>`) ||
		!strings.Contains(body, "Authorization: ****") || strings.Contains(body, "s3cret") || !strings.Contains(page(body), doc) {
		t.Fatalf("preview: %d\n%s", res.StatusCode, body)
	}
	if rc.Count() != 0 {
		t.Fatalf("a preview sent %d requests", rc.Count())
	}
	res, body = s.do("POST", "/console/webhooks/try/test", url.Values{"csrf": {csrf}, "doc": {doc}}, c, nil)
	if res.StatusCode != http.StatusOK || !strings.Contains(body, `id="test-status">200 (2xx)`) || !strings.Contains(page(body), `{"receipt":1}`) ||
		!strings.Contains(body, "wrote no delivery row") || strings.Contains(body, "s3cret") {
		t.Fatalf("test send: %d\n%s", res.StatusCode, body)
	}
	reqs := rc.Requests()
	if len(reqs) != 1 || string(reqs[0].Body) != `{"order": "SO-9"}` || reqs[0].Header.Get("Authorization") != "Bearer s3cret" ||
		signing.Verify("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", reqs[0].Header, reqs[0].Body, 0) != nil {
		t.Fatalf("the receiver got %d requests: %+v", len(reqs), reqs)
	}
	var n int64
	if err := s.db.Model(&models.Delivery{}).Where("webhook_name = ?", "try").Count(&n).Error; err != nil || n != 0 {
		t.Errorf("deliveries of a test send: %d, %v", n, err)
	}
	// The first send spent the second's budget; on a loaded machine the
	// second request may come after it refilled, so spend it for an hour
	// (the webhook service's key for test sends) and ask again.
	if err := s.limiter.Spend(ctx, "test:"+hook.ID, time.Hour); err != nil {
		t.Fatal(err)
	}
	if res, _ := s.do("POST", "/console/webhooks/try/test", url.Values{"csrf": {csrf}, "doc": {doc}}, c, nil); res.StatusCode != http.StatusTooManyRequests || rc.Count() != 1 {
		t.Errorf("a second test send with its budget spent: %d, receiver got %d; want 429 and 1", res.StatusCode, rc.Count())
	}
	res, body = s.do("POST", "/console/webhooks/try/preview", url.Values{"csrf": {csrf}, "doc": {`{"name": `}}, c, nil)
	if res.StatusCode != http.StatusBadRequest || !strings.Contains(body, "JSON object") || !strings.Contains(page(body), `{"name": `) {
		t.Errorf("a document that is no JSON: %d\n%s", res.StatusCode, body)
	}
	if res, _ := s.do("POST", "/console/webhooks/try/test", url.Values{"doc": {doc}}, c, nil); res.StatusCode != http.StatusForbidden || rc.Count() != 1 {
		t.Errorf("test send without CSRF: %d, want 403 and nothing sent", res.StatusCode)
	}
}

// A portal session answers every new page and action on another tenant's
// webhook with 404, and changes nothing of it.
func TestPortalWebhookActionsAreScoped(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	s.withAcme()
	ctx := context.Background()
	link, err := s.links.Create(ctx, "acme", 0, token.Token{Name: "test"})
	if err != nil {
		t.Fatal(err)
	}
	ck := s.open(link.Token)
	csrf := s.csrf(ck, "/portal/webhooks/acme-orders")
	before, _ := s.hooks.Get(ctx, "", "orders")
	for _, page := range []string{"/edit", "/secret"} {
		if res, _ := s.do("GET", "/portal/webhooks/orders"+page, nil, ck, nil); res.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s of default's orders: %d, want 404", page, res.StatusCode)
		}
	}
	for _, action := range []string{"", "/rotate-secret", "/secret", "/preview", "/test"} {
		form := newForm(csrf, "orders", "https://evil.example/x")
		if res, _ := s.do("POST", "/portal/webhooks/orders"+action, form, ck, nil); res.StatusCode != http.StatusNotFound {
			t.Errorf("POST /portal/webhooks/orders%s: %d, want 404", action, res.StatusCode)
		}
	}
	after, _ := s.hooks.Get(ctx, "", "orders")
	if after.RequestURL != before.RequestURL || after.Secret != before.Secret || !after.UpdatedAt.Equal(before.UpdatedAt) {
		t.Errorf("the portal changed default's orders: %+v", after)
	}
	if res, _ := s.do("GET", "/portal/webhooks/acme-orders/edit", nil, ck, nil); res.StatusCode != http.StatusOK {
		t.Errorf("edit of acme's own webhook: %d", res.StatusCode)
	}
}
