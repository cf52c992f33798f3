package httpserve

import "net/http"

// CrossOrigin is net/http's CrossOriginProtection, the one rule by which
// Homing's browser-facing servers (the console, the monitor) refuse a
// state-changing request that a browser says comes from another site: a
// form or script on a page of another origin would otherwise ride on the
// credentials the browser sends by itself (a session cookie, HTTP basic
// auth). Requests with neither Sec-Fetch-Site nor Origin (curl, scripts)
// pass: they carry no ambient credentials of a victim. A refusal reaches
// deny with a message in words for the person whose browser sent it,
// naming the site and what (say "this console").
func CrossOrigin(what string, deny func(w http.ResponseWriter, r *http.Request, msg string)) *http.CrossOriginProtection {
	p := http.NewCrossOriginProtection()
	p.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		deny(w, r, crossOriginRefusal(r, what))
	}))
	return p
}

// crossOriginRefusal says which site a refused request came from.
func crossOriginRefusal(r *http.Request, what string) string {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		return "A form on another site (" + site + ") tried to act on " + what + ", so it was refused."
	}
	if o := r.Header.Get("Origin"); o != "" {
		return "A form from " + o + " tried to act on " + what + ", so it was refused."
	}
	return "A request from another site tried to act on " + what + ", so it was refused."
}
