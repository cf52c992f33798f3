package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
)

// endpoints is one request per authenticated route, with the scope it
// needs.
var endpoints = []struct {
	method, path, scope string
}{
	{"POST", "/v1/events", "publish"},
	{"GET", "/v1/webhooks", "admin"},
	{"POST", "/v1/webhooks", "admin"},
	{"GET", "/v1/webhooks/orders", "admin"},
	{"PATCH", "/v1/webhooks/orders", "admin"},
	{"DELETE", "/v1/webhooks/orders", "admin"},
	{"GET", "/v1/deliveries", "admin"},
	{"GET", "/v1/deliveries/d-1", "admin"},
	{"POST", "/v1/deliveries/d-1/retry", "admin"},
	{"POST", "/v1/deliveries/d-1/resend", "admin"},
}

func TestAuthentication(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	_, revoked, err := s.tokens.Create(context.Background(), "old", "admin", "")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.tokens.Revoke(context.Background(), "old"); err != nil {
		t.Fatal(err)
	}
	for _, ep := range endpoints {
		t.Run(ep.method+" "+ep.path, func(t *testing.T) {
			for _, tc := range []struct {
				name, authorization, challenge string
			}{
				{"missing", "", `Bearer realm="homing"`},
				{"basic", "Basic b3BzOnNlY3JldA==", `error="invalid_request"`},
				{"bearer without token", "Bearer ", `error="invalid_request"`},
				{"unknown token", "Bearer hmg_" + strings.Repeat("A", 43), `error="invalid_token"`},
				{"not a Homing token", "Bearer " + strings.Repeat("z", 20), `error="invalid_token"`},
				{"revoked token", "Bearer " + revoked, `error="invalid_token"`},
			} {
				req, _ := http.NewRequest(ep.method, s.srv.URL+ep.path, strings.NewReader(`{}`))
				if tc.authorization != "" {
					req.Header.Set("Authorization", tc.authorization)
				}
				r := s.send(req)
				if r.status != http.StatusUnauthorized || !strings.Contains(string(r.body), `"code":"unauthorized"`) {
					t.Errorf("%s: %s, want 401 unauthorized", tc.name, r)
				}
				if ch := r.header.Get("WWW-Authenticate"); !strings.HasPrefix(ch, `Bearer realm="homing"`) || !strings.Contains(ch, tc.challenge) {
					t.Errorf("%s: WWW-Authenticate %q, want %s", tc.name, ch, tc.challenge)
				}
			}
			if ep.scope == "admin" {
				e := s.refused(http.StatusForbidden, "forbidden", "", ep.method, ep.path, s.publish, `{}`)
				if !strings.Contains(e.Message, `"producer"`) || !strings.Contains(e.Message, "admin") {
					t.Errorf("403 message %q should name the token and the scope needed", e.Message)
				}
			}
			// The right scope passes authentication (whatever the handler
			// then says about this request).
			for _, tok := range []string{s.admin, s.publish} {
				if tok == s.publish && ep.scope == "admin" {
					continue
				}
				r := s.request(ep.method, ep.path, tok, `{}`)
				if r.status == http.StatusUnauthorized || r.status == http.StatusForbidden {
					t.Errorf("a token of the right scope was refused: %s", r)
				}
			}
		})
	}
	// The scheme is case-insensitive (RFC 7235).
	req, _ := http.NewRequest("GET", s.srv.URL+"/v1/webhooks", nil)
	req.Header.Set("Authorization", "bearer "+s.admin)
	if r := s.send(req); r.status != http.StatusOK {
		t.Errorf("lower-case bearer: %s", r)
	}
}

func TestUnauthenticatedEndpoints(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	s.expect(http.StatusOK, "GET", "/v1/openapi.json", "", "")
	if r := s.expect(http.StatusOK, "GET", "/healthz", "", ""); string(r.body) != "ok\n" {
		t.Errorf("/healthz = %q", r.body)
	}
	if r := s.expect(http.StatusOK, "GET", "/readyz", "", ""); string(r.body) != "ok\n" {
		t.Errorf("/readyz = %q", r.body)
	}
}

func TestUnknownRoutesAndMethods(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	s.refused(http.StatusNotFound, "not_found", "", "GET", "/v1/nothing", s.admin, "")
	s.refused(http.StatusNotFound, "not_found", "", "GET", "/", "", "")
	for _, tc := range []struct{ method, path, allow string }{
		{"PUT", "/v1/webhooks", "GET, HEAD, POST"},
		{"GET", "/v1/events", "POST"},
		{"POST", "/v1/webhooks/orders", "DELETE, GET, HEAD, PATCH"},
		{"GET", "/v1/deliveries/d-1/retry", "POST"},
	} {
		r := s.request(tc.method, tc.path, s.admin, "")
		if r.status != http.StatusMethodNotAllowed || r.header.Get("Allow") != tc.allow || !strings.Contains(string(r.body), `"method_not_allowed"`) {
			t.Errorf("%s %s: %s (Allow %q), want 405 method_not_allowed with Allow %q", tc.method, tc.path, r, r.header.Get("Allow"), tc.allow)
		}
	}
}
