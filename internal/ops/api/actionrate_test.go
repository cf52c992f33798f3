package api_test

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/homingdev/homing/internal/engine/ratelimit"
	"github.com/homingdev/homing/internal/engine/tenant"
	"github.com/homingdev/homing/internal/ops/api"
	"github.com/homingdev/homing/internal/ops/token"
	"github.com/homingdev/homing/internal/testing/testenv"
	"github.com/homingdev/homing/internal/testing/testreceiver"
	"github.com/homingdev/homing/models"
)

// Resends, retries and test sends are charged to their tenant's
// action_rate, one budget for the three: at action_rate 1, actions sent
// back to back are refused 429 rate_limited with Retry-After and a message
// naming action_rate and how to raise it, and the refused ones change
// nothing (no new delivery, no test request). A tenant without an
// action_rate is never refused.
func TestActionRateIsPerTenant(t *testing.T) {
	t.Parallel()
	_, rdb := testenv.Redis(t)
	s := newServer(t, func(o *options) { o.actionLimiter = ratelimit.New(rdb) })
	rc := testreceiver.New(t)
	one := 1
	busy := s.tenantToken("busy", token.ScopeAdmin, tenant.Patch{ActionRate: &one})
	calm := s.tenantToken("calm", token.ScopeAdmin, tenant.Patch{})

	// Each tenant has a webhook, and a Delivered (to resend) and an
	// Exhausted (to retry) delivery of it.
	delivered, exhausted := map[string]string{}, map[string]string{}
	for ten, tok := range map[string]string{"busy": busy, "calm": calm} {
		s.expect(http.StatusCreated, "POST", "/v1/webhooks", tok, fmt.Sprintf(
			`{"name": "orders", "doctype": "Sales Order", "event": "on_submit", "url": %q}`, rc.URL+"/"+ten))
		var hook models.Webhook
		if err := s.db.Where("tenant = ? AND name = ?", ten, "orders").Take(&hook).Error; err != nil {
			t.Fatal(err)
		}
		d := testenv.PlannedDelivery(ten+"-1", "ev-"+ten, hook.ID, time.Now().UTC().Truncate(time.Microsecond))
		d.Tenant, d.WebhookName, d.URL, d.Status, d.NextRetry, d.Attempts = ten, "orders", rc.URL+"/"+ten, models.StatusDelivered, nil, 1
		if err := s.db.Create(&d).Error; err != nil {
			t.Fatal(err)
		}
		delivered[ten] = d.ID
		x := testenv.PlannedDelivery(ten+"-2", "ev2-"+ten, hook.ID, time.Now().UTC().Truncate(time.Microsecond))
		x.Tenant, x.WebhookName, x.URL, x.Status, x.NextRetry, x.Attempts = ten, "orders", rc.URL+"/"+ten, models.StatusExhausted, nil, 1
		if err := s.db.Create(&x).Error; err != nil {
			t.Fatal(err)
		}
		code := 503 // its one attempt, recorded
		if err := s.db.Create(&models.Attempt{DeliveryID: x.ID, Tenant: ten, Attempt: 1, At: x.CreatedAt, Method: "POST", URL: x.URL,
			RequestHeaders: models.StringMap{}, StatusCode: &code, Class: "5xx"}).Error; err != nil {
			t.Fatal(err)
		}
		exhausted[ten] = x.ID
	}
	actions := func(ten, tok string, i int) []reply {
		return []reply{
			s.request("POST", "/v1/deliveries/"+delivered[ten]+"/resend", tok, "", "Idempotency-Key", fmt.Sprintf("k-%d", i)),
			s.request("POST", "/v1/deliveries/"+exhausted[ten]+"/retry", tok, ""),
			s.request("POST", "/v1/webhooks/orders/test", tok, `{"doc": {"name": "SO-1"}}`),
		}
	}

	// Refused by action_rate, by kind (a test send may also meet its
	// webhook's own budget, one a second, which is not this test's).
	refused := map[string][]reply{}
	kinds := []string{"resend", "retry", "test"}
	resent := 0
	for i := range 5 {
		for j, r := range actions("busy", busy, i) {
			switch {
			case r.status == http.StatusTooManyRequests && strings.Contains(string(r.body), "action_rate"):
				refused[kinds[j]] = append(refused[kinds[j]], r)
			case r.status == http.StatusCreated:
				resent++
			}
		}
	}
	if len(refused["resend"]) == 0 || len(refused["retry"]) == 0 {
		t.Fatalf("5 rounds of a resend, a retry and a test send back to back at action_rate 1: refused for action_rate %d resends, %d retries; want both refused",
			len(refused["resend"]), len(refused["retry"]))
	}
	for _, kind := range kinds {
		for _, r := range refused[kind] {
			e := errorOf(t, r)
			if ra, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || ra < 1 || e.Code != api.CodeRateLimited ||
				!strings.Contains(e.Message, "homing tenant update busy --action-rate N") {
				t.Errorf("refused %s: %s (Retry-After %q), want 429 rate_limited naming action_rate and how to raise it, with Retry-After", kind, r, r.header.Get("Retry-After"))
			}
		}
	}
	var resends int64
	if err := s.db.Model(&models.Delivery{}).Where("tenant = ? AND id NOT IN ?", "busy", []string{delivered["busy"], exhausted["busy"]}).Count(&resends).Error; err != nil {
		t.Fatal(err)
	}
	if resends != int64(resent) {
		t.Errorf("tenant busy has %d resent deliveries; %d resends were answered 201", resends, resent)
	}

	// The other tenant, without an action_rate, is never refused.
	for i := range 5 {
		for j, r := range actions("calm", calm, i) {
			if j == 2 {
				continue // test sends have their own budget, one a second per webhook
			}
			if r.status == http.StatusTooManyRequests {
				t.Fatalf("tenant calm (no action_rate), action %d of round %d: %s", j, i, r)
			}
		}
	}
}
