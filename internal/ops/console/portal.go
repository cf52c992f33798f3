package console

import (
	"context"
	"crypto/hmac"
	"errors"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/homingdev/homing/internal/ops/portal"
	"github.com/homingdev/homing/internal/ops/token"
)

// PortalPrefix is where a tenant's own people see its pages: the console's
// pages and handlers, under a prefix and a cookie of their own, scoped to
// the tenant of the portal link that opened the session.
const PortalPrefix = "/portal/"

// isPortal says whether r is a portal request.
func isPortal(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, PortalPrefix) }

// portalCookie is the portal session's cookie: HttpOnly, path /portal/.
//
// It must reach a portal framed by a page of another site (the tenant's
// portal_origins), which a SameSite=Lax cookie never does, and browsers
// that refuse third-party cookies refuse an unpartitioned SameSite=None one
// there too. So wherever the browser can keep it Secure (over TLS, or on a
// loopback host, which browsers count as a secure context) it is
// SameSite=None; Secure; Partitioned (CHIPS): the browser keeps one jar per
// top-level site, so a portal opened in a frame on app.example.com has a
// session that only frames on app.example.com see, and a portal opened on
// its own has another. Partitioning is what makes it acceptable where
// third-party cookies are blocked: no site can follow the visitor with it.
// SameSite=None means a cross-site form would carry it, which is why every
// state-changing POST is same-origin-checked and carries the session's CSRF
// value (action, switchLink). Over plain HTTP on another host a browser
// refuses SameSite=None, so the cookie stays SameSite=Lax: the portal
// works opened on its own, and embedding needs HTTPS.
func portalCookie(r *http.Request, value string, maxAge int) *http.Cookie {
	ck := &http.Cookie{Name: PortalCookieName, Value: value, Path: PortalPrefix, MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: overTLS(r)}
	if embeddable(r) {
		ck.SameSite, ck.Secure, ck.Partitioned = http.SameSiteNoneMode, true, true
	}
	return ck
}

// embeddable says whether the browser can keep a Secure cookie for r's
// origin: r came over TLS, or to a loopback host (http://127.0.0.1,
// http://localhost), which browsers treat as secure.
func embeddable(r *http.Request) bool {
	if overTLS(r) {
		return true
	}
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// clearPortalCookie ends the portal session (Sign out): the partitioned
// cookie, and an unpartitioned one of before issue 38 if the browser still
// holds one, so that it cannot stand in for the session just ended. Only a
// clear may name both: a browser that ignores Partitioned would take a
// clear of the old cookie, sent beside a new session, for a clear of the
// new one.
func clearPortalCookie(w http.ResponseWriter, r *http.Request) {
	ck := portalCookie(r, "", -1)
	http.SetCookie(w, ck)
	if ck.Partitioned {
		http.SetCookie(w, &http.Cookie{Name: PortalCookieName, Value: "", Path: PortalPrefix, MaxAge: -1,
			HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: overTLS(r)})
	}
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
		c.refuseLink(w, r, link, err)
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
// act on; an expired or revoked one's page is its tenant's (endedAs).
func (c *Console) refuseLink(w http.ResponseWriter, r *http.Request, link portal.Link, err error) {
	if link.Tenant != "" && (errors.Is(err, portal.ErrExpired) || errors.Is(err, portal.ErrRevoked)) {
		r = c.endedAs(w, r, link.Tenant)
	}
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
	// A browser may send two: a partitioned one and one of before issue
	// 38, until that one's link expires or Sign out clears it
	// (clearPortalCookie); the first that opens is the session.
	for _, ck := range r.CookiesNamed(PortalCookieName) {
		if ck.Value == "" {
			continue
		}
		link, err := c.openPortal(r, ck.Value)
		if errors.Is(err, portal.ErrExpired) || errors.Is(err, portal.ErrRevoked) || errors.Is(err, portal.ErrInvalid) || errors.Is(err, portal.ErrNoKey) {
			continue
		}
		if err != nil {
			return session{}, false, err
		}
		tok := token.Token{Name: "portal link " + link.ID, Scope: token.ScopeAdmin, Tenant: link.Tenant}
		return session{token: tok, csrf: csrfFor(ck.Value), tenant: link.Tenant, base: PortalPrefix}, true, nil
	}
	return session{}, false, nil
}

// endedAs dresses the page that says a portal link or session has ended as
// tenant's: framed by its portal_origins and in its theme, so that a
// customer whose embedded portal's link expired reads why in the frame
// instead of the browser's "refused to connect". The link was signed by
// Homing, so the tenant is authentic; the page opens nothing and has no
// form, so a frame of the tenant's origins gains only the message. It
// answers r with that tenant in its context (no token, no CSRF value); when
// the tenant cannot be read, r as it was, framed by no one.
func (c *Console) endedAs(w http.ResponseWriter, r *http.Request, tenant string) *http.Request {
	s := session{tenant: tenant, base: PortalPrefix}
	if err := c.portalHeaders(w, r, &s); err != nil {
		c.log.Warn("portal: read the tenant of an ended link", "tenant", tenant, "error", err.Error())
		return r
	}
	return r.WithContext(context.WithValue(r.Context(), sessionKey{}, s))
}

// endedTenant is the tenant of the request's portal cookie whose link has
// expired or was revoked, "" when there is none.
func (c *Console) endedTenant(r *http.Request) string {
	for _, ck := range r.CookiesNamed(PortalCookieName) {
		link, err := c.openPortal(r, ck.Value)
		if link.Tenant != "" && (errors.Is(err, portal.ErrExpired) || errors.Is(err, portal.ErrRevoked)) {
			return link.Tenant
		}
	}
	return ""
}

// portalHeaders reads the session's tenant once for a portal page: its
// portal_origins, and no one else, may embed it in a frame, and its theme
// is what the page shows (s.theme). X-Frame-Options cannot name origins, so
// it is dropped where the CSP allows some (browsers that know
// frame-ancestors ignore it anyway) and stays DENY where none may. The
// CSP's img-src adds the theme's logo origin, and nothing else: the page
// still runs no script and loads nothing else from anywhere.
func (c *Console) portalHeaders(w http.ResponseWriter, r *http.Request, s *session) error {
	t, err := c.tenants.Get(r.Context(), s.tenant)
	if err != nil {
		return err
	}
	s.theme = t.Theme
	origins := frameOrigins(t.PortalOrigins)
	w.Header().Set("Content-Security-Policy", csp(origins, t.ImageOrigin()))
	if len(origins) > 0 {
		w.Header().Del("X-Frame-Options")
	}
	return nil
}

// csp is the pages' Content-Security-Policy with frame-ancestors origins
// ('none' without any) and, when set, one more origin images may come
// from (a tenant's logo).
func csp(origins []string, imgOrigin string) string {
	fa := "'none'"
	if len(origins) > 0 {
		fa = strings.Join(origins, " ")
	}
	img := ""
	if imgOrigin != "" {
		img = "img-src 'self' " + imgOrigin + "; "
	}
	return "default-src 'self'; " + img + "frame-ancestors " + fa + "; form-action 'self'"
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
