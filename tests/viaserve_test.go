package tests

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/homingdev/homing/client"
	"github.com/homingdev/homing/internal/testing/testreceiver"
)

// TestClientTransitionsViaServe: a service that imports only package client
// delivers workflow_transition events through a real homing serve
// (client.ViaServe): nil once the receiver took the event, a *SyncError
// naming the webhook when it did not, and serve's own message for a bad
// token. Each request reaches the receiver once, before Publish returns.
func TestClientTransitionsViaServe(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test: builds the binaries and runs them against PostgreSQL and Redis")
	}
	s := newSystem(t)
	s.env = withEnv(s.env, "HOMING_API_ADDR", "127.0.0.1:0")
	api := s.startAPI(t)
	rc := testreceiver.Answers(t, func(n int) int {
		if n == 1 {
			return http.StatusOK
		}
		return http.StatusInternalServerError
	})
	s.ok(t, nil, "homing", "webhook", "create", "--name", "approvals", "--doctype", "Leave Application",
		"--event", "workflow_transition", "--url", rc.URL+"/approvals")

	pub := func(token string) *client.Client {
		c, err := client.New(client.Config{RedisURL: s.envValue("HOMING_REDIS_URL"),
			Transitions: client.ViaServe{URL: api.base, Token: token}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	c := pub(api.token)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ev := client.Event{ID: "wf-ok", DocType: "Leave Application", Event: "workflow_transition",
		Doc: map[string]any{"name": "LA-1", "workflow_state": "Approved"}}
	if _, err := c.Publish(ctx, ev); err != nil {
		t.Fatalf("publish through serve, receiver up: %v", err)
	}
	if got := rc.Requests(); len(got) != 1 || !strings.Contains(string(got[0].Body), `"LA-1"`) {
		t.Fatalf("receiver got %d requests before Publish returned, want 1 with the document", len(got))
	}

	ev.ID, ev.Doc["name"] = "wf-down", "LA-2"
	_, err := c.Publish(ctx, ev)
	var serr *client.SyncError
	if !errors.As(err, &serr) || serr.EventID != "wf-down" || len(serr.Failures) != 1 || serr.Failures[0].Webhook != "approvals" {
		t.Fatalf("publish through serve, receiver failing: got %v, want a SyncError naming approvals", err)
	}
	if n := len(rc.Requests()); n != 2 {
		t.Errorf("receiver got %d requests, want 2", n)
	}

	ev.ID = "wf-badtoken"
	if _, err := pub("hmg_not_a_token").Publish(ctx, ev); err == nil || errors.As(err, &serr) || !strings.Contains(err.Error(), "unauthorized") {
		t.Errorf("publish with a bad token: got %v, want serve's unauthorized error", err)
	}
	if n := len(rc.Requests()); n != 2 {
		t.Errorf("receiver got %d requests after the refused publish, want 2", n)
	}
}
