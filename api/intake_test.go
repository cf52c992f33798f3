package api_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/homingdev/homing/api"
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
// still open, with the connection closed: a refused request must not keep
// its connection and goroutine while the client trickles the rest (net/http
// reads what is left of an unread body, up to 256 KB, before it answers,
// unless the answer closes the connection).
func TestRequestsOverTheInflightBudgetAre503(t *testing.T) {
	t.Parallel()
	const maxBody = 64 << 10
	s := newServer(t, func(o *options) { o.maxInflightBytes = maxBody * api.IntakeMemoryFactor })
	event := func(id string) string {
		return `{"id": "` + id + `", "doc_type": "Sales Order", "doc_name": "SO-1", "event": "on_submit", "doc": {"name": "SO-1"}}`
	}

	// A held request: chunked (no Content-Length), its body still open.
	type answer struct {
		reply
		closed bool // the server closed the connection with it
	}
	type held struct {
		body  string
		pw    *io.PipeWriter
		reply chan answer
	}
	startHeld := func(id string) held {
		h := held{body: event(id), reply: make(chan answer, 1)}
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
				h.reply <- answer{reply: reply{status: -1, body: []byte(err.Error())}}
				return
			}
			defer func() { _ = resp.Body.Close() }()
			b, _ := io.ReadAll(resp.Body)
			h.reply <- answer{reply{status: resp.StatusCode, header: resp.Header, body: b}, resp.Close}
		}()
		if _, err := pw.Write([]byte(h.body[:10])); err != nil {
			t.Fatal(err)
		}
		return h
	}
	a := startHeld("0190a1b2-0000-7000-8000-000000000001")
	b := startHeld("0190a1b2-0000-7000-8000-000000000002")
	var (
		first  answer
		holder held
	)
	select {
	case first = <-a.reply:
		holder = b
	case first = <-b.reply:
		holder = a
	case <-time.After(30 * time.Second):
		t.Fatal("neither of two requests held open at once was answered while its body was open")
	}
	if first.status != http.StatusServiceUnavailable || !first.closed {
		t.Fatalf("one of two held publishes, while its body was open: %s (connection closed: %v), want 503 closing the connection",
			first.reply, first.closed)
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
