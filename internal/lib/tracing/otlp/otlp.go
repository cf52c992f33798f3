// Package otlp sets up OpenTelemetry's SDK for a Homing process, the
// standard way: tracing is on only when OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set, and the SDK and its exporters
// read the other OTEL_* variables themselves (OTEL_EXPORTER_OTLP_PROTOCOL
// and its _TRACES_ form, http/protobuf by default or grpc;
// OTEL_SERVICE_NAME; OTEL_RESOURCE_ATTRIBUTES; OTEL_TRACES_SAMPLER and
// OTEL_TRACES_SAMPLER_ARG; OTEL_BSP_*). It also instruments the sender's
// HTTP client (Transport). Nothing here runs in a process without those
// variables.
package otlp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/homingdev/homing/internal/lib/tracing"
)

// Configured reports whether getenv names an OTLP endpoint for traces:
// whether Start would turn tracing on.
func Configured(getenv func(string) string) bool {
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// Provider is a running SDK tracer provider; Shutdown flushes what is
// batched and stops it.
type Provider struct {
	tp *sdktrace.TracerProvider
}

// Start sets up the SDK from the environment (getenv, os.Getenv in a
// process) and makes it the global provider (tracing.Use). It returns nil,
// and sets nothing up, when no endpoint is configured. process names the
// command ("worker", "serve") in the resource's homing.process; service.name
// is OTEL_SERVICE_NAME, else "homing".
func Start(ctx context.Context, getenv func(string) string, process, version string) (*Provider, error) {
	if !Configured(getenv) {
		return nil, nil
	}
	exp, err := exporter(ctx, getenv)
	if err != nil {
		return nil, err
	}
	// resource.Environment (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES)
	// wins over Homing's defaults.
	res, err := resource.Merge(resource.NewSchemaless(
		attribute.String("service.name", "homing"),
		attribute.String("service.version", version),
		attribute.String("homing.process", process),
	), resource.Environment())
	if err != nil {
		return nil, fmt.Errorf("tracing resource: %w", err)
	}
	// No sampler option: the SDK reads OTEL_TRACES_SAMPLER(_ARG) itself
	// (parentbased_always_on when unset).
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	tracing.Use(tp)
	return &Provider{tp: tp}, nil
}

// exporter is the OTLP exporter OTEL_EXPORTER_OTLP_TRACES_PROTOCOL (or
// OTEL_EXPORTER_OTLP_PROTOCOL) names; the exporter reads the endpoint,
// headers, timeout and TLS variables itself.
func exporter(ctx context.Context, getenv func(string) string) (sdktrace.SpanExporter, error) {
	protocol := getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if protocol == "" {
		protocol = getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	var (
		exp sdktrace.SpanExporter
		err error
	)
	switch strings.TrimSpace(protocol) {
	case "", "http/protobuf":
		exp, err = otlptracehttp.New(ctx)
	case "grpc":
		exp, err = otlptracegrpc.New(ctx)
	default:
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL %q is not supported: use http/protobuf (the default) or grpc", protocol)
	}
	if err != nil {
		return nil, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	return exp, nil
}

// Shutdown exports what is batched, within ctx, and stops the provider;
// Homing's spans are off from then on. A nil Provider does nothing.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p == nil {
		return nil
	}
	tracing.Off()
	if err := p.tp.Shutdown(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("flush traces: %w", err)
	}
	return nil
}

// Transport instruments the sender's HTTP client: each request is an HTTP
// client span, child of the attempt's span. With propagate it also carries
// that span's traceparent (and tracestate) to the receiver; without, the
// receiver learns nothing of the trace (tracing.propagate_to_receivers).
func Transport(propagate bool) func(http.RoundTripper) http.RoundTripper {
	prop := propagation.TextMapPropagator(propagation.NewCompositeTextMapPropagator()) // injects nothing
	if propagate {
		prop = propagation.TraceContext{}
	}
	return func(rt http.RoundTripper) http.RoundTripper {
		return otelhttp.NewTransport(rt, otelhttp.WithPropagators(prop))
	}
}
