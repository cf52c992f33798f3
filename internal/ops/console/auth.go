package console

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/homingdev/homing/internal/engine/tenant"
	"github.com/homingdev/homing/internal/intake/dbstate"
	"github.com/homingdev/homing/internal/ops/token"
	"github.com/homingdev/homing/models"
)

// CookieName holds the admin token of a signed-in browser.
const CookieName = "homing_console"

// CSRFField is the form field every POST carries (besides the login's).
const CSRFField = "csrf"

// PortalCookieName holds the link token of a portal session: a cookie of
// its own, path /portal/, so that a browser may hold a console session and
// a portal session at once without either reading the other.
const PortalCookieName = "homing_portal"

// TenantCookieName holds the tenant an operator's session looks at (the
// tenant filter in every page's header).
const TenantCookieName = "homing_console_tenant"

// session is a signed-in browser: its token, the CSRF value its forms
// carry, and the tenant every page of it is scoped to.
type session struct {
	token token.Token
	csrf  string
	// tenant is the tenant the session acts in: a tenant token's or a
	// portal link's own, or the one an operator's session chose.
	tenant string
	// operator is set for an operator token's console session, which may
	// switch tenants.
	operator bool
	// base is the prefix its pages' links use: Prefix or PortalPrefix.
	base string
	// theme is a portal session's tenant's theme (portalHeaders); the
	// console's pages are Homing's.
	theme tenant.Theme
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

// authenticate reads the session cookie of the request's prefix: a portal
// link's under PortalPrefix, else an admin token's. It returns ok false when
// the browser must sign in again (or, in the portal, open a new link).
func (c *Console) authenticate(r *http.Request) (session, bool, error) {
	if isPortal(r) {
		return c.authenticatePortal(r)
	}
	tok, cookie, ok, err := c.adminToken(r)
	if !ok || err != nil {
		return session{}, false, err
	}
	s := session{token: tok, csrf: csrfFor(cookie), tenant: models.TenantOr(tok.Tenant), operator: tok.Operator, base: Prefix}
	if s.operator {
		if s.tenant, err = c.chosenTenant(r); err != nil {
			return session{}, false, err
		}
	}
	return s, true, nil
}

// adminToken is the admin token the console's session cookie holds, and
// the cookie; ok is false when there is none, it is unknown, or it is not
// an admin's (the browser must sign in again).
func (c *Console) adminToken(r *http.Request) (tok token.Token, cookie string, ok bool, err error) {
	ck, err := r.Cookie(CookieName)
	if err != nil || ck.Value == "" {
		return token.Token{}, "", false, nil
	}
	tok, err = c.cfg.Tokens.Authenticate(r.Context(), ck.Value)
	if errors.Is(err, token.ErrUnknown) {
		return token.Token{}, "", false, nil
	}
	if err != nil {
		return token.Token{}, "", false, err
	}
	return tok, ck.Value, token.Allows(tok.Scope, token.ScopeAdmin), nil
}

// Sessions names whom a page request is charged to by serve's intake
// budget (api.Sessions): the tenant of its session (a portal link's, a
// tenant token's), "" for an operator's session, or ok false for a request
// without a valid one, whose body is then held to a sign-in form's size.
// A session that cannot be checked now (the database away) counts as none:
// the page itself answers the outage.
func (c *Console) Sessions(r *http.Request) (tenant string, ok bool) {
	if isPortal(r) {
		s, ok, err := c.authenticatePortal(r)
		if err != nil || !ok {
			return "", false
		}
		return s.tenant, true
	}
	tok, _, ok, err := c.adminToken(r)
	if !ok || err != nil {
		return "", false
	}
	if tok.Operator {
		return "", true
	}
	return models.TenantOr(tok.Tenant), true
}

// chosenTenant is the tenant an operator's session looks at: the tenant
// filter's cookie while that tenant exists, else the default tenant.
func (c *Console) chosenTenant(r *http.Request) (string, error) {
	ck, err := r.Cookie(TenantCookieName)
	if err != nil || ck.Value == "" || ck.Value == models.DefaultTenant {
		return models.DefaultTenant, nil
	}
	if tenant.CheckName(ck.Value) != nil {
		return models.DefaultTenant, nil
	}
	ok, err := c.tenants.Exists(r.Context(), ck.Value)
	if err != nil {
		return "", err
	}
	if !ok {
		return models.DefaultTenant, nil
	}
	return ck.Value, nil
}

// page wraps a GET page: without a valid session the browser is sent to
// the login form.
func (c *Console) page(h func(w http.ResponseWriter, r *http.Request, s session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, ok, err := c.authenticate(r)
		if err != nil {
			if c.unavailable(w, r, err) {
				return
			}
			c.log.Error("console: authenticate", "error", err.Error())
			http.Error(w, "the console could not check the session; see the serve log", http.StatusInternalServerError)
			return
		}
		if !ok && isPortal(r) {
			if t := c.endedTenant(r); t != "" {
				r = c.endedAs(w, r, t)
			}
			c.message(w, r, http.StatusUnauthorized, "Session ended", "This portal session has ended: its link expired or was revoked. Ask for a new portal link.")
			return
		}
		if !ok {
			http.Redirect(w, r, "/console/login", http.StatusSeeOther)
			return
		}
		if isPortal(r) {
			if err := c.portalHeaders(w, r, &s); err != nil {
				if c.unavailable(w, r, err) {
					return
				}
				c.log.Error("console: read the tenant's portal origins", "error", err.Error())
				http.Error(w, "the portal could not read its settings; see the serve log", http.StatusInternalServerError)
				return
			}
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
// site (httpserve.CrossOrigin, net/http's CrossOriginProtection, the rule
// the monitor follows too).
func (c *Console) sameOrigin(h http.HandlerFunc) http.HandlerFunc {
	return c.crossOrigin.Handler(h).ServeHTTP
}

// loginForm is GET /console/login.
func (c *Console) loginForm(w http.ResponseWriter, r *http.Request) {
	c.render(w, r, http.StatusOK, "login", view{Title: "Sign in", Now: c.now()})
}

// login is POST /console/login: an admin token becomes the session cookie.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	plain := strings.TrimSpace(r.PostFormValue("token"))
	fail := func(status int, msg string) {
		c.render(w, r, status, "login", view{Title: "Sign in", Now: c.now(), Notice: msg})
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
	case err != nil && c.cfg.Database.Observe(err).Retryable():
		w.Header().Set("Retry-After", strconv.Itoa(int(dbstate.RetryAfter/time.Second)))
		fail(http.StatusServiceUnavailable, "The token could not be checked: "+dbstate.Classify(err).Explain()+". Try again in a few seconds.")
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

// logout is POST /console/logout (and /portal/logout): the session's
// cookie is cleared.
func (c *Console) logout(w http.ResponseWriter, r *http.Request, s session) {
	if isPortal(r) {
		clearPortalCookie(w, r)
		c.message(w, r, http.StatusOK, "Signed out", "You left the portal. Open a new portal link to come back.")
		return
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: Prefix, MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: overTLS(r)})
	http.SetCookie(w, &http.Cookie{Name: TenantCookieName, Value: "", Path: Prefix, MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: overTLS(r)})
	http.Redirect(w, r, "/console/login", http.StatusSeeOther)
}

// chooseTenant is POST /console/tenant: an operator's session looks at
// another tenant (the tenant filter in every page's header). Other
// sessions are scoped by their token and cannot choose.
func (c *Console) chooseTenant(w http.ResponseWriter, r *http.Request, s session) {
	name := r.PostFormValue("tenant")
	if !s.operator || isPortal(r) {
		c.message(w, r, http.StatusForbidden, "Refused", "This session is scoped to tenant "+s.tenant+" by its token; only an operator token's session chooses a tenant.")
		return
	}
	if err := tenant.CheckName(name); err != nil {
		c.message(w, r, http.StatusNotFound, "Not found", "No tenant "+name+".")
		return
	}
	if ok, err := c.tenants.Exists(r.Context(), name); err != nil || !ok {
		if err != nil {
			c.fail(w, r, err)
			return
		}
		c.message(w, r, http.StatusNotFound, "Not found", "No tenant "+name+".")
		return
	}
	http.SetCookie(w, &http.Cookie{Name: TenantCookieName, Value: name, Path: Prefix,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: overTLS(r)})
	http.Redirect(w, r, Prefix, http.StatusSeeOther)
}

// overTLS says whether the browser reached the console over TLS: directly,
// or through a proxy that terminated it and says so (X-Forwarded-Proto).
// It only decides the cookie's Secure flag, which can only restrict it.
func overTLS(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

// tenantOf is the tenant the request's session acts in. The console is
// scoped by the session, never by a filter at each call site: a tenant
// token's session and a portal link's see their own tenant, an operator
// token's the one it chose (default until it chooses).
func tenantOf(r *http.Request) string {
	s, _ := r.Context().Value(sessionKey{}).(session)
	return models.TenantOr(s.tenant)
}
