package monitor

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"

	"github.com/homingdev/homing/config"
	"github.com/homingdev/homing/internal/lib/httpserve"
)

// RequireAuth serves h only to requests carrying monitor.auth's
// credentials: an "Authorization: Bearer TOKEN" header, or HTTP basic
// auth (which a browser asks for itself). Others get 401 with a challenge.
// The zero MonitorAuth lets every request through.
func RequireAuth(h http.Handler, auth config.MonitorAuth) http.Handler {
	if auth == (config.MonitorAuth{}) {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if allowed(r, auth) {
			h.ServeHTTP(w, r)
			return
		}
		if auth.Bearer != "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="homing monitor"`)
		} else {
			w.Header().Set("WWW-Authenticate", `Basic realm="homing monitor", charset="UTF-8"`)
		}
		http.Error(w, "authentication required (monitor.auth)", http.StatusUnauthorized)
	})
}

// SameOrigin refuses with 403 a write (any method but GET, HEAD, OPTIONS)
// that a browser says comes from another site, by the console's rule
// (httpserve.CrossOrigin, net/http's CrossOriginProtection): with
// --read-write and basic auth, the browser sends the credentials by itself,
// so a form on any page could otherwise archive or delete tasks.
func SameOrigin(h http.Handler) http.Handler {
	return httpserve.CrossOrigin("the monitor", func(w http.ResponseWriter, _ *http.Request, msg string) {
		http.Error(w, msg+" Use the monitor's own pages to change tasks.", http.StatusForbidden)
	}).Handler(h)
}

func allowed(r *http.Request, auth config.MonitorAuth) bool {
	if auth.Bearer != "" {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		return ok && same(tok, auth.Bearer)
	}
	user, pass, ok := r.BasicAuth()
	// Both compared, always, so the time taken tells nothing.
	return ok && same(user, auth.User) && same(pass, auth.Password)
}

// same compares in constant time (over the digests, so lengths leak
// nothing either).
func same(a, b string) bool {
	ha, hb := sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))
	return subtle.ConstantTimeCompare(ha[:], hb[:]) == 1
}
