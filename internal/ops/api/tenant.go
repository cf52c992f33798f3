package api

import (
	"context"
	"errors"
	"net/http"

	"github.com/homingdev/homing/internal/engine/tenant"
	"github.com/homingdev/homing/internal/ops/token"
	"github.com/homingdev/homing/models"
)

// TenantHeader names the tenant an operator token acts in.
const TenantHeader = "Homing-Tenant"

// scope is the tenant a request acts in, resolved once by endpoint from its
// token (resolveTenant): every handler takes the tenant from here and passes
// it to the services, which key every read and write by it.
type scope struct {
	// tenant is the tenant the request acts in.
	tenant string
	// operator is set for an operator token that did not name a tenant in
	// Homing-Tenant: it may still name one in a request body (pick).
	operator bool
}

type scopeKey struct{}

// tenantOf is the tenant the request of ctx acts in.
func tenantOf(ctx context.Context) string {
	sc, _ := ctx.Value(scopeKey{}).(scope)
	return models.TenantOr(sc.tenant)
}

// tenantNotFound answers a tenant the token may not see exactly as one that
// does not exist.
func tenantNotFound(name string) error {
	return notFound("tenant %q not found", name)
}

// resolveTenant is the tenant tok acts in for r. An operator token acts in
// the default tenant, or in the one Homing-Tenant names (which must exist);
// any other token acts in its own, and a Homing-Tenant naming another
// tenant is 404, as for an object of another tenant.
func (s *Server) resolveTenant(r *http.Request, tok token.Token) (scope, error) {
	named := r.Header.Get(TenantHeader)
	if !tok.Operator {
		if named != "" && named != tok.Tenant {
			return scope{}, tenantNotFound(named)
		}
		return scope{tenant: tok.Tenant}, nil
	}
	if named == "" {
		return scope{tenant: models.DefaultTenant, operator: true}, nil
	}
	if err := s.tenantExists(r.Context(), named); err != nil {
		return scope{}, err
	}
	return scope{tenant: named}, nil
}

// tenantExists is nil when tenant name exists, else its 404.
func (s *Server) tenantExists(ctx context.Context, name string) error {
	if err := tenant.CheckName(name); err != nil {
		return tenantNotFound(name)
	}
	ok, err := s.tenants.Exists(ctx, name)
	if err != nil {
		return err
	}
	if !ok {
		return tenantNotFound(name)
	}
	return nil
}

// pick is the tenant a request that names one in its body (POST /v1/events'
// "tenant") acts in: the named one for an operator token that did not name
// another in Homing-Tenant, else the request's own, which the body may
// repeat; any other is 404.
func (s *Server) pick(ctx context.Context, named string) (string, error) {
	sc, _ := ctx.Value(scopeKey{}).(scope)
	own := models.TenantOr(sc.tenant)
	switch {
	case named == "" || named == own:
		return own, nil
	case sc.operator:
		if err := s.tenantExists(ctx, named); err != nil {
			return "", err
		}
		return named, nil
	default:
		return "", tenantNotFound(named)
	}
}

// operatorOnly refuses a token that is not an operator's on a route that
// manages tenants.
func operatorOnly(tok token.Token, r *http.Request) error {
	if tok.Operator {
		return nil
	}
	return &authError{
		err:       errorf(http.StatusForbidden, CodeForbidden, "", "token %q acts in tenant %q only; %s %s needs an operator token (made without --tenant)", tok.Name, tok.Tenant, r.Method, r.URL.Path),
		challenge: realm + `, error="insufficient_scope"`,
	}
}

// tenantError maps the tenant service's errors to the API's.
func tenantError(name string, err error) error {
	var fe *tenant.FieldError
	switch {
	case errors.As(err, &fe):
		return invalidRequest(fe.Field, "%s", err.Error())
	case errors.Is(err, tenant.ErrNotFound):
		return tenantNotFound(name)
	case errors.Is(err, tenant.ErrExists), errors.Is(err, tenant.ErrHasWebhooks):
		return conflict("%s", err.Error())
	case errors.Is(err, tenant.ErrInvalid):
		return invalidRequest("name", "%s", err.Error())
	}
	return err // tenant.ErrDisabled: 409 tenant_disabled (apiError)
}

// tenantRequest is the body of POST /v1/tenants and PATCH /v1/tenants/{name}.
type tenantRequest struct {
	Name string `json:"name"`
	tenant.Patch
}

func (s *Server) listTenants(w http.ResponseWriter, r *http.Request) error {
	list, err := s.tenants.List(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"tenants": list})
	return nil
}

func (s *Server) createTenant(w http.ResponseWriter, r *http.Request) error {
	var req tenantRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	t, err := s.tenants.Create(r.Context(), req.Name, req.Patch)
	if err != nil {
		return tenantError(req.Name, err)
	}
	w.Header().Set("Location", "/v1/tenants/"+t.Name)
	writeJSON(w, http.StatusCreated, t)
	return nil
}

func (s *Server) getTenant(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	t, err := s.tenants.Get(r.Context(), name)
	if err != nil {
		return tenantError(name, err)
	}
	writeJSON(w, http.StatusOK, t)
	return nil
}

func (s *Server) updateTenant(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	var p tenant.Patch
	if err := decode(r, &p); err != nil {
		return err
	}
	t, err := s.tenants.Update(r.Context(), name, p)
	if err != nil {
		return tenantError(name, err)
	}
	writeJSON(w, http.StatusOK, t)
	return nil
}

// deleteTenant is DELETE /v1/tenants/{name}[?force=true]: refused (409)
// while the tenant has webhooks, unless force, which deletes them as
// DELETE /v1/webhooks/{name} does.
func (s *Server) deleteTenant(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	q, err := queryParams(r, "force")
	if err != nil {
		return err
	}
	force := q["force"] == "true"
	if err := s.tenants.Delete(r.Context(), name, force, s.cfg.Webhooks); err != nil {
		return tenantError(name, err)
	}
	s.cfg.Tokens.Forget() // the tenant's tokens went with it
	w.WriteHeader(http.StatusNoContent)
	return nil
}
