package api_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

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
// Two such requests are held open at once, and nothing else is sent until
// the server has refused one of them: the other then holds the whole
// budget until its body ends, whatever the timing. The refusal is read from
// the server's WARN line, because its 503 reaches the client only once the
// body has ended: net/http reads what is left of an unread body (up to
// 256 KB) before it answers.
func TestRequestsOverTheInflightBudgetAre503(t *testing.T) {
	t.Parallel()
	const maxBody = 64 << 10
	logs, log := testenv.NewLogs()
	s := newServer(t, func(o *options) { o.maxInflightBytes, o.logger = maxBody*api.IntakeMemoryFactor, log })
	event := func(id string) string {
		return `{"id": "` + id + `", "doc_type": "Sales Order", "doc_name": "SO-1", "event": "on_submit", "doc": {"name": "SO-1"}}`
	}

	// A held request: chunked (no Content-Length), its body still open.
	type held struct {
		body  string
		pw    *io.PipeWriter
		reply chan reply
	}
	startHeld := func(id string) held {
		h := held{body: event(id), reply: make(chan reply, 1)}
		pr, pw := io.Pipe()
		h.pw = pw
		t.Cleanup(func() { _ = pw.Close() }) // before the server closes
		req, err := http.NewRequest("POST", s.srv.URL+"/v1/events", pr)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+s.publish)
		go func() {
			resp, err := s.srv.Client().Do(req)
			if err != nil {
				h.reply <- reply{status: -1, body: []byte(err.Error())}
				return
			}
			defer func() { _ = resp.Body.Close() }()
			b, _ := io.ReadAll(resp.Body)
			h.reply <- reply{status: resp.StatusCode, header: resp.Header, body: b}
		}()
		if _, err := pw.Write([]byte(h.body[:10])); err != nil {
			t.Fatal(err)
		}
		return h
	}
	a := startHeld("0190a1b2-0000-7000-8000-000000000001")
	b := startHeld("0190a1b2-0000-7000-8000-000000000002")
	for deadline := time.Now().Add(30 * time.Second); logs.Count("WARN", "api.max_inflight_bytes") == 0; {
		if time.Now().After(deadline) {
			t.Fatalf("neither of two requests held open at once was refused; the log:\n%s", logs)
		}
		time.Sleep(5 * time.Millisecond)
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

	// Both bodies end: the holder is accepted, the other was refused.
	statuses := map[int]int{}
	for _, h := range []held{a, b} {
		if _, err := h.pw.Write([]byte(h.body[10:])); err != nil {
			t.Fatal(err)
		}
		_ = h.pw.Close()
	}
	for _, h := range []held{a, b} {
		statuses[(<-h.reply).status]++
	}
	if statuses[http.StatusAccepted] != 1 || statuses[http.StatusServiceUnavailable] != 1 {
		t.Fatalf("the two held publishes answered %v, want one 202 and one 503", statuses)
	}
	// The charge is back: requests pass again, one after another.
	for i := range 3 {
		if r := s.request("POST", "/v1/events", s.publish, event("0190a1b2-0000-7000-8000-00000000001"+string(rune('0'+i)))); r.status != http.StatusAccepted {
			t.Fatalf("publish %d after the held request ended: %s, want 202", i, r)
		}
	}
}
