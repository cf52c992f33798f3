// Package testotlp is an OTLP trace receiver for tests: a loopback HTTP
// server that takes what OpenTelemetry's exporters send over
// http/protobuf (POST /v1/traces, an ExportTraceServiceRequest of the
// official OTLP protobuf types) and keeps the spans, so that a test can
// assert on what a real process exported.
package testotlp

import (
	"bytes"
	"compress/gzip"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Span is one exported span, its IDs in hex as a traceparent spells them.
type Span struct {
	Service      string // the resource's service.name
	Name         string
	TraceID      string
	SpanID       string
	ParentSpanID string // "" for a root
	Kind         int32  // OTLP's SpanKind (2 server, 3 client, 4 producer, 5 consumer)
	// Links are the linked spans, as "traceid-spanid".
	Links []string
	// Attrs are the span's string and integer attributes, as text.
	Attrs map[string]string
}

// Collector is the receiver; its URL is Collector.URL (the value of
// OTEL_EXPORTER_OTLP_ENDPOINT).
type Collector struct {
	*httptest.Server
	mu       sync.Mutex
	spans    []Span
	requests int
}

// New starts a collector, closed when the test ends.
func New(t testing.TB) *Collector {
	t.Helper()
	c := Start()
	t.Cleanup(c.Close)
	return c
}

// Start starts a collector outside a test (the benchmark harness's
// -trace); Close it when done.
func Start() *Collector {
	c := &Collector{}
	c.Server = httptest.NewServer(http.HandlerFunc(c.serve))
	return c
}

func (c *Collector) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" {
		http.NotFound(w, r)
		return
	}
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		z, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = z
	}
	b, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var got []Span
	for _, rs := range req.GetResourceSpans() {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				sp := Span{Service: service, Name: s.GetName(), TraceID: hex.EncodeToString(s.GetTraceId()),
					SpanID: hex.EncodeToString(s.GetSpanId()), Kind: int32(s.GetKind()), Attrs: map[string]string{}}
				if p := s.GetParentSpanId(); len(p) > 0 && !bytes.Equal(p, make([]byte, 8)) {
					sp.ParentSpanID = hex.EncodeToString(p)
				}
				for _, l := range s.GetLinks() {
					sp.Links = append(sp.Links, hex.EncodeToString(l.GetTraceId())+"-"+hex.EncodeToString(l.GetSpanId()))
				}
				for _, kv := range s.GetAttributes() {
					v := kv.GetValue()
					switch {
					case v.GetStringValue() != "":
						sp.Attrs[kv.GetKey()] = v.GetStringValue()
					default:
						sp.Attrs[kv.GetKey()] = v.String()
					}
				}
				got = append(got, sp)
			}
		}
	}
	c.mu.Lock()
	c.spans = append(c.spans, got...)
	c.requests++
	c.mu.Unlock()
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// Spans is every span received so far.
func (c *Collector) Spans() []Span {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Span(nil), c.spans...)
}

// Requests is how many export requests arrived.
func (c *Collector) Requests() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.requests
}

// Trace is the spans of trace id traceID.
func (c *Collector) Trace(traceID string) []Span {
	var out []Span
	for _, s := range c.Spans() {
		if s.TraceID == traceID {
			out = append(out, s)
		}
	}
	return out
}
