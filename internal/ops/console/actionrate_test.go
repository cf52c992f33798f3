package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/homingdev/homing/internal/engine/ratelimit"
	"github.com/homingdev/homing/internal/engine/tenant"
	"github.com/homingdev/homing/internal/ops/token"
	"github.com/homingdev/homing/internal/testing/testenv"
)

// The portal's Retry, Resend and Recover are charged to the tenant's
// action_rate, as the API's are (they are the same services): at
// action_rate 1, actions sent back to back are refused with 429, a
// Retry-After and a page naming action_rate.
func TestPortalActionsAreChargedToTheActionRate(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	s.withAcme()
	ctx := context.Background()
	one := 1
	if _, err := tenant.New(s.db, nil, nil).Update(ctx, "acme", tenant.Patch{ActionRate: &one}); err != nil {
		t.Fatal(err)
	}
	_, rdb := testenv.Redis(t)
	actions := tenant.NewActions(tenant.New(s.db, nil, nil), ratelimit.New(rdb), nil)
	s.rec.SetActions(actions)
	s.hooks.SetActions(actions)
	link, err := s.links.Create(ctx, "acme", 0, token.Token{Name: "test"})
	if err != nil {
		t.Fatal(err)
	}
	ck := s.open(link.Token)
	csrf := s.csrf(ck, "/portal/deliveries/a-1")
	since := time.Now().UTC().Add(-2 * time.Hour).Format("2006-01-02T15:04")
	refused := map[string]bool{}
	for range 5 {
		for _, a := range []struct {
			path string
			form url.Values
		}{
			{"/portal/deliveries/a-1/resend", url.Values{"csrf": {csrf}}},
			{"/portal/deliveries/a-1/retry", url.Values{"csrf": {csrf}}},
			{"/portal/webhooks/acme-orders/recover", url.Values{"csrf": {csrf}, "since": {since}, "step": {"run"}}},
		} {
			res, body := s.do("POST", a.path, a.form, ck, nil)
			if res.StatusCode != http.StatusTooManyRequests {
				continue
			}
			refused[a.path] = true
			if res.Header.Get("Retry-After") == "" || !strings.Contains(body, "action_rate") {
				t.Errorf("POST %s refused: Retry-After %q\n%s\nwant a Retry-After and a page naming action_rate", a.path, res.Header.Get("Retry-After"), body)
			}
		}
	}
	for _, path := range []string{"/portal/deliveries/a-1/resend", "/portal/deliveries/a-1/retry", "/portal/webhooks/acme-orders/recover"} {
		if !refused[path] {
			t.Errorf("5 rounds back to back at action_rate 1: POST %s never refused with 429", path)
		}
	}
}
