package tracing_test

import (
	"context"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/homingdev/homing/internal/lib/tracing"
)

const (
	parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	state  = "congo=t61rcWkgMzE"
)

// TestOffCostsNothing: without Use, every call returns what it was given,
// makes no span and allocates nothing (the lifecycle's hot path).
func TestOffCostsNothing(t *testing.T) {
	tracing.Off()
	ctx := context.Background()
	h := map[string]string{}
	incoming := propagation.HeaderCarrier{"Traceparent": {parent}}
	allocs := testing.AllocsPerRun(100, func() {
		c, span := tracing.Start(ctx, "x", trace.SpanKindInternal, parent, parent)
		if c != ctx || span.IsRecording() || span.SpanContext().IsValid() {
			t.Fatal("a span while tracing is off")
		}
		span.End()
		if got := tracing.Current(c, "in"); got != "in" {
			t.Fatalf("Current = %q, want the fallback", got)
		}
		if tracing.Extract(ctx, incoming) != ctx {
			t.Fatal("Extract changed ctx while off")
		}
		if tracing.WithLink(ctx, parent) != ctx || tracing.LinkOf(ctx) != "" {
			t.Fatal("a link while off")
		}
		if tracing.FromHeaders(nil) != "" || tracing.AddHeaders(nil, "") != nil || tracing.FromHeaders(h) != "" {
			t.Fatal("headers from nothing")
		}
	})
	if allocs != 0 {
		t.Errorf("tracing off allocates %v times per call sequence, want 0", allocs)
	}
}

// TestStoredContextIsTheParent: a span started with no span in ctx is a
// child of the stored context (same trace), linked to the link's span;
// Current gives back its own context, tracestate kept, in the stored form.
func TestStoredContextIsTheParent(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	tracing.Use(tp)
	t.Cleanup(tracing.Off)

	sweep := "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	ctx, span := tracing.Start(tracing.WithLink(context.Background(), sweep), "homing.retry", trace.SpanKindInternal, parent+" "+state, tracing.LinkOf(tracing.WithLink(context.Background(), sweep)))
	cur := tracing.Current(ctx, "")
	span.End()
	ended := rec.Ended()
	if len(ended) != 1 {
		t.Fatalf("%d spans ended, want 1", len(ended))
	}
	s := ended[0]
	if got := s.SpanContext().TraceID().String(); got != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("trace id %s, want the stored context's", got)
	}
	if got := s.Parent().SpanID().String(); got != "00f067aa0ba902b7" {
		t.Errorf("parent span %s, want the stored context's", got)
	}
	if len(s.Links()) != 1 || s.Links()[0].SpanContext.TraceID().String() != "0af7651916cd43dd8448eb211c80319c" {
		t.Errorf("links %v, want the sweep's span", s.Links())
	}
	want := "00-4bf92f3577b34da6a3ce929d0e0e4736-" + s.SpanContext().SpanID().String() + "-01 " + state
	if cur != want {
		t.Errorf("Current = %q, want %q", cur, want)
	}
	// Through a task's headers and back.
	h := tracing.AddHeaders(map[string]string{"homing-outbox": "1"}, cur)
	if h[tracing.TraceParent] == "" || h[tracing.TraceState] != state || tracing.FromHeaders(h) != cur {
		t.Errorf("headers %v do not carry %q", h, cur)
	}
	// A span already in ctx wins over the stored context.
	child, span2 := tracing.Start(ctx, "child", trace.SpanKindInternal, "00-11111111111111111111111111111111-2222222222222222-01", "")
	span2.End()
	if !strings.Contains(tracing.Current(child, ""), "4bf92f3577b34da6a3ce929d0e0e4736") {
		t.Errorf("child left the trace: %s", tracing.Current(child, ""))
	}
}

// TestExtractReadsTheRequest: with tracing on, an incoming traceparent is
// the publish span's parent.
func TestExtractReadsTheRequest(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tracing.Use(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	t.Cleanup(tracing.Off)
	ctx := tracing.Extract(context.Background(), propagation.HeaderCarrier{"Traceparent": {parent}})
	_, span := tracing.Start(ctx, "POST /v1/events", trace.SpanKindServer, "", "")
	span.End()
	if got := rec.Ended()[0].Parent().SpanID().String(); got != "00f067aa0ba902b7" {
		t.Errorf("publish span's parent %s, want the request's", got)
	}
}

// TestStartChildJoinsACallersTrace: client.Publish joins the caller's own
// span whether or not this package was turned on, and makes nothing
// without one.
func TestStartChildJoinsACallersTrace(t *testing.T) {
	tracing.Off()
	if c, span := tracing.StartChild(context.Background(), "homing.publish", trace.SpanKindProducer); c != context.Background() || span.SpanContext().IsValid() {
		t.Error("StartChild made a span without a caller's")
	}
	if tracing.Of(context.Background()) != "" {
		t.Error("Of without a span")
	}
	sc, err := trace.ParseTraceState(state)
	if err != nil {
		t.Fatal(err)
	}
	callers := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: [16]byte{1}, SpanID: [8]byte{2}, TraceFlags: trace.FlagsSampled, TraceState: sc}))
	if got := tracing.Of(callers); !strings.HasPrefix(got, "00-01000000000000000000000000000000-0200000000000000-01 ") {
		t.Errorf("Of(caller's) = %q", got)
	}
}
