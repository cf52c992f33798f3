package api_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/homingdev/homing/api"
	"github.com/homingdev/homing/internal/testenv"
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

// Pages served beside the API (the console's and the portal's, Admit) are
// bounded as its routes are: a body declared over api.max_body_bytes is
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
	pages := httptest.NewServer(s.api.Admit(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		formErr = r.ParseForm()
		_, _ = io.WriteString(w, "page")
	})))
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
