package api_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestNULAndInvalidUTF8AreRefusedAtTheDoor: text PostgreSQL cannot store
// (NUL, invalid UTF-8) is a 422 naming the field, never a 202 that fails
// later or a 500, wherever it comes: a body field, the document, the path,
// the query or the Idempotency-Key.
func TestNULAndInvalidUTF8AreRefusedAtTheDoor(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	event := func(id, docType, docName, doc string) string {
		return `{"id": "` + id + `", "doc_type": "` + docType + `", "doc_name": "` + docName + `", "event": "on_submit", "doc": ` + doc + `}`
	}
	for _, tc := range []struct {
		name, body, field string
	}{
		{"NUL in id", event(`ev\u0000-1`, "Sales Order", "SO-1", `{}`), "id"},
		{"NUL in doc_type", event("ev-2", `Sales\u0000Order`, "SO-1", `{}`), "doc_type"},
		{"NUL in doc_name", event("ev-3", "Sales Order", `SO\u0000-1`, `{}`), "doc_name"},
		{"NUL in a doc value", event("ev-4", "Sales Order", "SO-1", `{"name": "a\u0000b"}`), "doc"},
		{"NUL in a doc key", event("ev-5", "Sales Order", "SO-1", `{"a\u0000": 1}`), "doc"},
		{"invalid UTF-8 in doc_name", event("ev-6", "Sales Order", "SO-\xff", `{}`), "doc_name"},
		{"invalid UTF-8 in id", event("ev-\xc3\x28", "Sales Order", "SO-1", `{}`), "id"},
		{"invalid UTF-8 in the doc", event("ev-7", "Sales Order", "SO-1", "{\"name\": \"\xfe\"}"), "doc"},
	} {
		e := s.refused(http.StatusUnprocessableEntity, "invalid_request", tc.field, "POST", "/v1/events", s.publish, tc.body)
		if !strings.Contains(e.Message, tc.field) || !(strings.Contains(e.Message, "NUL") || strings.Contains(e.Message, "UTF-8")) {
			t.Errorf("%s: message %q does not name %s and what is wrong", tc.name, e.Message, tc.field)
		}
	}
	if rows := s.outboxRows(); len(rows) != 0 {
		t.Errorf("refused events wrote %d outbox rows", len(rows))
	}
	// A NUL escaped as text (a backslash, then u0000) is ordinary text.
	s.expect(http.StatusAccepted, "POST", "/v1/events", s.publish, event("ev-ok", "Sales Order", "SO-1", `{"note": "\\u0000"}`))

	for _, tc := range []struct {
		name, path, field string
		header            []string
	}{
		{"NUL in a path", "/v1/webhooks/a%00b", "", nil},
		{"invalid UTF-8 in a path", "/v1/deliveries/%ff%fe", "", nil},
		{"NUL in a query value", "/v1/deliveries?webhook=a%00b", "webhook", nil},
		{"invalid UTF-8 in a query value", "/v1/deliveries?event_id=%c3%28", "event_id", nil},
		{"NUL in a query name", "/v1/deliveries?a%00=1", "", nil},
		{"invalid UTF-8 in Idempotency-Key", "/v1/deliveries/d-1/resend", "Idempotency-Key", []string{"Idempotency-Key", "key-\xff"}},
	} {
		method := "GET"
		if tc.header != nil {
			method = "POST"
		}
		e := s.refused(http.StatusUnprocessableEntity, "invalid_request", tc.field, method, tc.path, s.admin, "", tc.header...)
		if !strings.Contains(e.Message, "NUL") && !strings.Contains(e.Message, "UTF-8") {
			t.Errorf("%s: message %q does not say what is wrong", tc.name, e.Message)
		}
	}
}
