package api

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/homingdev/homing/internal/engine/dispatch"
	"github.com/homingdev/homing/internal/intake/event"
	"github.com/homingdev/homing/internal/intake/outbox"
	"github.com/homingdev/homing/internal/lib/tracing"
	"github.com/homingdev/homing/models"
)

// eventRequest is the body of POST /v1/events.
type eventRequest struct {
	// Tenant is the tenant the event belongs to: an operator token may name
	// any; any other token only its own (the default is the request's).
	Tenant string `json:"tenant"`
	// ID is the idempotency key; a new UUIDv7 when empty.
	ID      string          `json:"id"`
	DocType string          `json:"doc_type"`
	DocName string          `json:"doc_name"`
	Event   string          `json:"event"`
	Doc     json.RawMessage `json:"doc"`
}

// eventResponse answers a publish.
type eventResponse struct {
	EventID string `json:"event_id"`
}

// publishEvent is POST /v1/events: admit (tenant enabled, publish_rate) →
// decode → prepare (the producers' one validation path) → deliver now
// (workflow_transition) or add to the outbox.
func (s *Server) publishEvent(w http.ResponseWriter, r *http.Request) (err error) {
	// The publish's span, child of the request's traceparent: the trace
	// every attempt of the event's deliveries joins (README, "Tracing").
	ctx, span := tracing.Start(tracing.Extract(r.Context(), propagation.HeaderCarrier(r.Header)), "POST /v1/events", trace.SpanKindServer, "", "")
	defer func() {
		if err != nil && span.IsRecording() {
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}()
	if ctx != r.Context() {
		r = r.WithContext(ctx) // tracing on only: no copy otherwise
	}
	// A token of one tenant publishes into its own: the tenant is known
	// before the body is read, and so is whether to refuse it. Only an
	// operator's token may name the tenant in the body.
	sc, _ := r.Context().Value(scopeKey{}).(scope)
	if !sc.operator {
		if err := s.admitPublish(r.Context(), tenantOf(r.Context())); err != nil {
			s.refuseUnread(w, r, func(w http.ResponseWriter) { s.writeError(w, r, err) })
			return nil
		}
	}
	var req eventRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	ten, err := s.pick(r.Context(), req.Tenant)
	if err != nil {
		return err
	}
	if sc.operator {
		if err := s.admitPublish(r.Context(), ten); err != nil {
			return err
		}
	}
	ev, err := event.Prepare(dispatch.Event{Tenant: tenantField(ten), ID: req.ID, DocType: req.DocType, DocName: req.DocName, Event: req.Event}, req.Doc, s.cfg.MaxPayloadBytes)
	if err != nil {
		return err
	}
	ev.TraceContext = tracing.Current(ctx, "")
	if ev.Event == models.EventWorkflowTransition {
		return s.deliverNow(w, r, ev)
	}
	return s.addToOutbox(w, r, ev, req.Doc)
}

// addToOutbox commits the event to the outbox, which the relay moves into
// the queue and which keeps it until it is fanned out: 202 for a new event,
// 200 with the original for an ID accepted before with the same body
// (nothing is written, and nothing is delivered again), 409 for one accepted
// with another body. An ID accepted before but not fanned out yet
// is queued again, in case its task was lost with Redis's data.
// The idempotency record and the outbox row are one transaction, so a crash
// cannot keep one without the other; concurrent requests share it (group
// commit: outbox.Writer).
func (s *Server) addToOutbox(w http.ResponseWriter, r *http.Request, ev dispatch.Event, doc json.RawMessage) error {
	outcome, err := s.outbox.AddJSON(r.Context(), ev, doc, s.cfg.Clock.Now())
	if err != nil {
		return err
	}
	if outcome == outbox.Conflict {
		return conflict("event %q was published before with a different body: publish a changed document under a new event ID (the same body again is a harmless repeat)", ev.ID)
	}
	status := http.StatusAccepted
	if outcome != outbox.Added {
		status = http.StatusOK
	}
	if outcome == outbox.Requeued {
		s.log.Info("republished event was not fanned out yet; queued it again", "tenant", models.TenantOr(ev.Tenant), "event_id", ev.ID)
	}
	s.log.Debug("event published", "tenant", models.TenantOr(ev.Tenant), "event_id", ev.ID, "doc_type", ev.DocType, "event", ev.Event, "new", outcome == outbox.Added, "requeued", outcome == outbox.Requeued, "token", tokenName(r.Context()))
	writeJSON(w, status, eventResponse{EventID: ev.ID})
	return nil
}

// deliverNow is workflow_transition's path: one attempt per matching
// webhook, now; 200 when every one succeeded, else 502 naming each webhook
// that failed. A delivery once started is finished and recorded even if the
// client goes away (its context is detached), so that a client retrying
// after a timeout is answered from the record instead of a half-done row.
// Repeating the event ID sends nothing new.
func (s *Server) deliverNow(w http.ResponseWriter, r *http.Request, ev dispatch.Event) error {
	// Its webhooks' templates are rendered now, in this request.
	if err := chargeMore(r.Context(), r, s.evaluationBytes()); err != nil {
		return err
	}
	ctx := context.WithoutCancel(r.Context())
	if _, err := s.cfg.Dispatcher.DeliverNow(ctx, ev); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, eventResponse{EventID: ev.ID})
	return nil
}

// admitPublish refuses a publish into tenant ten that is disabled or past
// its publish_rate.
func (s *Server) admitPublish(ctx context.Context, ten string) error {
	if err := s.tenants.Usable(ctx, ten); err != nil {
		return tenantError(ten, err)
	}
	return s.withinPublishRate(ctx, ten)
}

// tenantField is how an event names its tenant: empty for the default one,
// as events did before tenants.
func tenantField(name string) string {
	if name == models.DefaultTenant {
		return ""
	}
	return name
}

// withinPublishRate takes one event from tenant ten's publish_rate (events a
// second across every serve process, 0 none), refusing it with 429 and
// Retry-After when the budget is spent. When Redis cannot answer the event
// is accepted: the outbox takes events while Redis is away, and a limit is
// not worth refusing them for.
func (s *Server) withinPublishRate(ctx context.Context, ten string) error {
	if s.cfg.PublishLimiter == nil {
		return nil
	}
	m, err := s.tenants.Lookup(ctx, ten)
	if err != nil {
		return tenantError(ten, err)
	}
	if m.PublishRate <= 0 {
		return nil
	}
	wait, err := s.cfg.PublishLimiter.AllowPublish(ctx, ten, m.PublishRate)
	if err != nil {
		s.log.Warn("publish_rate not checked: the rate limiter did not answer; event accepted", "tenant", ten, "error", err.Error())
		return nil
	}
	if wait <= 0 {
		return nil
	}
	return &Error{Status: http.StatusTooManyRequests, Code: CodeRateLimited, RetryAfter: int(math.Ceil(wait.Seconds())),
		Message: fmt.Sprintf("tenant %q publishes at most %d events a second (its publish_rate); retry after Retry-After, or raise it with homing tenant update %s --publish-rate N",
			ten, m.PublishRate, ten)}
}
