package api_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/homingdev/homing/internal/ops/api"
	"github.com/homingdev/homing/internal/testing/testenv"
)

// Requests in flight share one memory budget (api.max_inflight_bytes),
// charged before a body is read: while one request of unknown length is
// being read, it holds max_body_bytes × the expansion factor, so with a
// budget of exactly that any other request is answered 503 unavailable
// with Retry-After at once, not queued; once the first has answered, its
// charge is returned and the same request succeeds, again and again.
//
// Two such requests are held open at once: whichever the server takes
// first holds the whole budget until its body ends, so the other is
// refused whatever the timing. Its 503 must arrive while its own body is
// still open, closing the connection: a refused request keeps its
// connection and goroutine only for a bounded lingering close
// (linger_test.go), not while the client trickles the rest.
func TestRequestsOverTheInflightBudgetAre503(t *testing.T) {
	t.Parallel()
	const maxBody = 64 << 10
	s := newServer(t, func(o *options) { o.maxInflightBytes = maxBody * api.IntakeMemoryFactor })
	event := func(id string) string {
		return `{"id": "` + id + `", "doc_type": "Sales Order", "doc_name": "SO-1", "event": "on_submit", "doc": {"name": "SO-1"}}`
	}

	// Held requests: chunked (no Content-Length), their bodies still open.
	type held struct {
		body  string
		pw    *io.PipeWriter
		reply <-chan answer
	}
	startHeld := func(id string) held {
		h := held{body: event(id)}
		h.pw, h.reply = s.openPublish(-1, h.body[:10])
		return h
	}
	a := startHeld("0190a1b2-0000-7000-8000-000000000001")
	b := startHeld("0190a1b2-0000-7000-8000-000000000002")
	// The refused one is answered while both bodies are still open: no
	// timer here, the event is the answer (a server that waited for the
	// body would hang the test until go test's -timeout, which names it).
	var (
		first  answer
		holder held
	)
	select {
	case first = <-a.reply:
		holder = b
	case first = <-b.reply:
		holder = a
	}
	if first.status != http.StatusServiceUnavailable || !first.closed {
		t.Fatalf("one of two held publishes, while its body was open: %s (connection closed: %v, error %v), want 503 closing the connection",
			first.reply, first.closed, first.err)
	}

	// One of them holds the budget: every other request is refused.
	refused := s.request("POST", "/v1/events", s.publish, event("0190a1b2-0000-7000-8000-000000000003"))
	if refused.status != http.StatusServiceUnavailable || refused.header.Get("Retry-After") == "" ||
		!strings.Contains(string(refused.body), `"unavailable"`) || !strings.Contains(string(refused.body), "api.max_inflight_bytes") {
		t.Errorf("publish while the budget is held: %s (Retry-After %q), want 503 unavailable naming api.max_inflight_bytes with Retry-After",
			refused, refused.header.Get("Retry-After"))
	}
	// Any route is charged, even one without a body.
	if r := s.request("GET", "/v1/webhooks", s.admin, ""); r.status != http.StatusServiceUnavailable {
		t.Errorf("GET /v1/webhooks while the budget is held: %s, want 503", r)
	}

	if _, err := holder.pw.Write([]byte(holder.body[10:])); err != nil {
		t.Fatal(err)
	}
	_ = holder.pw.Close()
	if r := <-holder.reply; r.status != http.StatusAccepted {
		t.Fatalf("held publish: %s, want 202", r.reply)
	}
	// The charge is back: requests pass again, one after another.
	for i := range 3 {
		if r := s.request("POST", "/v1/events", s.publish, event("0190a1b2-0000-7000-8000-00000000001"+string(rune('0'+i)))); r.status != http.StatusAccepted {
			t.Fatalf("publish %d after the held request ended: %s, want 202", i, r)
		}
	}
}

// Pages served beside the API (the console's and the portal's, Admit) of
// a signed-in session are bounded as its routes are: a body declared over api.max_body_bytes is
// refused unread, closing the connection, and one sent without a length is
// cut off at the limit. A request that may change something is charged an
// evaluation on top of its body, so beside a request holding most of the
// intake budget a POST page is refused 503 with Retry-After while a GET
// page still fits.
func TestPagesBesideTheAPIShareItsBounds(t *testing.T) {
	t.Parallel()
	const maxBody = 64 << 10
	s := newServer(t, func(o *options) { o.maxInflightBytes = maxBody * api.IntakeMemoryFactor })
	var formErr error
	// Every request here is an operator's session's (charged to the
	// budget alone); TestPagesWithoutASessionKeepToTheirShare has the others.
	signedIn := func(*http.Request) (string, bool) { return "", true }
	pages := httptest.NewServer(s.api.Admit(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		formErr = r.ParseForm()
		_, _ = io.WriteString(w, "page")
	}), signedIn))
	t.Cleanup(pages.Close)
	post := func(body io.Reader, length int64) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest("POST", pages.URL+"/console/login", body)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.ContentLength = length
		resp, err := pages.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}

	// A small form passes.
	if resp, body := post(strings.NewReader("token=x"), 7); resp.StatusCode != http.StatusOK || body != "page" || formErr != nil {
		t.Fatalf("small form: %d %q (form error %v), want 200 page", resp.StatusCode, body, formErr)
	}
	// Declared too large: refused before a byte is read, the connection closed.
	if resp, body := post(strings.NewReader("token="+strings.Repeat("x", maxBody-5)), maxBody+1); resp.StatusCode != http.StatusRequestEntityTooLarge || !resp.Close ||
		!strings.Contains(body, "api.max_body_bytes") {
		t.Errorf("form declared over the limit: %d %q (closed %v), want 413 naming api.max_body_bytes, closing", resp.StatusCode, body, resp.Close)
	}
	// Sent without a length: the form is cut off at the limit.
	formErr = nil
	big := io.MultiReader(strings.NewReader("token="), strings.NewReader(strings.Repeat("x", 2*maxBody)))
	if resp, _ := post(big, -1); resp.StatusCode != http.StatusOK || formErr == nil {
		t.Errorf("chunked form over the limit: %d, form error %v; want the handler's form read to fail at the limit", resp.StatusCode, formErr)
	}

	// A POST is charged an evaluation on top of its body. An API request
	// whose declared body is held open leaves less room than a POST page
	// needs (its body's minimum charge and an evaluation), more than a GET
	// page needs (its body's minimum charge).
	left := (api.MinRequestBytes*api.IntakeMemoryFactor + s.api.EvaluationBytes()/2)
	declared := (maxBody*api.IntakeMemoryFactor - left) / api.IntakeMemoryFactor
	s.openPublish(declared, `{"id"`)
	// The event: the held request's charge is taken (not a guess at how
	// long the server takes to read its headers).
	testenv.Eventually(t, "the held request's charge", func() bool { return s.api.IntakeHeld() == declared*api.IntakeMemoryFactor })
	resp, err := pages.Client().Post(pages.URL+"/console/login", "application/x-www-form-urlencoded", strings.NewReader("token=x"))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Errorf("POST page beside a request holding all but less than an evaluation of the budget: %d (Retry-After %q), want 503 with Retry-After",
			resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	get, err := pages.Client().Get(pages.URL + "/console/")
	if err != nil {
		t.Fatal(err)
	}
	_ = get.Body.Close()
	if get.StatusCode != http.StatusOK {
		t.Errorf("GET page beside the same request: %d, want 200 (it is charged no evaluation)", get.StatusCode)
	}
}

// A page request without a session (a sign-in form's, a portal link's) is
// held to api.AnonymousPageBytes: declared larger, it is refused 413
// unread, the connection closed; within it, it is charged to the pages'
// own share, never an evaluation. So slow requests from anyone, holding
// that share full, refuse only each other: a signed-in tenant's and an
// operator's page requests, charged to their own shares, are served. (Red
// team of issue 35: three slow requests without a session, declaring
// api.max_body_bytes, held the share every console and portal page was
// charged to, and every page answered 429.)
func TestPagesWithoutASessionKeepToTheirShare(t *testing.T) {
	t.Parallel()
	const maxBody = 64 << 10
	// The pages' share holds a handful of requests without a session: a
	// quarter of a budget of 20 of them.
	s := newServer(t, func(o *options) {
		o.maxBodyBytes = maxBody
		o.maxInflightBytes = 20 * api.AnonymousPageBytes * api.IntakeMemoryFactor
		o.tenantInflightShare = 0.25
	})
	sessions := func(r *http.Request) (string, bool) {
		ck, err := r.Cookie("session")
		if err != nil {
			return "", false
		}
		if ck.Value == "operator" {
			return "", true
		}
		return ck.Value, true
	}
	pages := httptest.NewServer(s.api.Admit(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
			return
		}
		_, _ = io.WriteString(w, "page")
	}), sessions))
	t.Cleanup(pages.Close)
	// open sends a POST page's headers and first bytes, as session ("" for
	// none), and leaves its body open.
	open := func(session string, length int64) (*io.PipeWriter, <-chan answer) {
		t.Helper()
		return openRequest(t, pages, "/console/login", length, "token=", func(req *http.Request) {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			if session != "" {
				req.AddCookie(&http.Cookie{Name: "session", Value: session})
			}
		})
	}
	post := func(session, body string) reply {
		t.Helper()
		pw, got := open(session, int64(len("token=")+len(body)))
		if _, err := io.WriteString(pw, body); err != nil {
			t.Fatal(err)
		}
		a := <-got
		if a.err != nil {
			t.Fatal(a.err)
		}
		return a.reply
	}

	// Declared over the bound, as the red team's were: refused at once,
	// unread, whatever its body would have been.
	for range 3 {
		_, got := open("", maxBody)
		a := <-got
		if a.err != nil || a.status != http.StatusRequestEntityTooLarge || !a.closed || !strings.Contains(string(a.body), "without a session") {
			t.Fatalf("a page request without a session declaring %d bytes: %v %v (closed %v), want 413 saying it has no session, closing", maxBody, a.reply, a.err, a.closed)
		}
	}
	// Within the bound, requests without a session held open fill the
	// pages' share, and the next is refused 429 with Retry-After.
	held := 0
	for {
		before := s.api.IntakeHeld()
		_, got := open("", api.AnonymousPageBytes)
		if !waitHeld(t, s, before, got) {
			break
		}
		held++
		if held > 20 {
			t.Fatalf("%d page requests without a session held at once: they are not bounded by the pages' share", held)
		}
	}
	// A quarter of a budget of 20 such requests.
	if held != 5 {
		t.Fatalf("%d page requests without a session held before the first refusal, want 5: a quarter of a budget of 20", held)
	}
	// Signed-in pages are charged to their own shares: served.
	for _, session := range []string{"acme", "operator"} {
		if r := post(session, "x"); r.status != http.StatusOK || string(r.body) != "page" {
			t.Errorf("a page of session %s beside %d held requests without a session: %v, want 200", session, held, r)
		}
	}
}

// waitHeld waits until a request opened with got, when the intake held
// before, is either held by the server (its charge taken: true) or
// answered (false, which must be a 429 with Retry-After).
func waitHeld(t *testing.T, s *server, before int64, got <-chan answer) bool {
	t.Helper()
	var answered *answer
	testenv.Eventually(t, "the request to be held or answered", func() bool {
		select {
		case a := <-got:
			answered = &a
			return true
		default:
		}
		return s.api.IntakeHeld() > before
	})
	if answered == nil {
		return true
	}
	if a := *answered; a.err != nil || a.status != http.StatusTooManyRequests || a.header.Get("Retry-After") == "" {
		t.Fatalf("a page request without a session past the pages' share: %v %v, want 429 with Retry-After", a.reply, a.err)
	}
	return false
}

// The routes that need no token (the OpenAPI document, /healthz, /readyz)
// read no body and are charged nothing: one declaring a body larger than a
// request's minimum charge is refused 413 unread, and those in flight with
// a smaller one hold none of the intake budget, so a tenant's publish
// beside them is accepted. (Red team of issue 35: eleven connections
// without a token, each declaring a 2 MiB body to /v1/openapi.json and
// never sending it, were charged 48 MiB each and held the whole budget;
// every tenant's request was answered 503.)
func TestRoutesWithoutATokenHoldNoBudget(t *testing.T) {
	t.Parallel()
	const maxBody = 64 << 10
	entered, release := make(chan struct{}, 16), make(chan struct{})
	// A budget of two requests of the minimum charge; /readyz waits until
	// the test releases it.
	s := newServer(t, func(o *options) {
		o.maxBodyBytes = maxBody
		o.maxInflightBytes = 2 * api.MinRequestBytes * api.IntakeMemoryFactor
		o.ready = func(ctx context.Context) error {
			entered <- struct{}{}
			select {
			case <-release:
			case <-ctx.Done():
			}
			return nil
		}
	})
	addr := strings.TrimPrefix(s.srv.URL, "http://")
	// get sends a GET of path declaring and sending a body of length bytes
	// (none of it when unsent), and returns the status line its reader
	// gets.
	get := func(path string, length int, unsent bool) <-chan string {
		t.Helper()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		req := fmt.Sprintf("GET %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", path, length)
		if !unsent {
			req += strings.Repeat("x", length)
		}
		if _, err := io.WriteString(c, req); err != nil {
			t.Fatal(err)
		}
		line := make(chan string, 1)
		go func() {
			l, err := bufio.NewReader(c).ReadString('\n')
			if err != nil {
				l = err.Error()
			}
			line <- strings.TrimSpace(l)
		}()
		return line
	}
	for _, path := range []string{"/v1/openapi.json", "/healthz", "/readyz"} {
		if line := <-get(path, maxBody, true); !strings.HasPrefix(line, "HTTP/1.1 413") {
			t.Errorf("GET %s declaring a %d-byte body: %q, want 413 unread", path, maxBody, line)
		}
	}
	var answers []<-chan string
	for range 5 {
		answers = append(answers, get("/readyz", api.MinRequestBytes, false))
	}
	for i := range 5 {
		select {
		case <-entered:
		case line := <-answers[i]:
			t.Fatalf("a /readyz beside others in flight answered %q before the test released it: it was refused, charged to the budget", line)
		}
	}
	if held := s.api.IntakeHeld(); held != 0 {
		t.Fatalf("five /readyz in flight hold %d bytes of the intake budget, want none", held)
	}
	if r := s.request("POST", "/v1/events", s.publish, `{"id": "ev-1", "doc_type": "Sales Order", "event": "on_submit", "doc": {"name": "SO-1"}}`); r.status != http.StatusAccepted {
		t.Fatalf("a publish beside five /readyz in flight: %v, want 202", r)
	}
	close(release)
	for _, a := range answers {
		if line := <-a; !strings.HasPrefix(line, "HTTP/1.1 200") {
			t.Errorf("/readyz: %q, want 200", line)
		}
	}
}
