package tests

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/homingdev/homing/internal/testing/testenv"
	"github.com/homingdev/homing/internal/testing/testreceiver"
)

// TestPortalCustomerInABrowser is a SaaS's customer in the portal, in a real
// headless Chromium against real serve, worker and scheduler processes: it
// creates an endpoint by picking its event from the list (the pairs the
// tenant's deliveries record and those the operator declared), sees its
// signing secret, reveals it again after a confirmation, runs the Go
// verification snippet the page shows as a receiver, points the endpoint at
// it, and retries the delivery that failed before: the snippet verifies the
// real signed request (it answers 2xx only then) and the delivery reads
// "Delivered". Pages are saved as portal-customer-*.png in screenshotDir.
func TestPortalCustomerInABrowser(t *testing.T) {
	t.Parallel()
	requireChromium(t)
	goBin, err := exec.LookPath("go")
	if err != nil {
		testenv.Require(t, "no go command to build the Go verification snippet with: "+err.Error())
	}
	s := newSystem(t)
	// A failed delivery waits an hour: only the portal's Retry makes it
	// due within the test; the scheduler then sweeps it within a second.
	s.env = withEnv(s.env, "HOMING_RETRY_SCHEDULE", "1h")
	s.env = withEnv(s.env, "HOMING_API_ADDR", "127.0.0.1:0")
	s.start("worker", "worker started")
	s.start("scheduler", "scheduler started")
	op := s.startAPI(t)
	// The operator provisions the customer: a tenant with an event type
	// declared, and an endpoint of its own that has received Order events.
	op.expect(t, http.StatusCreated, "POST", "/v1/tenants", `{"name": "shop", "event_types": ["Invoice:on_submit"]}`)
	op.expect(t, http.StatusUnprocessableEntity, "PATCH", "/v1/tenants/shop", `{"event_types": ["Invoice:paid"]}`)
	var tok map[string]any
	s.ok(t, &tok, "homing", "token", "create", "--name", "shop-admin", "--scope", "admin", "--tenant", "shop", "--json")
	shop := op.withToken(tok["token"].(string))
	erp := testreceiver.Answering(t, http.StatusOK)
	shop.expect(t, http.StatusCreated, "POST", "/v1/webhooks", fmt.Sprintf(`{"name": "erp-sync", "doctype": "Order", "event": "on_submit", "url": %q}`, erp.URL+"/erp"))
	op.expect(t, http.StatusAccepted, "POST", "/v1/events", `{"tenant": "shop", "id": "ord-1", "doc_type": "Order", "doc_name": "O-1", "event": "on_submit", "doc": {"name": "O-1"}}`)
	eventually(t, "the Order event delivered", func() (bool, string) {
		r := shop.expect(t, http.StatusOK, "GET", "/v1/deliveries?event_id=ord-1", "")
		return strings.Contains(r.raw, `"status":"Delivered"`), r.raw
	})
	link := shop.expect(t, http.StatusCreated, "POST", "/v1/portal-links", `{"ttl": "1h"}`)
	linkURL, _ := link.body["url"].(string)

	b := newBrowser(t, op.base, t.TempDir())

	// New endpoint: the event is picked from the list; the operator's
	// settings are not in the form.
	b.run(chromedp.Navigate(linkURL), chromedp.WaitVisible(chromedp.CSS("#deliveries")))
	b.run(chromedp.Navigate(op.base+"/portal/webhooks"), chromedp.Click(chromedp.CSS("#new-webhook")), chromedp.WaitVisible(chromedp.CSS("#webhook-form")))
	if txt := b.text("#event_type"); !strings.Contains(txt, "Order · on_submit") || !strings.Contains(txt, "Invoice · on_submit") {
		t.Fatalf("the event list: %q", txt)
	}
	advanced, err := do(b, chromedp.Evaluate[[]string](`["#queue", "#compat", "#condition_language", "#url_template", "#follow_redirects", "#signature", "#doctype"].filter(s => document.querySelector(s))`))
	if err != nil {
		t.Fatal(err)
	}
	if len(advanced) != 0 {
		t.Errorf("the customer's form shows the operator's settings %v", advanced)
	}
	b.run(chromedp.SetValue(chromedp.CSS("#name"), "my-invoices"),
		chromedp.SetValue(chromedp.CSS("#description"), "Invoices into our books"),
		chromedp.SetValue(chromedp.CSS("#url"), "http://127.0.0.1:1/not-yet"),
		chromedp.SetValue(chromedp.CSS("#event_type"), "Invoice:on_submit"))
	b.shot("portal-customer-new")
	// The secret is generated unless the customer unticks it.
	b.run(chromedp.Click(chromedp.CSS("#save")), chromedp.WaitVisible(chromedp.CSS("pre#secret")))
	secret := strings.TrimSpace(b.text("pre#secret"))
	if !strings.HasPrefix(secret, "whsec_") {
		t.Fatalf("the new endpoint's secret page: %q", b.text("body"))
	}
	hook := shop.expect(t, http.StatusOK, "GET", "/v1/webhooks/my-invoices", "")
	if hook.body["doctype"] != "Invoice" || hook.body["event"] != "on_submit" || hook.body["description"] != "Invoices into our books" {
		t.Fatalf("the endpoint made in the portal: %s", hook.raw)
	}

	// Reveal it again: a page that asks, then the POST.
	b.run(chromedp.Navigate(op.base+"/portal/webhooks/my-invoices"), chromedp.Click(chromedp.CSS("#reveal-secret")), chromedp.WaitVisible(chromedp.CSS("#reveal-confirm")))
	if strings.Contains(b.text("body"), secret) {
		t.Fatal("the confirmation page shows the secret")
	}
	b.shot("portal-customer-reveal")
	b.run(chromedp.Click(chromedp.CSS("#reveal-confirm")), chromedp.WaitVisible(chromedp.CSS("pre#secret")))
	if got := strings.TrimSpace(b.text("pre#secret")); got != secret {
		t.Fatalf("revealed %q, created with %q", got, secret)
	}
	b.shot("portal-customer-secret")
	snippet := b.text("#snippet-go")

	// Run the Go snippet as it is shown, as the receiver.
	recv := buildSnippet(t, goBin, snippet)
	out := &syncBuffer{}
	cmd := exec.Command(recv)
	cmd.Env = append(os.Environ(), "WEBHOOK_SECRET="+secret, "ADDR=127.0.0.1:0")
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	var addr string
	listening := regexp.MustCompile(`listening on (\S+)`)
	eventually(t, "the snippet to listen", func() (bool, string) {
		if m := listening.FindStringSubmatch(out.String()); m != nil {
			addr = m[1]
		}
		return addr != "", out.String()
	})

	// An invoice while the endpoint still points nowhere: it fails, and
	// the portal says when it will be retried.
	op.expect(t, http.StatusAccepted, "POST", "/v1/events", `{"tenant": "shop", "id": "inv-1", "doc_type": "Invoice", "doc_name": "INV-1", "event": "on_submit", "doc": {"name": "INV-1", "total": 1500}}`)
	var id string
	eventually(t, "the invoice's failed delivery", func() (bool, string) {
		r := shop.expect(t, http.StatusOK, "GET", "/v1/deliveries?event_id=inv-1", "")
		if list, _ := r.body["deliveries"].([]any); len(list) == 1 {
			if d := list[0].(map[string]any); d["status"] == "Failed" && d["attempts"] == float64(1) {
				id, _ = d["id"].(string)
			}
		}
		return id != "", r.raw
	})
	b.eventually("the failed delivery in words", "/portal/deliveries?webhook=my-invoices", func() bool {
		return strings.Contains(b.text("#deliveries"), "Retrying: attempt 2 of 4 in ")
	})
	b.shot("portal-customer-deliveries")

	// Point the endpoint at the snippet, in the customer's form.
	b.run(chromedp.Navigate(op.base+"/portal/webhooks/my-invoices/edit"), chromedp.WaitVisible(chromedp.CSS("#webhook-form")),
		chromedp.SetValue(chromedp.CSS("#url"), "http://"+addr+"/invoices"),
		chromedp.Click(chromedp.CSS("#save")), chromedp.WaitVisible(chromedp.CSS("#notice")))

	// Retry: the snippet verifies the signed request and answers 204.
	b.run(chromedp.Navigate(op.base+"/portal/deliveries/"+id), chromedp.Click(chromedp.CSS("#retry")), chromedp.WaitVisible(chromedp.CSS("#notice")))
	b.eventually("the retried delivery to be Delivered", "/portal/deliveries/"+id, func() bool {
		return b.text("#status") == "Delivered"
	})
	b.shot("portal-customer-delivered")
	if !strings.Contains(out.String(), "verified "+id) {
		t.Errorf("the snippet did not log the delivery as verified:\n%s", out.String())
	}
	if n := len(erp.Requests()); n != 1 {
		t.Errorf("the operator's own endpoint got %d requests, want its one Order", n)
	}
}

// buildSnippet builds the Go verification snippet the portal shows, as
// its own module requiring the Standard Webhooks library at the version
// this module's go.sum pins, and returns the binary.
func buildSnippet(t *testing.T, goBin, code string) string {
	t.Helper()
	dir := t.TempDir()
	sum, err := os.Open(filepath.Join("..", "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	defer sum.Close()
	var sums []string
	sc := bufio.NewScanner(sum)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "github.com/standard-webhooks/standard-webhooks/libraries ") {
			sums = append(sums, sc.Text())
		}
	}
	if len(sums) == 0 {
		t.Fatal("go.sum pins no github.com/standard-webhooks/standard-webhooks/libraries")
	}
	version := strings.Fields(sums[0])[1]
	for name, text := range map[string]string{
		"main.go": code,
		"go.mod":  "module snippet\n\ngo 1.22\n\nrequire github.com/standard-webhooks/standard-webhooks/libraries " + version + "\n",
		"go.sum":  strings.Join(sums, "\n") + "\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(dir, "receiver")
	build := exec.Command(goBin, "build", "-o", bin, ".")
	build.Dir = dir
	build.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("the Go snippet does not build: %v\n%s\n%s", err, out, code)
	}
	return bin
}
