package console

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"

	"github.com/homingdev/homing/internal/sameorigin"
	"github.com/homingdev/homing/models"
	"github.com/homingdev/homing/token"
)

// CookieName holds the admin token of a signed-in browser.
const CookieName = "homing_console"

// CSRFField is the form field every POST carries (besides the login's).
const CSRFField = "csrf"

// session is a signed-in browser: its token and the CSRF value its forms
// carry.
type session struct {
	token token.Token
	csrf  string
}

type sessionKey struct{}

func sessionOf(ctx context.Context) (session, bool) {
	s, ok := ctx.Value(sessionKey{}).(session)
	return s, ok
}

// csrfFor derives the CSRF value from the session cookie: an HMAC keyed by
// the cookie, which a page of another site can neither read nor compute,
// and which needs no server-side state shared between serve processes.
func csrfFor(cookie string) string {
	m := hmac.New(sha256.New, []byte(cookie))
	m.Write([]byte("homing console csrf v1"))
	return hex.EncodeToString(m.Sum(nil))
}

// authenticate reads the session cookie and checks its token is a valid
// admin token. It returns ok false when the browser must sign in again.
func (c *Console) authenticate(r *http.Request) (session, bool, error) {
	ck, err := r.Cookie(CookieName)
	if err != nil || ck.Value == "" {
		return session{}, false, nil
	}
	tok, err := c.cfg.Tokens.Authenticate(r.Context(), ck.Value)
	if errors.Is(err, token.ErrUnknown) {
		return session{}, false, nil
	}
	if err != nil {
		return session{}, false, err
	}
	if !token.Allows(tok.Scope, token.ScopeAdmin) {
		return session{}, false, nil
	}
	return session{token: tok, csrf: csrfFor(ck.Value)}, true, nil
}

// page wraps a GET page: without a valid session the browser is sent to
// the login form.
func (c *Console) page(h func(w http.ResponseWriter, r *http.Request, s session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, ok, err := c.authenticate(r)
		if err != nil {
			c.log.Error("console: authenticate", "error", err.Error())
			http.Error(w, "the console could not check the session; see the serve log", http.StatusInternalServerError)
			return
		}
		if !ok {
			http.Redirect(w, r, "/console/login", http.StatusSeeOther)
			return
		}
		h(w, r.WithContext(context.WithValue(r.Context(), sessionKey{}, s)), s)
	}
}

// action wraps a state-changing POST: refused with 403 unless it comes from
// the console's own pages (sameOrigin) and carries the session's CSRF value.
func (c *Console) action(h func(w http.ResponseWriter, r *http.Request, s session)) http.HandlerFunc {
	return c.sameOrigin(c.page(func(w http.ResponseWriter, r *http.Request, s session) {
		if !hmac.Equal([]byte(r.PostFormValue(CSRFField)), []byte(s.csrf)) {
			c.message(w, r, http.StatusForbidden, "Refused", "This form did not carry the console's CSRF token, so it was refused. Reload the page and try again.")
			return
		}
		h(w, r, s)
	}))
}

// sameOrigin refuses with 403 a POST that a browser says comes from another
// site (sameorigin.Check, the rule the monitor follows too).
func (c *Console) sameOrigin(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := sameorigin.Check(r, "this console"); err != nil {
			c.message(w, r, http.StatusForbidden, "Refused", err.Error())
			return
		}
		h(w, r)
	}
}

// loginForm is GET /console/login.
func (c *Console) loginForm(w http.ResponseWriter, r *http.Request) {
	c.render(w, http.StatusOK, "login", view{Title: "Sign in", Now: c.now()})
}

// login is POST /console/login: an admin token becomes the session cookie.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	plain := strings.TrimSpace(r.PostFormValue("token"))
	fail := func(status int, msg string) {
		c.render(w, status, "login", view{Title: "Sign in", Now: c.now(), Notice: msg})
	}
	if plain == "" {
		fail(http.StatusBadRequest, "Paste an admin API token (homing token create --name NAME --scope admin makes one).")
		return
	}
	tok, err := c.cfg.Tokens.Authenticate(r.Context(), plain)
	switch {
	case errors.Is(err, token.ErrUnknown):
		fail(http.StatusUnauthorized, "That token is not valid: it was revoked, or this Homing never issued it (see homing token list).")
		return
	case err != nil:
		c.log.Error("console: login", "error", err.Error())
		fail(http.StatusInternalServerError, "The token could not be checked; see the serve log.")
		return
	case !token.Allows(tok.Scope, token.ScopeAdmin):
		fail(http.StatusForbidden, "Token \""+tok.Name+"\" has scope "+tok.Scope+": it may only publish events. The console needs a token with scope admin (homing token create --name NAME --scope admin).")
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: CookieName, Value: plain, Path: Prefix,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: overTLS(r),
	})
	c.log.Info("console: signed in", "token", tok.Name)
	http.Redirect(w, r, Prefix, http.StatusSeeOther)
}

// logout is POST /console/logout: the cookie is cleared.
func (c *Console) logout(w http.ResponseWriter, r *http.Request, _ session) {
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: Prefix, MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: overTLS(r)})
	http.Redirect(w, r, "/console/login", http.StatusSeeOther)
}

// overTLS says whether the browser reached the console over TLS: directly,
// or through a proxy that terminated it and says so (X-Forwarded-Proto).
// It only decides the cookie's Secure flag, which can only restrict it.
func overTLS(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

// tenantOf is the tenant the request's session acts in: its token's. The
// console is scoped by the session, never by a filter of its own: an
// operator token's session sees the default tenant, a tenant token's its
// own (the portal, issue 26, builds on this).
func tenantOf(r *http.Request) string {
	s, _ := r.Context().Value(sessionKey{}).(session)
	return models.TenantOr(s.token.Tenant)
}
