package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/homingdev/homing/internal/intake/dbstate"
	"github.com/homingdev/homing/internal/intake/store"
	"github.com/homingdev/homing/internal/lib/clock"
	"github.com/homingdev/homing/internal/ops/token"
	"github.com/homingdev/homing/internal/testing/testenv"
)

// TestDatabaseCutIs503Page cuts the console's PostgreSQL away (a failed
// primary's host) under signed-in console and portal sessions: every page,
// and a form, answers 503 with Retry-After on a page that says the
// database is unavailable, as the API answers database_unavailable; never a
// 500, and no error text of the driver. The outage is one ERROR line, the
// watcher's, however many pages fail, and is counted. A sign-in during the
// cut is 503 too. Once the database is back the pages answer 200.
func TestDatabaseCutIs503Page(t *testing.T) {
	t.Parallel()
	dsn := testenv.PostgresDSN(t)
	proxy, viaProxy := testenv.PostgresProxy(t, dsn)
	db := testenv.Open(t, viaProxy)
	logs, log := testenv.NewLogs()
	watcher := dbstate.New(dbstate.Config{Probe: store.Probe(db), Logger: log, Consequence: "pages are answered 503"})
	s := newSiteOn(t, db, watcher, log)
	s.withAcme()
	link, err := s.links.Create(context.Background(), "acme", 0, token.Token{Name: "test"})
	if err != nil {
		t.Fatal(err)
	}
	operator, tenant := s.login(s.admin), s.open(link.Token)
	csrf := s.csrf(operator, "/console/deliveries/d-1")
	_, other, err := token.New(db, clock.Real{}, nil).Create(context.Background(), "ops-2", token.ScopeAdmin, "")
	if err != nil {
		t.Fatal(err)
	}
	pages := []struct {
		path   string
		cookie *http.Cookie
	}{
		{"/console/", operator},
		{"/console/deliveries", operator},
		{"/console/deliveries?status=Failed", operator},
		{"/console/deliveries/d-1", operator},
		{"/console/webhooks", operator},
		{"/console/webhooks/orders", operator},
		{"/console/webhooks/orders/edit", operator},
		{"/portal/", tenant},
		{"/portal/deliveries", tenant},
		{"/portal/deliveries/a-1", tenant},
		{"/portal/webhooks/acme-orders", tenant},
	}
	for _, p := range pages {
		if res, body := s.do("GET", p.path, nil, p.cookie, nil); res.StatusCode != http.StatusOK {
			t.Fatalf("GET %s before the cut: %d\n%s", p.path, res.StatusCode, body)
		}
	}

	proxy.Cut()
	check := func(what string, res *http.Response, body string) {
		t.Helper()
		if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") != "2" {
			t.Errorf("%s during the cut: %d, Retry-After %q; want 503 with Retry-After: 2\n%.600s", what, res.StatusCode, res.Header.Get("Retry-After"), body)
			return
		}
		if !strings.Contains(body, "the database is unavailable") || !strings.Contains(res.Header.Get("Content-Type"), "text/html") {
			t.Errorf("%s during the cut: the page does not say the database is unavailable:\n%.600s", what, body)
		}
		for _, leak := range []string{"dial tcp", "connection refused", "goroutine", "SQLSTATE", "failed to connect"} {
			if strings.Contains(body, leak) {
				t.Errorf("%s during the cut: the page shows the driver's error (%q):\n%.600s", what, leak, body)
			}
		}
	}
	for _, p := range pages {
		res, body := s.do("GET", p.path, nil, p.cookie, nil)
		check("GET "+p.path, res, body)
	}
	res, body := s.do("POST", "/console/deliveries/d-1/resend", url.Values{"csrf": {csrf}}, operator,
		map[string]string{"Origin": s.srv.URL, "Sec-Fetch-Site": "same-origin"})
	check("POST resend", res, body)
	if !strings.Contains(body, "look before you send it again") {
		t.Errorf("POST resend during the cut: the page does not say to look before sending the form again:\n%.600s", body)
	}
	// A new sign-in needs its token read from the database.
	res, body = s.do("POST", "/console/login", url.Values{"token": {other}}, nil, nil)
	if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") != "2" || !strings.Contains(body, "the database is unavailable") {
		t.Errorf("sign-in during the cut: %d, Retry-After %q; want 503 saying the database is unavailable\n%.600s", res.StatusCode, res.Header.Get("Retry-After"), body)
	}

	if n := logs.Count("ERROR", "database unavailable: "); n != 1 {
		t.Errorf("ERROR lines about the database = %d, want 1:\n%s", n, logs)
	}
	if n := logs.Count("ERROR", ""); n != 1 {
		t.Errorf("ERROR lines = %d, want only the outage's:\n%s", n, logs)
	}
	if n := watcher.Errors()[dbstate.Unavailable]; n < uint64(len(pages)) {
		t.Errorf("unavailable database errors counted: %d, want at least one a page (%d)", n, len(pages))
	}

	proxy.Restore()
	testenv.Eventually(t, "the overview after the restore", func() bool {
		res, _ := s.do("GET", "/console/", nil, operator, nil)
		return res.StatusCode == http.StatusOK
	})
	for _, p := range pages {
		if res, body := s.do("GET", p.path, nil, p.cookie, nil); res.StatusCode != http.StatusOK {
			t.Errorf("GET %s after the restore: %d\n%.600s", p.path, res.StatusCode, body)
		}
	}
}
