package api_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/homingdev/homing/internal/intake/event"
	"github.com/homingdev/homing/internal/testing/testreceiver"
	"github.com/homingdev/homing/models"
)

const orderEvent = `{"id": "so-1-submit", "doc_type": "Sales Order", "doc_name": "SO-1", "event": "on_submit", "doc": {"name": "SO-1", "grand_total": 1500}}`

func (s *server) outboxRows() []models.OutboxEvent {
	s.t.Helper()
	var rows []models.OutboxEvent
	if err := s.db.Order("id").Find(&rows).Error; err != nil {
		s.t.Fatal(err)
	}
	return rows
}

// TestPublishIsIdempotent: the first publish of an ID is 202 and writes one
// outbox row carrying the event; every repeat, even concurrent ones, is 200
// with the original ID and writes nothing.
func TestPublishIsIdempotent(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	r := s.expect(http.StatusAccepted, "POST", "/v1/events", s.publish, orderEvent)
	if got := r.object(t); len(got) != 1 || got["event_id"] != "so-1-submit" {
		t.Fatalf(`202 body = %s, want {"event_id": "so-1-submit"}`, r.body)
	}
	rows := s.outboxRows()
	if len(rows) != 1 || rows[0].EventID != "so-1-submit" {
		t.Fatalf("outbox = %+v, want one row for so-1-submit", rows)
	}
	ev, err := event.Decode([]byte(rows[0].Payload))
	if err != nil {
		t.Fatal(err)
	}
	if ev.DocType != "Sales Order" || ev.DocName != "SO-1" || ev.Event != "on_submit" || ev.Doc["grand_total"] != int64(1500) || ev.Doc["name"] != "SO-1" {
		t.Errorf("queued event = %+v", ev)
	}

	// A client retrying (after a timeout, say) five times at once, its body
	// spaced differently.
	statuses := make([]int, 5)
	var wg sync.WaitGroup
	for i := range statuses {
		wg.Go(func() {
			statuses[i] = s.request("POST", "/v1/events", s.publish, strings.Replace(orderEvent, `"grand_total": 1500`, `"grand_total":  1500 `, 1)).status
		})
	}
	wg.Wait()
	for _, st := range statuses {
		if st != http.StatusOK {
			t.Errorf("repeat publishes answered %v, want 200 each", statuses)
			break
		}
	}
	if rows := s.outboxRows(); len(rows) != 1 {
		t.Fatalf("outbox has %d rows after repeats, want 1", len(rows))
	}

	// The same ID with another document is a mistake to report, not a
	// repeat to answer with the original; alone or among same-body repeats.
	changed := strings.Replace(orderEvent, "1500", "9999", 1)
	e := s.refused(http.StatusConflict, "conflict", "", "POST", "/v1/events", s.publish, changed)
	if !strings.Contains(e.Message, `"so-1-submit"`) || !strings.Contains(e.Message, "new event ID") {
		t.Errorf("409 message %q should name the event ID and say to use a new one", e.Message)
	}
	for i := range statuses {
		body := orderEvent
		if i%2 == 0 {
			body = changed
		}
		wg.Go(func() { statuses[i] = s.request("POST", "/v1/events", s.publish, body).status })
	}
	wg.Wait()
	for i, st := range statuses {
		if want := []int{http.StatusConflict, http.StatusOK}[i%2]; st != want {
			t.Errorf("mixed repeats answered %v, want 409 for the changed bodies (even) and 200 for the same (odd)", statuses)
			break
		}
	}
	if rows := s.outboxRows(); len(rows) != 1 || !strings.Contains(rows[0].Payload, "1500") {
		t.Fatalf("outbox after changed repeats = %+v, want the original row only", rows)
	}

	// A new ID raced by concurrent publishers: one 202, the rest 200.
	for i := range statuses {
		wg.Go(func() {
			statuses[i] = s.request("POST", "/v1/events", s.admin, strings.Replace(orderEvent, "so-1-submit", "so-2-submit", 1)).status
		})
	}
	wg.Wait()
	accepted := 0
	for _, st := range statuses {
		switch st {
		case http.StatusAccepted:
			accepted++
		case http.StatusOK:
		default:
			t.Errorf("racing publishes answered %v", statuses)
		}
	}
	if accepted != 1 || len(s.outboxRows()) != 2 {
		t.Errorf("racing publishes: %d accepted and %d outbox rows, want 1 and 2", accepted, len(s.outboxRows()))
	}
}

func TestPublishGeneratesAnID(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	r := s.expect(http.StatusAccepted, "POST", "/v1/events", s.publish, `{"doc_type": "Note", "event": "after_insert", "doc": {"title": "hi"}}`)
	id, _ := r.object(t)["event_id"].(string)
	if u, err := uuid.Parse(id); err != nil || u.Version() != 7 {
		t.Fatalf("event_id %q is not a new UUIDv7", id)
	}
	r2 := s.expect(http.StatusAccepted, "POST", "/v1/events", s.publish, `{"id": "", "doc_type": "Note", "event": "after_insert", "doc": {"title": "hi"}}`)
	if id2, _ := r2.object(t)["event_id"].(string); id2 == id || id2 == "" {
		t.Errorf("a second event without an id got %q, want another new ID", id2)
	}
	if rows := s.outboxRows(); len(rows) != 2 {
		t.Errorf("outbox has %d rows, want 2", len(rows))
	}
}

// TestPublishRefusesBadRequests: each refusal names what to fix, and none
// writes anything.
func TestPublishRefusesBadRequests(t *testing.T) {
	t.Parallel()
	s := newServer(t, func(o *options) { o.maxBodyBytes = 4096; o.maxPayloadBytes = 1024 })
	big := `{"doc_type": "Note", "event": "on_update", "doc": {"text": "` + strings.Repeat("x", 2000) + `"}}`
	for _, tc := range []struct {
		name, body    string
		status        int
		code, field   string
		wantInMessage string
	}{
		{"empty body", "", 400, "invalid_json", "", "empty"},
		{"not JSON", "doc_type=Note", 400, "invalid_json", "", "not valid JSON"},
		{"truncated", `{"doc_type": "Note"`, 400, "invalid_json", "", "middle"},
		{"an array", `[1]`, 400, "invalid_json", "", "JSON object"},
		{"two values", orderEvent + `{}`, 400, "invalid_json", "", "more than one"},
		{"unknown field", `{"doctype": "Note", "event": "on_update", "doc": {}}`, 400, "invalid_json", "doctype", "doc_type"},
		{"wrong type", `{"doc_type": 7, "event": "on_update", "doc": {}}`, 400, "invalid_json", "doc_type", "must be a string"},
		{"no doc", `{"doc_type": "Note", "event": "on_update"}`, 422, "invalid_request", "doc", "doc is missing"},
		{"doc not an object", `{"doc_type": "Note", "event": "on_update", "doc": [1]}`, 422, "invalid_request", "doc", "JSON object"},
		{"unknown event", `{"doc_type": "Note", "event": "on_save", "doc": {}}`, 422, "invalid_request", "event", "on_submit"},
		{"no doc_type", `{"event": "on_update", "doc": {}}`, 422, "invalid_request", "doc_type", "doc_type is empty"},
		{"id too long", `{"id": "` + strings.Repeat("i", 201) + `", "doc_type": "Note", "event": "on_update", "doc": {}}`, 422, "invalid_request", "id", "at most 200"},
		{"doc over max_payload_bytes", big, 413, "payload_too_large", "doc", "delivery.max_payload_bytes"},
		{"body over max_body_bytes", `{"doc_type": "Note", "event": "on_update", "doc": {"text": "` + strings.Repeat("x", 5000) + `"}}`, 413, "payload_too_large", "", "api.max_body_bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := s.refused(tc.status, tc.code, tc.field, "POST", "/v1/events", s.publish, tc.body)
			if !strings.Contains(e.Message, tc.wantInMessage) {
				t.Errorf("message %q does not mention %q", e.Message, tc.wantInMessage)
			}
		})
	}
	// A body with no Content-Length is cut off at the limit as it is read.
	req, _ := http.NewRequest("POST", s.srv.URL+"/v1/events", io.MultiReader(strings.NewReader(`{"doc_type": "Note", "event": "on_update", "doc": {"text": "`), strings.NewReader(strings.Repeat("x", 10000)+`"}}`)))
	req.Header.Set("Authorization", "Bearer "+s.publish)
	req.ContentLength = -1
	if r := s.send(req); r.status != http.StatusRequestEntityTooLarge || !strings.Contains(string(r.body), `"payload_too_large"`) {
		t.Errorf("chunked oversized body: %s", r)
	}
	if rows := s.outboxRows(); len(rows) != 0 {
		t.Errorf("refused publishes wrote %d outbox rows", len(rows))
	}
}

// A body declared larger than api.max_body_bytes is refused before a byte
// of it is read, and at once: the 413 arrives while the client is still
// sending, and closes the connection, so a client trickling such a body
// keeps a goroutine and a connection of the server's only for a bounded
// lingering close (linger_test.go).
func TestDeclaredOversizedBodyIsRefusedAtOnce(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	_, got := s.openPublish(100<<10, `{"doc_type"`) // over newServer's 64 KiB
	// The body is never finished: an answer that waited for it would hang
	// here until go test's -timeout, which names this line.
	if a := <-got; a.err != nil || a.status != http.StatusRequestEntityTooLarge || !a.closed {
		t.Fatalf("declared oversized body, still being sent: %d, connection closed %v, error %v; want 413 closing the connection", a.status, a.closed, a.err)
	}
}

// TestWorkflowTransitionIsSynchronous: 200 once every matching webhook
// answered 2xx, 502 naming each that did not; a repeated ID sends nothing.
func TestWorkflowTransitionIsSynchronous(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	ok := testreceiver.Answering(t, http.StatusOK)
	down := testreceiver.Answering(t, http.StatusServiceUnavailable)
	s.expect(http.StatusCreated, "POST", "/v1/webhooks", s.admin, fmt.Sprintf(`{"name": "approvals", "doctype": "Leave Application", "event": "workflow_transition", "url": %q}`, ok.URL))
	publish := func(id string) string {
		return fmt.Sprintf(`{"id": %q, "doc_type": "Leave Application", "doc_name": "LA-1", "event": "workflow_transition", "doc": {"name": "LA-1", "workflow_state": "Approved"}}`, id)
	}
	r := s.expect(http.StatusOK, "POST", "/v1/events", s.publish, publish("wf-1"))
	if got := r.object(t); got["event_id"] != "wf-1" {
		t.Errorf("200 body = %s", r.body)
	}
	if got := ok.Bodies(); len(got) != 1 || compact(t, string(got[0])) != `{"name":"LA-1","workflow_state":"Approved"}` {
		t.Fatalf("receiver got %q when the 200 came back, want the document once", got)
	}
	s.expect(http.StatusOK, "POST", "/v1/events", s.publish, publish("wf-1"))
	if n := len(ok.Bodies()); n != 1 {
		t.Errorf("receiver got %d requests after a repeated publish, want still 1", n)
	}
	if rows := s.outboxRows(); len(rows) != 0 {
		t.Errorf("a workflow_transition went through the outbox (%d rows); it is never deferred", len(rows))
	}

	s.expect(http.StatusCreated, "POST", "/v1/webhooks", s.admin, fmt.Sprintf(`{"name": "approvals-mirror", "doctype": "Leave Application", "event": "workflow_transition", "url": %q}`, down.URL))
	for range 2 { // the repeat is answered from the records
		e := s.refused(http.StatusBadGateway, "delivery_failed", "", "POST", "/v1/events", s.publish, publish("wf-2"))
		if e.EventID != "wf-2" || len(e.Failures) != 1 || e.Failures[0].Webhook != "approvals-mirror" || e.Failures[0].DeliveryID == "" || !strings.Contains(e.Failures[0].Error, "503") {
			t.Errorf("502 error = %+v, want one failure naming approvals-mirror and its 503", e)
		}
		if !strings.Contains(e.Message, "approvals-mirror") {
			t.Errorf("message %q does not name the webhook", e.Message)
		}
	}
	if n, m := len(ok.Bodies()), len(down.Bodies()); n != 2 || m != 1 {
		t.Errorf("receivers got %d and %d requests, want 2 (wf-1, wf-2) and 1 (wf-2 once)", n, m)
	}
	var d models.Delivery
	if err := s.db.Where("event_id = ? AND webhook_name = ?", "wf-2", "approvals-mirror").Take(&d).Error; err != nil || d.Status != models.StatusExhausted {
		t.Errorf("failed synchronous delivery is %q (%v), want Exhausted: it is never retried", d.Status, err)
	}
}

// TestPublishDefaultsDocName: without doc_name the event carries doc.name,
// so its deliveries list under the document.
func TestPublishDefaultsDocName(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	s.expect(http.StatusAccepted, "POST", "/v1/events", s.publish, `{"id": "n-7", "doc_type": "Note", "event": "after_insert", "doc": {"name": "N-7"}}`)
	s.expect(http.StatusAccepted, "POST", "/v1/events", s.publish, `{"id": "n-8", "doc_type": "Note", "doc_name": "given", "event": "after_insert", "doc": {"name": "N-8"}}`)
	rows := s.outboxRows()
	if len(rows) != 2 {
		t.Fatalf("outbox has %d rows, want 2", len(rows))
	}
	for i, want := range []string{"N-7", "given"} {
		ev, err := event.Decode([]byte(rows[i].Payload))
		if err != nil || ev.DocName != want {
			t.Errorf("queued event %s: doc_name %q, %v; want %q", rows[i].EventID, ev.DocName, err, want)
		}
	}
}
