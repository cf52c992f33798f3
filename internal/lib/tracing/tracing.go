// Package tracing is how Homing's code makes OpenTelemetry spans and carries
// a W3C trace context from the publisher to every attempt of a delivery. It
// uses only OpenTelemetry's API: package otlp sets up the SDK, once per
// process, and turns this package on (Use). Until then, and in every process
// where tracing is off, each function here returns what it was given and a
// span that does nothing, without allocating: the lifecycle pays a boolean
// load and an empty-string check.
//
// A Context is a trace context as Homing stores it (outbox_events and
// deliveries, column trace_context) and carries it in a task's headers:
// the traceparent, then a space and the tracestate when there is one.
package tracing

import (
	"context"
	"strings"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Name is the instrumentation scope of Homing's spans.
const Name = "github.com/homingdev/homing"

// Header names of the W3C trace context, in HTTP requests and in asynq
// task headers alike.
const (
	TraceParent = "traceparent"
	TraceState  = "tracestate"
	// LinkHeader carries, on a retry task, the context of the sweep that
	// queued it: the retry's span links to it (its parent is the
	// delivery's stored context).
	LinkHeader = "homing-link"
)

// Context is a W3C trace context as Homing stores and carries it:
// "<traceparent>[ <tracestate>]"; "" when there is none.
type Context = string

// on says whether Use was called: OpenTelemetry's global provider is the
// one switch, and this mirrors it so that a process without tracing skips
// even the no-op tracer (which allocates a context per span).
var on atomic.Bool

// w3c is the propagator Homing reads and writes: traceparent and tracestate.
var w3c = propagation.TraceContext{}

// Use makes tp OpenTelemetry's global provider, the W3C trace context its
// global propagator, and turns Homing's spans on. Package otlp calls it once
// at a process's start; tests call it with their own provider.
func Use(tp trace.TracerProvider) {
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(w3c)
	on.Store(true)
}

// Off turns Homing's spans off again (a process stopping its provider,
// tests).
func Off() { on.Store(false) }

// Enabled reports whether this process makes spans.
func Enabled() bool { return on.Load() }

// none is a span that does nothing, shared (trace.SpanFromContext of a
// context without a span returns OpenTelemetry's one no-op span).
var none = trace.SpanFromContext(context.Background())

// Start starts a span named name as a child of ctx's span, or, when ctx
// carries none, of the stored context parent (a retry hours after its
// event: same trace). Each link (a Context, "" skipped) becomes a span
// link. Set attributes only after checking span.IsRecording(), so that an
// unsampled or untraced attempt builds none.
func Start(ctx context.Context, name string, kind trace.SpanKind, parent Context, link Context) (context.Context, trace.Span) {
	if !on.Load() {
		return ctx, none
	}
	if !trace.SpanContextFromContext(ctx).IsValid() && parent != "" {
		ctx = withRemote(ctx, parent)
	}
	opts := []trace.SpanStartOption{trace.WithSpanKind(kind)}
	if link != "" {
		if sc := trace.SpanContextFromContext(withRemote(context.Background(), link)); sc.IsValid() {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
		}
	}
	return otel.Tracer(Name).Start(ctx, name, opts...)
}

// withRemote is ctx with c as its remote parent (ctx itself when c does not
// parse).
func withRemote(ctx context.Context, c Context) context.Context {
	parent, state, _ := strings.Cut(c, " ")
	carrier := propagation.MapCarrier{TraceParent: parent}
	if state != "" {
		carrier[TraceState] = state
	}
	return w3c.Extract(ctx, carrier)
}

// Current is the Context of ctx's span, to store or carry; fallback when ctx
// carries no span (tracing off here: what came in is passed on unchanged).
func Current(ctx context.Context, fallback Context) Context {
	if !on.Load() {
		return fallback
	}
	if c := Of(ctx); c != "" {
		return c
	}
	return fallback
}

// StartChild starts a span named name under ctx's span through
// OpenTelemetry's global provider, whether or not this process called Use:
// it is how client.Publish joins a Go publisher's own trace (its SDK, its
// provider). When ctx carries no span it returns ctx and a span that does
// nothing.
func StartChild(ctx context.Context, name string, kind trace.SpanKind) (context.Context, trace.Span) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ctx, none
	}
	return otel.Tracer(Name).Start(ctx, name, trace.WithSpanKind(kind))
}

// Of is the Context of ctx's span whether or not this process called Use
// (a Go publisher's), "" when ctx carries none.
func Of(ctx context.Context) Context {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	carrier := propagation.MapCarrier{}
	w3c.Inject(ctx, carrier)
	if s := carrier[TraceState]; s != "" {
		return carrier[TraceParent] + " " + s
	}
	return carrier[TraceParent]
}

// Extract is ctx with the trace context of an incoming request's headers
// as its remote parent; ctx itself when tracing is off.
func Extract(ctx context.Context, carrier propagation.TextMapCarrier) context.Context {
	if !on.Load() {
		return ctx
	}
	return w3c.Extract(ctx, carrier)
}

// AddHeaders adds c to a task's headers h (traceparent, tracestate) and
// returns h, made if nil; h unchanged when c is "".
func AddHeaders(h map[string]string, c Context) map[string]string {
	if c == "" {
		return h
	}
	if h == nil {
		h = make(map[string]string, 2)
	}
	parent, state, _ := strings.Cut(c, " ")
	h[TraceParent] = parent
	if state != "" {
		h[TraceState] = state
	}
	return h
}

// FromHeaders is the Context a task's headers carry ("" when none).
func FromHeaders(h map[string]string) Context {
	parent := h[TraceParent]
	if parent == "" {
		return ""
	}
	if s := h[TraceState]; s != "" {
		return parent + " " + s
	}
	return parent
}

type linkKey struct{}

// WithLink is ctx carrying c as the link of the next span started under it
// (the sweep that queued a retry: tasks read it from the task's
// LinkHeader); ctx itself when c is "" or tracing is off.
func WithLink(ctx context.Context, c Context) context.Context {
	if c == "" || !on.Load() {
		return ctx
	}
	return context.WithValue(ctx, linkKey{}, c)
}

// LinkOf is the link WithLink put in ctx, or "".
func LinkOf(ctx context.Context) Context {
	if !on.Load() {
		return ""
	}
	c, _ := ctx.Value(linkKey{}).(Context)
	return c
}
