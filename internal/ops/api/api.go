// Package api is Homing's HTTP API (`homing serve`): JSON over HTTP with
// bearer tokens, for producers that cannot speak asynq's Redis format (a
// Frappe site is Python) and for operators' tools. It adds no behaviour of
// its own: publishing goes through the transactional outbox (or, for
// workflow_transition, the dispatcher's synchronous path), and webhooks,
// deliveries and recovery are the same services the command line uses.
//
// What a client may repeat, and why nothing is delivered twice: a publish
// carries its event ID, recorded once in published_events; a repeat is
// answered 200 with the original. A repeated workflow_transition finds its
// (event, webhook) rows and sends nothing new. A retry only makes a row
// Failed and due, and the sweeper's TaskID queues it once. A resend with an
// Idempotency-Key makes one new delivery per key.
//
// The routes, their methods and their scopes are one table (routes); the
// OpenAPI document served at /v1/openapi.json is tested against it.
package api

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/hibiken/asynq"
	"gorm.io/gorm"

	"github.com/homingdev/homing/internal/engine/delivery/template"
	"github.com/homingdev/homing/internal/engine/dispatch"
	"github.com/homingdev/homing/internal/engine/tenant"
	"github.com/homingdev/homing/internal/engine/webhook"
	"github.com/homingdev/homing/internal/intake/dbstate"
	"github.com/homingdev/homing/internal/intake/outbox"
	"github.com/homingdev/homing/internal/lib/clock"
	"github.com/homingdev/homing/internal/ops/metrics"
	"github.com/homingdev/homing/internal/ops/portal"
	"github.com/homingdev/homing/internal/ops/recovery"
	"github.com/homingdev/homing/internal/ops/token"
)

// Config is what the API runs on.
type Config struct {
	DB *gorm.DB
	// Dispatcher delivers workflow_transition events synchronously.
	Dispatcher *dispatch.Dispatcher
	Webhooks   *webhook.Service
	Recovery   *recovery.Service
	Tokens     *token.Service
	// Portal issues and revokes portal links; nil (no secrets.key) answers
	// POST /v1/portal-links with 409 saying what to set.
	Portal *portal.Links
	// Tenants resolves the tenant a request names; nil builds one on DB.
	Tenants *tenant.Service
	// Queue, when set, queues each event POST /v1/events accepts right
	// after its commit (outbox.WriterConfig.Queue), so that it does not
	// wait for the outbox relay; nil leaves every event to the relay.
	Queue *asynq.Client
	// PublishLimiter enforces tenants' publish_rate on POST /v1/events;
	// nil accepts events at any rate.
	PublishLimiter PublishLimiter
	// MaxBodyBytes (api.max_body_bytes) refuses larger request bodies.
	MaxBodyBytes int64
	// MaxPayloadBytes (delivery.max_payload_bytes) refuses larger documents.
	MaxPayloadBytes int
	// MaxInflightBytes (api.max_inflight_bytes) is the memory all requests
	// in flight may hold together (intake); a request that does not fit is
	// answered 503 at once. 0 is DefaultMaxInflightBytes.
	MaxInflightBytes int64
	// TenantInflightShare (api.tenant_inflight_share) is the fraction of
	// MaxInflightBytes one tenant's requests may hold together, so that
	// one tenant's slow bodies cannot refuse every other tenant's
	// requests. 0 is DefaultTenantInflightShare.
	TenantInflightShare float64
	// Database watches the database for outages: every error a request
	// meets is observed, so an outage is logged once and counted (dbstate).
	// nil watches nothing; a database error is answered 503 all the same.
	Database *dbstate.Watcher
	// Ready answers /readyz; nil is always ready.
	Ready func(ctx context.Context) error
	// Warnings lists the start-up checks' problems (preflight) on /readyz,
	// which stays 200; nil lists none.
	Warnings func(ctx context.Context) []string
	Clock    clock.Clock
	Logger   *slog.Logger
}

// PublishLimiter takes one event from a tenant's budget of perSecond
// events a second (ratelimit.Limiter), answering how long until one is free
// when none is.
type PublishLimiter interface {
	AllowPublish(ctx context.Context, tenant string, perSecond int) (time.Duration, error)
}

// Server answers the API's requests. It is an http.Handler; `homing serve`
// runs it on api.addr.
type Server struct {
	cfg Config
	mux *http.ServeMux
	log *slog.Logger
	// outbox writes published events, group-committed.
	outbox *outbox.Writer
	// tenants is cfg.Tenants, or one on cfg.DB.
	tenants *tenant.Service
	// intake bounds the memory of the requests in flight.
	intake *intake
	// linger bounds the lingering close of a refused request's
	// connection (refuseUnread): lingerIdle and lingerTotal, which tests
	// may change.
	linger linger
	// lingered, when set, is told how many bytes each lingering close
	// discarded, once its connection is closed: the event tests wait for.
	lingered func(discarded int64)
}

// DefaultMaxInflightBytes is the intake budget when none is given: half of
// the default process.memory_limit.
const DefaultMaxInflightBytes = 512 << 20

// New builds the API.
func New(cfg Config) *Server {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 2 << 20
	}
	if cfg.MaxPayloadBytes <= 0 {
		cfg.MaxPayloadBytes = 1 << 20
	}
	if cfg.MaxInflightBytes <= 0 {
		cfg.MaxInflightBytes = DefaultMaxInflightBytes
	}
	if cfg.TenantInflightShare <= 0 || cfg.TenantInflightShare > 1 {
		cfg.TenantInflightShare = DefaultTenantInflightShare
	}
	s := &Server{cfg: cfg, mux: http.NewServeMux(), log: cfg.Logger, tenants: cfg.Tenants,
		intake: newIntake(cfg.MaxInflightBytes, cfg.TenantInflightShare, cfg.Clock, cfg.Logger), linger: linger{idle: lingerIdle, total: lingerTotal}}
	if cfg.DB != nil {
		s.outbox = outbox.NewWriter(cfg.DB, outbox.WriterConfig{Queue: cfg.Queue, Logger: cfg.Logger})
		if s.tenants == nil {
			s.tenants = tenant.New(cfg.DB, cfg.Clock, cfg.Logger)
		}
	}
	for _, rt := range s.routes() {
		s.mux.Handle(rt.method+" "+rt.path, s.endpoint(rt))
	}
	return s
}

// bodyReadTimeout bounds how long reading one request's body may take.
const bodyReadTimeout = time.Minute

// Scopes of the routes table: none (no token), or the token scope needed.
const scopeNone = ""

// route is one endpoint: method and path as the OpenAPI document spells
// them, the token scope it needs, whether only an operator token may use it
// (the tenants' routes), and its handler.
type route struct {
	method, path string
	scope        string
	operator     bool
	handle       handlerFunc
}

// Route is an endpoint as Routes lists it.
type Route struct {
	Method, Path, Scope string
	// Operator is set for a route only an operator token may use.
	Operator bool
}

// Routes lists every endpoint the API serves, for tests that must cover
// each one (the route-table tenancy test, the OpenAPI test).
func (s *Server) Routes() []Route {
	rts := s.routes()
	out := make([]Route, len(rts))
	for i, rt := range rts {
		out[i] = Route{Method: rt.method, Path: rt.path, Scope: rt.scope, Operator: rt.operator}
	}
	return out
}

// handlerFunc serves one request; an error it returns is written as the
// API's JSON error by endpoint.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// routes is every endpoint the API serves.
func (s *Server) routes() []route {
	return []route{
		{http.MethodPost, "/v1/events", token.ScopePublish, false, s.publishEvent},

		{http.MethodGet, "/v1/webhooks", token.ScopeAdmin, false, s.listWebhooks},
		{http.MethodPost, "/v1/webhooks", token.ScopeAdmin, false, s.evaluating(s.createWebhook)},
		{http.MethodGet, "/v1/webhooks/{name}", token.ScopeAdmin, false, s.getWebhook},
		{http.MethodPatch, "/v1/webhooks/{name}", token.ScopeAdmin, false, s.evaluating(s.updateWebhook)},
		{http.MethodDelete, "/v1/webhooks/{name}", token.ScopeAdmin, false, s.deleteWebhook},
		{http.MethodPost, "/v1/webhooks/{name}/preview", token.ScopeAdmin, false, s.evaluating(s.previewWebhook)},
		{http.MethodPost, "/v1/webhooks/{name}/test", token.ScopeAdmin, false, s.evaluating(s.testWebhook)},
		{http.MethodPost, "/v1/webhooks/import", token.ScopeAdmin, false, s.evaluating(s.importWebhooks)},

		{http.MethodGet, "/v1/deliveries", token.ScopeAdmin, false, s.listDeliveries},
		{http.MethodGet, "/v1/deliveries/{id}", token.ScopeAdmin, false, s.getDelivery},
		{http.MethodPost, "/v1/deliveries/{id}/retry", token.ScopeAdmin, false, s.retryDelivery},
		{http.MethodPost, "/v1/deliveries/{id}/resend", token.ScopeAdmin, false, s.resendDelivery},

		{http.MethodGet, "/v1/portal-links", token.ScopeAdmin, false, s.listPortalLinks},
		{http.MethodPost, "/v1/portal-links", token.ScopeAdmin, false, s.createPortalLink},
		{http.MethodDelete, "/v1/portal-links", token.ScopeAdmin, false, s.revokePortalLinks},
		{http.MethodDelete, "/v1/portal-links/{id}", token.ScopeAdmin, false, s.revokePortalLink},

		// A tenant's admin manages its own tenant's tokens; an operator
		// token every token (tokens.go).
		{http.MethodGet, "/v1/tokens", token.ScopeAdmin, false, s.listTokens},
		{http.MethodPost, "/v1/tokens", token.ScopeAdmin, false, s.createToken},
		{http.MethodDelete, "/v1/tokens/{name}", token.ScopeAdmin, false, s.revokeToken},

		{http.MethodGet, "/v1/tenants", token.ScopeAdmin, true, s.listTenants},
		{http.MethodPost, "/v1/tenants", token.ScopeAdmin, true, s.createTenant},
		{http.MethodGet, "/v1/tenants/{name}", token.ScopeAdmin, true, s.getTenant},
		{http.MethodPatch, "/v1/tenants/{name}", token.ScopeAdmin, true, s.updateTenant},
		{http.MethodDelete, "/v1/tenants/{name}", token.ScopeAdmin, true, s.deleteTenant},

		{http.MethodGet, "/v1/openapi.json", scopeNone, false, serveOpenAPI},
		{http.MethodGet, "/healthz", scopeNone, false, handle(metrics.HealthHandler())},
		{http.MethodGet, "/readyz", scopeNone, false, handle(metrics.ReadyHandlerWarning(s.cfg.Ready, s.cfg.Warnings))},
	}
}

// evaluating charges a handler that renders a definition (with a sample or
// a given document) the rendering's value budget, on top of its body: a
// small body can build that much.
func (s *Server) evaluating(h handlerFunc) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if err := chargeMore(r.Context(), r, s.evaluationBytes()); err != nil {
			// Refused with its body unread, as admit's refusals are.
			s.refuseUnread(w, r, func(w http.ResponseWriter) { s.writeError(w, r, err) })
			return nil
		}
		return h(w, r)
	}
}

// evaluationBytes is what one evaluation may build: the rendering's value
// budget (template.RenderMemoryFactor × delivery.max_payload_bytes).
func (s *Server) evaluationBytes() int64 {
	return int64(template.RenderMemoryFactor) * int64(s.cfg.MaxPayloadBytes)
}

// handle adapts a plain http.Handler to the routes table.
func handle(h http.Handler) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		h.ServeHTTP(w, r)
		return nil
	}
}

// ServeHTTP routes a request. Requests no route matches get the API's JSON
// error (404 not_found, or 405 method_not_allowed with Allow) rather than
// the mux's plain text.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if _, pattern := s.mux.Handler(r); pattern != "" {
		s.mux.ServeHTTP(w, r)
		return
	}
	// Let the mux decide (404, 405 with its Allow, or a redirect to the
	// clean path), then answer in JSON.
	rec := &recorder{header: http.Header{}}
	s.mux.ServeHTTP(rec, r)
	switch rec.status {
	case http.StatusNotFound:
		s.writeError(w, r, &Error{Status: http.StatusNotFound, Code: CodeNotFound,
			Message: "no endpoint " + r.URL.Path + " (GET /v1/openapi.json lists them)"})
	case http.StatusMethodNotAllowed:
		w.Header().Set("Allow", rec.header.Get("Allow"))
		s.writeError(w, r, &Error{Status: http.StatusMethodNotAllowed, Code: CodeMethodNotAllowed,
			Message: r.Method + " is not allowed on " + r.URL.Path + "; use " + rec.header.Get("Allow")})
	default:
		for k, v := range rec.header {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.status)
		_, _ = w.Write(rec.body)
	}
}

// recorder keeps what the mux answers to an unmatched request.
type recorder struct {
	header http.Header
	status int
	body   []byte
}

func (r *recorder) Header() http.Header { return r.header }
func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	r.body = append(r.body, b...)
	return len(b), nil
}

// bound is what every request on the API's address gets first: a body
// declared larger than api.max_body_bytes is refused (answered before the
// body is read, with refuseUnread), and the body is cut off at the limit
// and given a deadline. Nothing is charged yet: authentication reads no
// body.
func (s *Server) bound(w http.ResponseWriter, r *http.Request) (*http.Request, error) {
	if r.ContentLength > s.cfg.MaxBodyBytes {
		return r, bodyTooLarge(s.cfg.MaxBodyBytes)
	}
	r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes)
	// A body trickled in byte by byte must not hold the connection
	// forever. Only reading is bounded: a workflow_transition's answer
	// may take as long as its webhooks do. (Transport time, not domain
	// time: the wall clock is right here.)
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(bodyReadTimeout))
	return r, nil
}

// charge charges a bounded request to the intake budget, and to tenant's
// share of it ("" for none), before its body is read; or refuses it. The
// charge is returned by release, once the handler has answered: the body,
// its decoded form and its outbox write are all done by then.
//
// A refusal is answered at once, before the body is read, and its
// connection ended with a bounded lingering close (refuseUnread).
func (s *Server) charge(r *http.Request, tenant string) (*http.Request, func(), error) {
	g, err := s.intake.acquire(r, tenant, requestCharge(r, s.cfg.MaxBodyBytes))
	if err != nil {
		return r, nil, err
	}
	return r.WithContext(context.WithValue(r.Context(), grantKey{}, g)), g.release, nil
}

// Sessions names whom a page request served beside the API is charged to
// (Admit), by its session: the tenant it acts in, "" for an operator's
// (charged to the budget alone, as an operator's token is), or ok false
// for a request without a valid session.
type Sessions func(r *http.Request) (tenant string, ok bool)

// AnonymousPageBytes bounds the body of a page request without a session:
// the sign-in form's and a portal link's switch, which carry a token and a
// CSRF value. Such a request is charged to the pages' share for at most
// this, and never an evaluation, so that slow requests from anyone cannot
// fill the share the console's and the portals' signed-in users need.
const AnonymousPageBytes = minRequestBytes

// Admit bounds a handler served on the API's address beside it (the
// console's and the portal's pages) as every API route is bounded (bound
// and charge): the same body limit, intake budget and body deadline. A
// request is charged once its session is known (sessions), as an API
// request is once its token is: to its tenant's share, so that one
// tenant's pages cannot refuse another's. One without a session is held to
// AnonymousPageBytes and charged to the pages' own share. A signed-in
// request that may change something (any method but GET and HEAD) is
// charged an evaluation's value budget on top, as the API's routes that
// render a definition are: the console's webhook form renders them.
// Refusals are answered in plain text.
func (s *Server) Admit(h http.Handler, sessions Sessions) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r, err := s.bound(w, r)
		if err != nil {
			s.refuseUnread(w, r, func(w http.ResponseWriter) { pageError(w, err) })
			return
		}
		tenant, signedIn := pagesTenant, false
		if sessions != nil {
			if t, ok := sessions(r); ok {
				tenant, signedIn = t, true
			}
		}
		limit := s.cfg.MaxBodyBytes
		if !signedIn {
			limit = min(limit, AnonymousPageBytes)
			if r.ContentLength > limit {
				err := errorf(http.StatusRequestEntityTooLarge, CodePayloadTooLarge, "",
					"a page request without a session carries at most %d bytes (a sign-in form or a portal link's); sign in, or open the portal link, first", limit)
				s.refuseUnread(w, r, func(w http.ResponseWriter) { pageError(w, err) })
				return
			}
			r.Body = http.MaxBytesReader(w, r.Body, limit)
		}
		g, err := s.intake.acquire(r, tenant, requestCharge(r, limit))
		if err != nil {
			s.refuseUnread(w, r, func(w http.ResponseWriter) { pageError(w, err) })
			return
		}
		defer g.release()
		r = r.WithContext(context.WithValue(r.Context(), grantKey{}, g))
		if signedIn && r.Method != http.MethodGet && r.Method != http.MethodHead {
			if err := chargeMore(r.Context(), r, s.evaluationBytes()); err != nil {
				s.refuseUnread(w, r, func(w http.ResponseWriter) { pageError(w, err) })
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

// openWriteTimeout bounds the answer of a route that needs no token: a
// client that never reads it does not hold its handler.
const openWriteTimeout = 30 * time.Second

// serveOpen serves a route that needs no token (the OpenAPI document,
// /healthz, /readyz). None reads a body, so a request declaring one larger
// than a request's minimum charge is refused 413 unread, and the rest are
// charged nothing: anyone can reach these routes, and a charge of their
// declared length (24 × up to api.max_body_bytes each) let eleven
// connections without a token hold the whole intake budget, so that every
// tenant's requests were answered 503 (red team of issue 35). Their answer
// is bounded in time (openWriteTimeout).
func (s *Server) serveOpen(w http.ResponseWriter, r *http.Request, rt route) {
	if r.ContentLength > minRequestBytes {
		err := errorf(http.StatusRequestEntityTooLarge, CodePayloadTooLarge, "",
			"%s takes no request body; send it without one", r.URL.Path)
		s.refuseUnread(w, r, func(w http.ResponseWriter) { s.writeError(w, r, err) })
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, minRequestBytes)
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(openWriteTimeout))
	if err := rt.handle(w, r); err != nil {
		s.writeError(w, r, err)
	}
}

// pageError answers a page's refusal in plain text, with its Retry-After.
func pageError(w http.ResponseWriter, err error) {
	var e *Error
	if errors.As(err, &e) {
		if e.RetryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(e.RetryAfter))
		}
		http.Error(w, e.Message, e.Status)
		return
	}
	http.Error(w, err.Error(), http.StatusInternalServerError)
}

// endpoint wraps a route's handler: body size limit, authentication, the
// intake budget (charged to the token's tenant), then the handler, whose
// error becomes the JSON error response. Authentication comes before the
// charge, so that a request is charged to its tenant's share and one
// without a valid token is charged nothing.
func (s *Server) endpoint(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		r, err := s.bound(w, r)
		if err != nil {
			s.refuseUnread(w, r, func(w http.ResponseWriter) { s.writeError(w, r, err) })
			return
		}
		if err := checkRequestText(r); err != nil {
			s.writeError(w, r, err)
			return
		}
		// Refused before it is charged, a request's body is never read:
		// it is answered at once and its connection closed (refuseUnread).
		refuse := func(err error) {
			setChallenge(w, err)
			s.refuseUnread(w, r, func(w http.ResponseWriter) { s.writeError(w, r, err) })
		}
		if rt.scope == scopeNone {
			s.serveOpen(w, r, rt)
			return
		}
		tok, err := s.authenticate(r, rt.scope)
		if err != nil {
			refuse(err)
			return
		}
		if rt.operator {
			if err := operatorOnly(tok, r); err != nil {
				refuse(err)
				return
			}
		}
		// The one place a request's tenant is decided.
		sc, err := s.resolveTenant(r, tok)
		if err != nil {
			refuse(err)
			return
		}
		r = r.WithContext(context.WithValue(withToken(r.Context(), tok), scopeKey{}, sc))
		charged := ""
		if !tok.Operator {
			charged = tok.Tenant
		}
		r, release, err := s.charge(r, charged)
		if err != nil {
			s.refuseUnread(w, r, func(w http.ResponseWriter) { s.writeError(w, r, err) })
			return
		}
		defer release()
		if err := rt.handle(w, r); err != nil {
			s.writeError(w, r, err)
		}
	})
}
