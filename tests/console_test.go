package tests

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/homingdev/homing/internal/testenv"
	"github.com/homingdev/homing/internal/testreceiver"
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
	if testing.Short() {
		t.Skip("end-to-end test: builds the binaries and runs them, with Chromium, against PostgreSQL and Redis")
	}
	if _, err := os.Stat(chromiumPath); err != nil {
		testenv.Require(t, fmt.Sprintf("no Chromium at %s (apt-get install chromium; scripts/services.sh installs it): %v", chromiumPath, err))
	}
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

	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromiumPath), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.NoFirstRun, chromedp.Flag("disable-sync", true), chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900))
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(cancel)
	ctx, cancelTimeout := context.WithTimeout(ctx, 4*time.Minute)
	t.Cleanup(cancelTimeout)

	b := browser{t: t, ctx: ctx, base: c.base}
	if err := os.MkdirAll(screenshotDir(), 0o755); err != nil {
		t.Fatal(err)
	}
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

	// The failing delivery appears with its error and its next retry.
	var row string
	b.eventually("the failing delivery in the list", "/console/deliveries?webhook=orders", func() bool {
		row = b.text("#deliveries")
		return strings.Contains(row, "HTTP 503") && strings.Contains(row, "Failed") && strings.Contains(row, "in 59m")
	})
	b.shot("deliveries")
	b.eventually("billing exhausted", "/console/deliveries?webhook=billing", func() bool {
		return strings.Contains(b.text("#deliveries"), "Exhausted")
	})
	b.eventually("the overview to show both webhooks failing", "/console/", func() bool {
		txt := b.text("#troubled")
		return strings.Contains(txt, "orders") && strings.Contains(txt, "billing")
	})
	b.shot("overview")

	// Retry, with the receiver back: Delivered.
	orders.SetStatus(http.StatusOK)
	id := s.deliveryOf(t, "so-console")
	b.run(chromedp.Navigate(c.base + "/console/deliveries/" + id))
	if txt := b.text("#next-retry"); !strings.Contains(txt, "in 59m") {
		t.Errorf("detail's next retry %q, want in 59m", txt)
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
	if txt := b.text("#dry-run"); !strings.Contains(txt, "Dry run: 1 Failed or Exhausted") {
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

	// A cross-site form without the CSRF token is refused, and does nothing.
	b.run(chromedp.Navigate(evilURL), chromedp.WaitVisible(chromedp.CSS("#message")))
	if txt := b.text("#message"); !strings.Contains(txt, "refused") {
		t.Fatalf("cross-site POST: %q", txt)
	}
	b.shot("cross-site-refused")
	// From the console's own origin too, a POST without the form's CSRF
	// token is refused (the cookie alone is not enough).
	b.run(chromedp.Navigate(c.base + "/console/webhooks/orders"))
	status, err := chromedp.Run(ctx, chromedp.Evaluate[int](
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
type browser struct {
	t    *testing.T
	ctx  context.Context
	base string
}

func (b browser) run(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, steps...); err != nil {
		b.t.Fatalf("browser: %v", err)
	}
}

func (b browser) text(sel string) string {
	b.t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		b.t.Fatalf("browser: text of %s: %v", sel, err)
	}
	return strings.TrimSpace(s)
}

func (b browser) location() string {
	b.t.Helper()
	u, err := chromedp.Run(b.ctx, chromedp.Location())
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

// eventually reloads path until cond holds, or fails at the deadline.
func (b browser) eventually(what, path string, cond func() bool) {
	b.t.Helper()
	eventually(b.t, what, func() (bool, string) {
		b.run(chromedp.Navigate(b.base + path))
		return cond(), b.location()
	})
}

// shot saves the page as name.png in screenshotDir.
func (b browser) shot(name string) {
	b.t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("browser: screenshot: %v", err)
	}
	if err := os.WriteFile(filepath.Join(screenshotDir(), name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}
