package send

import (
	"context"
	"errors"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"testing"
)

// A webhook with follow_redirects follows 301/302/303 as GET and 307/308 as
// the same POST with its body, up to its limit, and the receiver at the end
// gets the request; without it, the 3xx is the result.
func TestSenderFollowsRedirectsUpToTheWebhooksLimit(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/303":
			http.Redirect(w, r, "/end", http.StatusSeeOther)
		case "/307":
			http.Redirect(w, r, "/end", http.StatusTemporaryRedirect)
		case "/loop":
			http.Redirect(w, r, "/loop", http.StatusFound)
		default:
			w.WriteHeader(http.StatusOK)
		}
	})
	s := NewSender(SenderConfig{})
	t.Cleanup(s.Close)
	ctx := context.Background()
	body := []byte(`{"a":1}`)

	res := s.Send(ctx, Request{URL: rec.srv.URL + "/303", Body: body})
	if res.Class != Class3xx || res.StatusCode != http.StatusSeeOther || len(rec.got()) != 1 {
		t.Fatalf("follow_redirects 0: %+v, %d requests; want the 303 as a failure and one request", res, len(rec.got()))
	}

	res = s.Send(ctx, Request{URL: rec.srv.URL + "/303", Body: body, FollowRedirects: 10})
	got := rec.got()
	if !res.OK() || len(got) != 3 || got[2].method != http.MethodGet || got[2].path != "/end" || len(got[2].body) != 0 {
		t.Fatalf("303 followed: %+v, last request %+v; want a GET of /end without a body", res, got[len(got)-1])
	}

	res = s.Send(ctx, Request{URL: rec.srv.URL + "/307", Body: body, FollowRedirects: 1})
	got = rec.got()
	if last := got[len(got)-1]; !res.OK() || last.method != http.MethodPost || string(last.body) != string(body) {
		t.Fatalf("307 followed: %+v, last request %s %q; want the same POST and body", res, last.method, last.body)
	}

	before := len(rec.got())
	res = s.Send(ctx, Request{URL: rec.srv.URL + "/loop", Body: body, FollowRedirects: 3})
	if res.Class != Class3xx || !errors.Is(res.Err, ErrTooManyRedirects) || !strings.Contains(res.Err.Error(), "stopped after following 3") {
		t.Fatalf("redirect loop: %+v; want a 3xx failure saying it stopped after 3", res)
	}
	if n := len(rec.got()) - before; n != 4 {
		t.Fatalf("redirect loop: %d requests, want 4 (the first and 3 redirects)", n)
	}
}

// Every hop of a redirect passes the SSRF guard: a receiver the guard lets
// through cannot send the request on to an address it refuses.
func TestSenderRedirectHopsPassTheGuard(t *testing.T) {
	t.Parallel()
	inner := newRecorder(t, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	// 127.0.0.2 is loopback, outside the one address the guard allows.
	target := strings.Replace(inner.srv.URL, "127.0.0.1", "127.0.0.2", 1)
	outer := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target+"/internal", http.StatusFound)
	})
	s := NewSender(SenderConfig{DialControl: NewGuard([]netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}).Control})
	t.Cleanup(s.Close)
	res := s.Send(context.Background(), Request{URL: outer.srv.URL, Body: []byte("{}"), FollowRedirects: 10})
	if res.OK() || !errors.Is(res.Err, ErrForbiddenTarget) || len(inner.got()) != 0 {
		t.Fatalf("redirect to a forbidden address: %+v, %d requests inside; want refused, none", res, len(inner.got()))
	}
	if len(outer.got()) != 1 {
		t.Fatalf("outer receiver got %d requests, want 1", len(outer.got()))
	}
}

// A redirect to another origin (here: another port) gets none of the
// secret, credential-like or signature headers, and no hop gets a Referer;
// a redirect within the origin keeps them, and a chain that comes back to
// the origin after leaving it does not get them back.
func TestSenderRedirectKeepsSecretsAtTheOrigin(t *testing.T) {
	t.Parallel()
	other := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/back" {
			http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
		}
	})
	origin := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/away":
			http.Redirect(w, r, other.srv.URL+"/landed?token=x", http.StatusFound)
		case "/away307":
			http.Redirect(w, r, other.srv.URL+"/landed", http.StatusTemporaryRedirect)
		case "/roundtrip":
			http.Redirect(w, r, other.srv.URL+"/back?to="+url.QueryEscape("http://"+r.Host+"/home"), http.StatusFound)
		case "/near":
			http.Redirect(w, r, "/home", http.StatusFound)
		}
	})
	s := newTestSender(t)
	header := http.Header{
		"X-Api-Key": {"k1"}, "X-Auth-Token": {"t1"}, "Authorization": {"Bearer b"}, "Cookie": {"c=1"},
		"X-Custom-Sealed": {"sealed"}, "Webhook-Signature": {"v1,sig"}, "X-Frappe-Webhook-Signature": {"fsig"},
		"Webhook-Id": {"d1"}, "X-Tenant": {"acme"},
	}
	secret := []string{"X-Custom-Sealed", "webhook-id", "webhook-signature", "X-Frappe-Webhook-Signature"}
	kept := []string{"X-Api-Key", "X-Auth-Token", "Authorization", "Cookie", "X-Custom-Sealed", "Webhook-Signature", "X-Frappe-Webhook-Signature", "Webhook-Id"}
	send := func(path string) {
		t.Helper()
		res := s.Send(context.Background(), Request{URL: origin.srv.URL + path, Header: header, Body: []byte("{}"), FollowRedirects: 5, Secret: secret})
		if !res.OK() {
			t.Fatalf("%s: %+v", path, res)
		}
	}

	for _, path := range []string{"/away", "/away307", "/roundtrip"} {
		send(path)
	}
	var leaked []string
	for _, r := range append(other.got(), origin.got()[len(origin.got())-1]) {
		for _, name := range kept {
			if r.header.Get(name) != "" {
				leaked = append(leaked, r.path+" "+name)
			}
		}
		if r.header.Get("Referer") != "" {
			leaked = append(leaked, r.path+" Referer "+r.header.Get("Referer"))
		}
		if r.header.Get("X-Tenant") != "acme" {
			t.Errorf("%s: X-Tenant %q; a plain header should follow the redirect", r.path, r.header.Get("X-Tenant"))
		}
	}
	if len(other.got()) != 3 || len(leaked) != 0 {
		t.Fatalf("another origin got %d requests and: %q; want 3 and none of the secrets", len(other.got()), leaked)
	}

	send("/near")
	last := origin.got()[len(origin.got())-1]
	if last.path != "/home" || last.header.Get("Referer") != "" {
		t.Fatalf("same-origin redirect: %s with Referer %q; want /home without one", last.path, last.header.Get("Referer"))
	}
	for _, name := range kept {
		if last.header.Get(name) != header.Get(name) {
			t.Errorf("same-origin redirect: %s is %q, want %q", name, last.header.Get(name), header.Get(name))
		}
	}
}

func TestCredential(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]bool{
		"Authorization": true, "Proxy-Authorization": true, "Cookie": true, "X-Api-Key": true, "X-Auth-Token": true,
		"X-Client-Secret": true, "webhook-signature": true, "apikey": true, "X-Session-Id": true,
		"X-Tenant": false, "Content-Type": false, "Accept": false, "User-Agent": false,
	} {
		if got := Credential(name); got != want {
			t.Errorf("Credential(%q) = %v, want %v", name, got, want)
		}
	}
}
