package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/homingdev/homing/internal/engine/tenant"
	"github.com/homingdev/homing/internal/engine/webhook"
	"github.com/homingdev/homing/internal/ops/token"
	"github.com/homingdev/homing/internal/testing/testreceiver"
	"github.com/homingdev/homing/models"
)

// A disabled tenant's people can still look, but not send: in the portal
// Retry, Resend, Recover (its count too) and Send test are each refused
// with 409 and a page saying the tenant is disabled and its deliveries
// kept; nothing is written and the receiver gets nothing.
func TestPortalOfADisabledTenantSendsNothing(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	s.withAcme()
	ctx := context.Background()
	rc := testreceiver.New(t)
	if _, err := s.hooks.Create(ctx, "acme", webhook.Input{Name: ptr("acme-try"), DocType: ptr("Sales Order"), Event: ptr("on_submit"), URL: ptr(rc.URL + "/try")}); err != nil {
		t.Fatal(err)
	}
	link, err := s.links.Create(ctx, "acme", 0, token.Token{Name: "test"})
	if err != nil {
		t.Fatal(err)
	}
	ck := s.open(link.Token)
	csrf := s.csrf(ck, "/portal/deliveries/a-1")
	off := false
	if _, err := tenant.New(s.db, nil, nil).Update(ctx, "acme", tenant.Patch{Enabled: &off}); err != nil {
		t.Fatal(err)
	}
	if res, _ := s.do("GET", "/portal/deliveries/a-1", nil, ck, nil); res.StatusCode != http.StatusOK {
		t.Fatalf("a disabled tenant's delivery page: %d, want 200 (looking sends nothing)", res.StatusCode)
	}
	since := time.Now().UTC().Add(-2 * time.Hour).Format("2006-01-02T15:04")
	for _, a := range []struct {
		path string
		form url.Values
	}{
		{"/portal/deliveries/a-1/retry", url.Values{"csrf": {csrf}}},
		{"/portal/deliveries/a-1/resend", url.Values{"csrf": {csrf}}},
		{"/portal/webhooks/acme-orders/recover", url.Values{"csrf": {csrf}, "since": {since}, "step": {"count"}}},
		{"/portal/webhooks/acme-orders/recover", url.Values{"csrf": {csrf}, "since": {since}, "step": {"run"}}},
		{"/portal/webhooks/acme-try/test", url.Values{"csrf": {csrf}, "doc": {`{"name": "SO-1"}`}}},
	} {
		res, body := s.do("POST", a.path, a.form, ck, nil)
		if res.StatusCode != http.StatusConflict || !strings.Contains(body, "disabled") || !strings.Contains(body, "kept") {
			t.Errorf("POST %s (%s) of a disabled tenant: %d, want 409 saying the tenant is disabled and its deliveries kept\n%s", a.path, a.form.Get("step"), res.StatusCode, body)
		}
	}
	var rows []models.Delivery
	if err := s.db.Where("tenant = ?", "acme").Find(&rows).Error; err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].Status != models.StatusFailed || rows[0].LastError != "HTTP 500" {
		t.Errorf("acme's deliveries after the refusals: %+v; want a-1 alone, untouched", rows)
	}
	if n := rc.Count(); n != 0 {
		t.Errorf("the receiver got %d requests from a disabled tenant's portal, want 0", n)
	}
}
