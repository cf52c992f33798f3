// Package sameorigin holds the one rule by which Homing's browser-facing
// servers (the console, the monitor) refuse a state-changing request that
// a browser says comes from another site: a form or script on a page of
// another origin would otherwise ride on the credentials the browser sends
// by itself (a session cookie, HTTP basic auth).
package sameorigin

import (
	"net/http"
	"net/url"
	"strings"
)

// Refusal is why Check refused a request, in words for the person whose
// browser sent it.
type Refusal struct{ msg string }

func (r *Refusal) Error() string { return r.msg }

// Check refuses (a *Refusal) a request that the browser marks as coming from
// another site (Sec-Fetch-Site other than same-origin or none) or whose
// Origin is not this host. Requests without either header (curl, scripts,
// old browsers) pass: they carry no ambient credentials of a victim. what
// names the server in the message ("this console").
func Check(r *http.Request, what string) error {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		return &Refusal{"A form on another site (" + site + ") tried to act on " + what + ", so it was refused."}
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || !strings.EqualFold(u.Host, r.Host) {
			return &Refusal{"A form from " + o + " tried to act on " + what + ", so it was refused."}
		}
	}
	return nil
}

// Safe reports whether method only reads (GET, HEAD, OPTIONS): what Check
// need not guard.
func Safe(method string) bool {
	return method == http.MethodGet || method == http.MethodHead || method == http.MethodOptions
}
