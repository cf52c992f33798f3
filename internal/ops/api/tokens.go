package api

import (
	"context"
	"errors"
	"net/http"

	"github.com/homingdev/homing/internal/ops/token"
)

// tokenRequest is the body of POST /v1/tokens.
type tokenRequest struct {
	Name string `json:"name"`
	// Scope is publish (the default) or admin.
	Scope string `json:"scope"`
	// Tenant is the tenant the token acts in; empty is the request's own
	// (a tenant token's, or the one an operator token names in
	// Homing-Tenant, else default). Only an operator token may name
	// another.
	Tenant string `json:"tenant"`
	// Operator asks for an operator token (no tenant of its own, may name
	// any and manage tenants), which only an operator token may make. It
	// is never implied: a backend that forgets "tenant" gets a token of the
	// request's tenant, not the keys to every tenant.
	Operator bool `json:"operator"`
}

// tokenCreated is the answer of POST /v1/tokens: the token as listed, and
// the token itself, shown this once (only its hash is kept).
type tokenCreated struct {
	token.Token
	Plain string `json:"token"`
}

// tokenList is the answer of GET /v1/tokens.
type tokenList struct {
	Tokens []token.Token `json:"tokens"`
}

// allTenants says whether the request manages every token: an operator
// token that names no tenant in Homing-Tenant. Any other request manages
// its tenant's tokens only (token.Service.ListOf).
func allTenants(ctx context.Context) bool {
	sc, _ := ctx.Value(scopeKey{}).(scope)
	return sc.operator
}

// createToken is POST /v1/tokens: a token of the request's tenant, of
// another tenant (operator tokens only), or an operator token (operator
// tokens only), made by token.Service.Create as `homing token create` makes
// it.
func (s *Server) createToken(w http.ResponseWriter, r *http.Request) error {
	var req tokenRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	caller := tokenOf(r.Context())
	tenant := ""
	switch {
	case req.Operator && req.Tenant != "":
		return invalidRequest("operator", "an operator token acts in no tenant of its own: send either \"operator\": true or \"tenant\", not both")
	case req.Operator && !caller.Operator:
		return &authError{
			err:       errorf(http.StatusForbidden, CodeForbidden, "", "token %q acts in tenant %q only; an operator token can only be made with an operator token", caller.Name, caller.Tenant),
			challenge: realm + `, error="insufficient_scope"`,
		}
	case req.Operator && !allTenants(r.Context()):
		return invalidRequest("operator", "an operator token belongs to no tenant: ask for it without the %s header", TenantHeader)
	case req.Operator:
	case req.Tenant != "" && allTenants(r.Context()):
		// An operator names any tenant; the service says when there is
		// none of that name, as `homing token create --tenant` does.
		tenant = req.Tenant
	default:
		var err error
		if tenant, err = s.pick(r.Context(), req.Tenant); err != nil {
			return err
		}
	}
	tok, plain, err := s.cfg.Tokens.Create(r.Context(), req.Name, req.Scope, tenant)
	if err != nil {
		return tokenError(req.Name, err)
	}
	s.log.Info("api: token created", "token", tok.Name, "tenant", tok.Tenant, "operator", tok.Operator, "by", caller.Name)
	writeJSON(w, http.StatusCreated, tokenCreated{Token: tok, Plain: plain})
	return nil
}

// listTokens is GET /v1/tokens: every token for an operator token that
// names no tenant, else the request's tenant's (never an operator token).
// No answer carries a token itself: only its hash is kept.
func (s *Server) listTokens(w http.ResponseWriter, r *http.Request) error {
	var (
		list []token.Token
		err  error
	)
	if allTenants(r.Context()) {
		list, err = s.cfg.Tokens.List(r.Context())
	} else {
		list, err = s.cfg.Tokens.ListOf(r.Context(), tenantOf(r.Context()))
	}
	if err != nil {
		return err
	}
	if list == nil {
		list = []token.Token{}
	}
	writeJSON(w, http.StatusOK, tokenList{Tokens: list})
	return nil
}

// revokeToken is DELETE /v1/tokens/{name}: the token is refused from then
// on, and the portal links it made are revoked with it. A token the
// request may not manage (another tenant's, or an operator's for a tenant
// request) is 404, as if it did not exist.
func (s *Server) revokeToken(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	var err error
	if allTenants(r.Context()) {
		err = s.cfg.Tokens.Revoke(r.Context(), name)
	} else {
		err = s.cfg.Tokens.RevokeOf(r.Context(), tenantOf(r.Context()), name)
	}
	if err != nil {
		return tokenError(name, err)
	}
	s.log.Info("api: token revoked", "token", name, "by", tokenName(r.Context()))
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// tokenError maps the token service's errors to the API's.
func tokenError(name string, err error) error {
	var fe *token.FieldError
	switch {
	case errors.As(err, &fe):
		return invalidRequest(fe.Field, "%s", err.Error())
	case errors.Is(err, token.ErrExists):
		return conflict("%s", err.Error())
	case errors.Is(err, token.ErrNotFound):
		return notFound("token %q not found", name)
	}
	return err
}
