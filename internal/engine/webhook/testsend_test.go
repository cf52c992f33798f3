package webhook_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/homingdev/homing/internal/engine/delivery/send"
	"github.com/homingdev/homing/internal/engine/ratelimit"
	"github.com/homingdev/homing/internal/engine/signing"
	"github.com/homingdev/homing/internal/engine/webhook"
	"github.com/homingdev/homing/internal/lib/clock"
	"github.com/homingdev/homing/internal/testing/testenv"
	"github.com/homingdev/homing/internal/testing/testreceiver"
	"github.com/homingdev/homing/models"
)

// testSite is a webhook service on its own PostgreSQL database with a key
// for secrets, sending test requests through an unguarded sender (the
// receivers are on loopback).
func testSite(t *testing.T, clk clock.Clock) (*webhook.Service, *testreceiver.Receiver, *gorm.DB) {
	t.Helper()
	db := testenv.Postgres(t)
	svc := webhook.New(db, testenv.SecretBox(t), clk, webhook.Defaults{MaxRetries: 3, Timeout: time.Second, UserAgent: "Homing/test"}, nil)
	sender := send.NewSender(send.SenderConfig{})
	t.Cleanup(sender.Close)
	svc.SetSender(sender, nil)
	return svc, testreceiver.New(t), db
}

// A test send reaches the receiver once with the body a delivery would
// carry, the sealed header opened, and signatures that verify with the new
// secret and with the one rotated out (in its grace); the result shows the
// answer, masks the credential, and no delivery row is written.
func TestTestSendSignsAndSendsOnce(t *testing.T) {
	t.Parallel()
	svc, rc, db := testSite(t, nil)
	ctx := context.Background()
	old, err := signing.GenerateSecret()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Create(ctx, "", webhook.Input{Name: ptr("orders"), DocType: ptr("Sales Order"), Event: ptr("on_submit"),
		URL: ptr(rc.URL + "/hook"), Template: ptr(`{"order": "{{ doc.name }}", "total": {{ doc.grand_total }}}`),
		Headers: &[]string{"Authorization: Bearer s3cret", "X-Shop: acme"}, Secret: ptr(string(old))}); err != nil {
		t.Fatal(err)
	}
	current, err := signing.GenerateSecret()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.RotateSecret(ctx, "", "orders", string(current), time.Hour); err != nil {
		t.Fatal(err)
	}
	res, err := svc.TestSend(ctx, "", "orders", map[string]any{"name": "SO-1", "grand_total": 1500})
	if err != nil {
		t.Fatal(err)
	}
	reqs := rc.Requests()
	if len(reqs) != 1 {
		t.Fatalf("the receiver got %d requests, want 1", len(reqs))
	}
	got := reqs[0]
	if want := `{"order": "SO-1", "total": 1500}`; string(got.Body) != want || got.Method != "POST" || got.Path != "/hook" {
		t.Errorf("receiver got %s %s %q, want POST /hook %q", got.Method, got.Path, got.Body, want)
	}
	if got.Header.Get("Authorization") != "Bearer s3cret" || got.Header.Get("X-Shop") != "acme" || got.Header.Get("Content-Type") != "application/json" {
		t.Errorf("receiver's headers: %v", got.Header)
	}
	if id := got.Header.Get(signing.HeaderID); !strings.HasPrefix(id, "test_") {
		t.Errorf("webhook-id %q, want a test_ message ID", id)
	}
	for name, s := range map[string]signing.Secret{"current": current, "rotated out": old} {
		if err := signing.Verify(s, got.Header, got.Body, 5*time.Minute); err != nil {
			t.Errorf("the %s secret does not verify the request: %v", name, err)
		}
	}
	if got.Header.Get(signing.HeaderFrappe) != signing.Frappe(current, got.Body) {
		t.Errorf("Frappe signature %q is not the current secret's", got.Header.Get(signing.HeaderFrappe))
	}
	if !res.Sent || !res.OK || res.StatusCode != http.StatusOK || res.Response != `{"receipt":1}` || res.Class != "2xx" {
		t.Errorf("result %+v, want sent, 200 and the receiver's answer", res)
	}
	if res.Headers["Authorization"] != send.Masked || res.Headers["X-Shop"] != "acme" || res.Headers["Webhook-Signature"] == "" || res.Body != string(got.Body) {
		t.Errorf("result's request: headers %v body %q; want the credential masked, the rest as sent", res.Headers, res.Body)
	}
	var n int64
	if err := db.Model(&models.Delivery{}).Count(&n).Error; err != nil || n != 0 {
		t.Errorf("deliveries after a test send: %d (%v), want none", n, err)
	}
}

// A test send whose condition does not hold, or whose body cannot be
// built, sends nothing and says why.
func TestTestSendSendsNothingItCannotBuild(t *testing.T) {
	t.Parallel()
	svc, rc, _ := testSite(t, nil)
	ctx := context.Background()
	if _, err := svc.Create(ctx, "", webhook.Input{Name: ptr("big"), DocType: ptr("Sales Order"), Event: ptr("on_submit"),
		URL: ptr(rc.URL), Condition: ptr("doc.grand_total > 1000")}); err != nil {
		t.Fatal(err)
	}
	res, err := svc.TestSend(ctx, "", "big", map[string]any{"grand_total": 10})
	if err != nil || res.Sent || !strings.Contains(res.Error, "condition does not hold") {
		t.Errorf("condition false: %+v, %v; want not sent, saying why", res, err)
	}
	if _, err := svc.TestSend(ctx, "", "missing", nil); !errors.Is(err, webhook.ErrNotFound) {
		t.Errorf("unknown webhook: %v", err)
	}
	if rc.Count() != 0 {
		t.Errorf("the receiver got %d requests, want none", rc.Count())
	}
}

// With private networks not allowed, a test send to a loopback receiver is
// refused: by the service's check before any traffic, and by the sender's
// dial guard when only that guards; the receiver gets nothing.
func TestTestSendRefusesPrivateAddresses(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	box := testenv.SecretBox(t)
	rc := testreceiver.New(t)
	open := webhook.New(db, box, nil, webhook.Defaults{Timeout: time.Second}, nil)
	if _, err := open.Create(context.Background(), "", webhook.Input{Name: ptr("local"), DocType: ptr("D"), Event: ptr("on_update"), URL: ptr(rc.URL)}); err != nil {
		t.Fatal(err)
	}
	guard := send.NewGuard(nil)
	sender := send.NewSender(send.SenderConfig{DialControl: guard.Control})
	t.Cleanup(sender.Close)
	for name, defaults := range map[string]webhook.Defaults{
		"checked before sending": {Guard: guard},
		"refused at dial time":   {},
	} {
		svc := webhook.New(db, box, nil, defaults, nil)
		svc.SetSender(sender, nil)
		res, err := svc.TestSend(context.Background(), "", "local", nil)
		if err != nil || res.Sent || res.OK || res.Class != string(send.ClassInvalid) || !strings.Contains(res.Error, "not allowed") || !strings.Contains(res.Error, "allow_private_networks") {
			t.Errorf("%s: %+v, %v; want a refusal naming delivery.allow_private_networks", name, res, err)
		}
	}
	if rc.Count() != 0 {
		t.Errorf("the receiver got %d requests, want none", rc.Count())
	}
}

// A webhook takes one test send a second: in this process without Redis
// (on the injected clock), and across processes with the Redis limiter.
func TestTestSendIsLimitedToOneASecond(t *testing.T) {
	t.Parallel()
	clk := clock.NewStub(time.Now())
	svc, rc, db := testSite(t, clk)
	ctx := context.Background()
	if _, err := svc.Create(ctx, "", webhook.Input{Name: ptr("w"), DocType: ptr("D"), Event: ptr("on_update"), URL: ptr(rc.URL)}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.TestSend(ctx, "", "w", nil); err != nil {
		t.Fatal(err)
	}
	clk.Advance(500 * time.Millisecond)
	_, err := svc.TestSend(ctx, "", "w", nil)
	var re *webhook.RateError
	if !errors.As(err, &re) || !errors.Is(err, webhook.ErrTestRate) || re.RetryAfter != 500*time.Millisecond {
		t.Fatalf("second send within the second: %v, want a RateError of 500ms", err)
	}
	clk.Advance(500 * time.Millisecond)
	if _, err := svc.TestSend(ctx, "", "w", nil); err != nil {
		t.Fatalf("a second later: %v", err)
	}
	if rc.Count() != 2 {
		t.Errorf("the receiver got %d requests, want 2", rc.Count())
	}

	_, rdb := testenv.Redis(t)
	shared := ratelimit.New(rdb)
	sender := send.NewSender(send.SenderConfig{})
	t.Cleanup(sender.Close)
	a, b := webhook.New(db, testenv.SecretBox(t), nil, webhook.Defaults{}, nil), webhook.New(db, testenv.SecretBox(t), nil, webhook.Defaults{}, nil)
	a.SetSender(sender, shared)
	b.SetSender(sender, shared)
	if _, err := a.TestSend(ctx, "", "w", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := b.TestSend(ctx, "", "w", nil); !errors.Is(err, webhook.ErrTestRate) {
		t.Errorf("another process's send within the second: %v, want ErrTestRate", err)
	}
	if rc.Count() != 3 {
		t.Errorf("the receiver got %d requests, want 3", rc.Count())
	}
}
