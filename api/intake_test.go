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
func TestRequestsOverTheInflightBudgetAre503(t *testing.T) {
	t.Parallel()
	const maxBody = 64 << 10
	s := newServer(t, func(o *options) { o.maxInflightBytes = maxBody * api.IntakeMemoryFactor })
	event := func(id string) string {
		return `{"id": "` + id + `", "doc_type": "Sales Order", "doc_name": "SO-1", "event": "on_submit", "doc": {"name": "SO-1"}}`
	}

	// The held request: chunked (no Content-Length), its body still open.
	// It and the probes below race for the budget; a held request refused
	// (it answers while its body is open) is sent again.
	body := event("0190a1b2-0000-7000-8000-000000000001")
	startHeld := func() (*io.PipeWriter, chan reply) {
		pr, pw := io.Pipe()
		t.Cleanup(func() { _ = pw.Close() }) // before the server closes
		req, err := http.NewRequest("POST", s.srv.URL+"/v1/events", pr)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+s.publish)
		held := make(chan reply, 1)
		go func() {
			resp, err := s.srv.Client().Do(req)
			if err != nil {
				held <- reply{status: -1, body: []byte(err.Error())}
				return
			}
			defer func() { _ = resp.Body.Close() }()
			b, _ := io.ReadAll(resp.Body)
			held <- reply{status: resp.StatusCode, header: resp.Header, body: b}
		}()
		if _, err := pw.Write([]byte(body[:10])); err != nil {
			t.Fatal(err)
		}
		return pw, held
	}
	pw, held := startHeld()

	// Until the held request is charged, probes may pass; after, each is
	// refused. Poll with a deadline: the server takes the charge when it
	// starts the handler, which the client cannot observe.
	// A probe in flight holds part of the budget, so a held request that
	// starts during one is refused: after each restart the probes wait a
	// little longer (up to a second) for it to take its charge, or a loaded
	// machine can keep the two out of step until the deadline.
	var refused reply
	pause := 10 * time.Millisecond
	for deadline := time.Now().Add(30 * time.Second); ; {
		r := s.request("POST", "/v1/events", s.publish, event("0190a1b2-0000-7000-8000-000000000002"))
		if r.status == http.StatusServiceUnavailable {
			refused = r
			break
		}
		if r.status != http.StatusAccepted && r.status != http.StatusOK {
			t.Fatalf("publish beside the held request: %s, want 202, 200 or 503", r)
		}
		select {
		case h := <-held:
			if h.status != http.StatusServiceUnavailable {
				t.Fatalf("held publish answered before its body ended: %s", h)
			}
			pw, held = startHeld()
			time.Sleep(pause)
			pause = min(2*pause, time.Second)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("no request was refused while the budget was held")
		}
	}
	if refused.header.Get("Retry-After") == "" || !strings.Contains(string(refused.body), `"unavailable"`) ||
		!strings.Contains(string(refused.body), "api.max_inflight_bytes") {
		t.Errorf("refused publish: %s (Retry-After %q), want 503 unavailable naming api.max_inflight_bytes with Retry-After", refused, refused.header.Get("Retry-After"))
	}
	// Any route is charged, even one without a body.
	if r := s.request("GET", "/v1/webhooks", s.admin, ""); r.status != http.StatusServiceUnavailable {
		t.Errorf("GET /v1/webhooks while the budget is held: %s, want 503", r)
	}

	if _, err := pw.Write([]byte(body[10:])); err != nil {
		t.Fatal(err)
	}
	_ = pw.Close()
	if r := <-held; r.status != http.StatusAccepted {
		t.Fatalf("held publish: %s, want 202", r)
	}
	// Its charge is back: requests pass again, one after another.
	for i := range 3 {
		if r := s.request("POST", "/v1/events", s.publish, event("0190a1b2-0000-7000-8000-00000000001"+string(rune('0'+i)))); r.status != http.StatusAccepted {
			t.Fatalf("publish %d after the held request ended: %s, want 202", i, r)
		}
	}
}
