package console

import (
	"context"
	"crypto/hmac"
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
//
// A link of another tenant than the browser's portal session never
// replaces the session by itself: any page of any site can navigate a
// browser here, and a victim who went on working in what they took for
// their own portal would hand the link's tenant whatever they typed (a
// webhook's secret header). It gets a page that names both tenants and asks
// (switchLink); a link with no session, or of the session's own tenant,
// opens at once.
func (c *Console) openLink(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Referrer-Policy", "no-referrer") // the link is a credential
	tok := r.URL.Query().Get("link")
	link, cur, ok, answered := c.linkAndSession(w, r, tok)
	if answered {
		return
	}
	if ok && cur.tenant != link.Tenant {
		c.log.Info("portal: link of another tenant than the session's, asking first", "tenant", link.Tenant, "link", link.ID, "session_tenant", cur.tenant)
		// The link stays in Homing: the page's requests go to its own
		// origin only, and its Switch POST must carry that origin
		// (no-referrer would send "Origin: null", which sameOrigin refuses).
		w.Header().Set("Referrer-Policy", "same-origin")
		r = r.WithContext(context.WithValue(r.Context(), sessionKey{}, cur))
		c.render(w, r, http.StatusOK, "switch", view{Title: "Switch portals?", Now: c.now(),
			Data: switchView{From: cur.tenant, To: link.Tenant, Link: tok}})
		return
	}
	c.startPortal(w, r, link, tok)
}

// linkAndSession opens link token tok and reads the request's portal
// session (ok when there is one), for openLink and switchLink; answered is
// set when it has answered the request (a refused link, a failed read).
func (c *Console) linkAndSession(w http.ResponseWriter, r *http.Request, tok string) (link portal.Link, cur session, ok, answered bool) {
	link, err := c.openPortal(r, tok)
	if err != nil {
		c.refuseLink(w, r, err)
		return link, cur, false, true
	}
	cur, ok, err = c.authenticatePortal(r)
	if err != nil {
		c.fail(w, r, err)
		return link, cur, false, true
	}
	return link, cur, ok, false
}

// switchView is the data of the page that asks before a link replaces a
// session of another tenant.
type switchView struct {
	From, To string
	// Link is the link's token, posted back by the Switch button.
	Link string
}

// switchLink is POST /portal/open, the Switch button of openLink's page:
// the link replaces the session. Only that page can send it: the POST must
// come from this origin (sameOrigin) and carry the current session's CSRF
// value, which a page of another site can neither read nor compute.
func (c *Console) switchLink(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Referrer-Policy", "no-referrer")
	tok := r.PostFormValue("link")
	link, cur, ok, answered := c.linkAndSession(w, r, tok)
	if answered {
		return
	}
	if ok && !hmac.Equal([]byte(r.PostFormValue(CSRFField)), []byte(cur.csrf)) {
		c.message(w, r, http.StatusForbidden, "Refused", "This form did not carry the portal's CSRF token, so it was refused. Open the link again and choose on the page it shows.")
		return
	}
	c.startPortal(w, r, link, tok)
}

// startPortal makes link the browser's portal session and sends it to the
// tenant's deliveries.
func (c *Console) startPortal(w http.ResponseWriter, r *http.Request, link portal.Link, tok string) {
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
