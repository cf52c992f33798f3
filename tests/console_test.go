package tests

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/homingdev/homing/internal/testing/testenv"
	"github.com/homingdev/homing/internal/testing/testreceiver"
)

// chromiumPath is Debian's chromium, which scripts/services.sh installs.
const chromiumPath = "/usr/bin/chromium"

// screenshotDir is where the test saves a PNG of each console page:
// $HOMING_SCREENSHOTS when set (make screenshots sets it to docs/console,
// whose pictures docs/console.md shows), else a directory of the system's
// temporary one, so that make test leaves the repository as it was.
func screenshotDir() string {
	if dir := os.Getenv("HOMING_SCREENSHOTS"); dir != "" {
		return dir
	}
	return filepath.Join(os.TempDir(), "homing-console-screenshots")
}

// TestConsoleInABrowser drives the delivery console in a real headless
// Chromium against real homing serve, worker and scheduler processes,
// PostgreSQL, Redis and HTTP receivers: sign in (a publish token is
// refused), watch a failing delivery appear with its error and next retry,
// Retry it once its receiver is back and see it Delivered, Resend it,
// Recover a webhook's Exhausted deliveries, and see a cross-site form and
// a POST without the CSRF token refused. Each page is saved as a PNG in
// screenshotDir.
func TestConsoleInABrowser(t *testing.T) {
	t.Parallel()
	requireChromium(t)
	s := newSystem(t)
	// A long schedule: a failed delivery waits an hour, so only Retry and
	// Recover send it again within the test.
	s.env = withEnv(s.env, "HOMING_RETRY_SCHEDULE", "1h")
	s.env = withEnv(s.env, "HOMING_API_ADDR", "127.0.0.1:0")
	s.start("worker", "worker started")
	s.start("scheduler", "scheduler started")
	c := s.startAPI(t)
	// The console is bounded as the API is: a login form declared over
	// api.max_body_bytes (2 MiB) is refused at once, before it is read.
	pr, pw := io.Pipe()
	t.Cleanup(func() { _ = pw.Close() })
	req, err := http.NewRequest("POST", c.base+"/console/login", pr)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.ContentLength = 3 << 20
	tooLarge := make(chan int, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			tooLarge <- -1
			return
		}
		_ = resp.Body.Close()
		tooLarge <- resp.StatusCode
	}()
	if _, err := pw.Write([]byte("token=")); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-tooLarge:
		if code != http.StatusRequestEntityTooLarge {
			t.Fatalf("console login declared over api.max_body_bytes, still being sent: %d, want 413", code)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("console login declared over api.max_body_bytes was not refused while it was being sent")
	}
	var pub map[string]any
	s.ok(t, &pub, "homing", "token", "create", "--name", "frappe", "--scope", "publish", "--json")
	publishToken, _ := pub["token"].(string)

	orders := testreceiver.Answering(t, http.StatusServiceUnavailable)
	billing := testreceiver.Answering(t, http.StatusInternalServerError)
	c.expect(t, http.StatusCreated, "POST", "/v1/webhooks", fmt.Sprintf(
		`{"name": "orders", "doctype": "Sales Order", "event": "on_submit", "url": %q}`, orders.URL+"/orders"))
	c.expect(t, http.StatusCreated, "POST", "/v1/webhooks", fmt.Sprintf(
		`{"name": "billing", "doctype": "Sales Invoice", "event": "on_submit", "url": %q, "max_retries": 0}`, billing.URL+"/billing"))
	c.expect(t, http.StatusAccepted, "POST", "/v1/events",
		`{"id": "so-console", "doc_type": "Sales Order", "doc_name": "SO-7", "event": "on_submit", "doc": {"name": "SO-7", "grand_total": 1500}}`)
	c.expect(t, http.StatusAccepted, "POST", "/v1/events",
		`{"id": "si-console", "doc_type": "Sales Invoice", "doc_name": "SI-3", "event": "on_submit", "doc": {"name": "SI-3"}}`)

	// A page of another site that posts to the console without the CSRF
	// token, the way an attacker's page would.
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<form id="f" method="post" action="%s/console/webhooks/orders/disable"></form><script>document.getElementById("f").submit()</script>`, c.base)
	}))
	t.Cleanup(evil.Close)
	evilURL := strings.Replace(evil.URL, "127.0.0.1", "localhost", 1) // another site, not just another port

	b := newBrowser(t, c.base, t.TempDir())
	t.Logf("screenshots of the console's pages: %s", screenshotDir())

	// Without a session every page sends the browser to the login form.
	b.run(chromedp.Navigate(c.base + "/console/deliveries"))
	if u := b.location(); !strings.HasSuffix(u, "/console/login") {
		t.Fatalf("without a session the console went to %s, want the login form", u)
	}
	b.shot("login")
	// A publish token is refused, saying why.
	b.login(publishToken)
	b.run(chromedp.WaitVisible(chromedp.CSS("#notice")))
	if txt := b.text("#notice"); !strings.Contains(txt, "scope publish") || !strings.Contains(txt, "scope admin") {
		t.Fatalf("publish token: %q", txt)
	}
	b.shot("login-refused")
	b.login(c.token)
	eventually(t, "the overview after signing in", func() (bool, string) {
		u := b.location()
		return strings.HasSuffix(u, "/console/"), u
	})

	// The failing delivery appears with its error and its next retry, an
	// hour after its failure, shown as the time from the page's load.
	id := s.deliveryOf(t, "so-console")
	next := *s.waitStatus(t, id, "Failed").NextRetry
	var row string
	start := time.Now()
	b.eventually("the failing delivery in the list", "/console/deliveries?webhook=orders", func() bool {
		row = b.text("#deliveries")
		return strings.Contains(row, "HTTP 503") && strings.Contains(row, "Retrying: attempt 2 of") && showsUntil(row, next, start, time.Now())
	})
	b.shot("deliveries")
	b.eventually("billing exhausted", "/console/deliveries?webhook=billing", func() bool {
		return strings.Contains(b.text("#deliveries"), "Gave up after")
	})
	// With the keyboard alone: Tab from the top reaches the skip link, then
	// the navigation; the filter's webhook is picked with the arrow keys,
	// an event ID typed, and the form sent from its button with Enter.
	b.keyboardFromTheTop("/console/deliveries")
	b.tabTo("filter-webhook")
	b.run(chromedp.KeyEvent(kb.ArrowDown)) // any → billing, the first webhook by name
	if v := b.eval(`document.activeElement.value`); v != "billing" {
		t.Fatalf("the webhook picker after ArrowDown: %q, want billing", v)
	}
	b.tabTo("filter-event_id")
	b.run(chromedp.KeyEvent("si-console"))
	b.tabTo("filter-submit")
	b.run(chromedp.KeyEvent(kb.Enter))
	b.arrived("the filter sent from the keyboard", func(u string) bool {
		return strings.Contains(u, "webhook=billing") && strings.Contains(u, "event_id=si-console")
	})
	if txt := b.text("#deliveries"); !strings.Contains(txt, "Gave up after") || strings.Contains(txt, "HTTP 503") {
		t.Fatalf("the deliveries the keyboard's filter lists: %q", txt)
	}
	// A time picked in the filter is UTC, and a bookmark's RFC 3339 time
	// lists the same rows.
	since := time.Now().UTC().Add(-time.Hour).Truncate(time.Minute)
	b.run(chromedp.Navigate(c.base + "/console/deliveries?since=" + since.Format(time.RFC3339)))
	if v := b.eval(`document.getElementById("filter-since").value`); v != since.Format("2006-01-02T15:04") {
		t.Errorf("the since picker shows %q for %s", v, since.Format(time.RFC3339))
	}
	const listed = `Array.from(document.querySelectorAll("#deliveries tr.delivery")).map(r => r.dataset.id).join(" ")`
	bookmarked := b.eval(listed)
	b.run(chromedp.Click(chromedp.CSS("#filter-submit")))
	b.arrived("the picker's since in the URL", func(u string) bool {
		return strings.Contains(u, "since="+url.QueryEscape(since.Format("2006-01-02T15:04")))
	})
	if picked := b.eval(listed); picked != bookmarked || !strings.Contains(picked, id) {
		t.Errorf("the picker's since lists %q, the bookmark's %q; want both to list %s", picked, bookmarked, id)
	}
	b.shot("deliveries-filtered")
	// Down to a phone's width: the page reflows, its tables scroll in place.
	b.run(chromedp.EmulateViewport(375, 812), chromedp.Navigate(c.base+"/console/deliveries"), chromedp.WaitVisible(chromedp.CSS("#deliveries")))
	if w := b.eval(`String(document.documentElement.scrollWidth)`); w != "375" {
		t.Errorf("at 375 px the page is %s px wide: something does not reflow", w)
	}
	b.shot("deliveries-narrow")
	b.run(chromedp.EmulateViewport(1280, 900))
	b.eventually("the overview to show both webhooks failing", "/console/", func() bool {
		txt := b.text("#troubled")
		return strings.Contains(txt, "orders") && strings.Contains(txt, "billing")
	})
	b.shot("overview")

	// Retry, with the receiver back: Delivered.
	orders.SetStatus(http.StatusOK)
	start = time.Now()
	b.run(chromedp.Navigate(c.base + "/console/deliveries/" + id))
	if txt := b.text("#next-retry"); !strings.Contains(txt, next.UTC().Format("2006-01-02 15:04:05Z")) || !showsUntil(txt, next, start, time.Now()) {
		t.Errorf("detail's next retry %q, want %s and the minutes until it from the page's load", txt, next.UTC().Format(time.RFC3339))
	}
	b.run(chromedp.Click(chromedp.CSS("#retry")), chromedp.WaitVisible(chromedp.CSS("#notice")))
	b.eventually("the retried delivery to be Delivered", "/console/deliveries/"+id, func() bool {
		return b.text("#status") == "Delivered"
	})
	b.shot("delivery")
	if n := len(orders.Requests()); n != 2 {
		t.Errorf("orders receiver got %d requests, want 2 (the failure and the retry)", n)
	}

	// Resend: a new delivery of the same payload, delivered too.
	b.run(chromedp.Click(chromedp.CSS("#resend")))
	var resent string
	eventually(t, "the resent delivery's page", func() (bool, string) {
		resent = b.location()
		return strings.Contains(resent, "notice=resent"), resent
	})
	if strings.Contains(resent, "/"+id+"?") {
		t.Fatalf("resend went to %s, want a new delivery", resent)
	}
	b.eventually("the resent delivery to be Delivered", strings.TrimPrefix(strings.SplitN(resent, "?", 2)[0], c.base), func() bool {
		return b.text("#status") == "Delivered"
	})
	eventually(t, "the receiver to get the resend", func() (bool, string) {
		got := orders.Requests()
		return len(got) == 3 && string(got[2].Body) == string(got[1].Body), fmt.Sprintf("%d requests", len(got))
	})

	// Recover billing's Exhausted delivery: count first, then run.
	billing.SetStatus(http.StatusOK)
	b.run(chromedp.Navigate(c.base + "/console/webhooks/billing"))
	b.shot("webhook")
	b.run(chromedp.Click(chromedp.CSS("#count")), chromedp.WaitVisible(chromedp.CSS("#dry-run")))
	if txt := b.text("#dry-run"); !strings.Contains(txt, "Dry run: 1 retrying or given up") {
		t.Fatalf("dry run: %q", txt)
	}
	b.shot("recover-count")
	if n := len(billing.Requests()); n != 1 {
		t.Fatalf("the dry run sent something: billing got %d requests", n)
	}
	b.run(chromedp.Click(chromedp.CSS("#run")), chromedp.WaitVisible(chromedp.CSS("#result")))
	if txt := b.text("#result"); !strings.Contains(txt, "Requeued 1 of 1") {
		t.Fatalf("recover: %q", txt)
	}
	b.shot("recover-run")
	eventually(t, "billing's recovered delivery to arrive", func() (bool, string) {
		return len(billing.Requests()) == 2, fmt.Sprintf("%d requests", len(billing.Requests()))
	})
	b.run(chromedp.Navigate(c.base + "/console/webhooks"))
	b.shot("webhooks")
	b.run(chromedp.Navigate(c.base+"/console/new-webhook"), chromedp.WaitVisible(chromedp.CSS("#webhook-form")))
	b.shot("webhook-new")
	// Ordered delivery is chosen in the form: orders, edited to deliver
	// each document's versions in order, says so on its page and in the API.
	b.run(chromedp.Navigate(c.base+"/console/webhooks/orders/edit"), chromedp.WaitVisible(chromedp.CSS("#ordering")))
	if v := b.eval(`document.getElementById("ordering").value`); v != "none" {
		t.Fatalf("orders' order in its edit form: %q, want none", v)
	}
	b.run(chromedp.SetValue(chromedp.CSS("#ordering"), "document"), chromedp.Click(chromedp.CSS("#save")),
		chromedp.WaitVisible(chromedp.CSS("dd#ordering")))
	if txt := b.text("dd#ordering"); !strings.Contains(txt, "by document") {
		t.Fatalf("orders' page after choosing by document: %q", txt)
	}
	if r := c.expect(t, http.StatusOK, "GET", "/v1/webhooks/orders", ""); r.body["ordering"] != "document" {
		t.Fatalf("orders after the browser's edit: %s, want ordering document", r.raw)
	}

	// A cross-site form without the CSRF token is refused, and does nothing.
	b.run(chromedp.Navigate(evilURL), chromedp.WaitVisible(chromedp.CSS("#message")))
	if txt := b.text("#message"); !strings.Contains(txt, "refused") {
		t.Fatalf("cross-site POST: %q", txt)
	}
	b.shot("cross-site-refused")
	// From the console's own origin too, a POST without the form's CSRF
	// token is refused (the cookie alone is not enough).
	b.run(chromedp.Navigate(c.base + "/console/webhooks/orders"))
	status, err := do(b, chromedp.Evaluate[int](
		`fetch("/console/webhooks/orders/disable", {method: "POST", body: new URLSearchParams({csrf: "forged"})}).then(r => r.status)`,
		chromedp.EvalAwaitPromise))
	if err != nil || status != http.StatusForbidden {
		t.Fatalf("same-origin POST without the CSRF token: %d, %v; want 403", status, err)
	}
	if r := c.expect(t, http.StatusOK, "GET", "/v1/webhooks/orders", ""); r.body["enabled"] != true {
		t.Fatalf("the cross-site POST disabled orders: %s", r.raw)
	}
}

// browser is one Chromium tab on the console.
// requireChromium skips a browser test under -short, and fails it in CI
// (testenv.Require) or skips it elsewhere when Chromium is missing.
func requireChromium(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end test: builds the binaries and runs them, with Chromium, against PostgreSQL and Redis")
	}
	if _, err := os.Stat(chromiumPath); err != nil {
		testenv.Require(t, fmt.Sprintf("no Chromium at %s (apt-get install chromium; scripts/services.sh installs it): %v", chromiumPath, err))
	}
}

// newBrowser starts a headless Chromium on base for t, stopped with it,
// its profile in userDataDir, with extra options after the common ones; and
// makes sure the screenshot directory exists.
func newBrowser(t *testing.T, base, userDataDir string, extra ...chromedp.ExecAllocatorOption) browser {
	t.Helper()
	opts := append([]chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.NoFirstRun, chromedp.Flag("disable-sync", true), chromedp.UserDataDir(userDataDir),
		chromedp.WindowSize(1280, 900)}, extra...)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(cancel)
	// The first Run starts the browser, and a deadline on its context
	// would stop the browser with it: only the steps after it are bounded
	// (browserStep).
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	if err := os.MkdirAll(screenshotDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	return browser{t: t, ctx: ctx, base: base}
}

// browserStep bounds one step in the browser (a navigation and what waits
// for its page, a script, a screenshot): a stall's bound, not a speed. A
// deadline on the whole session, as there was (4 minutes), ended
// TestPortalCustomerInABrowser on a busy machine while every step still
// moved: the session also waits for processes and builds a Go program.
const browserStep = 2 * time.Minute

type browser struct {
	t    *testing.T
	ctx  context.Context // the tab's; it has no deadline
	base string
}

// do runs one action in b's tab within browserStep.
func do[T any](b browser, a chromedp.Action[T]) (T, error) {
	ctx, cancel := context.WithTimeout(b.ctx, browserStep)
	defer cancel()
	return chromedp.Run(ctx, a)
}

func (b browser) run(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if _, err := do(b, chromedp.Steps(steps...)); err != nil {
		b.t.Fatalf("browser: %v", err)
	}
}

func (b browser) text(sel string) string {
	b.t.Helper()
	s, err := do(b, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		b.t.Fatalf("browser: text of %s: %v", sel, err)
	}
	return strings.TrimSpace(s)
}

func (b browser) location() string {
	b.t.Helper()
	u, err := do(b, chromedp.Location())
	if err != nil {
		b.t.Fatalf("browser: location: %v", err)
	}
	return u
}

func (b browser) login(token string) {
	b.t.Helper()
	b.run(chromedp.Navigate(b.base+"/console/login"), chromedp.SetValue(chromedp.CSS("#token"), token),
		chromedp.Click(chromedp.CSS("#signin")))
}

// arrived waits until the page the browser is on has a URL match accepts
// and has loaded. A form sent by a key or a click navigates on its own
// time: a query made meanwhile can meet the page being left, or a node of
// a document already replaced ("No node with given id found"). The URL
// and the document's state are read in one script, so both are the same
// page's; a script cut short by the navigation is retried.
func (b browser) arrived(what string, match func(url string) bool) {
	b.t.Helper()
	eventually(b.t, what, func() (bool, string) {
		s, err := do(b, chromedp.Evaluate[string](`location.href + " " + document.readyState`))
		if err != nil {
			return false, err.Error()
		}
		u, state, _ := strings.Cut(s, " ")
		return match(u) && state == "complete", s
	})
}

// eventually reloads path until cond holds, or fails at the deadline.
func (b browser) eventually(what, path string, cond func() bool) {
	b.t.Helper()
	eventually(b.t, what, func() (bool, string) {
		b.run(chromedp.Navigate(b.base + path))
		return cond(), b.location()
	})
}

// eval runs a script in the page and returns its string.
func (b browser) eval(script string) string {
	b.t.Helper()
	v, err := do(b, chromedp.Evaluate[string](script))
	if err != nil {
		b.t.Fatalf("browser: %s: %v", script, err)
	}
	return v
}

// focused names the element that has the focus: its id, else its tag.
func (b browser) focused() string {
	b.t.Helper()
	return b.eval(`(() => { const e = document.activeElement; return e ? (e.id || e.tagName.toLowerCase()) : "" })()`)
}

// keyboardFromTheTop loads path and checks, with the Tab key only, that the
// first stop is the skip link, shown once focused, and the next one is in
// the labelled main navigation; and that the skip link, pressed with
// Enter, takes the focus to the main content.
func (b browser) keyboardFromTheTop(path string) {
	b.t.Helper()
	b.run(chromedp.Navigate(b.base+path), chromedp.WaitVisible(chromedp.CSS("main")))
	b.run(chromedp.KeyEvent(kb.Tab))
	if f := b.focused(); f != "skip-link" {
		b.t.Fatalf("%s: the first Tab reached %q, want the skip link", path, f)
	}
	if top := b.eval(`String(document.activeElement.getBoundingClientRect().top >= 0)`); top != "true" {
		b.t.Errorf("%s: the focused skip link is not on the screen", path)
	}
	b.run(chromedp.KeyEvent(kb.Tab))
	if nav := b.eval(`(() => { const n = document.activeElement.closest("nav"); return n ? n.getAttribute("aria-label") || "unlabelled" : "" })()`); nav != "Main" {
		b.t.Fatalf("%s: the second Tab reached %q, in navigation %q; want the Main navigation", path, b.focused(), nav)
	}
	b.run(chromedp.KeyEvent(kb.Tab, chromedp.KeyModifiers(chromedp.ModifierShift))) // back to the skip link
	if f := b.focused(); f != "skip-link" {
		b.t.Fatalf("%s: Shift+Tab went back to %q, want the skip link", path, f)
	}
	b.run(chromedp.KeyEvent(kb.Enter))
	if f := b.focused(); f != "main" {
		b.t.Fatalf("%s: the skip link took the focus to %q, want main", path, f)
	}
}

// tabTo presses Tab until the element with id has the focus.
func (b browser) tabTo(id string) {
	b.t.Helper()
	for range 80 {
		if b.focused() == id {
			return
		}
		b.run(chromedp.KeyEvent(kb.Tab))
	}
	b.t.Fatalf("80 Tabs never reached #%s (the focus is on %q)", id, b.focused())
}

// shot saves the page as name.png in screenshotDir.
func (b browser) shot(name string) {
	b.t.Helper()
	png, err := do(b, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("browser: screenshot: %v", err)
	}
	if err := os.WriteFile(filepath.Join(screenshotDir(), name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// showsUntil reports whether txt says "in Nm" for next, as the console
// writes it, seen from some moment between from and to (the page's load):
// whole minutes, rounded down.
func showsUntil(txt string, next, from, to time.Time) bool {
	for m := int(next.Sub(to) / time.Minute); m <= int(next.Sub(from)/time.Minute); m++ {
		if strings.Contains(txt, fmt.Sprintf("in %dm", m)) {
			return true
		}
	}
	return false
}
