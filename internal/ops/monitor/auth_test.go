package monitor_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/homingdev/homing/config"
	"github.com/homingdev/homing/internal/ops/monitor"
)

// TestRequireAuth: with monitor.auth set, the UI answers only requests
// carrying its credentials; others get 401 with a challenge a browser (basic)
// or a client (bearer) understands.
func TestRequireAuth(t *testing.T) {
	t.Parallel()
	ui := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("queues")) })
	bearer, err := config.ParseMonitorAuth("bearer:0123456789abcdef-token")
	if err != nil {
		t.Fatal(err)
	}
	basic, err := config.ParseMonitorAuth("basic:ops:pa:ss")
	if err != nil {
		t.Fatal(err)
	}
	if basic.User != "ops" || basic.Password != "pa:ss" {
		t.Fatalf("basic auth parsed as %+v", basic)
	}
	for _, tc := range []struct {
		name      string
		auth      config.MonitorAuth
		set       func(*http.Request)
		want      int
		challenge string
	}{
		{"no auth configured", config.MonitorAuth{}, func(*http.Request) {}, 200, ""},
		{"bearer, none given", bearer, func(*http.Request) {}, 401, `Bearer realm="homing monitor"`},
		{"bearer, wrong", bearer, func(r *http.Request) { r.Header.Set("Authorization", "Bearer nope") }, 401, `Bearer realm="homing monitor"`},
		{"bearer, right", bearer, func(r *http.Request) { r.Header.Set("Authorization", "Bearer 0123456789abcdef-token") }, 200, ""},
		{"basic, none given", basic, func(*http.Request) {}, 401, `Basic realm="homing monitor", charset="UTF-8"`},
		{"basic, wrong password", basic, func(r *http.Request) { r.SetBasicAuth("ops", "pass") }, 401, `Basic realm="homing monitor", charset="UTF-8"`},
		{"basic, right", basic, func(r *http.Request) { r.SetBasicAuth("ops", "pa:ss") }, 200, ""},
	} {
		req := httptest.NewRequest("GET", "/api/queues", nil)
		tc.set(req)
		rec := httptest.NewRecorder()
		monitor.RequireAuth(ui, tc.auth).ServeHTTP(rec, req)
		if rec.Code != tc.want || rec.Header().Get("WWW-Authenticate") != tc.challenge {
			t.Errorf("%s: %d %q, want %d %q", tc.name, rec.Code, rec.Header().Get("WWW-Authenticate"), tc.want, tc.challenge)
		}
		if tc.want == 200 && rec.Body.String() != "queues" {
			t.Errorf("%s: body %q", tc.name, rec.Body.String())
		}
	}
	for _, bad := range []string{"bearer:short", "basic:nopass", "basic::x", "token:abc"} {
		if _, err := config.ParseMonitorAuth(bad); err == nil {
			t.Errorf("monitor.auth %q accepted", bad)
		}
	}
}
