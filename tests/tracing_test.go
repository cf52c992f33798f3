package tests

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/homingdev/homing/internal/testing/testotlp"
	"github.com/homingdev/homing/internal/testing/testreceiver"
)

// The publisher's trace: POST /v1/events carries its traceparent.
const (
	publisherTrace  = "4bf92f3577b34da6a3ce929d0e0e4736"
	publisherParent = "00-" + publisherTrace + "-00f067aa0ba902b7-01"
)

// publishTraced posts event body to /v1/events with a traceparent and
// fails the test unless it is accepted.
func publishTraced(t *testing.T, c apiClient, body string) {
	t.Helper()
	req, err := http.NewRequest("POST", c.base+"/v1/events", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("traceparent", publisherParent)
	req.Header.Set("tracestate", "congo=t61rcWkgMzE")
	resp, err := (&http.Client{Timeout: waitTimeout}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST /v1/events: %d %s", resp.StatusCode, b)
	}
}

// tracedSystem is a system whose processes export their spans to col
// (nil: tracing off), with a one-second retry schedule and sweep.
func tracedSystem(t *testing.T, col *testotlp.Collector) *system {
	t.Helper()
	s := newSystem(t)
	s.env = withEnv(s.env, "HOMING_API_ADDR", "127.0.0.1:0")
	s.env = withEnv(s.env, "HOMING_RETRY_SCHEDULE", "1s")
	s.env = withEnv(s.env, "HOMING_SWEEPER_INTERVAL", "1s")
	for _, kv := range s.env {
		if strings.HasPrefix(kv, "OTEL_") {
			k, _, _ := strings.Cut(kv, "=")
			s.env = withEnv(s.env, k, "")
		}
	}
	s.env = withEnv(s.env, "OTEL_SERVICE_NAME", "homing-e2e")
	if col != nil {
		s.env = withEnv(s.env, "OTEL_EXPORTER_OTLP_ENDPOINT", col.URL)
		s.env = withEnv(s.env, "OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
		s.env = withEnv(s.env, "OTEL_BSP_SCHEDULE_DELAY", "100") // export within 0.1 s, not 5 s
	}
	return s
}

const tracedOrder = `{"id": "so-traced", "doc_type": "Sales Order", "doc_name": "SO-7", "event": "on_submit", "doc": {"name": "SO-7", "grand_total": 10}}`

// traceIDOf is the trace id of a traceparent header ("" when none).
func traceIDOf(traceparent string) string {
	parts := strings.Split(traceparent, "-")
	if len(parts) != 4 {
		return ""
	}
	return parts[1]
}

// TestTraceFromPublishToRetry follows one trace through real processes:
// POST /v1/events carrying a traceparent → homing serve (publish, relay) →
// the worker (fan-out, a first attempt the receiver fails) → the
// scheduler's sweep → the worker's retry, which succeeds. Every request
// the receiver gets carries a traceparent of the publisher's trace, the
// delivery keeps that trace's context, and the in-process OTLP receiver
// gets each step as a span of that one trace, the retry linked to the
// sweep that queued it.
func TestTraceFromPublishToRetry(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test: builds the binaries and runs them against PostgreSQL and Redis")
	}
	col := testotlp.New(t)
	s := tracedSystem(t, col)
	s.start("worker", "worker started")
	s.start("scheduler", "scheduler started")
	c := s.startAPI(t)
	rc := testreceiver.Answers(t, func(n int) int {
		if n == 1 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	c.expect(t, http.StatusCreated, "POST", "/v1/webhooks", fmt.Sprintf(
		`{"name": "orders", "doctype": "Sales Order", "event": "on_submit", "url": %q}`, rc.URL+"/orders"))
	publishTraced(t, c, tracedOrder)

	id := s.deliveryOf(t, "so-traced")
	d := s.waitStatus(t, id, "Delivered")
	reqs := rc.Requests()
	if len(reqs) != 2 || d.Attempts != 2 {
		t.Fatalf("receiver got %d requests, delivery has %d attempts; want a failure and its retry", len(reqs), d.Attempts)
	}
	for i, r := range reqs {
		tp := r.Header.Get("traceparent")
		if traceIDOf(tp) != publisherTrace {
			t.Errorf("request %d carried traceparent %q, want one of trace %s", i+1, tp, publisherTrace)
		}
		if r.Header.Get("tracestate") != "congo=t61rcWkgMzE" {
			t.Errorf("request %d carried tracestate %q, want the publisher's", i+1, r.Header.Get("tracestate"))
		}
	}
	if tp1, tp2 := reqs[0].Header.Get("traceparent"), reqs[1].Header.Get("traceparent"); tp1 == tp2 {
		t.Errorf("both attempts carried the same traceparent %q: each is a span of its own", tp1)
	}

	// What the delivery keeps: the fan-out's context, of the same trace.
	db := s.openDB(t)
	var stored *string
	if err := db.Raw("SELECT trace_context FROM deliveries WHERE id = ?", id).Scan(&stored).Error; err != nil {
		t.Fatal(err)
	}
	if stored == nil || traceIDOf(strings.Fields(*stored)[0]) != publisherTrace || !strings.HasSuffix(*stored, " congo=t61rcWkgMzE") {
		t.Errorf("deliveries.trace_context = %v, want the publisher's trace with its tracestate", stored)
	}

	// The spans, each exported by the process that made it.
	want := []string{"POST /v1/events", "homing.relay", "homing.fanout", "homing.attempt", "homing.retry"}
	var spans []testotlp.Span
	eventually(t, "every step's span of the publisher's trace at the OTLP receiver", func() (bool, string) {
		spans = col.Trace(publisherTrace)
		names := map[string]int{}
		for _, sp := range spans {
			names[sp.Name]++
		}
		for _, n := range want {
			if names[n] == 0 {
				return false, fmt.Sprintf("no %s span yet; have %v", n, names)
			}
		}
		return names["HTTP POST"] >= 2 || names["POST"] >= 2, fmt.Sprintf("HTTP client spans: have %v", names)
	})
	byID := map[string]testotlp.Span{}
	byName := map[string]testotlp.Span{}
	for _, sp := range spans {
		byID[sp.SpanID] = sp
		byName[sp.Name] = sp
		if sp.Service != "homing-e2e" {
			t.Errorf("span %s has service.name %q, want OTEL_SERVICE_NAME's", sp.Name, sp.Service)
		}
	}
	// The tree: publish ← relay ← fan-out ← first attempt; the retry is a
	// child of the fan-out too (the context the delivery keeps).
	parentOf := func(name string) string { return byID[byName[name].ParentSpanID].Name }
	if p := byName["POST /v1/events"].ParentSpanID; p != "00f067aa0ba902b7" {
		t.Errorf("POST /v1/events span's parent %s, want the publisher's span", p)
	}
	for child, parent := range map[string]string{"homing.relay": "POST /v1/events", "homing.fanout": "homing.relay",
		"homing.attempt": "homing.fanout", "homing.retry": "homing.fanout"} {
		if got := parentOf(child); got != parent {
			t.Errorf("%s span's parent is %q, want %s", child, got, parent)
		}
	}
	// Each request's traceparent names the HTTP client span of an attempt.
	for i, r := range reqs {
		sid := strings.Split(r.Header.Get("traceparent"), "-")[2]
		sp, ok := byID[sid]
		if !ok {
			t.Errorf("request %d's traceparent names span %s, which was not exported", i+1, sid)
			continue
		}
		if p := byID[sp.ParentSpanID].Name; p != "homing.attempt" && p != "homing.retry" {
			t.Errorf("request %d's client span %q has parent %q, want an attempt", i+1, sp.Name, p)
		}
	}
	// The retry links to the sweep tick that queued it, a trace of its own.
	retry := byName["homing.retry"]
	if len(retry.Links) != 1 {
		t.Fatalf("homing.retry has links %v, want the sweep's", retry.Links)
	}
	traceID, spanID, _ := strings.Cut(retry.Links[0], "-")
	eventually(t, "the linked sweep span", func() (bool, string) {
		for _, sp := range col.Trace(traceID) {
			if sp.SpanID == spanID {
				return sp.Name == "homing.sweep" && sp.ParentSpanID == "", fmt.Sprintf("linked span is %q with parent %q", sp.Name, sp.ParentSpanID)
			}
		}
		return false, "not exported yet"
	})
}

// TestTraceNotPropagatedToReceivers: with tracing.propagate_to_receivers
// false the receiver gets no traceparent or tracestate, while the spans
// are still exported.
func TestTraceNotPropagatedToReceivers(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test: builds the binaries and runs them against PostgreSQL and Redis")
	}
	col := testotlp.New(t)
	s := tracedSystem(t, col)
	s.env = withEnv(s.env, "HOMING_TRACING_PROPAGATE_TO_RECEIVERS", "false")
	s.start("worker", "worker started")
	c := s.startAPI(t)
	rc := testreceiver.New(t)
	c.expect(t, http.StatusCreated, "POST", "/v1/webhooks", fmt.Sprintf(
		`{"name": "orders", "doctype": "Sales Order", "event": "on_submit", "url": %q}`, rc.URL+"/orders"))
	publishTraced(t, c, tracedOrder)
	s.waitStatus(t, s.deliveryOf(t, "so-traced"), "Delivered")
	for _, h := range []string{"traceparent", "tracestate"} {
		if v := rc.Requests()[0].Header.Get(h); v != "" {
			t.Errorf("receiver got %s %q with propagate_to_receivers false", h, v)
		}
	}
	eventually(t, "the attempt's span exported all the same", func() (bool, string) {
		for _, sp := range col.Trace(publisherTrace) {
			if sp.Name == "homing.attempt" {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d spans of the trace", len(col.Trace(publisherTrace)))
	})
}

// TestTracingOff: without an OTLP endpoint the processes set up no
// tracing: a request's traceparent is neither stored nor sent on, and
// nothing reaches an OTLP receiver.
func TestTracingOff(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test: builds the binaries and runs them against PostgreSQL and Redis")
	}
	col := testotlp.New(t)
	s := tracedSystem(t, nil)
	// Everything but the endpoint: these alone turn nothing on.
	s.env = withEnv(s.env, "OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	s.env = withEnv(s.env, "OTEL_TRACES_SAMPLER", "always_on")
	s.start("worker", "worker started")
	c := s.startAPI(t)
	rc := testreceiver.New(t)
	c.expect(t, http.StatusCreated, "POST", "/v1/webhooks", fmt.Sprintf(
		`{"name": "orders", "doctype": "Sales Order", "event": "on_submit", "url": %q}`, rc.URL+"/orders"))
	publishTraced(t, c, tracedOrder)
	id := s.deliveryOf(t, "so-traced")
	s.waitStatus(t, id, "Delivered")
	for _, h := range []string{"traceparent", "tracestate"} {
		if v := rc.Requests()[0].Header.Get(h); v != "" {
			t.Errorf("receiver got %s %q with tracing off", h, v)
		}
	}
	var stored *string
	if err := s.openDB(t).Raw("SELECT trace_context FROM deliveries WHERE id = ?", id).Scan(&stored).Error; err != nil {
		t.Fatal(err)
	}
	if stored != nil {
		t.Errorf("deliveries.trace_context = %q with tracing off, want NULL", *stored)
	}
	if n := col.Requests(); n != 0 {
		t.Errorf("the OTLP receiver got %d export requests with tracing off", n)
	}
}
