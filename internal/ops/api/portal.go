package api

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/homingdev/homing/internal/ops/portal"
)

// PortalOpenPath is where a portal link's URL points; the console serves it
// (console.PortalPrefix + "open").
const PortalOpenPath = "/portal/open"

// portalLinkRequest is the body of POST /v1/portal-links; it may be empty.
type portalLinkRequest struct {
	// TTL is how long the link opens the portal, a duration such as "2h"
	// (default 1h, at most 24h).
	TTL string `json:"ttl"`
}

// createPortalLink is POST /v1/portal-links: a link into the portal of the
// request's tenant (a tenant token's own, or the one an operator token
// names in Homing-Tenant).
func (s *Server) createPortalLink(w http.ResponseWriter, r *http.Request) error {
	var req portalLinkRequest
	if r.ContentLength != 0 {
		if err := decode(r, &req); err != nil && !errors.Is(err, io.EOF) {
			return err
		}
	}
	var ttl time.Duration
	if req.TTL != "" {
		d, err := time.ParseDuration(req.TTL)
		if err != nil {
			return invalidRequest("ttl", "ttl: %q is not a duration such as \"30m\" or \"2h\"", req.TTL)
		}
		if ttl, err = portal.CheckTTL(d); err != nil || d == 0 {
			return invalidRequest("ttl", "ttl: %q must be between 1m and %s (the default is %s)", req.TTL, portal.MaxTTL, portal.DefaultTTL)
		}
	}
	if s.cfg.Portal == nil {
		return errorf(http.StatusConflict, CodeConflict, "", "%s", portal.ErrNoKey.Error())
	}
	link, err := s.cfg.Portal.Create(r.Context(), tenantOf(r.Context()), ttl, tokenOf(r.Context()))
	if errors.Is(err, portal.ErrNoKey) {
		return errorf(http.StatusConflict, CodeConflict, "", "%s", err.Error())
	}
	if err != nil {
		return err
	}
	scheme := "http"
	if r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https") {
		scheme = "https"
	}
	writeJSON(w, http.StatusCreated, map[string]any{
		"id":         link.ID,
		"tenant":     link.Tenant,
		"url":        scheme + "://" + r.Host + PortalOpenPath + "?link=" + link.Token,
		"expires_at": link.ExpiresAt,
	})
	return nil
}

// revokePortalLink is DELETE /v1/portal-links/{id}: the link opens nothing
// more and the sessions it started end. Another tenant's link is 404.
func (s *Server) revokePortalLink(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if s.cfg.Portal == nil {
		return notFound("portal link %q not found", id)
	}
	err := s.cfg.Portal.Revoke(r.Context(), tenantOf(r.Context()), id)
	if errors.Is(err, portal.ErrNotFound) {
		return notFound("portal link %q not found", id)
	}
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// listPortalLinks is GET /v1/portal-links: the request's tenant's live
// links (neither expired nor revoked), without their URLs, which are the
// credentials.
func (s *Server) listPortalLinks(w http.ResponseWriter, r *http.Request) error {
	links := []portal.Issued{}
	if s.cfg.Portal != nil {
		var err error
		if links, err = s.cfg.Portal.List(r.Context(), tenantOf(r.Context())); err != nil {
			return err
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"portal_links": links})
	return nil
}

// revokePortalLinks is DELETE /v1/portal-links?all=true: every live link of
// the request's tenant opens nothing more, and their sessions end. all=true
// is required, so that a DELETE that lost its link's id revokes nothing.
func (s *Server) revokePortalLinks(w http.ResponseWriter, r *http.Request) error {
	if r.URL.Query().Get("all") != "true" {
		return invalidRequest("all", "DELETE /v1/portal-links revokes every live portal link of the tenant only with ?all=true; DELETE /v1/portal-links/{id} revokes one")
	}
	var n int64
	if s.cfg.Portal != nil {
		var err error
		if n, err = s.cfg.Portal.RevokeAll(r.Context(), tenantOf(r.Context())); err != nil {
			return err
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"revoked": n})
	return nil
}
