package client_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/homingdev/homing/client"
	"github.com/homingdev/homing/internal/intake/event"
	"github.com/homingdev/homing/models"
)

// closedAddr is a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// TestPublishWithRedisAwayIsRetryable: a publisher whose Redis refuses
// connections gets an error it may repeat, with the event ID.
func TestPublishWithRedisAwayIsRetryable(t *testing.T) {
	t.Parallel()
	c, err := client.New(client.Config{RedisURL: "redis://" + closedAddr(t) + "/0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	id, err := c.Publish(ctx, client.Event{ID: "so-1", DocType: "Sales Order", Event: "on_submit", Doc: map[string]any{"name": "SO-1"}})
	if err == nil || !client.IsRetryable(err) || !errors.Is(err, client.ErrRetryable) || id != "so-1" {
		t.Fatalf("Publish with Redis away = %q, %v; want so-1 and a retryable error", id, err)
	}
	if _, err := c.Publish(ctx, client.Event{DocType: "Sales Order", Event: "on_submit"}); client.IsRetryable(err) {
		t.Errorf("an invalid event is retryable: %v", err)
	}
}

// TestViaServeRetryable: serve's 503 and 429 are retryable with their
// Retry-After, serve unreachable is retryable, and a refusal or a 500 is
// not.
func TestViaServeRetryable(t *testing.T) {
	t.Parallel()
	answer := func(status int, retryAfter, code string) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			if retryAfter != "" {
				w.Header().Set("Retry-After", retryAfter)
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_, _ = w.Write([]byte(`{"error": {"code": "` + code + `", "message": "m"}}`))
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	ev := event.Event{ID: "wf-1", DocType: "Sales Order", Event: models.EventWorkflowTransition, Doc: map[string]any{"name": "SO-1"}}
	for _, tc := range []struct {
		name      string
		url       string
		retryable bool
		after     time.Duration
	}{
		{"database away", answer(503, "2", "database_unavailable"), true, 2 * time.Second},
		{"rate limited", answer(429, "7", "rate_limited"), true, 7 * time.Second},
		{"503 without Retry-After", answer(503, "", "unavailable"), true, 0},
		{"serve unreachable", "http://" + closedAddr(t), true, 0},
		{"refused", answer(422, "", "invalid_request"), false, 0},
		{"a bug", answer(500, "", "internal"), false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := client.ViaServe{URL: tc.url, Token: "t"}.DeliverNow(context.Background(), ev)
			after, ok := client.RetryAfter(err)
			if err == nil || client.IsRetryable(err) != tc.retryable || ok != tc.retryable || after != tc.after {
				t.Errorf("DeliverNow = %v: retryable %v after %s; want retryable %v after %s", err, client.IsRetryable(err), after, tc.retryable, tc.after)
			}
		})
	}
}

// A publisher whose deadline ends while go-redis is still dialing a Redis
// that went down (a loaded machine's dials are slow) hears that Redis is
// unreachable, not only asynq's "redis eval error: context deadline
// exceeded", whose text has lost the error it wrapped. The client published
// once before, so asynq goes straight to its script.
func TestPublishWithRedisGonePastItsDeadlineSaysUnreachable(t *testing.T) {
	t.Parallel()
	m := miniredis.RunT(t)
	c, err := client.New(client.Config{RedisURL: "redis://" + m.Addr() + "/0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	publish := func(ctx context.Context, id string) error {
		_, err := c.Publish(ctx, client.Event{ID: id, DocType: "Sales Order", Event: "on_submit", Doc: map[string]any{"name": id}})
		return err
	}
	if err := publish(context.Background(), "so-1"); err != nil {
		t.Fatal(err)
	}
	m.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err = publish(ctx, "so-2")
	if err == nil || !client.IsRetryable(err) {
		t.Fatalf("Publish with Redis gone: %v; want a retryable error", err)
	}
	if msg := strings.ToLower(err.Error()); !strings.Contains(msg, "redis") || !(strings.Contains(msg, "unreachable") || strings.Contains(msg, "refused") || strings.Contains(msg, "dial")) {
		t.Fatalf("Publish with Redis gone past its deadline: %q does not say Redis is unreachable", err)
	}
}
