package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/homingdev/homing/internal/engine/ratelimit"
	"github.com/homingdev/homing/internal/engine/tenant"
	"github.com/homingdev/homing/internal/ops/api"
	"github.com/homingdev/homing/internal/ops/token"
	"github.com/homingdev/homing/internal/testing/testenv"
)

// tenantToken creates tenant name (with patch) and a token of scope in it.
func (s *server) tenantToken(name, scope string, patch tenant.Patch) string {
	s.t.Helper()
	ctx := context.Background()
	if _, err := tenant.New(s.db, nil, nil).Create(ctx, name, patch); err != nil && !strings.Contains(err.Error(), "exists") {
		s.t.Fatal(err)
	}
	_, plain, err := s.tokens.Create(ctx, name+"-"+scope, scope, name)
	if err != nil {
		s.t.Fatal(err)
	}
	return plain
}

func publishBody(id string) string {
	return `{"id": "` + id + `", "doc_type": "Sales Order", "doc_name": "SO-1", "event": "on_submit", "doc": {"name": "SO-1"}}`
}

// errorOf decodes the API error of a reply.
func errorOf(t *testing.T, r reply) apiErr {
	t.Helper()
	var e struct {
		Error *apiErr `json:"error"`
	}
	if err := json.Unmarshal(r.body, &e); err != nil || e.Error == nil {
		t.Fatalf("not an API error: %s", r)
	}
	return *e.Error
}

// One tenant's slow bodies hold at most its share of the intake budget
// (api.tenant_inflight_share, a quarter by default): tenant A opens four
// publishes whose bodies never end, each charged a quarter of the budget.
// The first holds A's share; the others are refused at once, 429
// tenant_share_full with Retry-After, their connections closed and nothing
// of them charged. Tenant B's publishes are accepted all the while.
func TestOneTenantsSlowBodiesDoNotRefuseAnother(t *testing.T) {
	t.Parallel()
	const maxBody = 64 << 10
	const charge = maxBody * api.IntakeMemoryFactor // a chunked body's
	s := newServer(t, func(o *options) { o.maxInflightBytes = 4 * charge })
	a := s.tenantToken("slow-a", token.ScopePublish, tenant.Patch{})
	b := s.tenantToken("fast-b", token.ScopePublish, tenant.Patch{})

	first, firstReply := s.openPublishAs(a, -1, publishBody("0190a1b2-0000-7000-8000-0000000000a1")[:10])
	testenv.Eventually(t, "tenant A's first held body charged", func() bool { return s.api.IntakeHeld() == charge })
	var others []<-chan answer
	for i := range 3 {
		_, reply := s.openPublishAs(a, -1, publishBody(fmt.Sprintf("0190a1b2-0000-7000-8000-0000000000b%d", i))[:10])
		others = append(others, reply)
	}
	// Each of A's other bodies is either answered or held; held, they
	// would fill the budget.
	var answers []answer
	testenv.Eventually(t, "tenant A's other three publishes answered or held", func() bool {
		for i, reply := range others {
			if reply == nil {
				continue
			}
			select {
			case got := <-reply:
				answers, others[i] = append(answers, got), nil
			default:
			}
		}
		return s.api.IntakeHeld()+int64(len(answers))*charge == 4*charge
	})

	for i := range 5 {
		if r := s.request("POST", "/v1/events", b, publishBody(fmt.Sprintf("0190a1b2-0000-7000-8000-0000000000c%d", i))); r.status != http.StatusAccepted {
			t.Fatalf("tenant B's publish %d while tenant A holds slow bodies: %s, want 202", i, r)
		}
	}
	if len(answers) != 3 {
		t.Fatalf("tenant A's bodies beyond its share: %d of 3 answered, the rest held (intake holds %d bytes)", len(answers), s.api.IntakeHeld())
	}
	for _, got := range answers {
		if got.status != http.StatusTooManyRequests || !got.closed || got.header.Get("Retry-After") == "" {
			t.Errorf("tenant A's body beyond its share: %s (closed %v, Retry-After %q), want 429 closing the connection, with Retry-After",
				got.reply, got.closed, got.header.Get("Retry-After"))
			continue
		}
		if e := errorOf(t, got.reply); e.Code != api.CodeTenantShareFull || !strings.Contains(e.Message, "api.tenant_inflight_share") || !strings.Contains(e.Message, `"slow-a"`) {
			t.Errorf("tenant A's refusal: %+v, want code %s naming the tenant and api.tenant_inflight_share", e, api.CodeTenantShareFull)
		}
	}
	if held := s.api.IntakeHeld(); held != charge {
		t.Errorf("intake holds %d bytes after A's refusals, want %d (A's one held body): a refusal is charged to no one", held, charge)
	}

	if _, err := first.Write([]byte(publishBody("0190a1b2-0000-7000-8000-0000000000a1")[10:])); err != nil {
		t.Fatal(err)
	}
	_ = first.Close()
	if r := <-firstReply; r.status != http.StatusAccepted {
		t.Fatalf("tenant A's held publish: %s, want 202", r.reply)
	}
}

// A request is authenticated before it is charged: while the intake
// budget is full, a request with a token that is not valid is answered
// 401, not 503, and its body is never read.
func TestRequestsAreAuthenticatedBeforeTheirBodyIsCharged(t *testing.T) {
	t.Parallel()
	const maxBody = 64 << 10
	s := newServer(t, func(o *options) { o.maxInflightBytes = maxBody * api.IntakeMemoryFactor })
	s.openPublishAs(s.admin, -1, `{"id"`) // an operator's request holds the whole budget
	testenv.Eventually(t, "the held request's charge", func() bool { return s.api.IntakeHeld() == maxBody*api.IntakeMemoryFactor })

	_, reply := s.openPublishAs("not-a-token", maxBody, `{"id"`)
	got := <-reply
	if got.status != http.StatusUnauthorized || errorOf(t, got.reply).Code != api.CodeUnauthorized {
		t.Errorf("a bad token while the budget is full: %s, want 401 unauthorized", got.reply)
	}
	if r := s.request("POST", "/v1/events", s.publish, publishBody("0190a1b2-0000-7000-8000-0000000000d1")); r.status != http.StatusServiceUnavailable {
		t.Errorf("a valid publish while the budget is full: %s, want 503 (the budget still bounds everyone)", r)
	}
}

// publish_rate is checked before the body is read: a publish past its
// tenant's rate is answered 429 while its body is still open, closing the
// connection, and is charged nothing once answered.
func TestPublishRateIsCheckedBeforeTheBody(t *testing.T) {
	t.Parallel()
	_, rdb := testenv.Redis(t)
	s := newServer(t, func(o *options) { o.publishLimiter = ratelimit.New(rdb) })
	one := 1
	tok := s.tenantToken("limited", token.ScopePublish, tenant.Patch{PublishRate: &one})
	var last reply
	for i := range 20 { // spend the second's budget (a burst of one)
		if last = s.request("POST", "/v1/events", tok, publishBody(fmt.Sprintf("0190a1b2-0000-7000-8000-0000000000e%d", i))); last.status == http.StatusTooManyRequests {
			break
		}
	}
	if last.status != http.StatusTooManyRequests {
		t.Fatalf("20 publishes at publish_rate 1: the last %s, want 429", last)
	}
	// No timer here: a server that read the body before the rate would
	// hang this test until go test's -timeout, which names it.
	_, reply := s.openPublishAs(tok, -1, `{"id"`)
	got := <-reply
	if got.status != http.StatusTooManyRequests || !got.closed || errorOf(t, got.reply).Code != api.CodeRateLimited {
		t.Errorf("a publish past publish_rate with its body open: %s (closed %v), want 429 rate_limited closing the connection", got.reply, got.closed)
	}
	testenv.Eventually(t, "the refused publish's charge given back", func() bool { return s.api.IntakeHeld() == 0 })
}
