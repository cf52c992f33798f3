package console

import (
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/homingdev/homing/portal"
	"github.com/homingdev/homing/token"
)

// PortalPrefix is where a tenant's own people see its pages: the console's
// pages and handlers, under a prefix and a cookie of their own, scoped to
// the tenant of the portal link that opened the session.
const PortalPrefix = "/portal/"

// isPortal says whether r is a portal request.
func isPortal(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, PortalPrefix) }

// portalCookie is the portal session's cookie: HttpOnly, SameSite=Lax (a
// link opened from a mail or a tenant's page must arrive signed in),
// Secure over TLS, path /portal/.
func portalCookie(r *http.Request, value string, maxAge int) *http.Cookie {
	return &http.Cookie{Name: PortalCookieName, Value: value, Path: PortalPrefix, MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: overTLS(r)}
}

// openLink is GET /portal/open?link=TOKEN: a valid link starts a portal
// session of its tenant and sends the browser to the tenant's deliveries;
// an expired, altered or revoked one gets a page saying which.
func (c *Console) openLink(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Referrer-Policy", "no-referrer") // the link is a credential
	tok := r.URL.Query().Get("link")
	link, err := c.openPortal(r, tok)
	if err != nil {
		c.refuseLink(w, r, err)
		return
	}
	ck := portalCookie(r, tok, 0)
	ck.Expires = link.ExpiresAt
	http.SetCookie(w, ck)
	c.log.Info("portal: link opened", "tenant", link.Tenant, "link", link.ID)
	http.Redirect(w, r, PortalPrefix+"deliveries", http.StatusSeeOther)
}

func (c *Console) openPortal(r *http.Request, tok string) (portal.Link, error) {
	if c.cfg.Portal == nil {
		return portal.Link{}, portal.ErrNoKey
	}
	return c.cfg.Portal.Open(r.Context(), tok)
}

// refuseLink answers a link that opens nothing with a 4xx page a person can
// act on.
func (c *Console) refuseLink(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, portal.ErrExpired):
		c.message(w, r, http.StatusGone, "Link expired", "This portal link has expired. Ask whoever sent it for a new one.")
	case errors.Is(err, portal.ErrRevoked):
		c.message(w, r, http.StatusGone, "Link revoked", "This portal link was revoked and opens nothing more. Ask whoever sent it for a new one.")
	case errors.Is(err, portal.ErrInvalid):
		c.message(w, r, http.StatusForbidden, "Link not valid", "This portal link is not valid: it was altered or cut short when it was copied. Copy the whole link again, or ask for a new one.")
	case errors.Is(err, portal.ErrNoKey):
		c.message(w, r, http.StatusServiceUnavailable, "Portal not set up", "This Homing has no secrets.key, so it opens no portal links.")
	default:
		c.fail(w, r, err)
	}
}

// authenticatePortal reads the portal cookie: the link that opened the
// session, checked again at every request, so that the session ends when
// the link expires or is revoked.
func (c *Console) authenticatePortal(r *http.Request) (session, bool, error) {
	ck, err := r.Cookie(PortalCookieName)
	if err != nil || ck.Value == "" {
		return session{}, false, nil
	}
	link, err := c.openPortal(r, ck.Value)
	if errors.Is(err, portal.ErrExpired) || errors.Is(err, portal.ErrRevoked) || errors.Is(err, portal.ErrInvalid) || errors.Is(err, portal.ErrNoKey) {
		return session{}, false, nil
	}
	if err != nil {
		return session{}, false, err
	}
	tok := token.Token{Name: "portal link " + link.ID, Scope: token.ScopeAdmin, Tenant: link.Tenant}
	return session{token: tok, csrf: csrfFor(ck.Value), tenant: link.Tenant, base: PortalPrefix}, true, nil
}

// frameAncestors lets the tenant's portal_origins, and no one else, embed
// its portal in a frame. X-Frame-Options cannot name origins, so it is
// dropped where the CSP allows some (browsers that know frame-ancestors
// ignore it anyway) and stays DENY where none may.
func (c *Console) frameAncestors(w http.ResponseWriter, r *http.Request, name string) error {
	t, err := c.tenants.Get(r.Context(), name)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Security-Policy", csp(frameOrigins(t.PortalOrigins)))
	if len(frameOrigins(t.PortalOrigins)) > 0 {
		w.Header().Del("X-Frame-Options")
	}
	return nil
}

// csp is the pages' Content-Security-Policy with frame-ancestors origins
// ('none' without any).
func csp(origins []string) string {
	fa := "'none'"
	if len(origins) > 0 {
		fa = strings.Join(origins, " ")
	}
	return "default-src 'self'; frame-ancestors " + fa + "; form-action 'self'"
}

// frameOrigins keeps the origins that can be said in a CSP source list:
// scheme://host[:port], http or https, nothing else. Anything else (a
// path, a ';', a space) would change the header's meaning and is left out.
func frameOrigins(list []string) []string {
	var out []string
	for _, o := range list {
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
			u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil ||
			strings.ContainsAny(o, " ;,'\"\r\n\t") {
			continue
		}
		out = append(out, u.Scheme+"://"+u.Host)
	}
	return out
}

// base is the prefix of r's pages: /portal/ in the portal, else /console/.
func base(r *http.Request) string {
	if isPortal(r) {
		return PortalPrefix
	}
	return Prefix
}
