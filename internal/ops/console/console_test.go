package console_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/homingdev/homing/internal/engine/delivery/send"
	"github.com/homingdev/homing/internal/engine/ratelimit"
	"github.com/homingdev/homing/internal/engine/webhook"
	"github.com/homingdev/homing/internal/intake/dbstate"
	"github.com/homingdev/homing/internal/lib/clock"
	"github.com/homingdev/homing/internal/ops/console"
	"github.com/homingdev/homing/internal/ops/portal"
	"github.com/homingdev/homing/internal/ops/recovery"
	"github.com/homingdev/homing/internal/ops/token"
	"github.com/homingdev/homing/internal/testing/testenv"
	"github.com/homingdev/homing/models"
	"github.com/homingdev/homing/tasks"
)

func ptr[T any](v T) *T { return &v }

// site is one test's console on its own PostgreSQL database, with a token of
// each scope and one webhook with a Failed delivery.
type site struct {
	t     testing.TB
	db    *gorm.DB
	srv   *httptest.Server
	hooks *webhook.Service
	rec   *recovery.Service
	redis asynq.RedisClientOpt
	// limiter holds the webhooks' test-send budgets, in that Redis.
	limiter *ratelimit.Limiter
	admin   string
	publish string
	links   *portal.Links
	console *console.Console
}

// portalKey signs the test sites' portal links.
var portalKey = []byte("console test portal key, 32 byte")

func newSite(t testing.TB) *site {
	t.Helper()
	return newSiteOn(t, testenv.Postgres(t), nil, nil)
}

// newSiteOn is newSite on db, with the database watcher and the log the
// console is given (nil: none).
func newSiteOn(t testing.TB, db *gorm.DB, watcher *dbstate.Watcher, log *slog.Logger) *site {
	t.Helper()
	box := testenv.SecretBox(t)
	var err error
	clk := clock.Real{}
	tokens := token.New(db, clk, nil)
	hooks := webhook.New(db, box, clk, webhook.Defaults{MaxRetries: 3, Timeout: time.Second}, nil)
	sender := send.NewSender(send.SenderConfig{}) // the receivers are on loopback
	t.Cleanup(sender.Close)
	s := &site{t: t, db: db, hooks: hooks}
	var rdb *redis.Client
	s.redis, rdb = testenv.Redis(t)
	// Test sends draw on a Redis budget, as in homing serve.
	s.limiter = ratelimit.New(rdb)
	hooks.SetSender(sender, s.limiter)
	ctx := context.Background()
	if _, s.admin, err = tokens.Create(ctx, "ops", token.ScopeAdmin, ""); err != nil {
		t.Fatal(err)
	}
	if _, s.publish, err = tokens.Create(ctx, "frappe", token.ScopePublish, ""); err != nil {
		t.Fatal(err)
	}
	w, err := hooks.Create(ctx, "", webhook.Input{Name: ptr("orders"), DocType: ptr("Sales Order"), Event: ptr("on_submit"), URL: ptr("https://example.com/hook")})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	next, code := now.Add(4*time.Minute+30*time.Second), 503
	if err := db.Create(&models.Delivery{ID: "d-1", WebhookID: w.ID, WebhookName: "orders", EventID: "ev-1", DocType: "Sales Order",
		DocName: "SO-1", DocEvent: "on_submit", Method: "POST", URL: "https://example.com/hook", Payload: []byte(`{"name":"SO-1"}`),
		Status: models.StatusFailed, Attempts: 1, MaxRetries: 3, NextRetry: &next, LastStatusCode: &code, LastError: "HTTP 503",
		CreatedAt: now.Add(-time.Hour), UpdatedAt: now}).Error; err != nil {
		t.Fatal(err)
	}
	insp := asynq.NewInspector(s.redis)
	t.Cleanup(func() { _ = insp.Close() })
	s.links = portal.New(db, portalKey, clk)
	s.rec = recovery.New(db, clk, 0)
	s.console = console.New(console.Config{DB: db, Webhooks: hooks, Recovery: s.rec, Tokens: tokens,
		AsynqmonURL: "http://127.0.0.1:8080", Tasks: insp, DisableAfter: 120 * time.Hour, Portal: s.links, Clock: clk,
		Database: watcher, Logger: log})
	s.srv = httptest.NewServer(s.console)
	t.Cleanup(s.srv.Close)
	return s
}

// do sends a request without following redirects and returns the answer
// and its body. An HTML page's form controls must each have a label
// (checkLabels).
func (s *site) do(method, path string, form url.Values, cookie *http.Cookie, header map[string]string) (*http.Response, string) {
	s.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, s.srv.URL+path, body)
	if err != nil {
		s.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if cookie != nil {
		req.AddCookie(cookie)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := c.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		s.t.Fatal(err)
	}
	if _, bench := s.t.(*testing.B); !bench {
		checkLabels(s.t, method+" "+path, res, string(b)) // every page every test renders
	}
	return res, string(b)
}

// login signs in with tok and returns the session cookie.
func (s *site) login(tok string) *http.Cookie {
	s.t.Helper()
	res, body := s.do("POST", "/console/login", url.Values{"token": {tok}}, nil, nil)
	if res.StatusCode != http.StatusSeeOther {
		s.t.Fatalf("login: %d %s", res.StatusCode, body)
	}
	for _, c := range res.Cookies() {
		if c.Name == console.CookieName {
			return c
		}
	}
	s.t.Fatal("login set no session cookie")
	return nil
}

var csrfInput = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

// csrf reads the CSRF value from a page's form.
func (s *site) csrf(cookie *http.Cookie, path string) string {
	s.t.Helper()
	_, body := s.do("GET", path, nil, cookie, nil)
	m := csrfInput.FindStringSubmatch(body)
	if m == nil {
		s.t.Fatalf("%s has no CSRF field", path)
	}
	return m[1]
}

func TestPagesWithoutSessionRedirectToLogin(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	bogus := &http.Cookie{Name: console.CookieName, Value: "hmg_not-a-token"}
	publish := &http.Cookie{Name: console.CookieName, Value: s.publish}
	for _, path := range []string{"/console/", "/console/deliveries", "/console/deliveries/d-1", "/console/webhooks", "/console/webhooks/orders"} {
		for _, c := range []*http.Cookie{nil, bogus, publish} {
			res, _ := s.do("GET", path, nil, c, nil)
			if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/console/login" {
				t.Errorf("GET %s with cookie %v: %d to %q, want 303 to /console/login", path, c, res.StatusCode, res.Header.Get("Location"))
			}
		}
	}
	res, body := s.do("GET", "/console/login", nil, nil, nil)
	if res.StatusCode != http.StatusOK || !strings.Contains(body, `name="token"`) {
		t.Errorf("login form: %d, no token field", res.StatusCode)
	}
}

func TestLoginSetsAStrictHttpOnlyCookie(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	c := s.login(s.admin)
	if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Secure || c.Path != "/console/" {
		t.Errorf("cookie %+v, want HttpOnly, SameSite=Strict, not Secure over plain HTTP, Path /console/", c)
	}
	// Behind a proxy that terminated TLS, the cookie is Secure.
	res, _ := s.do("POST", "/console/login", url.Values{"token": {s.admin}}, nil, map[string]string{"X-Forwarded-Proto": "https"})
	if cs := res.Cookies(); len(cs) != 1 || !cs[0].Secure {
		t.Errorf("cookies behind a TLS proxy %v, want one Secure cookie", cs)
	}
	res, body := s.do("GET", "/console/", nil, c, nil)
	if res.StatusCode != http.StatusOK || !strings.Contains(body, "Overview") || !strings.Contains(body, `http-equiv="refresh"`) {
		t.Fatalf("overview: %d\n%s", res.StatusCode, body)
	}
	for path, want := range map[string][]string{
		"/console/deliveries":                  {"d-1", "1/4", "in 4m", "HTTP 503"}, // inspect.Delivery.AttemptsText
		"/console/deliveries?status=Failed":    {"d-1"},
		"/console/deliveries?status=Delivered": {"No deliveries match"},
		"/console/deliveries/d-1":              {"HTTP 503", "<dd>1/4</dd>", "&#34;name&#34;: &#34;SO-1&#34;", "next attempt"},
		"/console/webhooks":                    {"orders", "Sales Order"},
		// d-1 is Failed: no final latency yet; its first attempt's is shown.
		"/console/webhooks/orders": {"orders", "HTTP 503", "Count first", "p50 –, p99 – (0 deliveries)", "to its first attempt: p50 "},
	} {
		res, body := s.do("GET", path, nil, c, nil)
		if res.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %d", path, res.StatusCode)
		}
		for _, w := range want {
			if !strings.Contains(body, w) {
				t.Errorf("GET %s does not show %q", path, w)
			}
		}
	}
	if res, body := s.do("GET", "/console/deliveries?status=Lost", nil, c, nil); res.StatusCode != http.StatusBadRequest || !strings.Contains(body, "is not one of") {
		t.Errorf("bad status filter: %d", res.StatusCode)
	}
}

func TestLoginRefusesAPublishToken(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	res, body := s.do("POST", "/console/login", url.Values{"token": {s.publish}}, nil, nil)
	if res.StatusCode != http.StatusForbidden || !strings.Contains(body, "scope publish") || !strings.Contains(body, "scope admin") {
		t.Errorf("publish token: %d\n%s", res.StatusCode, body)
	}
	if len(res.Cookies()) != 0 {
		t.Errorf("publish token got cookies %v", res.Cookies())
	}
	if res, _ := s.do("POST", "/console/login", url.Values{"token": {"hmg_unknown"}}, nil, nil); res.StatusCode != http.StatusUnauthorized {
		t.Errorf("unknown token: %d, want 401", res.StatusCode)
	}
}

// TestPostsNeedCSRFAndTheSameOrigin: a form that changes state is refused
// with 403 without the session's CSRF value, or from another site, and the
// webhook stays enabled; the console's own form disables it.
func TestPostsNeedCSRFAndTheSameOrigin(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	c := s.login(s.admin)
	token := s.csrf(c, "/console/webhooks/orders")
	for name, tc := range map[string]struct {
		form   url.Values
		header map[string]string
	}{
		"no csrf":        {url.Values{}, nil},
		"wrong csrf":     {url.Values{"csrf": {strings.Repeat("0", 64)}}, nil},
		"cross-site":     {url.Values{"csrf": {token}}, map[string]string{"Sec-Fetch-Site": "cross-site"}},
		"same-site":      {url.Values{"csrf": {token}}, map[string]string{"Sec-Fetch-Site": "same-site"}},
		"another origin": {url.Values{"csrf": {token}}, map[string]string{"Origin": "http://evil.example"}},
	} {
		res, _ := s.do("POST", "/console/webhooks/orders/disable", tc.form, c, tc.header)
		if res.StatusCode != http.StatusForbidden {
			t.Errorf("%s: %d, want 403", name, res.StatusCode)
		}
	}
	if w, err := s.hooks.Get(context.Background(), "", "orders"); err != nil || !w.Enabled {
		t.Fatalf("webhook after refused posts: enabled %v, %v", w.Enabled, err)
	}
	res, _ := s.do("POST", "/console/webhooks/orders/disable", url.Values{"csrf": {token}}, c,
		map[string]string{"Origin": s.srv.URL, "Sec-Fetch-Site": "same-origin"})
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("disable from the console: %d", res.StatusCode)
	}
	if w, err := s.hooks.Get(context.Background(), "", "orders"); err != nil || w.Enabled {
		t.Fatalf("webhook after disable: enabled %v, %v", w.Enabled, err)
	}
	var d models.Delivery
	if err := s.db.Take(&d, "id = ?", "d-1").Error; err != nil || d.Status != models.StatusExhausted {
		t.Errorf("pending delivery after disable: %s, %v; want Exhausted", d.Status, err)
	}
}

// TestRecoverCountsFirstThenRuns: the dry run only counts; the run
// requeues and says how many.
func TestRecoverCountsFirstThenRuns(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	c := s.login(s.admin)
	tok := s.csrf(c, "/console/webhooks/orders")
	if err := s.db.Model(&models.Delivery{}).Where("id = ?", "d-1").
		Updates(map[string]any{"status": models.StatusExhausted, "next_retry": nil, "attempts": 0}).Error; err != nil { // no attempt rows: recovery requeues only settled rows
		t.Fatal(err)
	}
	since := time.Now().UTC().Add(-2 * time.Hour).Format("2006-01-02T15:04")
	res, body := s.do("POST", "/console/webhooks/orders/recover", url.Values{"csrf": {tok}, "since": {since}, "status": {"Exhausted"}, "step": {"count"}}, c, nil)
	if res.StatusCode != http.StatusOK || !strings.Contains(body, "Dry run: <b>1</b>") {
		t.Fatalf("dry run: %d\n%s", res.StatusCode, body)
	}
	var d models.Delivery
	if err := s.db.Take(&d, "id = ?", "d-1").Error; err != nil || d.Status != models.StatusExhausted {
		t.Fatalf("after the dry run: %s, %v", d.Status, err)
	}
	res, body = s.do("POST", "/console/webhooks/orders/recover", url.Values{"csrf": {tok}, "since": {since}, "status": {"Exhausted"}, "step": {"run"}}, c, nil)
	if res.StatusCode != http.StatusOK || !strings.Contains(body, "Requeued 1 of 1") {
		t.Fatalf("run: %d\n%s", res.StatusCode, body)
	}
	if err := s.db.Take(&d, "id = ?", "d-1").Error; err != nil || d.Status != models.StatusFailed || d.NextRetry == nil {
		t.Fatalf("after the run: %s next %v, %v; want Failed and due", d.Status, d.NextRetry, err)
	}
}

// TestRecoverFormTakesFailedByDefault: during an outage the deliveries are
// Failed, waiting for their retry; the Recover form's default counts them
// with the Exhausted ones.
func TestRecoverFormTakesFailedByDefault(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	c := s.login(s.admin)
	tok := s.csrf(c, "/console/webhooks/orders")
	if err := s.db.Model(&models.Delivery{}).Where("id = ?", "d-1").Update("attempts", 0).Error; err != nil { // settled: no attempt rows
		t.Fatal(err)
	}
	if _, body := s.do("GET", "/console/webhooks/orders", nil, c, nil); !strings.Contains(body, `<option value="" selected>retrying and given up</option>`) {
		t.Errorf("the Recover form does not default to both statuses:\n%s", body)
	}
	since := time.Now().UTC().Add(-2 * time.Hour).Format("2006-01-02T15:04")
	res, body := s.do("POST", "/console/webhooks/orders/recover", url.Values{"csrf": {tok}, "since": {since}, "status": {""}, "step": {"count"}}, c, nil)
	if res.StatusCode != http.StatusOK || !strings.Contains(body, "Dry run: <b>1</b> retrying or given up delivery") {
		t.Fatalf("dry run: %d\n%s", res.StatusCode, body)
	}
}

// TestAsynqmonLinkOnlyWhileTheTaskExists: a Failed delivery waiting for its
// next_retry has no task yet (the sweeper queues it when due), so it gets
// no link that asynqmon would answer with "task not found"; once the retry
// task is queued, the page links to it.
func TestAsynqmonLinkOnlyWhileTheTaskExists(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	c := s.login(s.admin)
	if _, body := s.do("GET", "/console/deliveries/d-1", nil, c, nil); strings.Contains(body, `id="asynqmon"`) {
		t.Fatalf("waiting for its retry, the delivery links to a task that does not exist:\n%s", body)
	}
	cl := asynq.NewClient(s.redis)
	t.Cleanup(func() { _ = cl.Close() })
	if _, err := cl.Enqueue(tasks.NewRetryTask("d-1", "orders", tasks.DefaultQueue), asynq.ProcessIn(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, body := s.do("GET", "/console/deliveries/d-1", nil, c, nil); !strings.Contains(body, `href="http://127.0.0.1:8080/queues/default/tasks/webhook_retry::d-1"`) {
		t.Fatalf("with its retry task queued, the delivery does not link to it:\n%s", body)
	}
	// A tenant's own admin (here the default tenant's) never gets the
	// link: asynqmon is the operator's, and shows every tenant's payloads.
	_, tenantAdmin, err := token.New(s.db, nil, nil).Create(context.Background(), "default-admin", token.ScopeAdmin, models.DefaultTenant)
	if err != nil {
		t.Fatal(err)
	}
	if _, body := s.do("GET", "/console/deliveries/d-1", nil, s.login(tenantAdmin), nil); strings.Contains(body, `id="asynqmon"`) || !strings.Contains(body, "d-1") {
		t.Fatalf("a tenant token's console session links the delivery to asynqmon (or does not show it):\n%s", body)
	}
}

// TestLogoutEndsTheSession: signing out clears the cookie, and a console
// without api.asynqmon_url shows no asynqmon link.
func TestLogoutEndsTheSession(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	c := s.login(s.admin)
	tok := s.csrf(c, "/console/")
	res, _ := s.do("POST", "/console/logout", url.Values{"csrf": {tok}}, c, nil)
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/console/login" {
		t.Fatalf("logout: %d to %q", res.StatusCode, res.Header.Get("Location"))
	}
	var cleared bool
	for _, k := range res.Cookies() {
		cleared = cleared || (k.Name == console.CookieName && k.Value == "" && k.MaxAge < 0)
	}
	if !cleared {
		t.Errorf("logout did not clear the cookie: %v", res.Cookies())
	}

	bare := httptest.NewServer(console.New(console.Config{DB: s.db, Webhooks: s.hooks, Recovery: recovery.New(s.db, clock.Real{}, 0),
		Tokens: token.New(s.db, clock.Real{}, nil)}))
	t.Cleanup(bare.Close)
	req, err := http.NewRequest("GET", bare.URL+"/console/deliveries/d-1", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.AddCookie(c)
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	if r.StatusCode != http.StatusOK || strings.Contains(string(b), "asynqmon") {
		t.Errorf("without api.asynqmon_url: %d, link shown %v", r.StatusCode, strings.Contains(string(b), "asynqmon"))
	}
}

// A webhook's name is one segment of its pages' links, whatever it holds:
// a webhook named "a/../../b" links to its own page (its slashes escaped),
// and that page shows it, rather than a link the browser resolves to
// another path.
func TestWebhookLinksEscapeTheirName(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	const name = "a/../../b"
	if _, err := s.hooks.Create(context.Background(), "", webhook.Input{Name: ptr(name), DocType: ptr("Sales Order"), Event: ptr("on_submit"), URL: ptr("https://example.com/hook")}); err != nil {
		t.Fatal(err)
	}
	ck := s.login(s.admin)
	_, body := s.do("GET", "/console/webhooks", nil, ck, nil)
	const href = `href="/console/webhooks/a%2f..%2f..%2fb"`
	if !strings.Contains(strings.ToLower(body), href) {
		t.Fatalf("the webhooks page does not link %q as %s:\n%s", name, href, body)
	}
	res, page := s.do("GET", "/console/webhooks/a%2F..%2F..%2Fb", nil, ck, nil)
	if res.StatusCode != http.StatusOK || !strings.Contains(page, "a/../../b") {
		t.Fatalf("the escaped link: %d, want the webhook's page:\n%s", res.StatusCode, page)
	}
}

// The overview counts a webhook's failures as a person writes them: "1
// failure", "2 failures".
func TestOverviewCountsFailuresInWords(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	ctx := context.Background()
	if _, err := s.hooks.Create(ctx, "", webhook.Input{Name: ptr("billing"), DocType: ptr("Sales Invoice"), Event: ptr("on_submit"), URL: ptr("https://example.com/billing")}); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	for name, failures := range map[string]int{"orders": 1, "billing": 2} {
		var w models.Webhook
		if err := s.db.Where("name = ?", name).Take(&w).Error; err != nil {
			t.Fatal(err)
		}
		if err := s.db.Save(&models.WebhookHealth{WebhookID: w.ID, Failures: failures, FailingSince: &now}).Error; err != nil {
			t.Fatal(err)
		}
	}
	_, body := s.do("GET", "/console/", nil, s.login(s.admin), nil)
	for _, want := range []string{", 1 failure<", ", 2 failures<"} {
		if !strings.Contains(body, want) {
			t.Errorf("the overview does not say %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, "1 failures") {
		t.Error(`the overview says "1 failures"`)
	}
}
