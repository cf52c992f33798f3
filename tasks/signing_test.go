package tasks_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/homingdev/homing/internal/engine/secretbox"
	"github.com/homingdev/homing/internal/engine/signing"
	"github.com/homingdev/homing/internal/engine/webhook"
	"github.com/homingdev/homing/internal/testing/testreceiver"
	"github.com/homingdev/homing/models"
)

// verifyStandard checks a request as an independent receiver would: the
// standard-webhooks reference library for the signature, and the timestamp
// against the (stubbed) time of the attempt.
func verifyStandard(t *testing.T, secret string, r testreceiver.Request, at time.Time) error {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	if err := wh.VerifyIgnoringTimestamp(r.Body, r.Header); err != nil {
		return err
	}
	if got, want := r.Header.Get("Webhook-Timestamp"), strconv.FormatInt(at.Unix(), 10); got != want {
		return errors.New("webhook-timestamp " + got + " is not the attempt's time " + want)
	}
	return signing.VerifyAt(signing.Secret(secret), r.Header, r.Body, 5*time.Minute, at)
}

func TestStandardWebhooksSignatureOnFirstAttemptAndRetry(t *testing.T) {
	t.Parallel()
	h := newHarness(t, pg)
	recv := testreceiver.New(t)
	recv.SetStatus(http.StatusServiceUnavailable)
	secret, err := signing.GenerateSecret()
	if err != nil {
		t.Fatal(err)
	}
	h.createWebhook("orders", recv.URL, func(in *webhook.Input) { in.Secret = ptr(string(secret)) })
	first := h.clock.Now()
	id := h.publish(salesOrder("ev-std"))
	h.waitAttempts(id, 1)
	recv.SetStatus(http.StatusOK)
	h.sweep(5 * time.Minute)
	retryAt := h.clock.Now()
	d := h.waitAttempts(id, 2)
	if d.Status != models.StatusDelivered {
		t.Fatalf("status %s", d.Status)
	}
	reqs := recv.Requests()
	for i, at := range []time.Time{first, retryAt} {
		if err := verifyStandard(t, string(secret), reqs[i], at); err != nil {
			t.Errorf("attempt %d does not verify: %v", i+1, err)
		}
		// Both schemes by default: a Frappe receiver verifies too.
		if got := reqs[i].Header.Get("X-Frappe-Webhook-Signature"); got != frappeSignature(string(secret), reqs[i].Body) {
			t.Errorf("attempt %d Frappe signature %q", i+1, got)
		}
	}
	// The retry was signed afresh: replaying attempt 1's signature hours later
	// would be refused by receivers that check the timestamp.
	if reqs[0].Header.Get("Webhook-Signature") == reqs[1].Header.Get("Webhook-Signature") {
		t.Error("the retry reused the first attempt's signature")
	}
}

func TestSignatureSchemeStandardOnly(t *testing.T) {
	t.Parallel()
	h := newHarness(t, sqlite)
	recv := testreceiver.New(t)
	h.createWebhook("orders", recv.URL, func(in *webhook.Input) {
		in.Secret = ptr("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
		in.Signature = ptr(signing.SchemeStandard)
	})
	id := h.publish(salesOrder("ev-std-only"))
	h.waitAttempts(id, 1)
	r := recv.Requests()[0]
	if r.Header.Get("X-Frappe-Webhook-Signature") != "" || r.Header.Get("Webhook-Signature") == "" {
		t.Fatalf("headers %v", r.Header)
	}
}

func TestRotationOverlapThenOnlyTheNewSecret(t *testing.T) {
	t.Parallel()
	h := newHarness(t, pg)
	recv := testreceiver.New(t)
	oldSecret, _ := signing.GenerateSecret()
	newSecret, _ := signing.GenerateSecret()
	h.createWebhook("orders", recv.URL, func(in *webhook.Input) { in.Secret = ptr(string(oldSecret)) })
	if _, err := h.hooks.RotateSecret(context.Background(), "", "orders", string(newSecret), 24*time.Hour); err != nil {
		t.Fatal(err)
	}
	at := h.clock.Now()
	id := h.publish(salesOrder("ev-rot-1"))
	h.waitAttempts(id, 1)
	during := recv.Requests()[0]
	for name, s := range map[string]signing.Secret{"old": oldSecret, "new": newSecret} {
		if err := verifyStandard(t, string(s), during, at); err != nil {
			t.Errorf("during the grace period a receiver holding only the %s secret fails: %v", name, err)
		}
	}
	if n := len(strings.Fields(during.Header.Get("Webhook-Signature"))); n != 2 {
		t.Errorf("%d signatures during the overlap, want 2", n)
	}
	h.clock.Advance(24*time.Hour + time.Second)
	at = h.clock.Now()
	id = h.publish(salesOrder("ev-rot-2"))
	h.waitAttempts(id, 1)
	after := recv.Requests()[1]
	if err := verifyStandard(t, string(newSecret), after, at); err != nil {
		t.Errorf("after the grace period the new secret fails: %v", err)
	}
	if err := verifyStandard(t, string(oldSecret), after, at); err == nil {
		t.Error("after the grace period the old secret still verifies")
	}
	if got := after.Header.Get("X-Frappe-Webhook-Signature"); got != frappeSignature(string(newSecret), after.Body) {
		t.Errorf("Frappe signature uses the current secret: %q", got)
	}
}

func TestSecretsAreSealedAndNeverLogged(t *testing.T) {
	t.Parallel()
	var logs logBuffer
	h := newHarness(t, pg)
	// A debug-level logger on everything the lifecycle touches.
	dbg := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h.hooks = webhook.New(h.db, h.app.Box, h.clock, webhook.Defaults{MaxRetries: 3, Timeout: 2 * time.Second}, dbg)
	recv := testreceiver.New(t)
	recv.SetStatus(http.StatusInternalServerError)
	const secret = "a-very-recognisable-secret-value"
	h.createWebhook("orders", recv.URL, func(in *webhook.Input) { in.Secret = ptr(secret) })
	id := h.publish(salesOrder("ev-nolog"))
	h.waitAttempts(id, 1)
	recv.SetStatus(http.StatusOK)
	h.sweep(5 * time.Minute)
	h.waitAttempts(id, 2)
	var stored models.Webhook
	h.db.Where("name = ?", "orders").Take(&stored)
	if strings.Contains(stored.Secret, secret) || !strings.HasPrefix(stored.Secret, "v1:") {
		t.Fatalf("secret is not sealed at rest: %q", stored.Secret)
	}
	var d models.Delivery
	h.db.Where("event_id = ?", id).Take(&d)
	for _, s := range []string{logs.String(), h.logs.String(), string(d.Payload), d.Headers["X-Frappe-Webhook-Signature"]} {
		if strings.Contains(s, secret) {
			t.Fatalf("secret leaked: %s", s)
		}
	}
	// Without secrets.key Homing refuses to store a secret and says how.
	noKey, _ := secretbox.New("")
	svc := webhook.New(h.db, noKey, h.clock, webhook.Defaults{MaxRetries: 3, Timeout: time.Second}, nil)
	_, err := svc.Create(context.Background(), "", webhook.Input{Name: ptr("x"), DocType: ptr("D"), Event: ptr("on_update"), URL: ptr("http://127.0.0.1:1"), Secret: ptr(secret)})
	if !errors.Is(err, secretbox.ErrNoKey) || !strings.Contains(err.Error(), "homing secrets genkey") || strings.Contains(err.Error(), secret) {
		t.Fatalf("create without a key: %v", err)
	}
}
