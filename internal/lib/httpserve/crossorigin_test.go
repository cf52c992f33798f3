package httpserve

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// CrossOrigin refuses a write a browser marks as coming from another site
// (Sec-Fetch-Site other than same-origin or none, or an Origin that is not
// the request's host), saying which site, and lets through reads and
// requests that carry neither header (curl, scripts).
func TestCrossOriginRefusesWritesFromAnotherSite(t *testing.T) {
	t.Parallel()
	var refused string
	h := CrossOrigin("this console", func(w http.ResponseWriter, _ *http.Request, msg string) {
		refused = msg
		http.Error(w, msg, http.StatusForbidden)
	}).Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "done") }))
	for _, c := range []struct {
		name, method string
		header       map[string]string
		want         int
		msg          string
	}{
		{"a form of another site", "POST", map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"}, http.StatusForbidden,
			"A form on another site (cross-site) tried to act on this console, so it was refused."},
		{"a form of a sibling host", "POST", map[string]string{"Sec-Fetch-Site": "same-site"}, http.StatusForbidden,
			"A form on another site (same-site) tried to act on this console, so it was refused."},
		{"an old browser's form from elsewhere", "POST", map[string]string{"Origin": "https://evil.example"}, http.StatusForbidden,
			"A form from https://evil.example tried to act on this console, so it was refused."},
		{"the console's own form", "POST", map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": "http://console.test"}, http.StatusOK, ""},
		{"an old browser's own form", "POST", map[string]string{"Origin": "http://console.test"}, http.StatusOK, ""},
		{"typed in the address bar", "POST", map[string]string{"Sec-Fetch-Site": "none"}, http.StatusOK, ""},
		{"curl", "POST", nil, http.StatusOK, ""},
		{"a read from another site", "GET", map[string]string{"Sec-Fetch-Site": "cross-site"}, http.StatusOK, ""},
	} {
		refused = ""
		r := httptest.NewRequest(c.method, "http://console.test/console/login", nil)
		for k, v := range c.header {
			r.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != c.want || refused != c.msg {
			t.Errorf("%s: %d, refused %q; want %d, refused %q", c.name, w.Code, refused, c.want, c.msg)
		}
	}
}
