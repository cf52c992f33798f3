package api

import (
	"bytes"
	"encoding/json"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"unicode/utf8"

	"github.com/homingdev/homing/internal/intake/event"
)

// badText says why s cannot be stored as PostgreSQL text, or "" when it
// can: such input would otherwise fail deep inside a statement as a 500.
func badText(s string) string { return event.BadText(s) }

// checkRequestText refuses, with a 422 naming the part at fault, a request
// whose path, query or Idempotency-Key holds NUL or invalid UTF-8. The body
// is checked field by field where it is decoded (dispatch.Event.Validate).
func checkRequestText(r *http.Request) error {
	if why := badText(r.URL.Path); why != "" {
		return invalidRequest("", "the request path %s; remove it", why)
	}
	// A malformed pair is dropped here, as r.URL.Query() drops it.
	q, _ := url.ParseQuery(r.URL.RawQuery)
	for k, vs := range q {
		if why := badText(k); why != "" {
			return invalidRequest("", "a query parameter name %s; remove it", why)
		}
		for _, v := range vs {
			if why := badText(v); why != "" {
				return invalidRequest(k, "query parameter %s %s; remove it", k, why)
			}
		}
	}
	if why := badText(r.Header.Get("Idempotency-Key")); why != "" {
		return invalidRequest("Idempotency-Key", "Idempotency-Key %s; use printable text", why)
	}
	return nil
}

// checkBodyText refuses, with a 422 naming the top-level field at fault, a
// JSON body holding invalid UTF-8 (which encoding/json would silently turn
// into U+FFFD) or a NUL character (which PostgreSQL refuses in text). The
// common body pays one utf8.Valid and one bytes.Contains.
func checkBodyText(b []byte) error {
	valid := utf8.Valid(b)
	if valid && !bytes.Contains(b, []byte(`\u0000`)) {
		return nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		if !valid {
			return invalidRequest("", "request body is not valid UTF-8; send it encoded as UTF-8")
		}
		return nil // not an object: the decoder says so
	}
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		raw := fields[k]
		if !utf8.ValidString(k) {
			return invalidRequest("", "a field name in the request body is not valid UTF-8; send it encoded as UTF-8")
		}
		if !utf8.Valid(raw) {
			return invalidRequest(k, "%s is not valid UTF-8; send it encoded as UTF-8", k)
		}
		if event.JSONHasNUL(raw) {
			return invalidRequest(k, "%s contains a NUL character (\\u0000), which cannot be stored; remove it", k)
		}
	}
	if !valid {
		return invalidRequest("", "request body is not valid UTF-8; send it encoded as UTF-8")
	}
	return nil
}
