package handoff_test

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/homingdev/homing/internal/ops/handoff"
	"github.com/homingdev/homing/internal/testing/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// Counts come back as they were handed off, summed by label set, outcomes,
// attempts (by class) and their durations (by bucket, and the sum in
// microseconds) apart, and a drain leaves nothing behind for the next.
func TestDrainReturnsWhatWasHandedOff(t *testing.T) {
	t.Parallel()
	_, rdb := testenv.Redis(t)
	h := handoff.New(rdb, nil)
	h.Deliveries("acme", "a\x00b", "Exhausted", "tenant_disabled", 2)
	h.Deliveries("acme", "a\x00b", "Exhausted", "tenant_disabled", 3)
	h.Attempt("", "orders", "2xx", 3*time.Millisecond, "Delivered", "accepted")
	h.Attempt("", "orders", "5xx", 5*time.Millisecond, "", "") // no status: an attempt only
	h.Attempt("", "orders", "5xx", 2*time.Second, "", "")
	h.Deliveries("", "orders", "Exhausted", "webhook_deleted", 0)
	got, err := h.Drain(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := map[handoff.Count]bool{
		{Tenant: "acme", Webhook: "a\x00b", Status: "Exhausted", Reason: "tenant_disabled", N: 5}: true,
		// No tenant is the default one (Labels.Of names it).
		{Tenant: "default", Webhook: "orders", Status: "Delivered", Reason: "accepted", N: 1}: true,
		{Tenant: "default", Webhook: "orders", Class: "2xx", N: 1}:                            true,
		{Tenant: "default", Webhook: "orders", Class: "5xx", N: 2}:                            true,
		{Bucket: "0.01", N: 2}:                 true,
		{Bucket: "2.5", N: 1}:                  true,
		{Bucket: handoff.SumField, N: 2008000}: true,
	}
	if len(got) != len(want) {
		t.Fatalf("drained %v, want %v", got, want)
	}
	for _, c := range got {
		if !want[c] {
			t.Errorf("drained %+v, not handed off", c)
		}
	}
	if again, err := h.Drain(context.Background()); err != nil || len(again) != 0 {
		t.Errorf("second drain = %v, %v; want nothing", again, err)
	}
}

// A worker of the version before attempts were handed off drains Key only,
// reading every field as [tenant, webhook, status, reason]: attempts wait
// in a hash of their own, in Key's Redis Cluster slot, so that such a
// worker never counts an attempt as an outcome.
func TestAttemptsWaitApartFromOutcomes(t *testing.T) {
	t.Parallel()
	_, rdb := testenv.Redis(t)
	h := handoff.New(rdb, nil)
	h.Attempt("acme", "orders", "2xx", 0, "Delivered", "accepted")
	outcomes, err := rdb.HGetAll(t.Context(), handoff.Key).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(outcomes) != 1 || outcomes[`["acme","orders","Delivered","accepted"]`] != "1" {
		t.Errorf("%s holds %v, want the outcome only", handoff.Key, outcomes)
	}
	attempts, err := rdb.HGetAll(t.Context(), handoff.AttemptsKey).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(attempts) != 1 || attempts[`["acme","orders","2xx"]`] != "1" {
		t.Errorf("%s holds %v, want the attempt", handoff.AttemptsKey, attempts)
	}
	if !strings.HasPrefix(handoff.AttemptsKey, "{"+handoff.Key+"}") {
		t.Errorf("%s does not share %s's cluster slot: one script adds to both", handoff.AttemptsKey, handoff.Key)
	}
}

// A Redis that is away loses the counts loudly: one ERROR line saying how
// many, of what, and why.
func TestFailedHandoffIsLogged(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer func() { _ = rdb.Close() }()
	var buf bytes.Buffer
	h := handoff.New(rdb, slog.New(slog.NewTextHandler(&buf, nil)))
	h.Deliveries("", "orders", "Exhausted", "webhook_disabled", 7)
	line := buf.String()
	for _, want := range []string{"level=ERROR", "not counted in homing_deliveries_total", "not_counted=7", "tenant=default webhook=orders status=Exhausted reason=webhook_disabled n=7", addr} {
		if !strings.Contains(line, want) {
			t.Errorf("log does not mention %q:\n%s", want, line)
		}
	}
	if strings.Count(line, "\n") != 1 {
		t.Errorf("want one line, got:\n%s", line)
	}

	buf.Reset()
	handoff.New(nil, slog.New(slog.NewTextHandler(&buf, nil))).Deliveries("", "orders", "Exhausted", "webhook_deleted", 2)
	if !strings.Contains(buf.String(), "not_counted=2") || !strings.Contains(buf.String(), "set redis.url") {
		t.Errorf("a process with no Redis does not say so:\n%s", buf.String())
	}
}
