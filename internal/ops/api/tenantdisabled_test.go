package api_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/homingdev/homing/internal/engine/delivery/send"
	"github.com/homingdev/homing/internal/engine/dispatch"
	"github.com/homingdev/homing/internal/engine/tenant"
	"github.com/homingdev/homing/internal/ops/token"
	"github.com/homingdev/homing/internal/testing/testenv"
	"github.com/homingdev/homing/internal/testing/testreceiver"
	"github.com/homingdev/homing/models"
)

// A disabled tenant's own admin token can send nothing: a retry, a resend
// and a test send are each answered 409 tenant_disabled, saying how to
// enable the tenant; a publish too. Nothing is written and the receiver
// gets nothing, even from a worker attempting every delivery of the
// tenant. Enabled again, the same retry is sent, once.
func TestDisabledTenantSendsNothing(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	ctx := context.Background()
	rc := testreceiver.New(t)
	if _, err := tenant.New(s.db, nil, nil).Create(ctx, "acme", tenant.Patch{}); err != nil {
		t.Fatal(err)
	}
	_, acme, err := s.tokens.Create(ctx, "acme-admin", token.ScopeAdmin, "acme")
	if err != nil {
		t.Fatal(err)
	}
	s.expect(http.StatusCreated, "POST", "/v1/webhooks", acme, fmt.Sprintf(
		`{"name": "orders", "doctype": "Sales Order", "event": "on_submit", "url": %q}`, rc.URL+"/orders"))
	var hook models.Webhook
	if err := s.db.Where("tenant = ? AND name = ?", "acme", "orders").Take(&hook).Error; err != nil {
		t.Fatal(err)
	}
	// An Exhausted delivery whose one attempt was answered 503.
	now := time.Now().UTC().Truncate(time.Microsecond)
	d := testenv.PlannedDelivery("acme-1", "ev-1", hook.ID, now)
	d.Tenant, d.WebhookName, d.URL, d.Status, d.NextRetry, d.Attempts = "acme", "orders", rc.URL+"/orders", models.StatusExhausted, nil, 1
	if err := s.db.Create(&d).Error; err != nil {
		t.Fatal(err)
	}
	code := 503
	if err := s.db.Create(&models.Attempt{DeliveryID: d.ID, Tenant: "acme", Attempt: 1, At: now, Method: "POST", URL: d.URL,
		RequestHeaders: models.StringMap{}, StatusCode: &code, Class: "5xx"}).Error; err != nil {
		t.Fatal(err)
	}
	// A worker of its own, to attempt whatever the API makes due (no SSRF
	// guard: the receiver is on loopback).
	sender := send.NewSender(send.SenderConfig{})
	t.Cleanup(sender.Close)
	worker := dispatch.New(s.db, sender, nil, dispatch.Config{})
	attemptDue := func() {
		t.Helper()
		var ids []string
		if err := s.db.Model(&models.Delivery{}).Where("tenant = ? AND status = ?", "acme", models.StatusFailed).Pluck("id", &ids).Error; err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			_, _ = worker.Attempt(ctx, id, dispatch.Retry)
		}
	}

	s.expect(http.StatusOK, "PATCH", "/v1/tenants/acme", s.admin, `{"enabled": false}`)
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/v1/deliveries/" + d.ID + "/retry", ""},
		{"POST", "/v1/deliveries/" + d.ID + "/resend", ""},
		{"POST", "/v1/webhooks/orders/test", `{"doc": {"name": "SO-1"}}`},
		{"POST", "/v1/events", eventBody("ev-2", "")},
	} {
		e := s.refused(http.StatusConflict, "tenant_disabled", "", c.method, c.path, acme, c.body)
		if !strings.Contains(e.Message, `"acme"`) || !strings.Contains(e.Message, "--enable") {
			t.Errorf("%s %s: message %q, want it to name the tenant and how to enable it", c.method, c.path, e.Message)
		}
	}
	attemptDue()
	var rows []models.Delivery
	if err := s.db.Where("tenant = ?", "acme").Find(&rows).Error; err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].Status != models.StatusExhausted {
		t.Fatalf("acme's deliveries after the refusals: %+v; want its one, untouched", rows)
	}
	if n := rc.Count(); n != 0 {
		t.Fatalf("the receiver got %d requests from a disabled tenant, want 0", n)
	}

	s.expect(http.StatusOK, "PATCH", "/v1/tenants/acme", s.admin, `{"enabled": true}`)
	s.expect(http.StatusOK, "POST", "/v1/deliveries/"+d.ID+"/retry", acme, "")
	attemptDue()
	if got := rc.CountBy("webhook-id"); rc.Count() != 1 || got[d.ID] != 1 {
		t.Fatalf("once enabled, the receiver got %v; want the retried delivery once", got)
	}
}
