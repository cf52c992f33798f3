package api_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/homingdev/homing/internal/engine/ratelimit"
	"github.com/homingdev/homing/internal/engine/tenant"
	"github.com/homingdev/homing/internal/ops/token"
	"github.com/homingdev/homing/internal/testing/testenv"
	"github.com/homingdev/homing/models"
)

// A tenant past its publish_rate is answered 429 with Retry-After and a
// message naming the limit and how to raise it; the events refused are not
// in the outbox, and a tenant without a limit is never refused.
func TestPublishRateIsPerTenant(t *testing.T) {
	t.Parallel()
	_, rdb := testenv.Redis(t)
	s := newServer(t, func(o *options) { o.publishLimiter = ratelimit.New(rdb) })
	ctx := context.Background()
	const limited = "slow" // the test's own Redis DB holds its budget
	for name, rate := range map[string]int{limited: 1, "free": 0} {
		if _, err := tenant.New(s.db, nil, nil).Create(ctx, name, tenant.Patch{PublishRate: &rate}); err != nil {
			t.Fatal(err)
		}
	}
	tok := func(ten string) string {
		_, plain, err := s.tokens.Create(ctx, ten+"-publish", token.ScopePublish, ten)
		if err != nil {
			t.Fatal(err)
		}
		return plain
	}
	slow, free := tok(limited), tok("free")
	event := func(i int) string {
		return fmt.Sprintf(`{"id":"ev-%d","doc_type":"Order","doc_name":"O-%d","event":"on_update","doc":{"name":"O-%d"}}`, i, i, i)
	}
	accepted, refused := 0, 0
	var first reply
	for i := range 50 {
		r := s.request("POST", "/v1/events", slow, event(i))
		switch r.status {
		case http.StatusAccepted:
			accepted++
		case http.StatusTooManyRequests:
			if refused == 0 {
				first = r
			}
			refused++
		default:
			t.Fatalf("event %d: %v", i, r)
		}
	}
	if refused == 0 || accepted == 0 {
		t.Fatalf("publish_rate 1: %d accepted, %d refused of 50 events sent back to back; want both", accepted, refused)
	}
	if ra, err := strconv.Atoi(first.header.Get("Retry-After")); err != nil || ra < 1 {
		t.Errorf("429 without a Retry-After of at least a second: %q", first.header.Get("Retry-After"))
	}
	msg, _ := first.object(t)["error"].(map[string]any)
	if msg["code"] != "rate_limited" || !strings.Contains(fmt.Sprint(msg["message"]), "homing tenant update "+limited+" --publish-rate N") {
		t.Errorf("429 body does not name the limit and how to raise it: %v", msg)
	}
	var stored int64
	if err := s.db.Model(&models.OutboxEvent{}).Where("tenant = ?", limited).Count(&stored).Error; err != nil {
		t.Fatal(err)
	}
	if stored != int64(accepted) {
		t.Errorf("outbox holds %d of the tenant's events; %d were accepted", stored, accepted)
	}
	for i := range 50 {
		s.expect(http.StatusAccepted, "POST", "/v1/events", free, event(100+i))
	}
}
