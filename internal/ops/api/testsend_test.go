package api_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/homingdev/homing/internal/engine/signing"
	"github.com/homingdev/homing/internal/lib/clock"
	"github.com/homingdev/homing/internal/testing/testreceiver"
)

// POST /v1/webhooks/{name}/test sends the rendered request once to the
// receiver, signed, and answers with what the receiver said; a second
// within the second (the webhook service's clock stands still) is 429 with
// Retry-After 1, and the receiver got one.
func TestTestSendRoute(t *testing.T) {
	t.Parallel()
	s := newServer(t, func(o *options) { o.webhookClock = clock.NewStub(time.Now()) })
	rc := testreceiver.New(t)
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	s.expect(http.StatusCreated, "POST", "/v1/webhooks", s.admin, fmt.Sprintf(`{"name": "orders", "doctype": "Sales Order", "event": "on_submit",
		"url": %q, "template": "{\"order\": \"{{ doc.name }}\"}", "secret": %q}`, rc.URL+"/in", secret))
	res := s.expect(http.StatusOK, "POST", "/v1/webhooks/orders/test", s.admin, `{"doc": {"name": "SO-7"}}`).object(t)
	if res["sent"] != true || res["ok"] != true || res["status_code"] != float64(200) || res["response"] != `{"receipt":1}` || res["body"] != `{"order": "SO-7"}` {
		t.Errorf("test send answered %v", res)
	}
	reqs := rc.Requests()
	if len(reqs) != 1 || string(reqs[0].Body) != `{"order": "SO-7"}` || signing.Verify(secret, reqs[0].Header, reqs[0].Body, 0) != nil {
		t.Fatalf("the receiver got %+v", reqs)
	}
	r := s.expect(http.StatusTooManyRequests, "POST", "/v1/webhooks/orders/test", s.admin, `{"doc": {"name": "SO-7"}}`)
	if r.header.Get("Retry-After") != "1" || rc.Count() != 1 {
		t.Errorf("second test send: Retry-After %q, receiver got %d", r.header.Get("Retry-After"), rc.Count())
	}
	s.refused(http.StatusNotFound, "not_found", "", "POST", "/v1/webhooks/nope/test", s.admin, `{}`)
}
