package dispatch

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/homingdev/homing/internal/lib/tracing"
	"github.com/homingdev/homing/models"
)

// The spans of the lifecycle's engine half (README, "Tracing"). With
// tracing off each start is a boolean load and returns ctx as it was.

// startFanOut starts the span of an event's fan-out, a consumer of the
// task that carried ev.TraceContext.
func startFanOut(ctx context.Context, ev Event) (context.Context, trace.Span) {
	ctx, span := tracing.Start(ctx, "homing.fanout", trace.SpanKindConsumer, ev.TraceContext, "")
	if span.IsRecording() {
		span.SetAttributes(attribute.String("homing.event_id", ev.ID), attribute.String("homing.tenant", models.TenantOr(ev.Tenant)),
			attribute.String("homing.doc_type", ev.DocType), attribute.String("homing.event", ev.Event))
	}
	return ctx, span
}

// keptTrace is the trace context an event's deliveries keep: ctx's span
// (the fan-out's), or, when this process does not trace, what came in,
// passed on unchanged; nil when nothing did.
func keptTrace(ctx context.Context, ev Event) *string {
	keep := tracing.Current(ctx, ev.TraceContext)
	if keep == "" {
		return nil
	}
	p := new(string) // allocated here only, not when there is none
	*p = keep
	return p
}

// attemptSpan names an attempt's span by its mode.
var attemptSpan = [...]string{First: "homing.attempt", Retry: "homing.retry", Sync: "homing.attempt"}

// startAttempt starts the span of one claimed attempt: a child of ctx's
// span when the fan-out sends it inline, else of the trace context stored
// with the delivery (a retry hours later joins the event's trace), linked
// to the sweep that queued it when there was one (tracing.WithLink). The
// sender's HTTP client span is its child.
func startAttempt(ctx context.Context, c claimed, mode Mode) (context.Context, trace.Span) {
	var stored string
	if c.row.TraceContext != nil {
		stored = *c.row.TraceContext
	}
	name := "homing.attempt"
	if int(mode) < len(attemptSpan) {
		name = attemptSpan[mode]
	}
	ctx, span := tracing.Start(ctx, name, trace.SpanKindInternal, stored, tracing.LinkOf(ctx))
	if span.IsRecording() {
		span.SetAttributes(attribute.String("homing.delivery_id", c.row.ID), attribute.String("homing.webhook", c.row.WebhookName),
			attribute.String("homing.event_id", c.row.EventID), attribute.Int("homing.attempt", c.row.Attempts))
	}
	return ctx, span
}

// endAttempt records the attempt's outcome on its span and ends it.
func endAttempt(span trace.Span, out Outcome, err error) {
	if span.IsRecording() {
		span.SetAttributes(attribute.String("homing.status", out.Status), attribute.Bool("homing.sent", out.Sent))
		switch {
		case err != nil:
			span.SetStatus(codes.Error, err.Error())
		case out.Sent && out.Status != models.StatusDelivered:
			span.SetStatus(codes.Error, out.Reason)
		}
	}
	span.End()
}
