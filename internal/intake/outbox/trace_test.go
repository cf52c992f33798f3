package outbox_test

import (
	"context"
	"testing"

	"github.com/hibiken/asynq"
	"go.opentelemetry.io/otel/trace"

	"github.com/homingdev/homing/client"
	"github.com/homingdev/homing/internal/intake/event"
	"github.com/homingdev/homing/internal/intake/outbox"
	"github.com/homingdev/homing/internal/testing/testenv"
	"github.com/homingdev/homing/models"
)

// callersSpan is a context carrying a Go publisher's span, as its own
// OpenTelemetry SDK would give it, and that span's traceparent.
func callersSpan(t *testing.T) (context.Context, string) {
	t.Helper()
	ts, err := trace.ParseTraceState("congo=t61rcWkgMzE")
	if err != nil {
		t.Fatal(err)
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: [16]byte{0xab, 1}, SpanID: [8]byte{0xcd, 2},
		TraceFlags: trace.FlagsSampled, TraceState: ts})
	return trace.ContextWithSpanContext(context.Background(), sc), "00-ab010000000000000000000000000000-cd02000000000000-01"
}

// TestPublishCarriesTheCallersTrace: PublishTx stores the caller's trace
// context with the event and the relay carries it in the task's headers;
// Publish puts it in the headers itself; an event published without a
// span stores NULL and its task carries no trace header. (This process
// does not trace: what came in is passed on unchanged.)
func TestPublishCarriesTheCallersTrace(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	opt, _ := testenv.Redis(t)
	q := queue{client: asynq.NewClient(opt), insp: asynq.NewInspector(opt)}
	t.Cleanup(func() {
		_ = q.client.Close()
		_ = q.insp.Close()
	})
	ctx, parent := callersSpan(t)
	for id, c := range map[string]context.Context{"traced": ctx, "untraced": context.Background()} {
		if _, err := client.PublishTx(c, db, client.Event{ID: id, DocType: "Sales Order", Event: "on_submit", Doc: map[string]any{"name": "SO-1"}}); err != nil {
			t.Fatal(err)
		}
	}
	var rows []models.OutboxEvent
	if err := db.Order("event_id").Find(&rows).Error; err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].TraceContext == nil || *rows[0].TraceContext != parent+" congo=t61rcWkgMzE" || rows[1].TraceContext != nil {
		t.Fatalf("outbox rows' trace_context: %+v", rows)
	}
	relay := outbox.NewRelay(db, q.client, outbox.RelayConfig{})
	if n, err := relay.Drain(context.Background()); err != nil || n != 2 {
		t.Fatalf("Drain = %d, %v", n, err)
	}
	pending := q.pending(t)
	traced, untraced := pending[event.TaskID("", "traced")], pending[event.TaskID("", "untraced")]
	if traced == nil || traced.Headers["traceparent"] != parent || traced.Headers["tracestate"] != "congo=t61rcWkgMzE" {
		t.Errorf("relayed task of the traced event: %+v", traced)
	}
	if untraced == nil || untraced.Headers["traceparent"] != "" || untraced.Headers["tracestate"] != "" || len(untraced.Headers) != 3 ||
		untraced.Headers[event.OutboxHeader] == "" || untraced.Headers[event.AcceptedHeader] == "" || event.AcceptSeq(untraced.Headers) != rows[1].ID {
		t.Errorf("relayed task of the untraced event has headers %v; want the outbox mark, the acceptance time and its place (%d) alone", untraced.Headers, rows[1].ID)
	}

	// client.Publish, straight into Redis.
	pub, err := client.New(client.Config{RedisURL: testenv.RedisURL(opt)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = pub.Close() }()
	if _, err := pub.Publish(ctx, client.Event{ID: "direct", DocType: "Sales Order", Event: "on_submit", Doc: map[string]any{"name": "SO-2"}}); err != nil {
		t.Fatal(err)
	}
	direct := q.pending(t)[event.TaskID("", "direct")]
	if direct == nil || direct.Headers["traceparent"] != parent {
		t.Errorf("Publish's task: %+v, want traceparent %s", direct, parent)
	}
}
