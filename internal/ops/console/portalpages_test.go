package console_test

import (
	"context"
	"html"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/homingdev/homing/internal/ops/token"
	"github.com/homingdev/homing/tasks"
)

// portalHref is a link of a portal page to another portal page.
var portalHref = regexp.MustCompile(`href="(/portal/[^"]*)"`)

// Every portal page a session can reach (each page a link leads to, and
// the pages a preview and a recovery's count render) names no internal
// address: no asynqmon link, though the console is given api.asynqmon_url
// and acme's delivery has a task asynqmon would show; and every one of them
// says whose portal it is. The operator's console keeps its asynqmon link
// to the same delivery, so the fixture does expose one where it may.
func TestPortalPagesNameNoInternalAddress(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	s.withAcme()
	ctx := context.Background()
	cl := asynq.NewClient(s.redis)
	t.Cleanup(func() { _ = cl.Close() })
	if _, err := cl.Enqueue(tasks.NewRetryTask("a-1", "acme-orders", tasks.DefaultQueue), asynq.ProcessIn(time.Hour)); err != nil {
		t.Fatal(err)
	}
	const asynqmon = "127.0.0.1:8080" // the site's api.asynqmon_url
	internal := []string{"asynqmon", asynqmon, "/queues/"}

	// The operator's console links a-1's task in asynqmon.
	op := s.login(s.admin)
	if res, _ := s.do("POST", "/console/tenant", url.Values{"csrf": {s.csrf(op, "/console/")}, "tenant": {"acme"}}, op, nil); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("choose acme: %d", res.StatusCode)
	}
	r, _ := http.NewRequest("GET", s.srv.URL+"/console/deliveries/a-1", nil)
	r.AddCookie(op)
	r.AddCookie(&http.Cookie{Name: "homing_console_tenant", Value: "acme"})
	if res, err := http.DefaultClient.Do(r); err != nil {
		t.Fatal(err)
	} else {
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if !strings.Contains(string(b), `href="http://`+asynqmon+`/queues/default/tasks/webhook_retry::a-1"`) {
			t.Fatalf("the operator's console does not link a-1's task in asynqmon, so this test could not fail:\n%s", b)
		}
	}

	link, err := s.links.Create(ctx, "acme", 0, token.Token{Name: "test"})
	if err != nil {
		t.Fatal(err)
	}
	ck := s.open(link.Token)
	check := func(what, body string) {
		t.Helper()
		for _, addr := range internal {
			if strings.Contains(body, addr) {
				t.Errorf("portal page %s names %q:\n%s", what, addr, body)
			}
		}
		if !strings.Contains(body, `id="portal-tenant">acme<`) {
			t.Errorf("portal page %s does not say it is acme's portal:\n%s", what, body)
		}
	}
	seen := map[string]bool{}
	queue := []string{"/portal/", "/portal/deliveries/a-1"}
	for len(queue) > 0 {
		path := queue[0]
		queue = queue[1:]
		if seen[path] {
			continue
		}
		seen[path] = true
		res, body := s.do("GET", path, nil, ck, nil)
		if res.StatusCode != http.StatusOK {
			t.Errorf("portal page %s: %d", path, res.StatusCode)
		}
		check(path, body)
		for _, m := range portalHref.FindAllStringSubmatch(body, -1) {
			if next := html.UnescapeString(m[1]); !seen[next] {
				queue = append(queue, next)
			}
		}
	}
	for _, want := range []string{"/portal/deliveries/a-1", "/portal/webhooks/acme-orders", "/portal/webhooks/acme-orders/edit", "/portal/new-webhook"} {
		if !seen[want] {
			t.Errorf("the crawl never reached %s (it saw %v)", want, seen)
		}
	}
	csrf := s.csrf(ck, "/portal/webhooks/acme-orders")
	since := time.Now().UTC().Add(-2 * time.Hour).Format("2006-01-02T15:04")
	for path, form := range map[string]url.Values{
		"/portal/webhooks/acme-orders/preview": {"csrf": {csrf}, "doc": {`{"name": "SO-A"}`}},
		"/portal/webhooks/acme-orders/recover": {"csrf": {csrf}, "since": {since}, "status": {""}, "step": {"count"}},
	} {
		res, body := s.do("POST", path, form, ck, nil)
		if res.StatusCode != http.StatusOK {
			t.Errorf("POST %s: %d", path, res.StatusCode)
		}
		check("POST "+path, body)
	}
}
